"""SOFTMAX on the NPU: the fixed-point exponential table and the compiled operator, bit-exact.

The table is TFLite's reference arithmetic (gemmlowp), cross-checked against Vela's own port
of it; the compiled binaries are checked against the reference interpreter itself.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cascader
from cascader import zoo
from cascader.errors import UnsupportedError
from cascader.frontend import fixed_point as fp
from cascader.frontend.lower_lut import int16_range_table
from cascader.frontend.lower_softmax import (EXP_RANGE, RECIPROCAL_RANGE, TABLE_OUTPUT, _one_over_one_plus_x,
                                             exp_table)


def test_exp_on_negative_values_known_points():
    # exp(0) is the largest Q0.31 value; exp(-1) and exp(-1/4) within gemmlowp's 1e-6.
    q = 1 << 26  # 1.0 in Q5.26
    got = fp.exp_on_negative_values(np.array([0, -q, -q // 4]), 5)
    assert got[0] == fp.INT32_MAX
    assert abs(int(got[1]) - round(np.exp(-1) * 2**31)) < 2**31 * 1e-6
    assert abs(int(got[2]) - round(np.exp(-0.25) * 2**31)) < 2**31 * 1e-6


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=fp.INT32_MIN + 1, max_value=0), min_size=1, max_size=64))
def test_exp_on_negative_values_matches_vela(values):
    fp_math = pytest.importorskip("ethosu.vela.fp_math")
    ours = fp.exp_on_negative_values(np.array(values), 5)
    assert [int(v) for v in ours] == [int(fp_math.exp_on_negative_values(v)) for v in values]


@settings(max_examples=100, deadline=None)
@given(beta=st.floats(min_value=0.05, max_value=20.0), scale=st.floats(min_value=1e-3, max_value=1.0))
def test_exp_table_matches_vela(beta, scale):
    softmax = pytest.importorskip("ethosu.vela.softmax")
    try:
        vela = softmax.SoftMax(None).generate_exp_table(beta, scale)
    except OverflowError:
        # Vela's own port overflows where its multiplier rounds up to 2^31 (scale just below a
        # power of two); TFLite halves it there, as exp_table does.
        assume(False)
    assert [int(v) for v in exp_table(beta, scale)] == [int(v) for v in vela]


def test_exp_table_rejects_a_multiplier_the_reference_cannot_take():
    with pytest.raises(UnsupportedError, match="input multiplier"):
        exp_table(1e-9, 1e-3)


@pytest.mark.parametrize("dtype", ["int8", "int16"])
@pytest.mark.parametrize("shape, beta", [((1, 1), 1.0), ((1, 10), 1.0), ((1, 1001), 1.0), ((1, 3, 5, 2), 1.0),
                                         ((1, 4, 40), 0.3), ((1, 4, 40), 3.0)])
def test_softmax_bit_exact(tmp_path, shape, beta, dtype):
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    path = tmp_path / "softmax.tflite"
    cascader.save_model(zoo.softmax(shape, dtype=dtype, beta=beta), path)
    compiled = cascader.compile(path)
    assert compiled.summary().cpu_operators == 0
    result = validate(path, compiled.model, (0, 1, 2))
    assert result.bit_exact, result.details


@pytest.mark.parametrize("dtype", ["int8", "int16"])
@pytest.mark.parametrize("accelerator", ["ethos-u55-32", "ethos-u65-512"])
def test_softmax_lut_slot_on_every_shram_size(tmp_path, accelerator, dtype):
    """The tables are DMA'd to the last 2 KiB of the SHRAM, whose size differs per accelerator
    (int16 loads two, each filling all 2 KiB): a wrong slot reads a wrong table and the output
    is not exact."""
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    path = tmp_path / "softmax.tflite"
    cascader.save_model(zoo.softmax((1, 8, 16), dtype=dtype), path)
    compiled = cascader.compile(path, accelerator=accelerator)
    result = validate(path, compiled.model, (0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
    assert result.bit_exact, result.details


def test_int16_tables_match_vela():
    """Vela carries the reference's int16 SOFTMAX tables as constants, in the NPU's word format;
    ours are built from the functions. (Built in float32, as LUTPopulate does for other int16
    tables, two words of the reciprocal differ, and so do the reference's results.)"""
    softmax = pytest.importorskip("ethosu.vela.softmax")
    words = lambda table: [int(w) for w in np.frombuffer(table, "<u4")]  # noqa: E731
    assert words(int16_range_table(np.exp, EXP_RANGE, TABLE_OUTPUT)) == [int(w) for w in softmax.SoftMax.EXP_LUT]
    assert words(int16_range_table(_one_over_one_plus_x, RECIPROCAL_RANGE, TABLE_OUTPUT)) == \
        [int(w) for w in softmax.SoftMax.ONE_OVER_ONE_PLUS_X_LUT]


def _softmax_to_int16(dtype: str, shape: tuple[int, ...], beta: float, zero_point: int = -32768):
    """SOFTMAX of an 8-bit input into int16, quantized as TFLite requires (2^-16, -32768)."""
    from cascader.tflite.builder import ModelBuilder, quantization

    b = ModelBuilder()
    x = b.add_input("x", shape, dtype, quantization(0.1, 0 if dtype == "int8" else 128))
    y = b.add_tensor("y", shape, "int16", quantization(1 / 65536, zero_point))
    b.add_operator("SOFTMAX", [x], [y], {"beta": beta}, version=3)
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("shape, beta", [((1, 1), 1.0), ((1, 12), 1.0), ((1, 4, 40), 0.3), ((1, 3, 5, 70), 3.0)])
def test_8bit_to_int16_softmax_bit_exact(tmp_path, accelerator, dtype, shape, beta):
    """A keyword spotter's SOFTMAX, int8 in and int16 out (TFLite's Softmax<int8_t, int16_t>:
    the 8-bit arithmetic, the last shift 31 - 16 and the int16 minimum as zero). Vela leaves it
    on the CPU (its types must match)."""
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    path = tmp_path / "softmax.tflite"
    cascader.save_model(_softmax_to_int16(dtype, shape, beta), path)
    compiled = cascader.compile(path, accelerator=accelerator)
    assert compiled.summary().cpu_operators == 0
    result = validate(path, compiled.model, (0, 1))
    assert result.bit_exact, result.details


def test_8bit_to_int16_softmax_with_another_zero_point_stays_on_the_cpu():
    (op,) = cascader.inspect(_softmax_to_int16("int8", (1, 10), 1.0, zero_point=0)).operators
    assert op.target == "CPU" and "type's minimum" in op.reason, op.reason


@settings(max_examples=15, deadline=None)
@given(log_beta=st.floats(min_value=-3.0, max_value=2.0), depth=st.integers(min_value=1, max_value=70))
def test_int16_softmax_bit_exact_over_betas(tmp_path_factory, log_beta, depth):
    """beta x input scale sets the scaling's shift: right shifts (small betas; rounded twice, as
    the reference does, where Vela's single rounding misses by one at beta 0.05-0.2) to left
    shifts (large betas, most of the row saturates to exp(-10))."""
    beta = 10.0**log_beta
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    path = tmp_path_factory.mktemp("softmax16") / "softmax.tflite"
    cascader.save_model(zoo.softmax((1, 2, depth), dtype="int16", beta=beta), path)
    compiled = cascader.compile(path)
    assert compiled.summary().cpu_operators == 0
    result = validate(path, compiled.model, (0, 1, 2, 3))
    assert result.bit_exact, (beta, depth, result.details)


@pytest.mark.parametrize("beta", [0.05, 0.1, 0.2])
def test_int16_softmax_exact_where_the_scaling_rounds_twice(tmp_path, beta):
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    path = tmp_path / "softmax.tflite"
    cascader.save_model(zoo.softmax((1, 2, 33), dtype="int16", beta=beta), path)
    result = validate(path, cascader.compile(path).model, (0, 1, 2, 3))
    assert result.bit_exact, result.details
