"""Ethos-U85 (#43): int16 ADD and SUB with TFLite's scaling, one U85 operation each, compiled
for U85-128/256/512 and simulated bit-exact against the reference interpreter on 2 seeds,
wholly on the NPU.

The U85 scales each operand itself (IFM_SCALE, IFM2_SCALE) with TFLite's double rounding at the
int16 headroom (DBL_RND 15) and the sum with OFM_SCALE, which is the reference's arithmetic for
every pair: so the lowering, told the target scales operands (`LoweringContext.scaled_operands`),
keeps the operator one operation where the U55 needs a chain (test_lower_int16_add_sub), and
the emitter writes TFLite's multipliers (emit/ethos_u85 `_add_sub_scales`), as Vela's U85
binaries do. Covered: the operator zoo's scales (a chain on the U55), broadcast first or second
operand (a SUB with its operands reversed swaps them and their scales), a channel broadcast,
fused activations, an output finer than the inputs, single-valued and per-channel constants,
every pair of a grid over the int16 range, and the power-of-two path (TFLite's other kernel,
still the U55's SHR and unscaled sum). 8-bit ADD/SUBs that no U55 register set rounds as the
reference are one operation on the U85 too.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.operator_zoo import operator_model

from test_lower_elementwise import ALL_CODES, _binary
from test_lower_int16_add_sub import FIXABLE, FM, ZOO_SCALES, _model, grid_inputs
from test_u85_lowering import SIZES, _bit_exact_on_the_npu

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter  # noqa: E402

GENERAL = {
    "zoo_add": lambda: operator_model("ADD", "int16"),
    "zoo_sub": lambda: operator_model("SUB", "int16"),
    "fixable_add": lambda: _model("ADD", FIXABLE),
    "equal_scales_add": lambda: _model("ADD", (0.05, 0.05, 0.06)),
    "add_broadcast_second_relu": lambda: _model("ADD", ZOO_SCALES, ((1, 24, 20, 16), (1, 1, 1, 16)), "RELU"),
    "sub_broadcast_first_relu6": lambda: _model("SUB", ZOO_SCALES, ((1, 1, 1, 16), (1, 24, 20, 16)), "RELU6"),
    "sub_broadcast_channels": lambda: _model("SUB", (0.001, 0.003, 0.002), ((1, 24, 20, 16), (1, 24, 20, 1)),
                                             "RELU_N1_TO_1"),
    "add_finer_output": lambda: _model("ADD", (3e-4, 2e-4, 4e-4), (FM, FM)),
    "sub_finer_output_relu": lambda: _model("SUB", (2.1e-4, 3e-4, 1e-4), (FM, FM), "RELU"),
    "add_scalar_constant": lambda: _model("ADD", (0.001, 0.003, 0.002), (FM, (1, 1, 1, 1)), constant=[1234]),
    "sub_channel_constant": lambda: _model("SUB", (0.001, 0.003, 0.002), (FM, (1, 1, 1, 16)),
                                           constant=np.random.default_rng(5).integers(-32768, 32768, 16)),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(GENERAL))
def test_one_operation_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(GENERAL[case](), accelerator, tmp_path)
    (op,) = [s.lowered for s in c.schedule.operations]
    assert op.registers["sub_op"] in ("ADD", "SUB") and "reference_scales" in op.registers


@pytest.mark.parametrize("accelerator", SIZES)
def test_every_pair_of_a_grid(accelerator: str) -> None:
    """256 x 256 operand values spread over the int16 range (all pairs, the extremes among
    them), ADD and SUB of the zoo's scales (3 and 1 of 2,048 outputs one off with the U55's
    one-operation registers)."""
    inputs = grid_inputs()
    for opcode in ("ADD", "SUB"):
        model = _model(opcode, ZOO_SCALES, ((1, 256, 256, 1), (1, 256, 256, 1)))
        compiled = cascader.compile(model, accelerator=accelerator)
        assert len(compiled.schedule.operations) == 1
        assert np.array_equal(cascader.simulate(compiled, inputs)[0], ReferenceInterpreter(model).run(inputs)[0])


POWER_OF_TWO = {
    "add_-12": ("ADD", (-10, -12, -10), (FM, FM), "NONE"),
    "add_-13_relu": ("ADD", (-13, -10, -10), (FM, FM), "RELU"),
    "sub_-11_broadcast": ("SUB", (-10, -11, -10), (FM, (1, 1, 1, 16)), "NONE"),
    "sub_-14_broadcast_first": ("SUB", (-14, -10, -10), ((1, 1, 1, 16), FM), "RELU_N1_TO_1"),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(POWER_OF_TWO))
def test_power_of_two_path_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    opcode, logs, shapes, activation = POWER_OF_TWO[case]
    model = _model(opcode, tuple(2.0**e for e in logs), shapes, activation, pot=True)
    c = _bit_exact_on_the_npu(model, accelerator, tmp_path)
    assert [s.lowered.registers["sub_op"] for s in c.schedule.operations] == ["SHR", opcode]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("opcode", ["ADD", "SUB"])
@pytest.mark.parametrize("constant_first", [False, True])
def test_eight_bit_without_exact_u55_registers(opcode: str, constant_first: bool, accelerator: str) -> None:
    """The same holds for 8-bit operands: x at 0.05 and a constant -77 at 0.125 into 0.05,
    which no U55 operand multiplier rounds as the reference (a table lookup there,
    test_lower_elementwise), is one U85 operation, exact on all 256 codes (a reversed SUB among them)."""
    model = _binary(opcode, (0.05, 0), (-77, 0.125, 0), (0.05, 0), "NONE", constant_first)
    compiled = cascader.compile(model, accelerator=accelerator)
    assert [s.lowered.registers.get("sub_op") for s in compiled.schedule.operations] == [opcode]
    ours = cascader.simulate(compiled, [ALL_CODES])[0]
    assert np.array_equal(ours, ReferenceInterpreter(model).run([ALL_CODES])[0])


def test_the_u55_keeps_its_chain() -> None:
    """The zoo's ADD stays the U55's chain (its one-operation registers are off by one there)."""
    model = operator_model("ADD", "int16")
    assert len(cascader.compile(model, accelerator="ethos-u55-128").schedule.operations) > 1
    assert len(cascader.compile(model, accelerator="ethos-u85-256").schedule.operations) == 1
