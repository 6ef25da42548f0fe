"""Allocation benchmarks: minimalloc's challenging instances and the shared models.

    python -m cascader.bench.allocation [--instances DIR] [--models DIR] [--generated N]

Table 1: each minimalloc CSV solved by the exact allocator at the capacity in its file name,
beside greedy best fit and TFLM's greedy first fit. Table 2: every model's uncascaded
activation live ranges (all feature maps in one arena, 16 B aligned sizes) by the exact
allocator, greedy best fit and TFLM's first fit, against the lower bound. Table 3 (with
--generated N): perfect packings of seeds 0..N-1 (`cascader.memory_instances`, 100-500
buffers, feasible at exactly 1 MiB) decided at their capacity: how many fit, and the
distribution of solve times.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from ..frontend.liveness import activation_live_ranges
from ..errors import BudgetError
from ..memory import allocate, check_allocation
from ..memory_instances import STYLES, perfect_packing
from ..tflite import load_model

ALIGN = 16


def read_instance(path: Path) -> tuple[np.ndarray, int]:
    """(rows of start, end, size) and the capacity from a minimalloc CSV `<name>.<capacity>.csv`."""
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
    return data[:, 1:4], int(path.name.split(".")[1])


def instances_table(folder: Path, time_limit: float = 10.0) -> list[dict]:
    rows = []
    print(f"{'instance':<10} {'n':>4} {'lower':>10} {'exact':>10} {'fits':>5} {'time s':>7} {'nodes':>8} "
          f"{'greedy-bf':>10} {'gap':>7} {'tflm-ff':>10} {'gap':>7}")
    for path in sorted(folder.glob("*.csv")):
        rows_, capacity = read_instance(path)
        bf = allocate(rows_, solver="greedy")
        ff = allocate(rows_, solver="first-fit")
        try:
            ex = allocate(rows_, capacity=capacity, minimise=False, time_limit=time_limit, node_limit=10**9)
        except BudgetError:
            print(f"{path.stem.split('.')[0]:<10} {len(rows_):>4} {bf.lower_bound:>10,}  NOT SOLVED within {time_limit:.0f} s "
                  f"{'':>14} {bf.height:>10,} {'':>7} {ff.height:>10,}")
            rows.append(dict(name=path.stem.split(".")[0], n=len(rows_), solved=False))
            continue
        check_allocation(rows_, ex.offsets)
        row = dict(name=path.stem.split(".")[0], n=len(rows_), lower=bf.lower_bound, exact=ex.height,
                   seconds=ex.seconds, nodes=ex.nodes, greedy=bf.height, tflm=ff.height, capacity=capacity)
        rows.append(row)
        print(f"{row['name']:<10} {row['n']:>4} {row['lower']:>10,} {ex.height:>10,} {'yes' if ex.height <= capacity else 'NO':>5} "
              f"{ex.seconds:>7.3f} {ex.nodes:>8,} {bf.height:>10,} {100 * (bf.height / ex.height - 1):>6.1f}% "
              f"{ff.height:>10,} {100 * (ff.height / ex.height - 1):>6.1f}%")
    return rows


def model_ranges(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Uncascaded activation ranges of a model's first subgraph, sizes rounded up to 16 B."""
    ranges = activation_live_ranges(load_model(path).subgraphs[0])
    size = (ranges.size + ALIGN - 1) // ALIGN * ALIGN
    return ranges.start, ranges.end, size


def models_table(folder: Path, time_limit: float = 0.5) -> list[dict]:
    rows = []
    print(f"{'model':<46} {'n':>4} {'lower':>10} {'exact':>10} {'gap':>6} {'opt':>4} {'time ms':>8} "
          f"{'greedy-bf':>10} {'tflm-ff':>10}")
    for path in sorted(folder.glob("*.tflite")):
        start, end, size = model_ranges(path)
        buffers = np.stack([start, end, size, np.full_like(size, ALIGN)], axis=1)
        ex = allocate(buffers, time_limit=time_limit)
        check_allocation(buffers, ex.offsets)
        bf = allocate(buffers, solver="greedy")
        ff = allocate(buffers, solver="first-fit")
        row = dict(name=path.stem, n=len(size), lower=ex.lower_bound, exact=ex.height, optimal=ex.optimal,
                   seconds=ex.seconds, greedy=bf.height, tflm=ff.height)
        rows.append(row)
        gap = 100 * (ex.height / ex.lower_bound - 1) if ex.lower_bound else 0.0
        print(f"{path.stem[:46]:<46} {len(size):>4} {ex.lower_bound:>10,} {ex.height:>10,} {gap:>5.2f}% "
              f"{'yes' if ex.optimal else 'no':>4} {1e3 * ex.seconds:>8.2f} {bf.height:>10,} {ff.height:>10,}")
    return rows


def generated_table(count: int, time_limit: float = 2.0) -> list[dict]:
    """Seeds 0..count-1 decided at their capacity; prints solved counts and time quantiles."""
    rows = []
    for seed in range(count):
        inst = perfect_packing(seed)
        try:
            fit = allocate(inst.rows, capacity=inst.capacity, minimise=False, time_limit=time_limit, node_limit=10**12)
        except BudgetError:
            rows.append(dict(seed=seed, style=inst.style, n=len(inst.rows), solved=False, seconds=time_limit))
            continue
        check_allocation(inst.rows, fit.offsets)
        rows.append(dict(seed=seed, style=inst.style, n=len(inst.rows), solved=fit.height <= inst.capacity,
                         seconds=fit.seconds))
    print(f"generated perfect packings, decided at capacity within {time_limit:g} s (unsolved count as the limit)")
    print(f"{'style':<8} {'count':>5} {'solved':>6} {'median s':>9} {'p90 s':>7} {'max s':>7}")
    for style in (*STYLES, "all"):
        group = [r for r in rows if style in ("all", r["style"])]
        if not group:
            continue
        seconds = np.array([r["seconds"] for r in group])
        print(f"{style:<8} {len(group):>5} {sum(r['solved'] for r in group):>6} {np.median(seconds):>9.3f} "
              f"{np.percentile(seconds, 90):>7.3f} {seconds.max():>7.3f}")
    unsolved = [r["seed"] for r in rows if not r["solved"]]
    if unsolved:
        print(f"unsolved seeds: {unsolved}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=Path, default=Path(__file__).resolve().parents[4] / "shared/allocation/minimalloc_challenging")
    parser.add_argument("--models", type=Path, default=Path(os.environ["CASCADER_MODELS"]) if "CASCADER_MODELS" in os.environ else None)
    parser.add_argument("--generated", type=int, default=0, metavar="N",
                        help="also decide N generated perfect packings (seeds 0..N-1)")
    args = parser.parse_args()
    if args.instances and args.instances.is_dir():
        instances_table(args.instances)
        print()
    if args.models and args.models.is_dir():
        models_table(args.models)
        print()
    if args.generated:
        generated_table(args.generated)


if __name__ == "__main__":
    main()
