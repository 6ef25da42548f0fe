"""DIV on the Ethos-U85 (#43, frontend/lower_u85_div), bit-exact against the reference
interpreter on 2 seeds on U85-128/256/512:

- int32: the U85's DIV, truncating toward zero as TFLite's C++ division; both operands at run
  time, both signs, a broadcast divisor or dividend, the type's extremes.
- int8 (TFLM's kernel) and uint8 (LiteRT's), a constant divisor: TFLite's reciprocal arithmetic
  reproduced value by value, its undefined shifts included (a large divisor over a small
  dividend), as one depthwise convolution or tables; every code against many divisor values,
  scales and zero points.
- int16 (LiteRT's reference kernel, the uint8 one's arithmetic), a constant divisor: one 16x8
  depthwise convolution where a 15-bit rescale gives every one of the 65536 quotients; every
  code against divisors up to 30000 of both signs, a scalar divisor, a fused RELU.
- What stays on the CPU, with the reason: a quantized divisor computed at run time (int8, uint8,
  int16), a constant zero divisor, an int16 divisor no 16x8 rescale follows, int16 zero points
  other than 0, an int32 DIV with a fused activation.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

import cascader
from cascader.operator_zoo import U85_OPERATOR_DTYPES, operator_model
from cascader.tflite.builder import ModelBuilder, quantization

from test_u85_lowering import SIZES, _bit_exact_on_the_npu

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _kinds(c: cascader.CompiledModel) -> collections.Counter:
    return collections.Counter(s.lowered.kind for s in c.schedule.operations)


def _div(dtype: str, x_shape, y_shape, divisor=None, q=((0.05, 0), (0.05, 0), (0.05, 0)), activation="NONE"):
    """x / y, y a constant `divisor` (its codes) or an input."""
    qs = [None if dtype == "int32" else quantization(*p) for p in q]
    b = ModelBuilder(description=f"test_u85_div {dtype}")
    x = b.add_input("input", x_shape, dtype, qs[0])
    y = (b.add_input("divisor", y_shape, dtype, qs[1]) if divisor is None
         else b.add_constant("divisor", np.asarray(divisor).astype(dtype).reshape(y_shape), dtype, qs[1]))
    out_shape = tuple(int(d) for d in np.broadcast_shapes(x_shape, y_shape))
    o = b.add_tensor("output", out_shape, dtype, qs[2])
    b.mark_output(o)
    b.add_operator("DIV", [x, y], [o], dict(fused_activation_function=activation))
    return b.build()


def _same_as_reference(model, inputs, accelerator: str = "ethos-u85-256") -> cascader.CompiledModel:
    from cascader.reference import run

    c = cascader.compile(model, accelerator=accelerator)
    assert [v.reason for v in c.partition.verdicts if not v.npu] == []
    np.testing.assert_array_equal(cascader.simulate(c.binary, inputs)[0], run(model, inputs)[0])
    return c


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", U85_OPERATOR_DTYPES["DIV"])
def test_zoo_div_bit_exact(dtype: str, accelerator: str, tmp_path) -> None:
    """The zoo's divisors: int32 of both signs (one DIV); int8 1..19 (one depthwise
    convolution); uint8 codes 1..19 at zero point 128, -127..-109, whose reference quotients of
    small dividends are past a shift of 31 and of one divisor's ties no rescale reproduces
    (tables per run of channels)."""
    c = _bit_exact_on_the_npu(operator_model("DIV", dtype), accelerator, tmp_path)
    assert _kinds(c) == {"int32": {"elementwise": 1}, "int8": {"depthwise": 1}, "uint8": {"pool": 15}}[dtype]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("shapes", [((1, 6, 5, 16), (1, 6, 5, 16)), ((1, 6, 5, 16), (1, 1, 1, 16)),
                                    ((1, 1, 5, 1), (1, 6, 5, 16))], ids=["same", "divisor_broadcast", "dividend_broadcast"])
def test_int32_div_of_run_time_operands(shapes, accelerator: str, tmp_path) -> None:
    """Both operands inputs of any sign; a broadcast dividend is the U85's swapped DIV (IFM_BROADCAST)."""
    _bit_exact_on_the_npu(_div("int32", *shapes), accelerator, tmp_path)


