"""Building one operator's NPU operations: pools, elementwise operations and scratch buffers.

The multi-operation lowerings (SOFTMAX, PRELU, ...) are sequences of the NPU's primitive
operations over scratch buffers; this names them after their operator and fills the register
fields the emitter encodes. The helpers several rules share (fused clamps, kernel padding,
weight volumes, copies as 1x1 pools) live here too, below the rules.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from ..tflite.model import Tensor
from .lowered import (TYPE_RANGE, FeatureMapView, LoweredOperation, WeightVolume, channel_scales, full_range,
                      kernel_record)
from .lowering_context import LoweringContext
from .operator_view import OperatorView
from .quantization import convolution_scales, quantize_value, rescale_scale

MAX_PADDING = 127  # the IFM_PAD_* registers
ELEMENTWISE_COST = {"ADD": "add", "SUB": "sub", "MUL": "mul", "MIN": "minimum"}  # the rest cost as MAX
# MIN pooling is the U85's; its ARGMAX pooling costs as an average pool, as the estimator costs it.
POOL_COST = {"MAX": "max_pool", "MIN": "max_pool", "AVERAGE": "avg_pool", "REDUCE_SUM": "reduce_sum",
             "ARGMAX_X": "avg_pool"}
# Registers flag: the OFM keeps the low bits of the result (the U85's clip range NONE) where
# the U55's clamps it to its type (a narrowing CAST, a uint8 mask of -1).
WRAP_OFM = "wrap_ofm"
EIGHT_BIT_RANGE = {t: TYPE_RANGE[t] for t in ("int8", "uint8")}
# A fused activation's real bounds (None: the type's own).
FUSED_ACTIVATIONS = {"NONE": (None, None), "RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


def clamp_record(ofm: Tensor, lo: float | None, hi: float | None) -> dict[str, int]:
    """The activation record clamping `ofm` to the real interval [lo, hi] (None: unbounded),
    as TFLite quantizes the bounds (CalculateActivationRangeQuantized)."""
    scale, zp = float(ofm.quantization.scale[0]), int(ofm.quantization.zero_point[0])
    tmin, tmax = TYPE_RANGE[ofm.dtype]
    qmin = tmin if lo is None else max(tmin, quantize_value(lo, scale, zp))
    qmax = tmax if hi is None else min(tmax, quantize_value(hi, scale, zp))
    return dict(function=0, clip_range=0, min=qmin, max=qmax)


def fused_clamp(v: OperatorView) -> dict[str, int]:
    """The activation record of operator `v`'s fused activation on its output."""
    assert v.ofm is not None
    return clamp_record(v.ofm, *FUSED_ACTIVATIONS.get(v.fused_activation, (None, None)))


def require_8bit_in_out(v: OperatorView) -> str:
    """The operator's 8-bit type, the same in and out; else UnsupportedError (its CPU reason)."""
    ifm, ofm = v.ifm, v.ofm
    assert ifm is not None and ofm is not None
    if ifm.dtype not in EIGHT_BIT_RANGE or ofm.dtype != ifm.dtype:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {ifm.dtype} -> {ofm.dtype}; the NPU lowering takes "
                               "int8 or uint8 in and out")
    return ifm.dtype


def broadcast_order(v: OperatorView, a: FeatureMapView, b: FeatureMapView,
                    ofm: FeatureMapView) -> tuple[FeatureMapView, FeatureMapView, bool]:
    """(IFM, IFM2, reversed): the NPU broadcasts only its second operand, so the operand of the
    output's shape goes first; UnsupportedError when neither has it or the other does not
    broadcast (size 1 along every axis where it differs)."""
    reversed_operands = False
    if a.shape != ofm.shape:
        if b.shape != ofm.shape:
            raise UnsupportedError(f"operator {v.index} ({v.opcode}): neither operand has the output's shape")
        a, b, reversed_operands = b, a, True
    if any(bd not in (1, od) for bd, od in zip(b.shape, ofm.shape)):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): operand shapes do not broadcast")
    return a, b, reversed_operands


def same_padding(in_size: int, out_size: int, stride: int, dilated_kernel: int) -> tuple[int, int]:
    """TFLite's SAME padding (before, after): the extra row or column goes after."""
    total = max((out_size - 1) * stride + dilated_kernel - in_size, 0)
    return total // 2, total - total // 2


