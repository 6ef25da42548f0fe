"""PRELU (int8, uint8, and int16 with an int8 alpha) and int16 LEAKY_RELU as two to four NPU
operations, bit-exact (an 8-bit LEAKY_RELU is a table lookup, `lower_lut`).

TFLite's reference PRELU picks one of two rescales by the input's sign:

    out = zp_out + MBQM(x - zp, m1)                     if x >= zp   (m1 = s_in / s_out)
    out = zp_out + MBQM((x - zp) * (a - zp_a), m2)      otherwise    (m2 = s_in * s_a / s_out)

The NPU has no select, but each branch can be made to contribute nothing outside its half:

    positive = clamp(zp_out + MBQM(x - zp, m1), min=zp_out)     a MUL by 1 (int16: a 1x1 pool)
    x_neg    = min(x, zp)                                       an elementwise MIN (raw values)
    negative = zp_out + MBQM((x_neg - zp) * (a - zp_a), m2)     a MUL, alpha broadcast
    out      = (positive - zp_out) + (negative - zp_out) + zp_out   an unscaled ADD

For x >= zp, x_neg - zp is 0 and so is the negative branch; for x < zp the rescaled value is
negative and the clamp leaves zp_out. One term is always zero, so the ADD is exact and its
clamp is the reference's. MBQM (MultiplyByQuantizedMultiplier) is the NPU's TFL rounding.
When every alpha has one sign, a clamp of the MUL at zp_out does what x_neg does, and the
lowering is three operations (Vela's U55 form, which assumes alpha >= 0).

Cheaper forms select instead of adding (an ADD costs two MULs on the U55/U65), each proven at
compile time over every input code and every alpha (`_Branches`, the reference's
MultiplyByQuantizedMultiplier against the NPU's rescale):

- select: in real numbers both branches are lines through (zp, zp_out), so where every alpha
  is at most 1 (of either sign) out = MAX(positive, product) over whole, unclamped branches,
  and where every alpha is at least 1 out = MIN of them: two operations with one quantization
  in and out (x is the positive branch; Vela 5.2's U85 form for alpha <= 1: zoo 8x8x16 on
  U85-256, 2,074 -> 774 cycles, Vela's 775), else three (x rescaled by a MUL by 1).
- sign select (U55/U65, 8-bit): alphas on both sides of 1 need a MAX on some channels and a
  MIN on others; with a sign s per channel, MIN(a, b) = -MAX(-a, -b), so
  out = s MAX(s positive, s product) in four operations, 16-bit in between (`_sign_select`).
  palm_detection's PRELUs (alphas -4.5 to 12 per channel, two quantizations) take it: U55-128
  24.7M -> 22.4M cycles.

Otherwise (the U85, where each is four passes of one speed and the sum moves fewer bytes;
int16; or a rounding no selection follows) the sum above. An 8-bit positive branch is a MUL by
1 scaled by m1 rather than the rescaling pool (`_positive_part`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import _core
from ..arch import Accelerator
from ..errors import UnsupportedError
from . import fixed_point as fp
from .add_sub_rounding import TFL_ROUNDING
from .lower_lut import lower_lut
from .lower_movement import raw_copy
from .lowered import TYPE_RANGE, full_range
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder, require_8bit_in_out
from .operator_view import OperatorView
from .quantization import multiply_real, quantise_scale

# TFLite's 16x8 PRELU: int16 input and output, int8 alpha (TFLM's PreluPrepare requires it).
INT16_ALPHA_DTYPE = "int8"
SIGNED_DTYPE = "int16"  # the sign-select form's intermediate maps
UNIT_SCALE = quantise_scale(1.0)
CHECKED_PER_RUN = 1 << 20  # input code and slope pairs the compile-time checks hold at once


def lower_prelu(lw: LoweringContext, v: OperatorView) -> None:
    assert v.ifm is not None and v.ofm is not None
    int16 = v.ifm.dtype == v.ofm.dtype == "int16"
    if not int16:
        require_8bit_in_out(v)
    x, out = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    alpha = lw.view(v.op.inputs[1])
    if alpha.dtype != (INT16_ALPHA_DTYPE if int16 else x.dtype) or x.shape != out.shape:
        raise UnsupportedError(f"operator {v.index} (PRELU): alpha is {alpha.dtype}, input {x.dtype}" + (
            "; int16 PRELU takes an int8 alpha (TFLM's kernel refuses any other, LiteRT's reads its bytes as int8)"
            if int16 else ""))
    if any(a not in (1, o) for a, o in zip(alpha.shape, out.shape)):
        raise UnsupportedError(f"operator {v.index} (PRELU): alpha {alpha.shape} does not broadcast to {out.shape}")
    ops = OperationBuilder(lw, v.index, "PRELU")
    slopes = _constant_slopes(lw, v)
    branches = _Branches.of(x, out, alpha)
    # Decided before alpha is widened: the sign-select form multiplies 8-bit codes only.
    select = None if slopes is None else branches.select(slopes)
    signs = None if select is not None or slopes is None or not _sign_select_pays(lw, x, alpha) else (
        branches.signs(slopes))
    if int16:
        # The NPU multiplies operands of one type: alpha's codes widened (raw) to int16.
        wide = ops.scratch("alpha_int16", alpha.shape, "int16", alpha.zero_point, alpha.scale)
        raw_copy(lw, v.index, f"{v.index}:PRELU(alpha to int16)", alpha, wide)
        alpha = wide
    m2 = branches.m2
    if select is not None:
        # One selection of two whole branches (module docstring): x itself where one
        # quantization is in and out, else x rescaled unclamped.
        positive = x if branches.same else _positive_part(ops, x, out, clamped=False)
        product = ops.scratch("product", out.shape, out.dtype, out.zero_point, out.scale)
        ops.elementwise("MUL", x, alpha, product, ofm_scale=m2)
        ops.elementwise(select, replace(positive, zero_point=0), replace(product, zero_point=0),
                        replace(out, zero_point=0))
        return
    if signs is not None:
        _sign_select(lw, ops, x, out, alpha, slopes, signs, branches)
        return
    positive = _positive_part(ops, x, out)
    negative = ops.scratch("negative", out.shape, out.dtype, out.zero_point, out.scale)
    if slopes is not None and ((slopes >= 0).all() or (slopes <= 0).all()):
        # One-signed alpha (the usual case): the product has the sign of x (or the opposite)
        # everywhere, so clamping the MUL at zp_out already zeroes it for x >= zp.
        ops.elementwise("MUL", x, alpha, negative, ofm_scale=m2, activation=_below(out, (slopes >= 0).all()))
    else:
        # An elementwise MIN against the zero point costs half a clamping pool.
        below = ops.scratch("input_below_zero", x.shape, x.dtype, x.zero_point, x.scale)
        zero = lw.constant(np.array([x.zero_point]), x.dtype)
        ops.elementwise("MIN", replace(x, zero_point=0), zero, replace(below, zero_point=0))
        ops.elementwise("MUL", below, alpha, negative, ofm_scale=m2)
    ops.elementwise("ADD", positive, negative, out, activation=full_range(out.dtype))


def lower_leaky_relu_int16(lw: LoweringContext, v: OperatorView) -> None:
    """int16 LEAKY_RELU (QuantizeLeakyRelu: the identity or the alpha rescale by sign), for
    alpha >= 0 one LRELU: on the U55/U65 with equal quantizations (alpha is its output scale),
    on the Ethos-U85 with any (its LRELU rescales the operand by IFM_SCALE, the identity
    multiplier, at or above zero and by IFM2_SCALE, alpha's, below; both TFLite's double
    rounding, which is MultiplyByQuantizedMultiplier: arch/ethos_u85/elementwise.hpp).
    Otherwise the same three operations as PRELU, alpha a MUL by the constant 1 scaled by
    alpha's multiplier."""
    x, out = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    if x.zero_point or out.zero_point:
        raise UnsupportedError(f"operator {v.index} (LEAKY_RELU): int16 with a non-zero zero point")
    alpha = float(v.options.get("alpha", 0.2))
    # LeakyReluPrepare forms both multipliers in float32.
    alpha_scale = float(np.float32(x.scale) * np.float32(alpha) / np.float32(out.scale))
    ops = OperationBuilder(lw, v.index, "LEAKY_RELU")
    if alpha >= 0 and Accelerator.is_u85(lw.accelerator):
        identity_scale = float(np.float32(x.scale) / np.float32(out.scale))
        # (multiplier, shift, round mode 0: DOUBLE_SYMMETRIC, DBL_RND 0: rounded at bit 31 first)
        ops.elementwise("LRELU", x, None, out, operand_scales=tuple(
            (*quantise_scale(s), 0, 0) for s in (identity_scale, alpha_scale)))
        return
    if x.scale == out.scale and alpha >= 0:
        ops.elementwise("LRELU", x, None, out, ofm_scale=quantise_scale(alpha_scale))
        return
    positive = _positive_part(ops, x, out)
    negative = ops.scratch("negative", out.shape, out.dtype, out.zero_point, out.scale)
    # For alpha < 0 the branch is x * |m| (x < 0: at most zero), taken away from the positive
    # part: the reference's x * m rounds a half towards zero as the NPU rounds the negative
    # x * |m| (s_in 0.0125, s_out 0.001, alpha -0.3 at x = -8734: 32752.5 is 32752), where
    # x * -1 scaled by |m| rounded it away from zero (32753).
    one = lw.constant(np.array([1]), "int16")
    ops.elementwise("MUL", x, one, negative, ofm_scale=quantise_scale(abs(alpha_scale)), activation=_below(out, True))
    ops.elementwise("ADD" if alpha >= 0 else "SUB", positive, negative, out, activation=full_range(out.dtype))


