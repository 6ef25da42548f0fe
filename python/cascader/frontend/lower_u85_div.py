"""DIV on the Ethos-U85, bit-exact.

- int32: TFLite's reference kernel divides the values with C++'s ``/``, which truncates toward
  zero (-7 / 2 is -3), and clamps to the fused activation's range. The U85's DIV mode divides
  the same way: one operation. A zero divisor fails the reference kernel (LiteRT checks every
  divisor); a constant one with a zero stays on the CPU, which fails as the reference does;
  a zero computed at run time is the NPU's (undefined) result. INT32_MIN / -1 overflows in the
  reference too.
- int8, uint8 (a constant divisor): TFLite's kernel (``DivElementwise``) forms, per divisor
  value d, a Q0.31 reciprocal by Newton-Raphson (``GetReciprocal``), multiplies the
  normalized x - zp by it, then rescales by s1 / (s2 s_out) (`_output_rescale`) with a shift
  that depends on x's leading sign bits. Past a shift of 31 (a large divisor and a small x)
  the kernel's RoundingDivideByPOT is undefined in C++; the compiled kernel masks the shift to
  5 bits and its mask to all ones, so 0 / d gives zp_out + 1 and small quotients a wrapped
  value: `reference_quotients` reproduces that, value by value, as the judge computes it. For
  one divisor value the output is a function of the 256 input codes, so:
  - where, for every channel, one rescale of (x - zp) * w (w = 127 sign(d) mostly) by a per-channel multiplier
    reproduces all 256 outputs (checked exhaustively at compile time), one 1x1 depthwise
    convolution does the division (the common case: divisors and scales of a trained model);
  - otherwise a 256-entry table per run of channels of one divisor value (`lower_lut`'s
    lookup), which reproduces anything.
- int16 (a constant divisor): LiteRT's reference kernel divides int16 as it does uint8 (the
  same reciprocal, leading-sign-bit shift, wrapped shifts past 31 and float32 output rescale:
  `reference_quotients` reproduces it code for code), and the U85 runs it as one 16x8 depthwise
  convolution, where, for every divisor value, a rescale of the 48-bit accumulators (an int8
  weight, a 15-bit multiplier and one half-up rounding, TFLite's 16x8 output stage) gives all
  65536 quotients (`_wide_rescale`, checked exhaustively at compile time). Otherwise (a large
  divisor at some scales, whose wrapped shifts no rescale follows) it stays on the CPU, the
  divisor named: no table holds 65536 arbitrary entries (the U85's int16 tables interpolate).
- A divisor computed at run time stays on the CPU, whatever the type: TFLite's quotient is, per
  element, the dividend normalized by its leading sign bits times a Q0.31 Newton-Raphson
  reciprocal of that element's divisor, rescaled by a shift that depends on both (and wraps past
  31); the NPU's DIV divides the codes, without the reciprocal's rounding or the scales (Vela
  5.2 runs it so, and departs from TFLite), and a per-element reciprocal and variable shift in
  the U85's 32-bit elementwise modes, rounding as gemmlowp's each step, is not built.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from . import fixed_point as fp
from .lower_lut import table_lookup
from .lower_u85_compare import NPU_BOOLEAN_TYPE
from .lower_u85_select import broadcast_step, int8_codes, raw, require_u85
from .lowered import TYPE_RANGE, FeatureMapView, LoweredOperation, WeightVolume, kernel_record
from .lowering_context import LoweringContext
from .operation_builder import FUSED_ACTIVATIONS, OperationBuilder, fused_clamp
from .operator_view import OperatorView
from .quantization import quantise_scale

_Q0_31_ONE = fp.INT32_MAX  # gemmlowp's F0::One(): 1.0 is not representable in Q0.31
_MULTIPLIER_SEARCH = 8  # multipliers tried either side of the nearest one, per channel and weight
_WEIGHTS = (127, 1, 64, 100)
# Codes whose quotients no rescale reproduces (the reference's undefined shifts: 0 / d gives
# zp_out + 1 past them) patched after the convolution, each in four elementwise operations;
# more, and the tables are faster.
_PATCHED_CODES = 2  # the depthwise weights tried (magnitudes), the most precise first


def _clz32(x: np.ndarray) -> np.ndarray:
    """CountLeadingZeros of the 32-bit pattern of each value (32 for 0)."""
    u = np.asarray(x, np.int64) & 0xFFFFFFFF
    return 32 - np.array([int(v).bit_length() for v in u.reshape(-1)], np.int64).reshape(u.shape)


def _leading_sign_bits(x: np.ndarray) -> np.ndarray:
    """TFLite's CountLeadingSignBits of int32 values."""
    x = np.asarray(x, np.int64)
    return np.where(x >= 0, _clz32(x) - 1, np.where(x != fp.INT32_MIN, _clz32(2 * -x - 1), 0))


