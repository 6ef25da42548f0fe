"""MEAN on the NPU: an average pool (or a REDUCE_SUM over the channels) whose output scale folds
in 1/N, as TFLite's reference kernel rescales (bit-exact, where Vela's lowering is one off on
some channels)."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from cascader.bench.simulate import validate  # noqa: E402


def _mean(shape, axes, keep, qi, qo) -> cascader.Model:
    b = ModelBuilder()
    x = b.add_input("x", shape, "int8", quantization(*qi))
    out_shape = [1 if i in axes else d for i, d in enumerate(shape)] if keep else [
        d for i, d in enumerate(shape) if i not in axes]
    y = b.add_tensor("y", out_shape, "int8", quantization(*qo))
    b.add_operator("MEAN", [x, b.add_constant("axes", np.array(axes, np.int32))], [y], {"keep_dims": keep}, version=2)
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("shape, axes, keep", [
    ((1, 7, 7, 64), [1, 2], True),    # the global average pool of classifiers (TFLite's 4D special case)
    ((1, 5, 6, 8), [1, 2], False),
    ((1, 7, 7, 16), [1], True),
    ((1, 16, 3, 3), [3], False),      # over the channels: re-viewed as the pool's width
    ((1, 4, 5, 6), [2, 3], False),
    ((1, 4, 5, 6), [1, 2, 3], True),
    ((1, 10, 20), [2], False),
])
@pytest.mark.parametrize("same_quantization", [False, True])
def test_mean_bit_exact(tmp_path, shape, axes, keep, same_quantization):
    rng = np.random.default_rng(sum(shape) + len(axes))
    qi = (float(rng.uniform(0.01, 0.1)), int(rng.integers(-20, 20)))
    qo = qi if same_quantization else (float(rng.uniform(0.005, 0.1)), int(rng.integers(-20, 20)))
    path = tmp_path / "mean.tflite"
    cascader.save_model(_mean(shape, axes, keep, qi, qo), path)
    compiled = cascader.compile(path)
    assert (compiled.summary().npu_operations, compiled.summary().cpu_operators) == (1, 0)
    result = validate(path, compiled.model, (0, 1, 2))
    assert result.bit_exact, result.details


def test_mean_over_h_and_c_is_bit_exact(tmp_path):
    """H and C around a kept W (Vela leaves it on the CPU): W moved to the front, then one
    REDUCE_SUM over the channels with the rescale."""
    path = tmp_path / "mean.tflite"
    cascader.save_model(_mean((1, 4, 5, 6), [1, 3], True, (0.05, 3), (0.04, -2)), path)
    compiled = cascader.compile(path)
    assert (compiled.summary().npu_operations, compiled.summary().cpu_operators) == (2, 0)
    result = validate(path, compiled.model, (0, 1))
    assert result.bit_exact, result.details


def test_quantize_of_a_3_channel_input_streams_16_channels_wide():
    b = ModelBuilder()
    x = b.add_input("x", (1, 32, 32, 3), "int8", quantization(0.05, 1))
    y = b.add_tensor("y", (1, 32, 32, 3), "int8", quantization(0.04, -3))
    b.add_operator("QUANTIZE", [x], [y])
    z = b.add_tensor("z", (1, 32, 32, 3), "int8", quantization(0.06, 2))
    b.add_operator("ADD", [y, y], [z], {"fused_activation_function": "NONE"}, version=2)
    b.mark_output(z)
    compiled = cascader.compile(b.build())
    copy = next(op for op in compiled.operations[0] if op["kind"] == "pool")
    assert copy["ofm"]["shape"][2] == 16
