"""The Ethos-U packager (`cascader.tflite.ethos_u`) and the driver-payload encoder.

(a) Round trip: Vela's binaries are decoded into their parts (command stream words, flash,
    arena sizes, arena offsets), re-packaged into the original CPU model with our packager,
    and compared with Vela's file: the simulator gives the same outputs, and the model
    (tensors, buffers, operators, custom options, metadata) is equal for Vela 5.2 outputs.
    The files are not byte-identical: our flatbuffer writer lays tables out in another order
    than Vela's C++ writer; `load_model` of both gives equal `Model`s.
(b) A persistent arena: a variable tensor at input 4 (region 3), kept between the inferences
    of a `Session`, zero at start.
(c) Bad inputs raise InvalidArgumentError naming the problem.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from cascader import _core, load_model, save_model, simulate, zoo
from cascader.bench.package import repackage
from cascader.errors import BinaryError, InvalidArgumentError
from cascader.memory import ScheduledBuffer, Schedule, Step, layout
from cascader.reference import random_inputs
from cascader.sim import Session, npu_calls
from cascader.sim.binary import arena_sizes
from cascader.tflite import Model
from cascader.tflite.builder import ModelBuilder, quantization
from cascader.tflite.ethos_u import (
    ETHOSU_CUSTOM_OPTIONS,
    REGION_PERSISTENT,
    ArenaSizes,
    NpuSubgraph,
    package,
)

MODELS = os.environ.get("CASCADER_MODELS")


# --- driver payload -----------------------------------------------------------------------------


def test_payload_encoder_is_the_decoders_inverse():
    words = np.arange(1, 1000, dtype=np.uint32)
    for accelerator in ("ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256",
                        "ethos-u65-512"):
        payload = _core.encode_driver_payload(words, accelerator)
        config, decoded = _core.split_driver_payload(payload)
        assert config["accelerator"] == accelerator
        assert np.array_equal(decoded, words)
        # fourcc, config action (3 words), 3 NOPs, the stream tag: the stream starts 16-byte aligned
        assert len(payload) - 4 * words.size == 32


def test_payload_encoder_rejects_bad_streams():
    with pytest.raises(InvalidArgumentError, match="empty"):
        _core.encode_driver_payload(np.zeros(0, np.uint32), "ethos-u55-128")
    with pytest.raises(InvalidArgumentError, match="ethos-u55-128"):
        _core.encode_driver_payload(np.ones(4, np.uint32), "ethos-u77-128")


# --- (a) round trip through Vela's binaries -------------------------------------------------------


def _same_outputs(ours: Model, vela: Model, original: Model, seeds=(0, 1)) -> None:
    for seed in seeds:
        inputs = random_inputs(original, seed)
        for a, b in zip(simulate(ours, inputs), simulate(vela, inputs)):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def _ethos_u_structure(model: Model) -> list[tuple]:
    """Per `ethos-u` operator: each input/output tensor's role-relevant fields, and the options."""
    sg = model.main
    desc = lambda t: (sg.tensors[t].dtype, sg.tensors[t].shape, sg.tensors[t].is_variable,  # noqa: E731
                      sg.tensors[t].quantization)
    return [(op.custom_code, op.version, op.custom_options, [desc(t) for t in op.inputs], [desc(t) for t in op.outputs])
            for op in sg.operators if op.custom_code == "ethos-u"]


def _vela_cases():
    from cascader.vela import UNLIMITED_SRAM, VelaConfig

    configs = [VelaConfig("ethos-u55-128", "Performance", UNLIMITED_SRAM),
               VelaConfig("ethos-u65-256", "Size")]  # Dedicated_Sram: a separate scratch_fast
    nets = [(n, c) for n in ("resnet8", "ds_cnn_kws", "fc_autoencoder") for c in configs]
    return nets + [("add", configs[0])]  # two IFMs, no weights: an empty flash tensor


@pytest.mark.parametrize("name,config", _vela_cases(), ids=lambda v: getattr(v, "label", v))
def test_vela_5_binaries_repackage_to_the_same_model(name, config, tmp_path):
    pytest.importorskip("ethosu.vela")
    pytest.importorskip("ai_edge_litert")
    from cascader.vela import compile_with_vela

    original = zoo.get(name) if name in zoo.MODELS else dict(zoo.single_op_cases())[name]
    path = tmp_path / f"{name}.tflite"
    save_model(original, path)
    vela = load_model(compile_with_vela(path, config).path)
    ours = repackage(load_model(path), vela)
    assert ours == vela  # tensors, buffers, operators, custom options, metadata, I/O
    assert arena_sizes(ours) == arena_sizes(vela)
    assert load_model(save_model(ours)) == vela
    _same_outputs(ours, vela, original)


