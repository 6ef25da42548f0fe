"""16x8 (int16) ADD and SUB, bit-exact on the NPU (`frontend.add_sub_rounding`, `frontend.exact_elementwise`).

The decision whether one NPU operation's registers are exact is checked against brute force:
on small proxies (windows of values around random centres, the type's ends, a clamp) where
every pair can be computed; on the full int16 range of one operand against subsets of the
other (values the scaled operand rounds one off against every partner, or every scaled value
against a few partners); and on every pair of 8-bit operands.
The lowering is checked bit for bit against TFLite's reference interpreter on 2 seeds on both
targets, for the general path (the operator zoo's case among them) and the power-of-two path,
with broadcast operands and fused activations; and its cycles against Vela's binary.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
import cascader.vela as vela
from cascader import _core
from cascader.frontend.add_sub_rounding import (exact_add_sub_scales, npu_add_sub, operand_multipliers, operand_values,
                                                power_of_two_shifts, reference_add_sub, reference_operand,
                                                registers_exact)
from cascader.frontend.quantization import add_sub_scales
from cascader.operator_zoo import operator_model
from cascader.tflite.builder import ModelBuilder
from cascader.tflite.model import Quantization

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter, random_inputs  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
INT16 = (-32768, 32767)
FM = (1, 32, 32, 16)  # 16,384 outputs per seed
ZOO_SCALES = (0.05, 0.03, 0.06)  # operator_zoo's ADD/SUB
# The one triple of 200 random ones (two int16 tensors) where Vela's operand multiplier is not
# exact and one unit more rounds every value as the reference does.
FIXABLE = (0.0014159003039821982, 0.09809114784002304, 0.08760038763284683)


def _q(scale: float) -> Quantization:
    return Quantization(scale=np.array([scale], np.float32), zero_point=np.array([0], np.int64))


def _model(opcode, scales, shapes=(FM, FM), activation="NONE", pot=False, constant=None, options=True):
    """`opcode` of two int16 operands (the second a constant when `constant` is given), its
    options table written unless `options` is False."""
    b = ModelBuilder()
    x = b.add_input("x", shapes[0], "int16", _q(scales[0]))
    if constant is None:
        y = b.add_input("y", shapes[1], "int16", _q(scales[1]))
    else:
        y = b.add_tensor("y", shapes[1], "int16", _q(scales[1]), np.asarray(constant, np.int16).reshape(shapes[1]))
    out_shape = tuple(int(max(i, j)) for i, j in zip(*shapes))
    z = b.add_tensor("z", out_shape, "int16", _q(scales[2]))
    if options:
        b.add_operator(opcode, [x, y], [z], {"fused_activation_function": activation, "pot_scale_int16": pot})
    else:
        b.add_operator(opcode, [x, y], [z], None, options_type=None)
    b.mark_output(z)
    return b.build()


def _compiled_names(model, accelerator: str = ACCELERATORS[0], seeds=(0, 1)) -> list[str]:
    """The operator's NPU operations; fails unless it runs on the NPU and matches the reference
    on random full-range inputs of `seeds`."""
    compiled = cascader.compile(model, accelerator=accelerator)
    assert compiled.summary().cpu_operators == 0, [v.reason for v in compiled.partition.verdicts if not v.npu]
    reference = ReferenceInterpreter(model)
    for seed in seeds:
        inputs = random_inputs(model, seed)
        ours, theirs = cascader.simulate(compiled, inputs)[0], reference.run(inputs)[0]
        assert np.array_equal(ours, theirs), (seed, int(np.count_nonzero(ours != theirs)))
    return [op.lowered.name for op in compiled.schedule.operations]


def _chain(names: list[str], mode: str) -> bool:
    """The general path's chain: both operands scaled (the larger-scaled one without a shift),
    the int32 sum, the output rescale."""
    return names[-3:] == [f"0:{mode}({mode.lower()})", f"0:{mode}(mul)", f"0:{mode}(shr)"] and len(names) in (5, 6)


# --- the decision against brute force ----------------------------------------------------


def _brute_force(first, second, registers, scales, subtract, clamp, bits=16) -> bool:
    f, s = np.asarray(first, np.int64)[:, None], np.asarray(second, np.int64)[None, :]
    return np.array_equal(np.clip(npu_add_sub(f, s, registers, subtract, bits), *clamp),
                          np.clip(reference_add_sub(f, s, scales, subtract, bits), *clamp))


def _proxy(draw, lo: int, hi: int) -> np.ndarray:
    """A small set of int16 operand values: a window around a random centre, the ends of the
    range and a few scattered values."""
    centre = draw(st.integers(lo, hi))
    width = draw(st.integers(20, 300))
    scattered = draw(st.lists(st.integers(lo, hi), max_size=20))
    window = np.arange(max(lo, centre - width), min(hi, centre + width) + 1)
    return np.unique(np.concatenate([window, np.arange(lo, lo + 40), np.arange(hi - 39, hi + 1), scattered]))


scales = st.floats(1e-4, 0.1).map(lambda s: float(np.float32(s)))


@st.composite
def _cases(draw, bits: int):
    triple = (draw(scales), draw(scales), draw(scales))
    registers = add_sub_scales(*triple, bits)
    # Vela's multiplier, or one a few units off (more register sets that are not exact).
    multiplier, shift = registers["opa_scale"]
    registers = dict(registers, opa_scale=(multiplier + draw(st.sampled_from([0, 0, 1, -1, 3, -7, 20])), shift))
    lo, hi = (-32768, 32767) if bits == 16 else (-128 - 127, 127 + 128)
    clamp = draw(st.sampled_from([INT16 if bits == 16 else (-255, 255), (0, hi), (-100, 6000), (-3, 3)]))
    return triple, registers, draw(st.booleans()), clamp, lo, hi


@settings(max_examples=60, deadline=None)
@given(case=_cases(16), data=st.data())
def test_decision_matches_brute_force_on_small_proxies(case, data):
    """Any value sets may be asked: the procedure's answer on small ones is the brute force's."""
    triple, registers, subtract, clamp, lo, hi = case
    if operand_multipliers(triple, 16)[2][1] > 0:
        return  # outside the rescale range the kernel defines (the lowering refuses it first)
    first, second = _proxy(data.draw, lo, hi), _proxy(data.draw, lo, hi)
    assert registers_exact(first, second, registers, triple, subtract, clamp, 16) == \
        _brute_force(first, second, registers, triple, subtract, clamp)


@settings(max_examples=40, deadline=None)
@given(case=_cases(8), first_zp=st.integers(-128, 127), second=st.sampled_from(["tensor", "constant"]), data=st.data())
def test_decision_matches_brute_force_on_every_8bit_pair(case, first_zp, second, data):
    """The same procedure decides 8-bit operators, on all their pairs."""
    triple, registers, subtract, clamp, _, _ = case
    if operand_multipliers(triple, 8)[2][1] > 0:
        return
    first = np.arange(-128, 128) - first_zp
    values = np.arange(-128, 128) if second == "tensor" else data.draw(st.lists(st.integers(-128, 127), min_size=1,
                                                                                 max_size=4))
    assert registers_exact(first, values, registers, triple, subtract, clamp, 8) == \
        _brute_force(first, values, registers, triple, subtract, clamp, 8)


@settings(max_examples=8, deadline=None)
@given(triple=st.tuples(scales, scales, scales), subtract=st.booleans(), seed=st.integers(0, 2**16),
       clamp=st.sampled_from([INT16, (0, 32767), (-2000, 2000)]))
def test_decision_matches_brute_force_on_the_full_range(triple, subtract, seed, clamp):
    """Every value of the other operand (2^16) against a subset of the scaled operand: 48 of the
    values Vela's registers round one off, and 16 they round right. Where the full range is not
    exact the subsets of differing values show it as the procedure says, value by value."""
    if operand_multipliers(triple, 16)[2][1] > 0:
        return
    registers = add_sub_scales(*triple, 16)
    scaled = 0 if registers["ifm_scale_mode"] == 1 else 1
    everything = np.arange(-32768, 32768, dtype=np.int64)
    theirs = reference_operand(everything, operand_multipliers(triple, 16)[scaled], 16)
    differing = everything[_core.scale_accumulator(everything, *registers["opa_scale"], 0) != theirs]
    rng = np.random.default_rng(seed)
    subset = np.unique(np.concatenate([rng.choice(differing, min(48, differing.size), replace=False),
                                       rng.choice(everything, 16, replace=False)]))
    first, second = (subset, everything) if scaled == 0 else (everything, subset)
    assert registers_exact(first, second, registers, triple, subtract, clamp, 16) == \
        _brute_force(first, second, registers, triple, subtract, clamp)


@settings(max_examples=8, deadline=None)
@given(triple=st.tuples(scales, scales, scales), subtract=st.booleans(),
       plain=st.lists(st.integers(-32768, 32767), min_size=1, max_size=32),
       clamp=st.sampled_from([INT16, (0, 32767), (-2000, 2000)]))
def test_decision_matches_brute_force_on_every_scaled_value(triple, subtract, plain, clamp):
    """Every value of the scaled operand (each one it rounds one off among them) against a few
    values of the other: both answers occur, and they are the brute force's."""
    if operand_multipliers(triple, 16)[2][1] > 0:
        return
    registers = add_sub_scales(*triple, 16)
    everything = np.arange(-32768, 32768, dtype=np.int64)
    first, second = (everything, plain) if registers["ifm_scale_mode"] == 1 else (plain, everything)
    assert registers_exact(first, second, registers, triple, subtract, clamp, 16) == \
        _brute_force(first, second, registers, triple, subtract, clamp)


