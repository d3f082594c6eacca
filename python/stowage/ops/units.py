"""The kernel units of the operator library: the shipped ``.cl`` files (one family
a file), specialised by ``#define`` lines put in front of the same source.

A unit of family F compiled with defines D is named ``stowage_F`` plus a suffix
derived from D (none for the defaults), and its kernels carry the same suffix
(the source's kernel definitions are renamed), so several specialisations of
one family can share a module. Each unit is one OpenCL program build; a builder
gets each unit once.
"""

import os
import re
import weakref

from ..errors import FileError, InvalidInputError

FAMILIES = (
    "conv",
    "gemm",
    "elementwise",
    "pooling",
    "reduction",
    "layout",
    "conv_texture",
    "conv_direct",
    "pooling_texture",
    "elementwise_texture",
    "layout_texture",
    "math",
    "movement",
    "conv_transpose",
    "attention",
    "conv3d",
    "sampling",
    "sequence",
    "recurrent",
    "scan",
    "winograd",
)

# Short names of the tuning constants, for unit and kernel suffixes.
_SHORT = {
    "CONV_TILE_M": "m",
    "CONV_TILE_N": "n",
    "CONV_TILE_K": "k",
    "CONV_WPT_M": "wm",
    "CONV_WPT_N": "wn",
    "DW_PX": "px",
    "GEMM_TILE_M": "m",
    "GEMM_TILE_N": "n",
    "GEMM_TILE_K": "k",
    "GEMM_WPT_M": "wm",
    "GEMM_WPT_N": "wn",
    "GEMM_SLICES": "sl",
    "GEMM_A_VEC": "av",
    "GEMM_B_VEC": "bv",
    "GEMM_Y_VEC": "yv",
    "GEMM_AHEAD": "ah",
    "CONV_AHEAD": "ah",
    "GEMV_LOCAL": "gl",
    "GEMV_ROWS": "gr",
    "GEMV_MAX_M": "gm",
    "TCONV_PX": "px",
    "TCONV_OB": "ob",
    "TDWPW_OB": "dob",
    "TDWPW_SHARE": "share",
    "TCONV_WEIGHT_BUFFER": "wbuf",
    "TCONV_RESIDUAL": "res",
    "TCONV_MAX_GROUP": "mg",
    "TDWPW_MAX_GROUP": "dmg",
    "DCONV_PX": "px",
    "DCONV_OB": "ob",
    "DDWPW_OB": "dob",
    "DDWPW_PX": "dpx",
    "DDWPW_SHARE": "share",
    "DDWPW_SHUFFLE": "sh",
    "GAP_LOCAL": "gap",
    "PL_LOCAL": "pl",
    "PL_ROWS": "plr",
    "SE_LOCAL": "se",
    "SE_BLOCK": "seb",
    "SE_MAX_HIDDEN": "seh",
    "SE_MAX_CHANNELS": "sec",
    "SE_MIN_LANES": "sel",
    "DW_SUMS": "dws",
    "DCONV_SE": "exc",
    "DW_R": "dwr",
    "DW_SPLIT_RUN": "dsr",
    "STOWAGE_IN_AFFINE": "in",
    "STOWAGE_IN_ACT": "ina",
    "STOWAGE_A_NORM": "an",
    "PL_NORM": "pln",
    "SOFTMAX_LOCAL": "l",
    "STOWAGE_FIXED_ACT": "act",
    "STOWAGE_T": "t",
    "STOWAGE_U": "u",
    "STOWAGE_I": "i",
}


def kernel_dir():
    """Where the ``.cl`` files are: ``stowage/kernels`` in an installed package or a
    build tree, else ``src/backend/kernels`` of a source checkout."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates = [
        os.path.join(here, "kernels"),
        os.path.join(os.path.dirname(os.path.dirname(here)), "src", "backend", "kernels"),
    ]
    for path in candidates:
        if os.path.isfile(os.path.join(path, "conv.cl")):
            return path
    raise FileError(f"the operator kernels (conv.cl, ...) are in none of {candidates}; reinstall stowage")


_sources = {}


def family_source(family):
    if family not in FAMILIES:
        raise InvalidInputError(f"unknown kernel family '{family}' (known: {', '.join(FAMILIES)})")
    if family not in _sources:
        with open(os.path.join(kernel_dir(), family + ".cl"), encoding="utf-8") as f:
            _sources[family] = f.read()
    return _sources[family]


# A kernel definition: `__kernel [attributes] void NAME(`. Names are renamed in the
# text rather than through a macro: the kernel reader takes only kernels whose
# names are written in the unit itself.
_KERNEL_DEFINITION = re.compile(r"(__kernel\b[^;{]*?\bvoid\s+)([A-Za-z_]\w*)(\s*\()")


def _suffix(defines):
    parts = []
    for name, value in sorted(defines.items()):
        short = _SHORT.get(name, name.lower())
        parts.append(f"{short}{value}")
    return ("_" + "_".join(parts)) if parts else ""


class Unit:
    """A family's source with defines: its unit name, kernel names and source."""

    def __init__(self, family, defines=None):
        self.family = family
        self.defines = {str(k): int(v) for k, v in (defines or {}).items()}
        self.suffix = _suffix(self.defines)
        self.name = "stowage_" + family + self.suffix

    def kernel(self, name):
        return name + self.suffix

    def source(self):
        text = family_source(self.family)
        if not self.defines:
            return text
        text = _KERNEL_DEFINITION.sub(lambda m: m.group(1) + m.group(2) + self.suffix + m.group(3), text)
        lines = [f"#define {k} {v}" for k, v in sorted(self.defines.items())]
        lines.append("#line 1")  # errors keep the file's line numbers
        return "\n".join(lines) + "\n" + text


# Units already added, per Builder (several OpBuilders may share one).
_added = weakref.WeakKeyDictionary()


def ensure(builder, unit):
    """Adds ``unit`` to ``builder`` unless it is there already; returns the unit."""
    names = _added.setdefault(builder, set())
    if unit.name not in names:
        builder.add_kernels(unit.source(), name=unit.name)
        names.add(unit.name)
    return unit
