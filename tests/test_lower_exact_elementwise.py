"""ADD, SUB and MUL exact through decomposition (`frontend.exact_elementwise`), not through the CPU.

Every quantization is checked on all 65,536 pairs of 8-bit input codes, through the compile and
the simulator, against TFLite's reference interpreter: the ADD/SUB chain (operand tables, an
int32 sum, the output rescale's two roundings one operation each) and MUL's rescale of a
product that the reference shifts left in int32 (wrapping).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader.frontend import fixed_point as fp
from cascader.frontend import lower_elementwise
from cascader.frontend.add_sub_rounding import operand_multipliers, operand_values
from cascader.frontend.exact_elementwise import largest_product, operand_table, product_fits, reference_multiply
from cascader.frontend.quantization import multiply_real
from cascader.random_networks import random_network
from cascader.tflite.builder import ModelBuilder
from cascader.tflite.model import Quantization

pytest.importorskip("ai_edge_litert")
from cascader.bench.simulate import validate  # noqa: E402
from cascader.reference import ReferenceInterpreter  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")


def _q(scale: float, zero_point: int) -> Quantization:
    return Quantization(scale=np.array([scale], np.float32), zero_point=np.array([zero_point], np.int64))


def _pair_model(opcode, first_q, second_q, out_q, dtype="int8", activation="NONE"):
    """`opcode` between two 256 x 256 maps, and inputs that hold every pair of codes."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 256, 256, 1), dtype, _q(*first_q))
    y = b.add_input("y", (1, 256, 256, 1), dtype, _q(*second_q))
    z = b.add_tensor("z", (1, 256, 256, 1), dtype, _q(*out_q))
    b.add_operator(opcode, [x, y], [z], {"fused_activation_function": activation})
    b.mark_output(z)
    lo = -128 if dtype == "int8" else 0
    codes = np.arange(lo, lo + 256).astype(dtype)
    rows, cols = np.meshgrid(codes, codes, indexing="ij")
    return b.build(), [rows.reshape(1, 256, 256, 1), cols.reshape(1, 256, 256, 1)]


def _exact_on_every_pair(model, inputs) -> list[str]:
    """The compiled operator's NPU operations; fails unless all of it runs on the NPU and every
    pair matches the reference."""
    compiled = cascader.compile(model)
    assert compiled.summary().cpu_operators == 0, [v.reason for v in compiled.partition.verdicts if not v.npu]
    ours = cascader.simulate(compiled, inputs)[0]
    theirs = ReferenceInterpreter(model).run(inputs)[0]
    wrong = np.argwhere(ours != theirs)
    assert not wrong.size, [(int(inputs[0][tuple(i)]), int(inputs[1][tuple(i)]), int(ours[tuple(i)]),
                             int(theirs[tuple(i)])) for i in wrong[:5]]
    return [op.lowered.name for op in compiled.schedule.operations]


def _chain(names: list[str], mode: str) -> bool:
    return names[-2:] == [f"0:{mode}(mul)", f"0:{mode}(shr)"] and len(names) == 5


# --- ADD / SUB -----------------------------------------------------------------------------


def test_the_uint8_sub_no_register_set_rounds_exactly():
    """add_sub_rounding's case: uint8 SUB of 0.1875 (zero point 90) and 0.125 (77) into 0.1
    (118), RELU6: Vela's registers and every operand multiplier near them round one of the
    65,536 pairs one off; it stayed on the CPU. The chain is exact on all of them."""
    names = _exact_on_every_pair(*_pair_model("SUB", (0.1875, 90), (0.125, 77), (0.1, 118), "uint8", "RELU6"))
    assert _chain(names, "SUB"), names


def test_random_network_106_residual_add_runs_on_the_npu():
    """The generated network whose ADD stayed on the CPU (splitting its NPU part in two) is one
    NPU part now, bit-exact on 2 seeds on both targets."""
    net = random_network(106).model
    for accelerator in ACCELERATORS:
        compiled = cascader.compile(net, accelerator=accelerator)
        assert compiled.summary().cpu_operators == 0
        assert any("3:ADD(shr)" in op.lowered.name for op in compiled.schedule.operations)
        _bit_exact(net, compiled)


def _bit_exact(model, compiled, seeds=(0, 1)):
    """The compiled binary against the reference on random inputs of `seeds`."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.tflite"
        cascader.save_model(model, path)
        result = validate(path, compiled.model, seeds)
    assert result.bit_exact, result.details


def test_the_high_multiply_rounds_negative_halves_up():
    """0.2 + 0.15 into 0.1: the sum times the output multiplier lands on a negative half for
    2,933 of the 65,536 pairs that the last rounding then carries; SaturatingRoundingDoubling-
    HighMul rounds those halves up (NATURAL), a TFL-rounded shift would round them down."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lower_elementwise, "exact_add_sub_scales", lambda *args: None)
        names = _exact_on_every_pair(*_pair_model("ADD", (0.2, 0), (0.15, 0), (0.1, 0)))
    assert _chain(names, "ADD"), names


scales = st.floats(min_value=1e-3, max_value=1.0)
zero_points = st.integers(min_value=-128, max_value=127)


@settings(max_examples=8, deadline=None)
@given(mode=st.sampled_from(["ADD", "SUB"]), dtype=st.sampled_from(["int8", "uint8"]),
       first=st.tuples(scales, zero_points), second=st.tuples(scales, zero_points),
       out=st.tuples(scales, zero_points), activation=st.sampled_from(["NONE", "RELU", "RELU6"]))
