"""The executor against an independent oracle, on single operations built with Vela's API.

Vela's public API (`ethosu.vela.api`, a test dependency) encodes the registers, weights and
biases; the oracle is plain numpy with TFLite's fixed-point requantization written out. No
shared model is needed, so this runs everywhere.
"""

from __future__ import annotations

import numpy as np
import pytest

api = pytest.importorskip("ethosu.vela.api")

from cascader import BinaryError, _core  # noqa: E402

ACCEL = api.NpuAccelerator.Ethos_U55_128


def srdhm(a: np.ndarray, b: int) -> np.ndarray:
    ab = a.astype(object) * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    return np.array([_trunc_div(int(x), 1 << 31) for x in (ab + nudge).ravel()], dtype=object).reshape(a.shape)


def _trunc_div(x: int, d: int) -> int:
    q = abs(x) // d
    return q if x >= 0 else -q


def rdbpot(x: np.ndarray, e: int) -> np.ndarray:
    if e == 0:
        return x
    mask = (1 << e) - 1
    out = []
    for v in x.ravel():
        v = int(v)
        rem, thr = v & mask, (mask >> 1) + (1 if v < 0 else 0)
        out.append((v >> e) + (1 if rem > thr else 0))
    return np.array(out, dtype=object).reshape(x.shape)


def requantize(acc: np.ndarray, scale: int, shift: int) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier for a (scale, shift) in Vela's convention."""
    if shift >= 31:
        return rdbpot(srdhm(acc, scale), shift - 31)
    return srdhm(acc * (1 << (31 - shift)), scale)


def fmap(shape, region, address, dtype=api.NpuDataType.INT8, zp=0, layout=api.NpuLayout.NHWC):
    f = api.NpuFeatureMap()
    f.data_type = dtype
    f.region = region
    f.shape = api.NpuShape3D(*shape)
    f.tiles = api.NpuTileBox(shape[0], 0, shape[1], [address, 0, 0, 0])
    f.quantization = api.NpuQuantization(1.0, zp)
    f.layout = layout
    return f


