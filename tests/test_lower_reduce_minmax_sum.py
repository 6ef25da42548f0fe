"""REDUCE_MAX, REDUCE_MIN and SUM on the NPU (`frontend.lower_reduce`), bit-exact against
TFLite's reference kernels on ethos-u55-128 and ethos-u65-256.

LiteRT 2.3's reference SUM runs every quantized input through its uint8 path (it reads int8
and int16 bytes as uint8: `test_litert_sum_reads_int8_as_uint8` pins that), so the reference
judges int8 and int16 SUM on TFLM's kernel (`reference.MICRO_OPERATORS`); `QuantizedMeanOrSum`
transcribed here agrees with it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import cascader
from cascader.frontend.fixed_point import quantize_multiplier
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from cascader import reference  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
SEEDS = (0, 1)


def _reduce(op, shape, axes, keep, dtype, qi, qo, axes_constant=True) -> cascader.Model:
    b = ModelBuilder()
    x = b.add_input("x", shape, dtype, quantization(*qi))
    rank = len(shape)
    hit = {a % rank for a in axes}
    out_shape = [1 if i in hit else d for i, d in enumerate(shape)] if keep else [
        d for i, d in enumerate(shape) if i not in hit]
    y = b.add_tensor("y", out_shape, dtype, quantization(*qo))
    axes_t = (b.add_constant("axes", np.array(axes, np.int32)) if axes_constant
              else b.add_input("axes", (len(axes),), "int32"))
    b.add_operator(op, [x, axes_t], [y], {"keep_dims": keep}, version=2 if dtype != "int16" else 1)
    b.mark_output(y)
    return b.build()


def _inputs(model: cascader.Model, seed: int) -> list[np.ndarray]:
    """Full-range random codes, the first rows at the type's two ends (MIN's -128 edge)."""
    (x,) = reference.random_inputs(model, seed)
    info = np.iinfo(x.dtype)
    flat = x.reshape(-1)
    flat[: max(1, flat.size // 16)] = info.min
    flat[flat.size // 16: flat.size // 8] = info.max
    return [x]


def _mbqm(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier on int64 values."""
    left, right = max(shift, 0), max(-shift, 0)
    ab = (x.astype(np.int64) << left) * multiplier
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(ab + nudge >= 0, (ab + nudge) >> 31, -((-(ab + nudge)) >> 31))
    if right == 0:
        return high
    mask = (1 << right) - 1
    return (high >> right) + ((high & mask) > (mask >> 1) + (high < 0))


def quantized_sum(x: np.ndarray, axes, keep: bool, qi, qo) -> np.ndarray:
    """TFLite's QuantizedMeanOrSum(compute_sum=True): clamp(MBQM(sum - zp_in N, m, e) + zp_out)."""
    axes = tuple(sorted({a % x.ndim for a in axes}))
    n = math.prod(x.shape[a] for a in axes)
    m, e = quantize_multiplier(float(np.float64(np.float32(qi[0])) / np.float64(np.float32(qo[0]))))
    total = x.astype(np.int64).sum(axis=axes, keepdims=keep) - qi[1] * n
    info = np.iinfo(x.dtype)
    return np.clip(_mbqm(total, m, e) + qo[1], info.min, info.max).astype(x.dtype)


def _expected(op, shape, axes, keep, dtype, qi, qo, x: np.ndarray) -> np.ndarray:
    return reference.run(_reduce(op, shape, axes, keep, dtype, qi, qo), [x])[0]


def _check(accelerator, op, shape, axes, keep, dtype, qi, qo, npu_operations=None):
    model = _reduce(op, shape, axes, keep, dtype, qi, qo)
    compiled = cascader.compile(model, accelerator=accelerator)
    summary = compiled.summary()
    assert summary.cpu_operators == 0, compiled.partition.verdicts
    if npu_operations is not None:
        assert summary.npu_operations == npu_operations
    for seed in SEEDS:
        x = _inputs(model, seed)[0]
        got = cascader.simulate(compiled.model, [x])[0]
        want = _expected(op, shape, axes, keep, dtype, qi, qo, x)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}")


QUANTIZATION = {"int8": ((0.05, 3), (0.05, 3)), "uint8": ((0.04, 131), (0.04, 131)), "int16": ((0.001, 0), (0.001, 0))}
# (shape, axes, keep_dims): every axis set of a 4-D map, a 3-D map, negative axes, the batch, and
# reductions longer than one pool window (300 x 300 = 90000 elements: one axis at a time).
AXIS_CASES = [
    ((1, 7, 7, 64), [1, 2], True),
    ((1, 5, 6, 8), [1], False),
    ((1, 5, 6, 8), [2], True),
    ((1, 5, 6, 8), [-1], False),
    ((1, 4, 5, 6), [1, 3], True),  # H and C around a kept W
    ((1, 4, 5, 6), [2, 3], False),
    ((1, 4, 5, 6), [0, 1, 2, 3], False),
    ((1, 300, 1, 5), [1], True),  # a window of 300 rows, past the 256 of a pool's height
    ((6, 10, 20), [0, 2], True),
    ((1, 300, 300, 2), [1, 2], True),
]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape, axes, keep", AXIS_CASES[:7])
def test_min_max_bit_exact(accelerator, op, dtype, shape, axes, keep):
    _check(accelerator, op, shape, axes, keep, dtype, *QUANTIZATION[dtype])


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("shape, axes, keep", AXIS_CASES[7:])
def test_min_max_long_reductions_bit_exact(accelerator, op, shape, axes, keep):
    _check(accelerator, op, shape, axes, keep, "int8", (0.05, -128), (0.05, -128))


