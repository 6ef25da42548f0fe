"""Split a subgraph into maximal NPU segments and the CPU operators between them.

Each operator gets a *level*: the number of NPU/CPU changes on the longest path that reaches
it. Operators of the same kind and level form one group. A group is convex: a path that
leaves an NPU group through a CPU operator can only come back at a higher level, so no
segment ever waits on itself through the CPU. Every edge goes to an equal or higher level,
so sorting groups by level gives a valid execution order. O(V + E) after the rule checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ModelError
from ..tflite.model import Model, SubGraph
from .operator_view import OperatorView
from .support import Verdict, check_operator

NPU, CPU = "NPU", "CPU"


@dataclass(frozen=True)
class Segment:
    """Operators (subgraph indices, in execution order) that run together on one target."""

    target: str
    operators: tuple[int, ...]


@dataclass
class Partition:
    graph: SubGraph
    verdicts: list[Verdict]  # one per operator, after policy
    segments: list[Segment]  # in execution order

    @property
    def order(self) -> list[int]:
        """Operator indices in execution order."""
        return [i for s in self.segments for i in s.operators]


def single_subgraph(model: Model) -> SubGraph:
    """The subgraph to compile; control flow (several subgraphs) is not supported."""
    if len(model.subgraphs) != 1:
        raise ModelError(
            f"model has {len(model.subgraphs)} subgraphs (control flow such as WHILE or IF); "
            "cascader compiles single-subgraph models"
        )
    return model.subgraphs[0]


def partition(model: Model, cpu: Mapping[int, Verdict] | None = None) -> Partition:
    """Partition subgraph 0 of `model` into NPU segments and CPU operators.

    `cpu` overrides the rules for some operators (index -> the verdict sending it to the CPU):
    the compiler uses it for operators the rules accept but the lowering cannot express.
    """
    graph = single_subgraph(model)
    verdicts = [check_operator(OperatorView(graph, i)) for i in range(len(graph.operators))]
    for i, verdict in (cpu or {}).items():
        verdicts[i] = verdict
    # A segment of reshapes or requantizations alone (movenet's RESHAPEs between CPU operators)
    # runs on the NPU too, as one copy, as Vela 5.2 runs it. Keeping it on the CPU saves an NPU
    # launch where the copy is a few bytes, and was this partition's policy; it kept 3 more of
    # movenet's operators on the CPU than Vela, against the coverage target (#11).
    return Partition(graph, verdicts, _segments(graph, [v.npu for v in verdicts]))


def _segments(graph: SubGraph, on_npu: list[bool]) -> list[Segment]:
    producer: dict[int, int] = {}
    for i, op in enumerate(graph.operators):
        for t in op.outputs:
            producer[t] = i
    level = [0] * len(graph.operators)
    # TFLite stores operators in a valid execution order, so producers come first.
    for i, op in enumerate(graph.operators):
        for t in op.inputs:
            p = producer.get(t)
            if p is not None and p < i:
                level[i] = max(level[i], level[p] + (on_npu[p] != on_npu[i]))
    groups: dict[tuple[int, bool], list[int]] = {}
    for i in range(len(graph.operators)):
        groups.setdefault((level[i], on_npu[i]), []).append(i)
    segments: list[Segment] = []
    for (_, npu), ops in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[1][0])):
        if npu and segments and segments[-1].target == NPU:
            # Two NPU groups with no CPU operator between them (one reads only what a CPU
            # operator before the other does not write) run as one segment: one ethos-u
            # operator, and the planner's cascades, which cannot cross a segment, see no edge.
            segments[-1] = Segment(NPU, segments[-1].operators + tuple(ops))
        elif npu:
            segments.append(Segment(NPU, tuple(ops)))
        else:  # the CPU runs operators one by one; each is its own segment
            segments.extend(Segment(CPU, (i,)) for i in ops)
    return segments
