"""8-bit ADD and SUB register values, checked against the reference's rounding on every input pair.

TFLite's ADD/SUB brings both operands to twice the larger input scale with 20 bits of
headroom, and rounds the smaller-scaled operand twice on the way: the high multiply (SRDHM) of
the left-shifted value, then its shift (RoundingDivideByPOT). The NPU scales that operand with
one 32-bit multiply and a shift below 31, which rounds once (`add_sub_scales`, Vela's register
values). The two intermediates differ by one on about a third of the codes, and that only
shows where the output lands exactly on a half: there the reference's extra rounding decides
the code, and the NPU can be one off. Exact halves need "round" scales (x at 0.125 plus a
constant at 0.1875 into 0.2: -124 gives -77.5) or luck: 1 of the 97 8-bit ADD/SUBs in the
shared models (coral_movenet's, 2 of its 65,536 input pairs).

So the registers are checked on every pair of codes the operands can hold (a constant holds
its own values), through the NPU's own rescale (the simulator's, `_core.scale_accumulator`):
Vela's registers when they are exact, else the nearest exact operand multiplier around them
(movenet's is 3 units up). When there is none, `exact_add_sub_scales` says so; the lowering
then makes an operator with a single-valued constant a table lookup, exact by construction
(`add_sub_table`), and otherwise a chain of NPU operations that rounds as the reference does
(`exact_elementwise`). Of 400 random scale triples and zero
points (two tensors, no activation), Vela's registers were exact for 395 and the search fixed
the other 5; "round" scales can leave none (uint8 SUB, 0.1875 and 0.125 into 0.1, zero points
90, 77, 118, RELU6: one pair of 65,536 off by one with any multiplier near Vela's).
int16 operands are not checked: a tensor pair has 2^32 inputs, and TFLite takes another path
for power-of-two int16 scales.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import _core
from . import fixed_point as fp
from .lowered import TYPE_RANGE
from .quantization import add_sub_scales

INT16_CAVEAT = "16x8 ADD/SUB: one off TFLite on a few input pairs in a million (so is Vela)"
HEADROOM = 20  # TFLite's left shift of 8-bit ADD/SUB operands
TFL_ROUNDING = 0  # scale_accumulator's rounding code for TFL
SEARCH_STEPS = 32  # operand multipliers tried on each side of Vela's; fixes found were within 27


def _f32(x: float) -> float:
    return float(np.float32(x))


def operand_multipliers(scales: tuple[float, float, float]) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """The reference's (multiplier, exponent) of each operand and of the output."""
    a, b, o = (_f32(s) for s in scales)
    twice_max = 2 * max(a, b)
    return (fp.quantize_multiplier(a / twice_max), fp.quantize_multiplier(b / twice_max),
            fp.quantize_multiplier(twice_max / ((1 << HEADROOM) * o)))


def unchecked_int16(opcode: str, dtypes: tuple[str, ...]) -> bool:
    """Whether the NPU's ADD/SUB registers for these operand types are not checked against the
    reference (int16: see the module), so may be one off on some input pairs."""
    return opcode in ("ADD", "SUB") and "int16" in dtypes


def reference_output_multiplier(scales: tuple[float, float, float]) -> float | None:
    """The reference's rescale of the sum (twice the larger input scale over 2^20 times the
    output scale) when it is outside the range TFLite's 8-bit ADD/SUB defines, else None. The
    kernel takes it as a Q0.31 multiplier below 1 (QuantizeMultiplierSmallerThanOneExp);
    beyond, its int32 arithmetic shifts by a negative amount and what it returns is not the
    rescaled sum (an output scale of 4e-9, a layer calibrated on all-zero outputs, turned
    sums into -127 where 127 was due)."""
    _, _, (_, exponent) = operand_multipliers(scales)
    if exponent <= 0:
        return None
    a, b, o = (_f32(s) for s in scales)
    return 2 * max(a, b) / ((1 << HEADROOM) * o)


def reference_add_sub(first: np.ndarray, second: np.ndarray, scales: tuple[float, float, float],
                      subtract: bool) -> np.ndarray:
    """TFLite's 8-bit ADD/SUB of operand values (codes minus zero points), before the output's
    zero point and clamp (``reference_integer_ops::Add``/``Sub``)."""
    m_first, m_second, m_out = operand_multipliers(scales)
    first = fp.multiply_by_quantized_multiplier(np.asarray(first, np.int64) << HEADROOM, *m_first)
    second = fp.multiply_by_quantized_multiplier(np.asarray(second, np.int64) << HEADROOM, *m_second)
    return fp.multiply_by_quantized_multiplier(first - second if subtract else first + second, *m_out)


