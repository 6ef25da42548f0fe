"""Fixed-point rescaling as the NPU's output and operand units apply it.

The NPU rescales with a 32-bit multiplier and a 6-bit right shift: ``(acc * scale) >> shift``
with the rounding the operation's register selects. These functions turn TFLite's float
scales into those pairs the way TFLite's reference kernels do (double precision, the
significand rounded half away from zero), so that the integer results match the reference
interpreter bit for bit. The formulas are the ones Vela uses (its ``scaling.py``): matching
them is what makes the NPU's rounding equal TFLite's.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import UnsupportedError

TFLITE_MAX_SHIFT = 62  # TFLite's QuantizeMultiplier zeroes smaller multipliers (exponent < -31)
# Scales whose (multiplier, shift) needs no correction but a carry (`convolution_scales`): from
# 2**-32 (exponent -31, a shift of 62) up to 2**30 (a shift of 1, or 0 after a carry).
PLAIN_SCALES = (2.0 ** -32, 2.0 ** 30)


def round_half_away(x: float) -> int:
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def quantise_scale(scale: float) -> tuple[int, int]:
    """(multiplier, shift) with ``scale == multiplier * 2**-shift`` and a 31-bit multiplier.

    A scale too small or too large for the 6-bit shift cannot be represented: TFLite would
    flush it to zero, the NPU cannot express it, so it is an error rather than a silent 0.
    """
    if scale == 0.0:
        return 0, 0
    significand, exponent = math.frexp(float(scale))
    multiplier = round_half_away(significand * (1 << 31))
    shift = 31 - exponent
    if multiplier == 1 << 31:  # the significand rounded up to 1.0
        multiplier >>= 1
        shift -= 1
    if shift > TFLITE_MAX_SHIFT:
        # TFLite flushes a multiplier this small to zero (QuantizeMultiplier); so does the NPU
        # with a zero scale, and the results agree.
        return 0, 0
    if shift < 0:
        raise UnsupportedError(f"rescale factor {scale:.6g} needs a left shift of {-shift}; the NPU only shifts right")
    return multiplier, shift


def reduced_quantise_scale(scale: float) -> tuple[int, int]:
    """The 16-bit multiplier TFLite's int16x8 kernels with 64-bit bias use (rounded from the 31-bit one)."""
    multiplier, shift = quantise_scale(scale)
    reduced = (multiplier + (1 << 15)) >> 16 if multiplier < (32767 << 16) else 32767
    return reduced, shift - 16


def convolution_scales(ifm_scale: float, weight_scales: np.ndarray, ofm_scale: float, *, float32_product: bool,
                       reduced: bool) -> np.ndarray:
    """Per-OFM-channel (multiplier, shift) of a convolution, ifm * weight / ofm: an int64 array of
    one (multiplier, shift) row per weight scale.

    TFLite forms the product in float32 where it uses one scale for the whole layer (uint8
    models, per-tensor FULLY_CONNECTED: ``GetQuantizedConvolutionMultipler``) and in double
    for per-channel scales; the multiplier's last bits depend on which.
    """
    w = np.asarray(weight_scales, dtype=np.float32).reshape(-1)
    if float32_product:
        real = (np.float32(ifm_scale) * w).astype(np.float64) / np.float64(np.float32(ofm_scale))
    else:
        real = np.multiply(np.float64(np.float32(ifm_scale)), w, dtype=np.float64) / np.float64(np.float32(ofm_scale))
    if reduced:
        return np.array([reduced_quantise_scale(float(x)) for x in real], dtype=np.int64).reshape(-1, 2)
    # quantise_scale over the whole array: frexp, the significand rounded half away from zero.
    # Each step costs about a microsecond per call, whatever the length (a model lowers one such
    # array per convolution): the rare corrections (a significand rounded up to 1.0, a zero,
    # negative or too small a scale, a left shift) are applied only where some element needs them.
    significand, exponent = np.frexp(real)
    # Scales in [2**-32, 2**30) (a real model's) are positive and shift right by 0 to 62, one
    # less after a carry: two reductions tell, and spare the checks for the others (a NaN fails them).
    plain = len(real) > 0 and PLAIN_SCALES[0] <= np.minimum.reduce(real) and np.maximum.reduce(real) < PLAIN_SCALES[1]
    if plain:  # whole numbers up to 2**31, exact as floats
        multiplier = np.floor(significand * (1 << 31) + 0.5)
    else:
        multiplier = np.floor(np.abs(significand) * (1 << 31) + 0.5).astype(np.int64)
        if not (significand > 0).all():  # a zero, a negative (or NaN) scale: the significand's sign
            multiplier *= np.sign(significand).astype(np.int64)
    shift = 31 - exponent
    if np.maximum.reduce(multiplier, initial=0) == 1 << 31:  # a significand rounded up to 1.0
        carry = multiplier == (1 << 31)
        multiplier[carry] = 1 << 30
        shift[carry] -= 1
    if not plain:
        zero = (real == 0.0) | (shift > TFLITE_MAX_SHIFT)
        if zero.any():
            multiplier[zero], shift[zero] = 0, 0
        bad = shift < 0  # a zeroed scale's shift is 0
        if bad.any():
            quantise_scale(float(real[np.argmax(bad)]))  # raises with the message for that scale
    out = np.empty((len(real), 2), dtype=np.int64)  # np.stack's result, without its Python-level checks
    out[:, 0], out[:, 1] = multiplier, shift
    return out


