"""A proposal as a schedule: every cascade's parts as stripe-level NPU operations.

For each cascade of more than one stripe, stripe by stripe and part by part, one NPU
operation computes the rows of the part's output that stripe first needs: the runs the planner
costs (`_core.plan_cascade(...).runs`), so the binary is the plan. Its OFM is that region of
rows (and, with column bands, columns); its IFMs are the regions its propagators give, cropped
to the tensors, with padding only where a region reaches past a tensor's edge. Tensors
internal to a cascade live in rolling buffers of the planner's rows and columns: logical row r
is buffer row r mod R, logical column c is c minus the band's first column, and a region that
wraps is split over the NPU's two vertical tiles (the second based at the buffer's first row,
same column). Everything else is unchanged from the uncascaded schedule: whole-tensor
operations, their block configs and their encoded weights (every stripe of an operation reads
the same streams).

A depth-sliced cascade (`_core.plan_depth_cascade`) runs every part whole in H and W once per
slice of the sink's channels: its operations compute that slice of their OFM channels, read the
same slice of every input they read channel by channel, and its internal tensors are buffers of
one slice (channel c of slice [c0, c1) at buffer channel c - c0). A convolution's slice reads
its own weight and scale streams: the operation's weights encoded in slices of that depth
(`EncodedWeights.depth_slice`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any, Callable, NamedTuple

from . import _core
from .evolve import evolve
from .frontend.lowered import (FeatureMapView, LoweredOperation, box_origin, brick_strides, channel_slice,
                               dense_strides, follows_ofm, round16, views_whole)
from .frontend.quantization import average_pool_scale
from .schedule import NpuSchedule, ScheduledOperation, SegmentSchedule, _encode, _Target, keep_recent, unflattened
from .u85_chaining import with_chains

ROLLING_BASE = 1 << 40  # ids of rolling buffers: apart from tensor, scratch and constant ids


Region = tuple[int, int, int, int]  # rows [begin, end), columns [begin, end)


# A cascaded schedule makes a lowered and a scheduled operation per stripe (MobileNetV2-224's
# leanest proposal, about 490), and a view per stripe of the maps it reads or writes whole:
# built here from a copy of the instance dictionary as `evolve` builds them, without its
# keyword arguments and field check (0.9 of the 5.4 ms its schedule took).
_new = object.__new__


def _region(view: FeatureMapView, region: Region) -> FeatureMapView:
    """A region of a view of a whole buffer."""
    r0, r1, c0, c1 = region
    new = _new(FeatureMapView)  # `evolve(view, shape=..., offset=...)` (see `_new`)
    state = new.__dict__
    state.update(view.__dict__)
    state["shape"] = (r1 - r0, c1 - c0, view.shape[2])
    state["offset"] = view.offset + r0 * view.strides[0] + c0 * view.strides[1]
    return new


def _channels(view: FeatureMapView, channels: tuple[int, int]) -> FeatureMapView:
    """Channels [d0, d1) of a view (d0 a multiple of 16 in bricks, where a slice starts on one)."""
    d0, d1 = channels
    step = d0 * view.strides[2] if view.layout == "NHWC" else d0 // 16 * view.strides[2]
    return evolve(view, shape=(*view.shape[:2], d1 - d0), offset=view.offset + step)


def is_striped(c: Any) -> bool:
    """Whether a proposal's cascade runs in stripes (rows, columns or depth slices) rather than
    each part whole, one after another."""
    return c.last - c.first > 1 and (c.stripes > 1 or c.depth_slices > 1)


def _reads_channel_slice(lo: LoweredOperation, v: FeatureMapView) -> bool:
    """Whether a slice of `lo`'s OFM channels reads the same channels of operand `v` (the
    planner's channel-local propagators): a depthwise, pooling or elementwise operand as deep
    as the OFM, not a convolution's IFM (every output channel reads all of it)."""
    channelwise = lo.kind in ("depthwise", "elementwise") or (lo.kind == "pool"
                                                                and lo.registers.get("sub_op") != "REDUCE_SUM")
    return channelwise and v.shape[2] == lo.ofm.shape[2]


