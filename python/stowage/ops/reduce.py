"""Reductions over any axes and the normalizations built on them (LayerNorm,
InstanceNorm, GroupNorm, RMSNorm, LpNorm), softmax and its relatives."""

from .core import Core


class ReduceOps(Core):
    pass
