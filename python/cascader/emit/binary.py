"""The emit and package stages of a whole compile: an allocated schedule -> its flash image and
command streams (`emit`), then the `.tflite` with one `ethos-u` operator per NPU segment
(`package_binary`, over `tflite.ethos_u.package`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..tflite import Model
from ..tflite.ethos_u import ArenaSizes, NpuSubgraph, package
from .program import FlashImage, RecordTemplates, emit_segment
from ..schedule import SegmentSchedule


class Emission(NamedTuple):
    """An allocated schedule emitted: its flash image laid out, and each NPU segment with its
    operation records and command words, in order."""

    flash: FlashImage
    segments: list[tuple[SegmentSchedule, list[dict], np.ndarray]]


def emit(allocated: tuple, accelerator: str, templates: RecordTemplates | None = None) -> Emission:
    """`allocated` emitted. `templates`: shared by the emissions of one compile (its candidate
    schedules share their lowered operations)."""
    sched, _, placement, _ = allocated
    flash, segments = FlashImage(), []
    templates = templates or RecordTemplates()
    first = 0  # the position of the segment's first operation in the whole schedule
    for seg in sched.segments:
        ops, words = emit_segment(seg, first, placement, flash, accelerator, templates)
        first += len(seg.operations)
        segments.append((seg, ops, words))
    return Emission(flash, segments)


def package_binary(m: Model, allocated: tuple, accelerator: str, templates: RecordTemplates | None = None,
          emission: Emission | None = None, removed: tuple[int, ...] = ()) -> tuple[Model, bytes, list[list[dict]]]:
    """The packaged binary of an allocated schedule: the output model, its flash image and the
    emitted operation records per `ethos-u` operator. `emission`: `emit(allocated, ...)`,
    when the caller has it (a compile that ranked its candidates on their command streams).
    `removed`: the partition's operators left out (`Partition.removed`)."""
    sched, result, placement, offsets = allocated
    flash, segments = emission or emit(allocated, accelerator, templates)
    subgraphs, records = [], []
    for seg, ops, words in segments:
        records.append(ops)
        subgraphs.append(NpuSubgraph(seg.segment.operators, words))
    data = flash.data
    # Nothing on the NPU (every operator's verdict is CPU): the model runs on TFLM as it is.
    out = m if not subgraphs else package(m, subgraphs, data, ArenaSizes.from_layout(result), offsets,
                                          accelerator=accelerator, description="cascader Optimised", order=sched.order,
                                          removed=removed)
    return out, data, records
