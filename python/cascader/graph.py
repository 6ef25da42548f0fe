"""The cascading planner's graph and search, for experiments below the compiler.

``cascader.plan`` and ``cascader.compile`` build these values from a model; this module hands
them to a researcher to build, run and change by hand. They are the C++ core's own values
(``src/cascader/graph``, ``plan``, ``proposal``), so an experiment here runs the same code as
the compiler, at the same speed.

The graph
    :class:`Box`, a region of an NHWC tensor; :class:`Propagator`, the affine map from a
    region of a part's output to the region of one input it reads; :class:`PlanTensor`, one
    feature map; :class:`Part`, one NPU operation (its cycle-model description from
    :func:`npu_op`, its inputs with one propagator each, its output); :class:`PlanGraph`, parts
    in execution order over tensors. :func:`tensor` and :func:`part` build the last three in
    one call.
Cascades
    :func:`plan_cascade` runs consecutive parts stripe by stripe and gives a
    :class:`CascadePlan` (its :class:`RollingBuffer` objects, cycles, and the
    :class:`StripeRun` operations it runs); :func:`cascade_memory` is its peak memory;
    :func:`stripe_config` and :func:`tensor_configs` describe it as a :class:`StripeConfig` and
    :class:`TensorConfig` objects, the terms of the cascading literature (TVM's Ethos-U
    cascader, RFC apache/tvm-rfcs#37).
The search
    :func:`pareto_frontier` keeps the (memory, cycles) points nothing beats on both;
    :func:`generate_proposals` cuts the whole graph into cascades and returns the Pareto set of
    :class:`Proposal` objects, steered by :class:`ProposalOptions` or
    :class:`cascader.PlanOptions`.
The target
    :func:`arch_config` resolves an accelerator, system and memory mode into the target the
    cycle model costs on; :func:`npu_op` describes one NPU operation for it.

Examples
--------
>>> from cascader import graph
>>> g = graph.PlanGraph()
>>> a = g.add_tensor(graph.tensor("a", (1, 64, 64, 16)))
>>> b = g.add_tensor(graph.tensor("b", (1, 64, 64, 16)))
>>> op = graph.npu_op("conv2d", (1, 64, 64, 16), (1, 64, 64, 16), kernel=3, padding="SAME", weight_bytes=2304)
>>> g.add_part(graph.part("conv", op, [a], b, [graph.Propagator.window(3, 3, 1, 1, 1, 1, 1, 1, False, 16)]))
0
>>> g.inputs, g.outputs = [a], [b]
>>> plan = graph.plan_cascade(g, 0, 1, 8, graph.arch_config("ethos-u55-128"))
>>> plan.stripes
8
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional, Sequence, Union

from . import _core
from .arch import Accelerator, arch_config
from .perf import npu_op

if TYPE_CHECKING:
    from .planner import PlanOptions

__all__ = [
    "ArchConfig",
    "AxisMap",
    "Box",
    "BufferMode",
    "CascadePlan",
    "NpuOp",
    "Part",
    "PlanGraph",
    "PlanTensor",
    "Propagator",
    "Proposal",
    "ProposalOptions",
    "RollingBuffer",
    "StripeConfig",
    "StripeRun",
    "TensorConfig",
    "arch_config",
    "cascade_memory",
    "generate_proposals",
    "npu_op",
    "pareto_frontier",
    "part",
    "plan_cascade",
    "stripe_config",
    "tensor",
    "tensor_configs",
]

# The classes are the core's, re-exported as they are: values made here go straight into the
# core's functions, and the values those return (a plan's buffers, a proposal's cascades) are
# the same classes.
ArchConfig = _core.ArchConfig
AxisMap = _core.AxisMap
Box = _core.Box
BufferMode = _core.BufferMode
CascadePlan = _core.CascadePlan
NpuOp = _core.NpuOp
Part = _core.Part
PlanGraph = _core.PlanGraph
PlanTensor = _core.PlanTensor
Propagator = _core.Propagator
Proposal = _core.Proposal
ProposalOptions = _core.ProposalOptions
RollingBuffer = _core.RollingBuffer
StripeConfig = _core.StripeConfig
StripeRun = _core.StripeRun
TensorConfig = _core.TensorConfig

# The bindings carry no docstrings (they are thin by design, src/cascader/bindings), so the
# classes get theirs here, where `help(cascader.graph.Part)` finds them. A docstring the
# bindings gain later wins: only empty ones are filled.
_DOCS = {
    ArchConfig: """The target the cycle model costs on: accelerator, system (clocks, memories) and
    memory mode. Make one with :func:`arch_config`.""",
    AxisMap: """One axis of a :class:`Propagator`: input extent = ``scale`` * output extent +
    ``extent_bias``, input offset = ``scale`` * output offset + ``offset_bias``.""",
    Box: """A region of an NHWC tensor: ``offset`` and ``extent`` per axis (4 ints each).

    ``Box(offset, extent)``; ``box.cropped(shape)`` is the part inside ``[0, shape)``.""",
    BufferMode: """How a cascade holds a tensor (:class:`TensorConfig`): ``whole`` or ``rolling``
    (a window of rows, reused modulo its height).""",
    CascadePlan: """Parts ``[first, last)`` run stripe by stripe (from :func:`plan_cascade`).

    Attributes
    ----------
    first, last : int
        The parts, by position in the graph.
    stripe_height, stripes : int
        Rows of the sink (the last part's output) per stripe, and how many stripes.
    column_bands : int
        The sink's columns in this many bands, each a pass over all the stripes.
    depth_slices, slice_depth : int
        A depth-sliced cascade (``_core.plan_depth_cascade``): every part whole in H and W once
        per slice of ``slice_depth`` of the sink's channels (1: all channels at once).
    buffer_bytes : int
        The rolling buffers of the interior tensors together.
    buffers : list of RollingBuffer
        One per interior tensor.
    buffered_weights : bool
        Every part's weights copied into SRAM once and read from there by every stripe;
        ``weight_buffer_bytes`` is that buffer (a double buffer's first slot), and
        ``weight_second_slot_bytes`` its second slot, live during the cascade only.
    staircase_tensor, staircase_shift : int
        The input the sink is written over, ``staircase_shift`` bytes below it (-1: none).
    cycles : float
        The cycle model's, per part and stripe (each stripe reads the part's weights again).
    operations : int
        NPU operations: the non-empty (part, stripe) pairs.
    runs : list of StripeRun
        Those operations in execution order (when planned with ``runs=True``).""",
    NpuOp: """One NPU operation as the cycle model sees it: kind, feature maps, kernel, weights and
    where they live. Build one with :func:`npu_op`.""",
    Part: """One NPU operation of a :class:`PlanGraph` (build one with :func:`part`).

    Attributes
    ----------
    name : str
    op : NpuOp
        The operation over whole tensors, for the cycle model (:func:`npu_op`).
    inputs : list of int
        Its feature-map inputs (tensor indices; weights are in ``op``).
    propagators : list of Propagator
        One per input: which region of it a region of the output reads.
    output : int
        The tensor it writes.
    stripable : bool
        False when its output rows are not a bounded window of its input rows (a fully
        connected layer): it then runs whole, outside cascades.
    bufferable, buffered_cycles, buffered_bytes, buffered_second_slot_bytes, whole_cycles
        Costs the compiler's scheduler fixes for a part run alone (negative: the cycle
        model's; ``buffered_second_slot_bytes``, a double buffer's second slot and a staged
        input's copy, live only while the part runs); leave them for a graph built by hand.""",
    PlanGraph: """Parts in execution order over tensors: what the planner searches.

    ``add_tensor(t)`` and ``add_part(p)`` return the new index; set ``inputs`` and ``outputs``
    (tensor indices live from the start and to the end) and call ``validate()``, which raises
    naming the first bad index or shape. ``tensors`` and ``parts`` read back copies.""",
    PlanTensor: """One feature map of a :class:`PlanGraph` (build one with :func:`tensor`).

    Attributes
    ----------
    name : str
    shape : list of int
        NHWC.
    bytes : int
        The whole buffer as laid out.
    cascadable : bool
        Whether a cascade may keep it as a rolling buffer (one part writes it whole and every
        reader reads it whole).
    cpu_visible : bool
        A model or CPU operator's input or output: a cascade's output may not be written over
        it.""",
    Propagator: """Which region of an input a region of a part's output reads: an affine map per
    NHWC axis (:class:`AxisMap` objects in ``axes``), offsets scaled by the stride.

    ``Propagator.window(kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, pad_top,
    pad_left, depthwise, input_depth)`` for convolutions and pooling,
    ``Propagator.identity()`` for elementwise operations, ``Propagator.broadcast(operand,
    output)`` for a broadcast operand; ``propagate(box)`` maps an output :class:`Box` to the
    input box it reads, before cropping to the input.""",
    Proposal: """A whole-graph schedule from :func:`generate_proposals`: ``cascades`` (one
    :class:`CascadePlan` per group of parts, single parts included), ``memory`` (the planner's
    peak estimate: rolling buffers plus live whole tensors) and ``cycles``.""",
    ProposalOptions: """Options of :func:`generate_proposals`: ``max_cascade_parts``,
    ``stripe_heights``, ``column_bands``, ``max_proposals`` (points kept per prefix). The
    defaults are :class:`cascader.PlanOptions`'s; pass either.""",
    RollingBuffer: """An interior tensor's rolling buffer in a :class:`CascadePlan`: ``tensor``
    (index), ``rows`` x ``columns`` of it, ``bytes`` (per element bytes rounded up to 16).""",
    StripeConfig: """How a cascade's sink is cut into stripes, along H then W (from
    :func:`stripe_config`): ``shape`` (rows, columns of a full stripe), ``extent``,
    ``strides``, ``count``, ``order`` (1: innermost), ``offset`` and ``edge`` (the last stripe's
    rows, the last band's columns).""",
    StripeRun: """One NPU operation of a cascade: part ``part`` computing output rows
    ``[begin, end)`` and columns ``[column_begin, column_end)``; ``inputs`` the (begin, end,
    column_begin, column_end) it reads of each input, ``padding`` (top, left, bottom, right).""",
    TensorConfig: """One tensor a cascade touches (from :func:`tensor_configs`): ``tensor``,
    ``name``, ``mode`` (:class:`BufferMode`), ``boundary`` (an input or the sink: a whole
    buffer), ``rows`` x ``columns`` held and their ``bytes``.""",
}
for _cls, _doc in _DOCS.items():
    if not _cls.__doc__:
        _cls.__doc__ = _doc
