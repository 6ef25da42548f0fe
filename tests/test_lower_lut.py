"""8-bit activations as NPU table lookups: every table equals the reference kernel's outputs.

An int8 unary operator is a function of 256 input values, so each check is exhaustive for its
quantization: the reference interpreter runs the operator on all 256 codes, and the table must
agree on every one. Hypothesis draws the input range (hence scale and zero point).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader.frontend.lower_lut import lut_table
from cascader.tflite.model import Quantization
from cascader.zoo import _single_op_net

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter  # noqa: E402

ALL_CODES = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
CASES = {
    "LOGISTIC": ("logistic", {}, (0.3, 20.0)),
    "TANH": ("tanh", {}, (0.3, 20.0)),
    "EXP": ("exp", {}, (0.3, 6.0)),
    "HARD_SWISH": ("hard_swish", {}, (0.3, 20.0)),
    "LEAKY_RELU": ("leaky_relu", {"alpha": 0.2}, (0.3, 20.0)),
    "LEAKY_RELU_NEGATIVE_ALPHA": ("leaky_relu", {"alpha": -0.7}, (0.3, 20.0)),
}


def _quant(tensor) -> tuple[float, int]:
    return float(tensor.quantization.scale[0]), int(tensor.quantization.zero_point[0])


@pytest.mark.parametrize("case", sorted(CASES))
@settings(max_examples=25, deadline=None)
@given(low=st.floats(0.0, 1.0), high=st.floats(0.0, 1.0), seed=st.integers(0, 3))
def test_table_equals_reference_on_every_code(case, low, high, seed):
    method, params, (smallest, largest) = CASES[case]
    span = lambda u: smallest + u * (largest - smallest)  # noqa: E731
    model = _single_op_net(method, [(1, 256)], seed, "int8", (-span(low), span(high)), **params).build()
    graph = model.main
    op = graph.operators[0]
    expected = ReferenceInterpreter(model).run([ALL_CODES])[0].reshape(-1)
    table = lut_table(op.opcode, _quant(graph.tensors[op.inputs[0]]), _quant(graph.tensors[op.outputs[0]]), "int8",
                      op.options)
    mismatch = np.nonzero(table != expected)[0]
    assert mismatch.size == 0, f"codes {mismatch[:8] - 128}: table {table[mismatch[:8]]}, reference {expected[mismatch[:8]]}"


def _with_quantization(model, ifm: tuple[float, int], ofm: tuple[float, int]):
    """`model`, one operator, with its input and output quantized as given."""
    graph = model.main
    op = graph.operators[0]
    tensors = list(graph.tensors)
    for t, (scale, zero_point) in ((op.inputs[0], ifm), (op.outputs[0], ofm)):
        tensors[t] = replace(tensors[t], quantization=Quantization(np.array([scale], np.float32), np.array([zero_point])))
    return replace(model, subgraphs=[replace(graph, tensors=tensors)])


@pytest.mark.parametrize("method, ifm, ofm", [
    # 1 / (1 + exp(-1.5317733)) * 256 is 210.49998 with numpy's float32 exp, 210.50002 with
    # libm's, which the reference rounds up (found by random networks; so is the TANH case).
    ("logistic", (0.018235396593809128, -128), (1 / 256, -128)),
    ("tanh", (0.023062005639076233, 83), (1 / 128, 0)),
    # Rescaled beyond int32, finite (exp(23) / 2.16) or not (exp(127) is inf in float32): the
    # reference gives the maximum.
    ("exp", (1.0, -128), (2.16, -96)),
    ("exp", (1.0, 0), (1e-3, 0)),
])
def test_float_tables_at_rounding_and_overflow_edges(method, ifm, ofm):
    model = _with_quantization(_single_op_net(method, [(1, 256)], 0, "int8", (-1.0, 1.0)).build(), ifm, ofm)
    expected = ReferenceInterpreter(model).run([ALL_CODES])[0].reshape(-1)
    table = lut_table(model.main.operators[0].opcode, ifm, ofm, "int8")
    mismatch = np.nonzero(table != expected)[0]
    assert mismatch.size == 0, f"codes {mismatch[:8] - 128}: table {table[mismatch[:8]]}, reference {expected[mismatch[:8]]}"


def test_logistic_compiles_to_one_npu_table_lookup(tmp_path):
    from cascader.bench.simulate import validate

    model = _single_op_net("logistic", [(1, 6, 6, 16)], 0, "int8", (-8.0, 8.0)).build()
    path = tmp_path / "logistic.tflite"
    cascader.save_model(model, path)
    compiled = cascader.compile(path)
    assert compiled.summary().cpu_operators == 0
    assert validate(path, compiled.model, (0, 1)).bit_exact


@pytest.mark.parametrize("method", ["tanh", "logistic"])
@pytest.mark.parametrize("high", [0.7, 3.0, 8.0, 16.0])
def test_int16_tanh_and_logistic_use_the_npu_functions(tmp_path, method, high):
    from cascader.bench.simulate import validate

    model = _single_op_net(method, [(1, 8, 8, 16)], 0, "int16", (-high, high)).build()
    path = tmp_path / f"{method}.tflite"
    cascader.save_model(model, path)
    compiled = cascader.compile(path)
    assert compiled.summary().cpu_operators == 0
    assert compiled.operations[0][0]["activation"]["function"] in (3, 4)
    assert validate(path, compiled.model, (0, 1)).bit_exact


def _rsqrt_model(low: float, high: float, out_scale: float, out_zero_point: int) -> cascader.Model:
    from cascader.tflite.builder import ModelBuilder, quantization

    b = ModelBuilder()
    q_in = quantization((high - low) / 255.0, int(round(-128 - low / ((high - low) / 255.0))))
    x = b.add_input("x", (1, 256), "int8", q_in)
    y = b.add_tensor("y", (1, 256), "int8", quantization(out_scale, out_zero_point))
    b.add_operator("RSQRT", [x], [y], version=2)
    b.mark_output(y)
    return b.build()


@settings(max_examples=25, deadline=None)
@given(low=st.floats(-4.0, 0.0), high=st.floats(0.05, 50.0), out_scale=st.floats(1e-3, 0.2),
       out_zero_point=st.integers(-128, 127))
def test_rsqrt_table_equals_reference_on_every_valid_code(low, high, out_scale, out_zero_point):
    # The reference refuses codes below the zero point (1/sqrt of a negative), so only the
    # codes from the zero point up are run; the rest of the table is never read by a valid model.
    model = _rsqrt_model(low, high, out_scale, out_zero_point)
    graph = model.main
    (x_q, x_zp), out_q = _quant(graph.tensors[graph.inputs[0]]), _quant(graph.tensors[graph.outputs[0]])
    codes = np.arange(x_zp, 128, dtype=np.int8)
    padded = np.concatenate([codes, np.full(256 - codes.size, 127, np.int8)]).reshape(1, 256)
    expected = ReferenceInterpreter(model).run([padded])[0].reshape(-1)[: codes.size]
    table = lut_table("RSQRT", (x_q, x_zp), out_q, "int8")[codes.astype(np.int64) + 128]
    mismatch = np.nonzero(table != expected)[0]
    assert mismatch.size == 0, f"codes {codes[mismatch[:8]]}: table {table[mismatch[:8]]}, reference {expected[mismatch[:8]]}"


def test_abs_then_rsqrt_compiles_to_npu_operations_bit_exact(tmp_path):
    # ABS keeps RSQRT's input at or above its zero point, so random inputs are valid.
    from cascader.bench.simulate import validate
    from cascader.tflite.builder import ModelBuilder, quantization

    b = ModelBuilder()
    q = quantization(0.05, -3)
    x = b.add_input("x", (1, 6, 6, 16), "int8", q)
    magnitude = b.add_tensor("magnitude", (1, 6, 6, 16), "int8", quantization(0.03, -128))
    y = b.add_tensor("y", (1, 6, 6, 16), "int8", quantization(0.02, -100))
    b.add_operator("ABS", [x], [magnitude], version=2)
    b.add_operator("RSQRT", [magnitude], [y], version=2)
    b.mark_output(y)
    path = tmp_path / "rsqrt.tflite"
    cascader.save_model(b.build(), path)
    compiled = cascader.compile(path)
    assert compiled.summary().cpu_operators == 0
    assert validate(path, compiled.model, (0, 1)).bit_exact


def _conv_then(unary: str, also_read: bool, seed: int):
    from cascader._zoo_layers import CalibratedNet

    net = CalibratedNet(seed=seed)
    x = net.input((1, 12, 12, 8))
    y = net.conv2d(x, 16, activation="RELU" if unary == "logistic" else None)
    z = getattr(net, unary)(y)
    # A second reader of the conv's output keeps the lookup a pass of its own.
    net.output(net.add(z, y) if also_read else z)
    return net.build()


@pytest.mark.parametrize("unary", ["hard_swish", "logistic", "tanh"])
@pytest.mark.parametrize("also_read", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_lookup_fuses_into_its_producer_bit_exactly(unary, also_read, seed):
    """A convolution whose output only a table lookup reads applies the table itself (one
    operation, one buffer fewer); with a second reader it cannot. Both bit-exact."""
    model = _conv_then(unary, also_read, seed)
    compiled = cascader.compile(model)
    ops = [op for seg in compiled.schedule.segments for op in seg.operations]
    conv = next(op for op in ops if op.lowered.kind == "conv")
    assert (conv.lowered.lut is not None) == (not also_read)
    assert len(ops) == (3 if also_read else 1)
    inputs = cascader.reference.random_inputs(model, seed=seed)
    ours = cascader.simulate(compiled, inputs)[0]
    assert np.array_equal(ours, ReferenceInterpreter(model).run(inputs)[0])


INT16_CODES = np.arange(-32768, 32768, dtype=np.int16).reshape(1, 256, 256, 1)


@settings(max_examples=12, deadline=None)
@given(in_scale=st.floats(2e-5, 4e-4), out_scale=st.floats(1e-4, 4e-3))
def test_int16_exp_table_on_every_code(in_scale, out_scale):
    """int16 EXP as one lookup through the NPU's 16-bit interpolating table, equal to the
    reference on all 65,536 input codes."""
    from cascader.tflite.builder import ModelBuilder, quantization

    b = ModelBuilder()
    x = b.add_input("x", INT16_CODES.shape, "int16", quantization(in_scale, 0))
    y = b.add_tensor("y", INT16_CODES.shape, "int16", quantization(out_scale, 0))
    b.add_operator("EXP", [x], [y], version=2)
    b.mark_output(y)
    model = b.build()
    compiled = cascader.compile(model)
    assert compiled.summary().cpu_operators == 0
    ours = cascader.simulate(compiled, [INT16_CODES])[0]
    assert np.array_equal(ours, ReferenceInterpreter(model).run([INT16_CODES])[0])
