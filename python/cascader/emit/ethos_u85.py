"""The Ethos-U85's part of the emit stage: what its registers say differently from the
U55/U65's for the same lowered operation, in one place.

The lowering describes an operation in the U55/U65's terms (an output rounding in
OFM_PRECISION, 32-bit multipliers, an AVERAGE pool that divides only when padded). Here an
operation record in those terms becomes the U85's: the rounding becomes OFM_SCALE's round mode,
a multiplier of 32 bits the same value in 31 (where that is exact), an unpadded average the
U85's SUM (its AVERAGE always divides), and the micro-block, the storage and the weight
streams its registers hold. What has no exact U85 counterpart yet is refused per operation
(`refusal`), and the operator runs on the CPU with that reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _core
from ..frontend.lowered import LoweredOperation
from ..perf import OP_KINDS
from .weights import EncodedWeights, StreamRanges

PRODUCT = "ethos-u85"
# OFM_SCALE's round modes (arch/ethos_u85/output_stage.hpp) for the U55's roundings: TFLite's
# double rounding is DOUBLE_SYMMETRIC with no early rounding; NATURAL and TRUNCATE (toward
# zero) keep their meaning.
_ROUND_MODE = {"TFL": 0, "NATURAL": 1, "TRUNCATE": 4}
_WEIGHT_STREAMS = 4  # WEIGHT_BASE and WEIGHT1..3_BASE


def refusal(op: LoweredOperation) -> str | None:
    """Why the U85 emitter cannot express `op` exactly yet (None: it can)."""
    r = op.registers
    if op.kind not in ("conv", "depthwise", "pool"):
        return f"{op.kind} operations are not emitted for the Ethos-U85 yet (its operands are scaled otherwise)"
    if op.lut is not None or r.get("activation", {}).get("function", 0) != 0:
        return "table and built-in activations are not emitted for the Ethos-U85 yet"
    if r.get("ifm_upscale"):
        return "upscaled IFMs are not emitted for the Ethos-U85 yet"
    if op.ifm.element_size != 1 or op.ofm.element_size != 1:
        return "16- and 32-bit feature maps are not emitted for the Ethos-U85 yet (its 48-bit accumulators)"
    if op.kind == "pool" and r.get("sub_op") not in ("MAX", "AVERAGE"):
        return f"{r.get('sub_op')} pooling is not emitted for the Ethos-U85 yet"
    scale, _ = r.get("ofm_scale", (1, 0))
    if scale >= 1 << 31 and (scale % 2 or r.get("rounding", "TFL") == "TFL"):
        return "its 32-bit OFM multiplier has no exact 31-bit Ethos-U85 equivalent"
    return None


def micro_block(op: LoweredOperation, part_kernel_first: bool, accelerator: str) -> tuple[int, int, int, int]:
    """(height, width, depth, ACC_FORMAT field) of the OFM micro-block `op` runs with: the
    rule the block-config search applies (arch/ethos_u85/block_search), on the whole
    operation, so that every stripe of it and its weight streams agree."""
    k = op.registers.get("kernel", {})
    one_by_one = k.get("height", 1) == 1 and k.get("width", 1) == 1
    op_type = getattr(_core.NpuOpType, OP_KINDS[op.cost_kind])
    return tuple(_core.u85_micro_block(accelerator, op_type, 8 * op.ifm.element_size, tuple(op.ofm.shape),
                                       op.kind == "conv" and one_by_one and not part_kernel_first))


def encode_weights(op: LoweredOperation, block: tuple[int, int, int], part_kernel_first: bool, accelerator: str,
                   depth_step: int = 0) -> EncodedWeights:
    """`op`'s weight and scale streams for the U85 running it with `block` (per depth slice,
    one StreamRanges per weight stream; the first carries the scale stream)."""
    v = op.weights
    k = op.registers["kernel"]
    w = np.asarray(v.values)
    zp = np.broadcast_to(np.asarray(v.zero_points, dtype=np.int64).reshape(-1), (w.shape[0],))
    field = micro_block(op, part_kernel_first, accelerator)[3]
    data, slices = _core.encode_u85_operation_weights(
        w, zp.astype(np.int32), np.asarray(v.bias, np.int64), np.asarray(v.scales[:, 0], np.int64),
        np.asarray(v.scales[:, 1], np.int64), int(block[2]), bool(v.depthwise), bool(part_kernel_first),
        8 * op.ifm.element_size, tuple(k["stride"]), tuple(k["dilation"]), field, accelerator, False,
        int(depth_step or 0))
    return EncodedWeights(data, tuple(tuple(StreamRanges(*r) for r in streams) for streams in slices), u85=True)


def weight_ranges(streams: tuple, region: int, base: int) -> dict[str, Any]:
    """The WEIGHT/SCALE ranges and the u85 weight streams of one depth slice's streams (one per
    weight decoder, the first with the scale stream), the encoded data's byte 0 at `base`."""
    ranges = [{"region": region, "address": base + s.weight_offset, "length": s.weight_length} for s in streams]
    ranges += [{"region": region, "address": 0, "length": 0}] * (_WEIGHT_STREAMS - len(ranges))
    first = streams[0]
    return {"parallel_mode": 0, "weights": ranges[0],
            "scales": {"region": region, "address": base + first.scale_offset, "length": first.scale_length},
            "u85_weight_streams": ranges}


def record(record: dict[str, Any], whole: LoweredOperation, part_kernel_first: bool, accelerator: str) -> dict[str, Any]:
    """`record` (in the U55/U65's terms, emit/program.py) in the U85's; `whole`: the operation
    it is a stripe of (or is)."""
    rounding = record.get("rounding", "TFL")
    scale, shift = record.get("ofm_scale", (1, 0))
    if scale >= 1 << 31:  # the same value, 31 bits (refusal() keeps the cases where it is not)
        scale, shift = scale // 2, shift - 1
    out = dict(record, rounding="TFL", ifm_rounding="TFL", ifm_scale_mode=0, ofm_scale=(scale, shift))
    if record["kind"] == "pool" and record.get("sub_op") == "AVERAGE" and not any(record["padding"]):
        # The U85's AVERAGE divides by the window whatever the padding; the U55's only when
        # padded, and its unpadded average is a sum the OFM scale divides: the U85's SUM.
        out["sub_op"] = "SUM"
    streams = out.pop("u85_weight_streams", None)
    out["u85"] = {
        "microblock": micro_block(whole, part_kernel_first, accelerator)[3],
        "ofm_round_mode": _ROUND_MODE[rounding],
        "ofm_double_round": 0,
        "storage": (0, 0, 0),
    }
    if streams is not None:
        out["u85"]["weight_streams"] = streams
    return out