del _cls, _doc

ArchLike = Union["_core.ArchConfig", str, Accelerator]


def _arch(arch: ArchLike) -> "_core.ArchConfig":
    # An accelerator name stands for its default system and memory mode, as everywhere else.
    return arch if isinstance(arch, _core.ArchConfig) else arch_config(arch)


def tensor(name: str, shape: Sequence[int], *, element_bytes: int = 1, cascadable: bool = True,
           cpu_visible: bool = False) -> PlanTensor:
    """A :class:`PlanTensor` in one call.

    Parameters
    ----------
    name
        For printing.
    shape
        NHWC; shorter shapes get leading 1s (``(64, 64, 16)`` is ``(1, 64, 64, 16)``).
    element_bytes
        1 for int8, 2 for int16; the buffer is the shape's elements times this.
    cascadable, cpu_visible
        As the attributes of :class:`PlanTensor`.

    Returns
    -------
    PlanTensor
    """
    shape = [int(v) for v in shape]
    t = PlanTensor()
    t.name, t.shape = name, [1] * (4 - len(shape)) + shape
    t.bytes = math.prod(t.shape) * int(element_bytes)
    t.cascadable, t.cpu_visible = cascadable, cpu_visible
    return t


def part(name: str, op: NpuOp, inputs: Sequence[int], output: int,
         propagators: Sequence[Propagator]) -> Part:
    """A :class:`Part` in one call.

    Parameters
    ----------
    name
        For printing.
    op
        The operation over whole tensors (:func:`npu_op`).
    inputs
        The feature-map tensors it reads (indices from ``PlanGraph.add_tensor``).
    output
        The tensor it writes.
    propagators
        One per input (:class:`Propagator`).

    Returns
    -------
    Part
    """
    p = Part()
    p.name, p.op, p.inputs, p.output, p.propagators = name, op, list(inputs), output, list(propagators)
    return p


