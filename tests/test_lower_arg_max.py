"""ARG_MAX over the channels on the NPU against the reference interpreter, ties included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader.tflite.builder import ModelBuilder
from cascader.tflite.model import Quantization

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter  # noqa: E402


def _model(shape, dtype, out_dtype, zero_point=3):
    b = ModelBuilder()
    q = Quantization(scale=np.array([0.05], np.float32), zero_point=np.array([zero_point], np.int64))
    x = b.add_input("x", shape, dtype, q)
    axis = b.add_constant("axis", np.array(len(shape) - 1, np.int32))
    y = b.add_tensor("y", shape[:-1], out_dtype)
    b.add_operator("ARG_MAX", [x, axis], [y], {"output_type": {"int32": 2, "int64": 4}[out_dtype]}, version=2)
    b.mark_output(y)
    return b.build()


def _check(model, values):
    compiled = cascader.compile(model)
    assert compiled.summary().cpu_operators == 0
    ours = cascader.simulate(compiled, [values])[0]
    reference = ReferenceInterpreter(model).run([values])[0]
    assert ours.dtype == reference.dtype and np.array_equal(ours, reference)


@settings(max_examples=20, deadline=None)
@given(h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 127), dtype=st.sampled_from(["int8", "uint8"]),
       out=st.sampled_from(["int32", "int64"]), levels=st.integers(2, 256), seed=st.integers(0, 99))
def test_arg_max_over_channels(h, w, c, dtype, out, levels, seed):
    """Few distinct levels make ties common: the first maximum must win."""
    rng = np.random.default_rng(seed)
    lo = -128 if dtype == "int8" else 0
    values = (lo + rng.integers(0, levels, size=(1, h, w, c)) * (255 // max(levels - 1, 1))).astype(dtype)
    _check(_model((1, h, w, c), dtype, out), values)


def test_arg_max_of_a_large_map_runs_in_bands_of_rows():
    """A 300 x 300 x 21 map in bands of 20 rows (256 KiB of int16 intermediate each): the
    intermediate of one band, not of the map, is what the SRAM holds."""
    rng = np.random.default_rng(0)
    values = rng.integers(0, 256, size=(1, 300, 300, 21)).astype("uint8")
    model = _model((1, 300, 300, 21), "uint8", "int64", zero_point=128)
    compiled = cascader.compile(model)
    assert sum(op.lowered.cost_kind == "max_pool" for op in compiled.schedule.operations) == 15
    assert compiled.sram_bytes < 300 * 300 * (21 + 8) + 2 * 256 * 1024
    _check(model, values)


def test_arg_max_over_too_many_channels_stays_on_the_cpu():
    report = cascader.inspect(_model((1, 2, 2, 200), "int8", "int32"))
    assert report.operators[0].rule == "arg_max" and "200 channels" in report.operators[0].reason
