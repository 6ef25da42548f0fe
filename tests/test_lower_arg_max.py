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


def test_the_least_scratch_lowering_runs_in_smaller_bands():
    """A 40 x 256 x 21 map: 24 rows a band (258 KB of int16 intermediate) by default, 6 rows
    (65 KB) in the least-scratch lowering, which the planner's least-SRAM points take. On the
    U65-256 the map and the indices live in DRAM (TFLM's arena), so the band is the SRAM: the
    least point is of that lowering, and its binary is bit-exact on two seeds."""
    from cascader.frontend.lower_arg_max import bands_in_least_scratch
    from cascader.lowering import lower
    from cascader.planner import plan

    model = _model((1, 40, 256, 21), "uint8", "int32", zero_point=128)
    part, segments = lower(model, "ethos-u65-256")
    frugal_part, frugal = lower(model, "ethos-u65-256", least_scratch=True)
    pools = lambda segs: sum(o.cost_kind == "max_pool" for s in segs for o in s.operations)  # noqa: E731
    assert part.trades_scratch and bands_in_least_scratch(part.graph, part.graph.operators[0])
    assert (pools(segments), pools(frugal)) == (2, 7)
    frontier = plan(model, accelerator="ethos-u65-256")
    least = frontier.resident  # the least with every map in SRAM (Dedicated_Sram: DRAM points go lower)
    assert least.least_scratch and least.sram_bytes < 6 * 256 * 21 * 2 + 16 * 1024
    compiled = cascader.compile(model, sram=least.sram_bytes, accelerator="ethos-u65-256")
    assert compiled.sram_bytes <= least.sram_bytes
    reference = ReferenceInterpreter(model)
    for seed in (0, 1):
        values = np.random.default_rng(seed).integers(0, 256, size=(1, 40, 256, 21)).astype("uint8")
        ours = cascader.simulate(compiled, [values])[0]
        assert np.array_equal(ours, reference.run([values])[0])


def test_a_map_one_band_holds_lowers_the_same_either_way():
    from cascader.frontend.lower_arg_max import bands_in_least_scratch
    from cascader.lowering import lower

    part, _ = lower(_model((1, 9, 9, 21), "int8", "int32"))
    assert not part.trades_scratch and not bands_in_least_scratch(part.graph, part.graph.operators[0])
