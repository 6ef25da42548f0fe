"""ADD and SUB register values, proven against the reference's rounding on every input pair.

TFLite's ADD/SUB shifts both operands left by a headroom (20 bits for 8-bit operands, 15 for
16-bit), brings them to twice the larger input scale with MultiplyByQuantizedMultiplier and
rescales the sum the same way. The larger-scaled operand's multiplier is exactly 1/2, so it is
shifted exactly; the other's rounds twice: the high multiply (SRDHM), then its shift
(RoundingDivideByPOT). The NPU scales that operand with one 32-bit multiply and a shift below
31, which rounds once (`add_sub_scales`, Vela's register values), and shifts the other by the
headroom less one. The sum's rescale is the reference's own (a shift of 31 or more rounds as
MultiplyByQuantizedMultiplier does). So the two differ only through the scaled operand: on the
values it rounds one off, and there only where the sum lands next to an output step.

Deciding it (`registers_exact`). Let S(v) be the reference's scaled operand and S(v) + d(v) the NPU's,
P(u) = +-u 2^(headroom-1) the plain operand's term, R the output rescale. R is monotone and
steps up by one at sums b_k that have a closed form (`output_steps`). For a value v with
d(v) != 0, the outputs differ for some u iff a step inside the clamp lies between
P(u) + S(v) and P(u) + S(v) + d(v): a step b_k, and a u, with b_k - P(u) in a window of |d|
sums after S(v). P(u) runs through an arithmetic progression of difference 2^(headroom-1) over
each run of consecutive values u, so this asks whether b_k falls in the residue class of the
window modulo 2^(headroom-1) and in the range the run covers: one binary search per (v, window
offset, run) in the steps sorted by (residue, quotient). Cost O((V + K) log K) for V values of
the scaled operand and K output levels, against V x U pairs by brute force: an int16 pair has
2^32 inputs, the decision takes milliseconds.

Where Vela's registers are not exact, the nearest operand multiplier that is (`exact_add_sub_scales`):
for int16, one that rounds every value as the reference does, found by intersecting each
value's interval of good multipliers (`_single_rounding_multipliers`); for 8-bit, a few dozen
multipliers around Vela's (coral_movenet's is 3 units up). When there is none, the lowering
makes an 8-bit operator with a single-valued constant a table lookup, exact by construction
(`add_sub_table`), and otherwise a chain of NPU operations that rounds as the reference does
(`exact_elementwise`). Of 400 random 8-bit scale triples and zero points (two tensors, no
activation), Vela's registers were exact for 395 and the search fixed the other 5; "round"
scales can leave none (uint8 SUB, 0.1875 and 0.125 into 0.1, zero points 90, 77, 118, RELU6:
one pair of 65,536 off by one with any multiplier near Vela's). For two int16 tensors a single
operation is exact almost only where the scaled operand rounds every value right: of 200
random scale triples, Vela's registers were exact for none, the search fixed 1 and multipliers
up to 8 units from Vela's none; power-of-two ratios (equal scales among them) need no fix. The
operator zoo's 0.05 + 0.03 into 0.06 had 3 of 2,048 outputs one off with Vela's registers and
takes the chain. The decision takes about 10 ms for two int16 tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .. import _core
from . import fixed_point as fp
from .lowered import TYPE_RANGE
from .quantization import add_sub_scales

HEADROOM = {8: 20, 16: 15}  # TFLite's left shift of ADD/SUB operands, by operand width
TFL_ROUNDING = 0  # scale_accumulator's rounding code for TFL
SEARCH_STEPS = 32  # 8-bit operand multipliers tried on each side of Vela's; fixes found were within 27


def _f32(x: float) -> float:
    return float(np.float32(x))


def operand_multipliers(scales: tuple[float, float, float],
                        bits: int = 8) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """The reference's (multiplier, exponent) of each operand and of the output."""
    a, b, o = (_f32(s) for s in scales)
    twice_max = 2 * max(a, b)
    return (fp.quantize_multiplier(a / twice_max), fp.quantize_multiplier(b / twice_max),
            fp.quantize_multiplier(twice_max / ((1 << HEADROOM[bits]) * o)))


def reference_output_multiplier(scales: tuple[float, float, float], bits: int = 8) -> float | None:
    """The reference's rescale of the sum (twice the larger input scale over 2^headroom times
    the output scale) when it is outside the range TFLite's ADD/SUB defines, else None. The
    kernel takes it as a Q0.31 multiplier below 1 (QuantizeMultiplierSmallerThanOneExp);
    beyond, its int32 arithmetic shifts by a negative amount and what it returns is not the
    rescaled sum (an output scale of 4e-9, a layer calibrated on all-zero outputs, turned
    sums into -127 where 127 was due)."""
    _, _, (_, exponent) = operand_multipliers(scales, bits)
    if exponent <= 0:
        return None
    a, b, o = (_f32(s) for s in scales)
    return 2 * max(a, b) / ((1 << HEADROOM[bits]) * o)