def _reciprocal(d: int) -> tuple[int, int]:
    """GetReciprocal(d, 31): (Q0.31 of 2^k / d for the k that normalizes d, bits over unit):
    gemmlowp's one_over_one_plus_x_for_x_in_0_1, three Newton-Raphson steps in Q2.29."""
    srdhm = fp.saturating_rounding_doubling_high_mul
    headroom = int(_clz32(np.array(d)))
    x = ((d << headroom) - (1 << 31)) & 0xFFFFFFFF
    x = x - (1 << 32) if x >= 1 << 31 else x
    total = x + _Q0_31_ONE  # RoundingHalfSum(x, One): (sum + sign) / 2, truncated, in int64
    total += 1 if total >= 0 else -1
    half = total // 2 if total >= 0 else -(-total // 2)
    estimate = 1515870810 + int(srdhm(half, -1010580540))  # 48/17 - 32/17 * half, Q2.29
    for _ in range(3):
        error = (1 << 29) - int(srdhm(half, estimate))
        estimate += int(fp.saturating_rounding_multiply_by_pot(srdhm(estimate, error), 2))
    return int(fp.saturating_rounding_multiply_by_pot(estimate, 1)), 31 - headroom


def _compiled_rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT as the reference is compiled (x86-64): an exponent past
    31 (undefined in C++) makes the mask (1ll << e) - 1 all ones in 32 bits and the shift
    e mod 32."""
    x, exponent = np.asarray(x, np.int64), np.asarray(exponent, np.int64)
    mask = ((np.int64(1) << np.minimum(exponent, 62)) - 1) & 0xFFFFFFFF
    mask = np.where(mask >= 1 << 31, mask - (1 << 32), mask)
    remainder = ((x & 0xFFFFFFFF) & (mask & 0xFFFFFFFF))
    remainder = np.where(remainder >= 1 << 31, remainder - (1 << 32), remainder)
    threshold = (mask >> 1) + (x < 0)
    return (x >> (exponent & 31)) + (remainder > threshold)


def reference_quotients(a: np.ndarray, d: int, multiplier: int, exponent: int) -> np.ndarray:
    """TFLite's quantized quotient of the values a = x - zp1 by d = y - zp2 (d != 0), before
    the output zero point and clamp: the sign moved to a, then a normalized by its leading sign
    bits times the reciprocal, then rescaled by (multiplier, exponent) and the shifts."""
    a = np.asarray(a, np.int64)
    if d < 0:
        a, d = -a, -d
    inverse, bits_over_unit = _reciprocal(d)
    headroom = _leading_sign_bits(a)
    quotient = fp.saturating_rounding_doubling_high_mul(a << headroom, inverse)
    total_shift = exponent - bits_over_unit - headroom
    return _compiled_rounding_divide_by_pot(fp.saturating_rounding_doubling_high_mul(quotient, multiplier),
                                            -total_shift)

def _divisor_per_channel(v: OperatorView, b: FeatureMapView, out: FeatureMapView) -> np.ndarray:
    """The constant divisor's codes, one per output channel; UnsupportedError where it is
    computed at run time or varies along H or W."""
    t = v.inputs[1]
    if t is None or not t.is_constant:
        raise UnsupportedError(f"operator {v.index} (DIV): an {out.dtype} divisor computed at run time (TFLite divides "
                               "through a rounded reciprocal of each divisor value, which the NPU's DIV of the codes "
                               "does not form)")
    if b.shape[:2] != (1, 1):
        raise UnsupportedError(f"operator {v.index} (DIV): an {out.dtype} divisor that varies along H or W")
    return np.broadcast_to(np.asarray(t.data).astype(np.int64).reshape(-1), (out.shape[2],))


def _channel_rescale(values: np.ndarray, target: np.ndarray, real: float, sign: int, clamp: tuple[int, int],
                     zero_point: int) -> tuple[tuple[int, int, int], np.ndarray]:
    """((weight, multiplier, shift), where it misses): the rescale of values * weight, plus the
    zero point and clamped, that gives `target` for the most values (every one, mostly). A large
    weight keeps the accumulator's low bits through the rescale's first rounding (at bit 31 of
    the product), which a small quotient needs where the reference normalizes x first."""
    best = None
    for weight in _WEIGHTS:
        m0, shift = quantise_scale(real / weight)
        for m in sorted(range(m0 - _MULTIPLIER_SEARCH, m0 + _MULTIPLIER_SEARCH + 1), key=lambda k: abs(k - m0)):
            if not (1 << 30) <= m < (1 << 31):
                continue
            got = np.clip(fp.multiply_by_quantized_multiplier(sign * weight * values, m, 31 - shift) + zero_point,
                          *clamp)
            misses = got != target
            if best is None or misses.sum() < best[1].sum():
                best = (sign * weight, m, shift), misses
            if not misses.any():
                return best
    assert best is not None
    return best


def _output_rescale(dtype: str, s1: float, s2: float, s_out: float) -> float:
    """s1 / (s2 s_out) as the judging kernel forms it: LiteRT's uint8 and int16 ones in float32,
    TFLM's int8 one in double (from the float scales); they differ in the last bits, which decide
    the quotients that are ties."""
    f32 = np.float32
    if dtype in ("uint8", "int16"):
        return float(f32(s1) / (f32(s2) * f32(s_out)))
    return float(f32(s1)) / (float(f32(s2)) * float(f32(s_out)))


def _patch(lw: LoweringContext, ops: OperationBuilder, x: FeatureMapView, src: FeatureMapView, dst: FeatureMapView,
           code: int, values: np.ndarray) -> None:
    """dst = src, but values[c] in channel c where x holds `code`: a mask of those elements
    (CMP_EQ, -1/0 in int8 as Vela 5.2 writes every comparison: OFM zero point 0, unit scale,
    int8's clamp) selects between them bitwise, as SELECT does, on the int8 codes of the
    8-bit maps' bytes."""
    at = ops.scratch(f"at_{code}", x.shape, NPU_BOOLEAN_TYPE)
    ops.elementwise("CMP_EQ", raw(x), lw.constant(np.array([code]), x.dtype), at)
    kept = ops.scratch(f"kept_{code}", x.shape, NPU_BOOLEAN_TYPE)
    ops.elementwise("AND_NOT", int8_codes(src), at, kept)
    put = ops.scratch(f"put_{code}", x.shape, NPU_BOOLEAN_TYPE)
    codes = np.asarray(values).astype(dst.dtype).view(NPU_BOOLEAN_TYPE)
    ops.elementwise("AND", at, lw.constant(codes, NPU_BOOLEAN_TYPE), put)
    ops.elementwise("OR", kept, put, int8_codes(dst))


def _lower_quantized(lw: LoweringContext, v: OperatorView, x: FeatureMapView, b: FeatureMapView,
                     out: FeatureMapView) -> None:
    """int8/uint8 DIV by a constant divisor (module docstring): one depthwise convolution where
    a per-channel rescale reproduces TFLite's quotients, the codes it misses in at most
    _PATCHED_CODES patches, else a table per run of channels."""
    if x.shape != out.shape:
        raise UnsupportedError(f"operator {v.index} (DIV): the dividend {x.shape} is broadcast to {out.shape}")
    codes = _divisor_per_channel(v, b, out) - b.zero_point
    if not codes.all():
        raise UnsupportedError(f"operator {v.index} (DIV): a constant divisor of 0 (TFLite's kernel fails on it)")
    real = _output_rescale(x.dtype, x.scale, b.scale, out.scale)
    multiplier, exponent = fp.quantize_multiplier(real)
    clamp = fused_clamp(v)
    lo, hi = TYPE_RANGE[x.dtype]
    values = np.arange(lo, hi + 1) - x.zero_point
    tables = {int(d): np.clip(reference_quotients(values, int(d), multiplier, exponent) + out.zero_point,
                              clamp["min"], clamp["max"]) for d in set(codes.tolist())}
    found = [_channel_rescale(values, tables[int(d)], real / abs(int(d)), 1 if d > 0 else -1,
                              (clamp["min"], clamp["max"]), out.zero_point) for d in codes]
    missed = np.nonzero(np.any([misses for _, misses in found], axis=0))[0]
    ops = OperationBuilder(lw, v.index, "DIV")
    if len(missed) <= _PATCHED_CODES:
        channels = len(codes)
        rescales = np.array([r for r, _ in found], np.int64)
        zeros = np.zeros(channels, np.int64)
        volume = WeightVolume(rescales[:, 0].reshape(channels, 1, 1, 1), zeros, zeros, rescales[:, 1:], True)
        registers = dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0), activation=clamp, rounding="TFL",
                         global_scale=False, ofm_scale=(0, 0), acc_format=0)
        quotient = out if not len(missed) else ops.scratch("quotient", out.shape, out.dtype, out.zero_point, out.scale)
        lw.add(LoweredOperation("depthwise", "depthwise_conv2d", f"{v.index}:DIV", (v.index,), x, quotient,
                                weights=volume, registers=registers))
        for k, i in enumerate(missed):
            last = k == len(missed) - 1
            dst = raw(out) if last else ops.scratch(f"patched_{k}", out.shape, out.dtype)
            at = np.array([tables[int(d)][i] for d in codes])
            _patch(lw, ops, x, raw(quotient), dst, int(lo + i), at)
            quotient = dst
        return
    c0 = 0
    while c0 < len(codes):  # a table per run of channels that divide by one value
        c1 = c0 + 1
        while c1 < len(codes) and codes[c1] == codes[c0]:
            c1 += 1
        h, w, _ = out.shape
        lw.add(table_lookup(x.window((0, 0, c0), (h, w, c1 - c0)), out.window((0, 0, c0), (h, w, c1 - c0)),
                            tables[int(codes[c0])].astype(x.dtype).tobytes(), f"{v.index}:DIV[{c0}:{c1}]",
                            (v.index,)))
        c0 = c1