@pytest.mark.skipif(not MODELS, reason="CASCADER_MODELS is not set")
def test_vela_3_person_detect_repackages_with_the_same_structure():
    """Vela 3.11 (TFLM's shipped binary) names its tensors `_split_1_*`, sorts them by name, and
    writes a `vela_version` metadata entry and its version in the description; we write Vela 5.2's
    names and order. Everything the runtime reads is the same."""
    models = Path(MODELS)
    original = load_model(models / "tflm_person_detect.tflite")
    vela = load_model(models / "vela_reference" / "person_detect_vela.tflite")
    ours = repackage(original, vela)
    assert _ethos_u_structure(ours) == _ethos_u_structure(vela)
    assert ours.main.operators[0].custom_options == ETHOSU_CUSTOM_OPTIONS
    assert npu_calls(ours)[0].payload == npu_calls(vela)[0].payload  # Vela 3.11's ID word, re-encoded
    sg, vsg = ours.main, vela.main
    name_offsets = lambda m: {m.main.tensors[t].name: o for t, o in npu_calls(m)[0].arena_offsets.items()}  # noqa
    roles = {"_split_1_scratch": "scratch", "_split_1_scratch_fast": "scratch_fast"}
    assert {roles.get(k, k): v for k, v in name_offsets(vela).items()} == name_offsets(ours)
    assert ours.metadata_bytes("OfflineMemoryAllocation")[:8] == vela.metadata_bytes("OfflineMemoryAllocation")[:8]
    assert [sg.tensors[t].name for t in sg.inputs] == [vsg.tensors[t].name for t in vsg.inputs]
    _same_outputs(ours, vela, original)


@pytest.mark.skipif(not MODELS, reason="CASCADER_MODELS is not set")
@pytest.mark.parametrize("name", ["tinyengine_vww", "tflm_micro_speech_quantized"])
def test_vela_5_shared_models_with_cpu_operators_repackage(name, tmp_path):
    """Two `ethos-u` operators with CPU operators between them (tinyengine_vww: QUANTIZE, MEAN,
    DEQUANTIZE) and a TOCO model whose tensors each have their own empty buffer."""
    pytest.importorskip("ethosu.vela")
    pytest.importorskip("ai_edge_litert")
    from cascader.vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela

    path = Path(MODELS) / f"{name}.tflite"
    vela = load_model(compile_with_vela(path, VelaConfig("ethos-u55-128", "Performance", UNLIMITED_SRAM)).path)
    original = load_model(path)
    ours = repackage(original, vela)
    assert ours == vela
    _same_outputs(ours, vela, original, seeds=(0,))


# --- (b) the persistent arena ---------------------------------------------------------------------

SHAPE = (1, 4, 4, 8)  # 128 bytes of int8
NBYTES = 128


def _one_op_model() -> Model:
    b = ModelBuilder()
    q = quantization(0.05, 0)
    x = b.add_input("x", SHAPE, quantization=q)
    y = b.add_tensor("y", SHAPE, quantization=q)
    b.add_operator("MAX_POOL_2D", [x], [y], {"padding": "VALID", "stride_w": 1, "stride_h": 1,
                                              "filter_width": 1, "filter_height": 1})
    b.mark_output(y)
    return b.build()


def _dma(src_region: int, src: int, dst_region: int, dst: int, length: int) -> list[int]:
    """Command words of one DMA (register ids from the Ethos-U55 register map)."""
    set0 = lambda reg, value: reg | (value << 16)  # noqa: E731  cmd0: 16-bit parameter
    return [set0(0x0130, src_region), 0x4030, src, set0(0x0131, dst_region), 0x4031, dst, 0x4032, length,
            0x0010]  # DMA0_SRC_REGION, DMA0_SRC, DMA0_DST_REGION, DMA0_DST, DMA0_LEN, OP_DMA_START


