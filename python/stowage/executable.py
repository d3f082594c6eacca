"""Compiling modules to executables, saving and loading them, and their memory."""

import os

from . import _stowage
from .errors import InvalidInputError

REPORT_KEYS = ("planned_bytes", "lower_bound", "naive_bytes", "reuse_only_bytes", "seconds")
PLANNED_KEYS = ("tensors", "spilled", "spilled_bytes", "discontiguous", "blocks")


def _most_alive(storages):
    """The most tensor bytes of ``storages`` (memory_layout's) alive at one moment; a
    tensor lives over [start, end)."""
    events = sorted((t[key], sign * t["nbytes"]) for s in storages for t in s["tensors"]
                    for key, sign in (("start", 1), ("end", -1)))
    alive = most = 0
    for _, change in events:  # at one step, ends (negative) sort before starts
        alive += change
        most = max(most, alive)
    return most


class Executable:
    """A compiled program: bytecode for the VM, its kernels and requirements."""

    def __init__(self, handle):
        self._handle = handle

    @classmethod
    def from_bytes(cls, data):
        """Reads a bytecode image (validated whole, like :func:`load`)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidInputError(f"from_bytes: expected bytes, got {type(data).__name__}")
        return cls(_stowage.from_bytes(bytes(data)))

    def to_bytes(self):
        """The bytecode file's contents."""
        return self._handle.to_bytes()

    def save(self, path):
        """Writes the bytecode file (checked to load back before it is written).
        ``path`` is a str, bytes or os.PathLike."""
        self._handle.save(path)

    @property
    def text(self):
        """The IR as compiled (storage level), in the text form; "" for a file
        saved without its debug section."""
        return self._handle.text

    @property
    def module(self):
        """The IR module as compiled (read back from the file's debug section
        when the executable was loaded)."""
        return self._handle.module

    @property
    def functions(self):
        """Each function's name, parameters and result, as dicts: ``name``,
        ``params`` (a list) and ``result``, each value a dict with ``name`` and
        ``kind`` ("Tensor", "int", "float", "bool", "Object" or "Tuple"), tensors
        with ``shape`` and ``dtype``; a tuple result has ``fields``, a list of its
        tensors' dicts (named as the IR returned them)."""
        return self._handle.functions

    def entry_function(self):
        """"main" when there is one, else the first function."""
        names = [f["name"] for f in self.functions]
        if not names:
            raise InvalidInputError("the executable has no function")
        return "main" if "main" in names else names[0]

    def memory_layout(self, function=None):
        """Where every tensor of ``function`` (default: :meth:`entry_function`)
        lives over time, as the compiler placed it (carried in the file, so a
        loaded executable has it too): a dict with ``function``, ``steps`` (the
        binding count; time runs over binding indices) and ``scopes``, a list with
        per scope its ``storages`` (``name``, ``nbytes``, ``start``, ``end`` and
        ``tensors``: ``name``, ``offset``, ``nbytes``, ``start``, ``end``; a tensor
        lives over [start, end)), ``storage_bytes``, ``tensor_bytes`` and
        ``lower_bound`` (the most tensor bytes alive at one moment). Image
        storages also have ``width`` and ``height`` (pixels) and their tensors
        ``x``, ``y``, ``width`` and ``height``: the rectangle they cover, read
        from the IR text (absent from a file saved without it); ``nbytes``
        counts pixel bytes."""
        return self._handle.memory_layout(function or self.entry_function())

    @property
    def memory_report(self):
        """Per memory scope of the entry function, a dict:

        - ``planned_bytes``: the bytes of its storages (sum of alloc_storage sizes);
        - ``lower_bound``: the most tensor bytes alive at one moment, which no
          placement can go below;
        - ``naive_bytes``: every tensor its own storage;
        - ``reuse_only_bytes``: storage reuse without offset packing, and
          ``seconds``: the planning time.

        For scopes the planner placed, the figures are the planner's (the
        returned tensor's own storage is not counted; image scopes count their
        pixels' bytes) with ``tensors`` and ``spilled``, ``spilled_bytes``,
        ``discontiguous`` (tensors with blocks here) and ``blocks`` added. The file
        carries them (its memory plan section), so a saved and loaded executable
        reports exactly what the compiled one did. Otherwise (programs placed by
        hand, or a file written without that section) they are those of
        :meth:`memory_layout`, over every storage of the scope, and
        ``reuse_only_bytes`` and ``seconds`` are None; so too for a scope placed by
        hand in a function whose other scopes the planner placed, over its storages
        but the returned tensors' own. Both count the lower bound the same way,
        over the tensors of the storages they count.

        Image scopes the planner placed also have ``images`` (the scope's image
        storages, the returned tensors' own left out) and ``planned_pixels`` (their
        pixels), when the IR text is at hand (see :meth:`memory_layout`).

        Every scope also has ``constant_bytes``: the storages of its constants
        (weights), made once per VM and not part of the figures above. A scope that
        holds only constants has its activation figures at 0.
        """
        entry = self.entry_function()
        planned = [r for r in self._handle.planner_report if r["function"] == entry]
        report = {r["scope"]: {key: r[key] for key in REPORT_KEYS + PLANNED_KEYS} for r in planned}
        if planned:  # scopes placed by hand beside them, as the planner counts: not the results' own storages
            result = next(f["result"] for f in self.functions if f["name"] == entry)
            returned = {field["name"] for field in result.get("fields", [result])}
        else:
            returned = set()
        for scope in self.memory_layout()["scopes"]:
            storages = [s for s in scope["storages"] if not any(t["name"] in returned for t in s["tensors"])]
            if scope["scope"] in report:
                if storages and all("width" in s for s in storages):
                    report[scope["scope"]]["images"] = len(storages)
                    report[scope["scope"]]["planned_pixels"] = sum(s["width"] * s["height"] for s in storages)
                continue
            if not storages:
                continue
            same = len(storages) == len(scope["storages"])
            report[scope["scope"]] = {
                "planned_bytes": sum(s["nbytes"] for s in storages),
                "lower_bound": scope["lower_bound"] if same else _most_alive(storages),
                "naive_bytes": sum(t["nbytes"] for s in storages for t in s["tensors"]),
                "reuse_only_bytes": None,
                "seconds": None,
            }
        constants = self._handle.constant_bytes
        for scope, figures in report.items():
            figures["constant_bytes"] = constants.get(scope, 0)
        for scope, nbytes in constants.items():
            if scope not in report:
                report[scope] = {"planned_bytes": 0, "lower_bound": 0, "naive_bytes": 0, "reuse_only_bytes": 0,
                                 "seconds": 0.0, "constant_bytes": nbytes}
        return report

    def __repr__(self):
        names = ", ".join(f["name"] for f in self.functions)
        return f"<stowage.Executable functions=[{names}]>"


