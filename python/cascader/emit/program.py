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

from .. import _core
from ..arch import Accelerator
from ..errors import CascaderError
from ..frontend.lowered import ELEMENT_SIZE, FeatureMapView
from ..input_staging import staged_key
from ..schedule import (ScheduledOperation, SegmentSchedule, constant_key, copied_constants, second_slot_key,
                        weights_key)
from ..tflite.ethos_u import REGION_FLASH, REGION_PERSISTENT, REGION_SCRATCH, REGION_SCRATCH_FAST
from . import ethos_u85
from .commands import encode_command_stream

FLASH_ALIGNMENT = 16
REGION_SHRAM = 0x103  # a DMA destination in the NPU's internal SHRAM (where LUTs live)
LUT_AREA_BYTES = 2048  # the LUT slots are the last 2 KiB of each core's SHRAM
ARENA_REGIONS = {"scratch": REGION_SCRATCH, "scratch_fast": REGION_SCRATCH_FAST, "persistent": REGION_PERSISTENT}


@dataclass
class FlashImage:
    """The read-only bytes every `ethos-u` operator of a model addresses as region 0.

    `append` lays a blob out and keeps it as it is; `data` copies the blobs into one image when
    read. A compile ranks candidate schedules by their command streams, and so lays out the
    flash of each: copying megabytes of weights into an image would be wasted on all but the
    one it keeps."""

    constants: dict[bytes, int] = field(default_factory=dict)  # constant feature-map bytes -> address
    size: int = 0
    blobs: list[tuple[int, bytes]] = field(default_factory=list)  # (address, bytes), in order

    def append(self, blob: bytes) -> int:
        at = self.size + -self.size % FLASH_ALIGNMENT
        self.blobs.append((at, blob))
        self.size = at + len(blob)
        return at

    @property
    def data(self) -> bytes:
        """The image: each blob at its address, zeros between them."""
        parts, end = [], 0
        for at, blob in self.blobs:
            parts += (bytes(at - end), blob)
            end = at + len(blob)
        return b"".join(parts)  # one copy of megabytes, not two (each touches fresh pages)


@dataclass(frozen=True)
class Placement:
    """Where each feature-map buffer lives: (region, byte address in that region)."""

    address: dict[int, tuple[int, int]]


def _feature_map(view: FeatureMapView, placement: Placement, flash: FlashImage, constants: dict[int, bytes],
                 operand: bool = False, copies: dict[int, tuple[int, int]] | None = None) -> dict:
    """The decoder's feature-map record. An operand (IFM, IFM2) has no height and width
    registers: the NPU derives them from the OFM and the kernel, and the tiles bound them.
    `copies`: constant buffers read from a copy in the arena, at (region, address)."""
    if copies and view.buffer in copies:
        region, base = copies[view.buffer]
    elif view.buffer in constants:
        # Keyed by content: equal constants are stored once, and segments' constant ids (local
        # to each segment) cannot collide.
        blob = constants[view.buffer]
        if blob not in flash.constants:
            flash.constants[blob] = flash.append(blob)
        region, base = REGION_FLASH, flash.constants[blob]
    else:
        region, base = placement.address[view.buffer]
    h, w, c = view.shape
    bases, tiles = [base + view.offset, 0, 0, 0], (h, h, w)
    if view.wrap_rows:
        start = view.offset // view.strides[0]
        if start + h > view.wrap_rows:  # the rows past the buffer's end continue at its start
            top = view.wrap_rows - start
            # The second tile starts at the buffer's first row, in the view's first column.
            column = base + view.offset % view.strides[0]
            bases, tiles = [base + view.offset, base + view.offset, column, column], (top, top, w)
    # A literal, not dict(...): a compile makes thousands of these, for every candidate it ranks.
    return {"region": region, "base": bases, "shape": (1, 1, c) if operand else (h, w, c), "tiles": tiles,
            "strides": tuple(view.strides), "dtype": view.dtype, "layout": view.layout, "zero_point": view.zero_point}


class RecordTemplates:
    """The record fields the stripes of each lowered operation share (`_record_template`),
    made once per operation for as long as the caller keeps this: a compile that emits several
    candidate schedules of the same lowered operations passes one to each emission. Keyed by
    the operation object (held with its template, so that its id names no other)."""

    def __init__(self) -> None:
        self._made: dict[tuple[int, bool], tuple[Any, dict[str, Any]]] = {}

    def of(self, sop: ScheduledOperation) -> dict[str, Any]:
        op = sop.stripe_of or sop.lowered
        key = (id(op), sop.part_kernel_first)
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = (op, _record_template(sop))
        return made[1]