def test_the_zoo_case_is_not_exact_with_vela_registers_nor_any_searched():
    """operator_zoo's 0.05 + 0.03 into 0.06: Vela's registers round 3 of its 2,048 outputs one
    off (as Vela's binary does); no operand multiplier is exact on every int16 pair."""
    tensor = operand_values("int16", 0)
    for subtract in (False, True):
        assert not registers_exact(tensor, tensor, add_sub_scales(*ZOO_SCALES, 16), ZOO_SCALES, subtract, INT16, 16)
        assert exact_add_sub_scales(ZOO_SCALES, tensor, tensor, subtract, INT16, 16) is None


def test_a_searched_operand_multiplier_makes_one_operation_exact():
    tensor = operand_values("int16", 0)
    vela_registers = add_sub_scales(*FIXABLE, 16)
    registers = exact_add_sub_scales(FIXABLE, tensor, tensor, True, INT16, 16)
    assert registers is not None and registers["opa_scale"][0] == vela_registers["opa_scale"][0] + 1
    assert _compiled_names(_model("SUB", FIXABLE)) == ["0:SUB"]


def test_the_decision_is_fast():
    """Two full-range int16 tensors (2^32 pairs): milliseconds, not the minutes brute force takes
    (measured 10-25 ms per triple; the bound leaves room for a loaded machine)."""
    tensor = operand_values("int16", 0)
    exact_add_sub_scales.cache_clear()
    start = time.perf_counter()
    for out_scale in (0.06, 0.07, 0.08, 0.09):
        exact_add_sub_scales((0.05, 0.03, out_scale), tensor, tensor, False, INT16, 16)
    assert (time.perf_counter() - start) / 4 < 0.5


