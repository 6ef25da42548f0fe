"""SQUARED_DIFFERENCE on the NPU against the reference kernel, on every input code.

Each model feeds all 256 int8 codes as one input against a second input (another map or a
broadcast constant), so every rounding of the decomposition (see
`cascader.frontend.lower_squared_difference`) is exercised for the drawn quantization.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader.tflite.builder import ModelBuilder
from cascader.tflite.model import Quantization

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter, random_inputs  # noqa: E402

CODES = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16, 1)


def _q(scale: float, zero_point: int) -> Quantization:
    return Quantization(scale=np.array([scale], np.float32), zero_point=np.array([zero_point], np.int64))


def _model(a_q, b_q, out_q, second: str, swap: bool):
    b = ModelBuilder()
    x = b.add_input("x", CODES.shape, "int8", _q(*a_q))
    if second == "map":
        y = b.add_input("y", CODES.shape, "int8", _q(*b_q))
    else:
        y = b.add_tensor("y", (1, 1, 1, 1), "int8", _q(*b_q), np.full((1, 1, 1, 1), 37, np.int8))
    z = b.add_tensor("z", CODES.shape, "int8", _q(*out_q))
    b.add_operator("SQUARED_DIFFERENCE", [y, x] if swap else [x, y], [z])
    b.mark_output(z)
    return b.build()


def _inputs(model, seed):
    drawn = random_inputs(model, seed=seed)
    return [CODES] + [np.flip(CODES) if i.shape == CODES.shape else i for i in drawn[1:]]


def _check(model, seed=0):
    compiled = cascader.compile(model)
    assert compiled.summary().cpu_operators == 0
    inputs = _inputs(model, seed)
    ours = cascader.simulate(compiled, inputs)[0]
    reference = ReferenceInterpreter(model).run(inputs)[0]
    wrong = np.nonzero(ours != reference)
    assert not wrong[0].size, [(int(ours[i]), int(reference[i])) for i in zip(*wrong)][:5]


@pytest.mark.parametrize("second", ["map", "constant"])
@pytest.mark.parametrize("swap", [False, True])
def test_squared_difference_bit_exact(second, swap):
    _check(_model((0.05, 3), (0.03, -7), (0.4, -128), second, swap))


scales = st.floats(0.005, 0.1)


@settings(max_examples=25, deadline=None)
@given(a_scale=scales, a_zp=st.integers(-128, 127), b_scale=scales, b_zp=st.integers(-128, 127),
       out_scale=st.floats(0.02, 2.0), out_zp=st.integers(-128, 127), second=st.sampled_from(["map", "constant"]),
       swap=st.booleans(), seed=st.integers(0, 3))
def test_squared_difference_any_quantization(a_scale, a_zp, b_scale, b_zp, out_scale, out_zp, second, swap, seed):
    _check(_model((a_scale, a_zp), (b_scale, b_zp), (out_scale, out_zp), second, swap), seed)


def test_int16_squared_difference_stays_on_the_cpu_with_its_reason():
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 1), "int16", _q(0.01, 0))
    y = b.add_input("y", (1, 4, 4, 1), "int16", _q(0.01, 0))
    z = b.add_tensor("z", (1, 4, 4, 1), "int16", _q(0.01, 0))
    b.add_operator("SQUARED_DIFFERENCE", [x, y], [z])
    b.mark_output(z)
    report = cascader.inspect(b.build())
    assert report.operators[0].rule == "squared_difference_int8"
