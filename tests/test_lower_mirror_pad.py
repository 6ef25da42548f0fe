"""MIRROR_PAD (REFLECT and SYMMETRIC, along H and W) as raw copies on the NPU, bit-exact
against the reference interpreter for drawn shapes, pads and types."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cascader
from cascader.frontend.lower_mirror_pad import mirror_source
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from test_lower_movement import _check  # noqa: E402

MODES = {"REFLECT": 0, "SYMMETRIC": 1}


def mirror_pad(shape, pads, mode: str, dtype: str = "int8") -> cascader.Model:
    q = quantization(0.05, 0 if dtype == "int16" else 7)
    b = ModelBuilder()
    x = b.add_input("x", shape, dtype, q)
    out = tuple(d + before + after for d, (before, after) in zip(shape, pads))
    y = b.add_tensor("y", out, dtype, q)
    paddings = b.add_constant("paddings", np.asarray(pads, np.int32))
    b.add_operator("MIRROR_PAD", [x, paddings], [y], {"mode": MODES[mode]}, version=3 if dtype == "int16" else 2)
    b.mark_output(y)
    return b.build()


@st.composite
def cases(draw):
    mode = draw(st.sampled_from(sorted(MODES)))
    reach = 1 if mode == "REFLECT" else 0
    h, w, c = draw(st.integers(1 + reach, 6)), draw(st.integers(1 + reach, 6)), draw(st.integers(1, 20))
    pad = lambda size: (draw(st.integers(0, size - reach)), draw(st.integers(0, size - reach)))  # noqa: E731
    (top, bottom), (left, right) = pad(h), pad(w)
    if draw(st.booleans()):
        shape, pads = (1, h, w, c), ((0, 0), (top, bottom), (left, right), (0, 0))
    else:
        shape, pads = (h, w, c), ((top, bottom), (left, right), (0, 0))
    return shape, pads, mode, draw(st.sampled_from(["int8", "uint8", "int16"]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_mirror_pad_is_bit_exact(tmp_path, case):
    shape, pads, mode, dtype = case
    (top, bottom), (left, right) = pads[-3], pads[-2]
    _check(tmp_path, mirror_pad(shape, pads, mode, dtype), operations=1 + top + bottom + left + right)


@pytest.mark.parametrize("mode,expected", [("REFLECT", [2, 1, 0, 1, 2, 3, 2, 1]), ("SYMMETRIC", [1, 0, 0, 1, 2, 3, 3, 2])])
def test_mirror_source_follows_the_reference(mode, expected):
    # tf.pad([0, 1, 2, 3], [[2, 2]], mode): REFLECT [2 1 | 0 1 2 3 | 2 1], SYMMETRIC [1 0 | 0 1 2 3 | 3 2]
    assert [mirror_source(p, 2, 4, 1 if mode == "REFLECT" else 0) for p in range(8)] == expected


@pytest.mark.parametrize("pads,reason", [
    (((0, 0), (1, 1), (1, 1), (1, 0)), "channels"),
    (((0, 0), (4, 0), (0, 0), (0, 0)), "axis 1"),  # REFLECT mirrors at most size - 1 = 3
])
def test_mirror_pads_the_npu_cannot_take_stay_on_the_cpu(pads, reason):
    (op,) = cascader.inspect(mirror_pad((1, 4, 4, 8), pads, "REFLECT")).operators
    assert op.target == "CPU" and reason in op.reason