def plan_cascade(graph: PlanGraph, first: int, last: int, stripe_height: int, arch: ArchLike, *,
                 buffer_weights: bool = False, column_bands: int = 1, runs: bool = True) -> Optional[CascadePlan]:
    """Run parts ``[first, last)`` as one cascade, the sink `stripe_height` rows at a time.

    Going back from each stripe of the sink, every interior tensor holds the rows a stripe
    needs as a rolling buffer: a row is computed once, when a stripe first needs it, and kept
    while a later stripe still reads it.

    Parameters
    ----------
    graph
        The graph (validated).
    first, last
        The parts, by position; ``last - first == 1`` plans one part in stripes.
    stripe_height
        Sink rows per stripe (its whole height: one stripe).
    arch
        The target (:func:`arch_config`), or an accelerator name for its default system.
    buffer_weights
        Copy every part's weights into SRAM once, instead of reading them for every stripe.
    column_bands
        Split the sink's width into this many bands too, each a pass over all the stripes:
        narrower buffers for recomputing the columns at the bands' edges.
    runs
        Record the NPU operations in :attr:`CascadePlan.runs`.

    Returns
    -------
    CascadePlan or None
        None when those parts cannot cascade (a part that is not stripable, a tensor leaving
        the cascade before its end, an interior tensor that is not cascadable), when
        `buffer_weights` is asked of parts without weights, or when `column_bands` > 1 is asked
        of a single part or a single stripe.
    """
    return _core.plan_cascade(graph, first, last, stripe_height, _arch(arch), buffer_weights=buffer_weights,
                              column_bands=column_bands, runs=runs)


