"""An operation run whole, its OFM written over the IFM rows it has consumed (a partial in
place: `schedule._overlapping_operations`), and the least-SRAM variant whose blocks let it run
furthest over (`schedule.with_overlapping_blocks`).

Networks shaped like TFLM's micro_speech (a strided convolution over a big input, then a dense
layer reading its whole output), compiled and checked bit-exact on the simulator, which rejects
any block that reads an IFM byte an earlier block overwrote (a gap one 16-byte step too small
fails); and the floor stays below every frontier point."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

import cascader
from cascader import schedule, zoo
from cascader._zoo_layers import CalibratedNet
from cascader.emit import program
from cascader.errors import CascaderError
from cascader.compiler import _prepare
from cascader.progress import progress
from cascader.schedule import _feature_map_schedule, with_overlapping_blocks
from cascader.bench.simulate import validate
from cascader.sim import block_traversal, in_place_hazard, min_in_place_shift, npu_calls

ACCELERATORS = ["ethos-u55-128", "ethos-u65-256"]


def _speech(kind: str = "depthwise", seed: int = 0):
    """The model input (TFLM hands it over whole) -> a strided window operation -> its whole
    output into a dense layer."""
    net = CalibratedNet(seed, description=f"test_overlap {kind}")
    if kind == "depthwise":  # micro_speech's: 49x40x1, 10x8, stride 2, 8 channels per input channel
        x = net.input((1, 49, 40, 1))
        x = net.depthwise_conv2d(x, (10, 8), (2, 2), depth_multiplier=8, activation="RELU", name="conv")
    elif kind == "conv":
        x = net.input((1, 48, 48, 4))
        x = net.conv2d(x, 8, (5, 5), (2, 2), activation="RELU", name="conv")
    else:
        x = net.input((1, 48, 48, 8))
        x = net.pool(x, "MAX", (3, 3), (2, 2), padding="SAME", name="conv")
    x = net.reshape(x, (1, x.shape[1] * x.shape[2] * x.shape[3]))
    net.output(net.softmax(net.fully_connected(x, 4, name="fc")))
    return net.build()


def _binary_operations(compiled) -> list[dict]:
    return [o for call in npu_calls(compiled.model) for o in cascader._core.decode_driver_payload(call.payload)["operations"]
            if o["kind"] != "dma"]


def _overlapping(op: dict) -> bool:
    """The OFM starts at or below the IFM, in the same region, and runs into it."""
    ofm_end = op["ofm"]["base"][0] + op["ofm"]["shape"][0] * op["ofm"]["strides"][0]
    return (op["ifm"]["region"] == op["ofm"]["region"]
            and op["ofm"]["base"][0] <= op["ifm"]["base"][0] < ofm_end)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_least_sram_writes_the_convolution_over_its_input(accelerator):
    """micro_speech's shape in Shared_Sram: the input TFLM hands over (1,960 B) and the
    convolution's 4,000 B output no longer sit side by side (5,960 B): the output starts below
    the input and runs over the rows it has consumed. The least-SRAM compile lays that out
    within its budget, its blocks chosen for it, bit-exact; the simulator finds no hazard."""
    model = _speech()
    frontier = cascader.plan(model, accelerator=accelerator, memory_mode="Shared_Sram")
    least = frontier.points[0].sram_bytes
    assert frontier.floor_bytes <= least < 1960 + 4000
    r = cascader.compile(model, sram=least, accelerator=accelerator, memory_mode="Shared_Sram")
    assert r.sram_bytes <= least
    ops = _binary_operations(r)
    conv = next(o for o in ops if o["ofm"]["shape"] == (25, 20, 8))
    assert _overlapping(conv)
    assert in_place_hazard(conv, ifm2=False) is None
    check = r.check(seeds=(0, 1))
    assert check.checked and check.bit_exact


def test_the_least_sram_variant_takes_the_leaner_block(monkeypatch):
    """On U55-128 the block the cycle model picks for speed (9x10) needs the output 2,624 B
    below the 1,960 B input (4,584 B the pair); the variant's block spans the width, each band
    of rows one job that may overwrite its own input, and the input fits inside the 4,000 B
    output. The least-SRAM compile is then the floor: the dense layer's 4,000 B input and 4 B
    output (Vela's Size compile: 5,968 B). (The convolution as the model has it: its input read
    as column pairs, `column_fold`, takes 5 x 20 blocks, which span the width already.)"""
    monkeypatch.setattr("cascader.frontend.lower.fold_columns", lambda lw: None)
    p = _prepare(_speech(), "ethos-u55-128", None, None, "performance", progress(total=2, enabled=False))
    leaner = with_overlapping_blocks(p.sched, p.part.graph)
    assert leaner is not p.sched
    before, after = p.sched.operations[0], leaner.operations[0]
    assert before.block == (9, 10, 8) and after.block[1] == 20
    # Off in the schedule itself (the planner's bound counts the pair apart); on in the variant.
    assert not p.sched.overlapping and leaner.overlapping
    assert not [a for a in _feature_map_schedule(p.sched, p.part.graph).aliases if a.kind == "staircase"]
    shifts = [a.shift for s in (replace(p.sched, overlapping=True), leaner)
              for a in _feature_map_schedule(s, p.part.graph).aliases if a.kind == "staircase"]
    assert shifts == [2624, 1760]  # 1,760 + 1,960 <= 4,000: the input fits inside the output
    assert with_overlapping_blocks(leaner, p.part.graph) is leaner  # already the leanest
    # A pair within the bytes given keeps its block (the variant still writes it over).
    assert with_overlapping_blocks(p.sched, p.part.graph, above=4584).operations[0].block == (9, 10, 8)
    r = cascader.compile(_speech(), optimise="size", accelerator="ethos-u55-128")
    assert r.sram_bytes == 4004
    assert r.check(seeds=(0, 1)).bit_exact


def test_no_leaner_blocks_where_a_cascade_can_stripe_the_pair():
    """A convolution whose output the next convolution reads row by row: the pair need not be
    whole (a cascade stripes it), so the variant keeps the fast block (the input read as column
    pairs, `column_fold`: 5 x 20 blocks)."""
    net = CalibratedNet(0, description="test_overlap chain")
    x = net.input((1, 49, 40, 1))
    x = net.depthwise_conv2d(x, (10, 8), (2, 2), depth_multiplier=8, activation="RELU", name="conv")
    net.output(net.conv2d(x, 2, (3, 3), (2, 2), activation="RELU", name="next"))
    p = _prepare(net.build(), "ethos-u55-128", None, None, "performance", progress(total=2, enabled=False))
    # The pair may be written over (its step is the peak), with the fast block.
    variant = replace(p.sched, overlapping=True)
    assert [a.shift for a in _feature_map_schedule(variant, p.part.graph).aliases if a.kind == "staircase"] == [1760]
    assert with_overlapping_blocks(p.sched, p.part.graph) is p.sched


@pytest.mark.parametrize("kind", ["conv", "pool"])
@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_window_operations_over_the_model_input(kind, accelerator):
    """A 5x5 stride-2 convolution and a 3x3 stride-2 max pool of a 48x48 input: each output
    row reads two input rows further on and writes half an input row's bytes, so the whole
    output fits inside the input's consumed rows. At the least SRAM the pair takes about the
    input alone (9,216 / 18,432 B, output 4,608 B), bit-exact, no hazard in any operation."""
    model = _speech(kind)
    r = cascader.compile(model, optimise="size", accelerator=accelerator, memory_mode="Shared_Sram")
    ifm_bytes, ofm_bytes = (9216, 4608) if kind == "conv" else (18432, 4608)
    assert r.sram_bytes < ifm_bytes + ofm_bytes
    ops = _binary_operations(r)
    window = next(o for o in ops if o["ofm"]["shape"] == (24, 24, 8))
    assert _overlapping(window)
    for op in ops:
        assert in_place_hazard(op, ifm2=False) is None
    check = r.check(seeds=(0, 1))
    assert check.checked and check.bit_exact


def test_the_gap_is_the_trailing_shift_of_the_binarys_blocks():
    """At the least SRAM the OFM sits below the IFM by the trailing shift of the operation as
    emitted (5x20 blocks on U55-128): every block's reads above all bytes the blocks before it
    wrote, never less than the least safe shift the simulator's search finds."""
    r = cascader.compile(_speech(), optimise="size", accelerator="ethos-u55-128")
    conv = next(o for o in _binary_operations(r) if o["ofm"]["shape"] == (25, 20, 8))
    assert conv["block"] == (5, 20, 8)
    gap = conv["ifm"]["base"][0] - conv["ofm"]["base"][0]
    written, trailing = 0, 0
    for block in block_traversal(conv):
        (y0, y1), (x0, x1), (c0, c1) = block.ifm
        if y0 < y1 and x0 < x1 and c0 < c1:
            trailing = max(trailing, written - (y0 * 40 + x0))  # the IFM is 49x40x1
        (y0, y1), (x0, x1), (c0, c1) = block.ofm
        written = max(written, (y1 - 1) * 160 + (x1 - 1) * 8 + c1)  # the OFM is 25x20x8
    assert gap == -(-trailing // 16) * 16 == 1760 >= min_in_place_shift(conv)
    assert in_place_hazard(conv, ifm2=False) is None


def test_a_gap_one_step_too_small_is_refused(monkeypatch):
    """16 B less than the shift: the emitter refuses the layout (it checks the registers as
    emitted); past that check, the simulator replays the blocks, finds one that reads an input
    byte an earlier block overwrote, and refuses the binary."""
    least = schedule._trailing_shift
    monkeypatch.setattr(schedule, "_trailing_shift", lambda sop: least(sop) - 16)
    with pytest.raises(CascaderError, match="OFM over its own IFM unsafely"):
        cascader.compile(_speech(seed=3), optimise="size", accelerator="ethos-u55-128")
    monkeypatch.setattr(program, "_check_over_own_input", lambda record: None)
    r = cascader.compile(_speech(seed=4), optimise="size", accelerator="ethos-u55-128")
    check = r.check(seeds=(0,))
    assert not check.checked
    assert "overwrites its IFM" in " ".join(check.unchecked)


def test_no_overlap_where_the_input_lives_on():
    """An input read again after the operation (a second branch) is not written over."""
    net = CalibratedNet(0, description="test_overlap branch")
    x = net.input((1, 24, 24, 4))
    a = net.conv2d(x, 8, (3, 3), (2, 2), activation="RELU", name="a")
    b = net.conv2d(x, 8, (3, 3), (2, 2), activation="RELU", name="b")
    net.output(net.add(a, b))
    model = net.build()
    p = _prepare(model, "ethos-u55-128", None, "Shared_Sram", "performance", progress(total=2, enabled=False))
    fms = _feature_map_schedule(replace(p.sched, overlapping=True), p.part.graph)
    first = p.sched.operations[0]
    assert fms.index[first.lowered.ifm.buffer] not in {al.target for al in fms.aliases if al.kind == "staircase"}


@pytest.mark.parametrize("name", ["ds_cnn_kws", "resnet8"])
def test_no_frontier_point_below_the_floor(name):
    """The floor is a lower bound of every compiled point, overlaps included (brute force over
    the compiled frontier of small zoo networks, and of micro_speech's shape)."""
    for model in (zoo.get(name), _speech()):
        frontier = cascader.plan(model, accelerator="ethos-u55-128")
        assert frontier.points and all(p.sram_bytes >= frontier.floor_bytes for p in frontier.points)


MODELS = os.environ.get("CASCADER_MODELS")


@pytest.mark.skipif(not MODELS or not (Path(MODELS or ".") / "tflm_micro_speech_quantized.tflite").exists(),
                    reason="needs CASCADER_MODELS with tflm_micro_speech_quantized.tflite")
def test_micro_speech_meets_the_least_sram_bar():
    """Issue #44's bar on U55-128: at most 0.7 of Vela 5.2's Size SRAM (5,968 B), bit-exact."""
    path = Path(MODELS) / "tflm_micro_speech_quantized.tflite"
    frontier = cascader.plan(path, accelerator="ethos-u55-128")
    least = frontier.points[0].sram_bytes
    assert least <= 0.7 * 5968
    r = cascader.compile(path, sram=least, accelerator="ethos-u55-128")
    assert r.sram_bytes <= least and r.check(seeds=(0, 1)).bit_exact


def test_a_transposes_steps_write_its_output_over_the_input_they_consumed():
    """zoo mobilenet_v2_nchw's TRANSPOSE in its default lowering (Vela's steps: an (H, W) swap of
    the model input into a scratch copy, then a step per output row from that copy): with the
    schedule's `overlapping` on, the steps are one run (`_operator_runs`) whose output starts
    one row (288 B) below the model input, which only the first step reads."""
    prepared = _prepare(zoo.mobilenet_v2_nchw(), "ethos-u55-128", None, None, "performance",
                        progress(total=2, enabled=False))
    plain = _feature_map_schedule(prepared.sched, prepared.part.graph)
    over = _feature_map_schedule(replace(prepared.sched, overlapping=True), prepared.part.graph)
    added = [(over.specs[a.buffer].name, over.specs[a.target].name, a.shift) for a in over.aliases
             if a not in plain.aliases and a.kind == "staircase"]
    assert ("to_nhwc", "input", 288) in added
    assert not any(a.kind == "staircase" and over.specs[a.buffer].name == "to_nhwc" for a in plain.aliases)


def test_mobilenet_v2_nchw_fits_vela_size_sram_on_its_steps(tmp_path):
    """Within Vela's Size SRAM on U55-128 (62,208 B) the default lowering's steps fit once
    written over their inputs (`_Prepared.overlapped`), bit-exact, where the per-channel planes
    took 987,781 cycles (Vela's Size binary: 836,754 on the estimator)."""
    path = tmp_path / "mobilenet_v2_nchw.tflite"
    cascader.save_model(zoo.mobilenet_v2_nchw(), path)
    compiled = cascader.compile(path, accelerator="ethos-u55-128", sram=62_208)
    assert compiled.sram_bytes <= 62_208
    assert compiled.estimate().total_cycles < 836_754
    assert any("TRANSPOSE[W,C]" in op.lowered.name for op in compiled.schedule.operations), "the steps"
    result = validate(path, compiled.model, seeds=(0, 1))
    assert result.bit_exact, result.details