def lower_div(lw: LoweringContext, v: OperatorView) -> None:
    require_u85(lw, v)
    if v.fused_activation not in FUSED_ACTIVATIONS:
        raise UnsupportedError(f"operator {v.index} (DIV): fused activation {v.fused_activation}")
    a, b, out = (lw.view(t) for t in (v.op.inputs[0], v.op.inputs[1], v.op.outputs[0]))
    if broadcast_step(v, a, b) != out.shape:
        raise UnsupportedError(f"operator {v.index} (DIV): {a.shape} / {b.shape} -> {out.shape}")
    if not a.dtype == b.dtype == out.dtype:
        raise UnsupportedError(f"operator {v.index} (DIV): {a.dtype} / {b.dtype} -> {out.dtype}")
    if a.dtype in ("int8", "uint8"):
        _lower_quantized(lw, v, a, b, out)
        return
    if a.dtype == "int16":
        _lower_int16(lw, v, a, b, out)
        return
    if a.dtype == "int32":
        a, b, out = raw(a), raw(b), raw(out)
        divisor = v.inputs[1]
        if divisor is not None and divisor.is_constant and not np.asarray(divisor.data).all():
            raise UnsupportedError(f"operator {v.index} (DIV): a constant divisor of 0 (TFLite's kernel fails on it)")
        if v.fused_activation != "NONE":
            # The U85 clamps a 32-bit OFM only to its type (emit/ethos_u85's clip range NONE).
            raise UnsupportedError(f"operator {v.index} (DIV): an int32 DIV with {v.fused_activation} fused")
        OperationBuilder(lw, v.index, "DIV").elementwise("DIV", a, b, out)
        return
    raise UnsupportedError(f"operator {v.index} (DIV): {a.dtype} (no reference kernel divides it)")


