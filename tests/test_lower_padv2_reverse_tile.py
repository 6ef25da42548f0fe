"""PADV2, TILE and REVERSE_V2 on the NPU as raw copies (and, for reversed channels, one
permuting 1x1 convolution), bit-exact against the reference interpreter on ethos-u55-128 and
ethos-u65-256 for input seeds 0 and 1, at their edges: every axis, large pads, multiples
that are and are not powers of two, ranks 1 to 4, int8, uint8 and int16. What stays on the
CPU says why."""

from __future__ import annotations

import math

import numpy as np
import pytest

import cascader
from cascader import zoo
from cascader.frontend.lowered import TYPE_RANGE
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from test_lower_movement import _check as check_bit_exact  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
# uint8 is TFLite's older quantization: the zoo builds int8 and int16, these tests build uint8.
Q = {"int8": quantization(0.05, 3), "uint8": quantization(0.05, 131), "int16": quantization(0.002, 0)}
VERSION = {"PADV2": {"uint8": 1, "int8": 2, "int16": 4}, "TILE": {"uint8": 1, "int8": 1, "int16": 1},
           "REVERSE_V2": {"uint8": 2, "int8": 2, "int16": 3}}


def one_op(opcode: str, shape, out_shape, params, dtype: str = "uint8", value=None, value_q=None,
           param_dtype: str = "int32") -> cascader.Model:
    """input -> `opcode`(input, params[, value]) -> output, every map quantized alike."""
    b = ModelBuilder()
    x = b.add_input("x", shape, dtype, Q[dtype])
    y = b.add_tensor("y", out_shape, dtype, Q[dtype])
    inputs = [x, b.add_constant("params", np.asarray(params, param_dtype), param_dtype)]
    if value is not None:
        inputs.append(b.add_constant("value", np.asarray([value], dtype), dtype, value_q or Q[dtype]))
    b.add_operator(opcode, inputs, [y], {}, version=VERSION[opcode][dtype])
    b.mark_output(y)
    return b.build()


def padded(shape, pads) -> tuple[int, ...]:
    return tuple(d + before + after for d, (before, after) in zip(shape, pads))


def _check(tmp_path, model: cascader.Model, accelerator: str, operations: int | None = None) -> None:
    check_bit_exact(tmp_path, model, operations, accelerator)


def _cpu_reason(model: cascader.Model) -> str:
    (op,) = cascader.inspect(model).operators
    assert op.target == "CPU"
    return op.reason


# --- PADV2 ----------------------------------------------------------------------------------

def _borders(pads) -> int:
    """The border boxes PADV2 fills: one per padded side of H, W and C."""
    return sum(1 for pair in pads[-3:] for p in pair if p)


PADV2_CASES = [
    # (shape, paddings, value as a fraction of the type's range)
    ((1, 4, 5, 6), ((0, 0), (1, 2), (0, 0), (0, 0)), 0.9),  # H only
    ((1, 4, 5, 6), ((0, 0), (0, 0), (3, 1), (0, 0)), -1.0),  # W only, the type's minimum
    ((1, 4, 5, 6), ((0, 0), (0, 0), (0, 0), (2, 5)), 1.0),  # C only, the type's maximum
    ((1, 3, 4, 5), ((0, 0), (40, 3), (0, 70), (2, 33)), 0.25),  # large pads on every axis
    ((1, 1, 1, 1), ((0, 0), (2, 0), (0, 2), (1, 1)), -0.5),
    ((5, 6, 7), ((1, 1), (0, 2), (3, 0)), 0.1),  # rank 3
    ((6, 20), ((2, 3), (4, 1)), -0.3),  # rank 2
    ((17,), ((5, 9),), 0.6),  # rank 1
]