def _rolling_view(like: FeatureMapView, buffer: int, rows: int, columns: int, first_column: int,
                  region: Region, depth: int, first_channel: int = 0) -> FeatureMapView:
    """A region of a tensor held in a rolling buffer of `rows` x `columns` x `depth`: logical
    row r is buffer row r mod rows, logical column c is buffer column c - first_column (the
    band's). `like` views channels from `first_channel` on (a slice its writer writes)."""
    r0, r1, c0, c1 = region
    strides = _buffer_strides(like.layout, rows, columns, depth, like.element_size)
    # In bricks a slice starts at a brick (frontend.lowered.channel_slice).
    channel = first_channel * strides[2] if like.layout == "NHWC" else first_channel // 16 * strides[2]
    return evolve(like, buffer=buffer, shape=(r1 - r0, c1 - c0, like.shape[2]),
                   offset=(r0 % rows) * strides[0] + (c0 - first_column) * strides[1] + channel, strides=strides,
                   wrap_rows=rows)


@lru_cache(maxsize=1024)
def _buffer_strides(layout: str, rows: int, columns: int, depth: int, element_size: int) -> tuple[int, int, int]:
    """(y, x, c) strides of a rolling buffer (the views of one buffer share them)."""
    return (brick_strides if layout == "NHCWB16" else dense_strides)((rows, columns, depth), element_size)


def _part_operations(sched: NpuSchedule, pg: Any, parts: list | None = None) -> dict[int, tuple[int, int]]:
    """Plan parts -> scheduled operations (segment, position): NPU parts in schedule order.
    Made once per graph and segment sizes (all it depends on), kept on the schedule's target: a
    compile's candidate proposals share both, and reading every part's kind through the binding
    cost 0.15-0.3 ms a time. `parts`: `pg.parts`, when the caller has read them."""
    cache = sched.target.part_operations if sched.target is not None else {}
    # The map depends on the graph and on how many operations each segment has.
    key = (id(pg), tuple(len(seg.operations) for seg in sched.segments))
    found = cache.get(key)
    if found is None:  # the graph is held with the map, so that its id names no other
        found = cache[key] = (pg, _map_parts(sched, pg.parts if parts is None else parts))
    return found[1]


def _map_parts(sched: NpuSchedule, parts: list) -> dict[int, tuple[int, int]]:
    positions = [(s, k) for s, seg in enumerate(sched.segments) for k in range(len(seg.operations))]
    part_op: dict[int, tuple[int, int]] = {}
    n = 0
    for k, part in enumerate(parts):
        # A CPU operator's part is a DMA part that runs whole with no scheduled cycles
        # (planner.build_graph); an Ethos-U85 gather or scatter is a DMA part with its own.
        if part.op.type != _core.NpuOpType.Dma or part.stripable or part.whole_cycles >= 0:
            part_op[k] = positions[n]
            n += 1
    if n != len(positions):
        raise ValueError("the planner graph does not match the schedule")
    return part_op


def with_buffered_weights(cascaded: NpuSchedule, sched: NpuSchedule, pg: Any, proposal: Any,
                          buffered: NpuSchedule, every: bool = False) -> NpuSchedule:
    """`cascaded` (`cascaded_schedule` of `sched`) where every operation the proposal runs alone
    with buffered weights takes its buffering from `buffered`, the same uncascaded schedule
    with its weight buffers (the planner offers weight buffers only to operations run alone).
    `every`: each operation run alone, whether the proposal buffers its weights or not (for
    the allocator to keep those that fit, sliced thinner where that makes them fit).
    The stripes are not built again: operations run alone are `sched`'s own objects."""
    part_op = _part_operations(sched, pg)
    swap = {}
    for c in proposal.cascades:
        if not is_striped(c) and (c.buffered_weights or every):
            for k in range(c.first, c.last):
                if k in part_op:
                    s, i = part_op[k]
                    swap[id(sched.segments[s].operations[i])] = buffered.segments[s].operations[i]
    if not swap:
        return cascaded
    return replace(cascaded, segments=[replace(seg, operations=[swap.get(id(op), op) for op in seg.operations])
                                       for seg in cascaded.segments])


