"""REDUCE_ALL and REDUCE_ANY on the Ethos-U85 (#43, frontend/lower_reduce): the minimum and the
maximum of TFLite's 0/1 bools, as the U85's MIN pools and MAX pools; bit-exact against the
reference interpreter on 2 seeds on U85-128/256/512, over each axis and combination of axes,
keep_dims both ways, and inputs all true or all false along the reduced axes."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.operator_zoo import operator_model
from cascader.tflite.builder import ModelBuilder

from test_u85_lowering import SIZES, _bit_exact_on_the_npu

OPS = ("REDUCE_ALL", "REDUCE_ANY")


def _reduce(opcode: str, shape, axes, keep: bool):
    rank = len(shape)
    kept = [1 if (a in axes or a - rank in axes) else d for a, d in enumerate(shape)]
    out = tuple(kept) if keep else tuple(d for a, d in enumerate(shape) if not (a in axes or a - rank in axes))
    b = ModelBuilder(description=f"test_u85_reduce_bool {opcode}")
    x = b.add_input("input", shape, "bool")
    o = b.add_tensor("output", out or (1,), "bool")
    b.mark_output(o)
    b.add_operator(opcode, [x, b.add_constant("axes", np.array(axes, np.int32))], [o], dict(keep_dims=keep),
                   options_type="ReducerOptions")
    return b.build()


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("opcode", OPS)
def test_zoo_bit_exact(opcode: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(operator_model(opcode, "bool"), accelerator, tmp_path)
    modes = {s.lowered.registers.get("sub_op") for s in c.schedule.operations if s.lowered.kind == "pool"}
    assert modes == {"MIN" if opcode == "REDUCE_ALL" else "MAX"}


AXES = {"h": [1], "w": [2], "c": [3], "hw": [1, 2], "hc": [1, 3], "wc": [2, -1], "all": [1, 2, 3], "rank_3_last": [-1]}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("axes", sorted(AXES))
@pytest.mark.parametrize("opcode", OPS)
def test_axes_bit_exact(opcode: str, axes: str, keep: bool, accelerator: str, tmp_path) -> None:
    shape = (1, 5, 16) if axes == "rank_3_last" else (1, 6, 5, 20)
    _bit_exact_on_the_npu(_reduce(opcode, shape, AXES[axes], keep), accelerator, tmp_path)


@pytest.mark.parametrize("opcode", OPS)
def test_rows_all_true_and_all_false(opcode: str) -> None:
    """Random bools are rarely all true (or all false) over a row of 20: set rows so."""
    from cascader.reference import run

    model = _reduce(opcode, (1, 6, 5, 20), [3], keep=True)
    c = cascader.compile(model, accelerator="ethos-u85-256")
    assert all(v.npu for v in c.partition.verdicts)
    x = np.random.default_rng(3).integers(0, 2, (1, 6, 5, 20)).astype(bool)
    x[0, 0], x[0, 1] = True, False
    x[0, 2, :, :-1] = True
    got, want = cascader.simulate(c.binary, [x])[0], run(model, [x])[0]
    np.testing.assert_array_equal(got, want)
    assert want[0, 0].all() and not want[0, 1].any()


def test_over_hw_of_an_input_in_dram_takes_velas_staged_pools() -> None:
    """The zoo's reduction over H and W of a model input (DRAM on the default system): the
    cycle model picks the elementwise copy to SRAM and a pool per axis on U85-256."""
    c = cascader.compile(operator_model("REDUCE_ANY", "bool"), accelerator="ethos-u85-256")
    assert [s.lowered.kind for s in c.schedule.operations] == ["elementwise", "pool", "pool"]