def lower_leaky_relu(lw: LoweringContext, v: OperatorView) -> None:
    """LEAKY_RELU: int16 by `lower_leaky_relu_int16`, 8-bit as a table (`lower_lut`)."""
    (lower_leaky_relu_int16 if v.ifm is not None and v.ifm.dtype == "int16" else lower_lut)(lw, v)


@dataclass(frozen=True)
class _Branches:
    """PRELU's two rescales over every input code, as the reference computes them
    (MultiplyByQuantizedMultiplier with PreluPrepare's multipliers) and as the NPU's MUL does
    (`_core.scale_accumulator`, TFL rounding): the compile-time proof of the selection forms."""

    dtype: str
    zero_point: int
    out_zero_point: int
    same: bool  # one quantization in and out: the positive branch is x itself
    m1: tuple[int, int]  # the NPU's (multiplier, shift) of s_in / s_out
    m2: tuple[int, int]  # and of s_in s_alpha / s_out
    reference_m1: tuple[int, int]  # the reference's (multiplier, exponent) of the same
    reference_m2: tuple[int, int]

    @classmethod
    def of(cls, x, out, alpha) -> "_Branches":
        # PreluPrepare forms both multipliers in float32.
        real1 = float(np.float32(x.scale) / np.float32(out.scale))
        real2 = multiply_real(x.scale, alpha.scale, out.scale)
        same = np.float32(x.scale) == np.float32(out.scale) and x.zero_point == out.zero_point and x.dtype == out.dtype
        return cls(x.dtype, x.zero_point, out.zero_point, bool(same), quantise_scale(real1), quantise_scale(real2),
                   fp.quantize_multiplier(real1), fp.quantize_multiplier(real2))

    def _inputs(self, slopes: np.ndarray):
        """(x - zp over the type's codes, one row; a run of the distinct slopes, one column), per
        run: an int16 map's 65,536 codes are checked a few slopes at a time."""
        lo, hi = TYPE_RANGE[self.dtype]
        d = np.arange(lo, hi + 1, dtype=np.int64)[None, :] - self.zero_point
        k = np.unique(slopes)
        step = max(1, CHECKED_PER_RUN // d.size)
        for start in range(0, k.size, step):
            yield d, k[start:start + step, None]

    def _reference(self, d: np.ndarray, k: np.ndarray) -> np.ndarray:
        positive = fp.multiply_by_quantized_multiplier(d, *self.reference_m1)
        negative = fp.multiply_by_quantized_multiplier(d * k, *self.reference_m2)
        return self._out(np.where(d >= 0, positive, negative))

    def _out(self, value: np.ndarray) -> np.ndarray:
        """`value` stored in the output: zp_out added, saturated to the type."""
        lo, hi = TYPE_RANGE[self.dtype]
        return np.clip(value + self.out_zero_point, lo, hi)

    @staticmethod
    def _scaled(value: np.ndarray, scale: tuple[int, int]) -> np.ndarray:
        return _core.scale_accumulator(value, *scale, TFL_ROUNDING).reshape(value.shape)

    def select(self, slopes: np.ndarray) -> str | None:
        """"MAX" or "MIN" where out = that of the two whole branches, x rescaled by m1 (x itself
        where `same`) and MUL(x, alpha) by m2, is the reference for every input code and slope;
        else None. In real numbers the branches are lines through (zp, zp_out) of slopes s1
        and k s2: below zp the steeper one is the lower, above it the higher, so the MAX takes
        the positive branch above zp and the product below exactly when every k s2 <= s1
        (alpha at most 1, of either sign), the MIN when every k s2 >= s1. Both roundings are
        monotone, and the saturation too, but two rounded lines may tie or cross by one step
        near zp: the exhaustive check decides."""
        modes = {"MAX": np.maximum, "MIN": np.minimum}
        for d, k in self._inputs(slopes):
            want = self._reference(d, k)
            positive = d + self.out_zero_point if self.same else self._out(self._scaled(d, self.m1))
            product = self._out(self._scaled(d * k, self.m2))
            modes = {mode: pick for mode, pick in modes.items() if (pick(positive, product) == want).all()}
            if not modes:
                return None
        return next(iter(modes))

    def signs(self, slopes: np.ndarray) -> np.ndarray | None:
        """Per slope value (alpha's shape), the sign s (+1 or -1) for which the sign-select
        form (`_sign_select`) gives the reference for every input code, or None where some
        slope has neither. Its operands are 16-bit: nothing saturates before the last MUL."""
        lo, hi = TYPE_RANGE[SIGNED_DTYPE]
        chosen = {}
        for d, k in self._inputs(slopes):
            want = self._reference(d, k)
            choice = np.zeros(k.shape[0], dtype=np.int64)
            for sign in (-1, 1):
                positive = np.clip(self._scaled(d * sign, self.m1), lo, hi)
                product = np.clip(self._scaled(d * k * sign, self.m2), lo, hi)
                got = self._out(self._scaled(np.maximum(positive, product) * sign, UNIT_SCALE))
                choice = np.where((got == want).all(axis=1), sign, choice)
            chosen.update(zip(k[:, 0].tolist(), choice.tolist()))
        signs = np.vectorize(chosen.get, otypes=[np.int64])(slopes)
        lo, hi = TYPE_RANGE[self.dtype]
        zero = _sign_zero_point(self.dtype)
        if not signs.all() or not lo <= (signs * slopes).min() + zero <= (signs * slopes).max() + zero <= hi:
            return None  # a slope neither sign selects, or a signed alpha the type cannot hold
        return signs


def _sign_zero_point(dtype: str) -> int:
    """The zero point of the sign-select form's 8-bit constants: one that holds -1 and +1."""
    lo, hi = TYPE_RANGE[dtype]
    return 0 if lo < 0 else (hi + 1) // 2


def _sign_select_pays(lw: LoweringContext, x, alpha) -> bool:
    """The sign-select form (`_sign_select`) on this target: 8-bit maps, alpha per channel or
    whole, on the U55 and U65, whose ADD costs two MULs (Vela's AdvancedAddSub: 1.5 cycles an
    element on U55-128, 0.75 on U65-256, against 0.75 and 0.375 for a MUL and 0.5 and 0.25 for a
    MAX): its MUL, MUL, MAX, MUL takes 2.75 cycles an element on U55-128 where the MIN, MUL,
    MUL and ADD take 3.5. The U85 runs every elementwise mode of 8-bit maps at one speed (and a
    16-bit MUL slower), so there both are four passes and the 8-bit ones move fewer bytes."""
    return (x.dtype in ("int8", "uint8") and tuple(alpha.shape[:2]) == (1, 1)
            and not Accelerator.is_u85(lw.accelerator))


def _sign_select(lw: LoweringContext, ops: OperationBuilder, x, out, alpha, slopes: np.ndarray, signs: np.ndarray,
                 branches: _Branches) -> None:
    """PRELU with alphas on both sides of 1 (a per-channel MAX or MIN), in four operations:
    with s = +1 on the channels whose alpha is at most 1 and -1 on the others,

        out = s MAX(s x rescaled by m1, s x alpha rescaled by m2)

    where s MAX(s a, s b) is MAX(a, b) for s = 1 and MIN(a, b) for s = -1 (`_Branches.select`).
    Two MULs by per-channel constants (s, and s times alpha's codes) make the signed branches
    as 16-bit maps, a MAX picks, and a MUL by s at unit scale restores the sign and adds zp_out
    with the output's saturation. The NPU's rounding of -v and the reference's of v differ by
    one on halves, so every slope and input code is checked (`_Branches.signs`)."""
    zero = _sign_zero_point(x.dtype)
    signed_slopes = (signs * slopes).reshape(-1)  # in the type's range (`_Branches.signs`)
    sign = replace(lw.constant(signs.reshape(-1) + zero, x.dtype), zero_point=zero)
    signed_alpha = replace(lw.constant(signed_slopes + zero, x.dtype), zero_point=zero, scale=alpha.scale)
    sign, signed_alpha = (replace(c, shape=alpha.shape) for c in (sign, signed_alpha))
    positive = ops.scratch("signed_positive", out.shape, SIGNED_DTYPE)
    product = ops.scratch("signed_product", out.shape, SIGNED_DTYPE)
    larger = ops.scratch("signed_larger", out.shape, SIGNED_DTYPE)
    wide = full_range(SIGNED_DTYPE)
    ops.elementwise("MUL", x, sign, positive, ofm_scale=branches.m1, activation=wide)
    ops.elementwise("MUL", x, signed_alpha, product, ofm_scale=branches.m2, activation=wide)
    ops.elementwise("MAX", positive, product, larger, activation=wide)
    sign16 = lw.constant(signs.reshape(-1), SIGNED_DTYPE)
    ops.elementwise("MUL", larger, replace(sign16, shape=alpha.shape), out, ofm_scale=UNIT_SCALE,
                    activation=full_range(out.dtype))


def _positive_part(ops: OperationBuilder, x, out, clamped: bool = True):
    """zp_out + MBQM(x - zp, s_in / s_out), clamped at zp_out from below where `clamped` (the
    x >= zp branch, zp_out elsewhere). An 8-bit map's is a MUL by 1 with that scale: the
    rescaling pool's rounding at an elementwise operation's speed (U85-256 runs the pool at
    under half of it; U55-128 costs it 1 cycle an element against the MUL's 0.75). A 16-bit
    map keeps the pool, whose MUL is the slower (8x8x16 int16 on U85-256, 2,051 cycles against
    the pool's 1,474)."""
    lo, hi = TYPE_RANGE[out.dtype]
    identity = quantise_scale(float(np.float32(x.scale) / np.float32(out.scale)))
    positive = ops.scratch("positive", out.shape, out.dtype, out.zero_point, out.scale)
    clamp = dict(function=0, clip_range=0, min=max(out.zero_point, lo) if clamped else lo, max=hi)
    if x.dtype != "int16":
        one = ops.lw.constant(np.array([1]), x.dtype)
        ops.elementwise("MUL", x, one, positive, ofm_scale=identity, activation=clamp)
    else:
        ops.pool("AVERAGE", x, positive, ofm_scale=identity, activation=clamp)
    return positive


def _below(out, alpha_positive: bool) -> dict:
    """The clamp that keeps a one-signed alpha branch on its side of zp_out."""
    lo, hi = TYPE_RANGE[out.dtype]
    keep = dict(min=lo, max=out.zero_point) if alpha_positive else dict(min=out.zero_point, max=hi)
    return dict(function=0, clip_range=0, **keep)


def _constant_slopes(lw: LoweringContext, v: OperatorView) -> np.ndarray | None:
    """alpha - zp_alpha when alpha is a constant, else None."""
    t = lw.graph.tensors[v.op.inputs[1]]
    if not t.is_constant:
        return None
    return np.asarray(t.data).astype(np.int64) - int(t.quantization.zero_point[0])
