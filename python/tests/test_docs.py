"""Every code block of the README files and docs/ marked runnable runs, so that they stay true.

A block is marked by the line `<!-- runnable -->` just before its fence (GitHub shows
nothing of it); its info string says how it runs: `python` in a child interpreter (this
one, the package under test importable), `sh` with bash -e. Each runs in a fresh temporary
folder holding links to the repository's top-level folders (so `examples/...` reads the
checkout and whatever a block writes stays there), with a `bin` folder first on PATH:
`python3` and `python` are this interpreter, `stowage-import` is this package's.
`build/src/stowc` and `build/src/vm-run` (in that folder, and on PATH as `stowc` and
`vm-run`) are the tools found as STOWAGE_STOWC / STOWAGE_VM_RUN say, else in the
checkout's build/src, else on PATH; a shell block that calls a tool not found is skipped
with the reason. A python block that fails only for an optional module not installed
(matplotlib, torch) is skipped too.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import stowage

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "python" / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
MARKER = "<!-- runnable -->"
LANGUAGES = {"python": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
TOOLS = {"stowc": "STOWAGE_STOWC", "vm-run": "STOWAGE_VM_RUN"}
OPTIONAL_MODULES = ("matplotlib", "torch", "torchvision")
TIMEOUT_S = 300  # a cold kernel cache makes PoCL build every unit a block launches


def runnable_blocks(path):
    """(line of the fence, language, code) of each marked block of a Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = lines[i + 1] if i + 1 < len(lines) else ""
        m = re.fullmatch(r"```\s*(\S*).*", fence)
        if m is None or m.group(1) not in LANGUAGES:
            raise ValueError(f"{path.relative_to(ROOT)}:{i + 1}: the marker must precede a ```python or ```sh fence")
        try:
            end = lines.index("```", i + 2)
        except ValueError:
            raise ValueError(f"{path.relative_to(ROOT)}:{i + 2}: the block is never closed") from None
        blocks.append((i + 2, LANGUAGES[m.group(1)], "\n".join(lines[i + 2:end]) + "\n"))
    return blocks


CASES = [(path, line, language, code) for path in DOCS for line, language, code in runnable_blocks(path)]


def find_tool(name):
    """A tool's path: its environment variable, the checkout's build/src, or PATH; None if none."""
    named = os.environ.get(TOOLS[name])
    if named:
        return named if os.path.isfile(named) else None
    built = ROOT / "build" / "src" / name
    if built.is_file():
        return str(built)
    return shutil.which(name)


def workspace(tmp_path):
    """The folder a block runs in, and its environment."""
    for entry in ROOT.iterdir():
        if entry.name == "examples":  # blocks write beside the examples (stowc's default output): a copy
            shutil.copytree(entry, tmp_path / entry.name)
        elif not entry.name.startswith(".") and not entry.name.startswith("build"):
            (tmp_path / entry.name).symlink_to(entry)
    bin_dir = tmp_path / "bin"
    tools = tmp_path / "build" / "src"
    bin_dir.mkdir()
    tools.mkdir(parents=True)
    for name in ("python3", "python"):
        (bin_dir / name).symlink_to(sys.executable)
    wrapper = bin_dir / "stowage-import"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m stowage.frontend.cli "$@"\n')
    wrapper.chmod(0o755)
    for name in TOOLS:
        found = find_tool(name)
        if found:
            (tools / name).symlink_to(os.path.abspath(found))
            (bin_dir / name).symlink_to(os.path.abspath(found))
    package_parent = str(pathlib.Path(stowage.__file__).resolve().parents[1])
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH", "")) if p))
    return env


def test_the_docs_mark_blocks_to_run():
    """The markers have not all gone: each README keeps its runnable blocks."""
    count = {path.name: 0 for path in DOCS[:2]}
    for path, _, _, _ in CASES:
        if path in DOCS[:2]:
            count[path.name] += 1
    assert all(n >= 1 for n in count.values()), count
    assert len(CASES) >= 5, [f"{p.relative_to(ROOT)}:{line}" for p, line, _, _ in CASES]


@pytest.mark.parametrize("path, line, language, code", CASES,
                         ids=[f"{p.relative_to(ROOT)}:{line}" for p, line, _, _ in CASES])
def test_a_runnable_block_runs(path, line, language, code, tmp_path):
    env = workspace(tmp_path)
    if language == "sh":
        for name in TOOLS:
            if re.search(rf"(^|[\s/]){re.escape(name)}\b", code) and find_tool(name) is None:
                pytest.skip(f"{name} not found ({TOOLS[name]}, build/src/{name} or PATH)")
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code]
    else:
        cmd = [sys.executable, "-c", code]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0 and language == "python":
        missing = re.search(r"ModuleNotFoundError: No module named '([A-Za-z0-9_]+)", done.stderr)
        if missing and missing.group(1) in OPTIONAL_MODULES:
            pytest.skip(f"{missing.group(1)} is not installed")
    assert done.returncode == 0, (f"{path.relative_to(ROOT)}:{line}: exit status {done.returncode}\n"
                                  f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}")
