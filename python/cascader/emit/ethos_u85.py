"""The Ethos-U85's part of the emit stage: what its registers say differently from the
U55/U65's for the same lowered operation, in one place.

The lowering describes an operation in the U55/U65's terms (an output rounding in
OFM_PRECISION, 32-bit multipliers, an AVERAGE pool that divides only when padded). Here an
operation record in those terms becomes the U85's: the rounding becomes OFM_SCALE's round mode,
a multiplier of 32 bits the same value in 31 (where that is exact), an average pool the
U85's (`_output_stage`), and the micro-block, the storage and the weight
streams its registers hold. What has no exact U85 counterpart yet is refused per operation
(`refusal`), and the operator runs on the CPU with that reason.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import _core
from ..errors import UnsupportedError
from ..frontend.lower_indexed_dma import dma_spans
from ..frontend.lowered import LoweredOperation
from ..frontend.add_sub_rounding import HEADROOM, operand_multipliers
from ..frontend.ofm_transpose_modes import STORED_ORDER
from ..frontend.operation_builder import WRAP_OFM
from ..frontend.quantization import pooling_scale
from ..perf import OP_KINDS
from .weights import EncodedWeights

PRODUCT = "ethos-u85"
# OFM_SCALE's round modes (arch/ethos_u85/output_stage.hpp) for the U55's roundings: TFLite's
# double rounding is DOUBLE_SYMMETRIC with no early rounding; NATURAL and TRUNCATE (toward
# zero) keep their meaning.
_ROUND_MODE = {"TFL": 0, "NATURAL": 1, "TRUNCATE": 4}
_WEIGHT_STREAMS = 4  # WEIGHT_BASE and WEIGHT1..3_BASE
CHAINED = 2  # IFM/IFM2/OFM_PRECISION's storage: the chaining buffer (arch/ethos_u85/registers.hpp)


# The U55 elementwise operations with a U85 counterpart of the same name, and the U85's own
# comparisons, bitwise modes and DIV (frontend/lower_u85_*: comparisons write -1/0; their
# operand scales are the lowering's `operand_scales`, as LRELU's two rescales by sign are).
_ELEMENTWISE = ("ADD", "SUB", "MUL", "MIN", "MAX", "ABS", "SHR", "SHL", "CLZ", "LRELU",
                "CMP_EQ", "CMP_NE", "CMP_GE", "CMP_GT", "AND", "OR", "XOR", "AND_NOT", "DIV")
_ORDERED = ("SUB", "SHR", "SHL", "CMP_GE", "CMP_GT", "AND_NOT", "DIV")  # the others' operands commute


def _unit_operands(registers: dict[str, Any]) -> bool:
    """The lowering left both operands unscaled (OPA/OPB scale 1.0 and no IFM scaling mode):
    the operation (a MUL, a MIN/MAX, an ADD of codes of one scale such as PRELU's) combines the
    codes less their zero points as they are, which the U85 does with IFM/IFM2 scale 1.0."""
    if registers.get("ifm_scale_mode", 0):
        return False
    if registers.get("sub_op") == "MUL":  # the U55's MUL reads no operand scales
        return True
    return tuple(registers.get("opa_scale", (1, 0))) == (1, 0) and registers.get("opb_scale", 1) == 1


def _reference_scaled(registers: dict[str, Any]) -> bool:
    """An ADD/SUB whose operands the lowering scales as TFLite does (`_add_sub_scales`)."""
    return registers.get("sub_op") in ("ADD", "SUB") and "reference_scales" in registers


def _wide_maps(op: LoweredOperation) -> str | None:
    """Why `op`'s 16- or 32-bit feature maps are not emitted yet (None: they are). 16-bit maps
    are for pooling, for elementwise operations (the registers are the 8-bit ones with the
    wider type; an ADD/SUB scales its operands with TFLite's int16 headroom), for 16x8
    convolutions (`_sixteen_by_eight`) and for 8x8 ones writing a 16-bit OFM (`_widening`);
    32-bit maps for elementwise operations and REDUCE_SUM (a softmax's and a reduction's
    intermediates) (tests/test_u85_lowering, test_u85_16x8)."""
    maps = [op.ifm, op.ofm] + ([op.ifm2] if op.ifm2 is not None else [])
    widest = max(m.element_size for m in maps)
    if widest == 1 or op.kind == "elementwise":
        return None
    if op.kind == "pool" and (widest == 2 or op.registers.get("sub_op") in ("REDUCE_SUM", "ARGMAX_X")):
        return None  # ARGMAX_X: 8-bit values in, int32 or int64 indices out
    if op.kind in ("conv", "depthwise"):
        return None if _widening(op) else _sixteen_by_eight(op)
    if op.kind == "resize":  # 16-bit maps in the 48-bit accumulators (frontend/lower_u85_resize)
        return None
    return "32-bit feature maps are not emitted for the Ethos-U85 yet"


# The 48-bit accumulators' scale entry: a 48-bit bias and a 15-bit multiplier (scale_stream.hpp).
_ACC48_BIAS_LIMIT = 1 << 47
_ACC48_SCALE_LIMIT = 1 << 15


def _acc48(op: LoweredOperation) -> bool:
    """A 16x8 convolution or an int16 matrix product (weights from IFM2): its accumulators are
    the U85's 48-bit ones (ACC_FORMAT 1, the lowering's 40-bit U55 format)."""
    return (op.weights is not None or bool(op.registers.get("weights_ifm2"))) and op.registers.get("acc_format") == 1


def _widening(op: LoweredOperation) -> bool:
    """An 8x8 convolution writing a 16-bit OFM from its 32-bit accumulators (an int8 LSTM's
    gates): the 8-bit operation's registers, scale entries and
    rounding, with OFM_PRECISION's 16-bit type and its clip range."""
    return op.ifm.element_size == 1 and op.ofm.element_size == 2 and op.registers.get("acc_format", 0) == 0


def _sixteen_by_eight(op: LoweredOperation) -> str | None:
    """Why the 16x8 convolution `op` has no U85 registers yet (None: it has). Its bias and
    rescale go to the 48-bit accumulators' scale entries: TFLite's int64 kernels rescale with
    the reduced 16-bit multiplier, which fits the entry's 15-bit one, and round once, half up
    (NATURAL); an int32 bias (TFLite's 31-bit multiplier, rounded twice) has no such entry. An
    int16 matrix product's global OFM scale is that reduced multiplier too (lower_batch_matmul)."""
    if not (op.ifm.element_size == op.ofm.element_size == 2 and _acc48(op)):
        return "16-bit convolutions other than 16x8 are not emitted for the Ethos-U85 yet"
    v = op.weights
    if v is None:  # a matrix product: no scale entries, its OFM_SCALE
        multiplier = op.registers.get("ofm_scale", (1, 0))[0]
        return None if multiplier < _ACC48_SCALE_LIMIT else (
            "a 16-bit matrix product with a 31-bit multiplier has no Ethos-U85 scale (48-bit accumulators take "
            "15-bit multipliers)")
    if np.any(np.asarray(v.scales)[:, 0] >= _ACC48_SCALE_LIMIT):
        return ("a 16x8 convolution with a 31-bit multiplier (an int32 bias) has no Ethos-U85 scale entry "
                "(48-bit accumulators take 15-bit multipliers)")
    bias = np.asarray(v.bias, np.int64)
    if bias.size and (bias.min() < -_ACC48_BIAS_LIMIT or bias.max() >= _ACC48_BIAS_LIMIT):
        return "its int64 bias leaves the 48 bits of the Ethos-U85's accumulators"
    return None


def needs_block_check(op: LoweredOperation) -> bool:
    """A 32-bit elementwise operation with a broadcast operand: its bricks may not fit the
    chaining buffer in any OFM block (block_search's `fits_elementwise`), which the search says."""
    wide = max(m.element_size for m in (op.ifm, op.ofm, op.ifm2) if m is not None) == 4
    return op.kind == "elementwise" and wide and any(op.registers.get("broadcast", ()))


def refusal(op: LoweredOperation) -> str | None:
    """Why the U85 emitter cannot express `op` exactly yet (None: it can)."""
    if op.kind == "dma":  # frontend/lower_indexed_dma: the registers are the U85's already
        return None
    r = op.registers
    if op.kind == "elementwise":
        scaled = "reference_scales" in r or "operand_scales" in r
        if r.get("sub_op") not in _ELEMENTWISE or not (scaled or _unit_operands(r)):
            return (f"elementwise {r.get('sub_op')} is not emitted for the Ethos-U85 yet (its operands are scaled "
                    "otherwise than the U55's)")
        if r.get("sub_op") in _ORDERED and r.get("reversed_operands") and r.get("ifm2_scalar") is not None:
            return (f"a {r['sub_op']} with its operands reversed has no Ethos-U85 register when the second is a "
                    "scalar (the operands swap, and a scalar stays the IFM2)")
        if _reference_scaled(r):
            scales = _add_sub_scales(r["reference_scales"], 8 * op.ifm.element_size)
            shifts = (scales["ofm_scale"][1], scales["u85_operands"]["ifm_scale"][1],
                      scales["u85_operands"]["ifm2_scale"][1])
            if max(shifts) > 63:
                return f"its scales need a shift of {max(shifts)}, beyond the Ethos-U85's 6-bit shift fields"
    elif op.kind not in ("conv", "depthwise", "pool", "resize"):
        return f"{op.kind} operations are not emitted for the Ethos-U85 yet"
    function = r.get("activation", {}).get("function", 0)
    if function in _BUILTIN_TABLES:
        if op.ofm.element_size != 2:
            return "the Ethos-U85's TANH/SIGMOID tables write 16-bit values only"
    elif function != 0 and (op.lut is None or (len(op.lut), op.ofm.element_size) not in _TABLES):
        return "tables of other sizes than the Ethos-U85's are not emitted for it yet"
    wide = _wide_maps(op)
    if wide:
        return wide
    if op.kind == "pool" and r.get("sub_op") not in ("MAX", "MIN", "AVERAGE", "REDUCE_SUM", "ARGMAX_X"):
        return f"{r.get('sub_op')} pooling is not emitted for the Ethos-U85 yet"
    stage = _output_stage(op.kind, r.get("sub_op"), r.get("kernel", {}), tuple(r.get("padding", (0, 0, 0, 0))),
                          tuple(r.get("ofm_scale", (1, 0))), _rounding(op, r.get("rounding", "TFL")),
                          _reference_scaled(r))
    return stage if isinstance(stage, str) else None


def _rounding(op: LoweredOperation, rounding: str) -> str:
    """The OFM rounding of `op` on the U85: a 16x8 convolution's reduced multiplier rounds once,
    half up (`_sixteen_by_eight`), whatever the U55's register (whose 40-bit path rounds its
    way) says; any other keeps the lowering's."""
    return "NATURAL" if _acc48(op) else rounding


# The U85's AVERAGE rescaled by 1.0: 2^30 / 2^30 under DOUBLE_SYMMETRIC rounding is exact.
_UNIT_SCALE = (1 << 30, 30)


def _output_stage(kind: str, sub_op: str | None, kernel: dict, padding: tuple, ofm_scale: tuple[int, int],
                  rounding: str, reference_scaled: bool = False) -> dict[str, Any] | str:
    """The U85's pooling mode, OFM scale and round mode for an operation the lowering describes
    in the U55's terms, or why it has none. The U55's AVERAGE divides only a padded window (by
    its valid elements, half away from zero) and otherwise sums, the OFM scale dividing; the
    U85's AVERAGE always divides as the padded one does, and its SUM sums. So an unpadded
    average whose scale is the window's division (quantization.pooling_scale, TFLite's
    rounding of an average) is the U85's AVERAGE at scale 1.0, any other unpadded one its SUM."""
    scale, shift = ofm_scale
    out: dict[str, Any] = {"sub_op": sub_op, "ofm_scale": (scale, shift), "ofm_round_mode": _ROUND_MODE[rounding]}
    if reference_scaled:
        return out  # ADD/SUB: TFLite's scales (`_add_sub_scales`), not these
    if kind == "pool" and sub_op == "AVERAGE" and not any(padding):
        if ofm_scale == pooling_scale(kernel.get("height", 1) * kernel.get("width", 1)):
            return dict(out, ofm_scale=_UNIT_SCALE, ofm_round_mode=_ROUND_MODE["TFL"])
        out["sub_op"] = "SUM"
    if scale >= 1 << 31:
        # Halved, with one shift less, the product is the same: exact where the rounding does
        # not round at bit 31 first (TFLite's double rounding does).
        if scale % 2 or rounding == "TFL":
            return "its 32-bit OFM multiplier has no exact 31-bit Ethos-U85 equivalent"
        out["ofm_scale"] = (scale // 2, shift - 1)
    return out


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
    planned = _core.plan_u85_operation_weights(
        w, zp.astype(np.int32), np.asarray(v.bias, np.int64), np.asarray(v.scales[:, 0], np.int64),
        np.asarray(v.scales[:, 1], np.int64), int(block[2]), bool(v.depthwise), bool(part_kernel_first),
        8 * op.ifm.element_size, tuple(k["stride"]), tuple(k["dilation"]), field, accelerator, _acc48(op),
        int(depth_step or 0))
    return EncodedWeights(planned, u85=True)


def weight_ranges(streams: tuple, region: int, base: int) -> dict[str, Any]:
    """The WEIGHT/SCALE ranges and the u85 weight streams of one depth slice's streams (one per
    weight decoder, the first with the scale stream), the encoded data's byte 0 at `base`."""
    ranges = [{"region": region, "address": base + s.weight_offset, "length": s.weight_length} for s in streams]
    ranges += [{"region": region, "address": 0, "length": 0}] * (_WEIGHT_STREAMS - len(ranges))
    first = streams[0]
    return {"parallel_mode": 0, "weights": ranges[0],
            "scales": {"region": region, "address": base + first.scale_offset, "length": first.scale_length},
            "u85_weight_streams": ranges}


def record(record: dict[str, Any], whole: LoweredOperation, part_kernel_first: bool, accelerator: str,
           chain: tuple[tuple[str, int], ...] = (), table_at: int = 0) -> dict[str, Any]:
    """`record` (in the U55/U65's terms, emit/program.py) in the U85's; `whole`: the operation
    it is a stripe of (or is); `chain`: its maps in a chaining buffer ("ofm", "ifm", "ifm2"),
    each with the buffer's number (u85_chaining); `table_at`: where in the LUT RAM its table
    is (`table_offsets`)."""
    stage = _output_stage(record["kind"], record.get("sub_op"), record["kernel"], tuple(record["padding"]),
                          tuple(record.get("ofm_scale", (1, 0))), _rounding(whole, record.get("rounding", "TFL")),
                          _reference_scaled(whole.registers))
    if isinstance(stage, str):  # refusal() saw the whole operation; a stripe of it may differ
        raise UnsupportedError(f"operation {record['kind']}: {stage}")
    out = dict(record, rounding="TFL", ifm_rounding="TFL", ifm_scale_mode=0, ofm_scale=stage["ofm_scale"])
    if stage["sub_op"] is not None:
        out["sub_op"] = stage["sub_op"]
    out["activation"] = _activation(record["activation"], record["ofm"]["dtype"])
    table = lut(whole)
    index = table_at // len(table) if table is not None else 0
    if whole.registers.get(WRAP_OFM):  # the U85's clip range NONE keeps the low bits
        out["activation"]["clip_range"] = 1
    streams = out.pop("u85_weight_streams", None)
    if record["kind"] == "elementwise":
        if _reference_scaled(whole.registers):
            out.update(_add_sub_scales(whole.registers["reference_scales"], 8 * whole.ifm.element_size))
        elif "operand_scales" in whole.registers:
            ifm_scale, ifm2_scale = whole.registers["operand_scales"]
            out.update(_UNIT_OPERANDS, u85_operands={"ifm_scale": ifm_scale, "ifm2_scale": ifm2_scale})
        else:
            out.update(_UNIT_OPERANDS)
    out["u85"] = {
        "microblock": micro_block(whole, part_kernel_first, accelerator)[3],
        "ofm_round_mode": stage["ofm_round_mode"],
        "ofm_double_round": 0,
        "storage": tuple(CHAINED if m in dict(chain) else 0 for m in ("ifm", "ifm2", "ofm")),
        "activation_table": index,
    }
    for m, number in chain:  # a chained map's REGION is its chaining buffer's number
        out[m] = dict(out[m], region=number)
    if streams is not None:
        out["u85"]["weight_streams"] = streams
    if whole.registers.get("ofm_transpose"):
        _store_transposed(out, whole.registers["ofm_transpose"])
    if whole.registers.get("ofm_reverse"):  # frontend/lower_reverse: mirrored along H, W or C
        out["u85"]["ofm_reverse"] = whole.registers["ofm_reverse"]
    if record["kind"] == "resize":  # frontend/lower_u85_resize: its registers are the U85's already
        out["u85"].update({k: whole.registers[k] for k in ("resize_mode", "resize", "ofm_round_mode")})
    if whole.registers.get("weights_ifm2"):  # a matrix product: the weights are the IFM2 map
        out["u85"]["weights_ifm2"] = True
    if record["kind"] == "elementwise":
        out["u85"].update(out.pop("u85_operands"))
        if whole.registers.get("ifm_broadcast"):  # both operands broadcast (operation_builder.elementwise)
            out["u85"]["ifm_broadcast_mode"] = _broadcast_mode(whole.registers["ifm_broadcast"])
        if record.get("reversed_operands") and record["sub_op"] in _ORDERED:
            _swap_operands(out)
    return out


def _store_transposed(out: dict[str, Any], mode: int) -> None:
    """An OFM written transposed (OFM_PRECISION's transpose field, `lower_ofm_transpose`): the
    registers' OFM shape is the computed one, its tiles and strides the stored map's. The
    lowering's OFM view holds, per computed axis, the stride of the stored axis it lands on;
    the operation is never striped (planner), so the view is the whole map."""
    order = STORED_ORDER[mode]  # stored axis k is computed axis order[k]
    fm = out["ofm"]
    shape, strides = fm["shape"], fm["strides"]
    stored_h, stored_w = shape[order[0]], shape[order[1]]
    out["ofm"] = dict(fm, tiles=(stored_h, stored_h, stored_w), strides=tuple(strides[a] for a in order))
    out["u85"]["ofm_transpose"] = mode


def _broadcast_mode(axes: tuple[bool, bool, bool]) -> int:
    """IFM_BROADCAST's mode: bit 0 H, bit 1 W, bit 2 C."""
    h, w, c = axes
    return int(h) | int(w) << 1 | int(c) << 2


def _swap_operands(out: dict[str, Any]) -> None:
    """A U55 SUB (SHR, SHL) with reversed operands (IFM2 - IFM, the IFM2 broadcast) as the
    U85's IFM - IFM2: the operands swap places, their scales (IFM_SCALE, IFM2_SCALE) with them,
    and the broadcast goes to the IFM (IFM_BROADCAST)."""
    out["ifm"], out["ifm2"] = out["ifm2"], out["ifm"]
    u = out["u85"]
    ifm, ifm2, ofm = u["storage"]
    u["storage"] = (ifm2, ifm, ofm)
    u["ifm_scale"], u["ifm2_scale"] = u["ifm2_scale"], u["ifm_scale"]
    out["u85"]["ifm_broadcast_mode"] = _broadcast_mode(out.get("broadcast", (False, False, False)))
    out["broadcast"] = (False, False, False)
    out["reversed_operands"] = False


# The U55's clip ranges (the output type's range intersected with ACTIVATION_MIN/MAX): the U85
# has only "clip to ACTIVATION_MIN/MAX" (0), which takes the intersection.
_CLIP_RANGES = {0: None, 2: (0, 255), 3: (-128, 127), 5: (-32768, 32767)}
# The U85's tables by entry type (output_stage.hpp): of 256 entries LUT_U8_U8 1, LUT_S8_S8 4,
# LUT_S8_S32 7 (an int8 softmax's exponentials); LUT_S16_S16 8, 512 interpolated words (int16
# EXP, an int16 softmax's two tables). The U55's tables of the same entries, in one order.
_TABLE_FUNCTION = {"uint8": 1, "int8": 4, "int32": 7, "int16": 8}
_TABLES = {(256, 1), (1024, 4), (2048, 2)}  # (table bytes, OFM element size)
# The U55's built-in TANH (3) and SIGMOID (4), whose input format (3 x 2^12 per unit, OFM_SCALE's)
# the U85's LUT_TANH (10) and LUT_SIGMOID (11) read too, from a table in the LUT RAM
# (`lut`; arch/ethos_u85/activation_table).
_BUILTIN_TABLES = {3: 10, 4: 11}
# The LUT RAM: 2 KiB of 256-byte slots; a table of N bytes sits at a multiple of N and its
# operation names it by that multiple (ACTIVATION's table index), as in Vela 5.2's
# EthosU85RCSGenerator. An operation's table goes to the first byte; a chain's tables each to
# bytes of their own (`table_offsets`), all loaded before the chain's first operation
# (emit/program.py), since the chain runs its operations block by block together.
LUT_ADDRESS = 0
LUT_RAM_BYTES = 2048


def table_offsets(tables: list[bytes]) -> dict[bytes, int] | None:
    """Where in the LUT RAM each of the distinct `tables` of one chain goes (its byte offset, a
    multiple of its size), or None where they do not all fit at once.

    Largest first, each at the lowest free multiple of its size: the sizes are powers of two,
    so they fit whenever their total does. Vela 5.2 places a group's tables in its least
    recently used slots and, where they do not fit (two 2 KiB tables), loads both over the same
    bytes, so that one operation reads the other's table: such a chain is not formed here."""
    offsets: dict[bytes, int] = {}
    used: list[tuple[int, int]] = []
    for table in sorted(dict.fromkeys(tables), key=len, reverse=True):
        size = len(table)
        at = next((a for a in range(0, LUT_RAM_BYTES - size + 1, size)
                   if all(a + size <= b or e <= a for b, e in used)), None)
        if at is None:
            return None
        offsets[table] = at
        used.append((at, at + size))
    return offsets


def lut(op: LoweredOperation) -> bytes | None:
    """The table `op` reads from the LUT RAM on the U85: the lowering's, or that of the U85's
    TANH/SIGMOID for the U55's built-in function."""
    function = _BUILTIN_TABLES.get(op.registers.get("activation", {}).get("function", 0))
    return op.lut if function is None else _builtin_table(function)


@functools.cache
def _builtin_table(function: int) -> bytes:
    return _core.u85_tanh_sigmoid_table(function)


def _activation(activation: dict[str, int], ofm_dtype: str) -> dict[str, int]:
    """The U85's ACTIVATION fields for the U55's (a table in LUT slot `function - 16`, or none)."""
    lo, hi = activation["min"], activation["max"]
    if ofm_dtype in ("int32", "int64") and activation.get("clip_range", 0) == 0:
        # The U55 clamps a 32-bit OFM to its type only (ACTIVATION_MIN/MAX are 16-bit); the
        # U85 clamps to ACTIVATION_MIN/MAX unless the clip range is NONE (1). (int64: the U85's
        # ARGMAX indices.)
        return {"function": activation["function"], "clip_range": 1, "min": lo, "max": hi}
    bounds = _CLIP_RANGES[activation.get("clip_range", 0)]
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    function = _BUILTIN_TABLES.get(activation["function"], activation["function"])
    if function >= 16:
        function = _TABLE_FUNCTION[ofm_dtype]
    return {"function": function, "clip_range": 0, "min": lo, "max": hi}


# MUL (and an unscaled ADD/SUB/MIN/MAX, `_unit_operands`) takes the operands as they are
# (IFM_SCALE/IFM2_SCALE 1.0), then OFM_SCALE rescales the result as the lowering's OFM scale does
# on the U55 (TFLite's double rounding there).
_UNIT_OPERANDS = {"opa_scale": (1, 0), "opb_scale": 1, "reversed_operands": False,
                  "u85_operands": {"ifm_scale": (1, 0, 0, 0), "ifm2_scale": (1, 0, 0, 0)}}


def _add_sub_scales(scales: tuple[float, float, float], bits: int) -> dict[str, Any]:
    """ADD/SUB of `bits`-bit operands as TFLite computes them, which the U85's registers
    express exactly: each operand (code less zero point) shifted left by the headroom (20 for
    8-bit operands, 15 for int16) and multiplied by its multiplier, TFLite's double rounding
    (IFM_SCALE/IFM2_SCALE with DBL_RND the headroom: the high part rounded at bit 31 less it,
    then by the multiplier's exponent), added, then the sum rescaled by the output multiplier
    (OFM_SCALE, the high part rounded at bit 31) (add_sub_rounding's `operand_multipliers`)."""
    (ma, ea), (mb, eb), (mo, eo) = operand_multipliers(scales, bits)
    headroom = HEADROOM[bits]
    first = 31 - headroom  # where the operand's high part is rounded
    return {"ofm_scale": (mo, 31 - eo), "opa_scale": (1, 0), "opb_scale": 1, "reversed_operands": False,
            "u85_operands": {"ifm_scale": (ma, first - ea, 0, headroom), "ifm2_scale": (mb, first - eb, 0, headroom),
                             "ofm_round_mode": _ROUND_MODE["TFL"]}}


def dma_record(op: LoweredOperation, src: dict[str, Any], dst: dict[str, Any],
               index: dict[str, Any] | None) -> dict[str, Any]:
    """The decoder's record of a DMA operation (`frontend.lower_indexed_dma`: its rows in
    `registers["u85_dma"]`), its source, destination and index array at the feature-map records
    `src`, `dst`, `index` (their first tile's base): a plain copy (no `u85_dma`), or a strided or
    indexed one whose ranges bound every byte it may touch (`dma_spans`)."""
    m = op.registers["u85_dma"]
    reads, writes, index_bytes = dma_spans(m)
    at = lambda fm, length: {"region": fm["region"], "address": fm["base"][0], "length": length}  # noqa: E731
    record = {"kind": "dma", "src": at(src, reads), "dst": at(dst, writes)}
    if m["stride_mode"] or m["src_indexed"] or m["dst_indexed"]:
        record["u85_dma"] = dict(m, index=at(index, index_bytes) if index_bytes
                                 else {"region": 0, "address": 0, "length": 0})
    return record