STOP = [0xFFFF0000]  # NPU_OP_STOP
X_AT, Y_AT = 0, 256  # arena offsets of the IFM and the OFM


def _delay_line(persistent: int = NBYTES, region: int = REGION_PERSISTENT) -> Model:
    """An `ethos-u` operator whose output is the previous inference's input: state -> OFM, IFM -> state."""
    words = np.array(_dma(region, 0, 1, Y_AT, NBYTES) + _dma(1, X_AT, region, 0, NBYTES) + STOP, np.uint32)
    return package(_one_op_model(), [NpuSubgraph((0,), words)], b"", ArenaSizes(512, 0, persistent),
                   {0: X_AT, 1: Y_AT})


def test_persistent_arena_is_a_variable_tensor_in_region_3():
    model = _delay_line()
    sg = model.main
    op = sg.operators[0]
    state = sg.tensors[op.inputs[4]]
    assert (state.name, state.dtype, state.shape, state.is_variable, state.buffer) == ("persistent", "uint8",
                                                                                      (NBYTES,), True, 0)
    offsets = np.frombuffer(model.metadata_bytes("OfflineMemoryAllocation"), "<i4")[3:]
    assert offsets[op.inputs[4]] == -1  # TFLM puts it in its persistent (tail) arena
    assert offsets[op.inputs[2]] == 0 and offsets[op.inputs[5]] == X_AT and offsets[op.outputs[0]] == Y_AT
    call = npu_calls(load_model(save_model(model)))[0]
    assert call.persistent == (op.inputs[4],)
    assert call.region_tensors[REGION_PERSISTENT] == op.inputs[4]
    assert call.ifms == (op.inputs[5],)  # the state is not an IFM
    assert arena_sizes(model) == ArenaSizes(512, 0, NBYTES)


def test_persistent_arena_survives_between_inferences_of_a_session():
    model = load_model(save_model(_delay_line()))
    rng = np.random.default_rng(0)
    xs = [rng.integers(-128, 128, SHAPE, dtype=np.int8) for _ in range(3)]
    session = Session(model)
    assert not session.run(xs[0])[0].any()  # zero at start
    assert np.array_equal(session.run(xs[1])[0], xs[0])
    assert np.array_equal(session.run(xs[2])[0], xs[1])
    assert np.array_equal(session.persistent["persistent"].view(np.int8), xs[2].reshape(-1))
    session.reset()
    assert not session.run(xs[0])[0].any()
    assert not simulate(model, xs[1])[0].any()  # `simulate` is one fresh inference


def test_vela_binary_with_a_persistent_arena_still_simulates(tmp_path):
    """Adding a persistent arena moves the IFMs up one region; Vela's streams never address them."""
    original = dict(zoo.single_op_cases())["conv_3x3_s1_same"]
    pytest.importorskip("ethosu.vela")
    pytest.importorskip("ai_edge_litert")
    from cascader.vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela

    path = tmp_path / "conv.tflite"
    save_model(original, path)
    vela = load_model(compile_with_vela(path, VelaConfig("ethos-u55-128", "Performance", UNLIMITED_SRAM)).path)
    plain = repackage(load_model(path), vela)
    call = npu_calls(vela)[0]
    config, words = _core.split_driver_payload(call.payload)
    by_name = {t.name: i for i, t in enumerate(original.main.tensors)}
    offsets = {by_name[vela.main.tensors[t].name]: o for t, o in call.arena_offsets.items()
               if vela.main.tensors[t].name in by_name}
    with_state = package(original, [NpuSubgraph((0,), words)], call.flash,
                         ArenaSizes(vela.main.tensors[call.scratch_tensor].nbytes, 0, 64), offsets)
    assert len(with_state.main.operators[0].inputs) == len(plain.main.operators[0].inputs) + 1
    _same_outputs(with_state, plain, original, seeds=(0,))


def test_arena_sizes_from_a_memory_layout():
    schedule = Schedule(
        buffers=[ScheduledBuffer("ifm", "feature_map", 1000), ScheduledBuffer("lut", "lut", 256),
                 ScheduledBuffer("ofm", "feature_map", 500), ScheduledBuffer("state", "scratch", 64, persistent=True)],
        steps=[Step(reads=(0, 1, 3), writes=(2, 3))],
    )
    sizes = ArenaSizes.from_layout(layout(schedule))
    assert sizes.persistent >= 256 + 64 and sizes.scratch_fast >= 1500 and sizes.scratch == 0
    shared = ArenaSizes.from_layout(layout(schedule, _shared_sram()))
    assert shared.scratch >= 1500 and shared.scratch_fast == 0 and shared.persistent == sizes.persistent
    assert shared.non_persistent == shared.scratch


