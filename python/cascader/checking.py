"""`cascader.check`: an Ethos-U binary simulated against the reference interpreter on its source.

The proof a compile owes: the simulator runs the binary (NPU command streams and the CPU
operators left in it) and the reference interpreter runs the original model on TFLite's
reference kernels, on the same random inputs; every output element must be equal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import numpy as np

from .records import Records
from .reference import ModelLike, ReferenceInterpreter, random_inputs
from .sim import simulate
from .tflite import Model, load_model


@dataclass(frozen=True)
class OutputCheck:
    """One output over every seed: how far the binary is from the reference."""

    output: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    max_abs_error: float  # 0 means bit-exact
    mismatched: int  # elements that differ, summed over the seeds
    elements: int  # elements compared, summed over the seeds


@dataclass
class CheckResult:
    """Per-output errors of a binary against the reference; `bit_exact` is the verdict."""

    seeds: tuple[int, ...]
    outputs: Records  # of OutputCheck
    sim_seconds: float  # the fastest simulation over the seeds
    details: list[str] = field(default_factory=list)  # one line per (seed, output) that differs

    @property
    def bit_exact(self) -> bool:
        return all(o.max_abs_error == 0 and o.mismatched == 0 for o in self.outputs)

    @property
    def max_abs_error(self) -> float:
        return max((o.max_abs_error for o in self.outputs), default=0)

    def __str__(self) -> str:
        verdict = "bit-exact" if self.bit_exact else f"NOT bit-exact (max error {self.max_abs_error:g})"
        return f"{verdict} on seeds {list(self.seeds)}\n{self.outputs.table()}"

    __repr__ = __str__

    def _repr_html_(self) -> str:
        verdict = "bit-exact" if self.bit_exact else f"<b>NOT bit-exact</b> (max error {self.max_abs_error:g})"
        return f"<p>{verdict} on seeds {list(self.seeds)}</p>{self.outputs._repr_html_()}"


def check(source: ModelLike, binary: Union[ModelLike, Model, Any],
          seeds: Union[int, Sequence[int]] = 2) -> CheckResult:
    """Simulate `binary` (any Ethos-U .tflite, or a compile's result: anything whose `model` is
    one) and compare it with the reference interpreter running `source`.

    `seeds`: a count (seeds 0..n-1) or the seeds of `cascader.reference.random_inputs`.
    Shape or type mismatches count as an infinite error.
    """
    seeds = tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)
    original = source if isinstance(source, Model) else load_model(source)
    binary = getattr(binary, "model", binary)  # a CompiledModel holds its output as a Model
    compiled = binary if isinstance(binary, Model) else load_model(binary)
    reference = ReferenceInterpreter(original)
    sg = original.main
    worst: dict[int, list] = {}
    details: list[str] = []
    sim_seconds = float("inf")
    for seed in seeds:
        inputs = random_inputs(original, seed)
        expected = reference.run(inputs)
        start = time.perf_counter()
        got = simulate(compiled, inputs)
        sim_seconds = min(sim_seconds, time.perf_counter() - start)
        for i, (g, e) in enumerate(zip(got, expected)):
            w = worst.setdefault(i, [0.0, 0, 0])
            if g.shape != e.shape or g.dtype != e.dtype:
                w[0] = float("inf")
                details.append(f"seed {seed} output {i}: {g.dtype}{list(g.shape)} vs {e.dtype}{list(e.shape)}")
                continue
            diff = np.abs(g.astype(np.int64) - e.astype(np.int64)) if g.dtype.kind in "iu" else np.abs(g - e)
            bad = int(np.count_nonzero(diff))
            w[0] = max(w[0], float(np.max(diff)) if diff.size else 0.0)
            w[1] += bad
            w[2] += int(diff.size)
            if bad:
                details.append(f"seed {seed} output {i}: {bad}/{diff.size} differ, max {np.max(diff)}")
    rows = []
    for i, (error, bad, elements) in sorted(worst.items()):
        t = sg.tensors[sg.outputs[i]]
        rows.append(OutputCheck(i, t.name, tuple(t.shape), t.numpy_dtype.name, error, bad, elements))
    return CheckResult(seeds, Records(rows), 0.0 if sim_seconds == float("inf") else sim_seconds, details)