def kernel_padding(v: OperatorView, ifm: FeatureMapView, ofm: FeatureMapView) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) of a convolution's or pool's window over `ifm`: TFLite's SAME
    padding, or none (VALID)."""
    if v.options.get("padding", "VALID") != "SAME":
        return (0, 0, 0, 0)
    k = v.kernel
    assert k is not None
    top, bottom = same_padding(ifm.shape[0], ofm.shape[0], k.stride_h, k.dilated_height)
    left, right = same_padding(ifm.shape[1], ofm.shape[1], k.stride_w, k.dilated_width)
    return (top, left, bottom, right)


def pool_copy(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
              clamp: dict | None = None, requantize: bool = True, tags: dict | None = None) -> None:
    """A 1x1 average pool: dst = clamp(rescale(src)). TFLite's requantizing kernels
    (QUANTIZE's Requantize, the RELUs) rescale with MultiplyByQuantizedMultiplier, which
    rounds twice: TFL rounding (one rounding, NATURAL, is off by one on about a quarter of
    the codes for some scale pairs). With equal scales there is no rescale. `tags`: registers
    the emitter does not read, for the planner (a transpose's axes)."""
    if requantize and not math.isclose(src.scale, dst.scale, rel_tol=0, abs_tol=0):
        ofm_scale, rounding = rescale_scale(src.scale, dst.scale), "TFL"
    else:
        ofm_scale, rounding = (1, 0), "NATURAL"
    tmin, tmax = TYPE_RANGE[dst.dtype]
    registers = dict(
        sub_op="AVERAGE", kernel=kernel_record(1, 1, (1, 1), (1, 1)), padding=(0, 0, 0, 0),
        activation=clamp or dict(function=0, clip_range=0, min=tmin, max=tmax), rounding=rounding,
        global_scale=True, ofm_scale=ofm_scale, **(tags or {}),
    )
    lw.add(LoweredOperation("pool", "avg_pool", name, (index,), src, dst, registers=registers))


def channel_selection(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
                      picks: np.ndarray) -> None:
    """dst channel k = src channel picks[k], raw: a 1x1 convolution by 0/1 weights. Every
    output is one input times 1, exact at unit scale, and the mostly-zero weights compress
    well; a channel cannot be addressed with a stride in NHWC, so this is how the NPU permutes
    or picks channels at full depth (a depth-1 copy per channel is its slowest shape)."""
    out_channels, in_channels = len(picks), src.shape[2]
    ohwi = np.zeros((out_channels, 1, 1, in_channels), np.int8)
    ohwi[np.arange(out_channels), 0, 0, np.asarray(picks)] = 1
    # Unit scale, as the convolution lowering would derive it (16-bit inputs round with the
    # reduced multiplier); any exact identity would do.
    scale = convolution_scales(1.0, np.ones(1), 1.0, float32_product=False, reduced=src.dtype == "int16")[0]
    zeros = np.zeros(out_channels, np.int64)
    volume = WeightVolume(ohwi, zeros, zeros, channel_scales(*scale, out_channels), False)
    registers = dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0), activation=full_range(dst.dtype),
                     rounding="TFL", global_scale=False, ofm_scale=(0, 0), acc_format=1 if src.dtype == "int16" else 0)
    lw.add(LoweredOperation("conv", "conv2d", name, (index,), replace(src, zero_point=0), replace(dst, zero_point=0),
                            weights=volume, registers=registers))


def weight_volume(v: OperatorView, ohwi: np.ndarray, *, depthwise: bool, float32_product: bool) -> WeightVolume:
    """A weighted operator's OHWI weights (as the NPU applies them) with their zero points, the
    bias and the per-OFM-channel rescale input * weight / output, the reference's way: int16
    with an int64 accumulator rounds with the reduced 16-bit multiplier; `float32_product`
    where TFLite forms one layer-wide product in float32 (see `convolution_scales`)."""
    ifm, w, ofm, bias_t = v.ifm, v.weights, v.ofm, v.bias
    assert ifm is not None and w is not None and w.quantization is not None and ofm is not None
    out_channels = ohwi.shape[0]
    bias = (np.zeros(out_channels, dtype=np.int64) if bias_t is None
            else np.asarray(bias_t.data).astype(np.int64).reshape(-1))
    # TRANSPOSE_CONV's 16x8 kernel, and TFLM's FULLY_CONNECTED (the judge of a 16x8 one,
    # `reference.MICRO_OPERATORS`), accumulate in int64 with or without a bias.
    wide = bias_t.dtype == "int64" if bias_t is not None else v.opcode in ("TRANSPOSE_CONV", "FULLY_CONNECTED")
    reduced = ifm.dtype == "int16" and wide
    scales = convolution_scales(float(ifm.quantization.scale[0]), np.asarray(w.quantization.scale, np.float32),
                                float(ofm.quantization.scale[0]), float32_product=float32_product, reduced=reduced)
    if len(scales) == 1:
        scales = np.repeat(scales, out_channels, axis=0)
    wzp = np.asarray(w.quantization.zero_point, dtype=np.int64).reshape(-1)
    zps = wzp if wzp.size > 1 else np.full(out_channels, int(wzp[0]), dtype=np.int64)
    return WeightVolume(ohwi, zps, bias, scales, depthwise)