def operation_record(sop: ScheduledOperation, placement: Placement, flash: FlashImage, constants: dict[int, bytes],
                     weights_at: tuple[int, int], copies: dict[int, tuple[int, int]] | None = None,
                     templates: RecordTemplates | None = None) -> dict[str, Any]:
    """The decoder-format record of one scheduled operation; its weight streams are at
    `weights_at` (region, address), the constants in `copies` at theirs. `templates`: the
    fields every stripe of an operation shares, made once per operation."""
    lo = sop.lowered
    if lo.kind == "dma":  # the Ethos-U85's gathers and scatters: registers of the DMA's own
        index = None if lo.ifm2 is None else _feature_map(lo.ifm2, placement, flash, constants, copies=copies)
        return ethos_u85.dma_record(lo, _feature_map(lo.ifm, placement, flash, constants, copies=copies),
                                    _feature_map(lo.ofm, placement, flash, constants), index)
    r = lo.registers
    record = dict(templates.of(sop) if templates is not None else _record_template(sop))
    # The stripes of an operation differ in their feature maps, padding, block and, for an
    # average pool, the OFM scale that goes with the padding (quantization.average_pool_scale).
    record["ifm"] = _feature_map(lo.ifm, placement, flash, constants, operand=True, copies=copies)
    record["ofm"] = _feature_map(lo.ofm, placement, flash, constants)
    record["padding"] = tuple(r.get("padding", (0, 0, 0, 0)))
    record["ofm_scale"] = tuple(r.get("ofm_scale", (1, 0)))
    record["block"] = tuple(sop.block)
    if lo.ifm2 is not None:
        record["ifm2"] = _feature_map(lo.ifm2, placement, flash, constants, operand=True, copies=copies)
    if sop.encoded is not None:
        record.update(_weight_ranges(sop, weights_at))
    return record


def _record_template(sop: ScheduledOperation) -> dict[str, Any]:
    """The record fields an operation's stripes share (its registers; the padding and the OFM
    scale are set again per stripe: see operation_record)."""
    r = sop.lowered.registers
    template: dict[str, Any] = dict(
        kind=sop.lowered.kind,
        kernel=dict(r["kernel"], part_kernel_first=sop.part_kernel_first),
        activation=r["activation"],
        rounding=r.get("rounding", "TFL"),
        ifm_rounding="TFL",
        global_scale=r.get("global_scale", True),
        ofm_scale=tuple(r.get("ofm_scale", (1, 0))),
        # The operand scales only exist for elementwise operations; elsewhere the decoder
        # reports the type's defaults, and so does this record.
        opa_scale=tuple(r.get("opa_scale", (1, 0))),
        opb_scale=r.get("opb_scale", 1),
        ifm_scale_mode=r.get("ifm_scale_mode", 0),
        ifm_upscale=r.get("ifm_upscale", 0),
        acc_format=r.get("acc_format", 0),
        parallel_mode=0,
        weights=dict(region=0, address=0, length=0),
        scales=dict(region=0, address=0, length=0),
    )
    if "sub_op" in r:
        template["sub_op"] = r["sub_op"]
    if sop.lowered.ifm2 is not None:
        template["ifm2_scalar"] = r.get("ifm2_scalar")
        template["broadcast"] = tuple(r.get("broadcast", (False, False, False)))
        template["reversed_operands"] = r.get("reversed_operands", False)
    return template


def _weight_ranges(sop: ScheduledOperation, at: tuple[int, int], s: int = 0) -> dict[str, Any]:
    """WEIGHT/SCALE (and the second core's WEIGHT1/SCALE1) ranges of depth slice `s`'s streams,
    with the encoded data's byte 0 at `at` (region, address)."""
    region, base = at
    streams = sop.encoded.slices[s]
    if sop.encoded.u85:
        return ethos_u85.weight_ranges(streams, region, base)
    out: dict[str, Any] = {"parallel_mode": len(streams) - 1}
    for core, s in enumerate(streams):
        suffix = "" if core == 0 else str(core)
        out["weights" + suffix] = {"region": region, "address": base + s.weight_offset, "length": s.weight_length}
        out["scales" + suffix] = {"region": region, "address": base + s.scale_offset, "length": s.scale_length}
    return out


