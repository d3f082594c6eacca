"""Whether the stowage package a benchmark compiles with is this checkout's code.

A build tree's package (build/python) holds copies of the kernel sources and, in its
extension, the target files, as of its last build: exported after an edit of
src/backend/kernels or src/bytecode/targets without a rebuild, a benchmark's files
would carry the old kernels while its figures are read as the checkout's. The
exporting benchmarks refuse to start then.
"""

import filecmp
import json
import os


def stale_parts(repo, target):
    """The kernel sources and target settings in which the imported package differs
    from the checkout at `repo` (empty where they match or `repo` is no checkout)."""
    from stowage.ops import core, units

    source = os.path.join(repo, "src", "backend", "kernels")
    if not os.path.isdir(source):
        return []
    stale = []
    used = units.kernel_dir()
    if os.path.realpath(used) != os.path.realpath(source):
        for name in sorted(os.listdir(source)):
            if name.endswith(".cl"):
                copy = os.path.join(used, name)
                if not os.path.isfile(copy) or not filecmp.cmp(copy, os.path.join(source, name), shallow=False):
                    stale.append(name)
    target_file = os.path.join(repo, "src", "bytecode", "targets", f"{target}.json")
    if os.path.isfile(target_file):
        with open(target_file) as f:
            if json.load(f).get("kernels", {}) != core.target_facts(target).get("kernels", {}):
                stale.append(f"{target}.json's kernel settings")
    return stale


def refuse_stale(repo, target):
    """Raises SystemExit naming what differs, unless the package matches the checkout."""
    import stowage

    stale = stale_parts(repo, target)
    if stale:
        raise SystemExit(f"the stowage package in use ({os.path.dirname(stowage.__file__)}) differs from this "
                         f"checkout in {', '.join(stale)}: rebuild it (ninja -C build, or pip install .) so that "
                         f"what is compiled here carries the checkout's kernels")
