"""int16 EXP on the Ethos-U85 (#43, `lower_lut`): where TFLite's interpolated table wraps, a
lookup of the table less an offset and one ADD of the offset written unclamped to int16 (the
U85's clip range NONE keeps the low half, the reference's wrap), where the U55/U65 sum in
int32 and pick the low halves with a convolution. Every int16 code, bit-exact against the reference interpreter,
on U85-128/256/512, at the cases of tests/test_lower_type_variants (one and two wrapping
intervals, past exp's float range, none); an output written into a concatenation and rows
wider than one feature map on 2 seeds."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.frontend.lower_lut import int16_samples, lookup_offset
from cascader.reference import ReferenceInterpreter

from conftest import compile_exact
from test_lower_type_variants import INT16_CODES, _exp16, exp_into_a_concatenation

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("in_scale, out_scale, wrapping", [
    (0.02, 0.06, True), (0.01, 0.001, True), (0.003, 0.1, True), (0.001, 0.0001, False)])
def test_int16_exp_on_every_code(tmp_path, accelerator: str, in_scale: float, out_scale: float, wrapping: bool) -> None:
    assert (lookup_offset(int16_samples(np.exp, (in_scale, 0), (out_scale, 0))) != 0) == wrapping
    model = _exp16(INT16_CODES.shape, in_scale, out_scale)
    compiled = compile_exact(tmp_path, model, accelerator, operations=2 if wrapping else 1)
    if wrapping:
        add = compiled.schedule.operations[-1].lowered
        assert add.registers["sub_op"] == "ADD" and add.registers.get("wrap_ofm") and add.ofm.dtype == "int16"
    ours = cascader.simulate(compiled, [INT16_CODES])[0]
    assert np.array_equal(ours, ReferenceInterpreter(model).run([INT16_CODES])[0])


@pytest.mark.parametrize("accelerator", SIZES)
def test_wrapping_exp_into_a_concatenation_and_a_wide_map(tmp_path, accelerator: str) -> None:
    """The wrapping ADD writing in place into a concatenation (a strided OFM), and rows too
    wide for one feature map (w x c > 65535)."""
    compile_exact(tmp_path, exp_into_a_concatenation(), accelerator)
    compile_exact(tmp_path, _exp16((1, 2, 300, 256), 0.02, 0.06), accelerator)
