"""MINIMUM, MAXIMUM and ABS as single NPU elementwise operations, bit-exact against the
reference interpreter for drawn shapes, broadcasts, types and quantizations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cascader
from cascader.frontend.lower_minmax import abs_scale
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from test_lower_movement import _check  # noqa: E402

FAST = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}
# MAXIMUM/MINIMUM: int8 and int16 since version 2 (int16 from 4), uint8 from 1.
VERSION = {"int8": 2, "uint8": 1, "int16": 4}


def _sub_ops(compiled) -> list[str]:
    return [op["sub_op"] for ops in compiled.operations for op in ops if op["kind"] == "elementwise"]


@st.composite
def quantizations(draw, dtype: str):
    scale = draw(st.floats(1e-3, 0.5))
    if dtype == "int16":
        return quantization(scale, 0)
    lo, hi = RANGES[dtype]
    return quantization(scale, draw(st.integers(lo, hi)))


@st.composite
def min_max_cases(draw):
    """(opcode, dtype, first shape, second shape, output shape, three quantizations, constant second?)."""
    dtype = draw(st.sampled_from(["int8", "uint8", "int16"]))
    h, w, c = draw(st.integers(1, 6)), draw(st.integers(1, 7)), draw(st.integers(1, 20))
    full = (1, h, w, c)
    small = draw(st.sampled_from([full, (1, 1, 1, c), (1, h, 1, c), (1, 1, w, 1), (1, 1, 1, 1), (c,)]))
    first, second = (small, full) if draw(st.booleans()) else (full, small)
    qs = [draw(quantizations(dtype)) for _ in range(3)]
    return draw(st.sampled_from(["MINIMUM", "MAXIMUM"])), dtype, first, second, full, qs, draw(st.booleans())


@FAST
@given(case=min_max_cases())
def test_min_max_any_quantization_and_broadcast(tmp_path, case):
    opcode, dtype, first, second, out_shape, (qa, qb, qo), constant = case
    b = ModelBuilder()
    x = b.add_input("a", first, dtype, qa)
    if constant:  # a constant operand (MAXIMUM(x, 0) is a ReLU) is read from flash
        lo, hi = RANGES[dtype]
        data = np.random.default_rng(1).integers(lo, hi, size=second, endpoint=True)
        y = b.add_constant("b", data.astype(dtype), dtype, qb)
    else:
        y = b.add_input("b", second, dtype, qb)
    z = b.add_tensor("z", out_shape, dtype, qo)
    b.add_operator(opcode, [x, y], [z], version=VERSION[dtype])
    b.mark_output(z)
    compiled = _check(tmp_path, b.build(), operations=1)
    assert _sub_ops(compiled) == ["MIN" if opcode == "MINIMUM" else "MAX"]


def test_maximum_with_a_zero_constant_is_a_relu(tmp_path):
    b = ModelBuilder()
    q = quantization(0.1, -7)
    x = b.add_input("x", (1, 5, 5, 16), "int8", q)
    zero = b.add_constant("zero", np.array([-7], np.int8), "int8", q)
    y = b.add_tensor("y", (1, 5, 5, 16), "int8", q)
    b.add_operator("MAXIMUM", [x, zero], [y], version=2)
    b.mark_output(y)
    _check(tmp_path, b.build(), operations=1)


def test_min_max_that_broadcasts_both_operands_stays_on_the_cpu():
    b = ModelBuilder()
    q = quantization(0.1, 0)
    x = b.add_input("x", (1, 4, 1, 8), "int8", q)
    y = b.add_input("y", (1, 1, 5, 8), "int8", q)
    z = b.add_tensor("z", (1, 4, 5, 8), "int8", q)
    b.add_operator("MINIMUM", [x, y], [z], version=2)
    b.mark_output(z)
    (op,) = cascader.inspect(b.build()).operators
    assert op.target == "CPU" and "output's shape" in op.reason


@FAST
@given(dtype=st.sampled_from(["int8", "int16"]), same=st.booleans(), data=st.data(),
       shape=st.sampled_from([(1, 4, 5, 16), (1, 3, 7), (2, 33), (1, 1, 1, 5)]))
def test_abs_with_and_without_rescale(tmp_path, dtype, same, data, shape):
    qi = data.draw(quantizations(dtype))
    qo = qi if same else data.draw(quantizations(dtype))
    b = ModelBuilder()
    x = b.add_input("x", shape, dtype, qi)
    y = b.add_tensor("y", shape, dtype, qo)
    b.add_operator("ABS", [x], [y], version=2 if dtype == "int8" else 3)
    b.mark_output(y)
    compiled = _check(tmp_path, b.build(), operations=1)
    assert _sub_ops(compiled) == ["ABS"]


def test_abs_scale_is_formed_in_float32():
    assert abs_scale(0.1, 0.1) == (1, 0)
    # 0.3 / 0.7 in float32 and in double differ in the multiplier's last bits.
    m, shift = abs_scale(0.3, 0.7)
    assert m * 2.0**-shift == pytest.approx(float(np.float32(0.3) / np.float32(0.7)), rel=1e-9)


def test_mixed_types_stay_on_the_cpu():
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 8), "int8", quantization(0.1, 0))
    y = b.add_tensor("y", (1, 4, 4, 8), "int16", quantization(0.1, 0))
    b.add_operator("ABS", [x], [y], version=2)
    b.mark_output(y)
    (op,) = cascader.inspect(b.build()).operators
    assert op.target == "CPU" and "one data type" in op.reason