def _channel_slice(fm: dict[str, Any], start: int, depth: int) -> dict[str, Any]:
    """A feature-map record narrowed to channels [start, start + depth)."""
    y, x, c = fm["strides"]
    es = ELEMENT_SIZE[fm["dtype"]]
    shift = (start // 16) * c + (start % 16) * es if fm["layout"] == "NHCWB16" else start * es
    h, w, _ = fm["shape"]
    return dict(fm, base=[b + shift if i == 0 else b for i, b in enumerate(fm["base"])], shape=(h, w, depth))


def _depth_slices(sop: ScheduledOperation, first_slot: tuple[int, int], second_slot: tuple[int, int] | None,
                  placement: Placement, flash: FlashImage, constants: dict[int, bytes]) -> list[dict[str, Any]]:
    """A weight double-buffered operation: per depth slice, the DMA of its streams into one of
    the two slots (even slices the first, odd the second; None: the slot after the first; all
    the first with `single_slot`), then the operation on its OFM channels (a depthwise slice
    reads its own IFM channels too). The encoder makes each slice wait for its DMA, and each
    DMA for the kernel still reading the slot it overwrites."""
    src = flash.append(bytes(sop.encoded.data))
    slot = (sop.encoded.largest_span + 15) // 16 * 16
    slots = (first_slot, first_slot if sop.single_slot else second_slot or (first_slot[0], first_slot[1] + slot))
    whole = operation_record(sop, placement, flash, constants, (REGION_FLASH, 0))
    out: list[dict[str, Any]] = []
    for s in range(len(sop.encoded.slices)):
        start, end = sop.encoded.span(s)
        region, half = slots[s % 2]
        out.append(dict(kind="dma", src=dict(region=REGION_FLASH, address=src + start, length=end - start),
                        dst=dict(region=region, address=half, length=end - start)))
        first_channel = s * sop.depth_step
        depth = min(sop.depth_step, sop.lowered.ofm.shape[2] - first_channel)
        record = dict(whole, ofm=_channel_slice(whole["ofm"], first_channel, depth))
        if sop.lowered.kind == "depthwise":
            record["ifm"] = _channel_slice(whole["ifm"], first_channel, depth)
        record.update(_weight_ranges(sop, (region, half - start), s))
        out.append(record)
    return out


def _for_target(records: list[dict[str, Any]], sop: ScheduledOperation, npu: Accelerator,
                table_at: int) -> list[dict[str, Any]]:
    """`sop`'s records in the terms of `npu`'s registers: the lowering's are the U55/U65's
    (`table_at`: where its table is in the U85's LUT RAM)."""
    if npu.product != ethos_u85.PRODUCT:
        return records
    whole = sop.stripe_of or sop.lowered
    return [r if r["kind"] == "dma" else ethos_u85.record(r, whole, sop.part_kernel_first, npu.name, sop.chain, table_at)
            for r in records]


def _chain_length(operations: list[ScheduledOperation], k: int) -> int:
    """How many operations from `operations[k]` on run as one chain (1: it runs on its own)."""
    n = 1
    while "ofm" in dict(operations[k + n - 1].chain) and k + n < len(operations):
        n += 1
    return n


def _table_loads(operations: list[ScheduledOperation], npu: Accelerator) -> list[tuple[list[tuple[bytes, int]], int]]:
    """Per operation: the tables to copy into the LUT memory before it (each with the byte it
    goes to) and where the table it reads is.

    A table stays valid only from one operation reading a table to the next: every operation
    without one may use the whole SHRAM for its buffers on the U55/U65, where the table goes to
    the LUT slot at the SHRAM's end. On the U85 a table goes to the LUT RAM's first byte, and
    the tables of a chain each to bytes of their own (`ethos_u85.table_offsets`), all copied in
    before its first operation: its operations run block by block together, so a table loaded
    after the first would be loaded under it (Vela 5.2 loads a group's tables so too)."""
    u85 = npu.product == ethos_u85.PRODUCT
    slot = ethos_u85.LUT_ADDRESS if u85 else npu.shram_banks * npu.shram_bank_bytes - LUT_AREA_BYTES
    lut = (lambda sop: ethos_u85.lut(sop.lowered)) if u85 else (lambda sop: sop.lowered.lut)
    plan: list[tuple[list[tuple[bytes, int]], int]] = []
    resident: dict[int, bytes] = {}  # byte -> the valid table there
    k = 0
    while k < len(operations):
        group = operations[k:k + (_chain_length(operations, k) if u85 else 1)]
        tables = [t for t in map(lut, group) if t is not None]
        offsets = ethos_u85.table_offsets(tables) if u85 else {t: slot for t in tables}
        if offsets is None:
            raise CascaderError("internal error: a chain's tables do not fit in the LUT RAM together")
        loads = [(t, at) for t, at in offsets.items() if resident.get(at) != t]
        resident = {at: t for t, at in offsets.items()}
        for i, sop in enumerate(group):
            table = lut(sop)
            plan.append((loads if i == 0 else [], slot if table is None else offsets[table]))
        k += len(group)
    return plan


def emit_segment(segment: SegmentSchedule, first: int, placement: Placement, flash: FlashImage, accelerator: str,
                 templates: RecordTemplates | None = None) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Operation records and the command stream (uint32 words, ending in STOP) of one segment.

    `first` is the position of the segment's first operation in the whole schedule (weight
    buffers are keyed by it). A buffered operation is preceded by the DMA that copies its
    streams from flash into its buffer; the encoder makes the operation wait for it.
    """
    records: list[dict[str, Any]] = []
    npu = Accelerator(accelerator)
    stored: dict[int, int] = {}  # id of an operation's encoded weights -> their flash address
    templates = templates or RecordTemplates()
    for k, (sop, (loads, table_at)) in enumerate(zip(segment.operations, _table_loads(segment.operations, npu))):
        for lut, at in loads:
            if lut not in flash.constants:
                flash.constants[lut] = flash.append(lut)
            records.append(dict(kind="dma", src=dict(region=REGION_FLASH, address=flash.constants[lut], length=len(lut)),
                                dst=dict(region=REGION_SHRAM, address=at, length=len(lut))))
        if sop.depth_step:
            records += _for_target(_depth_slices(sop, placement.address[weights_key(sop, first + k)],
                                                 placement.address.get(second_slot_key(first + k)), placement, flash,
                                                 segment.segment.constants), sop, npu, table_at)
            continue
        weights_at = (REGION_FLASH, 0)
        if sop.encoded is not None:
            # The stripes of one operation share its streams: stored once (looked up by the
            # object first, so that each stripe does not copy and hash the streams again).
            src = stored.get(id(sop.encoded))
            if src is None:
                data = bytes(sop.encoded.data)
                if data not in flash.constants:
                    flash.constants[data] = flash.append(data)
                src = stored[id(sop.encoded)] = flash.constants[data]
            weights_at = (REGION_FLASH, src)
            key = weights_key(sop, first + k)
            if key in placement.address:  # in a weight buffer: copied in by this operation, or earlier
                weights_at = placement.address[key]
            if sop.weight_buffer:
                size = sop.encoded.size
                records.append(dict(kind="dma", src=dict(region=REGION_FLASH, address=src, length=size),
                                    dst=dict(region=weights_at[0], address=weights_at[1], length=size)))
        # Broadcast constants are read from a copy in the arena (schedule.copied_constants).
        copies = {}
        for v in copied_constants(sop):
            blob = segment.segment.constants[v.buffer]
            if blob not in flash.constants:
                flash.constants[blob] = flash.append(blob)
            copies[v.buffer] = region, address = placement.address[constant_key(first + k, v)]
            records.append(dict(kind="dma", src=dict(region=REGION_FLASH, address=flash.constants[blob], length=len(blob)),
                                dst=dict(region=region, address=address, length=len(blob))))
        if sop.staged_cycles:  # its IFM, a map the CPU hands in, read from a copy (input_staging)
            buffer = sop.lowered.ifm.buffer
            size = segment.segment.buffers[buffer]
            copies[buffer] = region, address = placement.address[staged_key(first + k, buffer)]
            src_region, src_address = placement.address[buffer]
            records.append(dict(kind="dma", src=dict(region=src_region, address=src_address, length=size),
                                dst=dict(region=region, address=address, length=size)))
        record = operation_record(sop, placement, flash, segment.segment.constants, weights_at, copies, templates)
        if sop.cascade is None and npu.product != ethos_u85.PRODUCT:
            _check_over_own_input(record)
        records += _for_target([record], sop, npu, table_at)
    return records, encode_command_stream(records, accelerator=accelerator)


def _check_over_own_input(record: dict[str, Any]) -> None:
    """An operation run whole whose OFM the layout put over its own IFM
    (`schedule._overlapping_operations`) must have no block that reads an IFM byte an earlier
    block wrote: checked on the registers as emitted, the rule the simulator applies, so that a
    binary the hardware would compute garbage with is never written."""
    if record["kind"] not in ("conv", "depthwise", "pool"):
        return  # an elementwise operation in place reads each element before it writes it
    ifm, ofm = record["ifm"], record["ofm"]
    if ifm["region"] != ofm["region"]:
        return
    ifm_end = ifm["base"][0] + ifm["tiles"][0] * ifm["strides"][0]
    ofm_end = ofm["base"][0] + ofm["shape"][0] * ofm["strides"][0]
    if ofm["base"][0] < ifm_end and ifm["base"][0] < ofm_end:
        hazard = _core.find_in_place_hazard(record, True, False)
        if hazard is not None:
            raise CascaderError(f"internal error: the layout put an OFM over its own IFM unsafely: {hazard['message']}")