_WIDE_WEIGHTS = range(1, 128)  # int8 weights: the product's extra bits of precision
_WIDE_MULTIPLIERS = 3  # 15-bit multipliers tried either side of the nearest one
_WIDE_SAMPLE = 2048  # codes a candidate must reproduce before the check of all 65536


def _wide_rescale(values: np.ndarray, target: np.ndarray, real: float, sign: int,
                  clamp: tuple[int, int]) -> tuple[int, int, int] | None:
    """(weight, multiplier, shift) of a 16x8 output stage, clamp((values * weight * multiplier
    + 2^(shift-1)) >> shift) with a 15-bit multiplier, that gives `target` for every value;
    None where none does. Candidates are tried on a spread sample of the values first."""
    sample = np.linspace(0, len(values) - 1, _WIDE_SAMPLE).astype(np.int64)
    for weight in _WIDE_WEIGHTS:
        _, exponent = np.frexp(real / weight)  # the shift that puts the multiplier in 15 bits
        shift = 15 - int(exponent)
        if not 1 <= shift <= 62:
            continue
        m0 = int(round(real / weight * 2.0**shift))
        for m in sorted(range(m0 - _WIDE_MULTIPLIERS, m0 + _WIDE_MULTIPLIERS + 1), key=lambda k: abs(k - m0)):
            if not (1 << 14) <= m < (1 << 15):
                continue
            for codes in (sample, slice(None)):
                got = np.clip((sign * weight * values[codes] * m + (1 << (shift - 1))) >> shift, *clamp)
                if np.any(got != target[codes]):
                    break
            else:
                return sign * weight, m, shift
    return None


