"""ModelBuilder: hand-built models round-trip, run, and reject bad input with clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascader import InvalidArgumentError, load_model, save_model
from cascader.tflite.builder import ModelBuilder, canonical_options, quantization
from cascader.tflite.model import NUMPY_DTYPES


def max_pool_model() -> tuple:
    b = ModelBuilder(description="hand built")
    q = quantization(0.05, -3)
    x = b.add_input("x", (1, 4, 4, 2), "int8", q)
    y = b.add_tensor("y", (1, 2, 2, 2), "int8", q)
    options = {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2, "filter_width": 2}
    b.add_operator("MAX_POOL_2D", [x], [y], options, version=2)
    b.mark_output(y)
    return b.build(), q


def test_hand_built_model_round_trips_and_runs():
    model, q = max_pool_model()
    assert load_model(save_model(model)) == model
    op = model.main.operators[0]
    assert op.options_type == "Pool2DOptions"
    assert op.options["fused_activation_function"] == "NONE"  # default filled in
    reference = pytest.importorskip("cascader.reference")
    x = np.arange(32, dtype=np.int8).reshape(1, 4, 4, 2)
    out = reference.run(model, x)[0]
    expected = x.reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4))
    np.testing.assert_array_equal(out, expected)


def test_constants_get_their_own_buffers_and_read_only_views():
    b = ModelBuilder()
    x = b.add_input("x", (1, 3), "float32")
    c = b.add_constant("c", np.array([[1.0, 2.0, 3.0]], np.float32))
    k = b.add_constant("k", np.array([1, -2], np.int8), "int8", quantization([0.5, 0.25], 0))
    y = b.add_tensor("y", (1, 3), "float32")
    b.add_operator("ADD", [x, c], [y])
    b.mark_output(y)
    model = b.build()
    tensors = model.main.tensors
    assert tensors[x].buffer == 0 and tensors[c].buffer != tensors[k].buffer
    assert not tensors[c].data.flags.writeable
    assert tensors[k].quantization.per_channel
    assert load_model(save_model(model)) == model


def test_canonical_options_fill_defaults_and_normalise_vectors():
    opts = canonical_options("ReshapeOptions", {"new_shape": [1, 6]})
    assert opts["new_shape"].dtype == np.int32 and opts["new_shape"].tolist() == [1, 6]
    conv = canonical_options("Conv2DOptions", {"padding": "SAME"})
    assert conv["stride_h"] == 0 and conv["dilation_h_factor"] == 1 and conv["fused_activation_function"] == "NONE"


@pytest.mark.parametrize(
    "action,match",
    [
        (lambda b, x: b.add_operator("CONV_2D", [x], [x], {"stride": 1}), "no field"),
        (lambda b, x: b.add_operator("CONV_2D", [x], [x], {"padding": "HALF"}), "HALF"),
        (lambda b, x: b.add_operator("NOT_AN_OP", [x], [x]), "builtin"),
        # A string was written as a string and its offset became the number (13, not INT32's 2).
        (lambda b, x: b.add_operator("ARG_MAX", [x], [x], {"output_type": "INT32"}), "a number, not a string"),
        (lambda b, x: b.add_operator("RELU", [x], [x], {"a": 1}), "no options"),
        (lambda b, x: b.add_operator("RELU", [x, 7], [x]), "tensor 7"),
        (lambda b, x: b.mark_output(3), "tensor 3"),
        (lambda b, x: b.add_tensor("t", (2, -1)), "negative"),
        (lambda b, x: b.add_tensor("t", (2,), "int9"), "int9"),
        (lambda b, x: b.add_tensor("t", (2,), "int8", data=np.zeros(3)), "shape"),
        (lambda b, x: b.add_tensor("t", (1,), "int8", data=np.array([300])), "change"),
        (lambda b, x: b.add_constant("t", np.zeros(0, np.int8)), "no elements"),
        (lambda b, x: quantization([0.1, 0.2], [0, 0, 0]), "zero point"),
        (lambda b, x: quantization(0.0), "positive"),
    ],
)
def test_bad_input_raises_clear_errors(action, match):
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), "int8", quantization(0.1))
    with pytest.raises(InvalidArgumentError, match=match):
        action(b, x)


def test_build_needs_inputs_and_outputs_and_happens_once():
    with pytest.raises(InvalidArgumentError, match="input"):
        ModelBuilder().build()
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), "int8", quantization(0.1))
    b.mark_output(x)
    model = b.build()
    assert model.main.inputs == (0,) and model.main.outputs == (0,)
    for again in (b.build, lambda: b.add_tensor("late", (1,)), lambda: b.mark_output(x)):
        with pytest.raises(InvalidArgumentError, match="already called"):
            again()
    assert len(model.main.tensors) == 1


@settings(max_examples=30, deadline=None)
@given(
    dtype=st.sampled_from(["int8", "uint8", "int16", "int32", "int64", "float32"]),
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_constants_round_trip(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    np_dtype = NUMPY_DTYPES[dtype]
    if np_dtype.kind == "f":
        data = rng.standard_normal(shape).astype(np_dtype)
    else:
        info = np.iinfo(np_dtype)
        data = rng.integers(info.min, info.max, size=shape, dtype=np_dtype, endpoint=True)
    b = ModelBuilder()
    x = b.add_input("x", shape, dtype)
    c = b.add_constant("c", data)
    y = b.add_tensor("y", shape, dtype)
    b.add_operator("MAXIMUM", [x, c], [y])
    b.mark_output(y)
    model = b.build()
    assert model.main.tensors[c].dtype == dtype
    np.testing.assert_array_equal(model.main.tensors[c].data, data)
    assert load_model(save_model(model)) == model
