"""8-bit activations as NPU table lookups: every table equals the reference kernel's outputs.

An int8 unary operator is a function of 256 input values, so each check is exhaustive for its
quantization: the reference interpreter runs the operator on all 256 codes, and the table must
agree on every one. Hypothesis draws the input range (hence scale and zero point).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader.frontend.lower_lut import lut_table
from cascader.zoo import _single_op_net

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter  # noqa: E402

ALL_CODES = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
CASES = {
    "LOGISTIC": ("logistic", {}, (0.3, 20.0)),
    "TANH": ("tanh", {}, (0.3, 20.0)),
    "EXP": ("exp", {}, (0.3, 6.0)),
    "HARD_SWISH": ("hard_swish", {}, (0.3, 20.0)),
    "LEAKY_RELU": ("leaky_relu", {"alpha": 0.2}, (0.3, 20.0)),
    "LEAKY_RELU_NEGATIVE_ALPHA": ("leaky_relu", {"alpha": -0.7}, (0.3, 20.0)),
}


def _quant(tensor) -> tuple[float, int]:
    return float(tensor.quantization.scale[0]), int(tensor.quantization.zero_point[0])


@pytest.mark.parametrize("case", sorted(CASES))
@settings(max_examples=25, deadline=None)
@given(low=st.floats(0.0, 1.0), high=st.floats(0.0, 1.0), seed=st.integers(0, 3))
def test_table_equals_reference_on_every_code(case, low, high, seed):
    method, params, (smallest, largest) = CASES[case]
    span = lambda u: smallest + u * (largest - smallest)  # noqa: E731
    model = _single_op_net(method, [(1, 256)], seed, "int8", (-span(low), span(high)), **params).build()
    graph = model.main
    op = graph.operators[0]
    expected = ReferenceInterpreter(model).run([ALL_CODES])[0].reshape(-1)
    table = lut_table(op.opcode, _quant(graph.tensors[op.inputs[0]]), _quant(graph.tensors[op.outputs[0]]), "int8",
                      op.options)
    mismatch = np.nonzero(table != expected)[0]
    assert mismatch.size == 0, f"codes {mismatch[:8] - 128}: table {table[mismatch[:8]]}, reference {expected[mismatch[:8]]}"


def test_float_table_maps_an_overflowing_exp_to_the_minimum():
    # TFLite converts a rescaled +inf to INT32_MIN (x86/Arm) before clamping: the minimum.
    table = lut_table("EXP", (1.0, 0), (1e-3, 0), "int8")
    assert table[-1] == -128 and table[128] == 127  # exp(127) overflows float32; exp(0) = 1000 saturates


def test_logistic_compiles_to_one_npu_table_lookup(tmp_path):
    from cascader.bench.simulate import validate

    model = _single_op_net("logistic", [(1, 6, 6, 16)], 0, "int8", (-8.0, 8.0)).build()
    path = tmp_path / "logistic.tflite"
    cascader.save_model(model, path)
    compiled = cascader.compile(path)
    assert compiled.summary().cpu_operators == 0
    assert validate(path, compiled.model, (0, 1)).bit_exact


@pytest.mark.parametrize("method", ["tanh", "logistic"])
@pytest.mark.parametrize("high", [0.7, 3.0, 8.0, 16.0])
def test_int16_tanh_and_logistic_use_the_npu_functions(tmp_path, method, high):
    from cascader.bench.simulate import validate

    model = _single_op_net(method, [(1, 8, 8, 16)], 0, "int16", (-high, high)).build()
    path = tmp_path / f"{method}.tflite"
    cascader.save_model(model, path)
    compiled = cascader.compile(path)
    assert compiled.summary().cpu_operators == 0
    assert compiled.operations[0][0]["activation"]["function"] in (3, 4)
    assert validate(path, compiled.model, (0, 1)).bit_exact
