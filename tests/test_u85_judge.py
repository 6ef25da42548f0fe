"""Ethos-U85, part 1 (#42): the targets, the driver payload and the decoder read Vela 5.2's
Ethos-U85 binaries.

What is covered: every U85 size and vela.ini system, the sized memory modes, the payload's
CONFIG/ID words (byte-identical to Vela's payloads when re-encoded), and the decoding of Vela's
U85 command streams for zoo models on U85-128/256/512, checked against the models' own tensor
shapes. Simulation and estimation of U85 streams are not implemented yet: the last tests pin
the clear error they give instead.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import cascader
from cascader import _core, vela, zoo
from cascader.arch import MemoryMode, arch_config
from cascader.errors import BinaryError, InvalidArgumentError
from cascader.sim import npu_calls

U85 = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048"]
U85_SYSTEMS = ["Ethos_U85_SYS_Flash_Low", "Ethos_U85_SYS_Flash_High", "Ethos_U85_SYS_DRAM_Low",
               "Ethos_U85_SYS_DRAM_Mid", "Ethos_U85_SYS_DRAM_High"]
# Vela 5.2's CONFIG words for its U85 payloads (read from its binaries of zoo DS-CNN).
VELA_CONFIG_WORDS = {"ethos-u85-128": 0x20000117, "ethos-u85-256": 0x20000118, "ethos-u85-512": 0x20001119,
                     "ethos-u85-1024": 0x2000251A, "ethos-u85-2048": 0x2000261B}
VELA_U85_ID_WORD = 0x20007000
ZOO = ["mobilenet_v1", "mobilenet_v2", "resnet8", "ds_cnn_kws", "fc_autoencoder", "mobilenet_v3_blocks", "unet",
       "attention_pooling", "kws_mean"]


def _vela_ini() -> str:
    ethosu = pytest.importorskip("ethosu.vela")
    return os.path.join(os.path.dirname(ethosu.__file__), "..", "config_files", "Arm", "vela.ini")


@pytest.mark.parametrize("name", U85)
def test_u85_accelerators(name: str) -> None:
    acc = cascader.Accelerator(name)
    macs = int(name.rsplit("-", 1)[1])
    assert acc.product == "ethos-u85" and not acc.compiles
    assert acc.macs_per_cycle * acc.cores == macs
    for h, w, d in acc.ofm_ublocks:  # every micro-block the array can take fills it
        assert h * w * 8 * d == macs
    assert acc.ofm_ublock == acc.ofm_ublocks[0]
    assert acc.weight_decoders == {128: 1, 256: 1, 512: 2, 1024: 4, 2048: 4}[macs]
    assert acc.internal_ram["acc"] == 64 * macs  # the accumulator RAM grows with the array
    assert acc.axi_data_width_bits == 128 and acc.max_outstanding_dma == 4
    assert acc.shram_banks == 0 and name in repr(acc) and "weight decoder" in repr(acc)
    assert acc.default_system == "Ethos_U85_SYS_DRAM_Mid"
    assert acc.default_memory_mode == MemoryMode.DEDICATED_SRAM


def test_names_and_compile_targets() -> None:
    assert set(U85) <= set(cascader.Accelerator.names())
    assert not set(U85) & set(cascader.Accelerator.names(compile_targets=True))
    assert "ethos-u55-128" in cascader.Accelerator.names(compile_targets=True)
    with pytest.raises(InvalidArgumentError, match="does not compile for ethos-u85-256"):
        cascader.compile(zoo.ds_cnn_kws(), accelerator="ethos-u85-256")


@pytest.mark.parametrize("name", U85_SYSTEMS)
def test_u85_presets_match_velas_ini(name: str) -> None:
    ours = cascader.SystemConfig.preset(name)
    theirs = cascader.SystemConfig.from_ini(_vela_ini(), name)
    assert (ours.core_clock, ours.axi0, ours.axi1) == (theirs.core_clock, theirs.axi0, theirs.axi1)
    for mem in (ours.axi0, ours.axi1):
        assert ours.memories[mem] == theirs.memories[mem], mem


@pytest.mark.parametrize("mode", ["Dedicated_Sram_256KB", "Dedicated_Sram_384KB", "Dedicated_Sram_512KB"])
def test_sized_memory_modes(mode: str) -> None:
    parsed, size = MemoryMode.from_ini(_vela_ini(), mode)
    assert parsed == MemoryMode.parse(mode) == MemoryMode.DEDICATED_SRAM
    assert size == MemoryMode.cache_size(mode) == int(mode.rsplit("_", 1)[1][:-2]) * 1024
    for system in U85_SYSTEMS:
        if "DRAM" in system:  # the arena needs DRAM on AXI1 in Dedicated_Sram
            arch = arch_config("ethos-u85-512", system, mode)
            assert arch.memory_mode == _core.MemoryMode.Dedicated_Sram
    with pytest.raises(InvalidArgumentError, match="arena"):
        arch_config("ethos-u85-512", "Ethos_U85_SYS_Flash_High", mode)


@pytest.fixture(scope="module")
def ds_cnn():
    return zoo.ds_cnn_kws()


@pytest.mark.parametrize("name", U85)
def test_payload_words_are_velas(ds_cnn, name: str) -> None:
    """The payload cascader writes for a U85 command stream is Vela's, byte for byte."""
    pytest.importorskip("ethosu.vela")
    call = npu_calls(vela.compile(ds_cnn, name).model)[0]
    config, words = _core.split_driver_payload(bytes(call.payload))
    assert config["accelerator"] == name and config["product"] == 2
    assert config["config_word"] == VELA_CONFIG_WORDS[name] and config["id_word"] == VELA_U85_ID_WORD
    assert config["weight_decoders"] == cascader.Accelerator(name).weight_decoders
    assert _core.encode_driver_payload(words, name) == bytes(call.payload)


