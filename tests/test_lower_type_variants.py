"""Type and quantization variants on the NPU, bit-exact against the reference interpreter on two
seeds, on ethos-u55-128 and ethos-u65-256, at their edges:

- MEAN on uint8 and int16 (TFLite's one QuantizedMeanOrSum for all three types), up to the
  2^16 int16 elements whose sum reaches -2^31 exactly (Vela's int16 limit);
- RESIZE_BILINEAR on int16 (the phase convolutions with the 40-bit accumulator);
- AVERAGE_POOL_2D whose input and output quantizations differ: the reference averages the codes
  and reads the output quantization only for the fused activation's bounds (Vela rescales);
- PRELU on int16 with TFLite's int8 alpha (an int16 alpha stays on the CPU, with the reason);
- int16 EXP whose table has neighbouring entries further apart than int16 holds, where the
  reference's interpolation wraps and a single NPU lookup would saturate (a lookup of the
  table less an offset, the offset added back and wrapped).
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.frontend.lower_lut import int16_samples, lookup_offset
from cascader.tflite.builder import ModelBuilder, quantization
from conftest import compile_exact

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
NUMPY = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16}


def _q(dtype: str, scale: float, zero_point: int):
    """int16 feature maps are symmetric; uint8 zero points sit 128 above int8's."""
    return quantization(scale, 0 if dtype == "int16" else zero_point + (128 if dtype == "uint8" else 0))


def _single(opcode: str, dtype: str, in_shape, out_shape, qi, qo, extra=(), options=None, version=1) -> cascader.Model:
    """One `opcode` from input x (plus the constant `extra` inputs) to output y."""
    b = ModelBuilder()
    x = b.add_input("x", in_shape, dtype, qi)
    inputs = [x] + [b.add_constant(name, data, *rest) for name, data, *rest in extra]
    y = b.add_tensor("y", out_shape, dtype, qo)
    b.add_operator(opcode, inputs, [y], options or {}, version=version)
    b.mark_output(y)
    return b.build()


def _cpu_reason(model) -> str:
    compiled = cascader.compile(model)
    assert compiled.summary().cpu_operators == 1
    return compiled.partition.verdicts[0].reason


# --- MEAN ---------------------------------------------------------------------------------


def _mean(dtype, shape, axes, keep, qi, qo):
    out_shape = [1 if i in axes else d for i, d in enumerate(shape)] if keep else [
        d for i, d in enumerate(shape) if i not in axes]
    return _single("MEAN", dtype, shape, out_shape, _q(dtype, *qi), _q(dtype, *qo),
                   [("axes", np.array(axes, np.int32))], {"keep_dims": keep}, version=2)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype", ["uint8", "int16"])