def nhcwb16_offsets(h, w, c, es=1):
    cb = (c + 15) // 16
    y, x, ch = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
    return (y * (w * cb * 16) + (ch // 16) * (w * 16) + x * 16 + (ch % 16)) * es


def place(mem, address, value, layout):
    h, w, c = value.shape
    if layout == api.NpuLayout.NHWC:
        mem[address : address + value.size] = value.astype(np.int8).view(np.uint8).ravel()
    else:
        mem[address + nhcwb16_offsets(h, w, c)] = value.astype(np.int8).view(np.uint8)


def fetch(mem, address, shape, layout):
    h, w, c = shape
    if layout == api.NpuLayout.NHWC:
        return mem[address : address + h * w * c].view(np.int8).reshape(shape).astype(np.int64)
    return mem[address + nhcwb16_offsets(h, w, c)].view(np.int8).astype(np.int64)


def run(ops, regions):
    words = api.npu_generate_register_command_stream(ops, ACCEL)
    payload = api.npu_create_driver_payload(words, ACCEL)
    _core.simulate_driver_payload(payload, regions)
    return payload


@pytest.mark.parametrize(
    "depthwise,stride,pad,in_layout,out_layout,relu",
    [
        (False, 1, 1, api.NpuLayout.NHWC, api.NpuLayout.NHWC, False),
        (False, 2, 1, api.NpuLayout.NHCWB16, api.NpuLayout.NHWC, True),
        (False, 1, 0, api.NpuLayout.NHWC, api.NpuLayout.NHCWB16, False),
        (True, 1, 1, api.NpuLayout.NHWC, api.NpuLayout.NHWC, True),
        (True, 2, 1, api.NpuLayout.NHCWB16, api.NpuLayout.NHCWB16, False),
    ],
)
def test_convolution_matches_oracle(depthwise, stride, pad, in_layout, out_layout, relu):
    rng = np.random.default_rng(hash((depthwise, stride, pad)) & 0xFFFF)
    H, W, C = 9, 11, 24
    K = 3
    OC = C if depthwise else 20
    OH = (H + 2 * pad - K) // stride + 1
    OW = (W + 2 * pad - K) // stride + 1
    ifm_zp, ofm_zp = 5, -3
    x = rng.integers(-128, 128, (H, W, C))
    wts = rng.integers(-127, 128, (OC, K, K, 1 if depthwise else C))
    bias = rng.integers(-5000, 5000, OC)
    scales = [(int(rng.integers(1 << 30, 1 << 31)), int(rng.integers(34, 40))) for _ in range(OC)]

    op = api.NpuConvDepthWiseOperation() if depthwise else api.NpuConv2DOperation()
    op.ifm = fmap((H, W, C), 1, 0, zp=ifm_zp, layout=in_layout)
    op.ofm = fmap((OH, OW, OC), 1, 8192, zp=ofm_zp, layout=out_layout)
    op.kernel = api.NpuKernel(K, K, stride, stride)
    op.padding = api.NpuPadding(pad, pad, pad, pad)
    if relu:
        act = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        act.min = 0.0  # quantised with the OFM scale 1.0 and zero point
        op.activation = act
    if not depthwise:
        op.block_traversal = api.NpuBlockTraversal.DEPTH_FIRST
    op.block_config = api.npu_find_block_configs(op, ACCEL)[0]
    traversal = api.NpuBlockTraversal.DEPTH_FIRST
    encoded = api.npu_encode_weights(ACCEL, np.ascontiguousarray(wts, dtype=np.int16), (1, 1), 8,
                                     op.block_config.depth, depthwise, traversal)
    encoded = bytes(encoded[0] if isinstance(encoded, tuple) else encoded)
    biases = b"".join(bytes(api.npu_encode_bias(np.int64(b), s, sh)) for b, (s, sh) in zip(bias, scales))
    flash = np.zeros(65536, np.uint8)
    flash[: len(encoded)] = np.frombuffer(encoded, np.uint8)
    bias_at = (len(encoded) + 15) // 16 * 16
    flash[bias_at : bias_at + len(biases)] = np.frombuffer(biases, np.uint8)
    op.weights = [api.NpuAddressRange(0, 0, len(encoded))]
    op.biases = [api.NpuAddressRange(0, bias_at, (len(biases) + 15) // 16 * 16)]
    sram = np.zeros(65536, np.uint8)
    place(sram, 0, x, in_layout)
    run([op], {0: flash, 1: sram})
    got = fetch(sram, 8192, (OH, OW, OC), out_layout)

    xp = np.pad(x - ifm_zp, ((pad, pad), (pad, pad), (0, 0)))
    acc = np.zeros((OH, OW, OC), np.int64)
    for oy in range(OH):
        for ox in range(OW):
            win = xp[oy * stride : oy * stride + K, ox * stride : ox * stride + K, :]
            if depthwise:
                acc[oy, ox] = np.einsum("hwc,chw->c", win, wts[:, :, :, 0])
            else:
                acc[oy, ox] = np.einsum("hwc,ohwc->o", win, wts)
    acc += bias
    expected = np.stack([requantize(acc[..., o], *scales[o]) for o in range(OC)], -1).astype(np.int64) + ofm_zp
    expected = np.clip(expected, ofm_zp if relu else -128, 127)
    np.testing.assert_array_equal(got, expected)


def test_add_and_max_pool_match_oracle():
    rng = np.random.default_rng(11)
    H, W, C = 6, 7, 16
    a = rng.integers(-128, 128, (H, W, C))
    b = rng.integers(-128, 128, (1, 1, C))  # broadcast over H and W
    add = api.NpuElementWiseOperation(api.NpuElementWiseOp.ADD)
    add.ifm = fmap((H, W, C), 1, 0)
    add.ifm2 = fmap((1, 1, C), 1, 4096)
    add.ofm = fmap((H, W, C), 1, 8192)
    for f in (add.ifm, add.ifm2, add.ofm):
        f.quantization = api.NpuQuantization(0.5, 0)
    add.block_config = api.npu_find_block_configs(add, ACCEL)[0]
    pool = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    pool.ifm = fmap((H, W, C), 1, 8192)
    pool.ofm = fmap((H - 1, W - 1, C), 1, 12288)
    pool.kernel = api.NpuKernel(2, 2)
    pool.padding = api.NpuPadding(0, 0, 0, 0)
    pool.block_config = api.npu_find_block_configs(pool, ACCEL)[0]
    sram = np.zeros(65536, np.uint8)
    place(sram, 0, a, api.NpuLayout.NHWC)
    place(sram, 4096, b, api.NpuLayout.NHWC)
    run([add, pool], {1: sram})
    expected_add = np.clip(a + b, -128, 127)  # equal scales: a plain saturating add
    np.testing.assert_array_equal(fetch(sram, 8192, (H, W, C), api.NpuLayout.NHWC), expected_add)
    expected_pool = np.max(
        np.stack([expected_add[dy : dy + H - 1, dx : dx + W - 1] for dy in (0, 1) for dx in (0, 1)]), axis=0
    )
    np.testing.assert_array_equal(fetch(sram, 12288, (H - 1, W - 1, C), api.NpuLayout.NHWC), expected_pool)


def test_ofm_outside_its_region_is_a_binary_error():
    op = api.NpuElementWiseOperation(api.NpuElementWiseOp.ADD)
    op.ifm = fmap((4, 4, 16), 1, 0)
    op.ifm2 = fmap((4, 4, 16), 1, 0)
    op.ofm = fmap((4, 4, 16), 1, 60000)
    op.block_config = api.npu_find_block_configs(op, ACCEL)[0]
    with pytest.raises(BinaryError, match=r"command stream word \d+ \(elementwise\): OFM .* beyond region 1"):
        run([op], {1: np.zeros(60100, np.uint8)})


def test_leaky_relu_scales_only_negative_values():
    # Elementwise LRELU: OFM_SCALE carries alpha (Vela's API quantises the OFM scale it is given)
    # and applies to negative values only, with TFLite's double rounding; no output rescale.
    rng = np.random.default_rng(5)
    H, W, C = 5, 6, 16
    x = rng.integers(-32768, 32768, (H, W, C))
    alpha = 0.3719
    op = api.NpuElementWiseOperation(api.NpuElementWiseOp.LRELU)
    op.ifm = fmap((H, W, C), 1, 0, dtype=api.NpuDataType.INT16)
    op.ofm = fmap((H, W, C), 1, 4096, dtype=api.NpuDataType.INT16)
    op.ofm.quantization = api.NpuQuantization(alpha, 0)
    op.block_config = api.npu_find_block_configs(op, ACCEL)[0]
    sram = np.zeros(8192, np.uint8)
    sram[: x.size * 2] = x.astype("<i2").view(np.uint8).ravel()
    run([op], {1: sram})
    got = sram[4096 : 4096 + x.size * 2].view("<i2").reshape(x.shape)
    from ethosu.vela.scaling import quantise_scale  # what the API puts in OFM_SCALE

    scale, shift = quantise_scale(alpha)
    expected = np.where(x < 0, requantize(x, scale, shift).astype(np.int64), x)
    np.testing.assert_array_equal(got, np.clip(expected, -32768, 32767))


def test_builtin_tanh_on_an_int8_ofm_is_a_binary_error():
    op = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
    op.ifm = fmap((4, 4, 16), 1, 0)
    op.ofm = fmap((4, 4, 16), 1, 256)
    op.kernel = api.NpuKernel(1, 1)
    op.padding = api.NpuPadding(0, 0, 0, 0)
    op.activation = api.NpuActivation(api.NpuActivationOp.TANH)
    op.block_config = api.npu_find_block_configs(op, ACCEL)[0]
    with pytest.raises(BinaryError, match=r"TANH/SIGMOID activation needs an int16 OFM"):
        run([op], {1: np.zeros(512, np.uint8)})
