"""The weight-stream decoder (emit/weights) against Vela's own encoder (mlw_codec).

Vela's compiled codec is a test dependency only: we encode random weight volumes with it and
check that our decoder and our inverse reorder give the volume back exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cascader import BinaryError, _core  # noqa: E402

mlw_codec = pytest.importorskip("ethosu.mlw_codec")


def _encode(ohwi: np.ndarray, ofm_block_depth: int, depthwise: bool, part_kernel: bool, ifm_bits: int,
            dilation: tuple[int, int], ublock: int = 8) -> bytes:
    decomp_h, decomp_w = 8 // dilation[0], 8 // dilation[1]
    encoded, _ = mlw_codec.reorder_encode(
        ublock, ublock, ohwi.astype(np.int16), ofm_block_depth, depthwise, part_kernel, ifm_bits, decomp_h, decomp_w
    )
    return bytes(encoded)


@st.composite
def weight_cases(draw):
    depthwise = draw(st.booleans())
    part_kernel = False if depthwise else draw(st.booleans())
    ifm_bits = draw(st.sampled_from([8, 16]))
    kh, kw = draw(st.integers(1, 10)), draw(st.integers(1, 10))
    ofm = draw(st.integers(1, 40))
    ifm = 1 if depthwise else draw(st.integers(1, 40))
    block = draw(st.sampled_from([8, 16, 24, 32, 64]))
    dilation = (draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2])))
    style = draw(st.sampled_from(["uniform", "sparse", "narrow"]))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    shape = (ofm, kh, kw, ifm)
    if style == "uniform":
        w = rng.integers(-255, 256, size=shape)
    elif style == "sparse":  # exercises zero runs
        w = rng.integers(-128, 128, size=shape) * (rng.random(shape) < 0.15)
    else:  # exercises palettes
        w = rng.choice(np.array([-7, -1, 0, 3, 12, 100]), size=shape)
    return w.astype(np.int16), block, depthwise, part_kernel, ifm_bits, dilation


@settings(max_examples=120, deadline=None)
@given(weight_cases())
def test_decoder_inverts_vela_encoder(case):
    w, block, depthwise, part_kernel, ifm_bits, dilation = case
    stream = _encode(w, block, depthwise, part_kernel, ifm_bits, dilation)
    values = _core.decode_weight_stream(stream)
    ofm, kh, kw, ifm = w.shape
    got = _core.unpack_weights(
        values, ofm_depth=ofm, kernel_height=kh, kernel_width=kw, ifm_depth=ifm, ofm_block_depth=block,
        depthwise=depthwise, part_kernel_first=part_kernel, ifm_bits=ifm_bits,
        dilation_x=dilation[1], dilation_y=dilation[0],
    )
    np.testing.assert_array_equal(got, w)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-255, 255), min_size=1, max_size=3000), st.floats(0.0, 0.95))
def test_decoder_matches_vela_decoder_on_flat_streams(values, zero_fraction):
    rng = np.random.default_rng(len(values))
    v = np.array(values, dtype=np.int64)
    v[rng.random(v.size) < zero_fraction] = 0
    stream = bytes(mlw_codec.encode([int(x) for x in v]))
    np.testing.assert_array_equal(_core.decode_weight_stream(stream), v)
    np.testing.assert_array_equal(_core.decode_weight_stream(stream), np.array(mlw_codec.decode(bytearray(stream))))


def test_truncated_stream_raises_binary_error():
    stream = bytes(mlw_codec.encode(list(range(-100, 100)) * 5))
    with pytest.raises(BinaryError, match="weight stream"):
        _core.decode_weight_stream(stream[: len(stream) // 2])


def test_mutated_streams_never_crash():
    rng = np.random.default_rng(7)
    base = bytearray(mlw_codec.encode([int(x) for x in rng.integers(-60, 60, 2000)]))
    for _ in range(1000):
        s = bytearray(base)
        for _ in range(int(rng.integers(1, 8))):
            s[int(rng.integers(0, len(s)))] = int(rng.integers(0, 256))
        if rng.random() < 0.3:
            s = s[: int(rng.integers(0, len(s)))]
        try:
            out = _core.decode_weight_stream(bytes(s))
        except BinaryError:
            continue
        assert out.dtype == np.int16


def test_short_stream_for_layout_raises():
    stream = _encode(np.ones((16, 3, 3, 8), np.int16), 16, False, False, 8, (1, 1))
    values = _core.decode_weight_stream(stream)
    with pytest.raises(BinaryError, match="the operation needs"):
        _core.unpack_weights(values, ofm_depth=32, kernel_height=3, kernel_width=3, ifm_depth=8, ofm_block_depth=16)


def test_scale_stream_matches_vela_bias_encoding():
    from ethosu.vela.weight_compressor import encode_bias

    rng = np.random.default_rng(3)
    entries = [
        (int(rng.integers(-(1 << 39), 1 << 39)), int(rng.integers(0, 1 << 32)), int(rng.integers(0, 64)))
        for _ in range(50)
    ]
    blob = b"".join(bytes(encode_bias(np.int64(b), s, sh)) for b, s, sh in entries)
    assert _core.decode_scale_stream(blob, len(entries)) == entries
    with pytest.raises(BinaryError, match="too short"):
        _core.decode_scale_stream(blob[:-1], len(entries))
