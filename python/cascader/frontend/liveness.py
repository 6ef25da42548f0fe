"""Activation live ranges of a subgraph run operator by operator (no cascading).

Step i is the i-th operator in execution order. A tensor is live from the step that produces
it (step 0 for subgraph inputs) up to and including its last consumer, or to the end for
subgraph outputs. Constant tensors are not activations and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _core
from ..tflite.model import SubGraph, Tensor


@dataclass(frozen=True)
class ActivationRanges:
    """Parallel arrays: tensor index, half-open live interval [start, end) in steps, bytes."""

    tensor: np.ndarray
    start: np.ndarray
    end: np.ndarray
    size: np.ndarray

    def peak_bytes(self) -> int:
        """Peak of live activation bytes: the lower bound of any single-arena allocation."""
        return int(_core.peak_live_bytes(self.start, self.end, self.size))


def activation_live_ranges(graph: SubGraph, order: list[int] | None = None) -> ActivationRanges:
    """Live ranges of every non-constant tensor when the operators run in `order`.

    `order` is a list of operator indices (default: the subgraph's own order, which TFLite
    guarantees to be topological).
    """
    order = list(range(len(graph.operators))) if order is None else order
    n_steps = len(order)
    first: dict[int, int] = {i: 0 for i in graph.inputs}
    last: dict[int, int] = {}
    for step, op_index in enumerate(order):
        op = graph.operators[op_index]
        for t in op.inputs:
            if t >= 0 and not graph.tensors[t].is_constant:
                first.setdefault(t, step)
                last[t] = step
        for t in op.outputs:
            first.setdefault(t, step)
            last[t] = max(last.get(t, step), step)
    for t in graph.outputs:
        last[t] = n_steps - 1 if n_steps else 0
    tensors = sorted(first)
    start = np.array([first[t] for t in tensors], dtype=np.int64)
    end = np.array([last.get(t, first[t]) + 1 for t in tensors], dtype=np.int64)
    size = np.array([tensor_bytes(graph.tensors[t]) for t in tensors], dtype=np.int64)
    return ActivationRanges(np.array(tensors, dtype=np.int64), start, end, size)


def tensor_bytes(t: Tensor) -> int:
    """Bytes of a tensor; 0 for types with no fixed size (strings, resources)."""
    try:
        return t.nbytes
    except TypeError:
        return 0
