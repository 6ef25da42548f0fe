"""ELU, GELU, LOG and NEG on the NPU, bit-exact against TFLite's kernels, in every type Vela 5.2
runs them in on Ethos-U55/U65: ELU int8; GELU int8 and uint8, erf and tanh forms; LOG int8 and
int16; NEG int8, uint8, int16 and int32.

8- and 16-bit checks are exhaustive: the input holds every code of its type, so a table or an
operation sequence is right on all of them (the saturating ends and NEG's wrapping minimum
included), for quantizations drawn from two seeds plus one that saturates the output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader.frontend.lower_lut import lut_table
from cascader.reference import ReferenceInterpreter, random_inputs
from cascader.sim import simulate
from cascader.tflite.builder import ModelBuilder, quantization
from conftest import compile_on_npu

pytest.importorskip("ai_edge_litert")

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
SEEDS = (0, 1)
RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1)}
# TFLite's versions for these types (LiteRT registers ELU version 1 only).
VERSION = {"ELU": 1, "GELU": 2, "LOG": 2, "NEG": 1}
# (operator, type, options): what Vela 5.2 puts on the U55/U65 NPU, and the cascader lowering:
CASES = [
    ("ELU", "int8", None),  # a 256-entry table
    ("GELU", "int8", {"approximate": False}),  # a 256-entry table
    ("GELU", "int8", {"approximate": True}),
    ("GELU", "uint8", {"approximate": False}),
    ("GELU", "uint8", {"approximate": True}),
    ("LOG", "int8", None),  # a 256-entry table
    ("LOG", "int16", None),  # a 512-entry interpolating table
    ("NEG", "int8", None),  # a 256-entry table (the wrap at -128)
    ("NEG", "int16", None),  # SUB then MUL (the wrap at -32768)
    ("NEG", "int32", None),  # one SUB
]
OPERATIONS = {("NEG", "int16"): 2}


def _model(opcode: str, dtype: str, shape, q_in, q_out, options=None) -> cascader.Model:
    b = ModelBuilder()
    x = b.add_input("x", shape, dtype, q_in)
    y = b.add_tensor("y", shape, dtype, q_out)
    b.add_operator(opcode, [x], [y], options, version=VERSION[opcode])
    b.mark_output(y)
    return b.build()


def _quantizations(opcode: str, dtype: str, seed: int):
    """Random input and output quantizations (zero points 0 for int16, as TFLite requires)."""
    if dtype == "int32":
        return None, None  # TFLite's int32 NEG ignores quantization
    rng = np.random.default_rng(seed)
    lo, hi = RANGE[dtype]

    def one():
        scale = float(np.exp(rng.uniform(math.log(2e-3), math.log(0.2))))
        return quantization(scale, 0 if dtype == "int16" else int(rng.integers(lo, hi + 1)))

    return one(), one()


def _saturating(opcode: str, dtype: str):
    """Quantizations that push the outputs past the type's ends: a wide input range into a
    narrow output one (LOG of tiny inputs, ELU at -1, GELU of large ones)."""
    zero = {"int8": -128, "uint8": 0, "int16": 0, "int32": 0}[dtype]
    if dtype == "int32":
        return None, None
    return quantization(0.25, 0 if dtype == "int16" else zero + 10), quantization(1e-3, 0 if dtype == "int16" else 5)


def _every_code(dtype: str, shape) -> np.ndarray:
    """Every code of `dtype` (the type's ends first), repeated to fill `shape`; int32 gets its
    ends (but -2^31, whose negation C++ leaves undefined) and random values."""
    size = math.prod(shape)
    lo, hi = RANGE[dtype]
    if dtype == "int32":
        codes = np.concatenate([[lo + 1, hi, 0, 1, -1], np.random.default_rng(7).integers(lo + 1, hi, size)])
    else:
        codes = np.concatenate([[lo, hi, lo + 1, hi - 1], np.arange(lo, hi + 1)])
        assert size >= codes.size - 4, "the shape must hold every code"
    return np.resize(codes, size).astype(dtype).reshape(shape)


def _compile_and_compare(tmp_path, model, inputs, accelerator, operations=None):
    _, compiled = compile_on_npu(tmp_path, model, accelerator, operations, "unary")
    expected = ReferenceInterpreter(model).run(inputs)
    got = simulate(compiled.model, inputs)
    for g, e, x in zip(got, expected, inputs):
        bad = np.nonzero(g.reshape(-1) != e.reshape(-1))[0]
        assert bad.size == 0, (f"{bad.size} differ: inputs {x.reshape(-1)[bad[:6]]}, NPU {g.reshape(-1)[bad[:6]]}, "
                               f"reference {e.reshape(-1)[bad[:6]]}")
    return compiled


def _all_codes_shape(dtype: str):
    return {"int8": (1, 4, 5, 13), "uint8": (1, 4, 5, 13), "int16": (1, 257, 256), "int32": (1, 6, 7, 9)}[dtype]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("quant", ["seed0", "seed1", "saturating"])
@pytest.mark.parametrize("opcode, dtype, options", CASES, ids=lambda c: str(c) if not isinstance(c, dict) else
                         ("approximate" if c["approximate"] else "erf"))
def test_every_code_bit_exact(tmp_path, opcode, dtype, options, quant, accelerator):
    q_in, q_out = _saturating(opcode, dtype) if quant == "saturating" else _quantizations(opcode, dtype,
                                                                                          SEEDS[int(quant[-1])])
    shape = _all_codes_shape(dtype)
    model = _model(opcode, dtype, shape, q_in, q_out, options)
    _compile_and_compare(tmp_path, model, [_every_code(dtype, shape)], accelerator,
                         operations=OPERATIONS.get((opcode, dtype), 1))


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("shape", [(300,), (3, 200), (1, 1, 1, 1), (1, 3, 5, 7), (1, 17, 1, 33)])
@pytest.mark.parametrize("opcode, dtype, options", [("ELU", "int8", None), ("GELU", "uint8", {"approximate": True}),
                                                    ("LOG", "int16", None), ("NEG", "int16", None),
                                                    ("NEG", "int32", None)])
def test_odd_shapes_and_ranks(tmp_path, opcode, dtype, options, shape, accelerator):
    for seed in SEEDS:
        q_in, q_out = _quantizations(opcode, dtype, seed)
        model = _model(opcode, dtype, shape, q_in, q_out, options)
        inputs = random_inputs(model, seed)
        # The type's ends first (-2^31 + 1 for int32), as many as fit.
        ends = np.roll([RANGE[dtype][0] + (dtype == "int32"), RANGE[dtype][1]], seed)
        flat = inputs[0].reshape(-1)
        flat[: min(2, flat.size)] = ends[: flat.size]
        _compile_and_compare(tmp_path, model, inputs, accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_uint8_neg_is_negate_in_uint8(tmp_path, accelerator):
    # LiteRT has no uint8 NEG kernel (Vela runs one): the table is reference_ops::Negate's
    # arithmetic in uint8, -x mod 256, whatever the quantization.
    model = _model("NEG", "uint8", (1, 16, 16), quantization(0.1, 128), quantization(0.3, 7))
    path = tmp_path / "neg_uint8.tflite"
    cascader.save_model(model, path)
    compiled = cascader.compile(path, accelerator=accelerator)
    codes = np.arange(256, dtype=np.uint8).reshape(1, 16, 16)
    (got,) = simulate(compiled.model, [codes])
    np.testing.assert_array_equal(got, (-codes.astype(np.int64)) % 256)


def _quant_pair(tensor_q) -> tuple[float, int]:
    return float(tensor_q.scale[0]), int(tensor_q.zero_point[0])


TABLE_CASES = [("ELU", "int8", {}), ("GELU", "int8", {"approximate": False}), ("GELU", "uint8", {"approximate": True}),
               ("LOG", "int8", {})]


@pytest.mark.parametrize("opcode, dtype, options", TABLE_CASES)
@settings(max_examples=20, deadline=None)
@given(s_in=st.floats(1e-3, 0.5), s_out=st.floats(1e-3, 0.5), zp_in=st.integers(0, 255), zp_out=st.integers(0, 255))
def test_table_equals_reference(opcode, dtype, options, s_in, s_out, zp_in, zp_out):
    shift = -128 if dtype == "int8" else 0
    q_in, q_out = quantization(s_in, zp_in + shift), quantization(s_out, zp_out + shift)
    model = _model(opcode, dtype, (1, 256), q_in, q_out, options or None)
    codes = np.arange(256).astype(np.int64) + shift
    expected = ReferenceInterpreter(model).run([codes.astype(dtype).reshape(1, 256)])[0].reshape(-1)
    table = lut_table(opcode, _quant_pair(q_in), _quant_pair(q_out), dtype, options)
    np.testing.assert_array_equal(table, expected)


def test_gelu_table_follows_the_c_library_tanhf():
    # One of 6,000 random quantizations where glibc's tanhf (not correctly rounded) moves an
    # entry across a rounding boundary: the correctly rounded tanh gives a different table.
    q_in, q_out = quantization(0.0077542118225283055, 198), quantization(0.07485640749881309, 28)
    model = _model("GELU", "uint8", (1, 256), q_in, q_out, {"approximate": True})
    expected = ReferenceInterpreter(model).run([np.arange(256, dtype=np.uint8).reshape(1, 256)])[0].reshape(-1)
    np.testing.assert_array_equal(lut_table("GELU", _quant_pair(q_in), _quant_pair(q_out), "uint8",
                                            {"approximate": True}), expected)


@pytest.mark.parametrize("opcode, dtype, rule", [
    ("ELU", "int16", "unary_types"),  # Vela: int8 only
    ("ELU", "uint8", "unary_types"),
    ("GELU", "int16", "unary_types"),  # Vela: int8 or uint8
    ("LOG", "uint8", "unary_types"),  # Vela: int8 or int16
])
def test_types_vela_leaves_on_the_cpu_get_a_reason(tmp_path, opcode, dtype, rule):
    q = quantization(0.05, 0 if dtype == "int16" else 3)
    model = _model(opcode, dtype, (1, 4, 4, 8), q, q, {"approximate": False} if opcode == "GELU" else None)
    path = tmp_path / "cpu.tflite"
    cascader.save_model(model, path)
    (op,) = cascader.inspect(path).operators
    assert op.opcode == opcode and op.rule == rule and dtype in op.reason, (op.rule, op.reason)


def test_int16_log_with_a_zero_point_stays_on_the_cpu(tmp_path):
    # TFLite requires int16 zero points of 0 (its kernel refuses the model).
    model = _model("LOG", "int16", (1, 4, 4, 8), quantization(0.01, 5), quantization(0.01, 0))
    path = tmp_path / "log16.tflite"
    cascader.save_model(model, path)
    (op,) = cascader.inspect(path).operators
    assert op.rule == "unary_types" and "zero point" in op.reason, op.reason
    assert cascader.compile(path).summary().cpu_operators == 1


def test_neg_changing_shape_or_type_stays_on_the_cpu(tmp_path):
    b = ModelBuilder()
    q = quantization(0.05, 0)
    x = b.add_input("x", (1, 4, 4, 8), "int8", q)
    y = b.add_tensor("y", (1, 4, 4, 8), "int16", q)
    b.add_operator("NEG", [x], [y], version=1)
    b.mark_output(y)
    path = tmp_path / "neg.tflite"
    cascader.save_model(b.build(), path)
    (op,) = cascader.inspect(path).operators
    assert op.rule == "unary_types" and "int8 -> int16" in op.reason, op.reason


@pytest.mark.parametrize("builder, kwargs", [("elu", {}), ("gelu", {"approximate": True}), ("log", {"dtype": "int8"}),
                                             ("log", {"dtype": "int16"}), ("neg", {"dtype": "int16"})])
def test_zoo_models_compile_bit_exact_and_are_costed(tmp_path, builder, kwargs):
    from cascader.bench.simulate import validate

    model = getattr(cascader.zoo, builder)((1, 8, 8, 16), **kwargs)
    path = tmp_path / f"{builder}.tflite"
    cascader.save_model(model, path)
    compiled = cascader.compile(path)
    assert compiled.summary().cpu_operators == 0
    assert validate(path, compiled.model, SEEDS).bit_exact
    estimate = compiled.estimate()
    assert estimate.total_cycles > 0 and len(estimate.operations) == compiled.summary().npu_operations


def test_float_functions_fall_back_to_correct_rounding_without_the_c_library():
    from cascader.frontend.lower_lut import _libm

    x = np.array([0.5, -3.25, 7.0], np.float32)
    rounded_once = np.tanh(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(_libm("no_such_functionf", np.tanh)(x), rounded_once)