def test_payload_rejects_unknown_u85_size() -> None:
    words = np.array([0x0000], dtype=np.uint32)  # NPU_OP_STOP
    payload = bytearray(_core.encode_driver_payload(words, "ethos-u85-256"))
    payload[8] = (payload[8] & 0xF0) | 0x5  # 32 MACs: no U85 has them
    with pytest.raises(BinaryError, match="no ethos-u85 accelerator has 32 MACs"):
        _core.split_driver_payload(bytes(payload))


@pytest.mark.parametrize("accelerator", U85[:3])
@pytest.mark.parametrize("model_name", ZOO)
def test_decode_velas_u85_binaries(model_name: str, accelerator: str) -> None:
    """Every command stream of Vela's U85 binary decodes; each weight and scale stream lies in
    the flash tensor (region 0) or where an earlier DMA copied it, and the last operation of a
    call writes a map of the call's output size."""
    pytest.importorskip("ethosu.vela")
    binary = vela.compile(zoo.get(model_name), accelerator)
    calls = npu_calls(binary.model)
    assert calls
    decoders = cascader.Accelerator(accelerator).weight_decoders
    for call in calls:
        decoded = call.decode()
        assert decoded.config["accelerator"] == accelerator
        copied: list[tuple[int, int, int]] = []  # (region, start, end) of the DMAs so far
        block_ops = 0
        for op in decoded.operations:
            if op["kind"] == "dma":
                assert op["src"]["region"] == 0 and op["src"]["address"] + op["src"]["length"] <= len(call.flash)
                dst = op["dst"]
                copied.append((dst["region"], dst["address"], dst["address"] + dst["length"]))
                continue
            block_ops += 1
            assert op["kind"] in ("conv", "depthwise", "pool", "elementwise", "resize")
            if op["kind"] not in ("conv", "depthwise"):
                continue
            streams = [s for s in op["u85"]["weight_streams"][:decoders] + [op["scales"]] if s["length"]]
            assert streams, (model_name, op["word_offset"])
            for s in streams:
                start, end = s["address"], s["address"] + s["length"]
                if s["region"] == 0:
                    assert end <= len(call.flash), (model_name, op["word_offset"])
                else:
                    assert any(r == s["region"] and a <= start and end <= b for r, a, b in copied), \
                        (model_name, op["word_offset"], s)
        assert block_ops, "a U85 call with no NPU operation"
        last = [op for op in decoded.operations if op["kind"] != "dma"][-1]["ofm"]["shape"]
        out = binary.model.subgraphs[0].tensors[call.ofms[-1]].shape
        assert int(np.prod(last)) == int(np.prod(out)), (model_name, last, out)


def test_u85_simulation_and_estimation_say_not_implemented(ds_cnn) -> None:
    pytest.importorskip("ethosu.vela")
    binary = vela.compile(ds_cnn, "ethos-u85-256")
    with pytest.raises(BinaryError, match="Estimation of Ethos-U85 command streams is not implemented yet"):
        binary.estimate()
    call = npu_calls(binary.model)[0]
    with pytest.raises(BinaryError, match="Simulation of Ethos-U85 command streams is not implemented yet"):
        _core.simulate_driver_payload(bytes(call.payload), {0: np.zeros(len(call.flash), np.uint8)})
