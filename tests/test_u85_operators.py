"""The operators Vela 5.2 runs on the Ethos-U85 only (#42): their zoo models, Vela's U85
binaries of them simulated against the reference interpreter on two seeds, their constraint
edges, and the U55's verdict (they stay on its CPU, with the reason)."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.operator_zoo import U85_OPERATOR_DTYPES, operator_model
from cascader.tflite.builder import ModelBuilder, quantization

CASES = [(op, dt) for op, dts in U85_OPERATOR_DTYPES.items() for dt in dts]

# Vela's binary departs from the reference kernel, and the simulator follows its registers.
VELA_DEVIATES = {
    # Vela's DIV divides the quantized codes (unit scales in every scale register, no zero
    # points); TFLite's uint8 (LiteRT) and int8 (TFLM) kernels divide the real values.
    # test_velas_quantized_div_divides_the_codes checks what the simulator gives instead.
    ("DIV", "uint8"): "integer division of the codes",
    ("DIV", "int8"): "integer division of the codes",
    # The variable's int32 ADD: exact until the running sum leaves int32, then the simulated
    # NPU saturates (a 32-bit OFM is clamped to its type under clip range NONE) where TFLite's
    # int32 ADD wraps. Unsettled: the simulator keeps the low bits of an 8/16-bit OFM under clip
    # range NONE; if the U85 does so for 32 bits too, this is the simulator's error, not Vela's.
    # test_int32_variable_saturates_where_tflite_wraps checks what the simulator gives.
    ("READ_VARIABLE", "int32"): "int32 sum saturates",
    ("ASSIGN_VARIABLE", "int32"): "int32 sum saturates",
}


def _validate(model, accelerator: str, tmp_path, name: str):
    from cascader import save_model
    from cascader.bench.simulate import validate_with_vela
    from cascader.vela import VelaConfig

    pytest.importorskip("ethosu.vela")
    pytest.importorskip("ai_edge_litert")
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(save_model(model))
    return validate_with_vela(path, VelaConfig(accelerator), seeds=(0, 1))


def _vela_cpu_operators(model, accelerator: str) -> list[str]:
    from cascader.bench.coverage import cpu_operators

    return sorted(cpu_operators(cascader.vela.compile(model, accelerator).model))


def _check(result, name: str) -> None:
    assert result.bit_exact is not None, f"{name} ({result.config}) was not simulated: {result.error}"
    assert result.bit_exact and result.elements, f"{name} ({result.config}): {result.details}"


def test_cases_are_models_of_their_operator():
    for opcode, dtype in CASES:
        model = operator_model(opcode, dtype)
        assert opcode in [op.opcode for op in model.main.operators]
        types = {model.main.tensors[t].dtype for op in model.main.operators if op.opcode == opcode
                 for t in op.inputs if t >= 0}
        assert dtype in types or opcode == "READ_VARIABLE", (opcode, dtype, types)
    assert not set(U85_OPERATOR_DTYPES) & set(cascader.operator_zoo.OPERATOR_DTYPES)  # U55/U65 rows unchanged


def test_they_are_velas_u85_only_operators():
    vela = pytest.importorskip("cascader.vela")
    try:
        u55, u85 = set(vela.supported_operators("u55")), set(vela.supported_operators("u85"))
    except vela.VelaNotInstalled:
        pytest.skip("Vela is not installed")
    assert set(U85_OPERATOR_DTYPES) <= u85 - u55


@pytest.mark.parametrize("accelerator", ["ethos-u85-256", "ethos-u85-512"])
@pytest.mark.parametrize("opcode, dtype", CASES)
def test_velas_u85_binary_is_bit_exact(opcode: str, dtype: str, accelerator: str, tmp_path):
    """Vela puts the operator on the U85's NPU, and its binary simulates bit-exact on two seeds
    (three inferences each for the stateful model): comparisons, bitwise modes, DIV, casts that
    widen and narrow, SELECT as AND/AND_NOT/OR, REDUCE_ALL/ANY as MIN/MAX pooling on -1/0
    booleans, GATHER and SCATTER_ND as indexed DMAs, resource variables in the arena."""
    model = operator_model(opcode, dtype)
    if opcode not in ("READ_VARIABLE", "ASSIGN_VARIABLE"):  # CALL_ONCE stays on the CPU there
        assert _vela_cpu_operators(model, accelerator) == []
    result = _validate(model, accelerator, tmp_path, f"{opcode}_{dtype}")
    if (opcode, dtype) in VELA_DEVIATES:
        assert result.bit_exact is False, f"{opcode} {dtype} is bit-exact now: take it out of VELA_DEVIATES"
    else:
        _check(result, f"{opcode}_{dtype}")


def test_int32_variable_saturates_where_tflite_wraps():
    """What VELA_DEVIATES says of the int32 variable: three inferences of Vela's binary give the
    saturated running sum (the start of the CALL_ONCE initialiser plus the inputs), equal to
    TFLite's wrapped sum wherever no element leaves int32 (the whole first step)."""
    from importlib import import_module

    from cascader.reference import random_inputs

    pytest.importorskip("ethosu.vela")
    model = operator_model("READ_VARIABLE", "int32")
    session = import_module("cascader.sim.simulate").Session(cascader.vela.compile(model, "ethos-u85-256").model)
    state = model.subgraphs[1].tensors[1].data.astype(np.int64)
    overflows = 0
    for step in range(3):
        x = random_inputs(model, step)[0]
        out = session.run([x])[0].astype(np.int64)
        wide = state + x
        inside = (wide >= -(2**31)) & (wide < 2**31)
        assert np.array_equal(out, np.clip(wide, -(2**31), 2**31 - 1)), step
        assert np.array_equal(out[inside], wide[inside]) and (step > 0 or inside.all()), step
        overflows += int((~inside).sum())
        state = out
    assert overflows > 0  # the case that departs from TFLite is exercised


