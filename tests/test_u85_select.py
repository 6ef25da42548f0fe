"""SELECT and SELECT_V2 on the Ethos-U85 (#43, frontend/lower_u85_select): the condition's
-1/0 mask (CMP_NE into int8, widened by an ADD for 16- and 32-bit values, as Vela 5.2), then
AND, AND_NOT and OR of the raw codes; bit-exact against the reference interpreter on 2 seeds on
U85-128/256/512, each operator and type on its own, SELECT_V2's broadcasts of each operand and
of two or three operands at once (both operands of a step broadcast), and uint8 (which Vela 5.2
fails on; selected as the int8 codes of its bytes)."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.operator_zoo import U85_OPERATOR_DTYPES, operator_model
from cascader.tflite.builder import ModelBuilder, quantization

from test_u85_lowering import SIZES, _bit_exact_on_the_npu, _sub_ops

CASES = [(op, dt) for op in ("SELECT", "SELECT_V2") for dt in U85_OPERATOR_DTYPES[op]]


def _select_v2(dtype: str, condition, x, y, out=(1, 6, 5, 16), opcode: str = "SELECT_V2"):
    q = None if dtype == "int32" else quantization(0.05, 3 if dtype != "uint8" else 130)
    b = ModelBuilder(description=f"test_u85_select {opcode} {dtype}")
    c = b.add_input("condition", condition, "bool")
    xs = b.add_input("input", x, dtype, q)
    ys = b.add_input("input_b", y, dtype, q)
    o = b.add_tensor("output", out, dtype, q)
    b.mark_output(o)
    b.add_operator(opcode, [c, xs, ys], [o])
    return b.build()


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("opcode, dtype", CASES)
def test_zoo_select_bit_exact(opcode: str, dtype: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(operator_model(opcode, dtype), accelerator, tmp_path)
    widened = {} if dtype in ("int8", "uint8") else {"ADD": 1}  # Vela's five operations then
    assert _sub_ops(c) == {"CMP_NE": 1, "AND": 1, "AND_NOT": 1, "OR": 1, **widened}


# (condition, x, y): each operand broadcast on its own and together, where every step has one
# operand of the result's shape (y broadcast against a full mask: the U85's swapped AND_NOT).
BROADCASTS = {
    "scalar_condition": ((1,), (1, 6, 5, 16), (1, 6, 5, 16)),
    "channel_condition": ((16,), (1, 6, 5, 16), (1, 6, 5, 16)),
    "x_per_channel": ((1, 6, 5, 16), (1, 1, 1, 16), (1, 6, 5, 16)),
    "y_per_row": ((1, 6, 5, 16), (1, 6, 5, 16), (1, 6, 1, 16)),
    "y_scalar": ((1, 6, 5, 16), (1, 6, 5, 16), (1, 1, 1, 1)),
    "condition_and_x": ((1, 6, 1, 16), (1, 6, 1, 16), (1, 6, 5, 16)),
    "x_and_y": ((1, 6, 5, 16), (1, 6, 1, 16), (1, 1, 5, 16)),
    "rank_3": ((5, 16), (6, 5, 16), (1, 5, 16)),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(BROADCASTS))
def test_select_v2_broadcasts_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    condition, x, y = BROADCASTS[case]
    out = tuple(int(d) for d in np.broadcast_shapes(condition, x, y))
    _bit_exact_on_the_npu(_select_v2("int8", condition, x, y, out), accelerator, tmp_path)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32"])
def test_select_v2_broadcasts_in_wider_types(dtype: str, tmp_path) -> None:
    """A per-pixel condition (C 1) over full x and a scalar y."""
    _bit_exact_on_the_npu(_select_v2(dtype, (1, 6, 5, 1), (1, 6, 5, 16), (1, 1, 1, 1)), "ethos-u85-256", tmp_path)


@pytest.mark.parametrize("accelerator", SIZES)
def test_uint8_select_is_the_int8_select_of_its_bytes(accelerator: str, tmp_path) -> None:
    """Vela 5.2 fails on a uint8 SELECT; ours selects the same bytes as int8 codes with the int8
    mask (a uint8 mask of -1 would need the comparison written unclamped), four operations."""
    model = _select_v2("uint8", (1, 6, 5, 16), (1, 6, 5, 16), (1, 6, 5, 16), opcode="SELECT")
    c = _bit_exact_on_the_npu(model, accelerator, tmp_path)
    assert _sub_ops(c) == {"CMP_NE": 1, "AND": 1, "AND_NOT": 1, "OR": 1}
    assert {s.lowered.ofm.dtype for s in c.schedule.operations} == {"int8"}


def test_type_extremes_are_copied_as_they_are() -> None:
    """Every int32 extreme and its neighbours on both sides of the mask, against the reference."""
    from cascader.reference import run

    model = _select_v2("int32", (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), out=(1, 2, 3, 4))
    c = cascader.compile(model, accelerator="ethos-u85-256")
    assert all(v.npu for v in c.partition.verdicts)
    edges = np.array([-(2**31), -(2**31) + 1, -1, 0, 1, 2**31 - 2, 2**31 - 1, 12345], np.int32)
    x = np.resize(edges, 24).reshape(1, 2, 3, 4)
    inputs = [np.resize([True, False, False], 24).reshape(1, 2, 3, 4), x, x[..., ::-1].copy()]
    np.testing.assert_array_equal(cascader.simulate(c.binary, inputs)[0], run(model, inputs)[0])


# (condition, x, y) where a step's two operands both broadcast: the U85 broadcasts its IFM too
# (IFM_BROADCAST), as Vela 5.2's binaries do, and no operand is copied out to the full shape.
BOTH_BROADCAST = {
    "pixel_condition_row_x": ((1, 6, 5, 1), (1, 1, 5, 16), (1, 6, 5, 16)),
    "column_condition_row_x": ((1, 6, 1, 16), (1, 1, 5, 16), (1, 6, 5, 16)),
    "x_and_y_both_broadcast_condition_per_pixel": ((1, 6, 5, 1), (1, 6, 1, 16), (1, 1, 5, 16)),
    "every_operand_broadcasts": ((1, 6, 1, 1), (1, 1, 5, 1), (1, 1, 1, 16)),
    "scalar_condition_x_and_y_broadcast": ((1,), (1, 6, 1, 16), (1, 1, 5, 1)),
    "rank_3_every_operand": ((6, 1, 1), (5, 1), (16,)),
}


def _both_broadcast(case: str, dtype: str = "int8"):
    condition, x, y = BOTH_BROADCAST[case]
    return _select_v2(dtype, condition, x, y, tuple(int(d) for d in np.broadcast_shapes(condition, x, y)))


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(BOTH_BROADCAST))
def test_steps_whose_operands_both_broadcast_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(_both_broadcast(case), accelerator, tmp_path)
    assert _sub_ops(c) == {"CMP_NE": 1, "AND": 1, "AND_NOT": 1, "OR": 1}
    both = [s.lowered for s in c.schedule.operations if s.lowered.registers.get("ifm_broadcast")]
    assert both  # some step broadcasts its two operands (none is materialised)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32"])
def test_both_broadcast_in_wider_types(dtype: str, tmp_path) -> None:
    """The widened mask keeps the condition's shape; the value steps broadcast both operands."""
    for case in ("pixel_condition_row_x", "every_operand_broadcasts"):
        _bit_exact_on_the_npu(_both_broadcast(case, dtype), "ethos-u85-256", tmp_path)


def test_operands_that_do_not_broadcast_stay_on_the_cpu() -> None:
    """A SELECT_V2 of shapes that do not broadcast is no TFLite model; the verdict says why."""
    model = _select_v2("int8", (1, 6, 5, 16), (1, 6, 5, 16), (1, 6, 5, 16), out=(1, 6, 5, 16))
    model.main.tensors[model.main.inputs[1]].shape = (1, 6, 4, 16)
    verdicts = cascader.compile(model, accelerator="ethos-u85-256").partition.verdicts
    assert not verdicts[0].npu and "do not broadcast" in verdicts[0].reason


def test_the_u55_keeps_select_on_the_cpu() -> None:
    model = _both_broadcast("pixel_condition_row_x")
    for accelerator in ("ethos-u55-128", "ethos-u65-256"):
        (verdict,) = cascader.compile(model, accelerator=accelerator).partition.verdicts
        assert not verdict.npu and "Ethos-U85 only" in verdict.reason
