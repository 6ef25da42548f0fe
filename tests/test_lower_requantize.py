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