def _run_vela(model, seed: int = 0, accelerator: str = "ethos-u85-256"):
    from cascader.reference import random_inputs

    pytest.importorskip("ethosu.vela")
    inputs = random_inputs(model, seed)
    return inputs, cascader.simulate(cascader.vela.compile(model, accelerator).model, inputs)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_velas_quantized_div_divides_the_codes(dtype: str):
    """What VELA_DEVIATES says of quantized DIV: Vela leaves out the scales and the zero points
    (128 for uint8 here) and the NPU's DIV truncates the quotient of the codes toward zero."""
    model = operator_model("DIV", dtype)
    inputs, (got,) = _run_vela(model)
    divisor = next(t for t in model.main.tensors if t.name == "divisor")
    assert int(divisor.quantization.zero_point[0]) == (128 if dtype == "uint8" else 0)
    a, b = inputs[0].astype(np.int64), divisor.data.astype(np.int64)
    np.testing.assert_array_equal(got, np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b)))


def _binary_model(opcode: str, dtype: str, second_shape, out_dtype: str, qa=None, qb=None, qo=None):
    b = ModelBuilder(description=f"test_u85_operators {opcode}")
    x = b.add_input("input", (1, 6, 5, 16), dtype, qa)
    y = b.add_input("input_b", second_shape, dtype, qb)
    out = b.add_tensor("output", (1, 6, 5, 16), out_dtype, qo)
    b.mark_output(out)
    b.add_operator(opcode, [x, y], [out])
    return b.build()


@pytest.mark.parametrize("opcode", ["GREATER", "LESS_EQUAL", "NOT_EQUAL"])
@pytest.mark.parametrize("dtype", ["int8", "int32"])
def test_comparisons_with_a_broadcast_operand(opcode: str, dtype: str, tmp_path):
    """A per-channel second operand, broadcast over H and W, on U85-256 and U85-128. LESS and
    LESS_EQUAL are CMP_GT/CMP_GE with the operands swapped, so the broadcast operand becomes
    the IFM: an IFM broadcast (ethos_u85/broadcast)."""
    q = (lambda s, z: quantization(s, z)) if dtype == "int8" else (lambda s, z: None)
    model = _binary_model(opcode, dtype, (1, 1, 1, 16), "bool", q(0.04, -3), q(0.07, 10))
    for accelerator in ("ethos-u85-256", "ethos-u85-128"):
        result = _validate(model, accelerator, tmp_path, f"{opcode}_{dtype}_broadcast")
        _check(result, opcode)


def test_int16_comparison_of_different_scales_follows_the_registers():
    """LiteRT's int16 comparisons compare the raw values; Vela's U85 binary rescales both
    operands and so compares the real values. With different scales they differ (Vela's
    departure), and the simulator gives the real-valued comparison."""
    from cascader.reference import run

    model = _binary_model("GREATER", "int16", (1, 6, 5, 16), "bool", quantization(0.05, 0), quantization(0.03, 0))
    inputs, (got,) = _run_vela(model)
    a, b = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
    np.testing.assert_array_equal(got, 0.05 * a > 0.03 * b)
    assert not np.array_equal(got, run(model, inputs)[0])


def test_int32_div_of_two_inputs_with_negative_divisors(tmp_path):
    """Both operands dynamic, both signs: truncation toward zero, as TFLite's int32 DIV."""
    model = _binary_model("DIV", "int32", (1, 6, 5, 16), "int32")
    _check(_validate(model, "ethos-u85-256", tmp_path, "div_int32_dynamic"), "DIV")


