"""PRELU on the NPU (`lower_prelu`): each form on its own, bit-exact against the reference
interpreter on 2 seeds on U55-128, U65-256 and U85-128/256/512, at the quantization edges
(alpha negative, positive, mixed, zero, above 1; one quantization in and out or two; alpha per
channel or whole; int8, uint8 and int16 with an int8 alpha), and no slower than Vela's on the
U85:

- select: MAX (every alpha at most 1) or MIN (every alpha at least 1) of x rescaled and
  MUL(x, alpha), x itself where one quantization is in and out (2 or 3 operations);
- sign select (U55/U65, 8-bit, alphas on both sides of 1): s MAX(s x rescaled, s x alpha)
  with a per-channel sign s, 16-bit in between (4 operations, no ADD);
- the sum of the clamped branches otherwise: the U85's alphas on both sides of 1, int16's, and
  quantizations whose rounding no selection follows (3 operations for a one-signed alpha, else 4).
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader import zoo
from cascader.frontend.lower_prelu import _Branches
from cascader.operator_zoo import operator_model
from cascader.tflite.builder import ModelBuilder, quantization
from cascader.emit.program import REGION_SHRAM
from cascader.tflite.ethos_u import REGION_FLASH
from conftest import cycles_against_vela

from test_u85_lowering import _bit_exact_on_the_npu

pytest.importorskip("ai_edge_litert")
from cascader.bench.simulate import validate  # noqa: E402

TARGETS = ["ethos-u55-128", "ethos-u65-256", "ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]
ALPHA_SCALE = 1 / 64  # alpha code k is k / 64: 64 is exactly 1
# palm_detection's PRELU 18: x (0.0943, 30), out (0.3046, 97), alpha scale 0.0643. Slopes 17,
# 21 and 23 (alpha 1.09 to 1.48) follow neither sign's selection: the NPU rounds s1 (-d) to one
# off -(s1 d) on halves.
PALM_18 = dict(qx=(0.09433858096599579, 30), qo=(0.3045973479747772, 97), alpha_scale=0.06428395956754684)


def _prelu(alphas, dtype: str = "int8", shape=(1, 6, 5, 4), same: bool = True, alpha_shape=None,
           qx=None, qo=None, alpha_scale: float = ALPHA_SCALE) -> cascader.Model:
    """x -> PRELU(x, alpha codes `alphas` in units of `alpha_scale`) -> out; one quantization in
    and out if `same`, else x (0.05, zp) and out (0.07, zp - 5) unless given."""
    b = ModelBuilder()
    zp = {"int8": 3, "uint8": 131, "int16": 0}[dtype]
    qx = quantization(*(qx or (0.05, zp)))
    qo = qx if same else quantization(*(qo or (0.07, 0 if dtype == "int16" else zp - 5)))
    x = b.add_input("x", shape, dtype, qx)
    y = b.add_tensor("y", shape, dtype, qo)
    adtype = "int8" if dtype == "int16" else dtype
    azp = 128 if adtype == "uint8" else 0
    codes = np.asarray(alphas, np.int64).reshape(alpha_shape or (1, 1, len(alphas))) + azp
    a = b.add_constant("alpha", codes.astype({"int8": np.int8, "uint8": np.uint8}[adtype]), adtype,
                       quantization(alpha_scale, azp))
    b.add_operator("PRELU", [x, a], [y], {})
    b.mark_output(y)
    return b.build()


def _modes(c: cascader.CompiledModel) -> list[str]:
    """The operations' modes, but the copy widening an int16 PRELU's alpha to int16."""
    return [s.lowered.registers.get("sub_op") for s in c.schedule.operations if "alpha to int16" not in s.lowered.name]


SHAPE = (1, 6, 5, 4)
U85 = ("ethos-u85",)
ANY = ("ethos-u55", "ethos-u65", "ethos-u85")
SIGN_SELECT, SUM_MIXED = ["MUL", "MUL", "MAX", "MUL"], ["MUL", "MIN", "MUL", "ADD"]
# case: (model arguments, {target families: modes})
FORMS = {
    # select, one quantization: x itself is the positive branch
    "max_mixed_signs": (([-30, 64, 0, 17],), {ANY: ["MUL", "MAX"]}),
    "max_alpha_zero": (([0, 0, 0, 0],), {ANY: ["MUL", "MAX"]}),
    "max_negative": (([-128, -1, -64, -7],), {ANY: ["MUL", "MAX"]}),
    "max_uint8": (([-20, 5, 64, 0], "uint8"), {ANY: ["MUL", "MAX"]}),
    "max_int16": (([-20, 5, 64, -128], "int16"), {ANY: ["MUL", "MAX"]}),
    "max_scalar_alpha": (([-9], "int8", SHAPE, True, (1, 1, 1)), {ANY: ["MUL", "MAX"]}),
    "min_above_one": (([64, 65, 127, 90],), {ANY: ["MUL", "MIN"]}),
    "min_uint8": (([127, 64, 100, 70], "uint8"), {ANY: ["MUL", "MIN"]}),
    # select, two quantizations: x rescaled (a MUL by 1; int16's the pool) against the product
    "max_requantized": (([-30, 64, 0, 17], "int8", SHAPE, False), {ANY: ["MUL", "MUL", "MAX"]}),
    "max_requantized_uint8": (([-30, 60, 0, 17], "uint8", SHAPE, False), {ANY: ["MUL", "MUL", "MAX"]}),
    "max_requantized_int16": (([-30, 64, 0, 17], "int16", SHAPE, False), {ANY: ["AVERAGE", "MUL", "MAX"]}),
    "min_requantized": (([70, 127, 100, 90], "int8", SHAPE, False), {ANY: ["MUL", "MUL", "MIN"]}),
    "min_requantized_scalar": (([100], "int8", SHAPE, False, (1, 1, 1)), {ANY: ["MUL", "MUL", "MIN"]}),
    # alphas on both sides of 1: sign select on U55/U65 (8-bit), the sum on the U85
    "both_sides_of_one": (([-30, 100, 0, 17],), {("ethos-u55", "ethos-u65"): SIGN_SELECT, U85: SUM_MIXED}),
    "both_sides_requantized": (([-30, 100, 127, -128], "int8", SHAPE, False),
                               {("ethos-u55", "ethos-u65"): SIGN_SELECT, U85: SUM_MIXED}),
    "both_sides_uint8": (([-30, 100, 0, 127], "uint8", SHAPE, False),
                         {("ethos-u55", "ethos-u65"): SIGN_SELECT, U85: SUM_MIXED}),
    "both_sides_positive": (([10, 100, 64, 3],),  # one-signed: the U85's clamped MUL, 3 operations
                            {("ethos-u55", "ethos-u65"): SIGN_SELECT, U85: ["MUL", "MUL", "ADD"]}),
    "both_sides_int16": (([-30, 100, 0, 17], "int16", SHAPE, False), {ANY: ["AVERAGE", "MIN", "MUL", "ADD"]}),
    # rounding no selection follows: the sum
    "palm_18_rounding": (([-19, 17, 21, 23, 0, 127], "int8", (1, 6, 5, 6), False, None, *PALM_18.values()),
                         {ANY: SUM_MIXED}),
}


def _expected(case: str, accelerator: str) -> list[str]:
    return next(modes for families, modes in FORMS[case][1].items() if accelerator[:9] in families)


@pytest.mark.parametrize("accelerator", TARGETS)
@pytest.mark.parametrize("case", sorted(FORMS))
def test_form_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(_prelu(*FORMS[case][0]), accelerator, tmp_path)
    assert _modes(c) == _expected(case, accelerator)


@pytest.mark.parametrize("accelerator", TARGETS)
@pytest.mark.parametrize("alpha_range", [(-0.5, 0.5), (0.1, 0.9), (-2.0, -0.5), (1.5, 3.0), (0.0, 0.3), (-0.5, 2.0)])
def test_zoo_prelu_bit_exact(alpha_range, accelerator: str, tmp_path) -> None:
    _bit_exact_on_the_npu(zoo.prelu((1, 5, 7, 20), alpha_range=alpha_range, seed=3), accelerator, tmp_path)


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_operator_zoo_prelu(dtype: str, accelerator: str, tmp_path) -> None:
    _bit_exact_on_the_npu(operator_model("PRELU", dtype), accelerator, tmp_path)  # the U85's: test_u85_prelu


def test_selection_proofs() -> None:
    """The compile-time checks: a MAX where every alpha is at most 1, a MIN where every one is
    at least 1, neither across 1; the sign select's signs +1 below 1 and -1 above, and none
    where a slope's rounding follows neither (palm's PRELU 18)."""
    class View:
        def __init__(self, scale, zero_point, dtype="int8"):
            self.scale, self.zero_point, self.dtype = scale, zero_point, dtype

    b = _Branches.of(View(0.05, 3), View(0.07, -2), View(ALPHA_SCALE, 0))
    assert b.select(np.array([-30, 0, 17, 64])) == "MAX"
    assert b.select(np.array([100, 127])) == "MIN"
    assert b.select(np.array([-30, 100])) is None
    assert b.signs(np.array([[[-30, 100, 0]]])).tolist() == [[[1, -1, 1]]]
    palm = _Branches.of(View(*PALM_18["qx"]), View(*PALM_18["qo"]), View(PALM_18["alpha_scale"], 0))
    assert palm.signs(np.array([-19, 0, 125])) is not None
    assert palm.signs(np.array([-19, 17])) is None


@pytest.mark.parametrize("accelerator", ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"])
@pytest.mark.parametrize("case", ["max_requantized", "min_requantized", "min_above_one", "both_sides_requantized"])
def test_no_slower_than_velas(case: str, accelerator: str) -> None:
    """16 channels (the case's alphas repeated): with 4, Vela runs its unbroadcast MUL by 1 on
    the map reshaped to 8 x 8 x 16, which reads an input in DRAM 8 times faster than ours."""
    alphas, *rest = FORMS[case][0]
    model = _prelu((list(alphas) * 16)[:16], rest[0] if rest else "int8", (1, 16, 16, 16), *rest[2:])
    ours, theirs = cycles_against_vela(model, accelerator)
    assert ours <= 1.02 * theirs, (ours, theirs)


@pytest.mark.parametrize("alpha", [0.2, -0.3, 1.7, -2.0, 0.0])
@pytest.mark.parametrize("same_quantization", [True, False])
def test_int16_leaky_relu_bit_exact(tmp_path, alpha, same_quantization):
    from cascader.zoo import _single_op_net

    model = _single_op_net("leaky_relu", [(1, 8, 8, 16)], 1, "int16", (-5.0, 5.0), alpha=alpha,
                           same_quantization=same_quantization).build()
    path = tmp_path / "leaky_relu.tflite"
    cascader.save_model(model, path)
    compiled = cascader.compile(path)
    # The NPU's LRELU where it applies (equal quantizations, alpha >= 0), else the sign select.
    expected = 1 if same_quantization and alpha >= 0 else 3
    assert (compiled.summary().npu_operations, compiled.summary().cpu_operators) == (expected, 0)
    assert validate(path, compiled.model, (0, 1, 2)).bit_exact


def test_broadcast_alpha_is_read_from_a_copy_in_sram(tmp_path):
    """PRELU's per-channel alpha is a constant the MUL broadcasts over H and W. Read from flash
    it would cost more than the MUL itself; a DMA copies it into the arena first, and the
    binary costs what the schedule predicted."""
    path = tmp_path / "prelu.tflite"
    cascader.save_model(zoo.prelu((1, 32, 32, 16), (-0.5, 0.5), seed=3), path)
    compiled = cascader.compile(path)
    records = [r for ops in compiled.operations for r in ops]
    # (not the MUL by the constant 1 rescaling x, a one-element operand read where it lies)
    muls = [r for r in records if r.get("sub_op") == "MUL" and r["ifm2"]["shape"] != (1, 1, 1)]
    assert muls and all(r["ifm2"]["region"] != REGION_FLASH for r in muls)
    copies = [r for r in records if r["kind"] == "dma" and r["src"]["region"] == REGION_FLASH
              and r["dst"]["region"] not in (REGION_FLASH, REGION_SHRAM)]
    assert len(copies) >= len(muls)
    assert compiled.estimate().total_cycles == pytest.approx(compiled.schedule.total_cycles, rel=0.01)
    assert validate(path, compiled.model, (0, 1)).bit_exact
