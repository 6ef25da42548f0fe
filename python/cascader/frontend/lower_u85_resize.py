"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR on the Ethos-U85: one resize operation
(NPU_OP_RESIZE), as Vela 5.2's U85 backend runs them, where its registers give TFLite's
reference result exactly; elsewhere the U55/U65's lowering (`lower_resize`) applies.

Along each axis, output position p sits at IFM position (p d + offset) / n (RESIZE_X/Y); the
NEAREST mode takes the IFM element nearest to it (floor of the position plus 1/2), BILINEAR
blends the two neighbours by the remainder in 1/n, the edge clamped (arch/ethos_u85). TFLite's
kernels map p so (scale in / out, or (in - 1) / (out - 1) with align_corners, reduced to
in' / out'):
- NEAREST: floor(p in / out) is n = 2 out', d = 2 in', offset -out'; with half-pixel centres
  floor((p + 1/2) in / out) is offset in' - out'; with align_corners round(p in / out) (half up)
  is n = out', d = in', offset 0. An offset of a step or more (a downscale's half-pixel
  centres) moves into the IFM's start, as Vela's does. TFLite computes these in float32: the
  registers are kept only where every output position's source is the float kernel's.
- BILINEAR (TFLite's int8/int16 kernel steps in 1/1024 of a pixel, scale_10 = round(1024 in /
  out)): exact where out / in (or its align_corners ratio) is 2^k, k <= 10, and with
  half-pixel centres k <= 9 (scale_10 / 2 is then exact): n = 2^k, d = 1, offset 0; with
  half-pixel centres n = 2^(k+1), d = 2, offset 1 - 2^k. Vela takes the same power-of-two
  scales (up to 1024, and 2048 without half-pixel centres, where TFLite's 10-bit steps are no
  longer exact and the operator stays on the CPU).
The unit's products carry 16 fractional bits and 1/(n_y n_x) of weight, which OFM_SCALE's shift
removes (16 + log2(n_y n_x), multiplier 1), rounding half away from zero as TFLite's
bilinear does (SYMMETRIC); 16-bit maps take the 48-bit accumulators, as Vela's. TFLite resizes the raw codes (zero points included; its rounding is
not symmetric about them), so both maps are read with zero point 0.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from .lowered import FeatureMapView, LoweredOperation, full_range, kernel_record
from .lowering_context import LoweringContext
from .operator_view import OperatorView

RESIZE_MODES = {"BILINEAR": 0, "NEAREST": 2}  # NPU_OP_RESIZE's parameter
SYMMETRIC = 3  # OFM_SCALE's round mode: half away from zero
_FRACTION_BITS = 16  # the resize unit's products
_SCALE_N_MAX = 2048  # RESIZE_*_SCALE_N_M1 is 11 bits
_STEP_MAX = 16  # the step's integer part is 4 bits
_BILINEAR_BITS = 10  # TFLite's integer bilinear kernel (int8, int16) steps in 1/1024
_FLOAT_BILINEAR_BITS = 8  # its float kernel (uint8) is exact to 2^8 (`_bilinear_axis`)


def lower_u85_resize(lw: LoweringContext, v: OperatorView, src: FeatureMapView, dst: FeatureMapView,
                     bilinear: bool) -> bool:
    """Lower the resize as one U85 resize operation if the target is a U85 and its registers
    give TFLite's result; True if it did."""
    if not Accelerator.is_u85(lw.accelerator):
        return False
    if src.dtype != dst.dtype or src.dtype not in ("int8", "uint8", "int16") or src.layout != "NHWC":
        return False
    align = bool(v.options.get("align_corners", False))
    half = bool(v.options.get("half_pixel_centers", False))
    if align and half:
        return False
    (ih, iw, _), (oh, ow, _) = src.shape, dst.shape
    axes = [_bilinear_axis(i, o, align, half, src.dtype) if bilinear else _nearest_axis(i, o, align, half)
            for i, o in ((ih, oh), (iw, ow))]
    if any(a is None for a in axes):
        return False
    (ny, dy, oy, skip_y), (nx, dx, ox, skip_x) = axes
    # The rows and columns no output reads (a downscale's offset past one step) are skipped.
    src = replace(src, shape=(ih - skip_y, iw - skip_x, src.shape[2]),
                  offset=src.offset + skip_y * src.strides[0] + skip_x * src.strides[1])
    weight_bits = int(math.log2(ny * nx)) if bilinear else 0
    registers = dict(
        sub_op="BILINEAR" if bilinear else "NEAREST", kernel=kernel_record(src.shape[0], src.shape[1], (1, 1), (1, 1)),
        padding=(0, 0, 0, 0), activation=full_range(dst.dtype), rounding="TFL", global_scale=True,
        ofm_scale=(1, _FRACTION_BITS + weight_bits), resize_mode=RESIZE_MODES["BILINEAR" if bilinear else "NEAREST"],
        resize=((ny, dy, oy), (nx, dx, ox)), ofm_round_mode=SYMMETRIC, acc_format=1 if src.dtype == "int16" else 0,
    )
    lw.add(LoweredOperation("resize", "maximum", f"{v.index}:{v.opcode}", (v.index,), replace(src, zero_point=0),
                            replace(dst, zero_point=0), registers=registers))
    return True


