"""MIRROR_PAD on the Ethos-U85 (#43, `lower_mirror_pad`): each padded side one copy of the block
it mirrors, written mirrored (OFM_PRECISION's reverse field), where the U55/U65 copy each row
and column. Bit-exact against the reference interpreter on 2 seeds on U85-128/256/512: REFLECT
and SYMMETRIC, pads of 0, 1 (a plain copy) and up to the whole axis, one side or both, ranks 3
and 4, int8, uint8, int16; no slower than Vela's on the zoo case."""

from __future__ import annotations

import pytest

import cascader
from cascader.operator_zoo import operator_model
from conftest import cycles_against_vela

from test_lower_mirror_pad import mirror_pad
from test_u85_lowering import _bit_exact_on_the_npu

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]
CASES = {
    "reflect_both_axes": ((1, 5, 6, 8), ((0, 0), (2, 3), (4, 1), (0, 0)), "REFLECT", "int8"),
    "reflect_whole_axis": ((1, 4, 5, 3), ((0, 0), (3, 3), (4, 4), (0, 0)), "REFLECT", "uint8"),
    "symmetric_whole_axis": ((1, 4, 5, 17), ((0, 0), (4, 4), (5, 5), (0, 0)), "SYMMETRIC", "int16"),
    "symmetric_one_side": ((1, 6, 6, 16), ((0, 0), (0, 3), (2, 0), (0, 0)), "SYMMETRIC", "int8"),
    "ones_only": ((1, 3, 4, 5), ((0, 0), (1, 1), (1, 1), (0, 0)), "SYMMETRIC", "uint8"),
    "rank_3": ((6, 5, 20), ((2, 2), (3, 0), (0, 0)), "REFLECT", "int16"),
    "columns_only": ((1, 1, 7, 33), ((0, 0), (0, 0), (5, 6), (0, 0)), "REFLECT", "int8"),
}


def _sides(c: cascader.CompiledModel) -> int:
    return sum(bool(s.lowered.registers.get("ofm_reverse")) for s in c.schedule.operations)


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_mirror_pad_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    shape, pads, mode, dtype = CASES[case]
    c = _bit_exact_on_the_npu(mirror_pad(shape, pads, mode, dtype), accelerator, tmp_path)
    (top, bottom), (left, right) = pads[-3], pads[-2]
    sides = [top, bottom, left, right]
    # One mirrored copy per side of more than one row or column, one plain copy per single line.
    assert _sides(c) == sum(p > 1 for p in sides)
    assert len(c.schedule.operations) == 1 + sum(p > 1 for p in sides) + sum(p == 1 for p in sides)


def test_u55_and_u65_keep_their_copies() -> None:
    for accelerator in ("ethos-u55-128", "ethos-u65-256"):
        assert _sides(cascader.compile(operator_model("MIRROR_PAD", "int8"), accelerator=accelerator)) == 0


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_mirror_pad_no_slower_than_velas(dtype: str, accelerator: str) -> None:
    ours, theirs = cycles_against_vela(operator_model("MIRROR_PAD", dtype), accelerator)
    assert ours <= theirs, (ours, theirs)
