"""The cascading planner against Vela 5.2's SRAM-versus-cycles points.

    python -m cascader.bench.plan [--models DIR] [--accelerator A] [--only SUBSTR]
    python -m cascader.bench.plan --stages [--compiled] [--models DIR] [--only SUBSTR] [--accelerator A]

`--stages`: where the time of a `cascader.plan(model, compiled=False)` call goes instead, stage
by stage (`planner.Stages`), for MobileNetV2-224 (issue #44's yardstick: the whole call within
50 ms) and the `--models` files whose names contain `--only`; each figure the median of
STAGE_RUNS calls, wall and CPU (`time.process_time`, every thread: on a host shared with other
work the CPU time is the steadier of the two). With `--compiled`, the whole compiled
`cascader.plan(model)` too (every frontier point a binary), median of COMPILED_RUNS.

Per model (the zoo networks, then every `.tflite` in `--models` / `$CASCADER_MODELS`), on one
accelerator with its default system and memory mode (Vela's: Shared_Sram on the U55, Dedicated_Sram on
the U65 and U85): the planning time ("plan ms", the whole
`cascader.plan` call; "planner", its part after the uncascaded schedule; each the best of
PLAN_RUNS calls, as `timeit` reports: a single call also times the host's other work and, for
the first model, the imports the planner makes on first use), the frontier's size,
its least SRAM (exactly laid out) and that point's cycles, the cycles with unlimited SRAM, the
floor (the least SRAM any schedule needs, `floor.floor`) and the operator where it is reached, and
Vela's points: `--optimise Size`, and `--optimise Performance` at arena cache sizes of 2x, 1x
and 0.7x its Size SRAM. Vela's cycles are its binaries through our estimator with every stripe
costed as it runs, which is what the planner predicts for ours (`estimate(stripes="as_run")`;
Vela's own figures cost a cascaded operation once over its whole OFM). "ratio" is our least SRAM over Vela's
Size SRAM and "/floor" over the floor (the target, #44: at most 0.7 of Vela's, or at most 1.1
of the floor where the floor itself is above 0.7 of Vela's); "Vela casc" counts the
cascades of Vela's Size schedule (its --verbose-schedule report); "dominated" counts Vela points
that some frontier point matches or beats in both SRAM and cycles.

On Dedicated_Sram (the U65's and U85's default) every feature map may live in DRAM: the
frontier's least points are the fastest proposals with feature maps moved there
(`planner.evicting_points`), down to none in SRAM, and the floor is 0 (no schedule needs any
SRAM; "/floor" is then nan). "in SRAM" is the least SRAM of the proposals that keep every feature
map but TFLM's in SRAM (`Frontier.resident`), and "cyc" its cycles: the frontier's least
before it offered DRAM.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from .. import zoo
from ..errors import CascaderError
from ..planner import plan
from ..sim import estimate
from ..vela import VelaConfig, compile_with_vela
from .compile import model_paths
from .simulate import vela_cascades

PLAN_RUNS = 3
STAGE_RUNS = 25
COMPILED_RUNS = 3


def stage_table(name: str, model, accelerator: str, compiled: bool) -> str:
    """The table of `--stages` for one model: stage, median wall ms, median CPU ms."""
    from .. import compiler
    from ..tflite import as_model

    m = as_model(model)
    plan(m, accelerator=accelerator)  # the imports and caches of a first call are not the model's
    runs, totals = [], []
    for _ in range(STAGE_RUNS):
        wall, cpu = time.perf_counter(), time.process_time()
        runs.append(plan(m, accelerator=accelerator).stages)
        totals.append((time.perf_counter() - wall, time.process_time() - cpu))
    rows = [(stage, [r[stage] for r in runs]) for stage in runs[0]]
    rows.append(("plan(compiled=False)", totals))
    if compiled:
        whole = []
        for _ in range(COMPILED_RUNS):
            wall, cpu = time.perf_counter(), time.process_time()
            points = len(compiler.plan(m, accelerator=accelerator).points)
            whole.append((time.perf_counter() - wall, time.process_time() - cpu))
        rows.append((f"plan(), {points} compiled points", whole))
    lines = [f"{name} on {accelerator}", f"{'stage':<34} {'wall ms':>9} {'CPU ms':>9}"]
    for stage, times in rows:
        lines.append(f"{stage:<34} {1000 * statistics.median(w for w, _ in times):>9.1f} "
                     f"{1000 * statistics.median(c for _, c in times):>9.1f}")
    return "\n".join(lines)


def vela_points(path: Path, accelerator: str) -> list[tuple[str, float, float]]:
    """(label, SRAM bytes, cycles on our estimator) of Vela's Size compile and of Performance
    compiles around its SRAM."""
    size = compile_with_vela(path, VelaConfig(accelerator, "Size"))
    points = [("Size", size.sram_bytes, estimate(size.path, stripes="as_run").total_cycles)]
    for factor in (2.0, 1.0, 0.7):
        cfg = VelaConfig(accelerator, "Performance", int(size.sram_bytes * factor))
        try:
            out = compile_with_vela(path, cfg)
        except CascaderError:
            continue
        points.append((f"Perf@{factor:g}x", out.sram_bytes, estimate(out.path, stripes="as_run").total_cycles))
    return points


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=os.environ.get("CASCADER_MODELS", ""), help="folder of .tflite models")
    parser.add_argument("--accelerator", default="ethos-u55-128")
    parser.add_argument("--only", default="", help="substring filter on model names")
    parser.add_argument("--stages", action="store_true", help="time plan()'s stages instead (see above)")
    parser.add_argument("--compiled", action="store_true", help="with --stages: the compiled plan() too")
    args = parser.parse_args(argv)
    if args.stages:
        models = [("zoo mobilenet_v2(alpha=1.0, resolution=224)", zoo.mobilenet_v2(alpha=1.0, resolution=224))]
        if args.models:
            models += [(p.stem, p) for p in sorted(Path(args.models).glob("*.tflite")) if args.only in p.stem]
        for name, model in models:
            print(stage_table(name, model, args.accelerator, args.compiled), end="\n\n", flush=True)
        return 0
    paths = model_paths(args.models, args.only)
    header = (f"{'model':<36} {'plan ms':>8} {'planner':>7} {'points':>6} {'floor':>10} {'min SRAM':>10} {'/floor':>6} "
              f"{'cycles':>11} {'in SRAM':>10} {'cyc':>11} {'unlim cyc':>11} {'Vela Size':>10} {'ratio':>6} "
              f"{'Vela casc':>9} {'dominated':>9}  "
              f"floor at; Vela points (SRAM/cycles)")
    print(header)
    print("-" * len(header))
    ratios, cascaded, met = [], [], 0
    for path in paths:
        try:
            runs = [plan(path, accelerator=args.accelerator) for _ in range(PLAN_RUNS)]
            frontier = runs[-1]
            seconds = min(f.seconds for f in runs)
            planner_seconds = min(f.planner_seconds for f in runs)
            vela = vela_points(path, args.accelerator)
            cascades = vela_cascades(path, VelaConfig(args.accelerator, "Size"))
        except CascaderError as e:
            print(f"{path.stem[:36]:<36} error: {e}")
            continue
        lo, hi = frontier.points[0], frontier.points[-1]
        resident = frontier.resident
        size_sram = vela[0][1]
        ratio = lo.sram_bytes / size_sram if size_sram else float("nan")
        ratios.append(ratio)
        above_floor = lo.sram_bytes / frontier.floor_bytes if frontier.floor_bytes else float("nan")
        met += ratio <= 0.7 or (frontier.floor_bytes > 0.7 * size_sram and above_floor <= 1.1)
        if cascades:
            cascaded.append(ratio)
        dominated = sum(any(p.sram_bytes <= s and p.cycles <= c for p in frontier.points) for _, s, c in vela)
        shown = " ".join(f"{label}:{s / 1024:.0f}K/{c / 1e3:.0f}k" for label, s, c in vela)
        print(f"{path.stem[:36]:<36} {seconds * 1000:>8.0f} {planner_seconds * 1000:>7.0f} {len(frontier.points):>6} "
              f"{frontier.floor_bytes:>10,} {lo.sram_bytes:>10,} {above_floor:>6.2f} {lo.cycles:>11,.0f} "
              f"{resident.sram_bytes:>10,} {resident.cycles:>11,.0f} {hi.cycles:>11,.0f} "
              f"{size_sram:>10,.0f} {ratio:>6.2f} {cascades:>9} {dominated:>4}/{len(vela):<4}"
              f"  {frontier.floor_operator}; {shown}", flush=True)
    if ratios:
        print()
        print(f"least SRAM / Vela Size SRAM: at most 0.7 on {sum(r <= 0.7 for r in ratios)}/{len(ratios)} models; "
              f"worst {max(ratios):.2f}; at most 0.7, or 1.1x a floor above 0.7 of Vela's, on {met}/{len(ratios)}")
        if cascaded:
            print(f"  on the {len(cascaded)} models Vela cascades: at most 0.7 on {sum(r <= 0.7 for r in cascaded)}; "
                  f"worst {max(cascaded):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
