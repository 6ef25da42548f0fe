"""ADD, SUB and MUL as short chains of NPU operations that round as TFLite's reference does,
where one NPU elementwise operation cannot.

ADD/SUB. The reference rounds twice: each operand is brought to the common scale with
MultiplyByQuantizedMultiplier (a high multiply, then a rounding shift), then the sum is
rescaled the same way. One NPU ADD rounds its scaled operand once, so where no register values
agree with the reference on every pair of input values (`add_sub_rounding`), the chain is:

    A = scaled(x), B = scaled(y)      each operand's scaled value, int32
    S = A + B  (A - B for SUB)        int32, as the reference adds
    T = S * M >> 31                   int32; NATURAL rounding is SaturatingRoundingDoublingHighMul
    out = T >> n  (rounding half away)  RoundingDivideByPOT, plus the zero point, clamped

An 8-bit operand is scaled by a table with the reference's own values (`operand_table`), one
entry per code. A 16-bit one (headroom 15) takes two operations: the high multiply of x << 15
by m is floor((x m + 2^15) / 2^16), a MUL by 1 whose output scale is (m, 16) with NATURAL
rounding, and its rounding shift a TFL-rounded SHR (none for the larger-scaled operand,
whose multiplier 1/2 makes it x << 14 exactly). S is the reference's sum exactly, and the last
two operations are its output rescale step by step. (A 32-bit elementwise operation applies
only the shift of its output scale, so neither the sum nor the operand shift can carry a
multiplier.)

int16 with power-of-two scales. TFLite's kernel takes another path there (its default
``pot_scale_int16``): the operand with the finer scale is divided by 2^r with RoundingDivide-
ByPOT, the other is taken as it is, and the int16 sum saturates. One NPU ADD rounds the sum
instead (x + y / 2^r rounded, where the reference rounds y / 2^r), which differs on halves, so:
a TFL-rounded SHR of the finer operand, then an ADD/SUB of unit scales.

MUL. The reference multiplies the operand values and rescales the product with
MultiplyByQuantizedMultiplier, whose ``x * (1 << left_shift)`` is int32 arithmetic: a product
that leaves 32 bits wraps, and a shift of 32 or more is taken modulo 32 (the x86 shift count;
undefined in C++, and what the reference interpreter computes: an output scale of 1e-25 gives
left shift 73, i.e. 9). One NPU MUL computes the rescale exactly while the shifted product fits
(`multiply_registers`, a right shift of 31 - s); otherwise the chain is

    P = x * y (int32), W = P << s (the NPU's SHL wraps as int32 does), out = W * M >> 31 (NATURAL)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from . import fixed_point as fp
from .add_sub_rounding import HEADROOM, operand_multipliers
from .lowered import TYPE_RANGE, LUT_SLOT_0, FeatureMapView
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder

INT32_LIMIT = 1 << 31
SRDHM_SHIFT = 31  # the high half of a doubling 32 x 32 multiply


def operand_table(dtype: str, zero_point: int, multiplier: tuple[int, int]) -> np.ndarray:
    """The reference's scaled value of an 8-bit ADD/SUB operand for every code, in code order
    (-128..127 or 0..255): MultiplyByQuantizedMultiplier((code - zero point) << 20, m, e)."""
    lo, hi = TYPE_RANGE[dtype]
    values = np.arange(lo, hi + 1, dtype=np.int64) - zero_point
    return fp.multiply_by_quantized_multiplier(values << HEADROOM[8], *multiplier).astype(np.int64)


def _table_lookup32(ops: OperationBuilder, name: str, x: FeatureMapView, table: np.ndarray) -> FeatureMapView:
    """x's codes looked up in a 256-entry int32 table: an ADD of 0 whose 32-bit output indexes
    the table (the signed 8-bit index is the code, offset to -128 for uint8)."""
    out = ops.scratch(name, x.shape, "int32", zero_point=-128 if x.dtype == "uint8" else 0)
    zero = ops.lw.constant(np.array([0]), x.dtype)
    ops.elementwise("ADD", replace(x, zero_point=0, scale=1.0), zero, out,
                    activation=dict(function=LUT_SLOT_0, clip_range=3, min=-128, max=127),
                    lut=table.astype("<i4").tobytes())
    return replace(out, zero_point=0)


def _rescale_int32(ops: OperationBuilder, s: FeatureMapView, multiplier: int, right_shift: int,
                   ofm: FeatureMapView, activation: dict) -> None:
    """ofm = RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(s, multiplier), right_shift)
    plus its zero point, clamped by `activation`. A 32-bit MUL keeps only its output shift:
    NATURAL rounding by 31 is the high multiply's rounding (half up, both signs); the second
    rounding, half away from zero, is a TFL-rounded SHR."""
    m = ops.lw.constant(np.array([multiplier]), "int32")
    if right_shift == 0:
        ops.elementwise("MUL", s, m, ofm, rounding="NATURAL", ofm_scale=(1, SRDHM_SHIFT), activation=activation)
        return
    high = ops.scratch("high", s.shape, "int32")
    ops.elementwise("MUL", s, m, high, rounding="NATURAL", ofm_scale=(1, SRDHM_SHIFT))
    ops.elementwise("SHR", high, ops.lw.constant(np.array([right_shift]), "int32"), ofm, global_scale=False,
                    activation=activation)


def _scaled_operand16(ops: OperationBuilder, name: str, x: FeatureMapView,
                      multiplier: tuple[int, int]) -> FeatureMapView:
    """MultiplyByQuantizedMultiplier(x << 15, m, e) of an int16 operand, int32: the high
    multiply as a MUL by 1 with output scale (m, 16), NATURAL (floor((x m + 2^15) / 2^16)),
    then the rounding shift by -e as a TFL-rounded SHR."""
    m, exponent = multiplier
    high = ops.scratch(name, x.shape, "int32")
    ops.elementwise("MUL", x, ops.lw.constant(np.array([1]), x.dtype), high, rounding="NATURAL",
                    ofm_scale=(m, SRDHM_SHIFT - HEADROOM[16]))
    if exponent == 0:
        return high
    scaled = ops.scratch(f"{name}_shifted", x.shape, "int32")
    ops.elementwise("SHR", high, ops.lw.constant(np.array([-exponent]), "int32"), scaled, global_scale=False)
    return scaled


def exact_add_sub(lw: LoweringContext, index: int, mode: str, a: FeatureMapView, b: FeatureMapView,
                  ofm: FeatureMapView, activation: dict) -> None:
    """`a + b` or `a - b` (TFLite's operand order) as the chain in the module docstring, 8-bit
    or int16 operands. The output multiplier must be below 1 (`reference_output_multiplier`
    is None)."""
    ops = OperationBuilder(lw, index, mode)
    bits = 16 if a.dtype == "int16" else 8
    m_a, m_b, (m_out, e_out) = operand_multipliers((a.scale, b.scale, ofm.scale), bits)
    if bits == 16:
        first, second = _scaled_operand16(ops, "first", a, m_a), _scaled_operand16(ops, "second", b, m_b)
    else:
        first = _table_lookup32(ops, "first", a, operand_table(a.dtype, a.zero_point, m_a))
        second = _table_lookup32(ops, "second", b, operand_table(b.dtype, b.zero_point, m_b))
    total = ops.scratch("sum", ofm.shape, "int32")
    ops.elementwise(mode, first, second, total)
    _rescale_int32(ops, total, m_out, -e_out, ofm, activation)


def power_of_two_add_sub(lw: LoweringContext, index: int, mode: str, a: FeatureMapView, b: FeatureMapView,
                         ofm: FeatureMapView, shifts: tuple[int, int], activation: dict) -> None:
    """TFLite's power-of-two int16 ADD/SUB: the operand whose input shift (`shifts`, both <= 0,
    one of them 0) is -r divided by 2^r (RoundingDivideByPOT, a TFL-rounded SHR), then the
    saturating sum or difference with unit scales (module docstring)."""
    ops = OperationBuilder(lw, index, mode)
    operands = [a, b]
    for i, shift in enumerate(shifts):
        if shift < 0:
            x = operands[i]
            operands[i] = ops.scratch("divided", x.shape, x.dtype)
            ops.elementwise("SHR", x, lw.constant(np.array([-shift]), x.dtype), operands[i], global_scale=False)
    ops.elementwise(mode, *operands, ofm, activation=activation)


def _wrapping_shift(values: np.ndarray, shift: int) -> np.ndarray:
    return ((values << shift) + INT32_LIMIT) % (1 << 32) - INT32_LIMIT


def product_left_shift(exponent: int) -> int:
    """The left shift the reference applies to a MUL product for a multiplier exponent above
    0: ``1 << exponent`` with the x86 shift count (modulo 32)."""
    return exponent % 32


def product_fits(largest_product: int, exponent: int) -> bool:
    """Whether every product, shifted left as the reference does, stays in int32 (no wrap)."""
    return exponent <= 0 or largest_product << product_left_shift(exponent) < INT32_LIMIT


def multiply_registers(multiplier: int, exponent: int) -> tuple[int, int]:
    """One NPU MUL's (OFM scale, shift) for the reference's rescale of a product that fits:
    TFL rounding with a shift below 31 is one high multiply of the product shifted left."""
    if exponent <= 0:
        return multiplier, SRDHM_SHIFT - exponent
    return multiplier, SRDHM_SHIFT - product_left_shift(exponent)


def wrapping_multiply(lw: LoweringContext, index: int, a: FeatureMapView, b: FeatureMapView, ofm: FeatureMapView,
                      multiplier: int, exponent: int, activation: dict) -> None:
    """MUL whose shifted product leaves int32 in the reference: the product in int32, a
    wrapping SHL, then the high multiply into the output (module docstring)."""
    ops = OperationBuilder(lw, index, "MUL")
    product = ops.scratch("product", ofm.shape, "int32")
    ops.elementwise("MUL", a, b, product)
    shifted = ops.scratch("shifted", ofm.shape, "int32")
    ops.elementwise("SHL", product, lw.constant(np.array([product_left_shift(exponent)]), "int32"), shifted,
                    global_scale=False)
    _rescale_int32(ops, shifted, multiplier, 0, ofm, activation)


def largest_product(first: Sequence[int], second: Sequence[int]) -> int:
    """The largest |x * y| over two operands' values (`add_sub_rounding.operand_values`, ascending)."""
    return max(abs(first[0]), abs(first[-1])) * max(abs(second[0]), abs(second[-1]))


def reference_multiply(first: np.ndarray, second: np.ndarray, multiplier: int, exponent: int) -> np.ndarray:
    """TFLite's 8-bit MUL of operand values before the zero point and clamp, int32 wrap
    included: SRDHM(wrap(x * y << s), M), then the right shift."""
    product = np.asarray(first, np.int64) * np.asarray(second, np.int64)
    left = product_left_shift(exponent) if exponent > 0 else 0
    high = fp.saturating_rounding_doubling_high_mul(_wrapping_shift(product, left), multiplier)
    return fp.rounding_divide_by_pot(high, max(-exponent, 0))