def test_the_chain_is_exact_for_any_quantization(mode, dtype, first, second, out, activation):
    """With the single NPU operation's registers refused (as where none is exact), every random
    quantization goes through the chain, and every pair of codes is exact. (The scales keep the
    sum's rescale below 1, the range the reference defines.)"""
    shift = 128 if dtype == "uint8" else 0
    first, second, out = ((s, z + shift) for s, z in (first, second, out))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lower_elementwise, "exact_add_sub_scales", lambda *args: None)
        names = _exact_on_every_pair(*_pair_model(mode, first, second, out, dtype, activation))
    assert _chain(names, mode), names


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("mode", ["ADD", "SUB"])
@pytest.mark.parametrize("broadcast_first", [False, True])
def test_the_chain_broadcasts_either_operand(monkeypatch, accelerator, mode, broadcast_first):
    """A 1 x 1 x C operand against a 7 x 9 x C map, first or second (SUB keeps its order with
    REVERSED_OPERANDS): bit-exact on 2 seeds."""
    monkeypatch.setattr(lower_elementwise, "exact_add_sub_scales", lambda *args: None)
    b = ModelBuilder()
    full = b.add_input("full", (1, 7, 9, 20), "int8", _q(0.071, -7))
    small = b.add_input("small", (1, 1, 1, 20), "int8", _q(0.023, 11))
    z = b.add_tensor("z", (1, 7, 9, 20), "int8", _q(0.09, 3))
    b.add_operator(mode, [small, full] if broadcast_first else [full, small], [z], {"fused_activation_function": "RELU"})
    b.mark_output(z)
    model = b.build()
    compiled = cascader.compile(model, accelerator=accelerator)
    assert compiled.summary().cpu_operators == 0
    assert _chain([op.lowered.name for op in compiled.schedule.operations], mode)
    _bit_exact(model, compiled)


def test_operand_tables_are_the_references_operand_values():
    """The table of the larger-scaled operand is its values shifted by 19 (multiplier 1/2);
    the other's is MultiplyByQuantizedMultiplier of the values shifted by 20."""
    scales = (0.03, 0.05, 0.04)
    m_first, m_second, _ = operand_multipliers(scales)
    assert np.array_equal(operand_table("int8", 5, m_second), (np.arange(-128, 128) - 5) << 19)
    values = np.arange(0, 256) - 131
    assert np.array_equal(operand_table("uint8", 131, m_first),
                          fp.multiply_by_quantized_multiplier(values << 20, *m_first))


# --- MUL -----------------------------------------------------------------------------------


@pytest.mark.parametrize("out_scale, chain", [(1e-25, False), (1e-20, True), (1e-9, True), (1e-6, False)])
def test_mul_beyond_the_single_multiplier_range(out_scale, chain):
    """0.02 x 0.03 into a tiny output scale: left shifts of 73 (9 modulo 32: the product fits,
    one MUL), 56 (24: the product wraps, MUL, SHL, MUL), 28 (wraps) and 10 (fits). These were
    refused ('needs a left shift') or, at 28, silently saturated where the reference wraps."""
    model, inputs = _pair_model("MUL", (0.02, 3), (0.03, -5), (out_scale, 2))
    names = _exact_on_every_pair(model, inputs)
    assert (names == ["0:MUL(mul)", "0:MUL(shl)", "0:MUL(mul)"]) == chain and (names == ["0:MUL"]) != chain, names


@settings(max_examples=10, deadline=None)
@given(dtype=st.sampled_from(["int8", "uint8"]), first=st.tuples(scales, zero_points),
       second=st.tuples(scales, zero_points), log_out=st.floats(min_value=-30.0, max_value=0.0),
       out_zero_point=zero_points, activation=st.sampled_from(["NONE", "RELU"]))
def test_mul_is_exact_for_any_rescale(dtype, first, second, log_out, out_zero_point, activation):
    shift = 128 if dtype == "uint8" else 0
    first, second = ((s, z + shift) for s, z in (first, second))
    _exact_on_every_pair(*_pair_model("MUL", first, second, (10.0**log_out, out_zero_point + shift), dtype,
                                      activation))


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_wrapping_mul_with_a_broadcast_operand(accelerator):
    b = ModelBuilder()
    x = b.add_input("x", (1, 6, 5, 24), "int8", _q(0.05, 1))
    g = b.add_input("g", (1, 1, 1, 24), "int8", _q(0.004, -128))
    z = b.add_tensor("z", (1, 6, 5, 24), "int8", _q(1e-18, 0))
    b.add_operator("MUL", [g, x], [z], {"fused_activation_function": "NONE"})
    b.mark_output(z)
    model = b.build()
    compiled = cascader.compile(model, accelerator=accelerator)
    assert [op.lowered.name for op in compiled.schedule.operations] == ["0:MUL(mul)", "0:MUL(shl)", "0:MUL(mul)"]
    _bit_exact(model, compiled)


@settings(max_examples=200, deadline=None)
@given(x=st.integers(-255, 255), y=st.integers(-255, 255), real=st.floats(min_value=1e-6, max_value=1e25))
def test_reference_multiply_model(x, y, real):
    """The NumPy statement of the reference's MUL (wrap included) against the rescale the single
    NPU MUL computes where the product fits."""
    multiplier, exponent = fp.quantize_multiplier(real)
    expected = reference_multiply(np.array([x]), np.array([y]), multiplier, exponent)[0]
    if product_fits(abs(x * y), exponent) and exponent <= 0:
        assert expected == fp.multiply_by_quantized_multiplier(x * y, multiplier, exponent)


def test_largest_product_bounds_the_wrap():
    values = operand_values("int8", -128)  # 0 .. 255
    assert largest_product(values, values) == 255 * 255
    assert product_fits(255 * 255, 32 + 15) and not product_fits(255 * 255, 32 + 16)
    assert multiply_real(0.5, 0.5, 0.25) == 1.0
