"""Live ranges of scheduled buffers, arena layout, the TFLM offline plan, and the memory plot."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascader.errors import BudgetError, InvalidArgumentError
from cascader.memory import (
    Alias,
    MemoryConfig,
    Schedule,
    ScheduledBuffer,
    Step,
    check_allocation,
    layout,
    live_ranges,
    offline_memory_allocation,
)


def chain_schedule() -> Schedule:
    """ifm -> conv(w0) -> a -> add-in-place -> b -> conv(w1, double) -> c ; LUT used by step 2."""
    buffers = [
        ScheduledBuffer("ifm", "feature_map", 1000),  # 0
        ScheduledBuffer("w0", "weights", 300, constant=False),  # 1
        ScheduledBuffer("a", "feature_map", 800),  # 2
        ScheduledBuffer("b", "feature_map", 800),  # 3 in place over a
        ScheduledBuffer("w1", "double_weights", 200),  # 4
        ScheduledBuffer("c", "feature_map", 500),  # 5
        ScheduledBuffer("lut", "lut", 256),  # 6
    ]
    steps = [
        Step(reads=(0, 1), writes=(2,)),
        Step(reads=(2, 6), writes=(3,)),
        Step(reads=(3, 4), writes=(5,)),
    ]
    return Schedule(buffers, steps, [Alias(3, 2, 0, "in_place")])


def test_live_ranges_follow_the_kinds():
    r = live_ranges(chain_schedule())
    by_buffer = {b: int(r.buffer_range[b]) for b in range(7)}
    assert by_buffer[3] == by_buffer[2]  # in place: one range
    span = lambda b: (int(r.start[by_buffer[b]]), int(r.end[by_buffer[b]]), int(r.size[by_buffer[b]]))  # noqa: E731
    assert span(0) == (0, 1, 1000)
    assert span(1) == (0, 1, 300)  # prefetch clipped at the first step
    assert span(2) == (0, 3, 800)  # a, then b over it until step 2
    assert span(4) == (1, 3, 400)  # double buffered, prefetched during step 1
    assert span(6) == (0, 3, 256)  # the LUT lives throughout
    assert set(r.alignment) == {16}


def test_concat_slices_and_reshape_share_the_output():
    buffers = [
        ScheduledBuffer("x", "feature_map", 64),
        ScheduledBuffer("left", "feature_map", 32),
        ScheduledBuffer("right", "feature_map", 32),
        ScheduledBuffer("concat", "feature_map", 64),
        ScheduledBuffer("flat", "feature_map", 64),
        ScheduledBuffer("y", "feature_map", 16),
    ]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((4,), (5,))]
    aliases = [Alias(1, 3, 0, "slice"), Alias(2, 3, 32, "slice"), Alias(4, 3, 0, "reshape")]
    r = live_ranges(Schedule(buffers, steps, aliases))
    assert len(r.start) == 3  # x, concat (with left, right, flat), y
    assert list(r.buffer_offset[[1, 2, 4]]) == [0, 32, 0]
    concat = int(r.buffer_range[3])
    assert (int(r.start[concat]), int(r.end[concat])) == (0, 3)
    placed = {p.name: p for p in layout(Schedule(buffers, steps, aliases)).buffers}
    assert placed["right"].offset == placed["concat"].offset + 32
    assert placed["flat"].offset == placed["concat"].offset


@pytest.mark.parametrize(
    "aliases, message",
    [
        ([Alias(1, 0, 0, "in_place")], "used until step 1"),
        ([Alias(2, 0, 0, "reshape")], "reshape alias"),
        ([Alias(1, 0, 990, "slice")], "does not fit"),
        ([Alias(0, 1, 0, "slice"), Alias(1, 0, 0, "slice")], "cycle"),
        ([Alias(1, 0, 0, "merge")], "alias kind"),
    ],
)
def test_bad_aliases_are_named(aliases, message):
    buffers = [ScheduledBuffer("ifm", "feature_map", 1000), ScheduledBuffer("o1", "feature_map", 1000),
               ScheduledBuffer("o2", "feature_map", 100), ScheduledBuffer("o3", "feature_map", 1000)]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1,), (3,))]
    with pytest.raises(InvalidArgumentError, match=message):
        live_ranges(Schedule(buffers, steps, aliases))


def test_shifted_in_place_alias_grows_the_range():
    # ofm is written 128 B below its ifm (a 3x3 depthwise's one IFM row, see test_in_place.py)
    buffers = [ScheduledBuffer("x", "feature_map", 1024), ScheduledBuffer("ifm", "feature_map", 2048),
               ScheduledBuffer("ofm", "feature_map", 2048), ScheduledBuffer("y", "feature_map", 512)]
    steps = [Step((0,), (1,)), Step((1,), (2,)), Step((2,), (3,))]
    schedule = Schedule(buffers, steps, [Alias(2, 1, kind="in_place", shift=128)])
    r = live_ranges(schedule)
    k = int(r.buffer_range[1])
    assert int(r.buffer_range[2]) == k and int(r.range_buffer[k]) == 1
    assert (int(r.start[k]), int(r.end[k]), int(r.size[k])) == (0, 3, 2048 + 128)
    assert (int(r.buffer_offset[1]), int(r.buffer_offset[2])) == (128, 0)
    placed = {p.name: p for p in layout(schedule).buffers}
    assert placed["ofm"].offset == placed["ifm"].offset - 128
    assert placed["ifm"].size == 2048  # the root holds its range from its own start on
    # a larger OFM sticks out past the IFM too: the range covers both
    bigger = [*buffers[:2], ScheduledBuffer("ofm", "feature_map", 4096), buffers[3]]
    r = live_ranges(Schedule(bigger, steps, [Alias(2, 1, kind="in_place", shift=16)]))
    assert int(r.size[int(r.buffer_range[1])]) == 4096


@pytest.mark.parametrize(
    "alias, message",
    [
        (Alias(2, 1, kind="in_place", shift=8), "multiple of both alignments"),
        (Alias(2, 1, kind="in_place", shift=-16), "multiple of both alignments"),
        (Alias(2, 1, 16, kind="in_place"), "needs offset 0"),
        (Alias(2, 1, 0, "slice", shift=16), "only an in-place alias has a shift"),
        (Alias(3, 1, kind="in_place", shift=16), "used until step 1"),
    ],
)
def test_bad_shifted_aliases_are_named(alias, message):
    buffers = [ScheduledBuffer("x", "feature_map", 64), ScheduledBuffer("ifm", "feature_map", 64),
               ScheduledBuffer("ofm", "feature_map", 64), ScheduledBuffer("early", "feature_map", 64)]
    steps = [Step((0,), (1, 3)), Step((1,), (2,))]
    with pytest.raises(InvalidArgumentError, match=message):
        live_ranges(Schedule(buffers, steps, [alias]))


def test_untouched_buffer_and_bad_kind():
    with pytest.raises(InvalidArgumentError, match="touched by no step"):
        live_ranges(Schedule([ScheduledBuffer("x", "feature_map", 4)], [Step()], []))
    with pytest.raises(InvalidArgumentError, match="kind of buffer"):
        live_ranges(Schedule([ScheduledBuffer("x", "tensor", 4)], [Step((0,), ())], []))
    with pytest.raises(InvalidArgumentError, match="names buffer 3"):
        live_ranges(Schedule([ScheduledBuffer("x", "feature_map", 4)], [Step((3,), ())], []))


def test_layout_splits_persistent_and_flash():
    s = chain_schedule()
    s.buffers.append(ScheduledBuffer("bias", "weights", 48, constant=True))
    s.steps[0] = Step(reads=(0, 1, 7), writes=(2,))
    result = layout(s)
    arenas = {p.name: p.arena for p in result.buffers}
    assert arenas["lut"] == "persistent" and arenas["bias"] == "flash" and arenas["a"] == "scratch_fast"
    assert result.persistent_size == 256 and result.sizes["flash"] == 48
    assert result.non_persistent_size == result.sizes["scratch_fast"] == result.lower_bounds["scratch_fast"]
    fast = [p for p in result.buffers if p.arena == "scratch_fast" and p.name != "b"]
    assert {p.name: p.size for p in fast}["w1"] == 400  # both halves of the double buffer
    check_allocation([(p.start, p.end, p.size) for p in fast], [p.offset for p in fast])
    assert "scratch_fast" in result._repr_html_()


def test_eviction_is_by_access_cost_not_size():
    # Two feature maps live together; only one fits. The big one is rarely touched, the small
    # one is streamed many times: evicting the big one costs fewer cycles per byte freed.
    buffers = [
        ScheduledBuffer("big_cold", "feature_map", 4096, access_bytes=4096),
        ScheduledBuffer("small_hot", "feature_map", 2048, access_bytes=2048 * 50),
        ScheduledBuffer("out", "feature_map", 16, access_bytes=1600),
    ]
    steps = [Step((), (0, 1)), Step((0, 1), (2,))]
    config = MemoryConfig(fast_capacity=4096, fast_cycles_per_byte=0.1, slow_cycles_per_byte=1.0)
    result = layout(Schedule(buffers, steps, []), config)
    arenas = {p.name: p.arena for p in result.buffers}
    assert arenas == {"big_cold": "scratch", "small_hot": "scratch_fast", "out": "scratch_fast"}
    assert result.sizes["scratch_fast"] <= 4096
    assert result.eviction_cycles == pytest.approx(4096 * 0.9)


def test_memory_config_from_the_cycle_model():
    from cascader import _core
    from cascader.arch import arch_config

    # Ethos-U65 on Dedicated_Sram: SRAM is the fast cache, the arena lives in DRAM.
    u65 = MemoryConfig.for_target("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram", sram_size=4096)
    arch = arch_config("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")
    assert not u65.shared_sram and u65.fast_capacity == 4096
    assert u65.fast_cycles_per_byte == pytest.approx(1 / arch.bandwidth(_core.MemoryArea.Sram))
    assert u65.slow_cycles_per_byte == pytest.approx(1 / arch.bandwidth(_core.MemoryArea.Dram))
    assert u65.slow_cycles_per_byte > u65.fast_cycles_per_byte
    # The same eviction choice as above, now priced by the target's memories.
    buffers = [
        ScheduledBuffer("big_cold", "feature_map", 4096, access_bytes=4096),
        ScheduledBuffer("small_hot", "feature_map", 2048, access_bytes=2048 * 50),
        ScheduledBuffer("out", "feature_map", 16, access_bytes=1600),
    ]
    result = layout(Schedule(buffers, [Step((), (0, 1)), Step((0, 1), (2,))], []), u65)
    assert {p.name: p.arena for p in result.buffers}["big_cold"] == "scratch"
    expected = 4096 * (u65.slow_cycles_per_byte - u65.fast_cycles_per_byte)
    assert result.eviction_cycles == pytest.approx(expected)
    # Ethos-U55 on Shared_Sram: one SRAM arena, nothing to evict to.
    assert MemoryConfig.for_target("ethos-u55-128", memory_mode="Shared_Sram").shared_sram


def test_layout_budget_error_and_shared_sram():
    buffers = [ScheduledBuffer("lut", "lut", 256), ScheduledBuffer("x", "feature_map", 64)]
    steps = [Step((0,), (1,))]
    # A LUT is persistent, not evictable scratch: it does not count against the scratch arena.
    assert layout(Schedule(buffers, steps, []), MemoryConfig(fast_capacity=64)).sizes["scratch_fast"] == 64
    with pytest.raises(BudgetError, match="fast capacity"):
        layout(Schedule([ScheduledBuffer("s", "scratch", 128, persistent=False)], [Step((), (0,))], []),
               MemoryConfig(fast_capacity=64, slow_cycles_per_byte=float("inf")))
    shared = layout(Schedule(buffers, steps, []), MemoryConfig(shared_sram=True, fast_capacity=64))
    assert "scratch_fast" not in shared.sizes and shared.sizes["scratch"] == 64
    with pytest.raises(BudgetError, match="at least"):
        layout(Schedule(buffers, steps, []), MemoryConfig(shared_sram=True, fast_capacity=63))


def test_offline_memory_allocation_format():
    data = offline_memory_allocation(4, {0: 0, 2: 128}, subgraph=0)
    assert struct.unpack("<7i", data) == (0, 0, 4, 0, -1, 128, -1)
    with pytest.raises(InvalidArgumentError, match="outside"):
        offline_memory_allocation(2, {5: 0})


MODELS = os.environ.get("CASCADER_MODELS")


@pytest.mark.skipif(not MODELS, reason="CASCADER_MODELS is not set")
def test_offline_plan_round_trips_through_a_model(tmp_path):
    from cascader import load_model, save_model
    from cascader.frontend.liveness import activation_live_ranges
    from cascader.memory import add_offline_memory_allocation, allocate

    model = load_model(Path(MODELS) / "tflm_person_detect.tflite")
    ranges = activation_live_ranges(model.subgraphs[0])
    plan = allocate(np.stack([ranges.start, ranges.end, (ranges.size + 15) // 16 * 16, np.full_like(ranges.size, 16)], 1))
    add_offline_memory_allocation(model, dict(zip(ranges.tensor.tolist(), plan.offsets.tolist())))
    save_model(model, tmp_path / "planned.tflite")
    words = np.frombuffer(load_model(tmp_path / "planned.tflite").metadata_bytes("OfflineMemoryAllocation"), "<i4")
    assert words[2] == len(model.subgraphs[0].tensors)
    assert list(words[3 + ranges.tensor]) == plan.offsets.tolist()


def test_plot_memory_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    from cascader.plot import plot_memory

    path = tmp_path / "memory.png"
    fig = plot_memory(layout(chain_schedule()), path=str(path), title="chain")
    assert path.stat().st_size > 1000 and len(fig.axes) == 2  # scratch_fast and persistent panels


@st.composite
def schedules(draw):
    """Random chains of steps over feature maps and weights, with in-place aliases where legal."""
    n_steps = draw(st.integers(1, 8))
    kinds = ("feature_map", "stripe_buffer", "weights", "double_weights", "copy", "scratch", "lut")
    buffers, steps = [], []
    for t in range(n_steps):
        out = len(buffers)
        buffers.append(ScheduledBuffer(f"fm{t}", draw(st.sampled_from(kinds)), draw(st.integers(1, 300))))
        earlier = list(range(out))
        reads = draw(st.lists(st.sampled_from(earlier), max_size=3, unique=True)) if earlier else []
        steps.append(Step(tuple(reads), (out,)))
    # An output may be written in place over a feature map its step reads last, shifted below it.
    last = {}
    for t, step in enumerate(steps):
        for b in (*step.reads, *step.writes):
            last[b] = t
    aliases, aliased = [], set()
    for t, step in enumerate(steps):
        out = step.writes[0]
        dying = [b for b in step.reads if last[b] == t and b not in aliased and buffers[b].kind == "feature_map"]
        if dying and buffers[out].kind == "feature_map" and draw(st.booleans()):
            aliases.append(Alias(out, dying[0], kind="in_place", shift=16 * draw(st.integers(0, 20))))
            aliased |= {out, dying[0]}
    return Schedule(buffers, steps, aliases)


@settings(max_examples=60, deadline=None)
@given(schedules())
def test_random_schedules_cover_every_touch_and_never_overlap(schedule):
    r = live_ranges(schedule)
    for t, step in enumerate(schedule.steps):
        for b in (*step.reads, *step.writes):
            k = r.buffer_range[b]
            assert r.start[k] <= t < r.end[k]
    result = layout(schedule)
    # Roots never overlap; each alias lies inside its root's range, and a root's range is its
    # own bytes plus whatever its shifted in-place aliases put below it.
    roots = {int(b) for b in r.range_buffer}
    fast = [p for i, p in enumerate(result.buffers) if p.arena == "scratch_fast" and i in roots]
    check_allocation([(p.start, p.end, p.size, 16) for p in fast], [p.offset for p in fast])
    for a in schedule.aliases:
        k = int(r.buffer_range[a.buffer])
        root = result.buffers[int(r.range_buffer[k])]
        range_start = root.offset - int(r.buffer_offset[int(r.range_buffer[k])])
        ofm, ifm = result.buffers[a.buffer], result.buffers[a.target]
        assert ofm.offset == ifm.offset - a.shift
        assert range_start <= ofm.offset and ofm.offset + ofm.size <= range_start + int(r.size[k])
    assert result.sizes["scratch_fast"] >= result.lower_bounds["scratch_fast"]


@settings(max_examples=40, deadline=None)
@given(schedules(), st.floats(0.0, 1.2), st.randoms(use_true_random=False))
def test_eviction_always_meets_the_fast_capacity(schedule, fraction, rnd):
    schedule.buffers = [ScheduledBuffer(b.name, b.kind, b.size, access_bytes=rnd.randint(0, 10_000))
                        for b in schedule.buffers]
    full = layout(schedule).sizes["scratch_fast"]
    capacity = int(full * fraction)
    result = layout(schedule, MemoryConfig(fast_capacity=capacity, fast_cycles_per_byte=0.1,
                                           slow_cycles_per_byte=1.0))
    assert result.sizes["scratch_fast"] <= capacity
    roots = {int(b) for b in live_ranges(schedule).range_buffer}  # aliases share their root's bytes
    for arena in ("scratch_fast", "scratch"):
        placed = [p for i, p in enumerate(result.buffers) if p.arena == arena and i in roots]
        check_allocation([(p.start, p.end, p.size, 16) for p in placed], [p.offset for p in placed])


@settings(max_examples=30, deadline=None)
@given(schedules(), st.randoms(use_true_random=False))
def test_no_fast_capacity_evicts_as_the_rounds_would(schedule, rnd):
    """A fast capacity of 0 evicts every buffer at once (no layout per round): the same buffers
    and the same eviction cycles, to the last bit, as a capacity of 1 byte, which the rounds
    reach (every buffer is 2 bytes or more here, so none fits)."""
    schedule.buffers = [ScheduledBuffer(b.name, b.kind, max(b.size, 2), access_bytes=rnd.randint(0, 10_000))
                        for b in schedule.buffers]
    results = [layout(schedule, MemoryConfig(fast_capacity=c, fast_cycles_per_byte=0.1, slow_cycles_per_byte=1.0))
               for c in (0, 1)]
    assert results[0].sizes["scratch_fast"] == 0
    assert results[0].arenas == results[1].arenas
    assert results[0].eviction_cycles == results[1].eviction_cycles


def test_cpu_visible_tensors_live_in_the_tflm_arena():
    """An NPU subgraph's IFM and OFM are TFLM tensors: in Dedicated_Sram they go to `scratch`
    (the arena TFLM plans, off chip) however much SRAM is free, and the packager then gets a
    scratch arena to put them in; in Shared_Sram `scratch` is the SRAM arena itself."""
    from cascader.tflite import ArenaSizes

    buffers = [
        ScheduledBuffer("input", "feature_map", 96, cpu_visible=True),
        ScheduledBuffer("mid", "feature_map", 64),
        ScheduledBuffer("output", "feature_map", 32, cpu_visible=True),
        ScheduledBuffer("output_view", "feature_map", 32),  # a reshape of the output
    ]
    steps = [Step((0,), (1,)), Step((1,), (2,)), Step((3,), ())]
    schedule = Schedule(buffers, steps, [Alias(3, 2, 0, "reshape")])
    dedicated = layout(schedule, MemoryConfig(fast_capacity=1 << 20))
    arenas = {p.name: p.arena for p in dedicated.buffers}
    assert arenas == {"input": "scratch", "mid": "scratch_fast", "output": "scratch", "output_view": "scratch"}
    assert ArenaSizes.from_layout(dedicated) == ArenaSizes(scratch=dedicated.sizes["scratch"], scratch_fast=64)
    assert dedicated.sizes["scratch"] == 96  # the output reuses the input's bytes (never live together)
    shared = layout(schedule, MemoryConfig(shared_sram=True))
    assert {p.arena for p in shared.buffers} == {"scratch"} and shared.sizes["scratch"] == 160
    with pytest.raises(InvalidArgumentError, match="slow-only"):
        layout(Schedule([ScheduledBuffer("s", "feature_map", 16, persistent=True, cpu_visible=True)],
                        [Step((), (0,))], []))


def test_a_layout_search_ends_on_its_node_limit_not_the_clock():
    """A compile must give the same bytes on a loaded or slow machine as on an idle one, so each
    exact search of a layout ends on `MemoryConfig.node_limit`; the time limit is only a safety
    net. Ended by a 0.5 s clock, a random network's cascaded compile at 1,908 B of SRAM fitted
    on an idle host and raised InfeasibleError (1,909 B) on a loaded one."""
    from cascader.memory_instances import perfect_packing

    inst = perfect_packing(3, 120)  # hard: 20,000 nodes do not reach its optimum
    steps: list[tuple[list[int], list[int]]] = [([], []) for _ in range(int(inst.rows[:, 1].max()))]
    for k, (start, end, _) in enumerate(inst.rows[:, :3].tolist()):
        steps[start][1].append(k)
        if end - 1 > start:
            steps[end - 1][0].append(k)
    schedule = Schedule([ScheduledBuffer(f"b{k}", "feature_map", int(size)) for k, size in enumerate(inst.rows[:, 2])],
                        [Step(tuple(reads), tuple(writes)) for reads, writes in steps], [])
    limited = [layout(schedule, MemoryConfig(node_limit=20_000, time_limit=t)) for t in (5.0, 1e6)]
    assert limited[0].offsets == limited[1].offsets
    assert limited[0].sizes["scratch_fast"] > inst.capacity  # the node limit ended the search
    assert layout(schedule, MemoryConfig(node_limit=200_000)).sizes["scratch_fast"] == inst.capacity