def default_target(device=None):
    """The shipped target for the device a :class:`VirtualMachine` would take:
    ``"opencl-gpu"`` for a GPU (unless it reports no coarse-grained shared virtual
    memory, which that target's tensor offsets need), else ``"opencl"``.
    ``device`` is what ``VirtualMachine(device=...)`` takes: None (the
    STOWAGE_DEVICE environment variable, else the first GPU, else the first
    device), "opencl:N", "gpu", "cpu" or part of a device or platform name. With
    no OpenCL device at all (a machine that only compiles) it is ``"opencl"``.
    :func:`compile`, :func:`from_onnx` and ``stowage-import`` take it when no
    target is named; the module records the one taken (``Module.target``)."""
    if device is not None and not isinstance(device, str):
        raise InvalidInputError(f"default_target: argument 'device': expected a str, got {type(device).__name__}")
    found = _stowage.devices()
    chosen = _device_like_the_vm(found, device or os.environ.get("STOWAGE_DEVICE", ""))
    if chosen is None or chosen["type"] != "gpu" or not chosen.get("svm", True):
        return "opencl"
    return "opencl-gpu"


def _device_like_the_vm(found, spec):
    """The device of ``found`` that ``spec`` names, chosen as the VM chooses
    (leaving out what an executable requires); None when there is none at all."""
    if not found:
        return None
    if spec in ("", "any"):
        return next((d for d in found if d["type"] == "gpu"), found[0])
    if spec.startswith("opencl:"):
        index = spec[len("opencl:"):]
        if index.isdigit() and int(index) < len(found):
            return found[int(index)]
        raise InvalidInputError(f"device '{spec}' does not exist: there are {len(found)} OpenCL devices "
                                f"(opencl:0 to opencl:{len(found) - 1})")
    needle = spec.lower()
    for d in found:
        if ((needle == "gpu" and d["type"] == "gpu") or (needle == "cpu" and d["type"] == "cpu")
                or needle in d["name"].lower() or needle in d["platform"].lower()):
            return d
    names = ", ".join(f"{d['spec']} {d['name']}" for d in found)
    raise InvalidInputError(f"no OpenCL device matches '{spec}' (devices: {names})")


def compile(module, target=None):  # noqa: A001 (the public API's name)
    """Compiles a module (or its text form) for ``target``, a shipped target
    name (``"opencl"``) or a target JSON file: reads the kernels, verifies,
    plans where needed and generates bytecode. ``target=None`` takes the target
    the module was made for (``Module.target``, which :func:`from_onnx` records),
    else :func:`default_target` (the default device's); a target other than the
    one the module records is refused (its kernels were chosen for that one)."""
    if isinstance(module, str):
        module = _stowage.parse(module, "<string>")
    if not isinstance(module, _stowage.Module):
        got = type(module).__name__
        raise InvalidInputError(f"compile: argument 'module': expected a Module or its text, got {got}")
    own = module.target
    if target is None:
        return Executable(_stowage.compile(module, own or default_target()))
    try:
        target = os.fspath(target)
    except TypeError:
        raise InvalidInputError(f"compile: argument 'target': expected a target name or a path, got "
                                f"{type(target).__name__}") from None
    if own and not _same_target(own, target):
        raise InvalidInputError(f"compile: the module was made for target '{own}', not '{target}' (import it again "
                                f"for '{target}', or compile it without a target)")
    return Executable(_stowage.compile(module, target))


def _same_target(a, b):
    """Whether two target arguments name one target: equal names, or paths of one file."""
    if a == b:
        return True
    if os.path.isfile(a) and os.path.isfile(b):
        return os.path.samefile(a, b)
    return False


def load(path):
    """Reads and validates a bytecode file; ``path`` is a str, bytes or os.PathLike."""
    return Executable(_stowage.load(path))
