"""Our memory planner on a real scheduler's output: Vela's binaries, relocated.

For each model and Vela configuration: derive the schedule of Vela's command stream
(`cascader.sim.relocate.stream_schedule`), allocate every arena with our exact allocator,
rewrite the stream's addresses to the new offsets, re-package the model with the new arena
sizes and IFM/OFM offsets, and simulate it against Vela's binary on three random input sets.
The table gives Vela's scratch / scratch_fast sizes, ours, the lower bound (peak live bytes of
the derived live ranges), the exact solver's time and whether the outputs are bit-exact.

    python -m cascader.bench.relocate [--models DIR] [--only SUBSTRING] [--no-zoo]
"""

from __future__ import annotations

import argparse
import glob
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import CascaderError
from ..reference import random_inputs
from ..sim import simulate
from ..sim.relocate import (RelocationPlan, StreamSchedule, plan, relocated_command_streams, relocated_offsets,
                            stream_schedule)
from ..tflite import Model, load_model, save_model
from ..sim.binary import arena_sizes
from ..tflite.ethos_u import REGION_SCRATCH, REGION_SCRATCH_FAST, ArenaSizes
from ..vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela
from .package import repackage

CONFIGS = [
    VelaConfig("ethos-u55-128", "Performance", UNLIMITED_SRAM),
    VelaConfig("ethos-u55-128", "Size"),
    VelaConfig("ethos-u65-256", "Size"),
]


def relocated_model(original: Model, vela: Model, ss: StreamSchedule, p: RelocationPlan) -> Model:
    """Vela's binary with every arena buffer at the offset `p` gives it, packaged into `original`."""
    streams = relocated_command_streams(ss, p.new_address)
    fast = p.sizes.get(REGION_SCRATCH_FAST, 0) if ss.memory_of_region[REGION_SCRATCH_FAST] == REGION_SCRATCH_FAST else 0
    arenas = ArenaSizes(p.sizes.get(REGION_SCRATCH, 0), fast)
    return repackage(original, vela, command_streams=streams, arenas=arenas,
                     arena_offsets=relocated_offsets(ss, p.new_address))


def same_outputs(a: Model, b: Model, inputs: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(simulate(a, inputs), simulate(b, inputs)))


@dataclass
class Row:
    model: str
    config: str
    vela_scratch: int = 0
    vela_fast: int = 0
    scratch: int = 0
    fast: int = 0
    bound_scratch: int = 0
    bound_fast: int = 0
    buffers: int = 0
    steps: int = 0
    solver_ms: float = 0.0
    optimal: bool = False
    bit_exact: bool | None = None
    note: str = ""


def relocate_row(name: str, original: Model, vela: Model, config: str, seeds=(0, 1, 2), time_limit: float = 2.0) -> Row:
    row = Row(name, config)
    sizes = arena_sizes(vela)
    row.vela_scratch, row.vela_fast = sizes.scratch, sizes.scratch_fast
    try:
        ss = stream_schedule(vela)
        p = plan(ss, time_limit=time_limit)
        ours = relocated_model(original, vela, ss, p)
    except CascaderError as e:
        row.note = f"{type(e).__name__}: {e}"[:110]
        return row
    fast_region = ss.memory_of_region[REGION_SCRATCH_FAST] == REGION_SCRATCH_FAST
    row.scratch, row.bound_scratch = p.sizes.get(REGION_SCRATCH, 0), p.lower_bounds.get(REGION_SCRATCH, 0)
    if fast_region:
        row.fast, row.bound_fast = p.sizes.get(REGION_SCRATCH_FAST, 0), p.lower_bounds.get(REGION_SCRATCH_FAST, 0)
    row.buffers, row.steps = len(ss.schedule.buffers), len(ss.schedule.steps)
    row.solver_ms = 1e3 * p.seconds
    row.optimal = all(a.optimal for a in p.allocations.values())
    row.bit_exact = all(same_outputs(vela, ours, random_inputs(original, s)) for s in seeds)
    return row


def format_table(rows: list[Row]) -> str:
    head = (f"{'model':28} {'config':44} {'vela scr':>9} {'vela fast':>9} {'ours scr':>9} "
            f"{'ours fast':>9} {'bound scr':>9} {'bound fst':>9} {'bufs':>5} {'steps':>5} {'exact ms':>8} {'opt':3} "
            f"{'bit-exact':9} note")
    lines = [head, "-" * len(head)]
    for r in rows:
        exact = "-" if r.bit_exact is None else ("yes" if r.bit_exact else "NO")
        lines.append(f"{r.model[:28]:28} {r.config[:44]:44} {r.vela_scratch:>9,} {r.vela_fast:>9,} {r.scratch:>9,} "
                     f"{r.fast:>9,} {r.bound_scratch:>9,} {r.bound_fast:>9,} {r.buffers:>5} {r.steps:>5} "
                     f"{r.solver_ms:>8.1f} {'yes' if r.optimal else 'no':3} {exact:9} {r.note}")
    return "\n".join(lines)


def _model_paths(models: str, only: str, zoo_models: bool, workdir: str) -> list[tuple[str, str]]:
    out = []
    if zoo_models:
        from .. import zoo

        for name in zoo.MODELS:
            if only in name:
                path = os.path.join(workdir, f"zoo_{name}.tflite")
                save_model(zoo.get(name), path)
                out.append((f"zoo_{name}", path))
    if models:
        out += [(Path(p).stem, p) for p in sorted(glob.glob(os.path.join(models, "*.tflite"))) if only in Path(p).stem]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=os.environ.get("CASCADER_MODELS", ""), help="folder of .tflite models")
    parser.add_argument("--only", default="", help="substring filter on model names")
    parser.add_argument("--no-zoo", action="store_true", help="skip the zoo networks")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as workdir:
        for name, path in _model_paths(args.models, args.only, not args.no_zoo, workdir):
            for config in CONFIGS:
                start = time.perf_counter()
                try:
                    vela = load_model(compile_with_vela(path, config).path)
                except CascaderError as e:
                    rows.append(Row(name, config.label, note=str(e).splitlines()[0][:110]))
                else:
                    rows.append(relocate_row(name, load_model(path), vela, config.label))
                print(format_table(rows[-1:]).splitlines()[-1] + f"  ({time.perf_counter() - start:.1f} s)", flush=True)
    print()
    print(format_table(rows))
    done = [r for r in rows if r.bit_exact is not None]
    print(f"\n{sum(1 for r in done if r.bit_exact)}/{len(done)} relocated binaries bit-exact against Vela's; "
          f"{sum(1 for r in done if r.scratch + r.fast < r.vela_scratch + r.vela_fast)} smaller than Vela's arenas, "
          f"{sum(1 for r in done if r.scratch + r.fast > r.vela_scratch + r.vela_fast)} larger; "
          f"{len(rows) - len(done)} not relocated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
