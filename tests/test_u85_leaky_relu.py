"""LEAKY_RELU on the Ethos-U85 (#43, `lower_prelu.lower_leaky_relu_int16`): int16 with alpha >= 0
is the U85's one elementwise LRELU, which rescales its operand by IFM_SCALE (the identity
multiplier s_in / s_out) at or above zero and by IFM2_SCALE (alpha s_in / s_out) below, any
quantizations (arch/ethos_u85/elementwise.hpp); a negative alpha keeps PRELU's three
operations; 8-bit LEAKY_RELU stays a table.

The simulator's LRELU is proven on Vela 5.2's own U85 binaries (its int16 ones are one LRELU
each) against the reference interpreter, on 2 seeds on U85-128/256/512 and on every int16 code;
ours are bit-exact on every int16 (or int8) code for quantizations from 2 seeds, a saturating
one and alphas at the form's edges (0, below and above 1), and cost no more than Vela's."""

from __future__ import annotations

import math

import numpy as np
import pytest

import cascader
from cascader import save_model, vela, zoo
from cascader.operator_zoo import operator_model
from cascader.reference import ReferenceInterpreter
from cascader.sim import simulate
from cascader.sim.simulate import decode
from cascader.tflite.builder import ModelBuilder, quantization
from conftest import cycles_against_vela

pytest.importorskip("ai_edge_litert")

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]
SEEDS = (0, 1)
ALL_CODES = {"int16": (1, 257, 256), "int8": (1, 4, 5, 13)}  # room for every code of the type


def _activation_cases() -> dict:
    acts = dict(zoo.activation_op_cases())
    return {k: acts[k] for k in ("leaky_relu_int16", "leaky_relu_int16_alpha1.5", "leaky_relu_int16_rescaled")}


VELA_CASES = {"zoo_int16": lambda: operator_model("LEAKY_RELU", "int16"),
              "zoo_int8": lambda: operator_model("LEAKY_RELU", "int8"),
              **{k: (lambda m=m: m) for k, m in _activation_cases().items()}}


def _leaky_relu(alpha: float, q_in, q_out, dtype: str = "int16") -> cascader.Model:
    shape = ALL_CODES[dtype]
    b = ModelBuilder()
    x = b.add_input("x", shape, dtype, q_in)
    y = b.add_tensor("y", shape, dtype, q_out)
    b.add_operator("LEAKY_RELU", [x], [y], {"alpha": alpha})
    b.mark_output(y)
    return b.build()


def _every_code(dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    codes = np.arange(info.min, info.max + 1)
    shape = ALL_CODES[dtype]
    assert math.prod(shape) >= codes.size
    return np.resize(codes, math.prod(shape)).astype(dtype).reshape(shape)


def _quantizations(case: str, dtype: str):
    """Random scales from a seed (zero points 0 for int16, as TFLite requires), or a wide input
    range into a narrow output one, which saturates both branches."""
    zp = dtype == "int8"
    if case == "saturating":
        return quantization(0.25, 10 * zp), quantization(1e-3, 5 * zp)
    rng = np.random.default_rng(SEEDS[int(case[-1])])

    def one():
        return quantization(float(np.exp(rng.uniform(math.log(2e-4), math.log(0.2)))),
                            int(rng.integers(-128, 128)) * zp)

    return one(), one()


def _differences(model: cascader.Model, binary: cascader.Model, dtype: str) -> str | None:
    codes = _every_code(dtype)
    expected = ReferenceInterpreter(model).run([codes])[0]
    got = simulate(binary, [codes])[0]
    bad = np.flatnonzero(got != expected)
    if bad.size == 0:
        return None
    return (f"{bad.size} codes differ: inputs {codes.ravel()[bad[:6]]}, NPU {got.ravel()[bad[:6]]}, "
            f"reference {expected.ravel()[bad[:6]]}")


def _modes(c: cascader.CompiledModel) -> list[str]:
    return [s.lowered.registers.get("sub_op") for s in c.schedule.operations]


def _vela_modes(binary) -> list[str]:
    return [r.get("sub_op") for call in decode(binary.model) for r in call.operations if r["kind"] != "dma"]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(VELA_CASES))
def test_velas_u85_binaries_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    """Vela's binaries simulate bit-exact on 2 seeds; its int16 ones are one LRELU, so this is
    the simulator's LRELU against the reference (rescaled, alpha above 1 and below)."""
    from cascader.bench.simulate import validate_with_vela
    from cascader.vela import VelaConfig

    pytest.importorskip("ethosu.vela")
    model = VELA_CASES[case]()
    path = tmp_path / f"{case}.tflite"
    path.write_bytes(save_model(model))
    result = validate_with_vela(path, VelaConfig(accelerator), seeds=SEEDS)
    assert result.bit_exact, (result.error, result.details)
    if "int16" in case:
        assert _vela_modes(vela.compile(model, accelerator)) == ["LRELU"]