def proposal_schedules(sched: NpuSchedule, pg: Any, proposal: Any, target: _Target, buffered: NpuSchedule
                       ) -> tuple[NpuSchedule, NpuSchedule]:
    """A proposal as the compile tries it: its stripes (`cascaded_schedule` of `sched`, weights
    read in place) and the same with the weight buffers of operations run alone
    (`with_buffered_weights` from `buffered`)."""
    striped = cascaded_schedule(sched, pg, proposal, target)
    return striped, with_buffered_weights(striped, sched, pg, proposal, buffered)


def cascaded_schedule(sched: NpuSchedule, pg: Any, proposal: Any, target: _Target) -> NpuSchedule:
    """`sched` (uncascaded, weights read in place) with `proposal`'s cascades as stripes.

    `pg` is the planner graph `cascader.planner.build_graph` made of `sched`; its parts are the
    schedule's operations and CPU operators in order. Operations the proposal runs alone stay
    `sched`'s own (see `with_buffered_weights` for their weight buffers).
    """
    part_op = _part_operations(sched, pg)
    # The graph's parts and tensors, read once if a cascade is striped here (each read of
    # `pg.parts` copies them: 0.6 ms for MobileNetV2-224's).
    graph_lists = lru_cache(maxsize=None)(lambda: (pg.parts, pg.tensors))

    replaced: dict[tuple[int, int], list[ScheduledOperation]] = {}
    dropped: set[tuple[int, int]] = set()
    new_buffers: dict[int, dict[int, tuple[int, str, tuple[int, int, int]]]] = {}  # segment -> id -> (bytes, name, shape)
    gone: dict[int, set[int]] = {}  # segment -> whole buffers now rolling
    for cascade, c in enumerate(proposal.cascades):
        if not is_striped(c):
            continue
        made = _cascade_stripes(sched, pg, c, target, cascade, graph_lists)
        stripes = made.stripes
        if stripes[0].cascade != cascade:  # made for a proposal with other cascades before it
            stripes = [evolve(sop, cascade=cascade) for sop in stripes]
        segment = part_op[c.first][0]
        if part_op[c.last - 1][0] != segment:  # the partition puts a CPU operator between segments
            raise ValueError(f"cascade of parts {c.first}..{c.last - 1} crosses NPU segments")
        new_buffers.setdefault(segment, {}).update(made.buffers)
        gone.setdefault(segment, set()).update(made.replaced)
        replaced[part_op[c.first]] = stripes
        dropped.update(part_op[k] for k in range(c.first + 1, c.last))
    segments = []
    for s, seg in enumerate(sched.segments):
        ops = []
        for k, sop in enumerate(seg.operations):
            if (s, k) in dropped:
                continue
            ops.extend(replaced.get((s, k), [sop]))
        lowered_seg = seg.segment
        if s in new_buffers:
            extra, old = new_buffers[s], gone[s]
            kept = {b: size for b, size in lowered_seg.buffers.items() if b not in old}
            lowered_seg = replace(lowered_seg, buffers={**kept, **{b: v[0] for b, v in extra.items()}},
                                  aliases={**{t: b for t, b in lowered_seg.aliases.items() if b not in old},
                                           **{b: b for b in extra}},
                                  scratch={**lowered_seg.scratch, **{b: v[1] for b, v in extra.items()}},
                                  shapes={**lowered_seg.shapes, **{b: v[2] for b, v in extra.items()}})
        segments.append(SegmentSchedule(lowered_seg, ops))
    return with_chains(replace(sched, segments=segments), target)  # a stripe of a chained pair breaks it


class _CascadeStripes(NamedTuple):
    """One cascade of a proposal as stripe operations (`_cascade_stripes`)."""

    stripes: list[ScheduledOperation]  # in run order, marked as the `cascade` they were made for
    buffers: dict[int, tuple[int, str, tuple[int, int, int]]]  # its rolling buffers: id -> (bytes, name, shape)
    replaced: set[int]  # the whole buffers the rolling ones replace
    held: tuple  # the objects the cache key names by id, held so that no id names another


# A compile's candidate proposals share cascades (MobileNetV2-224's evicting candidates at its
# least SRAM on U65-256 repeat 5 of their 14): each is striped once while a few are kept.
_CASCADES_KEPT = 16


