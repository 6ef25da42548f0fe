"""ADD and SUB with a broadcast constant operand, on every input code, against the reference.

The last session's notes had one such ADD off by one on 1 of 144 elements (input scale
0.03202975, zero point -1; constant code 127 at scale 0.02362205; output scale 0.02352941,
zero point -128; RELU6). It does not reproduce on the lowering as it is now; these tests pin
that case and draw others: each model feeds all 256 int8 codes through the operator, so an
off-by-one anywhere in the rescaling shows.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader.frontend.add_sub_rounding import exact_add_sub_scales, operand_values
from cascader.frontend.quantization import add_sub_scales
from cascader.tflite.builder import ModelBuilder
from cascader.tflite.model import Quantization

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter  # noqa: E402

ALL_CODES = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16, 1)


def _q(scale: float, zero_point: int) -> Quantization:
    return Quantization(scale=np.array([scale], np.float32), zero_point=np.array([zero_point], np.int64))


def _binary(opcode, x_q, const, out_q, activation, constant_first, const_shape=(1, 1, 1, 1)):
    code, scale, zero_point = const
    b = ModelBuilder()
    x = b.add_input("x", ALL_CODES.shape, "int8", _q(*x_q))
    k = b.add_tensor("k", const_shape, "int8", _q(scale, zero_point), np.full(const_shape, code, np.int8))
    y = b.add_tensor("y", ALL_CODES.shape, "int8", _q(*out_q))
    b.add_operator(opcode, [k, x] if constant_first else [x, k], [y], {"fused_activation_function": activation})
    b.mark_output(y)
    return b.build()


def _check(model):
    compiled = cascader.compile(model)
    assert compiled.summary().cpu_operators == 0
    ours = cascader.simulate(compiled, [ALL_CODES])[0]
    reference = ReferenceInterpreter(model).run([ALL_CODES])[0]
    wrong = np.nonzero(ours != reference)
    assert not wrong[0].size, [(int(ALL_CODES[i]), int(ours[i]), int(reference[i])) for i in zip(*wrong)][:5]


@pytest.mark.parametrize("constant_first", [False, True])
@pytest.mark.parametrize("zero_point", [-128, 0])
def test_the_noted_add_case(constant_first, zero_point):
    _check(_binary("ADD", (0.03202975, -1), (127, 0.02362205, zero_point), (0.02352941, -128), "RELU6",
                   constant_first))


@pytest.mark.parametrize("constant_first", [False, True])
def test_exact_halves_round_as_the_reference(constant_first):
    """x at 0.125 plus a constant 0 at 0.1875 into 0.2: x = -124 is -77.5 exactly, and only the
    reference's double rounding of the scaled operand decides -78. Vela's registers give -77 on
    8 of the 256 codes; an operand multiplier 14 units larger rounds all 256 as the reference."""
    model = _binary("ADD", (0.125, 0), (0, 0.1875, 0), (0.2, 0), "NONE", constant_first)
    _check(model)
    assert exact_add_sub_scales((0.125, 0.1875, 0.2), operand_values("int8", 0), (0,), False, (-128, 127)) != \
        add_sub_scales(0.125, 0.1875, 0.2, 8)


@pytest.mark.parametrize("opcode", ["ADD", "SUB"])
@pytest.mark.parametrize("constant_first", [False, True])
def test_single_valued_constant_without_exact_registers_is_a_table(opcode, constant_first):
    """x at 0.05 and a constant -77 at 0.125 into 0.05: no operand multiplier near Vela's rounds
    every code's half as the reference does, so the operator becomes a table lookup of x,
    computed with the reference's arithmetic."""
    model = _binary(opcode, (0.05, 0), (-77, 0.125, 0), (0.05, 0), "NONE", constant_first)
    _check(model)
    assert any("(table)" in op.lowered.name for op in cascader.compile(model).schedule.operations)