def _lower_int16(lw: LoweringContext, v: OperatorView, x: FeatureMapView, b: FeatureMapView,
                 out: FeatureMapView) -> None:
    """int16 DIV by a constant divisor: one 16x8 depthwise convolution (module docstring)."""
    if x.shape != out.shape:
        raise UnsupportedError(f"operator {v.index} (DIV): the dividend {x.shape} is broadcast to {out.shape}")
    if x.zero_point or b.zero_point or out.zero_point:
        raise UnsupportedError(f"operator {v.index} (DIV): int16 zero points {x.zero_point}, {b.zero_point}, "
                               f"{out.zero_point} (TFLite's int16 kernels take 0)")
    codes = _divisor_per_channel(v, b, out)
    if not codes.all():
        raise UnsupportedError(f"operator {v.index} (DIV): a constant divisor of 0 (TFLite's kernel fails on it)")
    real = _output_rescale(x.dtype, x.scale, b.scale, out.scale)
    multiplier, exponent = fp.quantize_multiplier(real)
    clamp = fused_clamp(v)
    lo, hi = TYPE_RANGE["int16"]
    values = np.arange(lo, hi + 1, dtype=np.int64)
    rescales: dict[int, tuple[int, int, int]] = {}
    for d in sorted(set(codes.tolist())):
        target = np.clip(reference_quotients(values, d, multiplier, exponent), clamp["min"], clamp["max"])
        found = _wide_rescale(values, target, real / abs(d), 1 if d > 0 else -1, (clamp["min"], clamp["max"]))
        if found is None:
            raise UnsupportedError(f"operator {v.index} (DIV): no 16x8 rescale (an int8 weight, a 15-bit multiplier, "
                                   f"one rounding) gives TFLite's int16 quotients of every code by the divisor {d}")
        rescales[d] = found
    channels = len(codes)
    rows = np.array([rescales[int(d)] for d in codes], np.int64)
    zeros = np.zeros(channels, np.int64)
    volume = WeightVolume(rows[:, 0].reshape(channels, 1, 1, 1), zeros, zeros, rows[:, 1:], True)
    registers = dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0), activation=clamp, rounding="NATURAL",
                     global_scale=False, ofm_scale=(0, 0), acc_format=1)
    lw.add(LoweredOperation("depthwise", "depthwise_conv2d", f"{v.index}:DIV", (v.index,), x, out,
                            weights=volume, registers=registers))
