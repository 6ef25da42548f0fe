"""gemmlowp's fixed-point arithmetic, vectorized over int64 numpy arrays of int32 values.

TFLite's reference kernels for SOFTMAX, LOGISTIC and TANH compute in this arithmetic; the
NPU lowerings of those operators must reproduce their results bit for bit. A lookup table
(the exponentials of SOFTMAX, an int8 activation's 256 outputs) is computed here with exactly
the reference's operations, so the NPU's table lookups return exactly what the reference
kernel would. Names follow gemmlowp (`fixedpoint.h`): a ``FixedPoint<int32, I>`` value is its
raw int32 with I integer bits.
"""

from __future__ import annotations

import math

import numpy as np

from .quantization import round_half_away

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """round(a * b / 2^31), ties away from zero; INT32_MIN * INT32_MIN saturates."""
    a, b = _i64(a), _i64(b)
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    ab = a * b  # |ab| <= 2^62: exact in int64
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    # C++ integer division truncates toward zero.
    q = ab + nudge
    high = np.where(q >= 0, q >> 31, -((-q) >> 31))
    return np.where(overflow, INT32_MAX, high)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """x / 2^exponent rounded to nearest, ties away from zero (gemmlowp's RoundingDivideByPOT)."""
    x, exponent = _i64(x), _i64(exponent)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def saturating_rounding_multiply_by_pot(x, exponent: int) -> np.ndarray:
    """x * 2^exponent: a saturating left shift, or a rounding right shift for exponent < 0."""
    x = _i64(x)
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    return np.clip(x << exponent, INT32_MIN, INT32_MAX)


def rescale(x, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """gemmlowp's Rescale: the same real value with another number of integer bits."""
    return saturating_rounding_multiply_by_pot(x, src_integer_bits - dst_integer_bits)


def _wrap32(x: np.ndarray) -> np.ndarray:
    """int32 wrap-around of gemmlowp's plain (non-saturating) additions."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a: np.ndarray) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: a Taylor expansion around -1/8."""
    constant_term = 1895147668  # exp(-1/8)
    constant_1_over_3 = 715827883
    x = _wrap32(a + (1 << 28))  # a + 1/8
    x2 = saturating_rounding_doubling_high_mul(x, x)
    x3 = saturating_rounding_doubling_high_mul(x2, x)
    x4 = saturating_rounding_doubling_high_mul(x2, x2)
    x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2)
    poly = saturating_rounding_multiply_by_pot(
        _wrap32(saturating_rounding_doubling_high_mul(_wrap32(x4_over_4 + x3), constant_1_over_3) + x2), -1)
    return _wrap32(constant_term + saturating_rounding_doubling_high_mul(constant_term, _wrap32(x + poly)))


# exp(-2^k) in Q0.31 for the barrel shifter, k = -2 .. 4.
_EXP_MULTIPLIERS = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
                    (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int) -> np.ndarray:
    """exp(a) for a <= 0 given with `integer_bits` integer bits; the result is Q0.31."""
    a = _i64(a)
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_one_quarter = _wrap32((a & (one_quarter - 1)) - one_quarter)
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        rescale(a_mod_quarter_minus_one_quarter, integer_bits, 0))
    remainder = _wrap32(a_mod_quarter_minus_one_quarter - a)
    for exponent, multiplier in _EXP_MULTIPLIERS:
        if integer_bits > exponent:
            bit = 1 << (fractional_bits + exponent)
            result = np.where(remainder & bit, saturating_rounding_doubling_high_mul(result, multiplier), result)
    if integer_bits > 5:
        clamp = -(1 << (fractional_bits + 5))  # exp below -32 is 0 in Q0.31
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, INT32_MAX, result)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: (Q0.31 multiplier, exponent) with real = m * 2^(exponent - 31);
    multipliers below 2^-31 flush to zero."""
    if real == 0.0:
        return 0, 0
    significand, exponent = math.frexp(real)
    q = round_half_away(significand * (1 << 31))
    if q == 1 << 31:
        q //= 2
        exponent += 1
    if exponent < -31:
        return 0, 0
    return q, exponent


def quantize_multiplier_greater_than_one(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplierGreaterThanOne: (multiplier, left shift) of real > 1."""
    if real <= 1.0:
        raise ValueError(f"multiplier {real} is not greater than one")
    return quantize_multiplier(real)


