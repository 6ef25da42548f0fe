"""Our live-range builder and exact allocator on a real scheduler's output: Vela's binaries.

Vela's command stream is read back as a `cascader.memory.Schedule`, allocated with our exact
allocator, its addresses relocated to our offsets and the model re-packaged. The relocated
binary must simulate bit-exactly like Vela's: a live range too short would let the allocator
put a buffer over bytes still to be read. The negative control shortens one live range and
shows the allocation then overlaps a live buffer and the outputs change.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cascader import _core, load_model, save_model, zoo
from cascader.errors import BinaryError, CascaderError, InvalidArgumentError
from cascader.memory import check_allocation, live_ranges
from cascader.reference import random_inputs

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ethosu.vela")

from cascader.bench.relocate import CONFIGS, relocate_row, relocated_model, same_outputs  # noqa: E402
from cascader.vela import VelaConfig, compile_with_vela  # noqa: E402
from cascader.sim.relocate import plan, relocated_command_streams, stream_schedule  # noqa: E402

MODELS = os.environ.get("CASCADER_MODELS")
SHARED_SUBSET = ["tflm_hello_world_int8", "tflm_micro_speech_quantized", "mlperftiny_kws_ref_model",
                 "mlperftiny_resnet8_quant", "mlperftiny_vww_96_int8", "tflm_person_detect",
                 "tinyengine_vww"]  # two ethos-u operators, a CPU operator between them


def _compiled(path: Path, config):
    return load_model(path), load_model(compile_with_vela(path, config).path)


def _zoo(name: str, config, tmp_path: Path):
    path = tmp_path / f"zoo_{name}.tflite"
    path.write_bytes(save_model(zoo.get(name)))
    return _compiled(path, config)


# Vela keeps these models' state (an LSTM's) in the scratch arena between inferences.
STATEFUL = {"lstm_kws"}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.label)
@pytest.mark.parametrize("name", [n for n in zoo.MODELS if n not in STATEFUL])
def test_zoo_relocated_is_bit_exact(name, config, tmp_path):
    original, vela = _zoo(name, config, tmp_path)
    row = relocate_row(name, original, vela, config.label)
    assert row.bit_exact, f"{name} ({config.label}): {row.note or 'outputs differ'}"
    # The exact allocator reaches its proven lower bound, which no allocation can beat.
    assert row.scratch >= row.bound_scratch and row.fast >= row.bound_fast
    assert row.scratch <= row.vela_scratch + 64 and row.fast <= row.vela_fast + 64, "far above Vela's own plan"


@pytest.mark.parametrize("name", sorted(STATEFUL))
def test_state_kept_in_the_arena_is_refused_with_its_reason(name, tmp_path):
    from cascader.errors import CascaderError
    from cascader.sim.relocate import stream_schedule

    _, vela = _zoo(name, CONFIGS[0], tmp_path)
    with pytest.raises(CascaderError, match="keeps state between inferences"):
        stream_schedule(vela)


SINGLE_OPS = ["dw_3x3_multiplier2", "add_broadcast_channel", "pad_asymmetric", "conv_3x1_odd_shape"]
ACTIVATIONS = ["tanh_int16", "softmax_int16"]


@pytest.mark.parametrize("name", SINGLE_OPS + ACTIVATIONS)
def test_single_operations_relocate(name, tmp_path):
    """Vela's lowerings: a depth multiplier as strided, interleaving pooling writes (merged
    into one buffer, not one hull each), broadcasts, padding, LUT DMAs into the SHRAM."""
    cases = dict(zoo.single_op_cases()) | dict(zoo.activation_op_cases())
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(save_model(cases[name]))
    original, vela = _compiled(path, CONFIGS[0])
    row = relocate_row(name, original, vela, CONFIGS[0].label)
    assert row.bit_exact, row.note
    assert row.scratch <= row.vela_scratch, f"{row.scratch:,} B against Vela's {row.vela_scratch:,} B"


def test_dual_core_weight_streams_relocate(tmp_path):
    """Ethos-U65-512: each core reads its own weight and scale stream (WEIGHT1/SCALE1_BASE)."""
    config = VelaConfig("ethos-u65-512", "Size")
    original, vela = _zoo("resnet8", config, tmp_path)
    ss = stream_schedule(vela)
    assert any(u.register == "WEIGHT1_BASE" and u.buffer >= 0 for u in ss.uses)
    row = relocate_row("resnet8", original, vela, config.label)
    assert row.bit_exact, row.note


@pytest.mark.skipif(not MODELS, reason="CASCADER_MODELS is not set")
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.label)
@pytest.mark.parametrize("name", SHARED_SUBSET)
def test_shared_relocated_is_bit_exact(name, config):
    path = Path(MODELS) / f"{name}.tflite"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    original, vela = _compiled(path, config)
    row = relocate_row(name, original, vela, config.label)
    assert row.bit_exact, f"{name} ({config.label}): {row.note or 'outputs differ'}"


@pytest.fixture(scope="module")
def cascaded(tmp_path_factory):
    """resnet8 at Size on U55: cascaded stripes, a rolling buffer, in-place ADDs, weight DMAs."""
    original, vela = _zoo("resnet8", CONFIGS[1], tmp_path_factory.mktemp("relocate"))
    return original, vela, stream_schedule(vela)


def test_derived_schedule_shape(cascaded):
    _, vela, ss = cascaded
    ops = ss.calls[0].decode().operations
    # Steps: the inputs, the IFMs' read, the operations, the OFMs' read, each CPU operator, the outputs.
    cpu = len(vela.main.operators) - len(ss.calls)
    assert len(ss.schedule.steps) == len(ops) + 4 + cpu
    kinds = {b.kind for b in ss.schedule.buffers}
    assert {"feature_map", "stripe_buffer"} <= kinds and kinds & {"weights", "copy"}
    assert any(a.kind == "in_place" for a in ss.schedule.aliases)
    # Every relocated address lies inside the buffer it moves with.
    for u in ss.uses:
        if u.buffer >= 0:
            assert ss.address[u.buffer] <= u.address < ss.address[u.buffer] + ss.schedule.buffers[u.buffer].size
    # One buffer per version: Vela reuses addresses, so several buffers share a start address.
    assert len(set(zip(ss.memory.tolist(), ss.address.tolist()))) < len(ss.schedule.buffers)


def test_identity_relocation_keeps_every_address(cascaded):
    _, _, ss = cascaded
    [words] = relocated_command_streams(ss, ss.address)
    [original] = [p for p in ss.parts if isinstance(p, np.ndarray)]
    assert len(words) <= len(original)  # only redundant address writes go
    config = ss.calls[0].decode().config
    payload = _core.encode_driver_payload(words, config["accelerator"], config["id_word"])
    d = _core.derive_schedule([words if isinstance(p, np.ndarray) else p for p in ss.parts], ss.memory_of_region)
    assert [tuple(u) for u in d["uses"]] == [(u.stream, u.operation, u.register, u.buffer, u.address) for u in ss.uses]
    # Every other register is as it was (the used addresses are compared above; an unused
    # tile's base register may keep another value, which the NPU does not read).
    def strip(ops):
        return [{k: ({**v, "base": None} if isinstance(v, dict) and "base" in v else v)
                 for k, v in op.items() if k != "word_offset"} for op in ops]

    assert strip(_core.decode_driver_payload(payload)["operations"]) == strip(ss.calls[0].decode().operations)


def test_plan_is_a_valid_allocation(cascaded):
    _, _, ss = cascaded
    p = plan(ss)
    r = live_ranges(ss.schedule)
    offsets = np.zeros(r.start.size, dtype=np.int64)
    offsets[r.buffer_range] = p.new_address - r.buffer_offset
    check_allocation(np.stack([r.start, r.end, r.size, r.alignment], axis=1), offsets)


def test_negative_control_shorter_live_range_is_caught(cascaded):
    """Shrink one live range by a step: the allocator overlaps it with a buffer live at that
    step, and the relocated binary no longer simulates like Vela's: the simulator's in-place
    hazard check refuses an OFM that overwrites IFM bytes before the NPU reads them, or the
    outputs change. So the bit-exact tests above can fail.

    (A one-step shrink frees the buffer only at its last reading step, so the buffer placed
    over it is mostly that step's OFM: the hazard check is what catches it. Overlaps with a
    weight buffer that starts a step early for its DMA are harmless in the sequential
    simulator and are skipped.)"""
    original, vela, ss = cascaded
    r = live_ranges(ss.schedule)
    true_rows = np.stack([r.start, r.end, r.size, r.alignment], axis=1)
    inputs = random_inputs(original, 0)
    overlapped, caught = 0, []
    for i in np.argsort(-r.size, kind="stable"):
        if r.end[i] - r.start[i] < 2:
            continue
        end = r.end.copy()
        end[i] -= 1
        p = plan(ss, ranges=replace(r, end=end))
        offsets = np.zeros(r.start.size, dtype=np.int64)
        offsets[r.buffer_range] = p.new_address - r.buffer_offset
        try:
            check_allocation(true_rows, offsets)
            continue
        except InvalidArgumentError:
            overlapped += 1
        try:
            if not same_outputs(vela, relocated_model(original, vela, ss, p), inputs):
                caught.append("outputs changed")
        except BinaryError as e:
            assert "overwrites its IFM before the NPU reads it" in str(e)
            caught.append("in-place hazard")
        if caught:
            break
    assert overlapped and caught, f"{overlapped} shrunk ranges overlapped a live buffer; none was caught"


def test_bad_inputs(cascaded, tmp_path):
    _, _, ss = cascaded
    with pytest.raises(InvalidArgumentError, match="one new address per buffer"):
        relocated_command_streams(ss, ss.address[:-1])
    with pytest.raises(InvalidArgumentError, match="region 3"):
        _core.derive_schedule([[("x", 3, 0, 16, True)], *ss.parts], ss.memory_of_region)
    cpu_only = tmp_path / "cpu.tflite"
    cpu_only.write_bytes(save_model(zoo.get("resnet8")))
    with pytest.raises(CascaderError, match="no ethos-u operator"):
        stream_schedule(load_model(cpu_only))


# --- the derivation's rules on hand-written DMA streams (no Vela needed) ---------------------

def _dma(src_region: int, src: int, dst_region: int, dst: int, length: int) -> list[int]:
    cmd1 = lambda op, value: [(1 << 14) | op, value]  # noqa: E731
    return [0x130 | (src_region << 16), 0x131 | (dst_region << 16), *cmd1(0x030, src), *cmd1(0x031, dst),
            *cmd1(0x032, length), 0x010]


def _derive(*dmas: list[int]) -> dict:
    words = np.array([w for d in dmas for w in d] + [0x000], dtype=np.uint32)  # NPU_OP_STOP ends it
    return _core.derive_schedule([words], [-1, 1, 1, -1, -1, -1, -1, -1])


def test_rewrite_after_last_read_is_a_new_version():
    d = _derive(_dma(0, 0, 1, 0x100, 64),      # flash -> A (version 1)
                _dma(1, 0x100, 1, 0x400, 64),  # A -> B
                _dma(0, 64, 1, 0x100, 64),     # flash -> A again (version 2)
                _dma(1, 0x100, 1, 0x800, 64))  # A -> C
    starts = sorted(a for *_, a in d["buffers"])
    assert starts == [0x100, 0x100, 0x400, 0x800]  # A twice: one buffer per version
    ranges = [(r, w) for r, w in d["steps"]]
    a1, b, a2, c = (w[0] for _, w in ranges[0:4])
    assert a1 != a2 and ranges[1][0] == [a1] and ranges[3][0] == [a2]
    assert sorted({b, c}) == sorted(set(range(4)) - {a1, a2})


def test_one_read_over_two_writes_joins_them():
    d = _derive(_dma(0, 0, 1, 0x100, 32),      # flash -> A[0:32]
                _dma(0, 32, 1, 0x120, 32),     # flash -> A[32:64]
                _dma(1, 0x100, 1, 0x400, 64))  # A[0:64] -> B: both halves move together
    sizes = sorted((a, s) for _, _, s, _, _, a in d["buffers"])
    assert sizes == [(0x100, 64), (0x400, 64)]


def test_reading_unwritten_arena_bytes_is_an_error():
    with pytest.raises(BinaryError, match="which no earlier operation, DMA or IFM wrote"):
        _derive(_dma(1, 0x100, 1, 0x400, 64))


def test_relocation_rewrites_each_version_separately():
    """Version 1 and 2 of A share one address in the stream (Vela would not rewrite the
    register); moved apart, each DMA gets its own address."""
    from cascader.tflite.ethos_u import DEFAULT_ID_WORD

    dmas = [_dma(0, 0, 1, 0x100, 64), _dma(1, 0x100, 1, 0x400, 64), _dma(0, 64, 1, 0x100, 64),
            _dma(1, 0x100, 1, 0x800, 64)]
    words = np.array([w for d in dmas for w in d] + [0x000], dtype=np.uint32)
    mor = [-1, 1, 1, -1, -1, -1, -1, -1]
    d = _core.derive_schedule([words], mor)
    a1, b, a2, c = (w[0] for _, w in d["steps"][0:4])
    new = [0] * 4
    new[a1], new[b], new[a2], new[c] = 0x000, 0x040, 0x080, 0x0C0
    [moved] = _core.relocate_command_streams([words], mor, new)
    payload = _core.encode_driver_payload(moved, "ethos-u55-128", DEFAULT_ID_WORD)
    ops = _core.decode_driver_payload(payload)["operations"]
    assert [(op["src"]["address"], op["dst"]["address"]) for op in ops] == [(0, 0x000), (0x000, 0x040), (64, 0x080),
                                                                          (0x080, 0x0C0)]
