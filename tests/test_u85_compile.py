"""Ethos-U85, part 2 (#43): cascader.compile for the U85.

What is covered: the zoo models of test_u85_judge compiled for every U85 size (uncascaded, the
default system and memory mode) and simulated bit-exact against the reference interpreter on 2
seeds; what the U85 emitter does not express yet runs on the CPU with its reason (and nothing
else does); our U85 weight streams decode back to the model's weights and our scale streams to
the lowered channels; the register encoder is the decoder's inverse on our records and refuses
the U55's fields; a table is loaded before the kernels read it; cascaded compiles under a budget
fit it and are bit-exact.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader import _core, zoo
from cascader.errors import InvalidArgumentError
from cascader.sim import npu_calls
from cascader.tflite.builder import ModelBuilder, quantization

from test_u85_judge import ZOO, _model_channels, _regions  # noqa: E402

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048"]
# Operators the U85 emitter refuses for now (emit/ethos_u85.refusal), by model; every other
# operator of the zoo runs on the NPU (attention_pooling's int8 SOFTMAX too, since #43's second part).
ON_CPU: dict[str, set[str]] = {}


@pytest.fixture(scope="module")
def compiled() -> dict:
    return {}


def _compile(cache: dict, name: str, accelerator: str) -> cascader.CompiledModel:
    key = (name, accelerator)
    if key not in cache:
        cache[key] = cascader.compile(zoo.get(name), accelerator=accelerator)
    return cache[key]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("model_name", ZOO)
def test_zoo_compiles_bit_exact(model_name: str, accelerator: str, compiled: dict, tmp_path) -> None:
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    c = _compile(compiled, model_name, accelerator)
    reasons = {v.reason for v in c.partition.verdicts if not v.npu}
    assert reasons == ON_CPU.get(model_name, set()), reasons
    assert all(v.rule == "target" for v in c.partition.verdicts if not v.npu)
    calls = npu_calls(c.model)
    assert calls and all(call.decode().config["accelerator"] == accelerator for call in calls)
    path = tmp_path / f"{model_name}.tflite"
    cascader.save_model(zoo.get(model_name), path)
    result = validate(path, c.binary, seeds=(0, 1), config_label=accelerator)
    assert result.bit_exact, (result.error, result.details)


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("model_name", ["mobilenet_v2", "ds_cnn_kws", "fc_autoencoder"])
def test_weight_streams_decode_to_the_weights(model_name: str, accelerator: str, compiled: dict) -> None:
    """Every weight stream of our binary decodes (through the judge's U85 weight order and
    codec) to weights of the model, one stream per weight decoder, and every scale stream to
    entries that re-encode to its bytes."""
    c = _compile(compiled, model_name, accelerator)
    decoders = cascader.Accelerator(accelerator).weight_decoders
    channels = _model_channels(zoo.get(model_name))
    # A convolution folded to read its input as column groups (`frontend.column_fold`: the
    # MobileNetV2 and DS-CNN first convolutions) holds the model's kernel rearranged, its new
    # taps at the zero point (test_column_fold shows the sums equal): its rows are the lowering's.
    for sop in c.schedule.operations:
        lo = sop.lowered
        if lo.weights is not None and "columns in groups of" in lo.name:
            zero = np.asarray(lo.weights.zero_points, np.int64).reshape(-1, 1, 1, 1)
            rows = lo.weights.values.astype(np.int64) - zero
            channels.update(rows[o].astype(np.int16).ravel().tobytes() for o in range(rows.shape[0]))
    found = total = 0
    for call in npu_calls(c.model):
        for op in _core.u85_operation_weights(bytes(call.payload), _regions(call)):
            assert not op["fast"] and not op["acc48"] and len(op["streams"]) == decoders
            scales = op["scales"]
            entries = _core.decode_u85_scale_stream(scales, len(scales) // 10, False)
            assert len(scales) % 160 == 0  # 10 bytes a channel, padded to 16 channels
            assert entries[: op["ohwi"].shape[0]] == op["channels"]
            assert all(e == (0, 0, 0) for e in entries[op["ohwi"].shape[0]:])
            w = op["ohwi"]
            found += sum(w[o].tobytes() in channels for o in range(w.shape[0]))
            total += w.shape[0]
    assert total and found == total, (found, total)


def test_records_round_trip_through_the_u85_encoder(compiled: dict) -> None:
    """Our records encode to words that decode to the same registers (the decoder's and the
    encoder's one register map), and the encoder refuses what has no U85 register."""
    c = _compile(compiled, "resnet8", "ethos-u85-256")
    records = c.operations[0]
    call = npu_calls(c.model)[0]
    words = cascader.emit.encode_command_stream(records, "ethos-u85-256")
    assert np.array_equal(words, _core.split_driver_payload(bytes(call.payload))[1])
    decoded = call.decode().operations
    assert len(decoded) == len(records)
    for ours, theirs in zip(records, decoded):
        assert ours["kind"] == theirs["kind"]
        if ours["kind"] == "dma":
            assert (ours["src"], ours["dst"]) == (theirs["src"], theirs["dst"])
            continue
        for key in ("block", "padding", "ofm_scale"):
            assert tuple(ours[key]) == tuple(theirs[key]), key
        assert ours["activation"] == theirs["activation"]
        assert list(ours["ofm"]["base"]) == list(theirs["ofm"]["base"])
        for key, value in ours["u85"].items():
            assert theirs["u85"][key] == (list(value) if key == "weight_streams" else value), key
    conv = next(r for r in records if r["kind"] == "conv")
    for change, message in (({"rounding": "NATURAL"}, "round mode"), ({"ifm_scale_mode": 1}, "IFM scale mode"),
                            ({"ofm_scale": (1 << 31, 31)}, "OFM scale")):
        with pytest.raises(InvalidArgumentError, match=message):
            cascader.emit.encode_command_stream([dict(conv, **change)], "ethos-u85-256")


def _leaky_relu_int16(alpha: float = 0.25):
    """An int16 LEAKY_RELU of one quantization: one LRELU for alpha >= 0 (the U55's and the
    U85's), otherwise three operations, one of them a MUL."""
    b = ModelBuilder()
    q = quantization(0.001, 0)
    x = b.add_input("x", (1, 4, 4, 8), "int16", q)
    y = b.add_tensor("y", (1, 4, 4, 8), "int16", q)
    b.add_operator("LEAKY_RELU", [x], [y], {"alpha": alpha})
    b.mark_output(y)
    return b.build()


def refuse_mul(monkeypatch) -> None:
    """Make the U85 emitter refuse every MUL: it emits every operation the lowering makes today,
    and the refusal mechanism still needs an operation it refuses."""
    from cascader.emit import ethos_u85

    refusal = ethos_u85.refusal
    monkeypatch.setattr(ethos_u85, "refusal", lambda op: "a MUL is not emitted for the Ethos-U85 (test)"
                        if op.registers.get("sub_op") == "MUL" else refusal(op))


def test_refused_operators_go_to_the_cpu_with_the_reason(monkeypatch) -> None:
    """An operator whose operations the U85 emitter cannot express runs on the CPU with the
    emitter's reason, on the U85 only: on the U55 it stays on the NPU (`refuse_mul`)."""
    refuse_mul(monkeypatch)
    model = _leaky_relu_int16(-0.25)  # three operations, one of them a MUL
    u85 = cascader.compile(model, accelerator="ethos-u85-256").partition
    u55 = cascader.compile(model, accelerator="ethos-u55-128").partition
    refused = [i for i, op in enumerate(u85.graph.operators) if op.opcode == "LEAKY_RELU"]
    assert refused
    for i in refused:
        assert not u85.verdicts[i].npu and u85.verdicts[i].rule == "target"
        assert "not emitted for the Ethos-U85 (test)" in u85.verdicts[i].reason
        assert u55.verdicts[i].npu


@pytest.mark.parametrize("accelerator", ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"])
def test_int16_leaky_relu_of_one_quantization_runs_on_the_npu(accelerator: str, tmp_path) -> None:
    """One LRELU on the U85 (its operand scales, tests/test_u85_leaky_relu.py) as on the U55
    (alpha in OFM_SCALE), bit-exact on 2 seeds."""
    from test_u85_lowering import _bit_exact_on_the_npu

    c = _bit_exact_on_the_npu(_leaky_relu_int16(), accelerator, tmp_path)
    assert [op.lowered.registers.get("sub_op") for op in c.schedule.operations] == ["LRELU"]
    u55 = cascader.compile(_leaky_relu_int16(), accelerator="ethos-u55-128")
    assert [op.lowered.registers.get("sub_op") for op in u55.schedule.operations] == ["LRELU"]


def test_a_table_is_loaded_before_the_kernels_read_it(compiled: dict) -> None:
    """mobilenet_v3_blocks' HARD_SWISH tables: each is DMA'd into the LUT RAM (region 0x103),
    and the kernel that reads it waits for that DMA (NPU_OP_DMA_WAIT) before it starts."""
    c = _compile(compiled, "mobilenet_v3_blocks", "ethos-u85-256")
    tables = 0
    for call in npu_calls(c.model):
        words = [int(w) for w in _core.split_driver_payload(bytes(call.payload))[1]]
        waiting_for_table = False
        i = 0
        while i < len(words):
            opcode, param = words[i] & 0x3FF, words[i] >> 16
            if words[i] & 0x4000:  # a cmd1 and its payload
                i += 2
                continue
            if opcode == 0x131:  # DMA0_DST_REGION
                region = param
            elif opcode == 0x010:  # DMA start
                if region == 0x103:
                    tables += 1
                    waiting_for_table = True
            elif opcode == 0x011:  # DMA wait
                waiting_for_table = False
            elif 0x002 <= opcode <= 0x007:  # a kernel
                assert not waiting_for_table, f"word {i}: a kernel starts before the table DMA is waited for"
            i += 1
    assert tables


# ResNet8 at 0.4 of its unlimited SRAM runs faster uncascaded now that its convolutions chain
# into their residual ADDs (89,400 cycles, some maps in DRAM, against 92,846 cascaded before);
# at 0.5 too, and DS-CNN at 0.4, since the operations on maps in DRAM take blocks for DRAM
# (`evicted_blocks`: ResNet8 74,147 cycles against 79,448 cascaded; DS-CNN 59,063). BlazeFace's
# residual blocks cascade and chain.
@pytest.mark.parametrize("model_name,fraction", [("mobilenet_v2", 0.4), ("blazeface_blocks", 0.5),
                                                 ("mobilenet_v1", 0.4)])
def test_cascaded_u85_compiles_fit_and_are_bit_exact(model_name: str, fraction: float, compiled: dict,
                                                     tmp_path) -> None:
    """Under a budget below the uncascaded schedule's SRAM the planner's cascades run on the
    U85 too: the SRAM laid out is within the budget, and the binary is bit-exact (each stripe
    with its whole operation's micro-block, which its weight stream is ordered for)."""
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    unlimited = _compile(compiled, model_name, "ethos-u85-256")
    budget = int(unlimited.sram_bytes * fraction)
    c = cascader.compile(zoo.get(model_name), accelerator="ethos-u85-256", sram=budget)
    assert c.sram_bytes <= budget < unlimited.sram_bytes
    assert any(sop.cascade is not None for sop in c.schedule.operations)
    path = tmp_path / f"{model_name}.tflite"
    cascader.save_model(zoo.get(model_name), path)
    result = validate(path, c.binary, seeds=(0, 1), config_label="ethos-u85-256")
    assert result.bit_exact, (result.error, result.details)


@pytest.mark.parametrize("accelerator", SIZES)
def test_u85_op_estimates_choose_their_block(accelerator: str) -> None:
    """estimate_op on a U85 costs the op with the block its search finds fastest: a multiple
    of the micro-block within the maximum block, no slower than the smallest such block (the
    op estimates of the U55/U65 path, the planner and the scheduler all go through it)."""
    acc = cascader.Accelerator(accelerator)
    cost = cascader.estimate_op("conv2d", (1, 32, 32, 32), (1, 32, 32, 64), kernel=3, accelerator=accelerator)
    uh, uw, ud, _ = _core.u85_micro_block(accelerator, _core.NpuOpType.Conv2D, 8, (32, 32, 64), False)
    assert (uh, uw, ud) in acc.ofm_ublocks
    h, w, d = cost.block_config.ofm_block
    assert h % uh == 0 and w % uw == 0 and d % max(16, ud) == 0
    smallest = cascader.estimate_op("conv2d", (1, 32, 32, 32), (1, 32, 32, 64), kernel=3, accelerator=accelerator,
                                    block_config=(uh, uw, max(16, ud)))
    assert cost.total_cycles <= smallest.total_cycles
