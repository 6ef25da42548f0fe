"""Resizes by 2 on the NPU: nearest through the IFM upscale, bilinear with half-pixel centres
as sums of the upscaled input (8-bit) or four phase convolutions over an edge-replicated copy
(int16); bit-exact against the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.lowering import lower
from cascader.reference import ReferenceInterpreter, random_inputs
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from test_lower_movement import Q, _check  # noqa: E402


@pytest.mark.parametrize("half_pixel", [False, True])
def test_resize_nearest_2x(tmp_path, half_pixel):
    b = ModelBuilder()
    x = b.add_input("x", (1, 6, 5, 24), "int8", Q)
    y = b.add_tensor("y", (1, 12, 10, 24), "int8", Q)
    size = b.add_constant("size", np.array([12, 10], np.int32))
    b.add_operator("RESIZE_NEAREST_NEIGHBOR", [x, size], [y], {"half_pixel_centers": half_pixel},
                   version=3 if half_pixel else 2)
    b.mark_output(y)
    _check(tmp_path, b.build(), operations=1)


def test_align_corners_resize_stays_on_the_cpu():
    b = ModelBuilder()
    x = b.add_input("x", (1, 6, 5, 24), "int8", Q)
    y = b.add_tensor("y", (1, 12, 10, 24), "int8", Q)
    b.add_operator("RESIZE_NEAREST_NEIGHBOR", [x, b.add_constant("size", np.array([12, 10], np.int32))], [y],
                   {"align_corners": True}, version=2)
    b.mark_output(y)
    compiled = cascader.compile(b.build())
    assert compiled.summary().cpu_operators == 1


def _bilinear(shape, dtype, half_pixel):
    b = ModelBuilder()
    q = quantization(0.05, {"int8": 3, "uint8": 128, "int16": 0}[dtype])
    x = b.add_input("x", shape, dtype, q)
    _, h, w, c = shape
    y = b.add_tensor("y", (1, 2 * h, 2 * w, c), dtype, q)
    b.add_operator("RESIZE_BILINEAR", [x, b.add_constant("size", np.array([2 * h, 2 * w], np.int32))], [y],
                   {"half_pixel_centers": half_pixel}, version=3 if half_pixel else 2)
    b.mark_output(y)
    return b.build()


SHAPES = [(1, 1, 1, 3), (1, 6, 6, 64), (1, 3, 5, 17), (1, 1, 5, 8), (1, 4, 1, 8)]


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
@pytest.mark.parametrize("half_pixel", [False, True])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape", SHAPES)
def test_resize_bilinear_2x(tmp_path, accelerator, half_pixel, dtype, shape):
    # half-pixel centres: 5 edge copies and 4 phases; without, one upscaled average; a 1x1
    # input is one broadcast
    _, h, w, _ = shape
    _check(tmp_path, _bilinear(shape, dtype, half_pixel), operations=9 if half_pixel and (h, w) != (1, 1) else 1,
           accelerator=accelerator)


def _least_scratch_compile(model, accelerator):
    """`model` compiled from its least-scratch lowering (`cascader.compile` takes it only where
    the budget needs it), no budget."""
    from cascader.compiler import _compile_within, _prepare
    from cascader.progress import progress

    bar = progress(total=4, enabled=False)
    return _compile_within(_prepare(model, accelerator, None, None, "performance", bar, least_scratch=True), None,
                           "performance", bar, 0.0)


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape", SHAPES[1:] + [(1, 2, 2, 1), (1, 9, 7, 33)])
def test_least_scratch_bilinear_2x_is_three_whole_buffer_operations(accelerator, dtype, shape):
    """Half-pixel centres, as the least-scratch lowering makes it for a cascade: 8-bit maps in
    the pair sums, their edge averages and the rescale; int16 ones keep the copies and phases."""
    model = _bilinear(shape, dtype, True)
    _, segments = lower(model, least_scratch=True)
    (seg,) = segments
    assert len(seg.operations) == (3 if dtype != "int16" else 9)
    if dtype != "int16":  # each writes a buffer of its own whole (the phases write every other row and column)
        _, h, w, _ = shape
        sums, averages, rescale = seg.operations
        assert [(op.ofm.offset, op.ofm.shape[:2]) for op in (sums, averages)] == [
            (0, (2 * h - 1, 2 * w - 1)), (0, (2 * h, 2 * w))]
        assert rescale.ofm.offset == 0 and np.prod(rescale.ofm.shape) == np.prod(averages.ofm.shape)
        assert len({op.ofm.buffer for op in seg.operations}) == 3
    compiled = _least_scratch_compile(model, accelerator)
    assert compiled.summary().npu_operations == len(seg.operations)
    for seed in (0, 1):
        inputs = random_inputs(model, seed=seed)
        np.testing.assert_array_equal(cascader.simulate(compiled, inputs)[0], ReferenceInterpreter(model).run(inputs)[0])


def test_bilinear_other_factors_stay_on_the_cpu():
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 8), "int8", Q)
    y = b.add_tensor("y", (1, 12, 12, 8), "int8", Q)
    b.add_operator("RESIZE_BILINEAR", [x, b.add_constant("size", np.array([12, 12], np.int32))], [y], version=2)
    b.mark_output(y)
    compiled = cascader.compile(b.build())
    assert compiled.summary().cpu_operators == 1


@pytest.mark.parametrize("opcode", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
@pytest.mark.parametrize("flags", [{"align_corners": True}, {"half_pixel_centers": True}, {}])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_resize_of_one_pixel_is_a_broadcast(tmp_path, opcode, flags, dtype):
    """DeepLabV3's 1x1 -> 33x33 (align_corners): every output pixel is the input pixel, as one
    ADD of the broadcast input to zeros."""
    b = ModelBuilder()
    q = quantization(0.05, 3 if dtype == "int8" else 128)
    x = b.add_input("x", (1, 1, 1, 40), dtype, q)
    y = b.add_tensor("y", (1, 33, 17, 40), dtype, q)
    b.add_operator(opcode, [x, b.add_constant("size", np.array([33, 17], np.int32))], [y], flags,
                   version=3 if flags.get("half_pixel_centers") else 2)
    b.mark_output(y)
    _check(tmp_path, b.build(), operations=1)
