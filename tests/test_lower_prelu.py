"""PRELU on the NPU: bit-exact for alphas of either sign, one-signed or mixed, below and above 1."""

from __future__ import annotations

import pytest

import cascader
from cascader import zoo

pytest.importorskip("ai_edge_litert")
from cascader.bench.simulate import validate  # noqa: E402


@pytest.mark.parametrize("shape, alpha_range, operations", [
    ((1, 8, 8, 16), (-0.5, 0.5), 4),   # mixed signs: the MIN(x, zp) pass
    ((1, 4, 4, 3), (0.1, 0.9), 3),     # one-signed: the MUL's clamp does it
    ((1, 5, 7, 33), (-2.0, -0.5), 3),
    ((1, 5, 7, 33), (1.5, 3.0), 3),
    ((1, 3, 9, 20), (0.0, 0.3), 3),
])
def test_prelu_bit_exact(tmp_path, shape, alpha_range, operations):
    path = tmp_path / "prelu.tflite"
    cascader.save_model(zoo.prelu(shape, alpha_range, seed=len(shape) + shape[-1]), path)
    compiled = cascader.compile(path)
    summary = compiled.summary()
    assert (summary.npu_operations, summary.cpu_operators) == (operations, 0)
    result = validate(path, compiled.model, (0, 1, 2))
    assert result.bit_exact, result.details


@pytest.mark.parametrize("alpha", [0.2, -0.3, 1.7, -2.0, 0.0])
@pytest.mark.parametrize("same_quantization", [True, False])
def test_int16_leaky_relu_bit_exact(tmp_path, alpha, same_quantization):
    from cascader.zoo import _single_op_net

    model = _single_op_net("leaky_relu", [(1, 8, 8, 16)], 1, "int16", (-5.0, 5.0), alpha=alpha,
                           same_quantization=same_quantization).build()
    path = tmp_path / "leaky_relu.tflite"
    cascader.save_model(model, path)
    compiled = cascader.compile(path)
    # The NPU's LRELU where it applies (equal quantizations, alpha >= 0), else the sign select.
    expected = 1 if same_quantization and alpha >= 0 else 3
    assert (compiled.summary().npu_operations, compiled.summary().cpu_operators) == (expected, 0)
    assert validate(path, compiled.model, (0, 1, 2)).bit_exact
