"""Staircase buffers: an output written over the input it consumes (memory/staircase.hpp).

The safety rule against brute force, ties in the allocators and the live-range builder, the
planner's count, and compiled cascades that use them, bit-exact and laid out within their
budget."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader import _core, zoo
from cascader.errors import InvalidArgumentError
from cascader.memory import (
    Alias,
    MemoryConfig,
    Schedule,
    ScheduledBuffer,
    Step,
    layout,
    live_ranges,
    staircase_shift,
)

accesses = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 400), st.integers(0, 400)), max_size=12).map(
    lambda v: [(t, min(a, b), max(a, b)) for t, a, b in v])


def _safe(writes, reads, shift) -> bool:
    """The rule, byte by byte: every byte written at step t lands below every input byte read
    at t - 1 or later, with the output `shift` bytes below the input (below, not merely beside:
    the read front moves up, and the write front follows it)."""
    for t, b, e in writes:
        for x in range(b - shift, e - shift):
            for u, rb, re in reads:
                if u >= t - 1 and any(x >= y for y in range(rb, re)):
                    return False
    return True


@settings(max_examples=200, deadline=None)
@given(accesses, accesses, st.sampled_from([1, 16]))
def test_shift_is_the_least_safe_one(writes, reads, alignment):
    shift = staircase_shift(writes, reads, alignment)
    assert shift % alignment == 0 and shift >= 0
    assert _safe(writes, reads, shift)
    if shift > 0:
        assert not _safe(writes, reads, shift - alignment)


def _ranges(rows):
    a = np.array(rows, dtype=np.int64).reshape(-1, 4)
    return a[:, 0], a[:, 1], a[:, 2], a[:, 3]


def test_tie_lets_the_greedy_share_bytes():
    # A 1,008 B input read over steps 0-3, an 800 B output written over steps 2-5 from 96 B
    # below it, and an unrelated 496 B buffer over steps 4-5.
    start, end, size, align = _ranges([[0, 4, 1008, 16], [2, 6, 800, 16], [4, 6, 496, 16]])
    ties = [(1, 0, 96)]
    apart = _core.greedy_allocate(start, end, size, align)
    tied = _core.greedy_allocate(start, end, size, align, ties=ties)
    assert apart.height == 1808  # input and output side by side
    assert tied.offsets[0] - tied.offsets[1] == 96
    # The pair spans 1,104 B; the 496 B buffer goes above the output once the input is gone.
    assert tied.height == tied.lower_bound == 1296
    _core.check_allocation(start, end, size, align, tied.offsets, ties=ties)
    with pytest.raises(InvalidArgumentError, match="overlap"):
        _core.check_allocation(start, end, size, align, tied.offsets)  # not without the tie
    # The tie's lower bound: both live over steps 2-3, sharing 800 - 96 B.
    assert _core.peak_live_bytes(start, end, size, ties) == max(1008 + 96, 800 + 496)
    assert _core.peak_live_bytes(start, end, size) == 1808


@pytest.mark.parametrize("ties, message", [
    ([(0, 0, 0)], "two different ranges"),
    ([(1, 0, 16), (2, 0, 16)], "two ties"),
    ([(1, 0, 16), (0, 1, 16)], "two ties|cycle"),
    ([(1, 0, 8)], "multiple of both alignments"),
])
def test_bad_ties_are_named(ties, message):
    start, end, size, align = _ranges([[0, 4, 1008, 16], [2, 6, 800, 16], [4, 6, 496, 16]])
    with pytest.raises(InvalidArgumentError, match=message):
        _core.greedy_allocate(start, end, size, align, ties=ties)


@st.composite
def tied_instances(draw):
    n = draw(st.integers(2, 14))
    rows = []
    for _ in range(n):
        s = draw(st.integers(0, 20))
        rows.append([s, s + draw(st.integers(1, 8)), 16 * draw(st.integers(1, 20)), 16])
    # A chain of ties over consecutive ranges (each at most once below and once above).
    ties = []
    for i in range(n - 1):
        if draw(st.booleans()):
            ties.append((i, i + 1, 16 * draw(st.integers(0, 20))))
    return rows, ties


@settings(max_examples=150, deadline=None)
@given(tied_instances(), st.sampled_from([_core.GreedyOrder.by_size, _core.GreedyOrder.by_start]))
def test_greedy_with_ties_is_valid_and_above_the_bound(instance, order):
    rows, ties = instance
    start, end, size, align = _ranges(rows)
    tied = _core.greedy_allocate(start, end, size, align, ties=ties, order=order)
    _core.check_allocation(start, end, size, align, tied.offsets, ties=ties)
    assert tied.height >= _core.peak_live_bytes(start, end, size, ties) == tied.lower_bound


def _cascade_schedule(shift: int) -> Schedule:
    """Input (1,024 B, two 512 B rows) read by steps 0 and 1; output (512 B) written by steps 1
    and 2, over it `shift` bytes below; a 600 B buffer from step 2 on."""
    buffers = [ScheduledBuffer("in", "feature_map", 1024), ScheduledBuffer("out", "feature_map", 512),
               ScheduledBuffer("late", "feature_map", 600), ScheduledBuffer("tail", "feature_map", 16)]
    steps = [Step(reads=(0,), writes=()), Step(reads=(0,), writes=(1,)), Step(reads=(1,), writes=(2,)),
             Step(reads=(2,), writes=(3,))]
    return Schedule(buffers, steps, [Alias(1, 0, kind="staircase", shift=shift)])


def test_staircase_alias_becomes_a_tie_with_own_lifetimes():
    r = live_ranges(_cascade_schedule(256))
    assert r.ties == ((int(r.buffer_range[1]), int(r.buffer_range[0]), 256),)
    spans = {b: (int(r.start[r.buffer_range[b]]), int(r.end[r.buffer_range[b]])) for b in range(2)}
    assert spans == {0: (0, 2), 1: (1, 3)}  # each its own lifetime, unlike an in-place alias
    placed = layout(_cascade_schedule(256), MemoryConfig(shared_sram=True))
    offset = {b.name: b.offset for b in placed.buffers}
    assert offset["in"] - offset["out"] == 256
    # Apart, in + out = 1,536 B while both live; tied, 256 + 1,024 = 1,280 B, and `late` fits
    # above `out` once `in` is gone.
    assert placed.sizes["scratch"] == placed.lower_bounds["scratch"] == 1280
    with pytest.raises(InvalidArgumentError, match="staircase"):
        live_ranges(_cascade_schedule(8))  # not a multiple of the alignment


def test_planner_counts_the_staircase():
    """A stride-2 stem (96x96x3 -> 48x48x8) cascaded into a depthwise: its output is written
    over the image from a few rows below it; the memory counts the pair once."""
    g = _core.PlanGraph()
    from tests.test_planner import _conv_part, _tensor  # the hand-built graph helpers

    image = g.add_tensor(_tensor("image", 96, 96, 3))
    stem = g.add_tensor(_tensor("stem", 48, 48, 8))
    dw = g.add_tensor(_tensor("dw", 48, 48, 8))
    g.add_part(_conv_part("stem", image, stem, 96, 96, 3, 8, k=3, stride=2))
    g.add_part(_conv_part("dw", stem, dw, 48, 48, 8, 8, k=3))
    g.inputs, g.outputs = [image], [dw]
    arch = cascader.arch.arch_config("ethos-u55-128")
    c = _core.plan_cascade(g, 0, 2, 1, arch)
    assert c.staircase_tensor == image
    image_bytes, out_bytes = 96 * 96 * 3, 48 * 48 * 8
    assert 0 < c.staircase_shift < out_bytes
    assert _core.cascade_memory(g, c) == c.buffer_bytes + max(out_bytes, c.staircase_shift + image_bytes)
    # Kept to the end, the image cannot be written over.
    g.outputs = [image, dw]
    kept = _core.plan_cascade(g, 0, 2, 1, arch)
    assert kept.staircase_tensor == -1
    assert _core.cascade_memory(g, kept) == kept.buffer_bytes + image_bytes + out_bytes


@pytest.mark.parametrize("accelerator", ["ethos-u55-128"])
def test_least_sram_compile_writes_over_the_input(accelerator):
    """zoo MobileNetV1 at its least SRAM: a cascade's output shares bytes with its input
    while both live, the layout stays within the budget, and the binary is bit-exact. (Not
    U65's Dedicated_Sram: there the image TFLM places lives in DRAM, the cascade's output in
    SRAM.)"""
    model = zoo.mobilenet_v1()
    least = cascader.plan(model, accelerator=accelerator).points[0].sram_bytes
    r = cascader.compile(model, sram=least, accelerator=accelerator)
    assert r.sram_bytes <= least
    placed = [b for b in r.layout.buffers if b.kind == "feature_map" and b.size]
    shared = [(a, b) for a in placed for b in placed
              if a is not b and a.arena == b.arena and a.start < b.end and b.start < a.end
              and a.offset < b.offset + b.size and b.offset < a.offset + a.size]
    assert shared, "no buffers share bytes while both live"
    assert r.check(seeds=(0, 1)).bit_exact


def test_greedy_promotes_a_map_the_chain_pushed_to_the_top(tmp_path, monkeypatch):
    """Largest first puts a chain of ties at the bottom and stacks a map it shares time with on
    top; placing that map first (a promotion, arena_layout.cpp's tied_greedy) reaches the lower
    bound: zoo ResNet-8 on U55-128 within Vela's Size SRAM (35,840 B) lays out in 33,744 B, the
    bound, where largest first took 35,664 B. Bit-exact at the addresses promoted. (The proposal
    as planned: the compile now makes room for a lone operation's weight buffer there, which
    test_weight_room covers, in 35,184 B.)"""
    from cascader import compiler
    from cascader.bench.simulate import validate

    monkeypatch.setattr(compiler, "WEIGHT_ROOM_TRIES", 0)

    path = tmp_path / "resnet8.tflite"
    cascader.save_model(zoo.resnet8(), path)
    compiled = cascader.compile(path, accelerator="ethos-u55-128", sram=35_840)
    assert compiled.sram_bytes == compiled.layout.lower_bounds["scratch"] == 33_744
    assert validate(path, compiled.model, seeds=(0, 1)).bit_exact


def test_greedy_promotes_a_map_a_chain_sits_on():
    """The topmost map (a rolling buffer) sits on a staircase chain, which sits on a map the
    topmost never shares time with (the first rolling buffer): placing that map first reaches
    the layout the planner's proposal layout has (zoo ds_cnn_kws's cascades on U55-128, stripe
    by stripe: four 8,000 B depthwise outputs tied 1,280 B apart and the rolling buffers
    between them; 12,656 B before the chain's neighbours were promoted, 12,640 B after)."""
    spans = [(0, 4, 490), (2, 16, 8000), (6, 29, 8000), (19, 42, 8000), (32, 47, 8000), (45, 49, 64),
             (48, 50, 12), (1, 5, 4000), (5, 18, 1920), (18, 31, 1920), (31, 44, 1920), (44, 48, 4000)]
    buffers = [ScheduledBuffer(f"b{i}", "feature_map", size) for i, (_, _, size) in enumerate(spans)]
    steps = [Step(reads=tuple(i for i, (_, end, _) in enumerate(spans) if end - 1 == t),
                  writes=tuple(i for i, (start, _, _) in enumerate(spans) if start == t)) for t in range(50)]
    sched = Schedule(buffers, steps, [Alias(b, b - 1, kind="staircase", shift=1280) for b in (2, 3, 4)])
    assert [(int(s), int(e)) for s, e in zip(live_ranges(sched).start, live_ranges(sched).end)] == \
        [(s, e) for s, e, _ in spans]
    placed = layout(sched, MemoryConfig(shared_sram=True))
    assert placed.lower_bounds["scratch"] == 12_490
    assert placed.sizes["scratch"] == 12_640
    live = [(b.offset, b.offset + b.size, b.start, b.end) for b in placed.buffers]
    tied = {(1, 2), (2, 3), (3, 4)}  # a staircase's output below its input shares its bytes
    for i, (lo, hi, s, e) in enumerate(live):
        for j, (lo2, hi2, s2, e2) in enumerate(live[i + 1:], i + 1):
            if (i, j) not in tied and s < e2 and s2 < e:
                assert hi <= lo2 or hi2 <= lo, (i, j)
