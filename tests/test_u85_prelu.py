"""PRELU on the Ethos-U85 (#43, `lower_prelu`): with one quantization in and out and every alpha
at most 1, Vela 5.2's U85 form, MAX(x, MUL(x, alpha)) (two operations); with alphas on both
sides of 1 the sum of the clamped branches, the positive one an 8-bit MUL by 1 instead of the
rescaling pool. Bit-exact against the reference interpreter on 2 seeds on U85-128/256/512, at
the edges of the MAX form's premise (alpha exactly 1, just above it, zero, negative, mixed
signs; int8, uint8, int16 with an int8 alpha; alpha broadcast per channel or whole), and no
slower than Vela's on the zoo case. Every form on every target: test_lower_prelu."""

from __future__ import annotations

import pytest

from cascader.operator_zoo import operator_model
from conftest import cycles_against_vela

from test_lower_prelu import _modes, _prelu
from test_u85_lowering import _bit_exact_on_the_npu

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]


MAX_FORM = {
    "mixed_signs": ([-30, 64, 0, 17],),
    "alpha_one": ([64, 64, 64, 64],),
    "alpha_zero": ([0, 0, 0, 0],),
    "negative": ([-128, -1, -64, -7],),
    "positive_below_one": ([1, 63, 32, 50],),
    "uint8": ([-20, 5, 64, 0], "uint8"),
    "int16": ([-20, 5, 64, -128], "int16"),
    "one_alpha_for_all": ([-9], "int8", (1, 6, 5, 4), True, (1, 1, 1)),
}
THREE_OPERATIONS = {
    "alpha_above_one": ([65, 10, -3, 0],),
    "alpha_two_uint8": ([127, 10, -3, 0], "uint8"),
    "requantized": ([-30, 100, 0, 17], "int8", (1, 6, 5, 4), False),
    "requantized_uint8": ([-30, 100, 0, 17], "uint8", (1, 6, 5, 4), False),
    "requantized_int16": ([-30, 100, 0, 17], "int16", (1, 6, 5, 4), False),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(MAX_FORM))
def test_max_form_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(_prelu(*MAX_FORM[case]), accelerator, tmp_path)
    assert _modes(c) == ["MUL", "MAX"]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(THREE_OPERATIONS))
def test_three_operations_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    args = THREE_OPERATIONS[case]
    c = _bit_exact_on_the_npu(_prelu(*args), accelerator, tmp_path)
    modes = _modes(c)
    assert "MAX" not in modes and modes[-1] == "ADD"
    # The positive branch: a MUL by 1 for 8-bit maps, the pool for int16 (its MUL is slower).
    assert ("AVERAGE" in modes) == (len(args) > 1 and args[1] == "int16")


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_operator_zoo_prelu(dtype: str, accelerator: str, tmp_path) -> None:
    _bit_exact_on_the_npu(operator_model("PRELU", dtype), accelerator, tmp_path)


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_prelu_no_slower_than_velas(dtype: str, accelerator: str) -> None:
    ours, theirs = cycles_against_vela(operator_model("PRELU", dtype), accelerator)
    assert ours <= 1.02 * theirs, (ours, theirs)
