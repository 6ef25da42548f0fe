"""Decoding of driver payloads and command streams, and their failure modes (BinaryError)."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from cascader import BinaryError, _core

api = pytest.importorskip("ethosu.vela.api")

ACCEL = api.NpuAccelerator.Ethos_U55_128


def _words(payload: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(payload) // 4}I", payload))


def _pack(words: list[int]) -> bytes:
    return struct.pack(f"<{len(words)}I", *words)


@pytest.fixture(scope="module")
def payload() -> bytes:
    """A small real payload: an elementwise ADD and a 2x2 max pool, from Vela's API."""
    def fm(shape, address):
        f = api.NpuFeatureMap()
        f.data_type = api.NpuDataType.INT8
        f.region = 1
        f.shape = api.NpuShape3D(*shape)
        f.tiles = api.NpuTileBox(shape[0], 0, shape[1], [address, 0, 0, 0])
        f.quantization = api.NpuQuantization(1.0, 0)
        f.layout = api.NpuLayout.NHWC
        return f

    add = api.NpuElementWiseOperation(api.NpuElementWiseOp.ADD)
    add.ifm, add.ifm2, add.ofm = fm((4, 4, 16), 0), fm((4, 4, 16), 256), fm((4, 4, 16), 512)
    add.block_config = api.npu_find_block_configs(add, ACCEL)[0]
    pool = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    pool.ifm, pool.ofm = fm((4, 4, 16), 512), fm((3, 3, 16), 768)
    pool.kernel = api.NpuKernel(2, 2)
    pool.padding = api.NpuPadding(0, 0, 0, 0)
    pool.block_config = api.npu_find_block_configs(pool, ACCEL)[0]
    words = api.npu_generate_register_command_stream([add, pool], ACCEL)
    return api.npu_create_driver_payload(words, ACCEL)


def test_decode_gives_typed_operations(payload):
    d = _core.decode_driver_payload(payload)
    assert d["config"]["accelerator"] == "ethos-u55-128"
    kinds = [(o["kind"], o.get("sub_op")) for o in d["operations"]]
    assert kinds == [("elementwise", "ADD"), ("pool", "MAX")]
    add, pool = d["operations"]
    assert add["ifm2"]["base"][0] == 256 and add["ofm"]["base"][0] == 512
    assert pool["ofm"]["shape"] == (3, 3, 16) and pool["kernel"]["height"] == 2
    assert pool["ifm"]["layout"] == "NHWC" and pool["ofm"]["dtype"] == "int8"


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda w: [0x12345678] + w[1:], "missing the 'COP1' fourcc"),
        (lambda w: w[:-3], "overruns the payload"),
        (lambda w: w[:1] + [0x0000_0009] + w[2:], "unknown driver action"),
    ],
)
def test_bad_payloads_raise_binary_error(payload, mutate, message):
    with pytest.raises(BinaryError, match=message):
        _core.decode_driver_payload(_pack(mutate(_words(payload))))


def _stream_start(payload: bytes) -> int:
    w = _words(payload)
    i = 1
    while (w[i] & 0xFF) != 2:  # the command stream action
        i += 3 if (w[i] & 0xFF) == 1 else 1
    return i + 1


def test_unknown_opcode_names_the_word_offset(payload):
    w = _words(payload)
    start = _stream_start(payload)
    w[start + 2] = 0x0000_01FE  # cmd0 opcode 0x1FE does not exist
    with pytest.raises(BinaryError, match=r"command stream word 2: unknown cmd0 opcode 0x1fe"):
        _core.decode_driver_payload(_pack(w))


def test_stream_without_stop_raises(payload):
    w = _words(payload)
    start = _stream_start(payload)
    n = (w[start - 1] >> 16) | (((w[start - 1] >> 8) & 0xFF) << 16)
    assert w[start + n - 1] & 0x3FF == 0  # NPU_OP_STOP
    w[start + n - 1] = 0x0000_0011  # DMA_WAIT instead of STOP
    with pytest.raises(BinaryError, match="without NPU_OP_STOP"):
        _core.decode_driver_payload(_pack(w))


def test_truncated_cmd1_raises(payload):
    w = _words(payload)
    start = _stream_start(payload)
    # A one-word stream holding only the first word of a cmd1 (IFM_BASE0 = 0x4000).
    w[start - 1] = (w[start - 1] & 0xFF) | (1 << 16)
    w[start] = 0x4000
    with pytest.raises(BinaryError, match="command stream word 0: truncated cmd1"):
        _core.decode_driver_payload(_pack(w[: start + 1]))


def test_fuzzed_payloads_never_crash(payload):
    """1,000 mutated payloads: each must either run or raise BinaryError/InvalidArgumentError."""
    from cascader.errors import InvalidArgumentError

    rng = np.random.default_rng(2024)
    base = _words(payload)
    start = _stream_start(payload)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(1000):
        w = list(base)
        for _ in range(int(rng.integers(1, 5))):
            i = int(rng.integers(start, len(w)))
            choice = rng.random()
            if choice < 0.4:
                w[i] ^= 1 << int(rng.integers(0, 32))
            elif choice < 0.7:
                w[i] = (w[i] & 0xFFFF) | (int(rng.integers(0, 1 << 16)) << 16)  # random parameter
            else:
                w[i] = int(rng.integers(0, 1 << 32))
        if rng.random() < 0.2:
            w = w[: int(rng.integers(1, len(w)))]
        regions = {0: np.zeros(1024, np.uint8), 1: np.zeros(4096, np.uint8)}
        try:
            _core.simulate_driver_payload(_pack(w), regions)
            outcomes["ok"] += 1
        except (BinaryError, InvalidArgumentError):
            outcomes["error"] += 1
    assert outcomes["error"] > 0 and sum(outcomes.values()) == 1000


MODELS = os.environ.get("CASCADER_MODELS")


@pytest.mark.skipif(not MODELS, reason="CASCADER_MODELS is not set")
def test_decode_vela_reference_binary():
    from cascader.sim import decode

    (call,) = decode(os.path.join(MODELS, "vela_reference", "person_detect_vela.tflite"))
    ops = call["operations"]
    kinds = {o["kind"] for o in ops}
    assert {"conv", "depthwise", "pool", "elementwise", "dma"} <= kinds
    first = next(o for o in ops if o["kind"] == "conv")
    assert first["ofm"]["shape"] == (48, 48, 8) and first["ofm"]["layout"] == "NHCWB16"