def _npu_operands(first: np.ndarray, second: np.ndarray, registers: dict) -> tuple[np.ndarray, np.ndarray]:
    """The NPU's rescaled operands: one through the OPA scale, the other shifted left by the
    headroom less one."""
    multiplier, shift = registers["opa_scale"]
    first, second = np.asarray(first, np.int64), np.asarray(second, np.int64)
    if registers["ifm_scale_mode"] == 1:
        return _core.scale_accumulator(first, multiplier, shift, TFL_ROUNDING), second << (HEADROOM - 1)
    return first << (HEADROOM - 1), _core.scale_accumulator(second, multiplier, shift, TFL_ROUNDING)


def npu_add_sub(first: np.ndarray, second: np.ndarray, registers: dict, subtract: bool) -> np.ndarray:
    """What the NPU computes from operand values with `registers` (those of `add_sub_scales`),
    before the output's zero point and clamp."""
    first, second = _npu_operands(first, second, registers)
    return _core.scale_accumulator(first - second if subtract else first + second, *registers["ofm_scale"],
                                   TFL_ROUNDING)


def _exact(first: np.ndarray, second: np.ndarray, registers: dict, scales: tuple[float, float, float],
           subtract: bool, clamp: tuple[int, int]) -> bool:
    """Whether `registers` give the reference's result, clamped to `clamp`, on every pair of
    `first` x `second`.
    Only the scaled operand's rounding differs from the reference's (the other is shifted
    exactly, and the output is rescaled as the reference does it when its shift is 31 or
    more), so only the values it rounds differently are tried against every other value."""
    m_first, m_second, _ = operand_multipliers(scales)
    ours = _npu_operands(first, second, registers)
    theirs = (fp.multiply_by_quantized_multiplier(first << HEADROOM, *m_first),
              fp.multiply_by_quantized_multiplier(second << HEADROOM, *m_second))
    if registers["ofm_scale"][1] >= 31:
        scaled = 0 if registers["ifm_scale_mode"] == 1 else 1
        differ = ours[scaled] != theirs[scaled]
        if not differ.any():
            return True
        if scaled == 0:
            first = first[differ]
        else:
            second = second[differ]
    first, second = first[:, None], second[None, :]
    return np.array_equal(np.clip(npu_add_sub(first, second, registers, subtract), *clamp),
                          np.clip(reference_add_sub(first, second, scales, subtract), *clamp))


def operand_values(dtype: str, zero_point: int, constant: np.ndarray | None = None) -> tuple[int, ...]:
    """The values (codes minus zero point) an operand can hold: a constant its own, a tensor any
    code of `dtype`."""
    if constant is not None:
        return tuple(int(c) - zero_point for c in np.unique(constant))
    lo, hi = TYPE_RANGE[dtype]
    return tuple(range(lo - zero_point, hi - zero_point + 1))


@lru_cache(maxsize=1024)
def exact_add_sub_scales(scales: tuple[float, float, float], first_values: tuple[int, ...],
                         second_values: tuple[int, ...], subtract: bool, clamp: tuple[int, int]) -> dict | None:
    """ADD/SUB registers that give the reference's result on every pair of operand values
    (`operand_values`), or None when no operand multiplier near Vela's does. `clamp` is the
    output's range less its zero point: results beyond it need not agree."""
    registers = add_sub_scales(*scales, 8)
    first, second = np.asarray(first_values, np.int64), np.asarray(second_values, np.int64)
    if _exact(first, second, registers, scales, subtract, clamp):
        return registers
    multiplier, shift = registers["opa_scale"]
    for step in range(1, SEARCH_STEPS + 1):
        for candidate in (multiplier + step, multiplier - step):
            trial = dict(registers, opa_scale=(candidate, shift))
            if 0 < candidate < (1 << 31) and _exact(first, second, trial, scales, subtract, clamp):
                return trial
    return None


def add_sub_table(scales: tuple[float, float, float], zero_points: tuple[int, int, int], constant: int,
                  constant_first: bool, dtype: str, clamp: tuple[int, int], subtract: bool) -> np.ndarray:
    """The output code for every code of the tensor operand, its other operand the constant
    code `constant`: the operator as a 256-entry table, computed by the reference's arithmetic."""
    lo, hi = TYPE_RANGE[dtype]
    x = np.arange(lo, hi + 1, dtype=np.int64)
    first_zp, second_zp, out_zp = zero_points
    if constant_first:
        raw = reference_add_sub(np.int64(constant - first_zp), x - second_zp, scales, subtract)
    else:
        raw = reference_add_sub(x - first_zp, np.int64(constant - second_zp), scales, subtract)
    return np.clip(raw + out_zp, *clamp)
