"""Weight buffers made room for under a budget (`schedule.with_weight_room`,
`compiler._weight_room_options`): where whole feature maps fill the SRAM a budgeted compile is
given, its lone operations are written over their IFMs, chained, on the blocks of the least
shift that run no slower, so that the weight buffers whose DMAs run beside them fit.

Zoo DS-CNN on U55-128 at Vela's Size SRAM (16,000 B: every 25x5x64 map is 8,000 B) read its
1x1 convolutions' weights from flash once per OFM block (114,892 cycles); with two of the four
buffered it runs in 96,956 (zoo kws_mean, the same network ending in a MEAN, 114,842 ->
96,906). Checked bit-exact on the simulator, which rejects any block that
reads an IFM byte an earlier block overwrote."""

from __future__ import annotations

import pytest

import cascader
from cascader import _core, zoo
from cascader.compiler import _prepare
from cascader.progress import progress
from cascader.schedule import _overlap_shift, with_weight_room, without_weight_buffers
from cascader.sim import in_place_hazard, npu_calls

VELA_SIZE_SRAM = 16_000  # Vela 5.2's `--optimise Size` SRAM for zoo ds_cnn_kws, on both


def _operations(compiled) -> list[dict]:
    return [o for call in npu_calls(compiled.model) for o in _core.decode_driver_payload(call.payload)["operations"]
            if o["kind"] != "dma"]


def _written_over_input(op: dict) -> bool:
    """The OFM starts at or below the IFM, in the same region, and runs into it."""
    ofm_end = op["ofm"]["base"][0] + op["ofm"]["shape"][0] * op["ofm"]["strides"][0]
    return op["ifm"]["region"] == op["ofm"]["region"] and op["ofm"]["base"][0] <= op["ifm"]["base"][0] < ofm_end


@pytest.mark.parametrize("name", ["ds_cnn_kws", "kws_mean"])
@pytest.mark.parametrize("accelerator, most_cycles", [("ethos-u55-128", 97_000), ("ethos-u65-256", 50_000)])
def test_ds_cnn_buffers_weights_within_vela_size_sram(name, accelerator, most_cycles):
    """Within 16,000 B the 1x1 convolutions' weights are copied into SRAM under the depthwise
    before each (DS-CNN on U55-128: 114,892 cycles without, 96,956 with; on U65-256: 55,016 ->
    49,953), the maps written over the ones they consume; within the budget and bit-exact on 2
    seeds."""
    r = cascader.compile(zoo.get(name), sram=VELA_SIZE_SRAM, accelerator=accelerator)
    assert r.sram_bytes <= VELA_SIZE_SRAM
    assert r.estimate().total_cycles <= most_cycles
    buffered = [sop for sop in r.schedule.operations if sop.weight_buffer]
    assert len(buffered) >= 2
    ops = _operations(r)
    over = [o for o in ops if _written_over_input(o)]
    assert over and all(in_place_hazard(o, ifm2=False) is None for o in over)
    check = r.check(seeds=(0, 1))
    assert check.checked and check.bit_exact


def test_unlimited_compile_is_left_alone():
    """Without a budget every buffer fits beside whole maps: nothing is written over its input."""
    r = cascader.compile(zoo.get("ds_cnn_kws"), accelerator="ethos-u55-128")
    assert not r.schedule.overlapping
    assert not any(_written_over_input(o) for o in _operations(r))


def test_the_variant_takes_leaner_blocks_no_slower():
    """Each operation the variant moves to another block writes over its IFM with a smaller
    shift and costs no more cycles than it did; buffered weights stay buffered, their streams
    encoded for the new block."""
    p = _prepare(zoo.get("ds_cnn_kws"), "ethos-u55-128", None, None, "performance", progress(total=2, enabled=False))
    room = with_weight_room(p.sched)
    assert room is not None and room.overlapping and room.overlap_chains
    moved = 0
    for before, after in zip(p.sched.operations, room.operations):
        assert after.weight_buffer == before.weight_buffer
        if after.block == before.block:
            continue
        moved += 1
        assert _overlap_shift(after, room.target) < _overlap_shift(before, p.sched.target)
        assert after.cost.total_cycles <= before.cost.total_cycles
        if after.encoded is not None:
            assert after.encoded is not before.encoded
    assert moved >= 8  # the four depthwise and the four 1x1 convolutions
    assert room.overlap_chains == frozenset(range(1, 9))  # those, each buffer live beside two
    assert room.total_cycles <= p.sched.total_cycles


def test_no_variant_without_weight_buffers():
    """A schedule none of whose lone operations buffers its weights needs no room."""
    p = _prepare(zoo.get("ds_cnn_kws"), "ethos-u55-128", None, None, "performance", progress(total=2, enabled=False))
    assert with_weight_room(without_weight_buffers(p.sched)) is None


def test_a_cascaded_compile_makes_room_for_its_lone_operations_buffers():
    """Zoo ResNet-8 on U55-128 within Vela's Size SRAM (35,840 B) cascades its first stage; the
    second stage's 3x3 convolution on 16x16x32, run alone, read its 9 KB of weights from flash
    (233,802 cycles). Written over its input, it buffers them (222,874), bit-exact on 2 seeds."""
    budget = 35_840
    r = cascader.compile(zoo.get("resnet8"), sram=budget, accelerator="ethos-u55-128")
    assert r.sram_bytes <= budget
    assert any(sop.cascade is not None for sop in r.schedule.operations)
    assert r.schedule.overlap_chains
    conv = next(sop for sop in r.schedule.operations if sop.lowered.name == "5:CONV_2D")
    assert conv.cascade is None and conv.weight_buffer
    assert r.estimate().total_cycles <= 223_000
    check = r.check(seeds=(0, 1))
    assert check.checked and check.bit_exact