@pytest.mark.parametrize("to", ["bool", "int16", "uint8"])
def test_int32_casts(to: str, tmp_path):
    """int32 to bool (CMP_NE against 0), and narrowing casts that wrap as TFLite's do (the
    U85's clip range NONE keeps the low bits)."""
    b = ModelBuilder(description="test_u85_operators CAST")
    x = b.add_input("input", (1, 4, 4, 16), "int32", None if to == "bool" else quantization(1.0, 0))
    out = b.add_tensor("output", (1, 4, 4, 16), to, None if to == "bool" else quantization(1.0, 0))
    b.mark_output(out)
    from cascader.tflite.schema import TENSOR_TYPE_CODES

    b.add_operator("CAST", [x], [out], dict(in_data_type=TENSOR_TYPE_CODES["int32"], out_data_type=TENSOR_TYPE_CODES[to]))
    model = b.build()
    assert _vela_cpu_operators(model, "ethos-u85-256") == []
    _check(_validate(model, "ethos-u85-256", tmp_path, f"cast_int32_{to}"), "CAST")


def test_gather_with_batch_dims_is_a_3d_indexed_dma(tmp_path):
    """axis == batch_dims == 1: one index row per batch, a 3-D DMA."""
    b = ModelBuilder(description="test_u85_operators GATHER batch")
    q = quantization(0.05, 1)
    x = b.add_input("input", (3, 10, 8), "int8", q)
    indices = b.add_constant("indices", np.array([[9, 0, 4, 4], [1, 2, 3, 9], [5, 5, 0, 7]], np.int32))
    out = b.add_tensor("output", (3, 4, 8), "int8", q)
    b.mark_output(out)
    b.add_operator("GATHER", [x, indices], [out], dict(axis=1, batch_dims=1))
    model = b.build()
    from cascader.sim.binary import npu_calls

    pytest.importorskip("ethosu.vela")
    binary = cascader.vela.compile(model, "ethos-u85-256")
    dmas = [op for call in npu_calls(binary.model) for op in call.decode().operations if "u85_dma" in op]
    assert dmas and dmas[-1]["u85_dma"]["src_indexed"], dmas
    _check(_validate(model, "ethos-u85-256", tmp_path, "gather_batch"), "GATHER")


def test_velas_int16_gather_indices_are_simulated_as_it_writes_them():
    """Vela 5.2 converts constant int16 GATHER indices to int32 wrongly (every index becomes
    the first: its read-only tensor holds 3, 3, 3, 3, 3 for 3, 0, 9, 3, 7); the simulator reads
    the index array the DMA registers point at, so it gives the first row five times."""
    b = ModelBuilder(description="test_u85_operators GATHER int16 indices")
    q = quantization(0.05, 1)
    x = b.add_input("input", (10, 8), "int8", q)
    indices = b.add_constant("indices", np.array([3, 0, 9, 3, 7], np.int16))
    out = b.add_tensor("output", (5, 8), "int8", q)
    b.mark_output(out)
    b.add_operator("GATHER", [x, indices], [out], dict(axis=0, batch_dims=0))
    inputs, (got,) = _run_vela(b.build())
    np.testing.assert_array_equal(got, inputs[0][[3, 3, 3, 3, 3]])


def test_resource_variable_carries_state_through_the_arena():
    """Vela puts the initialiser's ASSIGN_VARIABLE in an NPU operator of the CALL_ONCE subgraph
    and keeps the variable at one arena offset; three inferences accumulate as the reference's."""
    from cascader.reference import ReferenceInterpreter, random_inputs
    from cascader.sim import Session

    pytest.importorskip("ethosu.vela")
    model = operator_model("ASSIGN_VARIABLE", "int8")
    binary = cascader.vela.compile(model, "ethos-u85-256").model
    assert len(binary.subgraphs) == 2 and binary.subgraphs[1].operators[0].custom_code == "ethos-u"
    session, reference = Session(binary), ReferenceInterpreter(model)
    inputs = random_inputs(model, 0)
    runs = [session.run(inputs)[0] for _ in range(3)]
    for got in runs:
        np.testing.assert_array_equal(got, reference.run(inputs)[0])
    assert not np.array_equal(runs[0], runs[1])
    session.reset()
    np.testing.assert_array_equal(session.run(inputs)[0], runs[0])


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_u55_and_u65_keep_them_on_the_cpu_with_the_reason(accelerator: str):
    for opcode in U85_OPERATOR_DTYPES:
        model = operator_model(opcode, U85_OPERATOR_DTYPES[opcode][0])
        compiled = cascader.compile(model, accelerator=accelerator)
        for op, verdict in zip(compiled.source.main.operators, compiled.partition.verdicts):
            if op.opcode == opcode:
                assert not verdict.npu and verdict.rule == "operator_type"
                assert "Ethos-U85 only" in verdict.reason, verdict.reason