def _cascade_stripes(sched: NpuSchedule, pg: Any, c: Any, target: _Target, cascade: int,
                     graph_lists: Callable[[], tuple]) -> _CascadeStripes:
    """The stripes of cascade `c` (the `cascade`-th of its proposal) of `sched`, from the cache
    the schedule's target keeps. They depend on the cascade's own fields (its parts, stripes,
    rolling buffers and weight buffering), on the operations it stripes, the lowered segments
    (their tensors' shapes) and the graph, and on the target that costs them; the key names
    those objects, not the schedule (which holds the cache's owner). `graph_lists`: the graph's
    parts and tensors."""
    part_op = _part_operations(sched, pg)
    segments = tuple(seg.segment for seg in sched.segments)
    ops = tuple(sched.segments[part_op[k][0]].operations[part_op[k][1]] for k in range(c.first, c.last))
    key = (id(pg), id(target), tuple(map(id, segments)), tuple(map(id, ops)), c.first, c.last, c.stripes,
           c.stripe_height, c.column_bands, c.depth_slices, c.buffered_weights,
           tuple((held.tensor, held.rows, held.columns) for held in c.buffers))
    cache = sched.target.cascade_stripes if sched.target is not None else {}
    found = cache.get(key)
    if found is None:
        made = _make_cascade_stripes(sched, pg, c, target, cascade, *graph_lists())
        held = (pg, None if target is sched.target else target, segments, ops)
        found = keep_recent(cache, key, made._replace(held=held), _CASCADES_KEPT)
    return found


def _make_cascade_stripes(sched: NpuSchedule, pg: Any, c: Any, target: _Target, cascade: int, parts: list,
                          tensors: list) -> _CascadeStripes:
    part_op = _part_operations(sched, pg, parts)
    shapes: dict[int, tuple[int, int, int]] = {}
    for seg in sched.segments:
        shapes.update(seg.segment.shapes)
    ops = {k: sched.segments[part_op[k][0]].operations[part_op[k][1]] for k in range(c.first, c.last)}
    lowered = {k: unflattened(sop.lowered, shapes) for k, sop in ops.items()}
    # Rolling buffers of the internal tensors, and every part's natural output view.
    rolling: dict[int, tuple[int, int, int, int]] = {}  # plan tensor -> (buffer id, rows, columns, depth)
    new_buffers: dict[int, tuple[int, str, tuple[int, int, int]]] = {}
    gone: set[int] = set()
    for held in c.buffers:
        t = held.tensor
        writer = next(k for k in range(c.first, c.last) if parts[k].output == t)
        view = lowered[writer].ofm
        b = ROLLING_BASE + 1000 * c.first + len(rolling)
        # The whole depth (its writers may each write a slice of it), or one depth slice.
        ch = held.channels or shapes[view.buffer][2]
        size = held.rows * held.columns * (round16(ch) if view.layout == "NHCWB16" else ch) * view.element_size
        held_as = f"{held.channels} channels" if held.channels else f"{held.rows} rows"
        new_buffers[b] = (size, f"{tensors[t].name} (rolling, {held_as})", (held.rows, held.columns, ch))
        rolling[t] = (b, held.rows, held.columns, ch)
        gone.add(view.buffer)  # the whole buffer it replaces
    # The band's first column of each rolling tensor: where its producer's runs in the
    # current band start (every run of a part in one band computes the same columns).
    first_column: dict[int, int] = {}
    # A rolling buffer's views repeat with its rows (a region's place in the buffer is its
    # first row modulo them): the views are values, so stripes share equal ones.
    rolled: dict[tuple, FeatureMapView] = {}

    def band(view: FeatureMapView, t: int, region: Region, channels: tuple[int, int] | None = None
             ) -> FeatureMapView:
        """`region` of `view` (of plan tensor `t`), where the cascade keeps it; `channels`: only
        those of a depth slice."""
        held = rolling.get(t)
        if held is None:
            return _region(view if channels is None else _channels(view, channels), region)
        b, rows, columns, depth = held
        r0, r1, c0, c1 = region
        first = first_column[t]
        key = (id(view), r0 % rows, r1 - r0, c0 - first, c1 - c0, channels)
        found = rolled.get(key)
        if found is None:
            if channels is not None:  # a depth slice, from the buffer's first channel
                found = _rolling_view(evolve(view, shape=(*view.shape[:2], channels[1] - channels[0])), b, rows,
                                      columns, first, region, depth)
            else:
                first_channel = 0
                if view.shape[2] != depth:  # a slice of its channels, or a box's (`_source`)
                    first_channel = channel_slice(view, shapes[view.buffer])
                    if first_channel is None:
                        first_channel = box_origin(view, shapes[view.buffer])[0][2]
                found = _rolling_view(view, b, rows, columns, first, region, depth, first_channel)
            rolled[key] = found
        return found

    # The planner's own run of the cascade: which region each part computes, in order.
    if c.depth_slices > 1:
        planned = _core.plan_depth_cascade(pg, c.first, c.last, c.depth_slices, target.arch)
    else:
        planned = _core.plan_cascade(pg, c.first, c.last, c.stripe_height, target.arch, column_bands=c.column_bands)
    stripes = []
    # What the stripes of a part share, by source and weights (`_stripe`'s `part`).
    shared: dict[tuple[int, str | None], tuple[dict, dict, dict]] = {}
    copied: set[int] = set()  # parts whose weights a buffered cascade has copied in
    sources = {k: _source(ops[k], lowered[k], parts[k], tensors, shapes) for k in range(c.first, c.last)}
    sliced_sources: dict[tuple[int, int], _Source] = {}  # (part, first channel) -> its slice's weights
    buffered = c.buffered_weights  # a binding's property: read once, not per run
    for k, region, reads, padding, (d0, d1) in planned.run_fields():  # one call, not six per run
        src = sources[k]
        channels = None if d1 < 0 else (d0, d1)
        if channels is not None and src.sop.encoded is not None:
            if (k, d0) not in sliced_sources:
                sliced_sources.update(_slice_sources(k, src, c.slice_depth, target))
            src = sliced_sources[(k, d0)]
        first_column[src.output] = region[2]
        weights = None
        if buffered and src.sop.encoded is not None:
            weights = "resident" if k in copied else "copy"
            copied.add(k)
        part = shared.get((id(src), weights))
        if part is None:  # `src` is held by `sources` or `sliced_sources`: its id names no other
            part = shared[(id(src), weights)] = (vars(evolve(
                src.sop, cascade=cascade, stripe_of=src.sop.lowered, weight_buffer=weights == "copy",
                shared_weights=None if weights is None else ("cascade", c.first, k))), {}, {})
        stripes.append(_stripe(src, region, reads, padding, band, target, part, weights, channels))
    return _CascadeStripes(stripes, new_buffers, gone, ())


