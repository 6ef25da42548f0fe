"""Hard offset-allocation instances with a known optimum: perfect (guillotine) packings.

A capacity x time rectangle is cut recursively, each cut splitting one rectangle either in time
(two buffers of the same size, one after the other) or in address (two buffers that live over the
same steps, one on top of the other). Every piece becomes a buffer (start, end, size), so the
pieces pack exactly into the capacity: the instance is feasible at `capacity` by construction.
Some pieces are then dropped as holes (minimalloc's challenging set fills 64-98% of its
rectangle, F-H 57-66%), never one that lives at the protected step `witness_step`, which therefore stays full:
peak live bytes equal the capacity, so the capacity is also a lower bound and is the optimum.

The style follows minimalloc's challenging instances (A-K, 154-454 buffers, 1 MiB, sizes and
lifetimes in 1 KiB / 1/1024 units, strongly anti-correlated in log scale):
  - "skewed" (A-E, I-K): the piece to cut is drawn with little regard to its area, so a few large
    or long-lived buffers stay whole while others are cut into small ones: sizes from 1 KiB to
    over half the capacity, lifetimes from one step to the whole horizon;
  - "even" (F-H): the largest pieces are cut first, giving a grid-like family of similar
    buffers (a sixteenth of the capacity for a thirtieth of the time) with jittered edges.

    from cascader.memory_instances import perfect_packing
    inst = perfect_packing(seed=3, n=300)
    allocate(inst.rows, capacity=inst.capacity, minimise=False)   # fits exactly

Deterministic from the seed (numpy's PCG64); the buffers are shuffled so that input order says
nothing of the packing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .errors import InvalidArgumentError

Style = Literal["skewed", "even"]
STYLES: tuple[Style, ...] = ("skewed", "even")


@dataclass(frozen=True)
class PackingInstance:
    """A generated instance and the packing it was cut from.

    Attributes
    ----------
    rows : np.ndarray
        (n, 3) int64 rows of start, end, size: buffers live over [start, end).
    capacity : int
        Bytes; the packing fits exactly and peak live bytes equal it, so it is the optimum.
    offsets : np.ndarray
        int64 offset of each buffer in the construction's packing (a witness, not the only one).
    seed : int
    style : str
    """

    rows: np.ndarray
    capacity: int
    offsets: np.ndarray
    seed: int
    style: str


def perfect_packing(
    seed: int,
    n: int | None = None,
    *,
    style: Style | None = None,
    capacity: int = 1 << 20,
    horizon: int = 2048,
    granule: int = 1024,
    holes: float | None = None,
) -> PackingInstance:
    """Cut a `capacity` x `horizon` rectangle into `n` buffers; see the module docstring.

    Parameters
    ----------
    seed
        Everything random is drawn from it.
    n
        Buffers before holes are dropped; default drawn from 100..500.
    style
        "skewed" or "even"; default drawn from the seed (two skewed in three, like A-K).
    capacity, granule
        Sizes are multiples of `granule` bytes; `capacity` must be one too.
    horizon
        Time steps; lifetimes are whole steps.
    holes
        Fraction of buffers dropped (none living at the witness step); default drawn from
        0..0.12 ("skewed") or 0.15..0.35 ("even").
    """
    rng = np.random.default_rng(seed)
    if n is None:
        n = int(rng.integers(100, 501))
    if style is None:
        style = "even" if rng.random() < 1 / 3 else "skewed"
    if holes is None:  # A-E fill 89-98% of their rectangle, F-H 57-66%
        holes = float(rng.uniform(0.0, 0.12) if style == "skewed" else rng.uniform(0.15, 0.35))
    if style not in STYLES:
        raise InvalidArgumentError(f"style must be one of {STYLES}, not {style!r}")
    if capacity <= 0 or granule <= 0 or capacity % granule:
        raise InvalidArgumentError("capacity must be a positive multiple of granule")
    height = capacity // granule
    if n < 1 or n > height * horizon:
        raise InvalidArgumentError(f"n must be between 1 and {height * horizon} for this capacity and horizon")
    if not 0.0 <= holes < 1.0:
        raise InvalidArgumentError("holes must be in [0, 1)")

    # Rectangles as [t0, t1) x [a0, a1) in steps x granules, each with the chance that it is cut
    # in time rather than in address.
    rects: list[tuple[int, int, int, int, float]] = [(0, horizon, 0, height, 0.5)]
    # "skewed": weight ~ area^0.6 leaves some pieces uncut for long (the heavy tails); "even":
    # weight ~ area^3 always cuts one of the largest, so pieces stay alike.
    area_power = 3.0 if style == "even" else float(rng.uniform(0.5, 0.7))
    while len(rects) < n:
        t_len = np.array([r[1] - r[0] for r in rects], dtype=np.float64)
        a_len = np.array([r[3] - r[2] for r in rects], dtype=np.float64)
        cuttable = (t_len > 1) | (a_len > 1)
        if not cuttable.any():
            break
        weight = np.where(cuttable, (t_len * a_len) ** area_power, 0.0)
        i = int(rng.choice(len(rects), p=weight / weight.sum()))
        t0, t1, a0, a1, p_time = rects[i]
        if style == "even":
            # Across the longer side (relative to the whole): pieces keep the instance's aspect.
            t_rel, a_rel = (t1 - t0) / horizon, (a1 - a0) / height
            p_time = t_rel**2 / (t_rel**2 + a_rel**2)
        in_time = (a1 - a0 == 1) or (t1 - t0 > 1 and rng.random() < p_time)
        lo, hi = (t0, t1) if in_time else (a0, a1)
        if style == "even":  # near the middle: a jittered grid
            cut = min(max(lo + int(round((hi - lo) * rng.uniform(0.3, 0.7))), lo + 1), hi - 1)
        else:
            cut = int(rng.integers(lo + 1, hi))
        halves = [(t0, cut, a0, a1), (cut, t1, a0, a1)] if in_time else [(t0, t1, a0, cut), (t0, t1, cut, a1)]
        # "skewed": a piece mostly keeps its parent's direction and sometimes draws a new, usually
        # extreme one (Beta(0.5, 0.5)): subtrees cut mostly in time give large short-lived buffers,
        # those cut mostly in address small long-lived ones, hence A-E's anti-correlation.
        rects[i:i + 1] = [h + (float(rng.beta(0.5, 0.5)) if rng.random() < 0.2 else p_time,) for h in halves]

    arr = np.array([r[:4] for r in rects], dtype=np.int64)
    # Holes: never a piece live at the witness step, so that step stays exactly full.
    witness_step = int(rng.integers(0, horizon))
    droppable = np.flatnonzero(~((arr[:, 0] <= witness_step) & (witness_step < arr[:, 1])))
    n_drop = min(int(round(holes * len(arr))), len(droppable))
    keep = np.ones(len(arr), dtype=bool)
    keep[rng.choice(droppable, size=n_drop, replace=False)] = False
    arr = arr[keep][rng.permutation(int(keep.sum()))]

    rows = np.stack([arr[:, 0], arr[:, 1], (arr[:, 3] - arr[:, 2]) * granule], axis=1)
    return PackingInstance(rows=rows, capacity=capacity, offsets=arr[:, 2] * granule, seed=seed, style=style)
