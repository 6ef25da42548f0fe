"""Emission: a scheduled, laid-out NPU segment -> operation records, flash bytes, command words.

The records are exactly what `cascader.sim.decode` returns for a binary (the decoder's and the
encoder's one operation type), with every address resolved: feature maps from the memory
layout, weights and scales from the flash image built here. `encode_command_stream` turns them
into register commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..frontend.lower import FeatureMapView
from ..schedule import ScheduledOperation, SegmentSchedule
from ..tflite.ethos_u import REGION_FLASH, REGION_SCRATCH, REGION_SCRATCH_FAST
from .commands import encode_command_stream
from .weights import encode_weights

FLASH_ALIGNMENT = 16
ARENA_REGIONS = {"scratch": REGION_SCRATCH, "scratch_fast": REGION_SCRATCH_FAST}


@dataclass
class FlashImage:
    """The read-only bytes every `ethos-u` operator of a model addresses as region 0."""

    data: bytearray = field(default_factory=bytearray)
    constants: dict[int, int] = field(default_factory=dict)  # constant buffer -> address

    def append(self, blob: bytes) -> int:
        pad = -len(self.data) % FLASH_ALIGNMENT
        self.data.extend(b"\0" * pad)
        at = len(self.data)
        self.data.extend(blob)
        return at


@dataclass(frozen=True)
class Placement:
    """Where each feature-map buffer lives: (region, byte address in that region)."""

    address: dict[int, tuple[int, int]]


def _feature_map(view: FeatureMapView, placement: Placement, flash: FlashImage, constants: dict[int, bytes]) -> dict:
    if view.buffer in constants:
        if view.buffer not in flash.constants:
            flash.constants[view.buffer] = flash.append(constants[view.buffer])
        region, base = REGION_FLASH, flash.constants[view.buffer]
    else:
        region, base = placement.address[view.buffer]
    h, w, c = view.shape
    return dict(region=region, base=[base + view.offset, 0, 0, 0], shape=(h, w, c), tiles=(h, h, w),
                strides=tuple(view.strides), dtype=view.dtype, layout="NHWC", zero_point=view.zero_point)


def operation_record(sop: ScheduledOperation, placement: Placement, flash: FlashImage, constants: dict[int, bytes],
                     accelerator: str) -> dict[str, Any]:
    """The decoder-format record of one scheduled operation, weights encoded into `flash`."""
    lo = sop.lowered
    r = lo.registers
    record: dict[str, Any] = dict(
        kind=lo.kind,
        ifm=_feature_map(lo.ifm, placement, flash, constants),
        ofm=_feature_map(lo.ofm, placement, flash, constants),
        kernel=dict(r["kernel"], part_kernel_first=sop.part_kernel_first),
        padding=tuple(r.get("padding", (0, 0, 0, 0))),
        activation=dict(r["activation"]),
        rounding=r.get("rounding", "TFL"),
        ifm_rounding="TFL",
        global_scale=r.get("global_scale", True),
        ofm_scale=tuple(r.get("ofm_scale", (1, 0))),
        opa_scale=tuple(r.get("opa_scale", (0, 0))),
        opb_scale=r.get("opb_scale", 0),
        ifm_scale_mode=r.get("ifm_scale_mode", 0),
        ifm_upscale=0,
        acc_format=r.get("acc_format", 0),
        parallel_mode=0,
        block=tuple(sop.block),
        weights=dict(region=0, address=0, length=0),
        scales=dict(region=0, address=0, length=0),
    )
    if "sub_op" in r:
        record["sub_op"] = r["sub_op"]
    if lo.ifm2 is not None:
        record["ifm2"] = _feature_map(lo.ifm2, placement, flash, constants)
        record["ifm2_scalar"] = r.get("ifm2_scalar")
        record["broadcast"] = tuple(r.get("broadcast", (False, False, False)))
        record["reversed_operands"] = r.get("reversed_operands", False)
    if lo.weights is not None:
        v = lo.weights
        encoded = encode_weights(
            v.values, v.zero_points, v.bias, np.array([m for m, _ in v.scales], dtype=np.int64),
            np.array([s for _, s in v.scales], dtype=np.int64), depthwise=v.depthwise,
            part_kernel_first=sop.part_kernel_first, ofm_block_depth=sop.block[2],
            ifm_bits=8 * lo.ifm.element_size, dilation=tuple(r["kernel"]["dilation"]), accelerator=accelerator,
        )
        base = flash.append(encoded.data)
        streams = encoded.slices[0]
        for core, s in enumerate(streams):
            suffix = "" if core == 0 else str(core)
            record["weights" + suffix] = dict(region=REGION_FLASH, address=base + s.weight_offset, length=s.weight_length)
            record["scales" + suffix] = dict(region=REGION_FLASH, address=base + s.scale_offset, length=s.scale_length)
        record["parallel_mode"] = len(streams) - 1
    return record


def emit_segment(segment: SegmentSchedule, placement: Placement, flash: FlashImage, accelerator: str
                 ) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Operation records and the command stream (uint32 words, ending in STOP) of one segment."""
    records = [operation_record(s, placement, flash, segment.segment.constants, accelerator)
               for s in segment.operations]
    return records, encode_command_stream(records, accelerator=accelerator)