def cascade_memory(graph: PlanGraph, plan: CascadePlan) -> int:
    """Peak memory in bytes while `plan` runs: its rolling buffers (and weight buffer) plus the
    whole tensors live meanwhile, the ones it reads and writes included, less the bytes a sink
    written over an input it consumes shares with it (``CascadePlan.staircase_tensor``).

    Returns
    -------
    int
    """
    return _core.cascade_memory(graph, plan)


def stripe_config(graph: PlanGraph, plan: CascadePlan) -> StripeConfig:
    """How `plan` cuts its sink into stripes, as a :class:`StripeConfig` (the last stripe along
    an axis counted exactly). A view of the plan: it adds nothing and cannot disagree with it."""
    return _core.stripe_config(graph, plan)


def tensor_configs(graph: PlanGraph, plan: CascadePlan) -> list[TensorConfig]:
    """One :class:`TensorConfig` per tensor `plan` touches: its inputs from outside (in order of
    first use) and its sink whole, its interior tensors in rolling buffers."""
    return _core.tensor_configs(graph, plan)


def pareto_frontier(points: Sequence[tuple[int, float]]) -> list[int]:
    """The indices of the (memory, cycles) points no other point beats on both, by increasing
    memory (so decreasing cycles). Ties keep the first; O(n log n).

    Raises
    ------
    cascader.InvalidArgumentError
        For NaN cycles.
    """
    return _core.pareto_frontier(list(points))


def generate_proposals(graph: PlanGraph, arch: ArchLike,
                       options: Union["PlanOptions", ProposalOptions, None] = None) -> list[Proposal]:
    """The Pareto set of whole-graph proposals, by increasing memory.

    A dynamic programme over the graph's cut points: each group of consecutive parts is one
    part alone or a cascade (:func:`plan_cascade` at every stripe height, column band count and
    weight buffering the options allow), and every prefix keeps its own (memory, cycles)
    frontier, thinned to ``max_proposals`` points (both ends and the knees kept).

    Parameters
    ----------
    graph
        The graph (validated).
    arch
        The target (:func:`arch_config`), or an accelerator name for its default system.
    options
        :class:`cascader.PlanOptions` or :class:`ProposalOptions`; None: the defaults.

    Returns
    -------
    list of Proposal
        Memory is the planner's peak estimate; ``cascader.plan`` lays each proposal out with
        the exact allocator.

    Raises
    ------
    cascader.InvalidArgumentError
        For a graph that does not validate.
    """
    if options is None:
        options = ProposalOptions()
    elif not isinstance(options, ProposalOptions):
        options = options.to_core()  # a PlanOptions
    return _core.generate_proposals(graph, _arch(arch), options)