def _value(dtype: str, fraction: float) -> int:
    lo, hi = TYPE_RANGE[dtype]
    return int(np.clip(round((lo + hi) / 2 + fraction * (hi - lo) / 2), lo, hi))


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape,pads,fraction", PADV2_CASES)
def test_padv2_is_bit_exact(tmp_path, accelerator, dtype, shape, pads, fraction):
    model = one_op("PADV2", shape, padded(shape, pads), pads, dtype, value=_value(dtype, fraction))
    _check(tmp_path, model, accelerator, operations=1 + _borders(pads))


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_padv2_without_a_value_pads_with_the_zero_point(tmp_path, accelerator):
    pads = ((0, 0), (1, 0), (2, 2), (0, 3))
    _check(tmp_path, one_op("PADV2", (1, 3, 3, 4), padded((1, 3, 3, 4), pads), pads, "uint8"), accelerator, 1 + 4)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_zoo_padv2(tmp_path, accelerator, dtype):
    model = zoo.padv2((1, 6, 7, 8), ((0, 0), (2, 1), (1, 3), (0, 0)), value=0.7, dtype=dtype, seed=1)
    _check(tmp_path, model, accelerator, operations=5)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_padv2_reads_a_strided_slice_in_place(tmp_path, accelerator):
    # Every other column of the input, padded: the PADV2 reads the slice's view, no copy first.
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 10, 8), "int8", Q["int8"])
    s = b.add_tensor("s", (1, 4, 5, 8), "int8", Q["int8"])
    consts = [b.add_constant(n, np.asarray(p, np.int32)) for n, p in
              (("begin", [0, 0, 1, 0]), ("end", [1, 4, 10, 8]), ("strides", [1, 1, 2, 1]))]
    b.add_operator("STRIDED_SLICE", [x, *consts], [s], {}, version=2)
    y = b.add_tensor("y", (1, 6, 5, 8), "int8", Q["int8"])
    pads = b.add_constant("pads", np.asarray([[0, 0], [1, 1], [0, 0], [0, 0]], np.int32))
    value = b.add_constant("value", np.asarray([-7], np.int8), "int8", Q["int8"])
    b.add_operator("PADV2", [s, pads, value], [y], {}, version=2)
    b.mark_output(y)
    _check(tmp_path, b.build(), accelerator, operations=3)


def test_padv2_the_npu_cannot_take_stays_on_the_cpu():
    pads = ((1, 0), (1, 1), (0, 0), (0, 0))
    assert "batch" in _cpu_reason(one_op("PADV2", (1, 3, 3, 4), padded((1, 3, 3, 4), pads), pads, "int8", value=1))
    pads = ((0, 0), (1, 1), (0, 0), (0, 0))
    other = quantization(0.1, 3)
    reason = _cpu_reason(one_op("PADV2", (1, 3, 3, 4), padded((1, 3, 3, 4), pads), pads, "int8", value=1,
                                value_q=other))
    assert "not quantized as the output" in reason
    # The pad value as a model input: computed at run time.
    b = ModelBuilder()
    x = b.add_input("x", (1, 3, 3, 4), "int8", Q["int8"])
    value = b.add_input("value", (1,), "int8", Q["int8"])
    y = b.add_tensor("y", (1, 5, 3, 4), "int8", Q["int8"])
    b.add_operator("PADV2", [x, b.add_constant("pads", np.asarray(pads, np.int32)), value], [y], {}, version=2)
    b.mark_output(y)
    reasons = [o.reason for o in cascader.inspect(b.build()).operators]
    assert any("pad value is computed at run time" in r for r in reasons if r)
    int32 = ModelBuilder()
    x = int32.add_input("x", (1, 3, 3, 4), "int32", quantization(1.0, 0))
    y = int32.add_tensor("y", (1, 5, 3, 4), "int32", quantization(1.0, 0))
    int32.add_operator("PADV2", [x, int32.add_constant("pads", np.asarray(pads, np.int32)),
                                 int32.add_constant("value", np.asarray([5], np.int32))], [y], {}, version=2)
    int32.mark_output(y)
    assert "int32" in _cpu_reason(int32.build())


# --- TILE -----------------------------------------------------------------------------------

def _tile_operations(multiples) -> int:
    return 1 + sum(math.ceil(math.log2(m)) for m in multiples)


TILE_CASES = [
    ((1, 4, 5, 6), (1, 3, 1, 1)),  # H
    ((1, 4, 5, 6), (1, 1, 5, 1)),  # W
    ((1, 4, 5, 6), (1, 1, 1, 8)),  # C, a power of two
    ((1, 3, 2, 5), (1, 7, 6, 3)),  # every axis
    ((1, 2, 3, 4), (1, 1, 1, 1)),  # a copy
    ((1, 1, 1, 1), (1, 33, 20, 70)),  # one element to many
    ((4, 5, 6), (2, 3, 2)),  # rank 3
    ((4, 6), (5, 3)),  # rank 2
    ((7,), (9,)),  # rank 1
]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape,multiples", TILE_CASES)
def test_tile_is_bit_exact(tmp_path, accelerator, dtype, shape, multiples):
    out = tuple(d * m for d, m in zip(shape, multiples))
    _check(tmp_path, one_op("TILE", shape, out, multiples, dtype), accelerator, _tile_operations(multiples))


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_zoo_tile(tmp_path, accelerator, dtype):
    _check(tmp_path, zoo.tile((1, 3, 4, 6), (1, 2, 3, 2), dtype=dtype, seed=1), accelerator, 1 + 1 + 2 + 1)


