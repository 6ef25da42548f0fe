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
from cascader.frontend.lower_softmax import exp_table


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


@pytest.mark.parametrize("shape, beta", [((1, 1), 1.0), ((1, 10), 1.0), ((1, 1001), 1.0), ((1, 3, 5, 2), 1.0),
                                         ((1, 4, 40), 0.3), ((1, 4, 40), 3.0)])
def test_softmax_bit_exact(tmp_path, shape, beta):
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    path = tmp_path / "softmax.tflite"
    cascader.save_model(zoo.softmax(shape, dtype="int8", beta=beta), path)
    compiled = cascader.compile(path)
    assert compiled.summary().cpu_operators == 0
    result = validate(path, compiled.model, (0, 1, 2))
    assert result.bit_exact, result.details


@pytest.mark.parametrize("accelerator", ["ethos-u55-32", "ethos-u65-512"])
def test_softmax_lut_slot_on_every_shram_size(tmp_path, accelerator):
    """The exponential table is DMA'd to the last 2 KiB of the SHRAM, whose size differs per
    accelerator: a wrong slot reads a wrong table and the output is not exact."""
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    path = tmp_path / "softmax.tflite"
    cascader.save_model(zoo.softmax((1, 8, 16), dtype="int8"), path)
    compiled = cascader.compile(path, accelerator=accelerator)
    assert validate(path, compiled.model, (0,)).bit_exact


def test_int16_softmax_stays_on_the_cpu_with_its_reason():
    report = cascader.inspect(zoo.softmax((1, 10), dtype="int16"))
    (op,) = report.operators
    assert op.target == "CPU" and "int16 is not yet" in op.reason
