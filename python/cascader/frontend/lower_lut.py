"""8-bit unary operators as one NPU table lookup: LOGISTIC, TANH, EXP, ELU, GELU, LOG, HARD_SWISH,
LEAKY_RELU, RSQRT, NEG; int16 EXP and LOG as one interpolating 16-bit table lookup.

An int8/uint8 unary operator's output depends only on its input value, so it is a 256-entry
table. Each table here is computed by TFLite's reference kernel's own arithmetic, value by
value, so the NPU's lookup returns exactly what the reference returns:

- LOGISTIC, TANH, EXP, ELU, GELU, LOG: TFLite fills a table itself
  (``PopulateLookupTable``/``LUTPopulate``) in float32: dequantize, apply the function, divide
  by the output scale, round half away from zero, add the zero point, clamp. Reproduced in
  numpy float32, the C library's float functions called as the reference calls them (`_libm`):
  numpy's own float32 exp is a few ULP off, which moved one entry of 1 in 1,000 random
  LOGISTIC tables across a rounding boundary. ELU is expm1 below 0 and the identity above;
  GELU is 0.5 x erfc(-x / sqrt 2), or with ``approximate`` 0.5 x (1 + tanh(sqrt(2 / pi)
  (x + 0.044715 x^3))), each in the reference's float32 order of operations; LOG gives the
  type's minimum at and below 0 (``LogLUTPrepare``).
- HARD_SWISH: the reference's 16-bit fixed-point arithmetic (``reference_ops::HardSwish``).
- LEAKY_RELU: ``QuantizeLeakyRelu``: the identity or the alpha rescale by sign, each a
  MultiplyByQuantizedMultiplier.
- RSQRT (int8): ``RsqrtEvalQuantizedInt8``: 1 / sqrt(x - zp) by the fixed-point
  Newton-Raphson of ``GetInvSqrtQuantizedMultiplierExp``, scaled by 2^20, then rescaled by
  1 / (sqrt(s_in) * s_out) (formed in float32, divided in double); x = zp gives the maximum.
  Codes below the zero point are an error in the reference (the interpreter stops): their
  entries are the maximum too.
- NEG: ``reference_ops::Negate`` negates the stored code and ignores the quantization; the
  negation is narrowed to the type, so -(-128) is -128 (uint8: -x mod 256), which no
  saturating NPU arithmetic gives and the table does.

On the NPU the lookup is a 1x1 average pool over raw values (zero points 0, scale 1): the
pool's output is the input value, which indexes the table (the activation function names the
LUT slot; the emitter DMAs the table there first).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from dataclasses import replace
from typing import Callable

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from . import fixed_point as fp
from .lower_movement import raw_copy
from .lowered import (LUT_SLOT_0, SIGMOID_FUNCTION, STREAM_MAX_WIDTH, TANH_FUNCTION, TENSOR_DIM_MAX, TYPE_RANGE,
                      FeatureMapView, LoweredOperation, dense_strides, kernel_record, stream_widths)
from .lowering_context import LoweringContext
from .operation_builder import EIGHT_BIT_RANGE, OperationBuilder, channel_selection, require_8bit_in_out
from .operator_view import OperatorView


def _float_table(fn: Callable[[np.ndarray], np.ndarray], ifm: tuple[float, int], ofm: tuple[float, int],
                 dtype: str) -> np.ndarray:
    """TFLite's float32 table fill: clamp(int(round(fn(scale * (q - zp)) / out_scale) + out_zp))."""
    lo, hi = EIGHT_BIT_RANGE[dtype]
    q = np.arange(lo, hi + 1)
    with np.errstate(over="ignore", invalid="ignore"):
        dequantized = np.float32(ifm[0]) * (q - ifm[1]).astype(np.float32)
        scaled = (fn(dequantized).astype(np.float32) * (np.float32(1) / np.float32(ofm[0]))).astype(np.float64)
        rounded = np.where(scaled >= 0, np.floor(scaled + 0.5), -np.floor(-scaled + 0.5))  # std::round
        shifted = (rounded.astype(np.float32) + np.float32(ofm[1])).astype(np.float64)
    # An integer already, or beyond int32 (an EXP overflowing, to inf or not): the reference
    # saturates that to the maximum (checked against the interpreter).
    return np.clip(shifted, lo, hi).astype(np.int64)


