"""The NPU cycle model, from Python.

:func:`estimate_op` describes one NPU operation and returns its :class:`OpCost`. The model itself
is the C++ one in ``src/cascader/perf/`` (the same the planner and the estimator call); this
module only converts arguments and results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from . import _core
from .arch import MEMORIES, Accelerator, MemoryMode, SystemConfig, arch_config
from .errors import InvalidArgumentError

OP_KINDS = {
    "conv2d": "Conv2D",
    "depthwise_conv2d": "DepthwiseConv2D",
    "max_pool": "MaxPool",
    "avg_pool": "AvgPool",
    "add": "Add",
    "sub": "Sub",
    "mul": "Mul",
    "minimum": "Minimum",
    "maximum": "Maximum",
    "fully_connected": "FullyConnected",
    "dma": "Dma",
    "reduce_sum": "ReduceSum",
}
ACTIVATIONS = {None: "None_", "NONE": "None_", "RELU": "Relu", "RELU6": "Relu", "RELU_N1_TO_1": "Relu",
               "LUT": "Lut", "SIGMOID": "Lut", "TANH": "Lut"}
TRAVERSALS = {"auto": "Auto", "depth_first": "DepthFirst", "part_kernel_first": "PartKernelFirst"}
_BITS = {"int8": 8, "uint8": 8, "int16": 16, "int32": 32, "int64": 64, 8: 8, 16: 16, 32: 32}  # int64: ARG_MAX indices

Shape = Sequence[int]


@dataclass(frozen=True)
class BlockChoice:
    """The block config an estimate used."""

    ofm_block: Tuple[int, int, int]  # height, width, depth
    ifm_block: Tuple[int, int, int]
    part_kernel_first: bool
    accumulator: str


@dataclass(frozen=True)
class OpCost:
    """Cost of one NPU op, as Vela defines its per-layer figures.

    ``total_cycles`` is the maximum of ``npu_cycles`` (compute plus DMA waited for) and the
    access cycles of each memory.
    """

    total_cycles: float
    npu_cycles: int
    dma_cycles: int
    access_cycles: Dict[str, float]
    read_bytes: Dict[str, float]
    write_bytes: Dict[str, float]
    macs: int
    block_config: BlockChoice
    #: Cycles under which the next op's weight or LUT DMA runs (pass it as that op's
    #: ``dma_slack_cycles``): this op's compute as Vela's scheduler counts it, with feature
    #: maps in their home memory and only the last depth slice when weights are sliced.
    buffering_slack_cycles: int = 0
    #: The op as the cycle model saw it (``_core.NpuOp``), when the cost came from a schedule:
    #: the memory planner re-costs it with a feature map moved to the slow memory
    #: (`eviction_cycles`).
    described: Any = field(default=None, compare=False, repr=False)
    _evictions: Dict[Any, float] = field(default_factory=dict, compare=False, repr=False)

    def __getstate__(self) -> Dict[str, Any]:
        # The core's op description does not pickle; a copy keeps the costs, not the probe.
        return {**self.__dict__, "described": None, "_evictions": {}}

    def eviction_cycles(self, fast: str, slow: str, arch: Any) -> Dict[str, float]:
        """Cycles this op gains when each of its feature maps ("ifm", "ifm2", "ofm") in the
        `fast` memory moves to the `slow` one: the op costed again, not bytes times a rate, each
        operand given its Shapley share of the joint gains (perf/eviction_shares.hpp). Empty
        without `described`; computed once per cost (the stripes of an operation share theirs)."""
        key = (fast, slow)
        shares = self._evictions.get(key)
        if shares is None:
            shares = {}
            if self.described is not None:
                found = _core.eviction_shares(self.described, arch, _memory(fast), _memory(slow), self.total_cycles)
                shares = {o: s for o, s in zip(("ifm", "ifm2", "ofm"), found) if s is not None}
            self._evictions[key] = shares
        return shares

    @property
    def bound(self) -> str:
        """What limits the op: "compute" or the name of the memory whose traffic dominates."""
        worst = max(self.access_cycles, key=self.access_cycles.get)
        return "compute" if self.npu_cycles >= self.access_cycles[worst] else worst

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{m} access</td><td>{c:,.0f}</td></tr>" for m, c in self.access_cycles.items() if c
        )
        b = self.block_config
        return (
            "<table><tr><th>total cycles</th><th>{:,.0f}</th></tr>"
            "<tr><td>NPU</td><td>{:,}</td></tr><tr><td>DMA</td><td>{:,}</td></tr>{}"
            "<tr><td>MACs</td><td>{:,}</td></tr><tr><td>block</td><td>OFM {} IFM {}{}</td></tr>"
            "<tr><td>bound by</td><td>{}</td></tr></table>"
        ).format(self.total_cycles, self.npu_cycles, self.dma_cycles, rows, self.macs, b.ofm_block, b.ifm_block,
                 " part-kernel-first" if b.part_kernel_first else "", self.bound)


def _shape4(shape: Optional[Shape], what: str) -> "_core.Shape4":
    if shape is None:
        raise InvalidArgumentError(f"{what} shape is required")
    s = [int(v) for v in shape]
    if not 1 <= len(s) <= 4:
        raise InvalidArgumentError(f"{what} shape must have 1 to 4 dimensions (NHWC), got {tuple(shape)}")
    s = [1] * (4 - len(s)) + s
    if min(s) < 1:
        raise InvalidArgumentError(f"{what} shape must be positive, got {tuple(shape)}")
    return _core.Shape4(*s)


def _pair(v: Union[int, Sequence[int]], what: str) -> Tuple[int, int]:
    if type(v) is tuple and len(v) == 2:  # the usual form, without a generator (hundreds per plan)
        return int(v[0]), int(v[1])
    t = (int(v), int(v)) if isinstance(v, int) else tuple(int(x) for x in v)
    if len(t) != 2:
        raise InvalidArgumentError(f"{what} must be an int or a (height, width) pair, got {v!r}")
    return t  # type: ignore[return-value]


def _memory(name: str) -> "_core.MemoryArea":
    if name not in MEMORIES:
        raise InvalidArgumentError(f"unknown memory {name!r}; valid: {', '.join(MEMORIES)}")
    return getattr(_core.MemoryArea, name)


def _feature_map(shape: Shape, bits, fmt: str, memory: str, what: str) -> "_core.FeatureMap":
    fm = _core.FeatureMap()
    fm.shape = _shape4(shape, what)
    if bits not in _BITS:
        raise InvalidArgumentError(f"{what} dtype must be int8, int16, int32 or int64, got {bits!r}")
    fm.bits = _BITS[bits]
    if fmt not in ("NHWC", "NHCWB16"):
        raise InvalidArgumentError(f"{what} format must be 'NHWC' or 'NHCWB16', got {fmt!r}")
    fm.format = getattr(_core.TensorFormat, fmt)
    fm.memory = _memory(memory)
    return fm


def _padding(padding, ifm: "_core.Shape4", ofm: "_core.Shape4", k, s, d) -> "_core.Padding":
    p = _core.Padding()
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return p
        if padding.upper() != "SAME":
            raise InvalidArgumentError(f"padding must be 'SAME', 'VALID' or (top, left, bottom, right), got {padding!r}")
        # TFLite SAME: the total padding that produces the OFM, the odd one at the end.
        th = max((ofm.h - 1) * s[0] + (k[0] - 1) * d[0] + 1 - ifm.h, 0)
        tw = max((ofm.w - 1) * s[1] + (k[1] - 1) * d[1] + 1 - ifm.w, 0)
        p.top, p.bottom, p.left, p.right = th // 2, th - th // 2, tw // 2, tw - tw // 2
        return p
    vals = [int(v) for v in padding]
    if len(vals) != 4 or min(vals) < 0:
        raise InvalidArgumentError(f"padding must be 4 non-negative ints (top, left, bottom, right), got {padding!r}")
    p.top, p.left, p.bottom, p.right = vals
    return p


def npu_op(
    kind: str,
    ifm_shape: Shape,
    ofm_shape: Shape,
    *,
    ifm2_shape: Optional[Shape] = None,
    kernel: Union[int, Sequence[int]] = 1,
    stride: Union[int, Sequence[int]] = 1,
    dilation: Union[int, Sequence[int]] = 1,
    padding: Union[str, Sequence[int]] = "VALID",
    weight_bytes: int = 0,
    scale_bytes: int = 0,
    activation: Optional[str] = None,
    lut_bytes: int = 0,
    ifm_dtype: Union[str, int] = "int8",
    ifm2_dtype: Union[str, int, None] = None,
    ofm_dtype: Union[str, int] = "int8",
    ifm_format: str = "NHWC",
    ifm2_format: str = "NHWC",
    ofm_format: str = "NHWC",
    ifm_memory: str = "Sram",
    ofm_memory: str = "Sram",
    ifm2_memory: Optional[str] = None,
    weight_memory: str = "OffChipFlash",
    weight_buffer_memory: Optional[str] = None,
    weight_first_dma_bytes: int = 0,
    weight_last_slice_depth: int = 0,
    dma_slack_cycles: int = 0,
    block_config: Optional[Tuple[int, int, int]] = None,
    traversal: str = "auto",
    dma_bytes: int = 0,
    accelerator: Union[str, Accelerator] = "ethos-u55-128",
    block_depth: int = 0,
    ifm_upscale: int = 1,
) -> "_core.NpuOp":
    """Build the core's description of one NPU op. See :func:`estimate_op` for the arguments."""
    if kind not in OP_KINDS:
        raise InvalidArgumentError(f"unknown op kind {kind!r}; valid: {', '.join(OP_KINDS)}")
    op = _core.NpuOp()
    op.type = getattr(_core.NpuOpType, OP_KINDS[kind])
    op.ifm = _feature_map(ifm_shape, ifm_dtype, ifm_format, ifm_memory, "ifm")
    op.ofm = _feature_map(ofm_shape, ofm_dtype, ofm_format, ofm_memory, "ofm")
    if ifm2_shape is not None:
        op.ifm2 = _feature_map(ifm2_shape, ifm2_dtype or ifm_dtype, ifm2_format, ifm2_memory or ifm_memory, "ifm2")
    k, s, d = _pair(kernel, "kernel"), _pair(stride, "stride"), _pair(dilation, "dilation")
    kn = _core.Kernel()
    kn.height, kn.width, kn.stride_y, kn.stride_x, kn.dilation_y, kn.dilation_x = *k, *s, *d
    op.kernel = kn
    op.padding = _padding(padding, op.ifm.shape, op.ofm.shape, k, s, d)
    op.weight_bytes, op.scale_bytes, op.lut_bytes, op.dma_bytes = int(weight_bytes), int(scale_bytes), int(lut_bytes), int(dma_bytes)
    op.weight_memory = _memory(weight_memory)
    if weight_buffer_memory is not None:
        op.weight_buffer_memory = _memory(weight_buffer_memory)
    op.weight_first_dma_bytes = int(weight_first_dma_bytes)
    op.weight_last_slice_depth = int(weight_last_slice_depth)
    op.dma_slack_cycles = int(dma_slack_cycles)
    key = activation.upper() if isinstance(activation, str) else activation
    if key not in ACTIVATIONS:
        raise InvalidArgumentError(f"unknown activation {activation!r}; valid: {', '.join(k for k in ACTIVATIONS if k)}")
    op.activation = getattr(_core.Activation, ACTIVATIONS[key])
    if traversal not in TRAVERSALS:
        raise InvalidArgumentError(f"traversal must be one of {', '.join(TRAVERSALS)}, got {traversal!r}")
    op.traversal = getattr(_core.Traversal, TRAVERSALS[traversal])
    op.block_depth = int(block_depth)
    if ifm_upscale not in (1, 2):
        raise InvalidArgumentError(f"ifm_upscale must be 1 or 2, got {ifm_upscale!r}")
    op.ifm_upscale = int(ifm_upscale)
    if block_config is not None:
        set_block_config(op, block_config, Accelerator(accelerator))
    return op