def _all_pairs(opcode, first_q, second_q, out_q, dtype="int8"):
    """A model of `opcode` between two 256 x 256 tensors, and inputs that hold every pair of codes."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 256, 256, 1), dtype, _q(*first_q))
    y = b.add_input("y", (1, 256, 256, 1), dtype, _q(*second_q))
    z = b.add_tensor("z", (1, 256, 256, 1), dtype, _q(*out_q))
    b.add_operator(opcode, [x, y], [z], {"fused_activation_function": "NONE"})
    b.mark_output(z)
    lo = -128 if dtype == "int8" else 0
    codes = np.arange(lo, lo + 256).astype(dtype)
    rows, cols = np.meshgrid(codes, codes, indexing="ij")
    return b.build(), [rows.reshape(1, 256, 256, 1), cols.reshape(1, 256, 256, 1)]


def _pair_mismatches(model, inputs):
    ours = cascader.simulate(cascader.compile(model), inputs)[0]
    return int(np.count_nonzero(ours != ReferenceInterpreter(model).run(inputs)[0]))


def test_tensor_pair_fixed_by_the_operand_multiplier():
    """coral_movenet's ADD (0.2639, -3) + (0.4341, 20) -> (0.5321, 32): Vela's operand multiplier
    rounds 2 of the 65,536 input pairs one off (within the output's range); 3 units more makes
    every pair exact. The one such ADD among the shared models' 97 8-bit ADD/SUBs."""
    registers = exact_add_sub_scales((0.26387861371040344, 0.4341434836387634, 0.5320605635643005),
                                     operand_values("int8", -3), operand_values("int8", 20), False,
                                     (-128 - 32, 127 - 32))
    assert registers is not None and registers != add_sub_scales(0.26387861371040344, 0.4341434836387634,
                                                                 0.5320605635643005, 8)
    assert _pair_mismatches(*_all_pairs("ADD", (0.26387861371040344, -3), (0.4341434836387634, 20),
                                        (0.5320605635643005, 32))) == 0


@pytest.mark.parametrize("opcode", ["ADD", "SUB"])
def test_rescale_outside_the_references_range_stays_on_the_cpu(opcode):
    """An output scale of 4e-9 (a layer calibrated on all-zero outputs) against inputs near
    0.02: TFLite's kernel would rescale the sum by about 9, and it defines only rescales below
    1: its SUB returns what is not the rescaled sum (-127 where 127 was due), its ADD aborts.
    No NPU register set or table matches that, so the operator stays on the CPU, saying why,
    and the SUB is exact (on the NPU it was wrong on most pairs)."""
    model, inputs = _all_pairs(opcode, (0.0183333, -23), (0.01076, -128), (3.921568847431445e-09, -128))
    compiled = cascader.compile(model)
    (verdict,) = compiled.partition.verdicts
    assert not verdict.npu and "outside the range below 1" in verdict.reason
    if opcode == "SUB":
        assert _pair_mismatches(model, inputs) == 0


@settings(max_examples=15, deadline=None)
@given(opcode=st.sampled_from(["ADD", "SUB"]), dtype=st.sampled_from(["int8", "uint8"]),
       scale=st.tuples(*[st.sampled_from([0.05, 0.1, 0.125, 0.1875, 0.2, 0.25, 0.375, 0.5]) | st.floats(0.002, 0.5)
                         for _ in range(3)]), zero_point=st.tuples(*[st.integers(-128, 127)] * 3))
def test_tensor_pairs_are_exact_on_every_pair(opcode, dtype, scale, zero_point):
    """An ADD/SUB of two tensors runs on the NPU and is exact on all 65,536 input pairs: one
    operation wherever `exact_add_sub_scales` finds registers, the chain of
    `exact_elementwise` where it finds none."""
    zp = [z + 128 if dtype == "uint8" else z for z in zero_point]
    values = [operand_values(dtype, z) for z in zp[:2]]
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    registers = exact_add_sub_scales(tuple(scale), *values, opcode == "SUB", (lo - zp[2], hi - zp[2]))
    model, inputs = _all_pairs(opcode, (scale[0], zp[0]), (scale[1], zp[1]), (scale[2], zp[2]), dtype)
    compiled = cascader.compile(model)
    assert compiled.partition.verdicts[0].npu
    assert (len(compiled.schedule.operations) == 1) == (registers is not None)
    assert _pair_mismatches(model, inputs) == 0


scales = st.floats(0.002, 0.2)
zero_points = st.integers(-128, 127)


@settings(max_examples=30, deadline=None)
@given(opcode=st.sampled_from(["ADD", "SUB"]), x_scale=scales, x_zp=zero_points, code=st.integers(-128, 127),
       k_scale=scales, k_zp=zero_points, out_scale=scales, out_zp=zero_points,
       activation=st.sampled_from(["NONE", "RELU", "RELU6"]), constant_first=st.booleans(),
       per_channel=st.booleans())
def test_broadcast_constant_add_sub_on_every_code(opcode, x_scale, x_zp, code, k_scale, k_zp, out_scale, out_zp,
                                                   activation, constant_first, per_channel):
    _check(_binary(opcode, (x_scale, x_zp), (code, k_scale, k_zp), (out_scale, out_zp), activation, constant_first,
                   (1, 1, 1, 1) if not per_channel else (1,)))


@pytest.mark.parametrize("opcode", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("quantized", [None, 1.0, 0.5])
@pytest.mark.parametrize("second", [(1, 4, 4, 3), (1, 1, 1, 3), ()])
def test_int32_arithmetic_on_the_integers(opcode, quantized, second):
    """int32 ADD/SUB/MUL compute on the integers (TFLite's int32 kernels ignore quantization,
    which index arithmetic often lacks), through a reshape, bit-exact; a fused activation, which
    the NPU does not apply to 32-bit outputs, stays on the CPU."""
    q = None if quantized is None else _q(quantized, 0)
    rng = np.random.default_rng(len(second))
    inputs = [rng.integers(-30000, 30000, (1, 4, 4, 3)).astype(np.int32),
              rng.integers(-30000, 30000, second).astype(np.int32)]
    for activation, on_npu in (("NONE", True), ("RELU", False)):
        b = ModelBuilder()
        x = b.add_input("x", (1, 4, 4, 3), "int32", q)
        y = b.add_input("y", second, "int32", q)
        z = b.add_tensor("z", (1, 4, 4, 3), "int32", q)
        b.add_operator(opcode, [x, y], [z], {"fused_activation_function": activation}, version=4 if opcode == "MUL" else 2)
        flat = b.add_tensor("flat", (1, 48), "int32", q)
        b.add_operator("RESHAPE", [z, b.add_constant("shape", np.array([1, 48], np.int32))], [flat])
        b.mark_output(flat)
        model = b.build()
        compiled = cascader.compile(model)
        assert compiled.partition.verdicts[0].npu == on_npu
        assert on_npu or "int32" in compiled.partition.verdicts[0].reason
        assert np.array_equal(cascader.simulate(compiled, inputs)[0], ReferenceInterpreter(model).run(inputs)[0])


@pytest.mark.parametrize("opcode", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("channels_first", [False, True])
def test_both_operands_broadcast(opcode, dtype, channels_first):
    """Movenet's (48, 48, 1) - (1, 17): the operand without channels is repeated along them
    first (an exact 1x1 convolution), the other broadcasts as the NPU's IFM2. Bit-exact on
    every code of the first operand. (Scales as a quantizer leaves them: 0.05 and 0.07 into
    0.1 land pairs exactly on halves that no NPU rescale rounds as the reference does, and
    such an ADD/SUB stays on the CPU, see test_tensor_pair_without_exact_registers_stays_on_the_cpu.)"""
    zp = 3 if dtype == "int8" else 128
    b = ModelBuilder()
    x = b.add_input("x", (1, 16, 16, 1), dtype, _q(0.0513, zp))
    k = b.add_input("k", (1, 5), dtype, _q(0.0729, zp - 9))
    y = b.add_tensor("y", (1, 16, 16, 5), dtype, _q(0.1047 if opcode != "MUL" else 0.2, zp + 4))
    b.add_operator(opcode, [k, x] if channels_first else [x, k], [y], version=2)
    b.mark_output(y)
    model = b.build()
    compiled = cascader.compile(model)
    assert compiled.summary().cpu_operators == 0
    codes = (ALL_CODES.astype(np.int16) + (128 if dtype == "uint8" else 0)).astype(dtype)
    second = np.array([[0, 50, 100, 150, 200]], dtype=np.int16).astype(dtype) if dtype == "uint8" else \
        np.array([[-128, -40, 0, 40, 127]], dtype=dtype)
    ours = cascader.simulate(compiled, [codes, second])[0]
    assert np.array_equal(ours, ReferenceInterpreter(model).run([codes, second])[0])