def _slice_sources(k: int, src: "_Source", depth: int, target: _Target) -> dict[tuple[int, int], "_Source"]:
    """`src`'s operation once per slice of `depth` OFM channels, each with that slice's weight
    and scale streams alone: {(part, first channel): source}. The streams are encoded in slices
    for the operation's own block depth, as a weight-buffered operation's depth slices are."""
    sop = src.sop
    encoded = _encode(sop.lowered, sop.block, sop.part_kernel_first, target.accelerator, depth_step=depth,
                      whole=sop.direct_encoded if sop.depth_step else sop.encoded)
    return {(k, s * depth): src._replace(sop=evolve(sop, encoded=encoded.depth_slice(s), direct_encoded=None))
            for s in range(len(encoded.slices))}


class _Source(NamedTuple):
    """What every stripe of one part reads from the planner graph, read once per cascade (each
    read of a bound object's list property builds a new list)."""

    sop: ScheduledOperation
    lowered: LoweredOperation  # its whole-tensor operation, unflattened
    output: int  # plan tensor
    output_width: int
    inputs: tuple[int, ...]  # the plan tensors of its IFM and IFM2
    # Its IFM as a view of its buffer's rows and columns from (0, 0) (the planner's regions
    # are the buffer's): a box read in place (a SLICE's reader) moved back by its origin.
    ifm: FeatureMapView
    # A box read every step-th row or column ((origin, steps), `box_origin`; else None): the
    # buffer's region a stripe reads holds (extent - 1) / step + 1 of the box's rows.
    stepped: tuple | None
    first_operand: int = 0  # the operand (0 IFM, 1 IFM2) of `inputs[0]` (`_core.Part.first_operand`)
    # Its IFM, IFM2 and OFM views that are no rows and columns of their buffers (a RESHAPE's
    # reader viewing a 30 x 46 map as 1 x 1380, `_reviewed`): the planner's regions, in the
    # buffer's rows and columns, say nothing of them, and the part runs whole (not stripable).
    reviewed: tuple[bool, bool, bool] = (False, False, False)
    # Its constant operands read element for element with the OFM ((operand, view) each,
    # `frontend.lowered.follows_ofm`): a stripe reads its region of them.
    follows: tuple[tuple[int, FeatureMapView], ...] = ()


