"""ARG_MAX on the Ethos-U85: its ARGMAX pooling (frontend/lower_u85_arg_max), over any axis.

Bit-exact against the reference interpreter on two seeds on U85-128/256/512: each axis of a
4-D map (a non-last one as movenet's), a batch of two (Vela 5.2 takes it), ranks 2 and 3, int8 and uint8 in, int32 and int64 out,
ties (TFLite picks the first maximum), more than the U55's 127 channels, more than one band of
65535 rows, the 32768 positions along the axis that one pooling holds, and longer axes split into
parts (Vela 5.2 fails to compile those): their edges, ties across the split, int32 and int64
out. On the U55/U65 ARG_MAX keeps its tagged-score lowering.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.tflite.builder import ModelBuilder
from cascader.tflite.model import Quantization

from test_u85_lowering import SIZES, _bit_exact_on_the_npu
OUTPUT_TYPES = {"int32": 2, "int64": 4}  # TFLite's TensorType


def _model(shape: tuple[int, ...], axis: int, dtype: str = "int8", out: str = "int32",
           zero_point: int = 3) -> cascader.Model:
    b = ModelBuilder(description="test_u85_arg_max")
    q = Quantization(scale=np.array([0.05], np.float32), zero_point=np.array([zero_point], np.int64))
    x = b.add_input("x", shape, dtype, q)
    y = b.add_tensor("y", tuple(d for k, d in enumerate(shape) if k != axis % len(shape)), out)
    b.add_operator("ARG_MAX", [x, b.add_constant("axis", np.array([axis], np.int32))], [y],
                   {"output_type": OUTPUT_TYPES[out]}, version=2)
    b.mark_output(y)
    return b.build()


def _argmax_pools(c: cascader.CompiledModel) -> list:
    return [s.lowered for s in c.schedule.operations if s.lowered.registers.get("sub_op") == "ARGMAX_X"]


def _bit_exact(model: cascader.Model, accelerator: str, tmp_path) -> cascader.CompiledModel:
    c = _bit_exact_on_the_npu(model, accelerator, tmp_path)
    assert _argmax_pools(c) and all(s.lowered.registers.get("sub_op") == "ARGMAX_X" for s in c.schedule.operations)
    return c


CASES = {
    "channels_int8_int32": lambda: _model((1, 6, 7, 21), 3),
    "channels_negative_axis_uint8_int64": lambda: _model((1, 9, 10, 21), -1, "uint8", "int64", 128),
    "width_int8_int64": lambda: _model((1, 6, 7, 9), 2, out="int64"),
    "height_uint8_int32": lambda: _model((1, 6, 7, 9), 1, "uint8", zero_point=128),
    "batch_of_one": lambda: _model((1, 6, 7, 9), 0),
    "over_a_batch_of_two": lambda: _model((2, 4, 5, 6), 0, "uint8", zero_point=128),
    "within_a_batch_of_two": lambda: _model((2, 4, 5, 6), 2, out="int64"),
    "movenet_rank3_middle_axis": lambda: _model((1, 2304, 17), 1),
    "rank2_last_axis": lambda: _model((5, 33), 1, "uint8", "int64", 0),
    "rank3_first_axis": lambda: _model((4, 5, 3), 0),
    "more_than_127_channels": lambda: _model((1, 3, 4, 200), 3),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact(CASES[case](), accelerator, tmp_path)
    assert len(_argmax_pools(c)) == 1  # one pooling, no scratch maps


@pytest.mark.parametrize("axis", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_ties_pick_the_first_maximum(axis: int, dtype: str) -> None:
    """Two levels (and a map of one value): most windows hold several maxima."""
    pytest.importorskip("ai_edge_litert")
    from cascader.reference import ReferenceInterpreter

    model = _model((1, 5, 6, 7), axis, dtype)
    c = cascader.compile(model, accelerator="ethos-u85-256")
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    rng = np.random.default_rng(axis)
    for values in (rng.choice([lo, hi], size=(1, 5, 6, 7)), rng.integers(0, 2, size=(1, 5, 6, 7)) + lo,
                   np.full((1, 5, 6, 7), hi)):
        x = values.astype(dtype)
        ours, reference = cascader.simulate(c, [x])[0], ReferenceInterpreter(model).run([x])[0]
        assert ours.dtype == reference.dtype and np.array_equal(ours, reference)


def test_more_than_one_band_of_rows(tmp_path) -> None:
    """300 x 300 pixels of 5 channels: 90000 rows of the A x N x B view, two operations (the
    feature map's 65535-row limit)."""
    c = _bit_exact(_model((1, 300, 300, 5), 3, "uint8", "int64", 128), "ethos-u85-256", tmp_path)
    assert [op.ofm.shape[0] for op in _argmax_pools(c)] == [65535, 90000 - 65535]


def test_the_longest_axis_the_pooling_holds(tmp_path) -> None:
    """32768 positions run in one pooling (the last one, 32767, comes out whole)."""
    model = _model((1, 2, 32768), 2)
    c = _bit_exact(model, "ethos-u85-256", tmp_path)
    assert len(_argmax_pools(c)) == 1
    x = np.full((1, 2, 32768), -128, np.int8)
    x[0, 0, -1], x[0, 1, 0] = 127, 127
    assert cascader.simulate(c, [x])[0].tolist() == [[32767, 0]]


# A longer axis: split into parts, each pooled for its index and its maximum, then combined.
SPLIT = {
    "one_more_than_a_pooling_int8_int32": lambda: _model((1, 32769), 1),
    "width_uint8_int64": lambda: _model((1, 3, 40000, 2), 2, "uint8", "int64", 128),
    "longest_dimension_rank2_int64": lambda: _model((2, 65535), 1, out="int64"),
    "first_axis_uint8_int32": lambda: _model((50000, 3), 0, "uint8", zero_point=0),
    "channels_int8_int64": lambda: _model((1, 2, 1, 33000), 3, out="int64"),
}


def _split_ops(c: cascader.CompiledModel) -> list:
    return [s.lowered.registers.get("sub_op") for s in c.schedule.operations]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(SPLIT))
