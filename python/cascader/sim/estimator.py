"""`cascader.estimate`: cycles of an Ethos-U binary (Vela's or ours) on the shared cycle model.

Every `ethos-u` operator's command stream is decoded and each NPU operation is costed by the
C++ cycle model (``src/cascader/sim/estimator.hpp`` maps decoded operations to the model's
``NpuOp``; the block config, stream lengths and DMAs come from the binary). This is the
yardstick on which Vela's output and ours are compared.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Dict, List, Tuple, Union

from .. import _core
from ..arch import MEMORIES, Accelerator, MemoryMode, SystemConfig, arch_config
from ..errors import BinaryError, InvalidArgumentError
from .binary import npu_calls
from .simulate import BinaryLike, _as_model

_KINDS = {
    "Conv2D": "conv2d",
    "DepthwiseConv2D": "depthwise_conv2d",
    "MaxPool": "max_pool",
    "AvgPool": "avg_pool",
    "Add": "add",
    "Sub": "sub",
    "Mul": "mul",
    "Minimum": "minimum",
    "Maximum": "maximum",
    "FullyConnected": "fully_connected",
    "Dma": "dma",
    "ReduceSum": "reduce_sum",
}


@dataclass(frozen=True)
class OperationCycles:
    """The estimate of one NPU operation of a command stream."""

    call: int  # index of the `ethos-u` operator in the subgraph
    operation: int  # index of the operation in the decoded stream
    merged: Tuple[int, ...]  # further operations costed in this row (Vela's 1x1 pieces, depth slices)
    word_offset: int  # of its NPU_OP_* command
    # the cycle model's op kind (conv2d, depthwise_conv2d, ..., dma), or matmul: a matrix product
    # as Vela runs it, a MUL and a REDUCE_SUM per column, costed as one operation
    kind: str
    ofm_shape: Tuple[int, int, int, int]  # a matmul's: the product's, one channel per column
    cycles: float  # max(NPU cycles, each memory's access cycles)
    npu_cycles: int
    dma_cycles: int  # the folded weight / LUT DMAs, or the copy itself for a dma row
    block: Tuple[int, int, int]  # OFM block (height, width, depth) used
    block_from_binary: bool  # False: the binary's block does not fit our SHRAM model, re-chosen
    dmas: Tuple[int, ...]  # decoded indices of the DMA operations costed with this one
    macs: int = 0
    access_cycles: Dict[str, float] = field(default_factory=dict)  # per memory, as Vela's per-layer report

    def __repr__(self) -> str:
        # One line, not the generated dump of all 14 fields: a list of these must stay readable.
        return f"OperationCycles({self._brief()})"

    def _brief(self) -> str:
        """Where it is, what it computes and what it costs, in one line."""
        block = "" if self.kind == "dma" else f", block {'x'.join(map(str, self.block))}"
        return (f"call {self.call} op {self.operation}: {self.kind} {'x'.join(map(str, self.ofm_shape))}, "
                f"{self.cycles:,.0f} cycles (NPU {self.npu_cycles:,}, DMA {self.dma_cycles:,}), "
                f"{self.macs:,} MACs{block}")


# How many of the costliest operations an Estimate's repr lists (`operations` has them all).
_REPR_HEAVIEST = 3


@dataclass
class Estimate:
    """Cycles per operation, per NPU call and in total, and bytes per memory."""

    accelerator: str
    system: str
    memory_mode: str
    operations: List[OperationCycles]
    call_cycles: Dict[int, float]  # `ethos-u` operator index -> cycles
    total_cycles: float
    read_bytes: Dict[str, float] = field(default_factory=dict)
    write_bytes: Dict[str, float] = field(default_factory=dict)

    @property
    def npu_cycles(self) -> int:
        return sum(o.npu_cycles for o in self.operations)

    @property
    def macs(self) -> int:
        return sum(o.macs for o in self.operations)

    @property
    def access_cycles(self) -> Dict[str, float]:
        """Per memory that is used, the cycles its accesses take summed over the operations (Vela's
        "SRAM Access cycles" and so on); each operation's cycles are the max of these and its NPU cycles."""
        total = {m: sum(o.access_cycles.get(m, 0.0) for o in self.operations) for m in MEMORIES}
        return {m: c for m, c in total.items() if c > 0}

    @property
    def bytes_per_memory(self) -> Dict[str, float]:
        """Bytes read plus written, per memory that is used."""
        return {m: self.read_bytes.get(m, 0.0) + self.write_bytes.get(m, 0.0) for m in MEMORIES
                if self.read_bytes.get(m, 0.0) + self.write_bytes.get(m, 0.0) > 0}

    def _headline(self) -> str:
        """The target and the totals, in one line."""
        return (f"{self.accelerator}, {self.system}, {self.memory_mode}: {self.total_cycles:,.0f} cycles, "
                f"{self.npu_cycles:,} NPU cycles, {self.macs:,} MACs, {len(self.operations)} operations in "
                f"{len(self.call_cycles)} NPU call(s)")

    def _traffic(self) -> str:
        return ", ".join(f"{m} {b / 1024:,.1f} KiB" for m, b in self.bytes_per_memory.items()) or "no traffic"

    def __repr__(self) -> str:
        # A few lines instead of the generated dump of every operation (hundreds of rows on a
        # real network): the totals, the traffic and where most of the time goes.
        heaviest = sorted(self.operations, key=lambda o: o.cycles, reverse=True)[:_REPR_HEAVIEST]
        lines = [f"Estimate: {self._headline()}", f"  traffic: {self._traffic()}"]
        if heaviest:
            lines.append("  costliest operations (share of the total cycles):")
            lines += [f"    {o.cycles / max(self.total_cycles, 1.0):6.1%}  {o._brief()}" for o in heaviest]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = f"<p>{html.escape(self._headline())}; traffic: {html.escape(self._traffic())}</p>"
        rows = "".join(
            f"<tr><td>{o.call}</td><td>{o.operation}</td><td>{o.kind}</td><td>{'x'.join(map(str, o.ofm_shape))}</td>"
            f"<td>{'x'.join(map(str, o.block))}{'' if o.block_from_binary else '*'}</td>"
            f"<td>{o.npu_cycles:,}</td><td>{o.dma_cycles:,}</td><td>{o.cycles:,.0f}</td></tr>"
            for o in self.operations
        )
        return (head + "<table><tr><th>call</th><th>op</th><th>kind</th><th>OFM</th><th>block</th><th>NPU</th>"
                "<th>DMA</th><th>cycles</th></tr>" + rows + "</table>")