def _shared_sram():
    from cascader.memory import MemoryConfig

    return MemoryConfig(shared_sram=True)


# --- (c) bad inputs -------------------------------------------------------------------------------


def _words() -> np.ndarray:
    return np.array(_dma(1, X_AT, 1, Y_AT, NBYTES) + STOP, np.uint32)


@pytest.mark.parametrize(
    "arenas,offsets,match",
    [
        (ArenaSizes(300), {0: X_AT, 1: Y_AT}, "'y' at arena offset 256 .* outside the scratch arena"),
        (ArenaSizes(512), {0: X_AT}, "'y' .* has no arena offset"),
        (ArenaSizes(512), {0: -16, 1: Y_AT}, "'x' at arena offset -16"),
        (ArenaSizes(0), {0: X_AT, 1: Y_AT}, "scratch arena size is 0"),
        (ArenaSizes(512, -1), {0: X_AT, 1: Y_AT}, "scratch_fast must be an integer"),
        (ArenaSizes(512, 0, 2**31), {0: X_AT, 1: Y_AT}, "persistent must be an integer"),
        (ArenaSizes(512), {0: X_AT, 1: Y_AT, 7: 0}, "names tensor 7"),
    ],
)
def test_bad_sizes_and_offsets(arenas, offsets, match):
    with pytest.raises(InvalidArgumentError, match=match):
        package(_one_op_model(), [NpuSubgraph((0,), _words())], b"", arenas, offsets)


def test_command_stream_must_fit_its_regions():
    # Without a persistent arena region 3 is the IFM (128 B): a 256-byte DMA overruns it.
    words = np.array(_dma(1, X_AT, REGION_PERSISTENT, 0, 256) + STOP, np.uint32)
    with pytest.raises(InvalidArgumentError, match="reaches byte 256 of region 3 .x, 128 B"):
        package(_one_op_model(), [NpuSubgraph((0,), words)], b"", ArenaSizes(512), {0: X_AT, 1: Y_AT})
    with pytest.raises(InvalidArgumentError, match="region 3 .persistent, 64 B.* too small"):
        _delay_line(persistent=64)
    # Regions are base pointers 0..7 in operator position order; this operator passes 6.
    with pytest.raises(InvalidArgumentError, match="addresses region 7, but the ethos-u operator passes only "
                                                   "regions 0 read_only, 1 scratch, 2 scratch, 3 persistent, 4 x, 5 y"):
        _delay_line(region=7)
    # A weight stream beyond the flash.
    with pytest.raises(InvalidArgumentError, match="region 0 .read_only"):
        package(_one_op_model(), [NpuSubgraph((0,), np.array(_dma(0, 0, 1, Y_AT, 64) + STOP, np.uint32))],
                b"\0" * 32, ArenaSizes(512), {0: X_AT, 1: Y_AT})


def test_more_than_eight_base_pointers_are_cut_at_eight():
    """TFLM's kernel passes at most 8 base pointers (regions 0-7); later IFMs/OFMs are not regions,
    which is fine since the command stream addresses them inside the scratch arena."""
    b = ModelBuilder()
    q = quantization(0.05, 0)
    xs = [b.add_input(f"x{i}", (1, 1, 1, 16), quantization=q) for i in range(6)]
    ys = [b.add_tensor(f"y{i}", (1, 1, 1, 16), quantization=q) for i in range(6)]
    for x, y in zip(xs, ys):
        b.add_operator("RELU", [x], [y])
        b.mark_output(y)
    model = b.build()
    words = np.array(sum((_dma(1, 16 * i, 1, 96 + 16 * i, 16) for i in range(6)), []) + STOP, np.uint32)
    offsets = {t: 16 * i for i, t in enumerate(xs + ys)}
    packaged = package(model, [NpuSubgraph(tuple(range(6)), words)], b"", ArenaSizes(192), offsets)
    call = npu_calls(packaged)[0]
    assert len(call.region_tensors) == 8 and len(call.ifms) + len(call.ofms) == 12
    x = [np.full((1, 1, 1, 16), i, np.int8) for i in range(6)]
    assert all(np.array_equal(y, v) for y, v in zip(simulate(packaged, x), x))