def test_min_max_passes():
    """One MAX pool for one window; the minimum between two order reversals; one pool per axis
    past a window."""
    q = ((0.05, 3), (0.05, 3))
    counts = {(op, shape): cascader.compile(_reduce(op, shape, axes, True, "int8", *q)).summary().npu_operations
              for op in ("REDUCE_MAX", "REDUCE_MIN") for shape, axes in [((1, 7, 7, 64), [1, 2]),
                                                                           ((1, 300, 300, 2), [1, 2])]}
    assert counts == {("REDUCE_MAX", (1, 7, 7, 64)): 1, ("REDUCE_MIN", (1, 7, 7, 64)): 3,
                      ("REDUCE_MAX", (1, 300, 300, 2)): 2, ("REDUCE_MIN", (1, 300, 300, 2)): 4}


SUM_QUANTIZATION = {
    "int8": [((0.05, 3), (0.3, -5)), ((0.02, -128), (0.02, -128)), ((0.5, 10), (0.001, 0))],
    "uint8": [((0.04, 131), (0.5, 120)), ((0.04, 0), (0.04, 0))],
    "int16": [((0.001, 0), (0.01, 0)), ((0.002, 0), (0.002, 0))],
}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype, q", [(d, q) for d, qs in SUM_QUANTIZATION.items() for q in qs])
@pytest.mark.parametrize("shape, axes, keep", AXIS_CASES[:8])
def test_sum_bit_exact(accelerator, dtype, q, shape, axes, keep):
    _check(accelerator, "SUM", shape, axes, keep, dtype, *q)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("shape, axes, keep", AXIS_CASES[8:])
def test_sum_long_reductions_bit_exact(accelerator, dtype, shape, axes, keep):
    """Past one window: transposed so the reduced elements come last, exact int32 partial sums
    of at most 65535 of them, and their rescaled sum."""
    _check(accelerator, "SUM", shape, axes, keep, dtype, *SUM_QUANTIZATION[dtype][0])


@pytest.mark.parametrize("op", ["SUM", "REDUCE_MAX", "REDUCE_MIN"])
def test_reduction_over_the_batch_alone_is_a_copy(op):
    q = ((0.05, 3), (0.3, -5)) if op == "SUM" else ((0.05, 3), (0.05, 3))
    _check("ethos-u55-128", op, (1, 5, 6, 8), [0], True, "int8", *q, npu_operations=1 if op != "REDUCE_MIN" else 3)


@pytest.mark.parametrize("dtype, qi, qo", [("int8", (0.05, 3), (0.3, -5)), ("int16", (0.001, 0), (0.01, 0))])
def test_quantized_sum_transcription_matches_the_reference(dtype, qi, qo):
    pytest.importorskip("tflite_micro")
    shape, axes = (1, 4, 5, 6), [1, 3]
    x = reference.random_inputs(_reduce("SUM", shape, axes, True, dtype, qi, qo), 0)[0]
    np.testing.assert_array_equal(quantized_sum(x, axes, True, qi, qo),
                                  _expected("SUM", shape, axes, True, dtype, qi, qo, x))


def test_litert_sum_reads_int8_as_uint8():
    """Why int8 SUM is judged on TFLM: LiteRT's reference kernel clamps it to uint8. When
    LiteRT fixes it, this fails, and SUM can leave `reference.MICRO_OPERATORS`."""
    shape, axes, qi, qo = (1, 2, 2, 3), [1, 2], (0.05, 0), (0.05, 0)
    x = -np.arange(12, dtype=np.int8).reshape(shape)
    model = _reduce("SUM", shape, axes, True, "int8", qi, qo)
    litert = reference.ReferenceInterpreter(model, engine="reference").run([x])[0]
    assert quantized_sum(x, axes, True, qi, qo).reshape(-1).tolist() == [-18, -22, -26]
    assert litert.reshape(-1).tolist() == [-1, -1, -1]  # 750, 1002, 1254 as uint8 sums, clamped to 255
    pytest.importorskip("tflite_micro")
    assert reference.run(model, [x])[0].reshape(-1).tolist() == [-18, -22, -26]


@pytest.mark.parametrize("op, dtype, qi, qo, axes_constant, shape, rule", [
    ("REDUCE_MAX", "int8", (0.05, 3), (0.1, 3), True, (1, 7, 7, 8), "reduce_min_max_quantization"),
    ("REDUCE_MIN", "int8", (0.05, 3), (0.05, 4), True, (1, 7, 7, 8), "reduce_min_max_quantization"),
    ("SUM", "int8", (0.05, 3), (0.3, 0), False, (1, 7, 7, 8), "reduce_axes_constant"),
    ("SUM", "int32", (1.0, 0), (1.0, 0), True, (1, 7, 7, 8), "data_type"),
    ("SUM", "int16", (0.001, 0), (0.01, 0), True, (1, 300, 300, 1), "lowering"),  # may overflow TFLite's int32 sum
])
def test_stays_on_the_cpu_with_a_reason(op, dtype, qi, qo, axes_constant, shape, rule):
    model = _reduce(op, shape, [1, 2], True, dtype, qi, qo, axes_constant=axes_constant)
    compiled = cascader.compile(model)
    verdict = compiled.partition.verdicts[0]
    assert compiled.summary().cpu_operators == 1 and not verdict.npu
    assert verdict.rule == rule, verdict
    if rule == "lowering":
        assert "overflow" in verdict.reason