def _target(binary: BinaryLike, system, memory_mode, accelerator, subgraph: int) -> tuple:
    """The binary's `ethos-u` calls, the accelerator (by default the one the first payload
    names) and the target's configuration."""
    calls = npu_calls(_as_model(binary), subgraph)
    if not calls:
        raise BinaryError("the model has no `ethos-u` operator: compile it for the NPU first (Vela or cascader)")
    if accelerator is None:
        # The payload's config alone (decoding every operation into dicts costs an Ethos-U85
        # MobileNetV2-224 binary 8 ms, ten times the estimate itself).
        accelerator = _core.split_driver_payload(calls[0].payload)[0]["accelerator"]
    acc = Accelerator(accelerator)
    return calls, acc, arch_config(acc, system, memory_mode)


def total_cycles(binary: BinaryLike, system: Union[str, SystemConfig, None] = None,
                 memory_mode: Union[str, MemoryMode, None] = None, accelerator: Union[str, Accelerator, None] = None,
                 subgraph: int = 0) -> float:
    """`estimate(...).total_cycles` (stripes merged, as Vela counts them) without the per-operation
    rows: for a caller that compares binaries by their totals."""
    calls, _, arch = _target(binary, system, memory_mode, accelerator, subgraph)
    return payload_cycles([c.payload for c in calls], arch)