def _checked_log2(scale: float) -> int | None:
    """TFLite's CheckedLog2, in float32 as it computes it: log2(scale) rounded, or None when
    scale is not within 1e-3 (in log2) of that power of two."""
    log2 = np.float32(np.log(np.float32(scale))) * np.float32(1.0 / np.log(np.float32(2.0)))
    rounded = np.float32(np.sign(log2) * np.floor(np.abs(log2) + np.float32(0.5)))  # TfLiteRound: half away
    return int(rounded) if abs(float(np.float32(log2 - rounded))) < 1e-3 else None


def power_of_two_shifts(scales: tuple[float, float, float], pot_scale_int16: bool) -> tuple[int, int] | None:
    """The input shifts (log2 of each input scale less log2 of the output's) of TFLite's
    power-of-two int16 ADD/SUB path, or None where the kernel takes the general path: it
    takes the other one where the operator's option ``pot_scale_int16`` (true by default in
    the schema) holds and all three scales are powers of two."""
    logs = [_checked_log2(s) for s in scales]
    if not pot_scale_int16 or None in logs:
        return None
    return logs[0] - logs[2], logs[1] - logs[2]


def reference_operand(values: np.ndarray, multiplier: tuple[int, int], bits: int) -> np.ndarray:
    """The reference's scaled operand: MultiplyByQuantizedMultiplier(value << headroom, m, e)."""
    return fp.multiply_by_quantized_multiplier(np.asarray(values, np.int64) << HEADROOM[bits], *multiplier)


def reference_add_sub(first: np.ndarray, second: np.ndarray, scales: tuple[float, float, float],
                      subtract: bool, bits: int = 8) -> np.ndarray:
    """TFLite's ADD/SUB of operand values (codes minus zero points), before the output's zero
    point and clamp (``reference_integer_ops::Add``/``Sub``, the general int16 path)."""
    m_first, m_second, m_out = operand_multipliers(scales, bits)
    first, second = reference_operand(first, m_first, bits), reference_operand(second, m_second, bits)
    return fp.multiply_by_quantized_multiplier(first - second if subtract else first + second, *m_out)


def _npu_operands(first: np.ndarray, second: np.ndarray, registers: dict, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The NPU's rescaled operands: one through the OPA scale, the other shifted left by the
    headroom less one."""
    multiplier, shift = registers["opa_scale"]
    first, second = np.asarray(first, np.int64), np.asarray(second, np.int64)
    plain_shift = HEADROOM[bits] - 1
    if registers["ifm_scale_mode"] == 1:
        return _core.scale_accumulator(first, multiplier, shift, TFL_ROUNDING), second << plain_shift
    return first << plain_shift, _core.scale_accumulator(second, multiplier, shift, TFL_ROUNDING)


def npu_add_sub(first: np.ndarray, second: np.ndarray, registers: dict, subtract: bool, bits: int = 8) -> np.ndarray:
    """What the NPU computes from operand values with `registers` (those of `add_sub_scales`),
    before the output's zero point and clamp."""
    first, second = _npu_operands(first, second, registers, bits)
    return _core.scale_accumulator(first - second if subtract else first + second, *registers["ofm_scale"],
                                   TFL_ROUNDING)


def output_steps(multiplier: tuple[int, int], levels: tuple[int, int]) -> np.ndarray:
    """The sums s at which the reference's output rescale R(s) = MultiplyByQuantizedMultiplier
    (s, m, e), e <= 0, steps from k - 1 up to k, for every level k with lo < k <= hi of
    `levels` = (lo, hi): where the clamped output changes. Ascending, within int32.
    SRDHM(s, m) = floor((s m + 2^30) / 2^31) (gemmlowp's nudge rounds halves up for both
    signs), and RoundingDivideByPOT(h, n) >= k iff h >= k 2^n - 2^(n-1), plus one for k <= 0
    (a negative half rounds away from zero); so R(s) >= k iff s >= ceil((H_k 2^31 - 2^30) / m)."""
    m, exponent = multiplier
    assert exponent <= 0, "the NPU's output stage is the reference's rescale only below 1"
    lo, hi = levels
    if m == 0 or hi <= lo:
        return np.zeros(0, np.int64)  # R is constant: no step
    k = np.arange(lo + 1, hi + 1, dtype=np.int64)
    n = -exponent
    h = k if n == 0 else (k << n) - (1 << (n - 1)) + (k <= 0)
    # |SRDHM| <= |s| < 2^31 on int32 sums: farther thresholds are never reached (and the
    # clip keeps H * 2^31 within int64).
    h = np.clip(h, -(1 << 31) - 1, (1 << 31) + 1)
    steps = -((-(h * (1 << 31) - (1 << 30))) // m)
    return steps[np.abs(steps) < (1 << 31)]


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """Sorted distinct `values` as maximal runs of consecutive integers (first, last)."""
    v = np.asarray(values, np.int64)
    if not v.size:
        return []
    if np.any(v[1:] < v[:-1]):  # a tensor's values come sorted
        v = np.sort(v)
    v = v[np.concatenate([[True], v[1:] != v[:-1]])]
    breaks = np.flatnonzero(np.diff(v) != 1)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [v.size - 1]])
    return [(int(v[s]), int(v[e])) for s, e in zip(starts, ends)]