def int16_samples(fn: Callable[[np.ndarray], np.ndarray], ifm: tuple[float, int], ofm: tuple[float, int]) -> np.ndarray:
    """TFLite's 513 16-bit table entries (``LUTPopulate<int16_t>``: samples of the whole int16
    input range, each biased by half its midpoint's interpolation error, float32 arithmetic).

    `fn` is evaluated in double and rounded to float: the C library's expf is correctly
    rounded, numpy's float32 exp is not (one entry in a few hundred tables differs)."""
    f32 = np.float32
    lo, hi = -32768, 32767
    input_range = (f32(ifm[0]) * f32(lo - ifm[1]), f32(ifm[0]) * f32(hi - ifm[1]))
    output_range = (f32(ofm[0]) * f32(lo - ofm[1]), f32(ofm[0]) * f32(hi - ofm[1]))
    return _int16_lut(lambda x: fn(np.asarray(x, dtype=np.float64)).astype(f32), input_range, output_range, f32)


def int16_range_table(fn: Callable[[np.ndarray], np.ndarray], input_range: tuple[float, float],
                      output_range: tuple[float, float]) -> bytes:
    """The same table over explicit ranges in double arithmetic, as TFLite's ``gen_lut<double>``
    builds the int16 SOFTMAX tables (exp over [-10, 0], 1 / (1 + x) over [0, 1]; in float two
    entries of the reciprocal differ and the reference's results with them)."""
    return lut_words(_int16_lut(lambda x: fn(np.asarray(x, dtype=np.float64)), input_range, output_range, np.float64))


def _int16_lut(transform: Callable[[np.ndarray], np.ndarray], input_range, output_range, real: type) -> np.ndarray:
    lo, hi = -32768, 32767
    input_min, input_max = real(input_range[0]), real(input_range[1])
    steps = 512
    step = (input_max - input_min) / real(steps)
    inverse = real(hi - lo + 1) / (real(output_range[1]) - real(output_range[0]))

    def rounded(x: np.ndarray) -> np.ndarray:  # TfLiteRound: half away from zero
        x = np.asarray(x, dtype=real)
        return (np.sign(x) * np.floor(np.abs(x) + real(0.5))).astype(real)

    # A function beyond float's range (EXP of a wide input) gives inf, and inf - inf NaN, in
    # the reference as here: a NaN entry converts to 0 there (x86's int conversion of NaN is
    # INT_MIN, whose low 16 bits the int16 keeps), and to 0 here through the same low bits.
    with np.errstate(over="ignore", invalid="ignore"):
        i = np.arange(steps, dtype=real)
        value = transform(input_min + i * step)
        midpoint = transform(input_min + i * step + step / real(2))
        following = transform(input_min + (i + real(1)) * step)
        sample = rounded(value * inverse)
        interpolated = rounded((following * inverse + rounded(value * inverse)) / real(2))
        bias = rounded((interpolated - rounded(midpoint * inverse)) / real(2))
        table = np.clip(sample - bias, lo, hi).astype(np.int64)
        last = int(np.clip(rounded(transform(np.array([input_max], dtype=real)) * inverse)[0], lo, hi))
    return fp.wrap16(np.append(table, last))


def lut_words(table: np.ndarray, bases: bool = True, slopes: bool = True) -> bytes:
    """513 16-bit entries as the NPU's 16-bit LUT: 512 words of (slope << 16 | base), slope the
    next entry minus this one narrowed to 16 bits, as the reference narrows it. Both interpolate
    over the low 7 bits of the input alike, base + ((slope * r + 64) >> 7). `bases` or `slopes`
    False zeroes that half (the two halves of `_lower_int16_table`'s wrapping sum)."""
    slope = (table[1:] - table[:-1]) & 0xFFFF if slopes else np.zeros(512, np.int64)
    base = table[:-1] & 0xFFFF if bases else np.zeros(512, np.int64)
    return ((slope << 16) | base).astype("<u4").tobytes()