def payload_cycles(payloads: list[bytes], arch) -> float:
    """`total_cycles` of the `ethos-u` operators whose driver payloads these are."""
    return sum(float(_core.estimate_driver_payload(p, arch, merge_as_vela=True, operations=False)["total_cycles"])
               for p in payloads)


def check_stripes(stripes: str) -> None:
    """`estimate`'s `stripes` is one it knows (InvalidArgumentError if not)."""
    if stripes not in ("merged", "as_run"):
        raise InvalidArgumentError(f"stripes must be 'merged' or 'as_run', not {stripes!r}")


def estimate(
    binary: BinaryLike,
    system: Union[str, SystemConfig, None] = None,
    memory_mode: Union[str, MemoryMode, None] = None,
    accelerator: Union[str, Accelerator, None] = None,
    subgraph: int = 0,
    stripes: str = "merged",
) -> Estimate:
    """Estimate the cycles of an Ethos-U binary with the shared cycle model.

    Parameters
    ----------
    binary
        A path, the bytes of a `.tflite`, a :class:`~cascader.Model` or a CompiledModel.
    system, memory_mode
        The target system (a preset name or :class:`~cascader.SystemConfig`) and memory mode;
        the defaults are Vela's (U55: High_End_Embedded / Shared_Sram, U65: Client_Server /
        Dedicated_Sram).
    accelerator
        Defaults to the one the driver payload's config names.
    subgraph
        The subgraph whose `ethos-u` operators are estimated.
    stripes
        How an operator run as several NPU operations is costed: the stripes of a cascaded
        operation (one weight stream read in place by several operations) and a run of
        identical 1x1 pieces (a transpose). "merged": once, over the whole OFM, as Vela's own
        figures cost them (the yardstick for comparisons with Vela's printed numbers).
        "as_run": each operation as the NPU runs it, with its own blocks, weight fetches and
        overheads (what cascader's schedule and planner predict; small stripes and pieces
        cost more than "merged" says).

    Returns
    -------
    Estimate

    Raises
    ------
    BinaryError
        A malformed payload or command stream, or an operation the model cannot cost; the
        message names the word offset. Also when the binary has no `ethos-u` operator.
    """
    check_stripes(stripes)
    calls, acc, arch = _target(binary, system, memory_mode, accelerator, subgraph)
    rows: List[OperationCycles] = []
    per_call: Dict[int, float] = {}
    read = dict.fromkeys(MEMORIES, 0.0)
    write = dict.fromkeys(MEMORIES, 0.0)
    for call in calls:
        r = _core.estimate_driver_payload(call.payload, arch, merge_as_vela=stripes == "merged")
        per_call[call.index] = float(r["total_cycles"])
        for m, rb, wb in zip(MEMORIES, r["read_bytes"], r["write_bytes"]):
            read[m] += rb
            write[m] += wb
        for row in r["operations"]:
            op, cost, columns = row["op"], row["cost"], row["matmul_columns"]
            b = cost.block_config.ofm_block
            s = row["matmul_sum"].ofm.shape if columns else op.ofm.shape
            rows.append(OperationCycles(
                call=call.index, operation=row["operation"], merged=tuple(row["merged"]), word_offset=row["word_offset"],
                kind="matmul" if columns else _KINDS[op.type.name], ofm_shape=(s.n, s.h, s.w, columns or s.c),
                cycles=float(cost.total_cycles),
                npu_cycles=int(cost.npu_cycles), dma_cycles=int(cost.dma_cycles),
                block=(b.height, b.width, b.depth) if op.type.name != "Dma" else (0, 0, 0),
                block_from_binary=bool(row["block_config_from_binary"]), dmas=tuple(row["dmas"]),
                macs=int(cost.macs), access_cycles=dict(zip(MEMORIES, map(float, cost.access_cycles))),
            ))
    return Estimate(acc.name, arch.system.name, arch.memory_mode.name, rows, per_call, sum(per_call.values()), read, write)