@pytest.mark.parametrize("alpha, same", [(0.2, True), (1.5, True), (0.2, False), (0.7, False)])
def test_velas_lrelu_on_every_int16_code(alpha: float, same: bool) -> None:
    """Random inputs meet few of the rounding ties of the two rescales: every code instead."""
    pytest.importorskip("ethosu.vela")
    q_in = quantization(0.05, 0)
    model = _leaky_relu(alpha, q_in, q_in if same else quantization(0.0371, 0))
    theirs = vela.compile(model, "ethos-u85-256")
    assert _vela_modes(theirs) == ["LRELU"]
    assert _differences(model, theirs.model, "int16") is None


# (quantizations, alpha): alpha 0 (a zero IFM2_SCALE), below 1, 1 exactly, above 1, tiny.
INT16_CASES = [(q, a) for q in ("seed0", "seed1", "saturating") for a in (0.0, 0.2, 1.0, 2.75)] + \
              [("seed0", 1e-4), ("seed1", 0.999)]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("quant, alpha", INT16_CASES)
def test_int16_lrelu_on_every_code(quant: str, alpha: float, accelerator: str) -> None:
    model = _leaky_relu(alpha, *_quantizations(quant, "int16"))
    c = cascader.compile(model, accelerator=accelerator)
    assert _modes(c) == ["LRELU"]
    assert _differences(model, c.model, "int16") is None


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("s_in, s_out, alpha", [(0.25, 1e-3, 0.05), (0.0125, 1e-3, 0.3)])
def test_int16_lrelu_rounding_ties(s_in: float, s_out: float, alpha: float, accelerator: str) -> None:
    """Multipliers of exactly 12.5 in float32 (alpha's, then the identity's): every odd code
    below (above) zero is a tie, which both rescales round as the reference does."""
    model = _leaky_relu(alpha, quantization(s_in, 0), quantization(s_out, 0))
    c = cascader.compile(model, accelerator=accelerator)
    assert _modes(c) == ["LRELU"]
    assert _differences(model, c.model, "int16") is None


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("quant, alpha", [("seed0", -0.3), ("seed1", -1.7), ("saturating", -0.3)])
def test_negative_alpha_keeps_three_operations(quant: str, alpha: float, accelerator: str) -> None:
    """The U85's LRELU scales are unsigned: a negative alpha is the positive part less x * |alpha|."""
    model = _leaky_relu(alpha, *_quantizations(quant, "int16"))
    c = cascader.compile(model, accelerator=accelerator)
    assert _modes(c) == ["AVERAGE", "MUL", "SUB"]
    assert _differences(model, c.model, "int16") is None


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256", "ethos-u85-256"])
def test_negative_alpha_ties(accelerator: str) -> None:
    """s_in 0.0125, s_out 0.001, alpha -0.3: the multiplier is 3.75 exactly in float32, so
    x = -8734 gives 32752.5."""
    model = _leaky_relu(-0.3, quantization(0.0125, 0), quantization(1e-3, 0))
    assert _differences(model, cascader.compile(model, accelerator=accelerator).model, "int16") is None


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("quant, alpha", [("seed0", 0.2), ("seed1", 1.5), ("saturating", -0.3)])
def test_int8_table_on_every_code(quant: str, alpha: float, accelerator: str) -> None:
    model = _leaky_relu(alpha, *_quantizations(quant, "int8"), dtype="int8")
    c = cascader.compile(model, accelerator=accelerator)
    assert len(c.schedule.operations) == 1 and c.schedule.operations[0].lowered.lut is not None
    assert _differences(model, c.model, "int8") is None


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_no_slower_than_velas(dtype: str, accelerator: str) -> None:
    """The operator zoo's case on the same estimator (int16 before: 1.62/1.81/2.00x Vela's)."""
    ours, theirs = cycles_against_vela(operator_model("LEAKY_RELU", dtype), accelerator)
    assert ours <= 1.02 * theirs, (ours, theirs)


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_u55_and_u65_keep_their_operations(accelerator: str) -> None:
    """LRELU there only with one quantization (alpha in OFM_SCALE); else the three operations."""
    q = quantization(0.05, 0)
    same = cascader.compile(_leaky_relu(0.2, q, q), accelerator=accelerator)
    rescaled = cascader.compile(_leaky_relu(0.2, q, quantization(0.0371, 0)), accelerator=accelerator)
    assert _modes(same) == ["LRELU"] and _modes(rescaled) == ["AVERAGE", "MUL", "ADD"]
    assert "operand_scales" not in same.schedule.operations[0].lowered.registers