def test_a_split_axis_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(SPLIT[case](), accelerator, tmp_path)
    # Two parts: two poolings each, then one combination (the mask widened by an ADD, the part's
    # start added, the indices selected).
    assert _split_ops(c) == ["ARGMAX_X", "MAX", "ARGMAX_X", "MAX", "CMP_GT", "ADD", "ADD", "AND", "AND_NOT", "OR"]
    assert all(op.registers["kernel"]["width"] <= 32768 for op in _argmax_pools(c))


@pytest.mark.parametrize("accelerator", SIZES)
def test_an_axis_of_four_parts_bit_exact(accelerator: str, tmp_path) -> None:
    """98305 elements (beyond a map's 65535: ARG_MAX's dimensions are bands and parts, so the U85
    takes them) in four parts of 24577, combined three times; maxima placed in the third part
    and at the very end, equal ones across parts."""
    model = _model((2, 98305), 1, out="int64")
    c = _bit_exact_on_the_npu(model, accelerator, tmp_path)
    ops = _split_ops(c)
    assert ops.count("ARGMAX_X") == 4 and ops.count("OR") == 3 and ops.count("MAX") == 4 + 2
    x = np.full((2, 98305), -128, np.int8)
    x[0, [24577 * 2 + 3, 70000]] = 5  # in the third part, then equal in the fourth
    x[1, [32770, 98304]] = 9  # in the second part, then equal at the end
    assert cascader.simulate(c, [x])[0].tolist() == [24577 * 2 + 3, 32770]
    x[1, 98304] = 10
    assert cascader.simulate(c, [x])[0].tolist() == [24577 * 2 + 3, 98304]


def test_rows_beyond_one_map_around_a_short_axis(tmp_path) -> None:
    """70000 rows ahead of the axis: two bands of one pooling (the dimension is no map's)."""
    c = _bit_exact(_model((70000, 3), 1, "uint8", zero_point=128), "ethos-u85-256", tmp_path)
    assert [op.ofm.shape[0] for op in _argmax_pools(c)] == [65535, 70000 - 65535]


