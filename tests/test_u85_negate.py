"""NEG on the Ethos-U85 (#43, `lower_negate`): int8, uint8 and int16 as one SUB from 0 written
unclamped (the U85's clip range NONE), -x mod 2^n, where the U55/U65 take a table (8-bit) or a
SUB and a MUL (int16). Exhaustive as tests/test_lower_unary: every code of the type (the
wrapping minimum included) under two seeds' quantizations and a saturating one, on
U85-128/256/512; uint8 against Negate's arithmetic (LiteRT has no uint8 kernel); random inputs
of odd shapes and ranks on 2 seeds; no slower than Vela's SUB."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.operator_zoo import operator_model
from cascader.reference import random_inputs
from cascader.sim import npu_calls, simulate
from cascader.tflite.builder import quantization
from conftest import cycles_against_vela

from test_lower_unary import (RANGE, SEEDS, _all_codes_shape, _compile_and_compare, _every_code, _model,
                              _quantizations, _saturating)

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]


def _one_wrapping_sub(c: cascader.CompiledModel) -> None:
    (op,) = [s.lowered for s in c.schedule.operations]
    assert op.registers["sub_op"] == "SUB" and op.registers.get("wrap_ofm")
    # 0 - x: the one-element constant is the U85's IFM, broadcast (IFM_BROADCAST), clip range NONE.
    (r,) = [r for call in npu_calls(c.model) for r in call.decode().operations if r["kind"] != "dma"]
    assert r["u85"]["ifm_broadcast_mode"] and r["ifm"]["shape"] == (1, 1, 1) and r["activation"]["clip_range"] == 1


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("quant", ["seed0", "seed1", "saturating"])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_every_code_bit_exact(tmp_path, dtype: str, quant: str, accelerator: str) -> None:
    q_in, q_out = _saturating("NEG", dtype) if quant == "saturating" else _quantizations("NEG", dtype,
                                                                                         SEEDS[int(quant[-1])])
    shape = _all_codes_shape(dtype)
    model = _model("NEG", dtype, shape, q_in, q_out)
    _one_wrapping_sub(_compile_and_compare(tmp_path, model, [_every_code(dtype, shape)], accelerator, operations=1))


@pytest.mark.parametrize("accelerator", SIZES)
def test_uint8_neg_is_negate_in_uint8(accelerator: str) -> None:
    model = _model("NEG", "uint8", (1, 16, 16), quantization(0.1, 128), quantization(0.3, 7))
    compiled = cascader.compile(model, accelerator=accelerator)
    _one_wrapping_sub(compiled)
    codes = np.arange(256, dtype=np.uint8).reshape(1, 16, 16)
    (got,) = simulate(compiled.model, [codes])
    np.testing.assert_array_equal(got, (-codes.astype(np.int64)) % 256)


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("shape", [(300,), (3, 200), (1, 1, 1, 1), (1, 17, 1, 33)])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_odd_shapes_and_ranks(tmp_path, dtype: str, shape, accelerator: str) -> None:
    for seed in SEEDS:
        q_in, q_out = _quantizations("NEG", dtype, seed)
        model = _model("NEG", dtype, shape, q_in, q_out)
        inputs = random_inputs(model, seed)
        flat = inputs[0].reshape(-1)
        ends = np.roll(RANGE[dtype], seed)
        flat[: min(2, flat.size)] = ends[: flat.size]
        _compile_and_compare(tmp_path, model, inputs, accelerator)


def test_u55_and_u65_keep_the_table() -> None:
    for accelerator in ("ethos-u55-128", "ethos-u65-256"):
        (op,) = [s.lowered for s in cascader.compile(operator_model("NEG", "int8"), accelerator=accelerator)
                 .schedule.operations]
        assert op.lut is not None


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_neg_no_slower_than_velas(dtype: str, accelerator: str) -> None:
    ours, theirs = cycles_against_vela(operator_model("NEG", dtype), accelerator)
    assert ours <= theirs, (ours, theirs)