# --- the lowering, bit-exact -------------------------------------------------------------


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("opcode", ["ADD", "SUB"])
def test_the_operator_zoo_case(accelerator, opcode):
    """The zoo's model (3 of 2,048 ADD outputs and 1 of 2,048 SUB outputs one off with Vela's
    registers) runs as the chain, bit-exact."""
    names = _compiled_names(operator_model(opcode, "int16"), accelerator)
    assert _chain(names, opcode), names


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("opcode, triple, shapes, activation", [
    ("ADD", (0.05, 0.03, 0.06), ((1, 24, 20, 16), (1, 1, 1, 16)), "RELU"),
    ("SUB", (0.05, 0.03, 0.06), ((1, 1, 1, 16), (1, 24, 20, 16)), "RELU6"),
    ("SUB", (0.001, 0.003, 0.002), ((1, 24, 20, 16), (1, 24, 20, 1)), "RELU_N1_TO_1"),
    ("ADD", (3e-4, 2e-4, 4e-4), (FM, FM), "NONE"),
    ("SUB", (2.1e-4, 3e-4, 1e-4), (FM, FM), "RELU"),
])
def test_the_chain_is_bit_exact(accelerator, opcode, triple, shapes, activation):
    """Broadcast first or second operand (SUB keeps its order), a channel-broadcast operand,
    fused activations, an output scale finer than the inputs'."""
    names = _compiled_names(_model(opcode, triple, shapes, activation), accelerator)
    assert _chain(names, opcode), names