@pytest.mark.parametrize("shape, axes, keep", [
    ((1, 7, 7, 64), [1, 2], True),    # a classifier's global average pool
    ((1, 16, 3, 3), [3], False),      # over the channels
    ((1, 4, 5, 6), [1, 3], True),     # H and C around a kept W: W moved to the front first
    ((1, 10, 20), [2], False),
])
def test_mean(tmp_path, accelerator, dtype, shape, axes, keep):
    compile_exact(tmp_path, _mean(dtype, shape, axes, keep, (0.05, 3), (0.03, -7)), accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_int16_mean_of_65536_elements_reaches_int32_minimum(tmp_path, accelerator):
    """2^16 codes of -32768 sum to -2^31, which int32 holds: Vela's int16 limit, on the NPU
    (partial sums of two runs, then their rescaled sum), exact at both ends of the range."""
    model = _mean("int16", (1, 256, 256, 1), [1, 2], True, (0.05, 0), (0.04, 0))
    compiled = compile_exact(tmp_path, model, accelerator)
    for code in (-32768, 32767):
        x = np.full((1, 256, 256, 1), code, np.int16)
        assert np.array_equal(cascader.simulate(compiled, [x])[0], ReferenceInterpreter(model).run([x])[0])


def test_int16_mean_beyond_the_int32_sum_stays_on_the_cpu():
    reason = _cpu_reason(_mean("int16", (1, 257, 256, 1), [1, 2], True, (0.05, 0), (0.04, 0)))
    assert "overflow TFLite's int32 accumulator" in reason


# --- RESIZE_BILINEAR ----------------------------------------------------------------------


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("half_pixel", [False, True])
@pytest.mark.parametrize("shape", [(1, 1, 1, 3), (1, 6, 6, 64), (1, 3, 5, 17), (1, 9, 2, 1)])
def test_int16_resize_bilinear_2x(tmp_path, accelerator, half_pixel, shape):
    _, h, w, c = shape
    q = _q("int16", 0.05, 0)
    model = _single("RESIZE_BILINEAR", "int16", shape, (1, 2 * h, 2 * w, c), q, q,
                    [("size", np.array([2 * h, 2 * w], np.int32))], {"half_pixel_centers": half_pixel},
                    version=3 if half_pixel else 2)
    # half-pixel centres: 5 edge copies and 4 phases; without, one upscaled average; a 1x1
    # input is one broadcast
    compile_exact(tmp_path, model, accelerator, operations=9 if half_pixel and (h, w) != (1, 1) else 1)


# --- AVERAGE_POOL_2D across quantizations ---------------------------------------------------


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape, kernel, stride, padding, activation", [
    ((1, 8, 8, 16), (2, 2), (2, 2), "VALID", "NONE"),
    ((1, 9, 7, 5), (3, 3), (1, 1), "SAME", "RELU"),     # the NPU divides padded windows by their valid count
    ((1, 10, 10, 8), (8, 8), (3, 3), "SAME", "RELU6"),  # the largest SAME kernel
    ((1, 7, 7, 32), (7, 7), (1, 1), "VALID", "RELU_N1_TO_1"),  # a global pool
])
def test_average_pool_across_quantizations(tmp_path, accelerator, dtype, shape, kernel, stride, padding, activation):
    _, h, w, c = shape
    out = [(h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1] if padding == "VALID" else [
        -(-h // stride[0]), -(-w // stride[1])]
    model = _single("AVERAGE_POOL_2D", dtype, shape, (1, *out, c), _q(dtype, 0.05, 1), _q(dtype, 0.013, -9),
                    options=dict(padding=padding, stride_h=stride[0], stride_w=stride[1], filter_height=kernel[0],
                                 filter_width=kernel[1], fused_activation_function=activation))
    compile_exact(tmp_path, model, accelerator, operations=1)


# --- PRELU int16 --------------------------------------------------------------------------


def _prelu16(shape, alpha_shape, alpha_range, seed=0, out_scale=0.06):
    alpha = np.random.default_rng(seed).integers(*alpha_range, alpha_shape).astype(np.int8)
    return _single("PRELU", "int16", shape, shape, _q("int16", 0.05, 0), _q("int16", out_scale, 0),
                   [("alpha", alpha, "int8", quantization(0.004, 0))])


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("shape, alpha_shape, alpha_range, out_scale, operations", [
    ((1, 8, 8, 16), (1, 1, 16), (-100, 100), 0.06, 4),   # mixed signs, alpha below 1: MAX of the branches
    ((1, 5, 7, 33), (1, 1, 33), (1, 128), 0.05, 3),      # one quantization: MAX(x, product)
    ((1, 5, 7, 33), (1, 1, 33), (-128, 0), 0.002, 4),
    ((1, 4, 6, 3), (4, 6, 3), (-128, 128), 0.3, 4),      # an alpha per element
])
def test_int16_prelu(tmp_path, accelerator, shape, alpha_shape, alpha_range, out_scale, operations):
    """alpha widened to int16 (one copy), then the rescaled x, the product and their MAX (every
    alpha here is at most 1; alphas on both sides of 1: test_lower_prelu)."""
    compile_exact(tmp_path, _prelu16(shape, alpha_shape, alpha_range, out_scale=out_scale), accelerator, operations)


def test_int16_prelu_with_an_int16_alpha_stays_on_the_cpu():
    q = _q("int16", 0.05, 0)
    model = _single("PRELU", "int16", (1, 4, 4, 8), (1, 4, 4, 8), q, q,
                    [("alpha", np.arange(8, dtype=np.int16).reshape(1, 1, 8), "int16", quantization(0.004, 0))])
    assert "int16 PRELU takes an int8 alpha" in _cpu_reason(model)


# --- int16 EXP whose table wraps ----------------------------------------------------------

INT16_CODES = np.arange(-32768, 32768, dtype=np.int16).reshape(1, 256, 256, 1)


def _exp16(shape, in_scale, out_scale):
    return _single("EXP", "int16", shape, shape, quantization(in_scale, 0), quantization(out_scale, 0), version=2)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("in_scale, out_scale, wrapping", [
    (0.02, 0.06, True),     # the operator zoo's case: 4 of 2,048 values were off by up to 58,112
    (0.01, 0.001, True),    # two intervals wrap
    (0.003, 0.1, True),     # just past exp's float range (|x| up to 98)
    (0.001, 0.0001, False),  # no wrap: one lookup
])
def test_int16_exp_on_every_code(tmp_path, accelerator, in_scale, out_scale, wrapping):
    """Where the table wraps: a lookup of the table less an offset, an int32 ADD of the offset
    and the low halves."""
    assert (lookup_offset(int16_samples(np.exp, (in_scale, 0), (out_scale, 0))) != 0) == wrapping
    model = _exp16(INT16_CODES.shape, in_scale, out_scale)
    compiled = compile_exact(tmp_path, model, accelerator, operations=3 if wrapping else 1)
    ours = cascader.simulate(compiled, [INT16_CODES])[0]
    assert np.array_equal(ours, ReferenceInterpreter(model).run([INT16_CODES])[0])


def exp_into_a_concatenation():
    """A wrapping int16 EXP whose output is one input of a channel concatenation (written in
    place there: a strided OFM)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 3, 4, 8), "int16", quantization(0.02, 0))
    e = b.add_tensor("e", (1, 3, 4, 8), "int16", quantization(0.06, 0))
    b.add_operator("EXP", [x], [e], version=2)
    other = b.add_input("other", (1, 3, 4, 8), "int16", quantization(0.06, 0))
    y = b.add_tensor("y", (1, 3, 4, 16), "int16", quantization(0.06, 0))
    b.add_operator("CONCATENATION", [e, other], [y], {"axis": 3})
    b.mark_output(y)
    return b.build()


def test_wrapping_exp_into_a_concatenation_and_a_wide_map(tmp_path):
    """An output the NPU writes in place into a concatenation (not dense: the low halves go
    through a scratch map), and rows too wide for one feature map (w x c > 65535)."""
    concat = exp_into_a_concatenation()
    for accelerator in ACCELERATORS:
        compile_exact(tmp_path, concat, accelerator)
        compile_exact(tmp_path, _exp16((1, 2, 300, 256), 0.02, 0.06), accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_int16_concatenation_copies_codes_whatever_their_quantization(accelerator):
    """TFLite's int16 CONCATENATION copies each input's codes unchanged (only uint8 rescales)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 8), "int16", quantization(0.001, 0))
    y = b.add_input("y", (1, 4, 4, 4), "int16", quantization(0.003, 0))
    out = b.add_tensor("out", (1, 4, 4, 12), "int16", quantization(0.002, 0))
    b.add_operator("CONCATENATION", [x, y], [out], {"axis": 3})
    b.mark_output(out)
    compiled = cascader.compile(b.build(), accelerator=accelerator)
    assert compiled.summary().cpu_operators == 0
    assert compiled.check(seeds=2).bit_exact