@lru_cache(maxsize=64)
def _step_keys(multiplier: tuple[int, int], levels: tuple[int, int], stride: int) -> tuple[np.ndarray, int, int]:
    """`output_steps` sorted by (residue, quotient) modulo `stride`, as one key each
    (residue * span + quotient - lowest quotient), with (lowest quotient, span)."""
    steps = output_steps(multiplier, levels)
    if not steps.size:
        return steps, 0, 1
    residue, quotient = steps % stride, steps // stride
    q_min = int(quotient.min())
    span = int(quotient.max()) - q_min + 1
    # The steps ascend, so a stable sort by residue (a radix sort below 2^16) orders the keys.
    order = np.argsort(residue.astype(np.uint16) if stride <= 1 << 16 else residue, kind="stable")
    return (residue * span + (quotient - q_min))[order], q_min, span


QUERIES = 1 << 14  # (window, run) pairs per binary search: a register set that is not exact usually shows in the first


def _window_hits(steps: tuple[np.ndarray, int, int], start: np.ndarray, width: np.ndarray, stride: int,
                 runs: list[tuple[int, int]]) -> bool:
    """Whether some step b and some i of one window and q of one run satisfy
    b = start + i + stride * q (0 <= i < width): the steps (`_step_keys`) against the windows
    start..start + width - 1 (one per element) shifted by every multiple of `stride` a run of
    `runs` holds."""
    keys, q_min, span = steps
    if not keys.size or not runs:
        return False
    firsts, lasts = (np.array(r, np.int64) for r in zip(*runs))
    chunk = max(1, QUERIES // len(runs))
    for at in range(0, start.size, chunk):
        chunk_start, chunk_width = start[at:at + chunk], width[at:at + chunk]
        for offset in range(int(chunk_width.max())):
            target = (chunk_start[chunk_width > offset] + offset)[:, None]
            t_residue, t_quotient = target % stride, target // stride
            low = np.clip(t_quotient + firsts - q_min, 0, span)
            high = np.clip(t_quotient + lasts - q_min, -1, span - 1)
            key_low, key_high = t_residue * span + low, t_residue * span + high
            index = np.searchsorted(keys, key_low)
            found = keys[np.minimum(index, keys.size - 1)]
            if np.any((index < keys.size) & (found <= key_high) & (key_low <= key_high)):
                return True
    return False


class _Operands:
    """One ADD/SUB's operand values and the reference's arithmetic on them, shared by the
    register sets tried: the reference's scaled operand is computed once."""

    def __init__(self, first: np.ndarray, second: np.ndarray, scales: tuple[float, float, float], subtract: bool,
                 clamp: tuple[int, int], bits: int, scaled: int) -> None:
        multipliers = operand_multipliers(scales, bits)
        self.m_out, self.subtract, self.clamp, self.bits, self.scaled = multipliers[2], subtract, clamp, bits, scaled
        self.values, self.plain = (first, second) if scaled == 0 else (second, first)
        self.theirs = reference_operand(self.values, multipliers[scaled], bits)

    def exact(self, registers: dict) -> bool:
        """Whether `registers` (scaling this operand) give the reference's result, clamped, on
        every pair (module docstring)."""
        m_out = self.m_out
        reference_stage = (m_out[0], 31 - m_out[1]) if m_out[0] else (0, 0)  # quantise_scale's flush to zero
        if m_out[1] > 0 or tuple(registers["ofm_scale"]) != reference_stage:
            return False  # not the reference's output rescale: nothing proven
        assert (0 if registers["ifm_scale_mode"] == 1 else 1) == self.scaled
        ours = _core.scale_accumulator(self.values, *registers["opa_scale"], TFL_ROUNDING)
        differ = ours != self.theirs
        if not differ.any():
            return True
        # The sum is first +- second: the subtrahend's term enters negated.
        scaled_sign = -1 if self.subtract and self.scaled == 1 else 1
        plain_sign = -1 if self.subtract and self.scaled == 0 else 1
        base = scaled_sign * self.theirs[differ]
        delta = scaled_sign * (ours[differ] - self.theirs[differ])
        # The NPU's sum is the reference's plus delta: they straddle a step b iff b - P(u) lies
        # in base + 1 .. base + delta (delta > 0) or base + delta + 1 .. base (delta < 0).
        start = base + np.minimum(delta, 0) + 1
        runs = [(-last, -first) if plain_sign < 0 else (first, last) for first, last in _runs(self.plain)]
        stride = 1 << (HEADROOM[self.bits] - 1)
        return not _window_hits(_step_keys(m_out, self.clamp, stride), start, np.abs(delta), stride, runs)

    def candidates(self, registers: dict) -> list[dict]:
        """Register sets to try after Vela's `registers`: other operand multipliers at its shift."""
        multiplier, shift = registers["opa_scale"]
        if self.bits == 8:
            steps = [multiplier + s * sign for s in range(1, SEARCH_STEPS + 1) for sign in (1, -1)]
        elif shift >= 31:
            return []
        else:
            # 2^16 values: a multiplier that rounds some value one off almost always meets an
            # output step for some 2^16-value partner, so only one that rounds every value as
            # the reference does is worth a try (the one nearest Vela's).
            lowest, highest = _single_rounding_multipliers(self.values, self.theirs, shift)
            steps = [min(max(multiplier, lowest), highest)] if lowest <= highest else []
        return [dict(registers, opa_scale=(m, shift)) for m in steps if 0 < m < (1 << 31) and m != multiplier]


def registers_exact(first: Sequence[int], second: Sequence[int], registers: dict, scales: tuple[float, float, float],
                    subtract: bool, clamp: tuple[int, int], bits: int) -> bool:
    """Whether ADD/SUB `registers` give the reference's result, clamped to `clamp` (the output's
    range less its zero point), on every pair of `first` x `second` operand values."""
    scaled = 0 if registers["ifm_scale_mode"] == 1 else 1
    return _Operands(_array(first), _array(second), scales, subtract, clamp, bits, scaled).exact(registers)


def _single_rounding_multipliers(values: np.ndarray, target: np.ndarray, shift: int) -> tuple[int, int]:
    """(lowest, highest) multiplier m with round-half-up(v m / 2^shift) == target for every v:
    each value bounds m to an interval; their intersection (empty when lowest > highest)."""
    v, t = np.asarray(values, np.int64), np.asarray(target, np.int64)
    if np.any(t[v == 0] != 0):
        return 1, 0
    half = 1 << (shift - 1)
    pos, neg = v > 0, v < 0
    # v > 0: (2t - 1) 2^(shift-1) <= v m < (2t + 1) 2^(shift-1)
    low_pos = -((-(2 * t[pos] - 1) * half) // v[pos])
    high_pos = -((-(2 * t[pos] + 1) * half) // v[pos]) - 1
    # v < 0: the same bounds on v m, divided by a negative v
    low_neg = ((2 * t[neg] + 1) * half) // v[neg] + 1
    high_neg = ((2 * t[neg] - 1) * half) // v[neg]
    lowest = max(int(low_pos.max(initial=0)), int(low_neg.max(initial=0)), 1)
    highest = min(int(high_pos.min(initial=(1 << 31) - 1)), int(high_neg.min(initial=(1 << 31) - 1)))
    return lowest, highest


def operand_values(dtype: str, zero_point: int, constant: np.ndarray | None = None) -> Sequence[int]:
    """The values (codes minus zero point) an operand can hold, ascending: a constant its own
    (a tuple), a tensor any code of `dtype` (a range: 2^16 of them hash and compare as three
    numbers)."""
    if constant is not None:
        return tuple(int(c) - zero_point for c in np.unique(constant))
    lo, hi = TYPE_RANGE[dtype]
    return range(lo - zero_point, hi - zero_point + 1)


def _array(values: Sequence[int]) -> np.ndarray:
    if isinstance(values, range):
        return np.arange(values.start, values.stop, values.step, dtype=np.int64)
    return np.asarray(values, np.int64)


@lru_cache(maxsize=1024)
def exact_add_sub_scales(scales: tuple[float, float, float], first_values: Sequence[int],
                         second_values: Sequence[int], subtract: bool, clamp: tuple[int, int],
                         bits: int = 8) -> dict | None:
    """ADD/SUB registers for `bits`-bit operands that give the reference's result on every pair
    of operand values (`operand_values`), or None when neither Vela's nor a searched operand
    multiplier does (module docstring). `clamp` is the output's range less its zero point:
    results beyond it need not agree."""
    registers = add_sub_scales(*scales, bits)
    scaled = 0 if registers["ifm_scale_mode"] == 1 else 1
    operands = _Operands(_array(first_values), _array(second_values), scales, subtract, clamp, bits, scaled)
    if operands.exact(registers):
        return registers
    return next((trial for trial in operands.candidates(registers) if operands.exact(trial)), None)


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