def test_int64_multiples(tmp_path):
    model = one_op("TILE", (1, 3, 4, 5), (1, 6, 4, 15), (1, 2, 1, 3), "int8", param_dtype="int64")
    _check(tmp_path, model, "ethos-u55-128", 1 + 1 + 2)


def test_tile_the_npu_cannot_take_stays_on_the_cpu():
    assert "tiles the batch" in _cpu_reason(one_op("TILE", (1, 3, 4, 5), (2, 3, 4, 5), (2, 1, 1, 1), "int8"))
    b = ModelBuilder()
    x = b.add_input("x", (1, 3, 4, 5), "int32", quantization(1.0, 0))
    y = b.add_tensor("y", (1, 6, 4, 5), "int32", quantization(1.0, 0))
    b.add_operator("TILE", [x, b.add_constant("m", np.asarray([1, 2, 1, 1], np.int32))], [y], {}, version=1)
    b.mark_output(y)
    assert "int32" in _cpu_reason(b.build())


# --- REVERSE_V2 -----------------------------------------------------------------------------

def _reverse_operations(shape, axes) -> int:
    """Rows or columns one copy each, the channels one convolution, size-1 axes nothing."""
    rank = len(shape)
    hwc = [a % rank + 3 - rank if rank < 4 else a % rank - 1 for a in axes]
    work = [1 if k == 2 else shape[a] for k, a in zip(hwc, axes) if k >= 0 and shape[a] > 1]
    return sum(work) or 1


REVERSE_CASES = [
    ((1, 4, 5, 6), [1]),  # H
    ((1, 4, 5, 6), [2]),  # W
    ((1, 4, 5, 6), [3]),  # C
    ((1, 4, 5, 6), [-1]),
    ((1, 3, 4, 40), [2, 3]),  # W and C
    ((1, 3, 4, 5), [3, 1, 2]),  # every axis, in any order
    ((1, 4, 5, 6), [0]),  # the batch (of 1)
    ((1, 1, 5, 6), [1]),  # an axis of size 1
    ((3, 5, 7), [0, 1]),  # rank 3
    ((6, 20), [1]),  # rank 2
    ((300,), [0]),  # rank 1: 300 channels
]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape,axes", REVERSE_CASES)
def test_reverse_v2_is_bit_exact(tmp_path, accelerator, dtype, shape, axes):
    _check(tmp_path, one_op("REVERSE_V2", shape, shape, axes, dtype), accelerator, _reverse_operations(shape, axes))


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_zoo_reverse_v2(tmp_path, accelerator, dtype):
    _check(tmp_path, zoo.reverse_v2((1, 3, 5, 16), [2, 3], dtype=dtype, seed=1), accelerator, 5 + 1)


def test_reverse_v2_the_npu_cannot_take_stays_on_the_cpu():
    # TFLite's kernel stops on these two: the NPU must not run them either.
    assert "contiguous" in _cpu_reason(one_op("REVERSE_V2", (1, 3, 4, 5), (1, 3, 4, 5), [1, 3], "int8"))
    assert "int64" in _cpu_reason(one_op("REVERSE_V2", (1, 3, 4, 5), (1, 3, 4, 5), [1], "int8", param_dtype="int64"))
    b = ModelBuilder()
    x = b.add_input("x", (1, 3, 4, 5), "int32", quantization(1.0, 0))
    y = b.add_tensor("y", (1, 3, 4, 5), "int32", quantization(1.0, 0))
    b.add_operator("REVERSE_V2", [x, b.add_constant("axis", np.asarray([1], np.int32))], [y], {}, version=1)
    b.mark_output(y)
    assert "int32" in _cpu_reason(b.build())


def test_deep_channels_reverse_one_by_one(tmp_path):
    # Past 1024 channels the permuting convolution's weights (C x C) give way to per-channel copies.
    _check(tmp_path, one_op("REVERSE_V2", (1, 1, 2, 1100), (1, 1, 2, 1100), [3], "int8"), "ethos-u55-128", 1100)
