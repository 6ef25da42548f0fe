"""Ethos-U85, part 1 (#42): the targets, the driver payload and the decoder read Vela 5.2's
Ethos-U85 binaries.

What is covered: every U85 size and vela.ini system, the sized memory modes, the payload's
CONFIG/ID words (byte-identical to Vela's payloads when re-encoded), the decoding of Vela's
U85 command streams for zoo models on U85-128/256/512, checked against the models' own tensor
shapes, and the U85 weight and scale streams of every zoo binary on all five sizes: their
weight order (values per stream, and the weights they decode to, found in the model), and
their round trip (decode, then re-encode with the recorded slice settings, gives Vela's bytes);
the simulation of Vela's U85 binaries, bit-exact against the reference interpreter; and their
estimation with the U85 cycle formulas, against Vela's own totals.
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
    assert acc.product == "ethos-u85" and acc.compiles
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
    """Every U85 size is a compile target (#43: tests/test_u85_compile.py)."""
    assert set(U85) <= set(cascader.Accelerator.names(compile_targets=True))
    assert "ethos-u55-128" in cascader.Accelerator.names(compile_targets=True)


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


def _regions(call) -> dict[int, np.ndarray]:
    """The flash as region 0 and zeroed memory for each other region the payload touches."""
    regions = {0: np.frombuffer(bytes(call.flash), np.uint8).copy()}
    for region, extent in enumerate(_core.region_extents(bytes(call.payload))):
        if region and extent is not None:
            regions[region] = np.zeros(extent[0] + 16, np.uint8)
    return regions


def _model_channels(model) -> set[bytes]:
    """Every OFM channel of the model's int8 weight tensors, less its zero point, as int16 bytes
    (OHWI rows; depthwise 1HWC tensors also per C; and each kernel tap's IFM vector of an OHWI
    row, which is what a 1x1 sub-kernel of a decomposed transposed convolution holds)."""
    out: set[bytes] = set()
    for t in model.subgraphs[0].tensors:
        if t.data is None or t.data.dtype != np.int8 or t.data.ndim < 2:
            continue
        d = t.data.astype(np.int64)
        zp = np.asarray(t.quantization.zero_point if t.quantization else 0, np.int64).ravel()
        for axis in (0, 3) if d.ndim == 4 and d.shape[0] == 1 else (0,):
            rows = np.moveaxis(d, axis, 0)
            if zp.size in (1, rows.shape[0]):
                z = np.broadcast_to(zp, (rows.shape[0],))
                out.update((rows[c] - z[c]).astype(np.int16).ravel().tobytes() for c in range(rows.shape[0]))
                if d.ndim == 4 and axis == 0:
                    out.update((rows[c, y, x] - z[c]).astype(np.int16).tobytes() for c in range(rows.shape[0])
                               for y in range(rows.shape[1]) for x in range(rows.shape[2]))
    return out


@pytest.mark.parametrize("accelerator", U85)
@pytest.mark.parametrize("model_name", ZOO)
def test_weight_and_scale_streams_round_trip(model_name: str, accelerator: str) -> None:
    """Every weight stream of Vela's U85 binary holds the values the U85 weight order needs, and
    decoding it then re-encoding the recorded slices (or the fast-weight header and values)
    gives Vela's bytes; so does every scale stream. The decoded weights are the model's: every
    channel of an operation whose weights come from the model (not those Vela makes up, such
    as all-ones pooling kernels) is found in it."""
    pytest.importorskip("ethosu.vela")
    model = zoo.get(model_name)
    binary = vela.compile(model, accelerator)
    decoders = cascader.Accelerator(accelerator).weight_decoders
    channels = _model_channels(model)
    found = total = 0
    for call in npu_calls(binary.model):
        for op in _core.u85_operation_weights(bytes(call.payload), _regions(call)):
            assert len(op["streams"]) == (1 if op["fast"] else decoders)
            for stream, count in zip(op["streams"], op["stream_values"]):
                if op["fast"]:
                    decoded = _core.decode_fast_weights(stream, count)
                    assert _core.encode_fast_weights(decoded) == stream
                    continue
                slices = _core.decode_weight_slices(stream)
                assert sum(len(s["indices"]) + sum(s["runs"]) for s in slices) == count
                assert _core.encode_weight_slices(slices) == stream
            scales = op["scales"]
            entries = _core.decode_u85_scale_stream(scales, len(scales) // 10, op["acc48"])
            assert len(scales) % 10 == 0 and len(entries) >= op["ohwi"].shape[0]
            assert entries[: op["ohwi"].shape[0]] == op["channels"]
            assert _core.encode_u85_scale_stream(entries, op["acc48"]) == scales
            w = op["ohwi"]
            if len(np.unique(w)) > 2:  # not a made-up kernel (all ones: a pooling as a convolution)
                found += sum(w[o].tobytes() in channels for o in range(w.shape[0]))
                total += w.shape[0]
    assert found == total, (found, total)


def test_weight_slice_settings_round_trip() -> None:
    """Slices that keep the previous palette, change divisors, or start a new section are
    written back as recorded; what the format cannot hold is refused."""
    values = np.array([0, 0, 3, -3, 7, 0, 0, 0, 1, -1] * 700, dtype=np.int16)
    stream = _core.encode_weight_stream(values)
    slices = _core.decode_weight_slices(stream)
    assert _core.encode_weight_slices(slices) != b"" and len(slices) >= 1
    first = slices[0]
    half = len(first["indices"]) // 2
    # Split the first slice in two; the second keeps the first's palette (no zero run before it).
    a = dict(first, indices=first["indices"][:half], runs=first["runs"][: half + 1] if first["runs"] else [])
    b = dict(first, new_palette=False, indices=first["indices"][half:], runs=first["runs"][half + 1:] if first["runs"] else [],
             wdiv=min(first["wdiv"] + 1, 5) if first["wdiv"] != 7 else 7)
    rewritten = _core.encode_weight_slices([a, b] + slices[1:])
    again = _core.decode_weight_slices(rewritten)
    assert not again[1]["new_palette"] and again[1]["wdiv"] == b["wdiv"]
    assert _core.encode_weight_slices(again) == rewritten
    assert np.array_equal(_core.decode_weight_stream(rewritten), _core.decode_weight_stream(stream))
    # A new section: its first slice sets up a palette again, with a zero run before its first value.
    b_runs = [0] + b["runs"] if b["runs"] else []
    sectioned = _core.encode_weight_slices([a, dict(b, new_palette=True, new_section=True, runs=b_runs)] + slices[1:])
    assert _core.decode_weight_slices(sectioned)[1]["new_section"]
    assert np.array_equal(_core.decode_weight_stream(sectioned), _core.decode_weight_stream(stream))
    with pytest.raises(InvalidArgumentError, match="keeps a palette"):
        _core.encode_weight_slices([dict(a, new_palette=False)])
    with pytest.raises(InvalidArgumentError, match="zero runs"):
        _core.encode_weight_slices([dict(a, runs=a["runs"][:-1] if a["runs"] else [0])])


@pytest.mark.parametrize("mode", ["lut2", "lut4", "raw"])
def test_fast_weights_round_trip(mode: str) -> None:
    rng = np.random.default_rng(0)
    palette = [0, 5, -7, 100, -128, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12]
    if mode == "raw":
        values = rng.integers(-200, 50, 999).astype(np.int16)  # a range of 250: needs a zero adjustment of 72
        header = dict(raw=True, small_palette=False, zero_adjust=72, palette=palette)
    else:
        entries = palette[:4] if mode == "lut2" else palette
        values = np.array(entries, np.int16)[rng.integers(0, len(entries), 999)]
        header = dict(raw=False, small_palette=mode == "lut2", zero_adjust=0, palette=palette)
    data = _core.encode_fast_weights(dict(header, values=values.tolist()))
    bits = {"lut2": 2, "lut4": 4, "raw": 8}[mode]
    assert len(data) == -(-(256 + 999 * bits) // 256) * 32
    decoded = _core.decode_fast_weights(data, 999)
    assert decoded["values"] == values.tolist() and _core.encode_fast_weights(decoded) == data
    with pytest.raises(BinaryError, match="too short"):
        _core.decode_fast_weights(data, 999 + (len(data) * 8 - 256) // bits)
    with pytest.raises(InvalidArgumentError):
        _core.encode_fast_weights(dict(header, values=[300]))


@pytest.mark.parametrize("acc48", [False, True])
def test_u85_scale_stream_layouts(acc48: bool) -> None:
    """32-bit accumulators: int32 bias, 31-bit scale; 48-bit: int48 bias, 15-bit scale."""
    big = (1 << 47) - 1 if acc48 else (1 << 31) - 1
    scale = (1 << 15) - 1 if acc48 else (1 << 31) - 1
    entries = [(-big - 1, scale, 63), (big, 1, 0), (-5, 12345 if acc48 else 1234567890, 31)]
    data = _core.encode_u85_scale_stream(entries, acc48)
    assert len(data) == 30 and data[9] == 0 and data[8] == 63
    assert _core.decode_u85_scale_stream(data, 3, acc48) == entries
    with pytest.raises(InvalidArgumentError, match="channel 0"):
        _core.encode_u85_scale_stream([(big + 1, 1, 0)], acc48)
    with pytest.raises(InvalidArgumentError, match="channel 0"):
        _core.encode_u85_scale_stream([(0, scale + 1, 0)], acc48)
    with pytest.raises(BinaryError, match="too short"):
        _core.decode_u85_scale_stream(data, 4, acc48)


@pytest.mark.parametrize("accelerator", U85)
def test_u85_estimates_follow_velas_cycles(accelerator: str) -> None:
    """The estimator costs Vela's U85 binaries with the U85 cycle formulas (through the one cost
    model): every zoo binary within 5% of Vela's total (unet's transposed convolution as Vela
    costs it, sub-kernel by sub-kernel; tests/test_u85_estimate.py has the whole matrix)."""
    pytest.importorskip("ethosu.vela")
    errors = {}
    for name in ZOO:
        binary = vela.compile(zoo.get(name), accelerator)
        errors[name] = binary.estimate().total_cycles / binary.cycles - 1
    assert all(abs(e) <= 0.05 for e in errors.values()), errors


# Vela's U85 binaries round as its U55 ones do: FULLY_CONNECTED with the double rounding every
# convolution uses (DOUBLE_SYMMETRIC in the U85's OFM_SCALE), where LiteRT's reference FC kernel
# rounds once; an FC output within a rounding step of .5 is one off (tests/test_sim_vela.py's
# FC_ROUNDING). The simulator follows the registers.
FC_ROUNDING = {"fc_autoencoder": 1}


def _validate(model, config: "VelaConfig", tmp_path, name: str):
    from cascader import save_model
    from cascader.bench.simulate import validate_with_vela

    pytest.importorskip("ai_edge_litert")
    path = tmp_path / f"zoo_{name}.tflite"
    path.write_bytes(save_model(model))
    return validate_with_vela(path, config, seeds=(0, 1))


def _check_bit_exact(result, name: str) -> None:
    assert result.bit_exact is not None, f"{name} ({result.config}) was not simulated: {result.error}"
    bound = FC_ROUNDING.get(name, 0)
    assert result.max_abs_diff <= bound, f"{name} ({result.config}): {result.details}"
    assert result.bit_exact or bound, result.details


@pytest.mark.parametrize("accelerator", U85)
@pytest.mark.parametrize("model_name", ZOO)
def test_velas_u85_zoo_binaries_are_bit_exact(model_name: str, accelerator: str, tmp_path) -> None:
    """Vela's U85 binaries of the zoo, on every size with Vela's default U85 system, simulate
    bit-exact against the reference interpreter on two seeds: chained operations, fast and
    sparse weights, SUM and AVERAGE pooling, NEAREST resize, LUT activations, the softmax's
    32-bit elementwise operations and three OFM round modes included."""
    from cascader.vela import VelaConfig

    pytest.importorskip("ethosu.vela")
    _check_bit_exact(_validate(zoo.get(model_name), VelaConfig(accelerator), tmp_path, model_name), model_name)


@pytest.mark.parametrize("accelerator", U85[1:3])
@pytest.mark.parametrize("model_name", ZOO)
def test_velas_u85_binaries_on_another_system_are_bit_exact(model_name: str, accelerator: str, tmp_path) -> None:
    from cascader.vela import VelaConfig

    pytest.importorskip("ethosu.vela")
    config = VelaConfig(accelerator, system_config="Ethos_U85_SYS_Flash_High", memory_mode="Shared_Sram")
    _check_bit_exact(_validate(zoo.get(model_name), config, tmp_path, model_name), model_name)


SINGLE_OPS = dict(zoo.single_op_cases()) | dict(zoo.activation_op_cases())


@pytest.mark.parametrize("name", sorted(SINGLE_OPS))
def test_velas_u85_single_operator_binaries(name: str, tmp_path) -> None:
    """Each single-operator zoo case on U85-256 is bit-exact (int16 LEAKY_RELU's U85 LRELU
    included: tests/test_u85_leaky_relu.py)."""
    from cascader.vela import VelaConfig

    pytest.importorskip("ethosu.vela")
    _check_bit_exact(_validate(SINGLE_OPS[name], VelaConfig("ethos-u85-256"), tmp_path, name), name)


# Zoo models whose U85 binaries use the U85 mechanisms of tests/test_u85_mechanisms.py: an OFM
# transpose (mobilenet_v2_nchw's input, transformer_block's heads), TANH/SIGMOID tables
# (lstm_kws), broadcast of the first operand and the matrix multiply (transformer_block).
# transformer_block carries Vela's FULLY_CONNECTED, MEAN and SQUARED_DIFFERENCE roundings
# through two layer norms, as on the U55 (tests/test_sim_vela.py's ROUNDING_IN_TRANSFORMER):
# each operator alone on U85-256, only its FULLY_CONNECTEDs differ (by 1; its two RSQRTs could
# not be run alone by the reference).
MECHANISM_ZOO = {"mobilenet_v2_nchw": 0, "blazeface_blocks": 0, "unet_128": 0, "lstm_kws": 0, "transformer_block": 3}


@pytest.mark.parametrize("accelerator", U85[:3])
@pytest.mark.parametrize("model_name", sorted(MECHANISM_ZOO))
def test_velas_u85_binaries_with_u85_mechanisms(model_name: str, accelerator: str, tmp_path) -> None:
    from cascader.vela import VelaConfig

    pytest.importorskip("ethosu.vela")
    for config in (VelaConfig(accelerator),
                   VelaConfig(accelerator, system_config="Ethos_U85_SYS_Flash_High", memory_mode="Shared_Sram")):
        result = _validate(zoo.get(model_name), config, tmp_path, model_name)
        assert result.bit_exact is not None, f"{model_name} ({result.config}) was not simulated: {result.error}"
        assert result.max_abs_diff <= MECHANISM_ZOO[model_name], f"{model_name} ({result.config}): {result.details}"


# Shared models ($CASCADER_MODELS): Vela's U85 binaries bit-exact on two seeds, but for
# mlperftiny_ad01's FULLY_CONNECTEDs (Vela's double rounding, one off, as on the U55).
SHARED_DEVIATIONS = {"mlperftiny_ad01_int8": 1}


def _shared_models() -> list[str]:
    folder = os.environ.get("CASCADER_MODELS", "")
    return sorted(f for f in os.listdir(folder) if f.endswith(".tflite")) if folder and os.path.isdir(folder) else []


@pytest.mark.parametrize("accelerator", ["ethos-u85-256"])
@pytest.mark.parametrize("file_name", _shared_models() or [pytest.param("", marks=pytest.mark.skip("no $CASCADER_MODELS"))])
def test_velas_u85_binaries_of_shared_models(file_name: str, accelerator: str) -> None:
    """Every shared model's U85 binary is simulated (transposes, BILINEAR resizes, ARGMAX to
    int64, 16-bit tables included), on Vela's default U85 system and on Flash_High."""
    from cascader.bench.simulate import validate_with_vela
    from cascader.vela import VelaConfig

    pytest.importorskip("ethosu.vela")
    pytest.importorskip("ai_edge_litert")
    path = os.path.join(os.environ["CASCADER_MODELS"], file_name)
    name = file_name[: -len(".tflite")]
    for config in (VelaConfig(accelerator),
                   VelaConfig(accelerator, system_config="Ethos_U85_SYS_Flash_High", memory_mode="Shared_Sram")):
        result = validate_with_vela(path, config, seeds=(0, 1))
        assert result.bit_exact is not None, f"{name} ({result.config}) was not simulated: {result.error}"
        assert result.max_abs_diff <= SHARED_DEVIATIONS.get(name, 0), f"{name} ({result.config}): {result.details}"