def test_bad_subgraphs():
    model = _one_op_model()
    arenas, offsets = ArenaSizes(512), {0: X_AT, 1: Y_AT}
    with pytest.raises(InvalidArgumentError, match="operators \\[3\\] do not exist"):
        package(model, [NpuSubgraph((3,), _words())], b"", arenas, offsets)
    with pytest.raises(InvalidArgumentError, match="in two NPU subgraphs"):
        package(model, [NpuSubgraph((0,), _words()), NpuSubgraph((0,), _words())], b"", arenas, offsets)
    with pytest.raises(InvalidArgumentError, match="non-empty 1-D array"):
        package(model, [NpuSubgraph((0,), np.zeros((2, 2), np.uint32))], b"", arenas, offsets)
    with pytest.raises(InvalidArgumentError, match="32 bits"):
        package(model, [NpuSubgraph((0,), np.array([-1, 0], np.int64))], b"", arenas, offsets)
    with pytest.raises(InvalidArgumentError, match="IFMs are tensors \\[0\\]"):
        package(model, [NpuSubgraph((0,), _words(), ifms=(1,))], b"", arenas, offsets)
    with pytest.raises(BinaryError):  # the packager decodes the stream it packs
        package(model, [NpuSubgraph((0,), np.array([0x4030], np.uint32))], b"", arenas, offsets)


def test_non_convex_subgraph_is_rejected():
    """a -> b (CPU) -> c with a and c on the NPU cannot be one operator."""
    b = ModelBuilder()
    q = quantization(0.05, 0)
    x = b.add_input("x", (1, 1, 1, 16), quantization=q)
    t = [b.add_tensor(f"t{i}", (1, 1, 1, 16), quantization=q) for i in range(3)]
    b.add_operator("RELU", [x], [t[0]])
    b.add_operator("RELU", [t[0]], [t[1]])
    b.add_operator("ADD", [t[0], t[1]], [t[2]], {"fused_activation_function": "NONE"})
    b.mark_output(t[2])
    words = np.array(_dma(1, 0, 1, 16, 16) + STOP, np.uint32)
    with pytest.raises(InvalidArgumentError, match="not convex"):
        package(b.build(), [NpuSubgraph((0, 2), words)], b"", ArenaSizes(64), {0: 0, 1: 16, 2: 32, 3: 48})


def test_npu_operator_placed_after_the_npu_operator_it_reads():
    """B (op 1) computes an IFM of A (ops 0 and 2): A goes after B, though its first operator is
    earlier; both share one flash and one scratch tensor and have their own command streams."""
    b = ModelBuilder()
    q = quantization(0.05, 0)
    x = b.add_input("x", (1, 1, 1, 16), quantization=q)
    t0, t1, y = (b.add_tensor(n, (1, 1, 1, 16), quantization=q) for n in ("t0", "t1", "y"))
    b.add_operator("RELU", [x], [t0])
    b.add_operator("RELU", [x], [t1])
    b.add_operator("ADD", [t0, t1], [y], {"fused_activation_function": "NONE"})
    b.mark_output(y)
    copy = lambda src, dst: np.array(_dma(1, src, 1, dst, 16) + STOP, np.uint32)  # noqa: E731
    a_ops = NpuSubgraph((0, 2), copy(16, 32))  # y = t1
    b_ops = NpuSubgraph((1,), copy(0, 16))  # t1 = x
    packaged = package(b.build(), [a_ops, b_ops], b"", ArenaSizes(48), {x: 0, t1: 16, y: 32})
    sg = packaged.main
    assert [[sg.tensors[t].name for t in op.outputs] for op in sg.operators] == [["t1"], ["y"]]
    assert [op.inputs[1:4] for op in sg.operators][0] == [op.inputs[1:4] for op in sg.operators][1]
    assert sg.operators[0].inputs[0] != sg.operators[1].inputs[0]
    v = np.arange(16, dtype=np.int8).reshape(1, 1, 1, 16)
    assert np.array_equal(simulate(packaged, v)[0], v)
    assert arena_sizes(packaged) == ArenaSizes(48)
