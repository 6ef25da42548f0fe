"""In-place operations: the NPU's OFM block order, and when an OFM may overwrite its own IFM.

The NPU computes an operation one OFM block at a time, depth innermost, then width, then
height, and each block reads its IFM footprint before writing its OFM block. An OFM placed
over its IFM is therefore safe exactly when no block reads a byte an earlier block already
wrote. Same-shape elementwise operations are safe at offset 0; a 3x3 depthwise is not (block
row k + 1 reads the IFM row block row k overwrote) but is safe once the OFM starts
`min_in_place_shift` bytes below the IFM, so writes trail reads (a depthwise whose blocks split
only the depth reads just its own channels, and is safe at 0 too). The simulator raises
`BinaryError` on any operation with such a hazard. The rules and their sources are in
src/cascader/arch/block_traversal.hpp and src/cascader/sim/in_place_hazard.hpp.

Operations are the dicts `cascader.sim.decode` returns (edit them to ask "what if").
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Mapping

from .. import _core

Box = tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
"""((y0, y1), (x0, x1), (c0, c1)), half-open; empty when any range is empty."""


@dataclass(frozen=True)
class TraversalBlock:
    """One NPU job: the OFM block it writes and the IFM / IFM2 elements it reads."""

    ofm: Box
    ifm: Box
    ifm2: Box


@dataclass(frozen=True)
class InPlaceHazard:
    """The first block (traversal order) that reads an IFM/IFM2 byte an earlier block wrote."""

    reader: int
    writer: int
    reader_ofm: Box
    writer_ofm: Box
    operand: str  # "IFM" or "IFM2"
    address: int  # region-relative byte address
    message: str

    def _repr_html_(self) -> str:
        return f"<b>in-place hazard</b>: {html.escape(self.message)}"


def block_traversal(operation: Mapping[str, Any]) -> list[TraversalBlock]:
    """The operation's OFM blocks in the order the NPU computes them, with their IFM reads.

    Parameters
    ----------
    operation
        A block operation dict from `cascader.sim.decode` (not a DMA).

    Raises
    ------
    InvalidArgumentError
        The dict lacks a field, or names an unknown kind, dtype or layout.
    """
    return [TraversalBlock(*b) for b in _core.block_traversal(dict(operation))]


def in_place_hazard(operation: Mapping[str, Any], ifm: bool = True, ifm2: bool = True) -> InPlaceHazard | None:
    """The first read-after-write hazard of the operation as its addresses place it.

    Parameters
    ----------
    operation
        A block operation dict from `cascader.sim.decode`.
    ifm, ifm2
        Whether that operand shares the OFM's memory (it does when both are in one region).

    Returns
    -------
    InPlaceHazard or None
        None when no block reads a byte an earlier block wrote (always so when the OFM does
        not overlap the inputs).
    """
    h = _core.find_in_place_hazard(dict(operation), ifm, ifm2)
    return None if h is None else InPlaceHazard(**h)


def min_in_place_shift(operation: Mapping[str, Any]) -> int:
    """Smallest multiple of 16 bytes the OFM may start below its IFM with no hazard.

    The OFM keeps its layout and strides and moves to ``BASE0 = IFM BASE0 - shift`` (its other
    tiles move with it); IFM2 is taken to live elsewhere. 0 for same-shape elementwise
    operations; for a 3x3 same-padded depthwise whose blocks span the width, one IFM row.
    """
    return int(_core.min_in_place_shift(dict(operation)))
