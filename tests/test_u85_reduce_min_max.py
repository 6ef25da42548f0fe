"""REDUCE_MAX and REDUCE_MIN on the Ethos-U85 (#43, `lower_reduce`): MAX and MIN pools of the raw
codes, one window, one axis at a time, or staged through an elementwise copy, and for the
minimum the U55's reversed maximum too, whichever the cycle model finds fastest. Bit-exact against the
reference interpreter on 2 seeds (with the type's ends) on U85-128/256/512 at the axis cases of
tests/test_lower_reduce_minmax_sum (every axis set, negative axes, windows past a pool's 256
rows, reductions past one window); no slower than Vela's (at most 1.02x) on the zoo cases."""

from __future__ import annotations

import pytest

import cascader
from cascader.operator_zoo import operator_model
from conftest import cycles_against_vela

from test_lower_reduce_minmax_sum import AXIS_CASES, QUANTIZATION, _check

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape, axes, keep", AXIS_CASES[:7])
def test_min_max_bit_exact(accelerator: str, op: str, dtype: str, shape, axes, keep: bool) -> None:
    _check(accelerator, op, shape, axes, keep, dtype, *QUANTIZATION[dtype])


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("shape, axes, keep", AXIS_CASES[7:])
def test_min_max_long_reductions_bit_exact(accelerator: str, op: str, shape, axes, keep: bool) -> None:
    _check(accelerator, op, shape, axes, keep, "int16", (0.001, 0), (0.001, 0))


def test_the_minimum_is_a_min_pool() -> None:
    """int16 on U85-256: MIN pools per axis (2,969 cycles) beat the reversed maximum (4,458)."""
    c = cascader.compile(operator_model("REDUCE_MIN", "int16"), accelerator="ethos-u85-256")
    modes = {(s.lowered.kind, s.lowered.registers.get("sub_op")) for s in c.schedule.operations}
    assert ("pool", "MIN") in modes and not any(kind == "elementwise" and m == "SUB" for kind, m in modes)


def test_u55_and_u65_keep_the_reversed_maximum() -> None:
    for accelerator in ("ethos-u55-128", "ethos-u65-256"):
        c = cascader.compile(operator_model("REDUCE_MIN", "int8"), accelerator=accelerator)
        assert [s.lowered.registers.get("sub_op") for s in c.schedule.operations] == ["SUB", "MAX", "SUB"]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_no_slower_than_velas(op: str, dtype: str, accelerator: str) -> None:
    ours, theirs = cycles_against_vela(operator_model(op, dtype), accelerator)
    assert ours <= 1.02 * theirs, (ours, theirs)