def grid_inputs() -> list[np.ndarray]:
    """Two (1, 256, 256, 1) operands that pair 256 values spread over the int16 range (the
    extremes among them) in every combination."""
    values = np.unique(np.concatenate([np.linspace(-32768, 32767, 250).astype(np.int16),
                                       np.array([-32768, -32767, -1, 0, 1, 32767], np.int16)]))
    values = np.resize(values, 256).astype(np.int16)
    rows, cols = np.meshgrid(values, values, indexing="ij")
    return [rows.reshape(1, 256, 256, 1), cols.reshape(1, 256, 256, 1)]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_the_chain_is_exact_on_every_pair_of_a_grid(accelerator):
    """256 x 256 operand values spread over the int16 range (all pairs, the extremes among
    them), ADD and SUB of the zoo's scales."""
    inputs = grid_inputs()
    for opcode in ("ADD", "SUB"):
        model = _model(opcode, ZOO_SCALES, ((1, 256, 256, 1), (1, 256, 256, 1)))
        compiled = cascader.compile(model, accelerator=accelerator)
        ours = cascader.simulate(compiled, inputs)[0]
        assert np.array_equal(ours, ReferenceInterpreter(model).run(inputs)[0])


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("opcode, triple", [("ADD", (0.05, 0.05, 0.06)), ("SUB", (0.05, 0.025, 0.06)),
                                            ("ADD", (0.004, 0.001, 0.01))])
def test_one_operation_where_vela_registers_are_exact(accelerator, opcode, triple):
    """Equal scales and a power-of-two ratio: the scaled operand rounds nothing, Vela's
    registers are exact, one operation."""
    assert _compiled_names(_model(opcode, triple), accelerator) == [f"0:{opcode}"]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_constant_operands(accelerator):
    """A single-valued constant (the chain: every value of the tensor meets an output step) and a
    per-channel constant (Vela's registers exact against its 16 values)."""
    rng = np.random.default_rng(5)
    scalar = _model("ADD", (0.001, 0.003, 0.002), (FM, (1, 1, 1, 1)), constant=[1234])
    assert _chain(_compiled_names(scalar, accelerator), "ADD")
    channels = _model("SUB", (0.001, 0.003, 0.002), (FM, (1, 1, 1, 16)), constant=rng.integers(-32768, 32768, 16))
    names = _compiled_names(channels, accelerator)
    values = [operand_values("int16", 0), operand_values("int16", 0, channels.main.tensors[1].data)]
    assert (names == ["0:SUB"]) == (exact_add_sub_scales((0.001, 0.003, 0.002), *values, True, INT16, 16) is not None)


# --- the power-of-two path ----------------------------------------------------------------


def test_which_path_the_kernel_takes():
    """The power-of-two path needs the option (the schema's default) and three scales within
    1e-3 (in log2) of powers of two (TFLite's CheckedLog2)."""
    assert power_of_two_shifts((2.0**-10, 2.0**-12, 2.0**-10), True) == (0, -2)
    assert power_of_two_shifts((2.0**-10, 2.0**-12, 2.0**-10), False) is None
    assert power_of_two_shifts((2.0**-10 * 1.0005, 2.0**-12, 2.0**-10), True) == (0, -2)  # log2 off by 7e-4
    assert power_of_two_shifts((2.0**-10 * 1.001, 2.0**-12, 2.0**-10), True) is None
    assert power_of_two_shifts(ZOO_SCALES, True) is None


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("opcode, logs, shapes, activation", [
    ("ADD", (-10, -12, -10), (FM, FM), "NONE"),
    ("ADD", (-13, -10, -10), (FM, FM), "RELU"),
    ("SUB", (-10, -11, -10), (FM, (1, 1, 1, 16)), "NONE"),
    ("SUB", (-14, -10, -10), ((1, 1, 1, 16), FM), "RELU_N1_TO_1"),
    ("ADD", (-10, -25, -10), (FM, FM), "NONE"),
])
def test_the_power_of_two_path_is_bit_exact(accelerator, opcode, logs, shapes, activation):
    """Vela's registers round the sum where the kernel rounds the finer operand (7,116 of 65,536
    pairs off at 2^-10 + 2^-12): a rounding SHR of that operand, then the saturating sum."""
    model = _model(opcode, tuple(2.0**e for e in logs), shapes, activation, pot=True)
    assert _compiled_names(model, accelerator) == [f"0:{opcode}(shr)", f"0:{opcode}({opcode.lower()})"]