def _source(sop: ScheduledOperation, lo: LoweredOperation, part: Any, tensors: Any, shapes: dict) -> _Source:
    ifm, stepped = lo.ifm, None
    box = box_origin(ifm, shapes.get(ifm.buffer)) if "transpose" not in lo.registers else None
    if box is not None and box[1] == (1, 1):
        ifm = evolve(ifm, offset=ifm.offset - box[0][0] * ifm.strides[0] - box[0][1] * ifm.strides[1])
    elif box is not None:
        stepped = box
    # A transpose's channel plane views its whole input permuted: `_stripe` maps its regions.
    reviewed = (False,) * 3 if "transpose" in lo.registers else tuple(
        _reviewed(v, shapes) for v in (lo.ifm, lo.ifm2, lo.ofm))
    follows = tuple((i, v) for i, v in enumerate((lo.ifm, lo.ifm2)) if v is not None and v.shape[:2] == lo.ofm.shape[:2]
                    and v.shape[:2] != (1, 1) and follows_ofm(lo, v))
    return _Source(sop, lo, part.output, tensors[part.output].shape[2], tuple(part.inputs[:2]), ifm, stepped,
                   part.first_operand, reviewed, follows)


def _reviewed(v: FeatureMapView | None, shapes: dict) -> bool:
    """Whether `v` views a feature-map buffer other than as its rows and columns: not the buffer
    whole, a slice of its channels or a box of it read in place."""
    natural = None if v is None else shapes.get(v.buffer)
    if natural is None or views_whole(v, natural):
        return False
    return channel_slice(v, natural) is None and box_origin(v, natural) is None


