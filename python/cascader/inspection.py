"""`cascader.inspect`: what would run where, and what it costs, before scheduling anything.

Where each operator runs is the compile's own verdict: the partition after lowering
(`lowering.lower`), so an operator the rules accept but no NPU sequence expresses is listed on
the CPU with the lowering's reason, as the compiled binary leaves it."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from .arch import Accelerator
from .errors import CascaderError
from .frontend.liveness import activation_live_ranges, tensor_bytes
from .frontend.operator_view import OperatorView
from .frontend.partition import CPU, NPU, REMOVED, REMOVED_REASON, Segment
from .frontend.support import macs
from .lowering import final_partition
from .tflite import Model, load_model

ModelSource = Union[Model, str, os.PathLike, bytes]


def _compiled_calls(model: Model) -> dict[int, str]:
    """Why each `ethos-u` operator of an already compiled binary (cascader's or Vela's) is not
    partitioned again: it is an NPU call, for the accelerator its payload names. A payload
    that does not decode keeps the rules' verdict."""
    from .sim.binary import npu_calls

    try:
        calls = [(c.index, c.decode()) for c in npu_calls(model)]
    except CascaderError:
        return {}
    return {index: (f"already compiled: an NPU call of {len(stream.operations)} operations for "
                    f"{stream.config['accelerator']} (`cascader estimate` / `simulate` read it)")
            for index, stream in calls}


@dataclass(frozen=True)
class OperatorReport:
    index: int
    opcode: str
    target: str  # "NPU", "CPU", or REMOVED (`Partition.removed`: not run, not in the output)
    segment: int  # index into Inspection.segments (-1: removed)
    rule: str | None  # the rule that sent it to the CPU
    reason: str | None
    macs: int
    weight_bytes: int  # constant inputs: weights, bias, and other constants
    ifm_bytes: int  # non-constant inputs
    ofm_bytes: int
    ofm_shape: tuple[int, ...]

    @property
    def note(self) -> str:
        """The OFM shape on the NPU, else why it is not there."""
        if self.target != NPU:
            return self.reason or ""
        return "x".join(map(str, self.ofm_shape))


@dataclass
class Inspection:
    """The partition of a model with per-operator and per-model figures."""

    name: str
    operators: list[OperatorReport]  # in execution order
    segments: list[Segment]
    peak_activation_bytes: int  # peak of live feature maps, uncascaded, in execution order
    input_shapes: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    output_shapes: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)

    @property
    def npu_operators(self) -> int:
        return sum(r.target == NPU for r in self.operators)

    @property
    def cpu_operators(self) -> int:
        return sum(r.target == CPU for r in self.operators)

    @property
    def total_macs(self) -> int:  # of the operators that run
        return sum(r.macs for r in self.operators if r.target != REMOVED)

    @property
    def npu_macs(self) -> int:
        return sum(r.macs for r in self.operators if r.target == NPU)

    def table(self) -> str:
        """A fixed-width text table: one row per operator, then the totals."""
        header = f"{'#':>4} {'operator':<22} {'on':<7} {'seg':>3} {'MACs':>12} {'weights':>9} {'IFM B':>9} {'OFM B':>9}  OFM shape / CPU reason"
        lines = [f"{self.name}", header, "-" * len(header)]
        for r in self.operators:
            lines.append(
                f"{r.index:>4} {r.opcode[:22]:<22} {r.target:<7} {r.segment:>3} {r.macs:>12,} {r.weight_bytes:>9,} "
                f"{r.ifm_bytes:>9,} {r.ofm_bytes:>9,}  {r.note}"
            )
        lines.append("-" * len(header))
        npu_segments = sum(s.target == NPU for s in self.segments)
        lines.append(
            f"NPU operators {self.npu_operators} in {npu_segments} segment(s), CPU operators {self.cpu_operators}; "
            f"MACs {self.total_macs:,} ({self.npu_macs:,} on the NPU); "
            f"weights {sum(r.weight_bytes for r in self.operators):,} B; "
            f"peak live activations {self.peak_activation_bytes:,} B (uncascaded)"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{r.index}</td><td>{html.escape(r.opcode)}</td><td>{r.target}</td><td>{r.segment}</td>"
            f"<td>{r.macs:,}</td><td>{r.weight_bytes:,}</td><td>{r.ifm_bytes:,}</td><td>{r.ofm_bytes:,}</td>"
            f"<td>{html.escape(r.note)}</td></tr>"
            for r in self.operators
        )
        return (
            f"<p><b>{html.escape(self.name)}</b>: {self.npu_operators} NPU / {self.cpu_operators} CPU operators, "
            f"{self.total_macs:,} MACs, peak live activations {self.peak_activation_bytes:,} B</p>"
            "<table><tr><th>#</th><th>operator</th><th>on</th><th>seg</th><th>MACs</th><th>weights B</th>"
            f"<th>IFM B</th><th>OFM B</th><th>OFM shape / CPU reason</th></tr>{rows}</table>"
        )


def inspect(model: ModelSource, name: str | None = None,
            accelerator: Union[str, "Accelerator", None] = None) -> Inspection:
    """Partition `model` into NPU segments and CPU operators and report their costs.

    Parameters
    ----------
    model
        A `Model`, a path to a `.tflite` file, or its bytes.
    name
        Shown in the report; defaults to the file name.
    accelerator
        The target, e.g. ``"ethos-u85-256"``: where it matters (the Ethos-U85's emitter does not
        express every operation yet), the operators the binary compiled for it leaves to the CPU.
        None: the Ethos-U55/U65's partition.

    Raises
    ------
    InvalidArgumentError
        For an accelerator cascader does not know.
    """
    if name is None:
        name = Path(model).name if isinstance(model, (str, os.PathLike)) else "model"
    if accelerator is not None:
        accelerator = Accelerator(accelerator).name
    if not isinstance(model, Model):
        model = load_model(model)
    part = final_partition(model, accelerator)
    compiled_calls = _compiled_calls(model)
    graph = part.graph
    segment_of = {i: s for s, seg in enumerate(part.segments) for i in seg.operators}
    reports = []
    removed = set(part.removed)
    for index in [*part.order, *part.removed]:
        view = OperatorView(graph, index)
        verdict = part.verdicts[index]
        inputs = [t for t in view.inputs if t is not None]
        reports.append(
            OperatorReport(
                index=index,
                opcode=view.op.name,
                target=REMOVED if index in removed else NPU if verdict.npu else CPU,
                segment=segment_of.get(index, -1),
                rule=verdict.rule,
                reason=REMOVED_REASON if index in removed else compiled_calls.get(index, verdict.reason),
                macs=macs(view),
                weight_bytes=sum(tensor_bytes(t) for t in inputs if t.is_constant),
                ifm_bytes=sum(tensor_bytes(t) for t in inputs if not t.is_constant),
                ofm_bytes=sum(tensor_bytes(t) for t in view.outputs),
                ofm_shape=view.ofm.shape if view.ofm is not None else (),
            )
        )
    peak = activation_live_ranges(graph, part.order).peak_bytes()
    return Inspection(
        name=name if accelerator is None else f"{name} on {accelerator}",
        operators=reports,
        segments=part.segments,
        peak_activation_bytes=peak,
        input_shapes=[(graph.tensors[i].name, graph.tensors[i].shape) for i in graph.inputs],
        output_shapes=[(graph.tensors[i].name, graph.tensors[i].shape) for i in graph.outputs],
    )