def pooling_scale(kernel_elements: int, rescale_bits: int = 0) -> tuple[int, int]:
    """(multiplier, shift) that divides a sum of `kernel_elements` values, as TFLite's average pool rounds it."""
    _, k = math.frexp(kernel_elements - 1)
    n = 31 - rescale_bits
    return ((1 << (n + k)) + (1 << k)) // kernel_elements, n + k


def average_pool_scale(kernel_elements: int, padding: tuple[int, int, int, int]) -> tuple[int, int]:
    """The OFM scale of an average pool between equal quantizations, by its padding. With any
    padding the NPU itself divides each window by its valid (non-padding) elements, and the
    scale is 1 (as Vela emits it); without, the NPU only sums, and the scale divides. The
    padding is that of the operation as run: a stripe of a padded pool that pads nothing must
    divide through its scale."""
    return (1, 0) if any(padding) else pooling_scale(kernel_elements)


def rescale_scale(ifm_scale: float, ofm_scale: float) -> tuple[int, int]:
    """A plain requantization ifm -> ofm (QUANTIZE, copies between different quantizations)."""
    return quantise_scale(float(np.float32(ifm_scale)) / float(np.float32(ofm_scale)))


def multiply_real(ifm_scale: float, ifm2_scale: float, ofm_scale: float) -> float:
    """MUL's real output multiplier; TFLite forms it in float32."""
    return float(np.float32(ifm_scale) * np.float32(ifm2_scale) / np.float32(ofm_scale))


def multiply_scale(ifm_scale: float, ifm2_scale: float, ofm_scale: float) -> tuple[int, int]:
    """MUL's output scale (a right shift only)."""
    return quantise_scale(multiply_real(ifm_scale, ifm2_scale, ofm_scale))


def add_sub_scales(ifm_scale: float, ifm2_scale: float, ofm_scale: float, bits: int) -> dict:
    """Operand and output scaling of ADD/SUB, TFLite's way: both inputs are brought to twice the
    larger input scale with ``bits``-dependent headroom (20 bits for 8-bit inputs, 15 for
    16-bit); the NPU scales only one operand (the smaller-scaled one) with the 32-bit OPA
    scale and shifts the other, then rescales the sum.

    Returns the register values: ``opa_scale`` (multiplier, shift), ``opb_scale``,
    ``ifm_scale_mode`` (1: the IFM is scaled, 2: the IFM2 is), ``ofm_scale`` (multiplier, shift).
    """
    a, b, o = (float(np.float32(s)) for s in (ifm_scale, ifm2_scale, ofm_scale))
    headroom = 20 if bits == 8 else 15
    big, small = max(a, b), min(a, b)
    operand = quantise_scale(small * (1 << headroom) / (2 * big))
    ofm = quantise_scale(2 * big / (o * (1 << headroom)))
    return dict(opa_scale=operand, opb_scale=0, ifm_scale_mode=1 if a < b else 2, ofm_scale=ofm)


def quantize_value(real: float, scale: float, zero_point: int) -> int:
    """TFLite's Quantize: zero point + the real value in scale units, rounded half away from zero."""
    return int(zero_point) + round_half_away(float(real) / float(np.float32(scale)))