@pytest.mark.parametrize("opcode", ["ADD", "SUB"])
def test_without_an_options_table_the_kernel_takes_the_general_path(opcode):
    """LiteRT zeroes the parameters of an operator without options (the option is false): power-
    of-two scales then round as any others (479 of 4,096 ADD outputs differ from the other path)."""
    model = _model(opcode, (2.0**-10, 2.0**-12, 2.0**-10), options=False)
    assert _compiled_names(model) == [f"0:{opcode}"]  # a power-of-two ratio: Vela's registers are exact


def test_the_power_of_two_add_broadcasts_as_its_sub_does():
    """LiteRT's power-of-two ADD has no broadcast (its process aborts); the NPU computes what its
    SUB computes with a broadcast: the finer operand divided, then the saturating sum."""
    model = _model("ADD", (2.0**-10, 2.0**-12, 2.0**-10), (FM, (1, 1, 1, 16)), pot=True)
    inputs = random_inputs(model, 0)
    ours = cascader.simulate(cascader.compile(model), inputs)[0].astype(np.int64)
    x, y = (a.astype(np.int64) for a in inputs)
    divided = (y >> 2) + ((y & 3) > 1 + (y < 0))  # RoundingDivideByPOT(y, 2)
    assert np.array_equal(ours, np.clip(x + divided, *INT16))


@pytest.mark.parametrize("logs, reason", [
    ((-10, -12, -11), "refuses these"),  # neither input at the output's scale
    ((-9, -10, -10), "refuses these"),  # an input coarser than the output
    ((-10, -26, -10), "returns the sign"),  # RoundingDivideByPOT on int16 by 16
])
def test_power_of_two_scales_the_kernel_refuses_or_mangles_stay_on_the_cpu(logs, reason):
    compiled = cascader.compile(_model("ADD", tuple(2.0**e for e in logs), pot=True))
    (verdict,) = compiled.partition.verdicts
    assert not verdict.npu and reason in verdict.reason


def test_rescale_outside_the_references_range_stays_on_the_cpu():
    compiled = cascader.compile(_model("SUB", (0.02, 0.01, 1e-9)))
    (verdict,) = compiled.partition.verdicts
    assert not verdict.npu and "outside the range below 1" in verdict.reason


# --- cycles -------------------------------------------------------------------------------


def test_cycles_against_vela():
    """Both binaries costed by the same estimator. One operation costs what Vela's does; the
    exact chains cost more (measured: the general chain 4.5x Vela's on U55, 2.9x on U65; the
    power-of-two pair 1.33x and 1.0x), the price of the reference's roundings."""
    try:
        vela.executable()
    except vela.VelaNotInstalled:
        pytest.skip("Vela is not installed")
    models = {"chain": (operator_model("ADD", "int16"), 5.0), "single": (_model("ADD", (0.05, 0.05, 0.06)), 1.0),
              "power_of_two": (_model("SUB", (2.0**-10, 2.0**-12, 2.0**-10), pot=True), 1.4)}
    for accelerator in ACCELERATORS:
        for name, (model, bound) in models.items():
            ours = cascader.compile(model, accelerator=accelerator).estimate().total_cycles
            theirs = vela.compile(model, accelerator).estimate().total_cycles
            assert ours <= theirs * bound, (accelerator, name, ours, theirs)