def set_block_config(op: "_core.NpuOp", block_config: Tuple[int, int, int], acc: Accelerator) -> None:
    """Fix the op's OFM block (height, width, depth), checked to be one the accelerator can run
    for it. The check reads the op's other fields: set those first."""
    h, w, c = map(int, block_config)
    if acc.product == "ethos-u85":  # no SHRAM: its own RAMs, its own rules (arch/ethos_u85/block_search)
        cfg = _core.u85_try_block_config(op, acc._config, _core.BlockShape(h, w, c))
    else:
        cfg = _core.try_block_config(acc._config, _core.block_query(op), _core.BlockShape(h, w, c))
    if cfg is None:
        raise InvalidArgumentError(
            f"block config {block_config} is not valid for this op on {acc.name} (micro-block multiples up to "
            f"{acc._config.ofm_block_max.height}x{acc._config.ofm_block_max.width}x{acc._config.ofm_block_max.depth} "
            f"that fit {'its IFM and accumulator RAMs' if acc.product == 'ethos-u85' else 'SHRAM'}); see "
            "cascader.block_configs()"
        )
    op.block_config = cfg


def estimate_op(
    kind: str,
    ifm_shape: Shape,
    ofm_shape: Shape,
    *,
    accelerator: Union[str, Accelerator] = "ethos-u55-128",
    system: Union[str, SystemConfig, None] = None,
    memory_mode: Union[str, MemoryMode, None] = None,
    **op_args,
) -> OpCost:
    """Estimate the cycles of one NPU operation.

    Parameters
    ----------
    kind
        One of ``conv2d``, ``depthwise_conv2d``, ``max_pool``, ``avg_pool``, ``add``, ``sub``,
        ``mul``, ``minimum``, ``maximum``, ``fully_connected``, ``dma``.
    ifm_shape, ofm_shape
        NHWC shapes (shorter shapes are padded with leading 1s).
    accelerator, system, memory_mode
        The target (see :func:`cascader.arch.arch_config` for the defaults).
    **op_args
        ``ifm2_shape``, ``kernel``, ``stride``, ``dilation`` (int or (h, w)), ``padding``
        ("SAME", "VALID" or (top, left, bottom, right)), ``weight_bytes`` and ``scale_bytes``
        (encoded sizes), ``activation`` (None, "RELU", "RELU6", "SIGMOID", "TANH", "LUT"),
        ``lut_bytes``, ``ifm_dtype``/``ifm2_dtype``/``ofm_dtype``, ``*_format`` ("NHWC" or
        "NHCWB16"), ``ifm_memory``/``ofm_memory``/``ifm2_memory`` (default: the IFM's)/``weight_memory``/``weight_buffer_memory``
        (memory names; the weight memory defaults to the target's constants region),
        ``weight_first_dma_bytes``/``weight_last_slice_depth`` (buffered weights: the first DMA
        and the last depth slice; default one slice), ``dma_slack_cycles`` (cycles that hide
        this op's DMA: the preceding op's ``buffering_slack_cycles``),
        ``block_config`` ((h, w, depth) OFM block, else chosen), ``block_depth`` (chosen, but
        only at this OFM block depth: the stripes of one weight stream), ``traversal`` ("auto",
        "depth_first", "part_kernel_first"), ``dma_bytes`` (``dma`` ops), ``ifm_upscale`` (2:
        the IFM is upscaled by 2 on the way in; ``ifm_shape`` is then the extent the kernel
        walks, and half of it in H and W is fetched).

    Returns
    -------
    OpCost
    """
    arch = arch_config(accelerator, system, memory_mode)
    op_args.setdefault("weight_memory", arch.region_memory(_core.Region.Constants).name)
    op_args.setdefault("ifm_memory", arch.region_memory(_core.Region.Arena).name)
    op_args.setdefault("ofm_memory", arch.region_memory(_core.Region.Arena).name)
    op = npu_op(kind, ifm_shape, ofm_shape, accelerator=accelerator, **op_args)
    return cost_from_core(_core.estimate(op, arch))


