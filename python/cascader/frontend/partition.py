"""Split a subgraph into maximal NPU segments and the CPU operators between them.

Each operator gets a *level*: the number of NPU/CPU changes on the longest path that reaches
it. Operators of the same kind and level form one group. A group is convex: a path that
leaves an NPU group through a CPU operator can only come back at a higher level, so no
segment ever waits on itself through the CPU. Every edge goes to an equal or higher level,
so sorting groups by level gives a valid execution order. O(V + E) after the rule checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from ..errors import ModelError
from ..tflite.model import Model, SubGraph
from .lower_resource_variables import variable_verdicts
from .operator_view import OperatorView
from .support import Verdict, check_operator

NPU, CPU = "NPU", "CPU"
# What reports say of an operator in `Partition.removed`.
REMOVED, REMOVED_REASON = "removed", "not run: no model output depends on its result"


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
    # NPU operators whose results nothing reads, directly or through other such operators (a
    # dead branch): in no segment, not run, and left out of the output model, as Vela does.
    removed: tuple[int, ...] = ()
    # Whether an NPU operator's lowering trades scratch SRAM for cycles, so that the model's
    # least-scratch lowering differs (`lowering.SCRATCH_TRADING_OPERATORS`); set by `lower`.
    trades_scratch: bool = False

    @property
    def order(self) -> list[int]:
        """Operator indices in execution order."""
        return [i for s in self.segments for i in s.operators]


def single_subgraph(model: Model) -> SubGraph:
    """The subgraph to compile. Control flow (WHILE, IF: subgraphs run as part of an inference)
    is not supported; an initialiser that CALL_ONCE runs (a converted model's resource
    variables get their first values so) is no part of the inference and stays on the CPU as
    it is, in the binary's other subgraphs."""
    main = model.subgraphs[0]
    called_once = {op.options.get("init_subgraph_index") for op in main.operators if op.opcode == "CALL_ONCE"}
    control = [i for i in range(1, len(model.subgraphs)) if i not in called_once]
    if control:
        raise ModelError(
            f"model has {len(model.subgraphs)} subgraphs (control flow such as WHILE or IF); "
            "cascader compiles single-subgraph models"
        )
    return main


def partition(model: Model, cpu: Mapping[int, Verdict] | None = None, u85: bool = False) -> Partition:
    """Partition subgraph 0 of `model` into NPU segments and CPU operators (`u85`: for the
    Ethos-U85, whose NPU runs operators the U55/U65's do not: `support.check_operator`).

    `cpu` overrides the rules for some operators (index -> the verdict sending it to the CPU):
    the compiler uses it for operators the rules accept but the lowering cannot express.
    """
    graph = single_subgraph(model)
    verdicts = [check_operator(OperatorView(graph, i), u85) for i in range(len(graph.operators))]
    if u85:  # a variable the arena cannot hold as TFLM would stays with TFLM's resource variables
        verdicts = variable_verdicts(model, verdicts, Verdict)
    for i, verdict in (cpu or {}).items():
        verdicts[i] = verdict
    # A segment of reshapes or requantizations alone (movenet's RESHAPEs between CPU operators)
    # runs on the NPU too, as one copy, as Vela 5.2 runs it. Keeping it on the CPU saves an NPU
    # launch where the copy is a few bytes, and was this partition's policy; it kept 3 more of
    # movenet's operators on the CPU than Vela, against the coverage target (#11).
    on_npu = [v.npu for v in verdicts]
    removed = _dead_npu_operators(graph, on_npu)
    return Partition(graph, verdicts, _segments(graph, on_npu, set(removed)), removed)


def _dead_npu_operators(graph: SubGraph, on_npu: list[bool]) -> tuple[int, ...]:
    """The NPU operators no model output depends on. CPU operators all stay (TFLM runs them),
    and so does everything they read. Left in, such an operator costs its cycles and its whole
    output buffer, and inside a cascade the planner (which runs a part for the rows its readers
    need) would count that buffer while the stripes drop the operator."""
    needed = set(graph.outputs)
    dead = []
    # TFLite stores operators in a valid execution order: readers come after their producers.
    for i in range(len(graph.operators) - 1, -1, -1):
        op = graph.operators[i]
        # An ASSIGN_VARIABLE gives no tensor: what it writes is read by the next inference.
        if on_npu[i] and op.opcode != "ASSIGN_VARIABLE" and not any(t in needed for t in op.outputs):
            dead.append(i)
            continue
        needed.update(op.inputs)
    return tuple(sorted(dead))


def _segments(graph: SubGraph, on_npu: list[bool], removed: Set[int] = frozenset()) -> list[Segment]:
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
        if i not in removed:
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