def test_int32_div_truncates_toward_zero_at_the_extremes() -> None:
    dividends = np.array([INT32_MAX, INT32_MIN + 1, INT32_MIN, -7, 7, -1, 0, 1, 6, -6, 2**30, -(2**30)], np.int32)
    divisors = np.array([1, -1, 2, -2, 7, -7, 3, INT32_MAX, INT32_MIN, 65536, -65535, 10], np.int32)
    x = np.stack([np.roll(dividends, k) for k in range(12)]).reshape(1, 12, 12, 1)
    y = np.tile(divisors, 12).reshape(1, 12, 12, 1)
    keep = ~((x == INT32_MIN) & (y == -1))  # overflows in the reference (undefined in C++)
    y = np.where(keep, y, 3).astype(np.int32)
    _same_as_reference(_div("int32", (1, 12, 12, 1), (1, 12, 12, 1)), [x, y])


def _every_code(dtype: str, seed: int):
    """A dividend holding every code in each of 64 channels, divisors of 64 values (both signs
    for int8; codes about the zero point for uint8), random scales and zero points."""
    rng = np.random.default_rng(seed)
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    scales = rng.uniform(0.005, 0.5, 3)
    zps = rng.integers(lo, hi, 3)
    codes = rng.choice([c for c in range(lo, hi + 1) if c != zps[1]], 64, replace=False)
    model = _div(dtype, (1, 1, 256, 64), (1, 1, 1, 64), codes, q=tuple(zip(scales, zps)))
    x = np.repeat(np.arange(lo, hi + 1).reshape(1, 1, 256, 1), 64, axis=3).astype(dtype)
    return model, x


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("seed", range(4))
def test_quantized_div_every_code_and_many_divisors(dtype: str, seed: int) -> None:
    model, x = _every_code(dtype, seed)
    _same_as_reference(model, [x])


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_a_trained_models_divisor_is_one_convolution(dtype: str, tmp_path) -> None:
    """Small positive divisors (a normalisation by a count), a fused RELU: every channel's
    quotients are one rescale but for 0 / d of the divisors past 2^4, which the reference's
    undefined shift makes zp_out + 1 (and for uint8 one tie): one depthwise convolution and a
    patch per such code (CMP_EQ, AND_NOT, AND, OR)."""
    zp = 128 if dtype == "uint8" else 0
    model = _div(dtype, (1, 6, 5, 16), (1, 1, 1, 16), np.arange(2, 18) + zp,
                 q=((0.1, zp - 3), (1.0, zp), (0.023, zp + 5)), activation="RELU")
    for accelerator in SIZES:
        c = _bit_exact_on_the_npu(model, accelerator, tmp_path)
        kinds = _kinds(c)
        assert kinds["depthwise"] == 1 and kinds["elementwise"] in (4, 8) and len(kinds) == 2, kinds


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_exact_ties_follow_the_reference(dtype: str, tmp_path) -> None:
    """Scales whose quotients fall on exact halves (0.1 / 0.02 = 5, in LiteRT's float32): the
    reference rounds them through its truncated reciprocal, one way or the other, which no
    single rescale follows (uint8: tables), or does after a larger weight (int8)."""
    zp = 128 if dtype == "uint8" else 0
    model = _div(dtype, (1, 6, 5, 16), (1, 1, 1, 16), np.arange(2, 18) + zp,
                 q=((0.1, zp - 3), (1.0, zp), (0.02, zp + 5)), activation="RELU")
    _bit_exact_on_the_npu(model, "ethos-u85-256", tmp_path)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_a_scalar_divisor(dtype: str, tmp_path) -> None:
    zp = 128 if dtype == "uint8" else 0
    _bit_exact_on_the_npu(_div(dtype, (1, 6, 5, 16), (1,), [zp + 3], q=((0.05, zp), (0.5, zp), (0.03, zp))),
                          "ethos-u85-256", tmp_path)