# A pybind11 enum's `.name` costs more than the estimate itself: names by value, looked up.
_ACCUMULATOR_NAMES = {int(v): k for k, v in _core.ShramElement.__members__.items()}


def cost_from_core(r: "_core.CostRecord", described: Any = None) -> OpCost:
    """Convert the core's CostRecord into an :class:`OpCost` (`described`: the op it costs)."""
    # One call for every field: reading them one attribute at a time was most of this
    # conversion's time, which a compile runs thousands of times. The two records are filled
    # in directly: a frozen dataclass's `__init__` sets each field through
    # `object.__setattr__`, which took as long as the rest (they have no `__post_init__`, so
    # the objects are equal).
    total, npu, dma, access, read, write, macs, ofm, ifm, part_kernel_first, accumulator, slack = r.fields()
    block = _new(BlockChoice)
    block.__dict__.update(ofm_block=ofm, ifm_block=ifm, part_kernel_first=part_kernel_first,
                          accumulator=_ACCUMULATOR_NAMES[accumulator])
    cost = _new(OpCost)
    cost.__dict__.update(total_cycles=total, npu_cycles=npu, dma_cycles=dma, access_cycles=dict(zip(MEMORIES, access)),
                         read_bytes=dict(zip(MEMORIES, read)), write_bytes=dict(zip(MEMORIES, write)), macs=macs,
                         block_config=block, buffering_slack_cycles=slack, described=described, _evictions={})
    return cost


_new = object.__new__


def block_configs(kind: str, ifm_shape: Shape, ofm_shape: Shape, *, accelerator: Union[str, Accelerator] = "ethos-u55-128",
                  **op_args) -> list:
    """Every valid OFM block config (height, width, depth) for an op, in search order."""
    acc = Accelerator(accelerator)
    op = npu_op(kind, ifm_shape, ofm_shape, accelerator=acc, **op_args)
    return [
        (c.ofm_block.height, c.ofm_block.width, c.ofm_block.depth)
        for c in _core.enumerate_block_configs(acc._config, _core.block_query(op))
    ]
