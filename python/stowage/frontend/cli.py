"""stowage-import: an ONNX model to a Stowage bytecode file.

    stowage-import model.onnx -o model.stw [--target T] [--texture] [--shape NAME=1x3x224x224] [--report]
                   [--tuning FILE] [--fold-limit BYTES] [--max-model-bytes BYTES]

Exit status: 0 written, 2 the model (or an argument) is invalid or uses what Stowage
does not support, 1 anything else. Errors are one line on stderr.
"""

import argparse
import sys

from ..errors import InvalidInputError, StowageError, UnsupportedError
from .importer import DEFAULT_FOLD_LIMIT
from .onnx_model import DEFAULT_MAX_MODEL_BYTES


def parse_shape(text):
    name, sep, dims = text.rpartition("=")
    if not sep or not name or not dims:
        raise InvalidInputError(f"--shape '{text}' is not NAME=D1xD2x...")
    try:
        shape = tuple(int(d) for d in dims.split("x"))
    except ValueError:
        raise InvalidInputError(f"--shape '{text}': '{dims}' is not extents joined by 'x'") from None
    if any(d < 1 for d in shape):
        raise InvalidInputError(f"--shape '{text}': extents must be >= 1")
    return name, shape


def _malformed():
    """What onnx, protobuf and numpy raise on a malformed model."""
    from google.protobuf.message import DecodeError
    from onnx.checker import ValidationError

    return (DecodeError, ValidationError, OverflowError, ZeroDivisionError, MemoryError, RecursionError)


# What stowage-import says when nothing chose the mode: a net may run faster in the other.
DEFAULT_MODE_NOTE = (" (the default; python -m stowage.tuner export-nets and time-nets measure which mode is faster "
                     "for this model)")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="stowage-import", description="Imports an ONNX model into a bytecode file.",
                                     epilog="exit status: 0 written; 2 the model or an argument is invalid, or uses "
                                            "what Stowage does not support; 1 anything else")
    parser.add_argument("model", help="the .onnx file")
    parser.add_argument("-o", "--output", required=True, help="the bytecode file to write (.stw)")
    parser.add_argument("--target", default=None,
                        help="a shipped target name or a target JSON file: kernels are chosen and compiled for it "
                             "(default: the default device's, opencl-gpu for a GPU, else opencl; STOWAGE_DEVICE "
                             "chooses the device)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--texture", dest="texture", action="store_const", const=True, default=None,
                      help="activations and convolution weights in textures (default: the mode --tuning measured "
                           "fastest for this model, else buffers)")
    mode.add_argument("--buffers", dest="texture", action="store_const", const=False,
                      help="activations and weights in buffers")
    parser.add_argument("--shape", action="append", default=[],
                        help="NAME=1x3x224x224 for an input left dynamic or of unknown rank")
    parser.add_argument("--report", action="store_true", help="print the memory report")
    parser.add_argument("--tuning", metavar="FILE",
                        help="a tuning cache (python -m stowage.tuner): kernels per layer; a regular file of at most "
                             "16 MiB")
    parser.add_argument("--fold-limit", type=int, default=DEFAULT_FOLD_LIMIT, metavar="BYTES",
                        help=f"the most bytes one value computed at import may take (default {DEFAULT_FOLD_LIMIT})")
    parser.add_argument("--max-model-bytes", type=int, default=DEFAULT_MAX_MODEL_BYTES, metavar="BYTES",
                        help=f"the most bytes of the model file and its external data read, checked before "
                             f"reading (default {DEFAULT_MAX_MODEL_BYTES})")
    args = parser.parse_args(argv)
    from .. import compile as compile_module
    from .onnx import from_onnx, mode_and_tuning
    from .onnx_model import load_model

    malformed = _malformed()
    try:
        shapes = dict(parse_shape(s) for s in args.shape) or None
        tuning = None
        if args.tuning:
            from ..tuner import load

            tuning = load(args.tuning)
        model = load_model(args.model, args.max_model_bytes)
        texture, tuning, why = mode_and_tuning(model, args.texture, tuning)
        module = from_onnx(model, shapes=shapes, texture=texture, target=args.target, tuning=tuning,
                           fold_limit=args.fold_limit, max_model_bytes=args.max_model_bytes)
        exe = compile_module(module)  # for the target the module records
        exe.save(args.output)
        chosen = "" if args.target else " (the default device's; --target names another)"
        mode = "texture" if texture else "buffer"
        if why.startswith("tuning "):
            why = f" (candidate {why.split(' ', 1)[1]}, measured fastest for this model: --tuning)"
        else:
            why = {"argument": "", "default": DEFAULT_MODE_NOTE}[why]
        print(f"wrote {args.output} for target {module.target}{chosen}, {mode} mode{why}")
    except (InvalidInputError, UnsupportedError) as e:
        print(f"stowage-import: error: {e}", file=sys.stderr)
        return 2
    except StowageError as e:
        print(f"stowage-import: error: {e}", file=sys.stderr)
        return 2 if type(e).__name__ in ("VerifyError", "FileError") else 1
    except malformed as e:
        # from_onnx turns these into Stowage's errors; one that still escapes comes from the model
        print(f"stowage-import: error: {args.model}: malformed model ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if args.report:
        for scope, figures in exe.memory_report.items():
            print(f"{scope}: {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
