"""Typed data movement: Slice, Split, Expand, Tile, Gather, GatherElements,
DepthToSpace/SpaceToDepth, Resize."""

from .core import Core


class MovementOps(Core):
    pass