def test_axis_parts_are_of_equal_length() -> None:
    from cascader.frontend.lower_u85_arg_max import MAX_AXIS, axis_parts

    assert axis_parts(32768) == [(0, 32768)]
    assert axis_parts(32769) == [(0, 16385), (16385, 16384)]
    assert axis_parts(65535) == [(0, 32768), (32768, 32767)]
    for n in (1, 5, 32767, 32769, 65536, 98304, 98305, 200001):
        parts = axis_parts(n)
        assert parts[0][0] == 0 and sum(length for _, length in parts) == n
        assert all(s + length == t for (s, length), (t, _) in zip(parts, parts[1:]))
        assert max(length for _, length in parts) <= MAX_AXIS and len(parts) == -(-n // MAX_AXIS)


@pytest.mark.parametrize("dtype, out", [("int8", "int32"), ("uint8", "int64")])
def test_a_split_axis_picks_the_first_maximum(dtype: str, out: str) -> None:
    """Maxima placed at each part's edges: in the second part only (at its first and last
    element), equal in both parts (the first part's wins), in one part among equal values, and
    a map of one value (index 0)."""
    pytest.importorskip("ai_edge_litert")
    from cascader.reference import ReferenceInterpreter

    n = 40000
    model = _model((1, 6, n), 2, dtype, out, 128 if dtype == "uint8" else 3)
    c = cascader.compile(model, accelerator="ethos-u85-256")
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    x = np.full((1, 6, n), lo, dtype)
    start = 20000  # axis_parts(40000): (0, 20000), (20000, 20000)
    x[0, 0, start] = hi  # the second part's first element
    x[0, 1, n - 1] = hi  # the last element
    x[0, 2, [start - 1, start]] = hi  # equal maxima either side of the split
    x[0, 3, [7, n - 3]] = hi - 1  # equal in both parts, below the type's top
    x[0, 4, start + 5:] = lo + 1  # the second part's maximum, many times
    want = [start, n - 1, start - 1, 7, start + 5, 0]
    ours, reference = cascader.simulate(c, [x])[0], ReferenceInterpreter(model).run([x])[0]
    assert reference.tolist() == [want] and ours.dtype == reference.dtype
    np.testing.assert_array_equal(ours, reference)


def test_a_split_axis_with_too_many_outputs_stays_on_the_cpu() -> None:
    """The combination is single elementwise operations over the A x B outputs: 90000 rows
    ahead of a split axis stay on the CPU with the reason (one pooling's axis is banded)."""
    report = cascader.inspect(_model((300, 300, 40000), 2), accelerator="ethos-u85-256")
    assert report.operators[0].target == "CPU" and report.operators[0].rule == "arg_max"
    assert "40000 elements along the axis, split into parts, with 90000 x 1 outputs" in report.operators[0].reason


def test_the_u55_and_u65_keep_the_tagged_scores() -> None:
    """Those have no ARGMAX pooling: the channel axis only, through shifted scores and a MAX pool."""
    for accelerator in ("ethos-u55-128", "ethos-u65-256"):
        c = cascader.compile(_model((1, 6, 7, 21), 3), accelerator=accelerator)
        assert not _argmax_pools(c)
        assert any(s.lowered.registers.get("sub_op") == "MAX" for s in c.schedule.operations)
        report = cascader.inspect(_model((1, 6, 7, 21), 2), accelerator=accelerator)
        assert report.operators[0].target == "CPU" and "not the last one" in report.operators[0].reason


def test_deeplab_on_the_u85_takes_velas_argmax_pooling() -> None:
    """coral_deeplabv3's 513 x 513 x 21 ARG_MAX: five ARGMAX poolings (263169 rows) and no
    scratch map, as Vela 5.2's binary has."""
    from conftest import shared_models_dir

    folder = shared_models_dir()
    path = None if folder is None else folder / "coral_deeplabv3_mnv2_dm05_pascal_quant.tflite"
    if path is None or not path.exists():
        pytest.skip("CASCADER_MODELS is not set")
    from cascader.lowering import lower

    part, segments = lower(cascader.load_model(path), "ethos-u85-256")
    pools = [o for s in segments for o in s.operations if o.registers.get("sub_op") == "ARGMAX_X"]
    assert len(pools) == 5 and sum(o.ofm.shape[0] for o in pools) == 513 * 513
    assert not part.trades_scratch
