"""TRANSPOSE_CONV as one NPU convolution over the zero-inserting IFM upscale, with the kernel
flipped: bit-exact against the reference interpreter over drawn shapes, kernels, strides,
paddings, biases, activations and quantizations; the registers agree with Vela 5.2's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cascader
from cascader.frontend.lower_transpose_conv import axis_padding
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from test_lower_movement import _check  # noqa: E402


def transpose_conv(in_shape, filters, kernel, stride, padding, *, bias=True, activation="NONE", dtype="int8",
                   seed=0, ifm_q=(0.05, 3), ofm_q=(0.2, -5)) -> cascader.Model:
    """One TRANSPOSE_CONV with per-channel int8 weights (per-tensor uint8 for uint8 models)."""
    rng = np.random.default_rng(seed)
    _, h, w, cin = in_shape
    (kh, kw), (sh, sw) = kernel, stride
    out = (1, h * sh, w * sw, filters) if padding == "SAME" else \
        (1, h * sh + max(kh - sh, 0), w * sw + max(kw - sw, 0), filters)
    b = ModelBuilder()
    x = b.add_input("x", in_shape, dtype, quantization(*ifm_q))
    if dtype == "uint8":
        w_scale = np.float32(rng.uniform(0.002, 0.01))
        weights = b.add_constant("w", rng.integers(0, 256, size=(filters, kh, kw, cin)).astype(np.uint8), "uint8",
                                 quantization(w_scale, int(rng.integers(100, 156))))
    else:
        w_scale = rng.uniform(0.002, 0.01, size=filters).astype(np.float32)
        weights = b.add_constant("w", rng.integers(-127, 128, size=(filters, kh, kw, cin)).astype(np.int8), "int8",
                                 quantization(w_scale, 0, 0))
    inputs = [b.add_constant("shape", np.array(out, np.int32)), weights, x]
    if bias:
        bias_type = "int64" if dtype == "int16" else "int32"
        values = rng.integers(-3000, 3000, size=filters).astype(bias_type)
        inputs.append(b.add_constant("bias", values, bias_type,
                                     quantization(np.atleast_1d(np.float32(ifm_q[0]) * w_scale), 0)))
    y = b.add_tensor("y", out, dtype, quantization(*ofm_q))
    options = {"padding": padding, "stride_h": sh, "stride_w": sw, "fused_activation_function": activation}
    version = 4 if activation != "NONE" else 3 if dtype == "int16" or bias else 2
    b.add_operator("TRANSPOSE_CONV", inputs, [y], options, version=version)
    b.mark_output(y)
    return b.build()


@st.composite
def cases(draw):
    stride = draw(st.sampled_from([(2, 2), (2, 2), (1, 1), (1, 2)]))  # (H, W)
    h = 1 if stride == (1, 2) else draw(st.integers(1, 6))
    kernel = (1 if stride == (1, 2) else draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    dtype = draw(st.sampled_from(["int8", "int8", "uint8", "int16"]))
    zp = (lambda: 0) if dtype == "int16" else (lambda: draw(st.integers(0, 255)) - (0 if dtype == "uint8" else 128))
    scale = (lambda: draw(st.floats(1e-4, 2e-3))) if dtype == "int16" else (lambda: draw(st.floats(0.01, 0.3)))
    return dict(in_shape=(1, h, draw(st.integers(1, 7)), draw(st.integers(1, 20))), filters=draw(st.integers(1, 20)),
                kernel=kernel, stride=stride, padding=draw(st.sampled_from(["SAME", "VALID"])), bias=draw(st.booleans()),
                activation=draw(st.sampled_from(["NONE", "RELU", "RELU6"])), dtype=dtype, seed=draw(st.integers(0, 9)),
                ifm_q=(scale(), zp()), ofm_q=(4 * scale(), zp()))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_transpose_conv_is_bit_exact(tmp_path, case):
    compiled = _check(tmp_path, transpose_conv(**case), operations=1)
    (conv,) = [op for ops in compiled.operations for op in ops if op["kind"] == "conv"]
    assert conv["ifm_upscale"] == (0 if case["stride"] == (1, 1) else 2)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("kernel", [1, 2, 3, 4, 5])
def test_padding_matches_vela(padding, kernel):
    # Vela's calc_upscaled_padding_and_skirt for an input of 6 upscaled by 2.
    out = 12 if padding == "SAME" else 12 + max(kernel - 2, 0)
    if padding == "SAME":
        total = kernel - 1
        after = max((total + 1) // 2 - 1, 0)
        before = max(kernel - 1 - after, 0)
    else:
        before, after = kernel - 1, max(kernel - 2, 0)
    assert axis_padding(6, out, 2, kernel, padding) == (before, after)


def test_registers_match_vela(tmp_path):
    from cascader.vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela

    path = tmp_path / "tconv.tflite"
    cascader.save_model(transpose_conv((1, 4, 5, 8), 16, (3, 3), (2, 2), "SAME"), path)
    ours = [op for ops in cascader.compile(path).operations for op in ops if op["kind"] == "conv"]
    vela_path = compile_with_vela(path, VelaConfig("ethos-u55-128", "Performance", UNLIMITED_SRAM)).path
    vela = [op for s in cascader.sim.decode(vela_path) for op in s["operations"] if op["kind"] == "conv"]
    for key in ("padding", "ifm_upscale", "kernel"):
        assert [op[key] for op in ours] == [op[key] for op in vela], key


@pytest.mark.parametrize("stride,shape,kernel,padding", [
    ((3, 3), (1, 4, 4, 8), (3, 3), "SAME"),  # beyond the upscale
    ((1, 2), (1, 4, 4, 8), (1, 3), "SAME"),  # 2x1 (WxH) with more than one input row
])
def test_unsupported_strides_stay_on_the_cpu(stride, shape, kernel, padding):
    (op,) = cascader.inspect(transpose_conv(shape, 8, kernel, stride, padding)).operators
    assert op.target == "CPU" and "TRANSPOSE_CONV strides" in op.reason
