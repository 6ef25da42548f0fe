"""The emit stage of a whole compile: an allocated schedule -> its flash image laid out and each
NPU segment's operation records and command words (`packaging.package_binary` then makes the
`.tflite`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .program import FlashImage, RecordTemplates, emit_segment
from .weights import write_all
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
    # The weight streams are written now, on every core (the schedule made only their sizes).
    write_all(sop.encoded for sop in sched.operations if sop.encoded is not None)
    first = 0  # the position of the segment's first operation in the whole schedule
    for seg in sched.segments:
        ops, words = emit_segment(seg, first, placement, flash, accelerator, templates)
        first += len(seg.operations)
        segments.append((seg, ops, words))
    return Emission(flash, segments)
