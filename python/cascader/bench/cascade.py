"""Cascaded binaries under hard SRAM budgets, against Vela 5.2's Size mode.

    python -m cascader.bench.cascade [--models DIR] [--accelerators a,b] [--only SUBSTR]

Per model (the zoo networks, then every `.tflite` in `--models` / `$CASCADER_MODELS`) and per
accelerator, at four budgets: unlimited, Vela's `--optimise Size` SRAM, 0.7x that, and the least
SRAM of our frontier. Each compile is checked: bit-exact against the reference interpreter
(2 seeds), SRAM laid out within the budget, and its cycles on our estimator beside the
planner's prediction. At Vela's Size SRAM the ratio of our binary's cycles to Vela's Size
binary's (both on our estimator, Vela's accounting) is printed, and for a cascaded compile the
planner's predicted cycles over the estimator's with every stripe costed as it runs
("plan 1.000x, as run ...": Vela's accounting costs a cascaded operation once over its whole
OFM, which small stripes do not achieve). A 1 KiB budget must raise InfeasibleError with
a minimum, except with Dedicated_Sram (the U65's and U85's default), where the SRAM is a cache and
every feature map may live in DRAM. The compile time of the least-SRAM compile (planning included; the best of three
compiles, as `bench.compile` and `bench.plan` time theirs: the machine is shared) is the last column.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from ..compiler import compile as compile_model
from ..errors import CascaderError, InfeasibleError
from ..planner import plan
from ..sim import estimate
from ..tflite import load_model
from ..vela import VelaConfig, compile_with_vela
from .compile import model_parser, model_paths
from .simulate import validate

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")


def _row(path: Path, accelerator: str, label: str, budget: int | None, predictions: list[float],
         timed: int = 1) -> tuple[str, float | None, float, int | None]:
    """One budget's cell: the compile, checked. `timed`: how many compiles are timed (the best
    is kept); the first is the one checked."""
    start = time.perf_counter()
    try:
        compiled = compile_model(path, sram=budget, accelerator=accelerator)
    except InfeasibleError as e:
        return f"{label:>9}: infeasible (min {e.minimum_sram:,})", None, time.perf_counter() - start, None
    seconds = time.perf_counter() - start
    for _ in range(timed - 1):
        start = time.perf_counter()
        compile_model(path, sram=budget, accelerator=accelerator)
        seconds = min(seconds, time.perf_counter() - start)
    exact = validate(path, compiled.model, (0, 1)).bit_exact
    cycles = compiled.estimate().total_cycles  # cached: the summary below reuses it
    fits = budget is None or compiled.sram_bytes <= budget
    text = (f"{label:>9}: {compiled.sram_bytes / 1024:7.1f}K {'fits' if fits else 'OVER'} "
            f"{'exact' if exact else 'NOT-EXACT'} {cycles / 1e3:8.0f}k cyc")
    if any(op.cascade is not None for op in compiled.schedule.operations):
        # The planner's cost of the schedule compiled, against the binary with every stripe
        # costed as it runs: how well the planner predicts (a developer's figure, not a headline).
        as_run = compiled.estimate(stripes="as_run").total_cycles
        predictions.append(compiled.schedule.total_cycles / as_run)
        text += f" (plan {compiled.schedule.total_cycles / as_run:.3f}x, as run {as_run / 1e3:.0f}k)"
    return text, cycles, seconds, compiled.summary().cpu_operators


def main(argv: list[str] | None = None) -> int:
    args = model_parser(__doc__, ACCELERATORS).parse_args(argv)
    ratios, alike, predictions = [], [], []
    per_accelerator: dict[str, list[float]] = {}  # the bar is per accelerator
    for path in model_paths(args.models, args.only):
        for acc in args.accelerators.split(","):
            try:
                frontier = plan(path, accelerator=acc)
                vela = compile_with_vela(path, VelaConfig(acc, "Size"))
            except CascaderError as e:
                print(f"{path.stem[:32]:<32} {acc:<14} error: {e}")
                continue
            vela_cycles = estimate(vela.path).total_cycles
            vela_cpu_ops = sum(op.name != "ethos-u" for op in load_model(vela.path).main.operators)
            budgets = [("unlimited", None), ("vela-size", int(vela.sram_bytes)), ("0.7x", int(0.7 * vela.sram_bytes)),
                       ("least", frontier.points[0].sram_bytes)]
            cells, least_seconds = [], 0.0
            for label, budget in budgets:
                text, cycles, seconds, cpu_ops = _row(path, acc, label, budget, predictions,
                                                      timed=3 if label == "least" else 1)
                cells.append(text)
                if label == "vela-size" and cycles:
                    ratios.append(cycles / vela_cycles)
                    per_accelerator.setdefault(acc, []).append(cycles / vela_cycles)
                    cells[-1] += f" ({cycles / vela_cycles:.2f}x Vela"
                    # Cycles count NPU work only: compare like with like.
                    if cpu_ops == vela_cpu_ops:
                        alike.append(cycles / vela_cycles)
                        cells[-1] += ")"
                    else:
                        cells[-1] += f", CPU operators {cpu_ops} vs Vela's {vela_cpu_ops})"
                if label == "least":
                    least_seconds = seconds
            try:
                tiny_compile = compile_model(path, sram=1024, accelerator=acc)
                # With Dedicated_Sram the SRAM is a cache: feature maps may all live in DRAM.
                tiny = ("1K: fits (DRAM)" if tiny_compile.memory_mode == "Dedicated_Sram"
                        else f"1K: fits in {tiny_compile.sram_bytes} B" if tiny_compile.sram_bytes <= 1024 else "1K: OVER")
            except InfeasibleError as e:
                tiny = "1K: infeasible" if e.minimum_sram else "1K: no minimum"
            print(f"{path.stem[:32]:<32} {acc:<14} " + " | ".join(cells) + f" | {tiny} | {least_seconds:.2f}s", flush=True)
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"\nat Vela's Size SRAM, our cycles / Vela Size cycles: geometric mean {geomean:.3f}, "
              f"worst {max(ratios):.3f}, {sum(r <= 1.0 for r in ratios)}/{len(ratios)} no slower")
        for acc, some in per_accelerator.items():
            print(f"  {acc}: geometric mean {math.exp(sum(math.log(r) for r in some) / len(some)):.3f}, "
                  f"worst {max(some):.3f}, {sum(r <= 1.0 for r in some)}/{len(some)} no slower")
        if alike:
            print(f"  where both leave the same operators to the CPU: geometric mean "
                  f"{math.exp(sum(math.log(r) for r in alike) / len(alike)):.3f}, worst {max(alike):.3f}, "
                  f"{sum(r <= 1.0 for r in alike)}/{len(alike)} no slower")
    if predictions:
        within = sum(abs(p - 1) <= 0.05 for p in predictions)
        print(f"planner's cycles / estimator's (stripes as run) on the cascaded binary: {within}/{len(predictions)} within 5%, "
              f"range {min(predictions):.3f}..{max(predictions):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