def resize_description(described, op, accelerator: Accelerator):
    """The cycle model's NpuOp of a resize (`described`, an output-unit pass over its IFM) as
    the U85 runs it, with Vela's block for it (arch/ethos_u85/block_search)."""
    from .. import _core

    nx, dx, _ = op.registers["resize"][1]
    return _core.u85_resize_description(described, accelerator._config, nx, dx)


def _nearest_axis(size: int, out: int, align: bool, half: bool) -> tuple[int, int, int, int] | None:
    """(n, d, offset, skipped IFM rows) of NEAREST along an axis of `size` resized to `out`, or
    None. An offset of a step or more (a downscale's half-pixel centres) moves into the IFM's
    start, as Vela's registers do."""
    if size == 1:
        return (1, 1, 0, 0)
    if align and out > 1:
        g = math.gcd(size - 1, out - 1)
        n, d, offset = (out - 1) // g, (size - 1) // g, 0
        scale = np.float32(size - 1) / np.float32(out - 1)
    else:  # TFLite ignores align_corners for one output pixel
        g = math.gcd(size, out)
        n, d = 2 * out // g, 2 * size // g
        offset = (size - out) // g if half else -out // g
        scale = np.float32(size) / np.float32(out)
    skip = max(offset // n, 0)
    offset -= skip * n
    if not _fits(n, d, offset):
        return None
    # TFLite's float32 sources (reference_ops::ResizeNearestNeighbor), against the registers'.
    at = (np.arange(out, dtype=np.float32) + np.float32(0.5 if half else 0.0)) * scale
    # TfLiteRound (half away from zero) of a non-negative float32, exactly in float64
    expected = np.minimum(np.floor(at.astype(np.float64) + 0.5) if align and out > 1 else np.floor(at), size - 1)
    expected = np.maximum(expected, 0).astype(np.int64)
    twice = 2 * (np.arange(out, dtype=np.int64) * d + offset) + n
    got = np.clip(np.floor_divide(twice, 2 * n), 0, size - skip - 1) + skip
    return (n, d, offset, skip) if np.array_equal(expected, got) else None


def _bilinear_axis(size: int, out: int, align: bool, half: bool, dtype: str) -> tuple[int, int, int, int] | None:
    """(n, d, offset, 0 skipped IFM rows) of BILINEAR along an axis of `size` resized to `out`,
    or None. TFLite blends uint8 in float32 (reference_ops::ResizeBilinear): exact while a code
    times the weights' 2^-2k steps stays within its 24-bit mantissa, k <= 8."""
    if size == 1:
        return (1, 1, 0, 0)
    num, den = (out - 1, size - 1) if align else (out, size)
    if num < den or num % den:
        return None
    factor = num // den
    k = factor.bit_length() - 1
    most = _FLOAT_BILINEAR_BITS if dtype == "uint8" else _BILINEAR_BITS - (1 if half else 0)
    if factor != 1 << k or k > most:
        return None
    if half:
        return _checked(2 << k, 2, 1 - (1 << k))
    return _checked(1 << k, 1, 0)


def _checked(n: int, d: int, offset: int) -> tuple[int, int, int, int] | None:
    return (n, d, offset, 0) if _fits(n, d, offset) else None


def _fits(n: int, d: int, offset: int) -> bool:
    """Whether the registers hold the axis (and the unit takes its offset: within one step)."""
    return 1 <= n <= _SCALE_N_MAX and 1 <= d < _STEP_MAX * n and -n <= offset < n
