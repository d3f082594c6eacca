"""Running executables: devices, the virtual machine, tensors in and out."""

import numbers

from . import _stowage
from .errors import InvalidInputError
from .executable import Executable
from .profile import Profile

Tensor = _stowage.Tensor


def devices():
    """Every OpenCL device, as dicts: spec ("opencl:N", what ``device=`` takes),
    name, vendor, platform, version, driver, type ("gpu", "cpu", ...),
    image_support, global_mem_bytes, max_alloc_bytes, fp16, fp64, svm
    (coarse-grained shared virtual memory)."""
    return _stowage.devices()


def _to_numpy_export(array):
    """An ndarray numpy can export through DLPack: compact, native byte order,
    writable (numpy refuses to export read-only arrays)."""
    import numpy as np

    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    array = np.asarray(array, order="C")  # ascontiguousarray would make a 0-d array 1-d
    if not array.flags.writeable:
        array = array.copy()
    return array


def _vm_arg(function, index, value):
    if isinstance(value, (Tensor, bool, int, float)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if type(value).__name__ == "ndarray" and type(value).__module__ == "numpy":
        value = _to_numpy_export(value)
    if hasattr(value, "__dlpack__"):
        try:
            capsule = value.__dlpack__()
        except (BufferError, TypeError, ValueError, RuntimeError) as e:
            raise InvalidInputError(f"invoke '{function}': argument {index}: __dlpack__ failed: {e}") from None
        return _stowage.tensor_from_capsule(capsule)
    if type(value).__name__ == "PyCapsule":
        return _stowage.tensor_from_capsule(value)
    raise InvalidInputError(
        f"invoke '{function}': argument {index}: cannot pass a {type(value).__name__}; pass a numpy array, "
        "an object with __dlpack__, a stowage.Tensor, an int or a float"
    )


def _quoted(names):
    return ", ".join(f"'{name}'" for name in names)


class VirtualMachine:
    """Runs an executable on one OpenCL device.

    ``device``: None (the STOWAGE_DEVICE environment variable, else the first
    device that suits the executable, GPUs first), "opencl:N", "gpu", "cpu" or
    part of a device or platform name. ``profile=True`` times every instruction
    (waiting for the device after each); ``kernel_times=True`` records each kernel's
    time on the device from OpenCL profiling events, without waiting. ``svm=False``
    gives kernels sub-buffers even where the device offers shared virtual memory
    (by default buffer storages live there and kernels take pointers into them).
    """

    def __init__(self, executable, device=None, profile=False, kernel_times=False, svm=True):
        if not isinstance(executable, Executable):
            raise InvalidInputError(
                f"VirtualMachine: argument 'executable': expected an Executable, got {type(executable).__name__}"
            )
        if device is not None and not isinstance(device, str):
            raise InvalidInputError(f"VirtualMachine: argument 'device': expected a str, got {type(device).__name__}")
        self._executable = executable
        self._params = None  # parameter names per function, read at the first invoke by name
        self._vm = _stowage.VirtualMachineHandle(executable._handle, device or "", bool(profile), bool(kernel_times),
                                                 bool(svm))

    @property
    def executable(self):
        return self._executable

    @property
    def device(self):
        """The device it runs on, as a dict like those of :func:`devices`."""
        return self._vm.device

    def invoke(self, function, /, *args, **kwargs):
        """Runs ``function`` on its arguments, given in order, by the names of its
        parameters (``vm.invoke("main", x=a, y=b)``; the names of
        ``executable.functions``, which for an imported ONNX model are its inputs'
        names), or both: the first by position, the rest by name. Tensor arguments:
        numpy arrays (any dtype Stowage has), objects with ``__dlpack__`` on the
        host (each uploaded to the device, once per call), or device Tensors of
        this VM (results of :meth:`invoke` or :meth:`upload`, passed with no copy);
        scalar arguments: Python or numpy ints and floats. Returns a device
        :class:`Tensor` (it stays valid after later invokes; read it with
        ``numpy()``, ``np.asarray`` or ``np.from_dlpack(t, device="cpu")``) or a
        scalar; a function that returns several values (``f.ret(a, b)``,
        ``return (a, b)``) gives a Python tuple of such Tensors, in order. Other
        Python threads run while the device works."""
        if not isinstance(function, str):
            raise InvalidInputError(f"invoke: argument 'function': expected a str, got {type(function).__name__}")
        if kwargs:
            args = self._in_order(function, args, kwargs)
        return self._vm.invoke(function, [_vm_arg(function, i, a) for i, a in enumerate(args)])

    def _in_order(self, function, args, kwargs):
        """The arguments given by position and by name, in the order of the parameters."""
        if self._params is None:
            self._params = {f["name"]: [p["name"] for p in f["params"]] for f in self._executable.functions}
        if function not in self._params:
            raise InvalidInputError(f"invoke: the executable has no function '{function}'")
        names = self._params[function]
        if len(args) > len(names):
            raise InvalidInputError(f"invoke '{function}': takes {len(names)} arguments, "
                                    f"{len(args) + len(kwargs)} given")
        unknown = [name for name in kwargs if name not in names]
        if unknown:
            raise InvalidInputError(f"invoke '{function}': no parameter named {_quoted(unknown)} "
                                    f"(its parameters: {', '.join(names) or 'none'})")
        twice = [name for name in names[:len(args)] if name in kwargs]
        if twice:
            raise InvalidInputError(f"invoke '{function}': parameter {_quoted(twice)} given both by position "
                                    "and by name")
        missing = [name for name in names[len(args):] if name not in kwargs]
        if missing:
            raise InvalidInputError(f"invoke '{function}': no argument for parameter{'s' if len(missing) > 1 else ''} "
                                    f"{_quoted(missing)}")
        return list(args) + [kwargs[name] for name in names[len(args):]]

    def upload(self, array):
        """A device :class:`Tensor` holding a copy of ``array`` (a numpy array or
        any host ``__dlpack__`` object), to pass to many invokes with no further
        copy. A device Tensor of this VM is returned as it is."""
        value = _vm_arg("upload", 0, array)
        if not isinstance(value, Tensor):
            raise InvalidInputError(f"upload: argument 0: expected an array, got {type(array).__name__}")
        return self._vm.upload(value)

    def profile(self):
        """A :class:`~stowage.profile.Profile`: a dict of the counters (device
        allocations, kernel launches, programs built, transfers between host and
        device and their bytes) and bytes per scope; per-instruction times
        (``instructions``: ``function``, ``index``, ``op``, ``detail``, ``count``,
        ``total_us``) when profiling; with kernel_times, each kernel site's
        ``device_count`` and ``device_us``, and ``device_busy_us`` (time in kernels)
        and ``device_span_us`` (first kernel's start to the last one's end).
        ``print(vm.profile())`` shows it as a table."""
        return Profile(self._vm.profile())

    def reset_profile(self):
        self._vm.reset_profile()

    def synchronize(self):
        """Waits for all work enqueued on the device."""
        self._vm.synchronize()
