"""Ethos-U85 (#43): int16 TANH and LOGISTIC through the U85's LUT_TANH / LUT_SIGMOID tables
(emit/ethos_u85 `lut`, arch/ethos_u85/activation_table), each compiled for U85-128/256/512 and
simulated bit-exact against the reference interpreter on 2 seeds, wholly on the NPU.

The lowering's 1x1 pool rescales the input to the U55's built-in function format (3 x 2^12 per
unit, `lower_lut.builtin_scale`), which the U85's tables read too; the emitter loads TFLite's
sigmoid table in the U85's layout into the LUT RAM before the first operation that reads it, the
same 2 KiB Vela's binaries load. Covered: inputs reaching into both saturated tails, the
power-of-two input scales that take the unit rescale (2^-12, and 2^-11 for TANH), a tiny scale
(a long shift), and the 16x8 LSTM whose gate ADDs fuse both functions.
"""

from __future__ import annotations

import pytest

import cascader
from cascader import _core, zoo

from test_u85_lowering import SIZES, _bit_exact_on_the_npu
from test_u85_mechanisms import _int16_activation

# LUT_TANH and LUT_SIGMOID (ACTIVATION function), by opcode.
FUNCTION = {"TANH": 10, "LOGISTIC": 11}
CASES = {
    **{f"{opcode.lower()}_{scale:g}": (opcode, scale)
       for opcode in FUNCTION for scale in (1e-6, 1e-4, 2**-12, 0.001)},  # 0.001: a third saturates
    "tanh_2^-11": ("TANH", 2**-11),
}


def _functions(c: cascader.CompiledModel) -> set[int]:
    from cascader.sim import npu_calls

    return {r["activation"]["function"] for call in npu_calls(c.model) for r in call.decode().operations
            if r["kind"] != "dma"}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_tanh_sigmoid_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    opcode, scale = CASES[case]
    c = _bit_exact_on_the_npu(_int16_activation(opcode, scale), accelerator, tmp_path)
    assert _functions(c) == {FUNCTION[opcode]}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("opcode", sorted(FUNCTION))
def test_zoo_tanh_sigmoid_bit_exact(opcode: str, accelerator: str, tmp_path) -> None:
    model = (zoo.tanh if opcode == "TANH" else zoo.logistic)((1, 4, 5, 16))
    assert _functions(_bit_exact_on_the_npu(model, accelerator, tmp_path)) == {FUNCTION[opcode]}


@pytest.mark.parametrize("accelerator", SIZES)
def test_16x8_lstm_gates_bit_exact(accelerator: str, tmp_path) -> None:
    """The gates' ADDs fuse SIGMOID and TANH (lower_lstm), one table each: reloaded between them."""
    c = _bit_exact_on_the_npu(zoo.lstm_kws(steps=3, dtype="int16"), accelerator, tmp_path)
    assert {10, 11} <= _functions(c)


@pytest.mark.parametrize("opcode", sorted(FUNCTION))
def test_tables_are_vela_s(opcode: str) -> None:
    """The table in flash is the one Vela's U85 binary loads for the same operator."""
    from cascader.sim import npu_calls

    model = (zoo.tanh if opcode == "TANH" else zoo.logistic)((1, 4, 5, 16))
    try:
        vela = cascader.vela.compile(model, "ethos-u85-256")
    except cascader.vela.VelaNotInstalled:
        pytest.skip("Vela is not installed")
    (call,) = npu_calls(vela.model)
    (dma,) = [r for r in call.decode().operations if r["kind"] == "dma"]
    src = dma["src"]
    table = bytes(call.flash[src["address"]:src["address"] + src["length"]])
    assert table == _core.u85_tanh_sigmoid_table(FUNCTION[opcode])


def test_other_functions_have_no_table() -> None:
    with pytest.raises(cascader.errors.InvalidArgumentError):
        _core.u85_tanh_sigmoid_table(8)