def _stripe(src: _Source, region: Region, reads: tuple, run_padding: tuple, band, target: _Target,
            part: tuple[dict, dict, dict], weights: str | None = None,
            channels: tuple[int, int] | None = None) -> ScheduledOperation:
    """A part's operation on one run of the planner (`StripeRun.fields`: a region of rows and
    columns of its output, the regions it reads and its padding). `weights`: None (read where
    they are stored), "copy" (copied into the cascade's weight buffer first) or "resident"
    (already there). `channels`: the OFM channels of a depth slice (None: all). `part`: what
    the stripes of this source with these weights share: the scheduled operation's fields but
    its lowered operation, block and cost (the source's, with those every stripe of it sets),
    and their costs by shapes and padding and registers by padding, each made once."""
    fields, costs, registers_by_padding = part
    r0, r1, c0, c1 = region
    sop, lo = src.sop, src.lowered
    reviewed = src.reviewed
    whole = any(reviewed)
    if whole and (r0, c0, c1) != (0, 0, src.output_width):
        raise ValueError(f"{lo.name}: a part that re-views a map striped to {region}")
    ofm = _channels(lo.ofm, channels) if reviewed[2] and channels is not None else (
        lo.ofm if reviewed[2] else band(lo.ofm, src.output, region, channels))
    views = {}
    for i, (t, read) in enumerate(zip(src.inputs, reads), start=src.first_operand):
        # The region the stripe reads, where the cascade keeps it. An operand read whole by
        # every stripe (broadcast along H and W) too: a squeeze-and-excite gate that a part of
        # the cascade makes is in a rolling buffer, and its whole buffer is gone.
        v = lo.ifm if i == 0 else lo.ifm2
        sliced = channels if channels is not None and _reads_channel_slice(lo, v) else None
        if reviewed[i]:  # read whole, in its own view
            views[i] = v if sliced is None else _channels(v, sliced)
        else:
            views[i] = band(src.ifm if i == 0 else v, t, read, sliced)
    if src.inputs and "transpose" in lo.registers:
        # A transpose's plane views its (whole) input in its output's shape: the stripe's
        # region of it is the output's (planner._transpose_propagator).
        views[0] = _region(lo.ifm, region)
    elif src.stepped is not None and src.inputs:
        # Every step-th row and column of a whole buffer (the planner keeps it whole).
        ((y, x, _), (sy, sx)), (q0, q1, p0, p1) = src.stepped, reads[0]
        first = lo.ifm.offset + (q0 - y) // sy * lo.ifm.strides[0] + (p0 - x) // sx * lo.ifm.strides[1]
        views[0] = evolve(lo.ifm, shape=((q1 - q0 - 1) // sy + 1, (p1 - p0 - 1) // sx + 1, lo.ifm.shape[2]), offset=first)
    for i, v in src.follows:
        # A constant read element for element with the OFM (a channel pad's border, a 1x1
        # resize's zeros): the stripe's region of it.
        if i not in views:
            views[i] = _region(v, region)
    padding = lo.registers.get("padding")  # top, left, bottom, right
    registers = lo.registers
    if padding is not None and lo.kind in ("conv", "depthwise", "pool"):
        if not whole:
            # Padding only where the region reaches past the tensor's edge; the NPU reads the
            # bottom and right padding only as far as the windows reach. (A part run whole
            # pads as its operation does: the planner's padding is of the buffer's rows and
            # columns.)
            padding = run_padding
        registers = registers_by_padding.get(padding)
        if registers is None:  # one dict for the stripes of one padding (registers are values)
            registers = registers_by_padding[padding] = _padded_registers(lo, padding)
    ifm = views.get(0, lo.ifm)
    ifm2 = views.get(1, lo.ifm2) if lo.ifm2 is not None else None
    name = (f"{lo.name}[rows {r0}:{r1}{'' if (c0, c1) == (0, src.output_width) else f', columns {c0}:{c1}'}"
            f"{'' if channels is None else f', channels {channels[0]}:{channels[1]}'}]")
    stripe_lo = _new(LoweredOperation)  # `evolve(lo, ifm=..., ...)` (see `_new`)
    state = stripe_lo.__dict__
    state.update(lo.__dict__)
    state["ifm"], state["ifm2"], state["ofm"], state["registers"], state["name"] = ifm, ifm2, ofm, registers, name
    # The block for this stripe as the planner costed it. Most stripes of an operation have the
    # same shapes and padding: the cost is computed once for each.
    key = (ifm.shape, ifm2.shape if ifm2 is not None else None, ofm.shape, padding)
    found = costs.get(key)
    if found is None:
        w = sum(r.weight_length for streams in sop.encoded.slices for r in streams) if sop.encoded else 0
        sc = sum(r.scale_length for streams in sop.encoded.slices for r in streams) if sop.encoded else 0
        cost = target.cost(stripe_lo, w, sc, None, sop.part_kernel_first if lo.kind == "conv" else None,
                           buffered=weights == "copy", resident=weights == "resident",
                           block_depth=sop.stripe_block_depth, ifm2_in_flash=sop.constant_ifm2 == "flash",
                           stripe_of=lo)
        found = costs[key] = (cost, tuple(cost.block_config.ofm_block))
    stripe = _new(ScheduledOperation)  # `evolve(sop, lowered=..., ...)` (see `_new`)
    state = stripe.__dict__
    state.update(fields)
    state["lowered"], state["block"], state["cost"] = stripe_lo, found[1], found[0]
    return stripe


def _padded_registers(lo: LoweredOperation, padding: tuple) -> dict:
    """The registers of a stripe of `lo` (a convolution, depthwise or pooling) that pads `padding`."""
    registers = {**lo.registers, "padding": padding}
    if lo.kind == "pool" and registers.get("sub_op") == "AVERAGE" and any(lo.registers["padding"]):
        # The NPU divides a padded window itself and an unpadded one not at all: a stripe
        # that pads nothing divides through its scale (a SAME average pool's inner stripes).
        k = registers["kernel"]
        registers["ofm_scale"] = average_pool_scale(k["height"] * k["width"], padding)
    return registers
