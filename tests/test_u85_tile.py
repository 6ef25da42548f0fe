"""TILE on the Ethos-U85 (#43, `lower_tile`): the cycle model weighs doubling in the output
against Vela's order (the inner axes tiled in a scratch map, the outermost one copy per tile
from it, no copy reading the output back). Bit-exact against the reference interpreter on 2
seeds on U85-128/256/512 at the cases of tests/test_lower_padv2_reverse_tile (each axis, every
axis, a plain copy, one element to many, ranks 1 to 3, int8, uint8, int16), and inside a
network where the output is no model output; no slower than Vela's on the zoo case."""

from __future__ import annotations

import pytest

import cascader
from cascader import zoo
from cascader.operator_zoo import operator_model
from conftest import cycles_against_vela

from test_lower_padv2_reverse_tile import TILE_CASES, one_op
from test_u85_lowering import _bit_exact_on_the_npu

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape,multiples", TILE_CASES)
def test_tile_bit_exact(shape, multiples, dtype: str, accelerator: str, tmp_path) -> None:
    out = tuple(d * m for d, m in zip(shape, multiples))
    _bit_exact_on_the_npu(one_op("TILE", shape, out, multiples, dtype), accelerator, tmp_path)


@pytest.mark.parametrize("accelerator", SIZES)
def test_tile_inside_a_network_bit_exact(accelerator: str, tmp_path) -> None:
    _bit_exact_on_the_npu(zoo.tile((1, 3, 4, 6), (1, 2, 3, 2), dtype="int8", seed=1), accelerator, tmp_path)


def test_the_staged_order_where_the_output_is_a_model_output() -> None:
    c = cascader.compile(operator_model("TILE", "int8"), accelerator="ethos-u85-256")
    names = [s.lowered.name for s in c.schedule.operations]
    assert sum("tile" in n for n in names) == 2 and any("(block)" in n for n in names), names


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_tile_no_slower_than_velas(dtype: str, accelerator: str) -> None:
    ours, theirs = cycles_against_vela(operator_model("TILE", dtype), accelerator)
    assert ours <= theirs, (ours, theirs)