class OperationBuilder:
    """Appends operator `index`'s NPU operations to a lowering, with scratch buffers named after it."""

    def __init__(self, lw: LoweringContext, index: int, opcode: str) -> None:
        self.lw, self.index, self.opcode = lw, index, opcode

    def scratch(self, name: str, shape: tuple[int, int, int], dtype: str, zero_point: int = 0,
                scale: float = 1.0) -> FeatureMapView:
        return self.lw.scratch(self.index, name, shape, dtype, zero_point, scale)

    def _add(self, kind: str, cost_kind: str, name: str, ifm, ofm, ifm2=None, lut=None, **registers: Any) -> None:
        self.lw.add(LoweredOperation(kind, cost_kind, f"{self.index}:{self.opcode}({name})", (self.index,), ifm, ofm,
                                     ifm2=ifm2, registers=registers, lut=lut))

    def pool(self, mode: str, ifm: FeatureMapView, ofm: FeatureMapView, kernel: tuple[int, int] = (1, 1), *,
             rounding: str = "TFL", ofm_scale: tuple[int, int] = (1, 0), activation: dict | None = None) -> None:
        self._add("pool", POOL_COST[mode], mode.lower(), ifm, ofm, sub_op=mode, kernel=kernel_record(*kernel),
                  padding=(0, 0, 0, 0), activation=activation or full_range(ofm.dtype), rounding=rounding,
                  global_scale=True, ofm_scale=ofm_scale)

    def elementwise(self, mode: str, a: FeatureMapView, b: FeatureMapView | None, ofm: FeatureMapView, *,
                    rounding: str = "TFL", global_scale: bool = True, ofm_scale: tuple[int, int] = (1, 0),
                    activation: dict | None = None, lut: bytes | None = None, wrap: bool = False,
                    operand_scales: tuple[tuple[int, ...], tuple[int, ...]] | None = None) -> None:
        """`ofm = a <mode> b`, operands unscaled (OPA and OPB 1), or, on the Ethos-U85, scaled by
        `operand_scales` (IFM_SCALE and IFM2_SCALE of a and b: emit/ethos_u85). The NPU
        broadcasts only its second operand: a smaller first operand is swapped in as the IFM2
        with REVERSED_OPERANDS. Where both are smaller, the Ethos-U85 broadcasts the first too
        (`ifm_broadcast`, its IFM_BROADCAST); the U55/U65 cannot. `wrap`: the OFM keeps the
        result's low bits, unclamped (`WRAP_OFM`; the U85's only)."""
        reversed_operands = b is not None and a.shape != ofm.shape and b.shape == ofm.shape
        if reversed_operands:
            a, b = b, a
            if operand_scales is not None:
                operand_scales = operand_scales[::-1]
        registers: dict[str, Any] = dict(
            sub_op=mode, kernel=kernel_record(1, 1), padding=(0, 0, 0, 0),
            activation=activation or full_range(ofm.dtype), rounding=rounding, global_scale=global_scale,
            ofm_scale=ofm_scale, opa_scale=(1, 0), opb_scale=1, ifm_scale_mode=0)
        if wrap:
            registers[WRAP_OFM] = True
        if b is not None:
            registers.update(broadcast=tuple(bd != od for bd, od in zip(b.shape, ofm.shape)),
                             reversed_operands=reversed_operands, ifm2_scalar=None)
            if a.shape != ofm.shape:
                if not Accelerator.is_u85(self.lw.accelerator):
                    raise UnsupportedError(f"operator {self.index} ({self.opcode}): both operands broadcast, and "
                                           "the NPU broadcasts only its second")
                registers["ifm_broadcast"] = tuple(ad != od for ad, od in zip(a.shape, ofm.shape))
        if operand_scales is not None:
            registers["operand_scales"] = tuple(tuple(s) for s in operand_scales)
        self._add("elementwise", ELEMENTWISE_COST.get(mode, "maximum"), mode.lower(), a, ofm, ifm2=b, lut=lut,
                  **registers)

    def multiply(self, a: FeatureMapView, b: FeatureMapView, ofm: FeatureMapView) -> None:
        """gemmlowp's fixed-point product, SaturatingRoundingDoublingHighMul: a 32-bit MUL
        keeps only the shift of its output scale, here 31 with TFL rounding."""
        self.elementwise("MUL", a, b, ofm, ofm_scale=(1 << 30, 31))
