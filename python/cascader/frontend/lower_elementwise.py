"""ADD, SUB and MUL as one NPU elementwise operation each; operand and output scales from
`quantization`.

A smaller operand is broadcast; when it is the first one the operands are swapped
(REVERSED_OPERANDS). ADD and SUB must round every pair of input values as TFLite's reference
does (`add_sub_rounding`): where no register values do, an 8-bit tensor plus a single-valued
constant becomes a table lookup, and anything else a chain of NPU operations with the
reference's roundings (`exact_elementwise`), as is a MUL whose product the reference wraps and
an int16 ADD/SUB on the reference's power-of-two path. int32 operands compute on the integers
themselves, as TFLite's int32 kernels do.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from . import fixed_point as fp
from .add_sub_rounding import (add_sub_table, exact_add_sub_scales, operand_values, power_of_two_shifts,
                               reference_output_multiplier)
from .exact_elementwise import (exact_add_sub, largest_product, multiply_registers, power_of_two_add_sub, product_fits,
                                wrapping_multiply)
from .lower_lut import table_lookup
from .lowered import FeatureMapView, LoweredOperation, WeightVolume, channel_scales, full_range, kernel_record
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder, broadcast_order, fused_clamp
from .operator_view import OperatorView
from .quantization import add_sub_scales, multiply_real

ADD_SUB_BITS = {"int8": 8, "uint8": 8, "int16": 16}  # ADD/SUB operand types, by TFLite's headroom


def lower_elementwise(lw: LoweringContext, v: OperatorView) -> None:
    mode = v.opcode  # ADD, SUB, MUL: the NPU's elementwise operation of the same name
    a, b = lw.view(v.op.inputs[0]), lw.view(v.op.inputs[1])
    ofm = lw.view(v.op.outputs[0])
    if "int32" in (a.dtype, b.dtype, ofm.dtype):
        _int32_elementwise(lw, v, mode, a, b, ofm)
        return
    scaling = None
    if mode in ("ADD", "SUB"):
        bits = ADD_SUB_BITS.get(a.dtype)
        if not bits or not a.dtype == b.dtype == ofm.dtype:
            raise UnsupportedError(f"operator {v.index} ({v.opcode}): {a.dtype}, {b.dtype} -> {ofm.dtype}; TFLite's "
                                   f"{v.opcode} takes one of {', '.join(ADD_SUB_BITS)} in and out")
        clamp = fused_clamp(v)
        if bits == 16 and _power_of_two_path(lw, v, mode, a, b, ofm, clamp):
            return
        constants = [lw.graph.tensors[t].data if lw.graph.tensors[t].is_constant else None
                     for t in v.op.inputs[:2]]
        values = [operand_values(x.dtype, x.zero_point, c) for x, c in zip((a, b), constants)]
        beyond = reference_output_multiplier((a.scale, b.scale, ofm.scale), bits)
        if beyond is not None:
            # Neither the NPU's rescale nor a table can match what the kernel does there.
            raise UnsupportedError(
                f"operator {v.index} ({v.opcode}): TFLite's kernel would rescale the sum by {beyond:.3g} (scales "
                f"{a.scale:g}, {b.scale:g} -> {ofm.scale:g}), outside the range below 1 it defines; it stays on "
                f"the CPU, whose kernel is the reference")
        scaling = exact_add_sub_scales((a.scale, b.scale, ofm.scale), *values, mode == "SUB",
                                       (clamp["min"] - ofm.zero_point, clamp["max"] - ofm.zero_point), bits)
        if scaling is None and lw.scaled_operands:
            # The target scales each operand as the reference does (`reference_scales` below):
            # one operation is exact there, whatever the U55's registers would give.
            scaling = add_sub_scales(a.scale, b.scale, ofm.scale, bits)
        if scaling is None:
            if bits == 16 or not _add_sub_lookup(lw, v, mode, (a, b), constants, ofm):
                # One NPU rescale would be one off where the output lands next to a step
                # (see add_sub_rounding): the reference's roundings one operation each.
                broadcast_order(v, a, b, ofm)  # one operand has the output's shape, the other broadcasts
                exact_add_sub(lw, v.index, mode, a, b, ofm, clamp)
            return
    if mode == "MUL":
        # The reference shifts the product left in int32 (exact_elementwise): where that wraps,
        # the NPU wraps it too, with a chain.
        multiplier, exponent = fp.quantize_multiplier(multiply_real(a.scale, b.scale, ofm.scale))
        constants = [lw.graph.tensors[t].data if lw.graph.tensors[t].is_constant else None for t in v.op.inputs[:2]]
        values = [operand_values(x.dtype, x.zero_point, c) for x, c in zip((a, b), constants)]
        clamp = fused_clamp(v)
        if not product_fits(largest_product(*values), exponent):
            broadcast_order(v, a, b, ofm)  # one operand has the output's shape, the other broadcasts
            wrapping_multiply(lw, v.index, a, b, ofm, multiplier, exponent, clamp)
            return
        ofm_scale = multiply_registers(multiplier, exponent)
    if ofm.shape not in (a.shape, b.shape):
        # Both operands broadcast: the one that lacks only channels gets them first.
        if a.shape == (*ofm.shape[:2], 1):
            a = _expand_channels(lw, v, a, ofm.shape[2])
        elif b.shape == (*ofm.shape[:2], 1):
            b = _expand_channels(lw, v, b, ofm.shape[2])
    a, b, reversed_operands = broadcast_order(v, a, b, ofm)
    broadcast = tuple(bd != od for bd, od in zip(b.shape, ofm.shape))
    registers: dict[str, Any] = dict(
        sub_op=mode, kernel=kernel_record(1, 1, (1, 1), (1, 1)), padding=(0, 0, 0, 0),
        activation=clamp, rounding="TFL", global_scale=True, broadcast=broadcast,
        reversed_operands=reversed_operands, ifm2_scalar=None,
    )
    if mode == "MUL":
        registers.update(ofm_scale=ofm_scale, opa_scale=(0, 0), opb_scale=0, ifm_scale_mode=0)
    else:
        # With REVERSED_OPERANDS the ALU's operand A is the IFM2 (SUB computes A - B), so A
        # and B stay TFLite's first and second operand, and so does the scale mode (1: A).
        registers.update(scaling)
    # TFLite's scales of the IFM, the IFM2 and the OFM of the operator as one operation: a
    # target that scales each operand itself (the Ethos-U85, emit/ethos_u85) computes TFLite's
    # arithmetic from them.
    registers["reference_scales"] = (a.scale, b.scale, ofm.scale)
    cost = {"ADD": "add", "SUB": "sub", "MUL": "mul"}[mode]
    lw.add(LoweredOperation("elementwise", cost, f"{v.index}:{v.opcode}", (v.index,), a, ofm, ifm2=b,
                            registers=registers))


def _power_of_two_path(lw: LoweringContext, v: OperatorView, mode: str, a: FeatureMapView, b: FeatureMapView,
                       ofm: FeatureMapView, clamp: dict) -> bool:
    """An int16 ADD/SUB TFLite computes on its power-of-two path (`power_of_two_shifts`), lowered
    as that path rounds; False when the kernel takes the general path (equal scales compute
    the same sum on both)."""
    # Without an options table LiteRT's parameters are zeroed: the option is false (with a table
    # the reader fills in the schema's default, true).
    shifts = power_of_two_shifts((a.scale, b.scale, ofm.scale), v.options.get("pot_scale_int16", False))
    if shifts is None or shifts == (0, 0):
        return False
    if max(shifts) != 0 or any(x.zero_point for x in (a, b, ofm)):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): power-of-two int16 scales {a.scale:g}, {b.scale:g} "
                               f"-> {ofm.scale:g}; TFLite's kernel takes one input at the output's scale and the "
                               "other finer, all zero points 0, and refuses these")
    if min(shifts) <= -16:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): an int16 input 2^{-min(shifts)} times finer than "
                               "the output; TFLite's kernel divides it by RoundingDivideByPOT on int16, which for "
                               "shifts of 16 or more returns the sign, not a rounding")
    broadcast_order(v, a, b, ofm)  # one operand has the output's shape, the other broadcasts
    power_of_two_add_sub(lw, v.index, mode, a, b, ofm, shifts, clamp)
    return True


def _add_sub_lookup(lw: LoweringContext, v: OperatorView, mode: str, operands: tuple[FeatureMapView, FeatureMapView],
                    constants: list, ofm: FeatureMapView) -> bool:
    """An 8-bit ADD/SUB of a tensor and a single-valued constant as one table lookup of the
    tensor (`table_lookup`, as `lower_lut` makes them), the table computed by the
    reference's arithmetic: exact where no register values are. False when the operator is
    not of that form."""
    tensor = [i for i in (0, 1) if constants[i] is None]
    if len(tensor) != 1 or operands[tensor[0]].shape != ofm.shape or np.unique(constants[1 - tensor[0]]).size != 1:
        return False
    x = operands[tensor[0]]
    clamp = fused_clamp(v)
    table = add_sub_table(tuple(o.scale for o in (*operands, ofm)), tuple(o.zero_point for o in (*operands, ofm)),
                          int(np.asarray(constants[1 - tensor[0]]).reshape(-1)[0]), tensor[0] == 1, x.dtype,
                          (clamp["min"], clamp["max"]), mode == "SUB")
    lw.add(table_lookup(x, ofm, table.astype(ofm.dtype).tobytes(), f"{v.index}:{v.opcode}(table)", (v.index,)))
    return True


def _expand_channels(lw: LoweringContext, v: OperatorView, x: FeatureMapView, channels: int) -> FeatureMapView:
    """`x` (H x W x 1, 8-bit) repeated along `channels` channels: a 1x1 convolution of raw
    codes with unit weights and scale, exact. Returns the repeated map, in x's quantization."""
    if x.dtype not in ("int8", "uint8"):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): both operands broadcast, and the one "
                               f"without channels is {x.dtype}")
    h, w, _ = x.shape
    out = lw.scratch(v.index, "channels", (h, w, channels), x.dtype, x.zero_point, x.scale)
    volume = WeightVolume(np.ones((channels, 1, 1, 1), np.int32), np.zeros(channels, np.int64),
                          np.zeros(channels, np.int64), channel_scales(1, 0, channels), False)
    registers = dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0), activation=full_range(x.dtype),
                     rounding="TFL", global_scale=False, ofm_scale=(0, 0), acc_format=0)
    lw.add(LoweredOperation("conv", "conv2d", f"{v.index}:{v.opcode}(channels)", (v.index,),
                            replace(x, zero_point=0), replace(out, zero_point=0), weights=volume,
                            registers=registers))
    return out


def _int32_elementwise(lw: LoweringContext, v: OperatorView, mode: str, a: FeatureMapView, b: FeatureMapView,
                       ofm: FeatureMapView) -> None:
    """int32 ADD, SUB, MUL: TFLite's int32 kernels compute on the integers themselves
    (quantization ignored), and so does the NPU's 32-bit elementwise unit with unit scales.
    The NPU does not clamp 32-bit outputs, so a fused activation stays on the CPU."""
    if {a.dtype, b.dtype, ofm.dtype} != {"int32"}:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): mixes int32 with {a.dtype}/{b.dtype}/{ofm.dtype}")
    if v.fused_activation not in (None, "NONE"):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): a fused {v.fused_activation} on int32 (the NPU "
                               "does not clamp 32-bit outputs)")
    plain = lambda x: replace(x, zero_point=0, scale=1.0)  # noqa: E731
    a, b, ofm = plain(a), plain(b), plain(ofm)
    broadcast_order(v, a, b, ofm)  # one operand has the output's shape, the other broadcasts
    OperationBuilder(lw, v.index, v.opcode).elementwise(mode, a, b, ofm)
