"""CAST on the Ethos-U85 (#43, frontend/lower_u85_cast): one ADD of a zero constant written
unclamped (narrowing keeps the low bits, as C++'s static_cast), or to bool CMP_NE against 0
and AND 1; bit-exact against the reference interpreter on 2 seeds on U85-128/256/512 for the zoo's
casts, every pair of bool, int8, uint8, int16 and int32, and each type's extremes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import cascader
from cascader.operator_zoo import CAST_TO, operator_model
from cascader.tflite.builder import ModelBuilder, quantization
from cascader.tflite.schema import TENSOR_TYPE_CODES

from test_u85_lowering import SIZES, _bit_exact_on_the_npu, _sub_ops

TYPES = ("bool", "int8", "uint8", "int16", "int32")


def _cast(src: str, dst: str, shape=(1, 5, 7, 16), q=(1.0, 0)):
    """A CAST with quantization on its integer tensors (Vela 5.2 keeps an unquantized one on
    the CPU; TFLite's kernel ignores it)."""
    qs = {t: None if t == "bool" else quantization(*q) for t in (src, dst)}
    b = ModelBuilder(description=f"test_u85_cast {src} -> {dst}")
    x = b.add_input("input", shape, src, qs[src])
    o = b.add_tensor("output", shape, dst, qs[dst])
    b.mark_output(o)
    b.add_operator("CAST", [x], [o], dict(in_data_type=TENSOR_TYPE_CODES[src], out_data_type=TENSOR_TYPE_CODES[dst]))
    return b.build()


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", sorted(CAST_TO))
def test_zoo_cast_bit_exact(dtype: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(operator_model("CAST", dtype), accelerator, tmp_path)
    assert _sub_ops(c) == {"ADD": 1}


@pytest.mark.parametrize("src, dst", [(s, d) for s, d in itertools.product(TYPES, TYPES) if s != d])
def test_every_pair_bit_exact(src: str, dst: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(_cast(src, dst), "ethos-u85-256", tmp_path)
    assert _sub_ops(c) == ({"CMP_NE": 1, "AND": 1} if dst == "bool" else {"ADD": 1})


_EXTREMES = {"int8": [-128, -127, -1, 0, 1, 126, 127], "uint8": [0, 1, 127, 128, 254, 255],
             "int16": [-32768, -32767, -129, -128, -1, 0, 1, 127, 128, 255, 256, 32767],
             "int32": [-(2**31), -(2**31) + 1, -65536, -32769, -32768, -257, -129, -1, 0, 1, 127, 128, 255, 256,
                       32767, 32768, 65535, 65536, 70000, 2**31 - 1]}


@pytest.mark.parametrize("src", sorted(_EXTREMES))
def test_type_extremes_wrap_as_static_cast(src: str) -> None:
    """Each type's extremes and the other types' bounds, to every other type: narrowing keeps
    the low bits (int32 70000 is int16 4464), to bool any non-zero is true."""
    from cascader.reference import run

    values = np.array(_EXTREMES[src], dtype=src)
    x = np.resize(values, 1 * 2 * 3 * 16).reshape(1, 2, 3, 16)
    for dst in TYPES:
        if dst == src:
            continue
        model = _cast(src, dst, shape=(1, 2, 3, 16))
        c = cascader.compile(model, accelerator="ethos-u85-256")
        assert all(v.npu for v in c.partition.verdicts)
        got, want = cascader.simulate(c.binary, [x])[0], run(model, [x])[0]
        np.testing.assert_array_equal(got, want, err_msg=f"{src} -> {dst}")


def test_quantization_is_ignored(tmp_path) -> None:
    """TFLite's CAST converts the stored values whatever the scales and zero points say."""
    _bit_exact_on_the_npu(_cast("int8", "int16", q=(0.3, 5)), "ethos-u85-256", tmp_path)
