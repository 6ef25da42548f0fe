"""Requantizing copies (QUANTIZE between integer types, RELU/RELU6 between quantizations) round
as TFLite's MultiplyByQuantizedMultiplier does: bit-exact against the reference interpreter for
drawn scale pairs (one rounding instead of two is off by one on a quarter of the codes for
some of them, e.g. 0.02166 -> 0.04563)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from test_lower_movement import _check  # noqa: E402


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(opcode=st.sampled_from(["QUANTIZE", "RELU", "RELU6"]), s_in=st.floats(0.005, 0.2), s_out=st.floats(0.005, 0.2),
       zp_in=st.integers(-128, 127), zp_out=st.integers(-128, 127))
@example(opcode="QUANTIZE", s_in=0.02166029, s_out=0.0456309, zp_in=-128, zp_out=6)
def test_requantizing_copies_are_bit_exact(tmp_path, opcode, s_in, s_out, zp_in, zp_out):
    b = ModelBuilder()
    q_in = quantization(s_in, zp_in)
    x = b.add_input("x", (1, 16, 16, 16), "int8", q_in)
    # A MAXIMUM first: a lone requantization stays on the CPU (an NPU launch would cost more).
    m = b.add_tensor("m", (1, 16, 16, 16), "int8", q_in)
    b.add_operator("MAXIMUM", [x, x], [m], version=2)
    y = b.add_tensor("y", (1, 16, 16, 16), "int8", quantization(s_out, zp_out))
    b.add_operator(opcode, [m], [y], version=2)
    b.mark_output(y)
    _check(tmp_path, b.build(), operations=2)


def test_streamed_copy_takes_the_shape_the_cycle_model_costs_least(tmp_path):
    """A 224 x 224 x 3 requantization streams 16 channels at a time. As 147 x 64 x 16 (the
    widest rows) it costs a third more on U65-256 than as 224 x 42 x 16: the schedule picks the
    shape per accelerator, and the copy stays bit-exact."""
    import cascader
    from cascader.bench.simulate import validate

    b = ModelBuilder()
    x = b.add_input("x", (1, 224, 224, 3), "int8", quantization(0.02, -3))
    m = b.add_tensor("m", (1, 224, 224, 3), "int8", quantization(0.03, 5))
    b.add_operator("QUANTIZE", [x], [m], version=2)
    y = b.add_tensor("y", (1, 224, 224, 3), "int8", quantization(0.03, 5))
    b.add_operator("MAXIMUM", [m, m], [y], version=2)
    b.mark_output(y)
    path = tmp_path / "requantize.tflite"
    cascader.save_model(b.build(), path)
    compiled = cascader.compile(path, accelerator="ethos-u65-256")
    copy = compiled.schedule.operations[0].lowered
    assert copy.ofm.shape[2] == 16 and copy.ofm.shape[1] != 64
    # The model's input is in DRAM beside the dedicated SRAM, the copy in SRAM.
    kw = dict(kernel=1, accelerator="ethos-u65-256", ifm_memory="Dram", ofm_memory="Sram")
    widest = cascader.estimate_op("avg_pool", (1, 147, 64, 16), (1, 147, 64, 16), **kw)
    chosen = cascader.estimate_op("avg_pool", (1, *copy.ofm.shape), (1, *copy.ofm.shape), **kw)
    assert chosen.total_cycles < 0.99 * widest.total_cycles
    assert validate(path, compiled.model, (0,)).bit_exact