def interpolation_lines(table: np.ndarray) -> np.ndarray:
    """The reference's base + delta of every int16 code before its cast to int16: row i holds
    interval i's 128 codes (offsets r = 0..127), base table[i], delta (slope * r + 64) >> 7 with
    the slope to the next entry narrowed to int16."""
    slope = fp.wrap16(table[1:] - table[:-1])
    return table[:-1, None] + ((slope[:, None] * np.arange(128) + 64) >> 7)


def lookup_offset(table: np.ndarray) -> int | None:
    """An offset c for which one NPU lookup of the table less c (wrapped to int16), plus c
    wrapped to int16, is the reference's lookup on every int16 code; 0 where the plain lookup
    is exact; None where no c is.

    The reference casts each line of `interpolation_lines` to int16 (it wraps), the NPU's
    lookup saturates: they agree on a line that stays within int16. Less c, the cast's cut
    (between 32767 and -32768) moves to between 32767 + c and 32768 + c, so a line from lo to
    hi agrees unless 32767 + c is one of lo..hi-1 (mod 2^16); a line spans at most 32,512, so
    the lines of a table rarely cover every c (an EXP past float's range wraps at the jump from
    its last finite entries, -32768 or 32767, to its 0s; none of 3,000 random EXP and LOG
    quantizations lacked a c). The free c nearest 0 is returned once the lookup it gives is
    checked against the reference's on all 65,536 codes (None if that check fails)."""
    lines = interpolation_lines(table)
    lo, hi = lines.min(axis=1), lines.max(axis=1)
    # Lines that cut c cover the residues k = c + 32768 from lo + 1 to hi (mod 2^16).
    cover = np.zeros(2 * 65536 + 1, np.int64)
    start = (lo + 1) % 65536
    np.add.at(cover, start, 1)
    np.add.at(cover, start + (hi - lo), -1)
    cut = np.cumsum(cover)[:2 * 65536]
    free = np.nonzero(cut[:65536] + cut[65536:] == 0)[0] - 32768
    if not free.size:
        return None
    c = int(free[np.argmin(np.abs(free))])
    npu = np.clip(fp.wrap16(table[:-1] - c)[:, None] + (lines - table[:-1, None]), -32768, 32767)
    return c if np.array_equal(fp.wrap16(npu + c), fp.wrap16(lines)) else None


@functools.lru_cache(maxsize=1)
def _c_math_library() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("m"))
    except (OSError, TypeError):
        return None


def _c_library_function(name: str) -> Callable[[float], float] | None:
    """The C library's float function `name` (expf, logf, ...), or None where it cannot be loaded."""
    fn = getattr(_c_math_library(), name, None)
    if fn is None:
        return None
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn


def _libm(name: str, double: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """`name` on float32 values as the reference kernels get it: the C library's own function,
    which the interpreter calls (glibc's tanhf, erfcf, expm1f and logf are not correctly rounded,
    and 1 GELU table in 6,000 random quantizations turns on tanhf); where that library cannot be
    loaded, `double` evaluated in float64 and rounded once, the correctly rounded value."""
    fn = _c_library_function(name)

    def evaluate(x: np.ndarray) -> np.ndarray:
        values = np.asarray(x, dtype=np.float32)
        if fn is None:
            return double(values.astype(np.float64)).astype(np.float32)
        return np.array([fn(float(v)) for v in values.reshape(-1)], dtype=np.float32).reshape(values.shape)

    return evaluate


_expf, _tanhf = _libm("expf", np.exp), _libm("tanhf", np.tanh)
_expm1f, _logf = _libm("expm1f", np.expm1), _libm("logf", np.log)
_erfcf = _libm("erfcf", np.vectorize(math.erfc, otypes=[np.float64]))
_SQRT1_2 = 0.70710678118654752440  # M_SQRT1_2
_SQRT_2_OVER_PI = np.float32(1.12837916709551257390 * _SQRT1_2)  # gelu_internal::kSqrt2dPi, formed in double


def _sigmoid(x: np.ndarray) -> np.ndarray:  # the reference's 1.0f / (1.0f + std::exp(-x))
    return np.float32(1) / (np.float32(1) + _expf(-x))


def _elu(x: np.ndarray) -> np.ndarray:  # value < 0.0f ? std::expm1(value) : value
    return np.where(x < 0, _expm1f(np.minimum(x, 0)), x).astype(np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:  # GeluTransform: 0.5f * in * std::erfc(in * -M_SQRT1_2)
    return np.float32(0.5) * x * _erfcf(x * np.float32(-_SQRT1_2))


def _gelu_approximate(x: np.ndarray) -> np.ndarray:  # GeluTransformApproximate, float32 throughout
    cubic = x + np.float32(0.044715) * x * x * x
    return np.float32(0.5) * x * (np.float32(1) + _tanhf(_SQRT_2_OVER_PI * cubic))


def log_function(ofm: tuple[float, int], dtype: str) -> Callable[[np.ndarray], np.ndarray]:
    """LogLUTPrepare's function: log, and at or below 0 the type's minimum output
    ((min - zp_out) * s_out, a float product)."""
    floor = np.float32(TYPE_RANGE[dtype][0] - ofm[1]) * np.float32(ofm[0])

    def log(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        return np.where(x <= 0, floor, _logf(np.where(x > 0, x, np.float32(1)))).astype(np.float32)

    return log


def _negate_table(dtype: str) -> np.ndarray:
    """reference_ops::Negate on every code: -x narrowed to the type (it wraps, never saturates)."""
    lo, hi = EIGHT_BIT_RANGE[dtype]
    return (-np.arange(lo, hi + 1, dtype=np.int64) - lo) % 256 + lo


def _hard_swish_table(ifm: tuple[float, int], ofm: tuple[float, int], dtype: str) -> np.ndarray:
    """reference_ops::HardSwish on every input value, with HardSwishPrepare's parameters."""
    lo, hi = EIGHT_BIT_RANGE[dtype]
    hires_input_scale = np.float32(1.0 / 128.0) * np.float32(ifm[0])
    reluish_scale = np.float32(3.0 / 32768.0)
    out_m, out_e = fp.quantize_multiplier(float(hires_input_scale / np.float32(ofm[0])))
    relu_m, relu_e = fp.quantize_multiplier(float(hires_input_scale / reluish_scale))
    if out_e > 0:
        raise UnsupportedError("HARD_SWISH whose output scale is below input scale / 128")
    out_m16, relu_m16 = fp.downscale_int32_to_int16_multiplier(out_m), fp.downscale_int32_to_int16_multiplier(relu_m)
    x = np.arange(lo, hi + 1, dtype=np.int64) - ifm[1]
    hires = fp.wrap16(x * (1 << 7))
    preshift_output = fp.saturating_rounding_doubling_high_mul16(hires, out_m16)
    reluish = hires
    if relu_e > 0:
        reluish = fp.saturating_left_shift16(reluish, relu_e - 1)
    reluish = fp.saturating_rounding_doubling_high_mul16(reluish, relu_m16)
    if relu_e > 0:
        reluish = fp.saturating_left_shift16(reluish, 1)
    if relu_e < 0:
        reluish = fp.rounding_divide_by_pot(reluish, -relu_e)
    reluish = fp.wrap16((reluish + (1 << 15)) >> 1)
    preshift = fp.saturating_doubling_high_mul16(reluish, preshift_output)
    out = fp.rounding_divide_by_pot(preshift, -out_e) + ofm[1]
    return np.clip(fp.wrap16(out), lo, hi)


def _leaky_relu_table(ifm: tuple[float, int], ofm: tuple[float, int], alpha: float, dtype: str) -> np.ndarray:
    """reference_ops::QuantizeLeakyRelu on every input value; LeakyReluPrepare forms both
    multipliers in float32."""
    lo, hi = EIGHT_BIT_RANGE[dtype]
    alpha_m, alpha_e = fp.quantize_multiplier(float(np.float32(ifm[0]) * np.float32(alpha) / np.float32(ofm[0])))
    identity_m, identity_e = fp.quantize_multiplier(float(np.float32(ifm[0]) / np.float32(ofm[0])))
    x = np.arange(lo, hi + 1, dtype=np.int64) - ifm[1]
    out = np.where(x >= 0, fp.multiply_by_quantized_multiplier(x, identity_m, identity_e),
                   fp.multiply_by_quantized_multiplier(x, alpha_m, alpha_e)) + ofm[1]
    return np.clip(out, lo, hi)


RSQRT_HEADROOM = 20  # the reference's kShift: 1/sqrt(x) is carried as an integer times 2^20


def _rsqrt_table(ifm: tuple[float, int], ofm: tuple[float, int], dtype: str) -> np.ndarray:
    """RsqrtEvalQuantizedInt8 on every input value, with SetRsqrtOutputMultiplier's rescale."""
    if dtype != "int8":
        raise UnsupportedError(f"RSQRT on {dtype}: TFLite's table-free RSQRT is int8 only")
    lo, hi = EIGHT_BIT_RANGE[dtype]
    sqrt_in = np.sqrt(np.float32(ifm[0]))  # std::sqrt(float), times a float: float32 throughout
    m, e = fp.quantize_multiplier(1.0 / float(sqrt_in * np.float32(ofm[0])))
    if e > RSQRT_HEADROOM:
        # The reference's int32 product would overflow (undefined in C++): not reproducible.
        raise UnsupportedError(f"RSQRT rescale 2^{e} is beyond the reference's 2^{RSQRT_HEADROOM} headroom")
    table = np.full(hi - lo + 1, hi, dtype=np.int64)
    for code in range(max(lo, ifm[1] + 1), hi + 1):
        inv_m, inv_e = fp.inv_sqrt_quantized_multiplier_exp(code - ifm[1])
        data = fp.multiply_by_quantized_multiplier(1, inv_m, inv_e + RSQRT_HEADROOM)
        out = fp.multiply_by_quantized_multiplier(data, m, e - RSQRT_HEADROOM) + ofm[1]
        table[code - lo] = min(max(int(out), lo), hi)
    return table


def lut_table(opcode: str, ifm: tuple[float, int], ofm: tuple[float, int], dtype: str,
              options: dict | None = None) -> np.ndarray:
    """The outputs of `opcode` for every input value lo..hi of the 8-bit `dtype`."""
    if opcode == "LOGISTIC":
        return _float_table(_sigmoid, ifm, ofm, dtype)
    if opcode == "TANH":
        return _float_table(_tanhf, ifm, ofm, dtype)
    if opcode == "EXP":
        return _float_table(_expf, ifm, ofm, dtype)
    if opcode == "ELU":
        return _float_table(_elu, ifm, ofm, dtype)
    if opcode == "GELU":
        return _float_table(_gelu_approximate if (options or {}).get("approximate") else _gelu, ifm, ofm, dtype)
    if opcode == "LOG":
        return _float_table(log_function(ofm, dtype), ifm, ofm, dtype)
    if opcode == "NEG":
        return _negate_table(dtype)
    if opcode == "HARD_SWISH":
        return _hard_swish_table(ifm, ofm, dtype)
    if opcode == "LEAKY_RELU":
        return _leaky_relu_table(ifm, ofm, float((options or {}).get("alpha", 0.2)), dtype)
    if opcode == "RSQRT":
        return _rsqrt_table(ifm, ofm, dtype)
    raise UnsupportedError(f"{opcode} has no table lowering")


def builtin_scale(input_scale: float, opcode: str) -> tuple[int, int]:
    """OFM_SCALE of the NPU's int16 TANH/SIGMOID: the input brought to the function's fixed
    input format (3 * 2^12 per unit), Vela's rule (its binaries are exact on the reference)."""
    rescale = 0x3000 * float(np.float32(input_scale))
    x_log2 = math.log2(float(np.float32(input_scale)))
    shift = int(round(x_log2)) + 12
    if abs(x_log2 - round(x_log2)) < 0.001 and ((opcode == "TANH" and shift in (0, 1)) or shift == 0):
        return 3 << shift, 0
    shift = 0
    while rescale <= 32767 / 2 and shift <= 30:
        shift += 1
        rescale *= 2
    return int(rescale), shift


def _lower_builtin(lw: LoweringContext, v: OperatorView) -> None:
    """int16 LOGISTIC and TANH: a 1x1 pool through the NPU's own function."""
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    if src.zero_point or dst.zero_point:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): int16 with a non-zero zero point")
    function = TANH_FUNCTION if v.opcode == "TANH" else SIGMOID_FUNCTION
    registers = dict(sub_op="AVERAGE", kernel=kernel_record(1, 1), padding=(0, 0, 0, 0),
                     activation=dict(function=function, clip_range=0, min=-32768, max=32767), rounding="TFL",
                     global_scale=True, ofm_scale=builtin_scale(src.scale, v.opcode))
    lw.add(LoweredOperation("pool", "avg_pool", f"{v.index}:{v.opcode}", (v.index,), src, dst, registers=registers))


def _lower_int16_table(lw: LoweringContext, v: OperatorView) -> None:
    """int16 EXP and LOG: a 1x1 pool over raw values through a 16-bit interpolating table.

    Where the reference's base + delta leaves int16 (an EXP whose input range overflows float:
    the entries past the overflow are 0, and the bias term drives the last finite ones to
    -32768), its cast wraps, while the NPU's lookup saturates (4 of 2,048 values off by up to
    58,112 in the operator zoo's case; Vela's too). Then the lookup is of the table less an
    offset c that moves the wrap off every interval (`lookup_offset`), and an ADD of c written
    unwrapped to int16 puts it back: the Ethos-U85 writes that low half itself (the ADD's OFM
    int16, unclamped: `operation_builder.WRAP_OFM`), the U55/U65 sum into int32 and pick the
    low halves (`_low_halves`). Where no c exists, the base and the delta are two lookups
    summed the same way."""
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    ifm, ofm = (src.scale, src.zero_point), (dst.scale, dst.zero_point)
    if v.opcode == "LOG":
        if src.zero_point or dst.zero_point:  # the reference refuses them (GenericPrepare)
            raise UnsupportedError(f"operator {v.index} (LOG): int16 with a non-zero zero point")
        table = int16_samples(log_function(ofm, "int16"), ifm, ofm)
    else:
        table = int16_samples(np.exp, ifm, ofm)
    src, dst = replace(src, zero_point=0), replace(dst, zero_point=0)
    offset = lookup_offset(table)
    if offset == 0:
        lw.add(_int16_lookup(src, dst, lut_words(table), f"{v.index}:{v.opcode}", v.index))
        return
    ops = OperationBuilder(lw, v.index, v.opcode)
    if offset is not None:
        shifted = ops.scratch("table_less_offset", src.shape, "int16")
        lw.add(_int16_lookup(src, shifted, lut_words(fp.wrap16(table - offset)), f"{v.index}:{v.opcode}(less {offset})",
                             v.index))
        _wrapping_sum(lw, ops, shifted, lw.constant(np.array([offset]), "int16"), dst)
        return
    base = ops.scratch("table_base", src.shape, "int16")
    delta = ops.scratch("table_delta", src.shape, "int16")
    lw.add(_int16_lookup(src, base, lut_words(table, slopes=False), f"{v.index}:{v.opcode}(base)", v.index))
    lw.add(_int16_lookup(src, delta, lut_words(table, bases=False), f"{v.index}:{v.opcode}(delta)", v.index))
    _wrapping_sum(lw, ops, base, delta, dst)


def _wrapping_sum(lw: LoweringContext, ops: OperationBuilder, a: FeatureMapView, b: FeatureMapView,
                  dst: FeatureMapView) -> None:
    """dst = a + b (int16 operands) wrapped to int16, as a C++ narrowing cast."""
    if Accelerator.is_u85(lw.accelerator):
        ops.elementwise("ADD", a, b, dst, rounding="NATURAL", wrap=True)
        return
    total = ops.scratch("unwrapped", dst.shape, "int32")
    ops.elementwise("ADD", a, b, total, rounding="NATURAL")
    _low_halves(lw, ops, total, dst)


def _int16_lookup(src: FeatureMapView, dst: FeatureMapView, table: bytes, name: str, index: int) -> LoweredOperation:
    registers = dict(sub_op="AVERAGE", kernel=kernel_record(1, 1), padding=(0, 0, 0, 0),
                     activation=dict(function=LUT_SLOT_0, clip_range=0, min=-32768, max=32767), rounding="NATURAL",
                     global_scale=True, ofm_scale=(1, 0))
    return LoweredOperation("pool", "avg_pool", name, (index,), src, dst, registers=registers, lut=table)


def _low_halves(lw: LoweringContext, ops: OperationBuilder, wide: FeatureMapView, dst: FeatureMapView) -> None:
    """dst = the low 16 bits of each element of the dense int32 map `wide` (little-endian: its
    first two bytes). Read as int16, G int32 elements are 2G channels of one pixel, their low
    halves the even ones: a 1x1 convolution picks those (`channel_selection`) at full depth,
    where a strided depth-1 copy cost 16 times as many cycles (16,796 for the operator zoo's
    1,024 values on u55-128)."""
    elements = math.prod(wide.shape)
    group = next(g for g in (16, 8, 4, 2, 1) if elements % g == 0)
    pixels = elements // group
    widths = stream_widths(pixels)
    width = widths[0] if widths else next(w for w in range(STREAM_MAX_WIDTH, 0, -1) if pixels % w == 0)
    rows = pixels // width
    dense = dst.strides == dense_strides(dst.shape, dst.element_size)
    out = dst if dense else ops.scratch("low_halves", wide.shape, "int16")
    picks = 2 * np.arange(group)
    for r0 in range(0, rows, TENSOR_DIM_MAX):
        n = min(TENSOR_DIM_MAX, rows - r0)
        halves = replace(wide, dtype="int16", shape=(n, width, 2 * group),
                         strides=dense_strides((n, width, 2 * group), 2), offset=wide.offset + 4 * group * width * r0)
        part = replace(out, shape=(n, width, group), strides=dense_strides((n, width, group), 2),
                       offset=out.offset + 2 * group * width * r0)
        channel_selection(lw, ops.index, f"{ops.index}:{ops.opcode}(low halves)[{r0}]", halves, part, picks)
    if not dense:
        raw_copy(lw, ops.index, f"{ops.index}:{ops.opcode}(to output)", out, dst)


def table_lookup(src, dst, table: bytes, name: str, sources: tuple[int, ...]) -> LoweredOperation:
    """An 8-bit lookup of `src` into `dst` through `table`: a 1x1 average pool over raw codes
    (zero points 0, scale 1) whose activation is the table (the form `lut_fusion` fuses)."""
    lo, hi = EIGHT_BIT_RANGE[dst.dtype]
    registers = dict(sub_op="AVERAGE", kernel=kernel_record(1, 1), padding=(0, 0, 0, 0),
                     activation=dict(function=LUT_SLOT_0, clip_range=0, min=lo, max=hi), rounding="NATURAL",
                     global_scale=True, ofm_scale=(1, 0))
    return LoweredOperation("pool", "avg_pool", name, sources, replace(src, zero_point=0), replace(dst, zero_point=0),
                            registers=registers, lut=table)


def lower_lut(lw: LoweringContext, v: OperatorView) -> None:
    int16 = v.ifm is not None and v.ifm.dtype == "int16" and v.ofm is not None and v.ofm.dtype == "int16"
    if v.opcode in ("LOGISTIC", "TANH") and int16:
        _lower_builtin(lw, v)
        return
    if v.opcode in ("EXP", "LOG") and int16:
        _lower_int16_table(lw, v)
        return
    dtype = require_8bit_in_out(v)
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    table = lut_table(v.opcode, (src.scale, src.zero_point), (dst.scale, dst.zero_point), dtype, v.options)
    lw.add(table_lookup(src, dst, table.astype(dtype).tobytes(), f"{v.index}:{v.opcode}", (v.index,)))