# int16 divisors of both signs up to 30000 whose quotients a 16x8 rescale follows at these scales
# (at 0.05 each, the divisor 100 misses 2 codes: it stays on the CPU, in CPU below).
INT16_DIVISORS = [1, 2, 3, 7, -5, 100, 1000, 30000]
INT16_SCALES = ((1.0, 0), (0.0001, 0), (0.5, 0))


@pytest.mark.parametrize("accelerator", SIZES)
def test_int16_div_by_a_constant_is_one_convolution(accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(_div("int16", (1, 4, 5, 8), (1, 1, 1, 8), INT16_DIVISORS, q=INT16_SCALES),
                              accelerator, tmp_path)
    assert _kinds(c) == {"depthwise": 1}


@pytest.mark.parametrize("divisor, q, activation", [
    (INT16_DIVISORS, INT16_SCALES, "NONE"),
    ([1, -2, 3, -4, 5, -6, 7, 8], ((0.05, 0), (0.05, 0), (0.05, 0)), "RELU"),
    ([3], ((0.001, 0), (0.01, 0), (0.002, 0)), "NONE"),
], ids=["large_divisors", "small_divisors_relu", "scalar"])
def test_int16_div_every_code(divisor, q, activation: str) -> None:
    """Every int16 code (the extremes included) in each channel against the reference."""
    channels = len(divisor)
    model = _div("int16", (1, 256, 256, channels), (1, 1, 1, channels) if channels > 1 else (1,), divisor, q=q,
                 activation=activation)
    x = np.repeat(np.arange(-32768, 32768).reshape(1, 256, 256, 1), channels, axis=3).astype(np.int16)
    _same_as_reference(model, [x])


CPU = {
    "run_time_quantized_divisor": (lambda: _div("int8", (1, 4, 4, 8), (1, 4, 4, 8)), "computed at run time"),
    "run_time_int16_divisor": (lambda: _div("int16", (1, 4, 4, 8), (1, 4, 4, 8)), "computed at run time"),
    "int16_divisor_no_rescale_follows": (lambda: _div("int16", (1, 4, 4, 8), (1, 1, 1, 8), INT16_DIVISORS),
                                         "no 16x8 rescale (an int8 weight, a 15-bit multiplier, one rounding) gives "
                                         "TFLite's int16 quotients of every code by the divisor 100"),
    "int16_zero_point": (lambda: _div("int16", (1, 4, 4, 8), (1, 1, 1, 8), np.arange(1, 9),
                                      q=((0.05, 3), (0.05, 0), (0.05, 0))), "int16 zero points 3, 0, 0"),
    "zero_divisor_int32": (lambda: _div("int32", (1, 4, 4, 8), (1, 1, 1, 8), [1, 2, 0, 4, 5, 6, 7, 8]),
                           "divisor of 0"),
    "zero_divisor_int8": (lambda: _div("int8", (1, 4, 4, 8), (1, 1, 1, 8), [1, 2, 0, 4, 5, 6, 7, 8]),
                          "divisor of 0"),
    "int32_relu": (lambda: _div("int32", (1, 4, 4, 8), (1, 4, 4, 8), activation="RELU"), "fused RELU on a int32 output"),
    "divisor_per_pixel": (lambda: _div("int8", (1, 4, 4, 8), (1, 4, 4, 8), np.arange(1, 129)),
                          "varies along H or W"),
}


@pytest.mark.parametrize("case", sorted(CPU))
def test_what_stays_on_the_cpu_says_why(case: str) -> None:
    build, reason = CPU[case]
    verdicts = cascader.compile(build(), accelerator="ethos-u85-256").partition.verdicts
    assert not verdicts[0].npu and reason in verdicts[0].reason, verdicts[0].reason
