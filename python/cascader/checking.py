"""`cascader.check`: an Ethos-U binary simulated against the reference interpreter on its source.

The proof a compile owes: the simulator runs the binary (NPU command streams and the CPU
operators left in it) and the reference interpreter runs the original model on TFLite's
reference kernels, on the same random inputs; every output element must be equal.

A check always answers: bit-exact, not bit-exact (with the errors), or could not check (with
the reason); it does not raise on a model or a binary. A model with state (variable tensors,
resource variables) runs several steps per seed on one session and one reference interpreter,
so the state each step leaves is checked by the next. Where the reference cannot run the whole
model (a custom operator it does not know), each NPU subgraph is checked on its own against
the source operators it replaces (`cascader.npu_cuts`), and the result says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import numpy as np

from .errors import CascaderError, InvalidArgumentError, one_line
from .npu_cuts import NpuCut, npu_cuts
from .records import Records
from .reference import ModelLike, ReferenceInterpreter, random_inputs
from .sim import Session
from .sim.resource_variables import RESOURCE_OPERATORS
from .tflite import Model, load_model

STATEFUL_STEPS = 3  # inferences per seed for a model with state


@dataclass(frozen=True)
class OutputCheck:
    """One output over every seed and step: how far the binary is from the reference."""

    output: int
    name: str
    shape: tuple[int, ...]  # as the reference gives it
    dtype: str
    max_abs_error: float  # 0 means bit-exact
    mismatched: int  # elements that differ, summed over the seeds
    elements: int  # elements compared, summed over the seeds
    operator: int | None = None  # for a check by NPU subgraphs: the ethos-u operator giving it


@dataclass
class CheckResult:
    """Per-output errors of a binary against the reference; `bit_exact` is the verdict.

    `unchecked` holds why something could not be checked (empty when everything was);
    `scope` says what was compared: the whole model, or its NPU subgraphs one by one (`note`
    says why).
    """

    seeds: tuple[int, ...]
    outputs: Records  # of OutputCheck
    sim_seconds: float  # the fastest simulation over the seeds
    details: list[str] = field(default_factory=list)  # one line per (seed, output) that differs
    steps: int = 1  # inferences per seed, state carried from one to the next
    scope: str = "model"  # or "NPU subgraphs"
    note: str = ""
    unchecked: list[str] = field(default_factory=list)

    @property
    def checked(self) -> bool:
        """Everything was compared (there was something to compare and nothing was left out)."""
        return bool(self.outputs) and not self.unchecked

    @property
    def mismatched(self) -> bool:
        """Some compared element differs: a definite NOT bit-exact, whatever could not be checked."""
        return any(o.max_abs_error != 0 or o.mismatched != 0 for o in self.outputs)

    @property
    def bit_exact(self) -> bool:
        return self.checked and not self.mismatched

    @property
    def max_abs_error(self) -> float:
        return max((o.max_abs_error for o in self.outputs), default=0)

    @property
    def reason(self) -> str:
        """Why the check is incomplete, in one line ('' when it is complete)."""
        if self.unchecked:
            more = f" (and {len(self.unchecked) - 1} more)" if len(self.unchecked) > 1 else ""
            return self.unchecked[0] + more
        return "" if self.outputs else "nothing to compare"

    @property
    def verdict(self) -> str:
        """One line: bit-exact, NOT bit-exact, or could not check, and over what."""
        if self.mismatched:
            head = f"NOT bit-exact (max error {self.max_abs_error:g})"
        elif self.checked:
            head = "bit-exact"
        else:
            return f"could not check: {self.reason}"
        steps = f", {self.steps} steps each" if self.steps > 1 else ""
        scope = f"; {self.scope} checked one by one: {self.note}" if self.scope != "model" else ""
        partial = f"; could not check: {self.reason}" if self.unchecked else ""
        return f"{head} on seeds {list(self.seeds)}{steps}{scope}{partial}"

    def _columns(self) -> list[str]:
        names = ["output", "name", "shape", "dtype", "max_abs_error", "mismatched", "elements"]
        return names if self.scope == "model" else [*names, "operator"]

    def __str__(self) -> str:
        return f"{self.verdict}\n{self.outputs.table(self._columns())}" if self.outputs else self.verdict

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return f"<p>{self.verdict}</p>{self.outputs._repr_html_() if self.outputs else ''}"


class _Errors:
    """The running comparison of one output."""

    def __init__(self, name: str, operator: int | None = None) -> None:
        self.name, self.operator = name, operator
        self.shape: tuple[int, ...] | None = None
        self.dtype = ""
        self.error, self.bad, self.elements = 0.0, 0, 0

    def compare(self, got: np.ndarray, expected: np.ndarray, where: str, details: list[str]) -> None:
        if self.shape is None:
            self.shape, self.dtype = tuple(expected.shape), expected.dtype.name
        if got.shape != expected.shape or got.dtype != expected.dtype:
            self.error = float("inf")
            details.append(f"{where}: {got.dtype}{list(got.shape)} vs {expected.dtype}{list(expected.shape)}")
            return
        if got.dtype.kind in "iub":
            diff = np.abs(got.astype(np.int64) - expected.astype(np.int64))
        else:  # NaN where the reference has NaN is equal
            diff = np.where(np.isnan(got) & np.isnan(expected), 0, np.abs(got - expected))
        bad = int(np.count_nonzero(diff))
        self.error = max(self.error, float(np.max(diff)) if diff.size else 0.0)
        self.bad += bad
        self.elements += int(diff.size)
        if bad:
            details.append(f"{where}: {bad}/{diff.size} differ, max {np.max(diff)}")

    def row(self, output: int) -> OutputCheck:
        return OutputCheck(output, self.name, self.shape or (), self.dtype, self.error, self.bad, self.elements,
                           self.operator)


def _stateful(model: Model) -> bool:
    """The model keeps state between inferences: variable tensors or resource variables."""
    return any(t.is_variable for g in model.subgraphs for t in g.tensors) or any(
        op.opcode in RESOURCE_OPERATORS for g in model.subgraphs for op in g.operators)


def _step_inputs(model: Model, seed: int, step: int) -> list[np.ndarray]:
    """Step 0 of a seed takes `random_inputs(model, seed)`, as a one-step check always has."""
    return random_inputs(model, seed if step == 0 else [seed, step])


def _check_model(original: Model, compiled: Model, seeds: tuple[int, ...], steps: int,
                 result: CheckResult) -> None:
    """The whole binary against the whole source. Raises ReferenceUnusable when the reference
    cannot run the source."""
    sg = original.main
    stateful = _stateful(original)
    errors = [_Errors(sg.tensors[t].name) for t in sg.outputs]
    session = reference = None
    sim_seconds = float("inf")
    for seed in seeds:
        if reference is None or stateful:
            try:
                reference = ReferenceInterpreter(original)
            except CascaderError as e:
                raise _ReferenceUnusable(one_line(e)) from None
        if session is None:
            try:
                session = Session(compiled)
            except Exception as e:  # noqa: BLE001 - the check answers, whatever the binary
                result.unchecked.append(f"the simulator cannot load the binary: {one_line(e)}")
                return
        elif stateful:
            session.reset()
        for step in range(steps):
            inputs = _step_inputs(original, seed, step)
            try:
                expected = reference.run(inputs)
            except CascaderError as e:
                raise _ReferenceUnusable(one_line(e)) from None
            start = time.perf_counter()
            try:
                got = session.run(inputs)
            except Exception as e:  # noqa: BLE001
                result.unchecked.append(f"the simulator failed on seed {seed}: {one_line(e)}")
                return
            sim_seconds = min(sim_seconds, time.perf_counter() - start)
            where = f"seed {seed}" + (f" step {step}" if steps > 1 else "")
            for i, (g, e) in enumerate(zip(got, expected)):
                errors[i].compare(g, e, f"{where} output {i}", result.details)
    result.outputs = Records([e.row(i) for i, e in enumerate(errors)])
    result.sim_seconds = 0.0 if sim_seconds == float("inf") else sim_seconds


class _ReferenceUnusable(Exception):
    """The reference interpreter cannot run the whole source model (the message says why)."""


def _check_cut(cut: NpuCut, session: Session, seeds: tuple[int, ...], steps: int, result: CheckResult,
               rows: list[_Errors]) -> None:
    """One NPU subgraph against the source operators it replaces."""
    tensors = session.model.main.tensors
    stateful = _stateful(cut.source)
    errors = [_Errors(tensors[t].name, cut.operator) for t in cut.ofms]
    reference = None
    where_op = f"ethos-u operator {cut.operator}"
    for seed in seeds:
        try:
            if reference is None or stateful:
                reference = ReferenceInterpreter(cut.source)
        except CascaderError as e:
            result.unchecked.append(f"{where_op}: the reference cannot run its source operators: {one_line(e)}")
            return
        if stateful:
            session.reset()
        for step in range(steps):
            inputs = _step_inputs(cut.source, seed, step)
            try:
                expected = reference.run(inputs)
            except CascaderError as e:
                result.unchecked.append(f"{where_op}: the reference cannot run its source operators: {one_line(e)}")
                return
            values = {t: v.reshape(tensors[t].shape) for t, v in zip(cut.ifms, inputs)}
            try:
                session.run_operator(cut.operator, values)
            except Exception as e:  # noqa: BLE001
                result.unchecked.append(f"{where_op}: the simulator failed: {one_line(e)}")
                return
            where = f"seed {seed}" + (f" step {step}" if steps > 1 else "") + f" {where_op}"
            for i, (t, e) in enumerate(zip(cut.ofms, expected)):
                # The binary may hold an OFM in another shape of the same size (Vela's reshapes).
                got = values[t].reshape(e.shape) if values[t].size == e.size else values[t]
                errors[i].compare(got, e, f"{where} {tensors[t].name}", result.details)
    rows.extend(errors)


def _check_cuts(original: Model, compiled: Model, seeds: tuple[int, ...], steps: int, result: CheckResult) -> None:
    """Every NPU subgraph of the binary on its own."""
    result.scope = "NPU subgraphs"
    try:
        cuts = npu_cuts(original, compiled)
        session = Session(compiled)
    except Exception as e:  # noqa: BLE001
        result.unchecked.append(f"the NPU subgraphs cannot be cut out: {one_line(e)}")
        return
    if not cuts:
        result.unchecked.append("the binary has no NPU subgraph to check on its own")
        return
    rows: list[_Errors] = []
    start = time.perf_counter()
    for cut in cuts:
        if isinstance(cut, str):
            result.unchecked.append(cut)
        else:
            _check_cut(cut, session, seeds, steps, result, rows)
    result.sim_seconds = time.perf_counter() - start
    result.outputs = Records([e.row(i) for i, e in enumerate(rows)])


def check(source: ModelLike, binary: Union[ModelLike, Model, Any], seeds: Union[int, Sequence[int]] = 2,
          steps: int | None = None, by_npu_subgraph: bool = False) -> CheckResult:
    """Simulate `binary` (any Ethos-U .tflite, or a compile's result: anything whose `model` is
    one) and compare it with the reference interpreter running `source`.

    Parameters
    ----------
    seeds
        A count (seeds 0..n-1) or the seeds of `cascader.reference.random_inputs`.
    steps
        Inferences per seed, each on new inputs, on one simulator session and one reference
        interpreter (state carries from step to step). Default: 3 for a model with state
        (variable tensors, resource variables), else 1.
    by_npu_subgraph
        Check each NPU subgraph on its own even where the reference can run the whole model
        (it does so anyway where it cannot).

    Returns
    -------
    CheckResult
        Shape or type mismatches count as an infinite error. It never raises for a model or a
        binary: what cannot be checked is in `unchecked`, and `verdict` says it.
    """
    seeds = tuple(range(seeds)) if isinstance(seeds, int) else tuple(int(s) for s in seeds)
    result = CheckResult(seeds, Records([]), 0.0)
    try:
        original = source if isinstance(source, Model) else load_model(source)
        binary = getattr(binary, "model", binary)  # a CompiledModel holds its output as a Model
        compiled = binary if isinstance(binary, Model) else load_model(binary)
    except Exception as e:  # noqa: BLE001
        result.unchecked.append(f"cannot read the models: {one_line(e)}")
        return result
    result.steps = steps if steps is not None else (STATEFUL_STEPS if _stateful(original) else 1)
    if result.steps < 1:
        raise InvalidArgumentError(f"steps must be at least 1, got {steps}")
    try:
        if by_npu_subgraph:
            result.note = "asked for"
            _check_cuts(original, compiled, seeds, result.steps, result)
            return result
        try:
            _check_model(original, compiled, seeds, result.steps, result)
        except _ReferenceUnusable as e:
            result.details.clear()
            result.note = f"the reference cannot run the whole model ({e})"
            _check_cuts(original, compiled, seeds, result.steps, result)
    except Exception as e:  # noqa: BLE001 - e.g. random inputs for a type numpy has not
        result.unchecked.append(f"the check itself failed: {one_line(e)}")
    return result