def multiply_by_quantized_multiplier_greater_than_one(x, multiplier: int, left_shift: int) -> np.ndarray:
    return saturating_rounding_doubling_high_mul(_i64(x) * (1 << left_shift), multiplier)


def multiply_by_quantized_multiplier(x, multiplier: int, exponent: int) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier (two roundings: the high multiply, then the shift)."""
    left, right = max(exponent, 0), max(-exponent, 0)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(_i64(x) * (1 << left), multiplier), right)


# --- 16-bit: the arithmetic of TFLite's int8 HARD_SWISH ------------------------------------


def wrap16(x) -> np.ndarray:
    """int16 wrap-around of a C++ narrowing store."""
    return ((_i64(x) + (1 << 15)) & 0xFFFF) - (1 << 15)


def downscale_int32_to_int16_multiplier(multiplier: int) -> int:
    """TFLite's DownScaleInt32ToInt16Multiplier: the Q0.15 multiplier nearest a Q0.31 one."""
    if multiplier >= INT32_MAX - (1 << 15):
        return (1 << 15) - 1
    return (multiplier + (1 << 15)) >> 16


def saturating_rounding_doubling_high_mul16(a, b) -> np.ndarray:
    a, b = _i64(a), _i64(b)
    ab = a * b
    q = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = np.where(q >= 0, q >> 15, -((-q) >> 15))  # truncating division
    return np.where((a == -(1 << 15)) & (b == -(1 << 15)), (1 << 15) - 1, wrap16(high))


def saturating_doubling_high_mul16(a, b) -> np.ndarray:
    """As above without the rounding nudge (TFLite's hard_swish.h)."""
    a, b = _i64(a), _i64(b)
    ab = a * b
    high = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((a == -(1 << 15)) & (b == -(1 << 15)), (1 << 15) - 1, wrap16(high))


def saturating_left_shift16(x, amount: int) -> np.ndarray:
    return np.clip(_i64(x) * (1 << amount), -(1 << 15), (1 << 15) - 1)


# --- inverse square root: the arithmetic of TFLite's int8 RSQRT ------------------------------


def inv_sqrt_quantized_multiplier_exp(x: int) -> tuple[int, int]:
    """TFLite's GetInvSqrtQuantizedMultiplierExp(x, kReverseShift): (Q0.31 multiplier, exponent)
    of 1 / sqrt(x) by five Newton-Raphson steps in Q3.28, exponent positive to the left."""
    if x <= 1:
        return INT32_MAX, 0
    shift = 11
    while x >= 1 << 29:
        x //= 4
        shift += 1
    pairs = (32 - x.bit_length() - 1) // 2 - 1  # (CountLeadingZeros - 1) / 2 - 1
    shift -= pairs
    x <<= 2 * pairs
    half_input = int(rounding_divide_by_pot(x >> 1, 1))
    half_three = (1 << 28) + (1 << 27)  # 1.5 in Q3.28
    est = 1 << 28  # 1.0
    for _ in range(5):
        cube = saturating_rounding_multiply_by_pot(saturating_rounding_doubling_high_mul(
            saturating_rounding_doubling_high_mul(est, est), est), 6)  # Q9 -> Q3
        diff = _wrap32(saturating_rounding_doubling_high_mul(half_three, est)
                       - saturating_rounding_doubling_high_mul(half_input, cube))
        est = int(saturating_rounding_multiply_by_pot(diff, 3))  # Q6 -> Q3
    est = int(saturating_rounding_doubling_high_mul(est, 1518500250))  # x sqrt(2) / 2
    if shift < 0:
        est <<= -shift
        shift = 0
    return est, -shift
