"""MEAN and SUM over H and W on the Ethos-U85 (#43, `lower_reduce`): one H x W pool window where
the cycle model finds it faster than the 1 x HW window over the same elements (whose rows the
U85 reads in 8-wide sub-kernels, each with a block's overlap). The same arithmetic, the sum of
x - zp_in rescaled once: bit-exact on 2 seeds on U85-128/256/512 in int8, uint8 and int16, at
the pool kernel's height limit, beyond it (the 1 x HW window) and with channels kept or not;
the operator zoo's int16 MEAN at most Vela 5.2's cycles (it was 1.13-1.30x them)."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.frontend.lower_reduce import _plane_window
from cascader.tflite.builder import ModelBuilder, quantization
from conftest import compile_on_npu, cycles_against_vela

pytest.importorskip("ai_edge_litert")
from cascader.bench.simulate import validate  # noqa: E402
from cascader.operator_zoo import operator_model  # noqa: E402

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]


def _reduce(opcode: str, dtype: str, shape, axes, qi, qo) -> cascader.Model:
    b = ModelBuilder()
    x = b.add_input("x", shape, dtype, quantization(*qi))
    y = b.add_tensor("y", [1 if i in axes else d for i, d in enumerate(shape)], dtype, quantization(*qo))
    b.add_operator(opcode, [x, b.add_constant("axes", np.array(axes, np.int32))], [y], {"keep_dims": True},
                   version=2)
    b.mark_output(y)
    return b.build()


def _kernels(compiled) -> list[tuple[int, int]]:
    return [(s.lowered.registers["kernel"]["height"], s.lowered.registers["kernel"]["width"])
            for s in compiled.schedule.operations]


def test_plane_window_shapes() -> None:
    assert _plane_window((8, 8, 16), {0, 1})
    assert _plane_window((256, 3, 2), {0, 1})  # the kernel's 256 rows
    assert not _plane_window((257, 2, 2), {0, 1})  # beyond them
    assert not _plane_window((8, 8, 1), {0, 1})  # nothing kept: a REDUCE_SUM over the channels
    assert not _plane_window((1, 8, 16), {0, 1})  # one row: the 1 x W window is the plane
    assert not _plane_window((8, 8, 16), {1})
    assert not _plane_window((8, 8, 16), {0, 1, 2})


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("opcode, dtype, shape, qi, qo", [
    ("MEAN", "int16", (1, 8, 8, 16), (0.05, 0), (0.3, 0)),
    ("MEAN", "int16", (1, 7, 7, 64), (0.002, 0), (0.0015, 0)),
    ("MEAN", "int8", (1, 8, 8, 16), (0.05, 3), (0.04, -2)),
    ("MEAN", "uint8", (1, 5, 6, 24), (0.05, 130), (0.03, 120)),
    ("SUM", "int16", (1, 8, 8, 16), (0.01, 0), (0.3, 0)),
    ("MEAN", "int16", (1, 256, 3, 16), (0.05, 0), (0.05, 0)),  # the kernel's height limit
    ("MEAN", "int16", (1, 257, 2, 16), (0.05, 0), (0.02, 0)),  # past it: the 1 x HW window
])
def test_bit_exact(tmp_path, accelerator: str, opcode: str, dtype: str, shape, qi, qo) -> None:
    model = _reduce(opcode, dtype, shape, [1, 2], qi, qo)
    path, compiled = compile_on_npu(tmp_path, model, accelerator, operations=1)
    h, w = shape[1:3]
    assert _kernels(compiled)[0] in ([(h, w), (1, h * w)] if h <= 256 else [(1, h * w)])
    result = validate(path, compiled.model, (0, 1))
    assert result.bit_exact, result.details


@pytest.mark.parametrize("accelerator", SIZES)
def test_int16_mean_cycles_against_vela(tmp_path, accelerator: str) -> None:
    """The operator zoo's int16 MEAN (8x8x16 to 16) as an 8x8 window, at most Vela's cycles
    (U85-256: 2,723, Vela 2,875; the 1 x 64 window took 3,750)."""
    model = operator_model("MEAN", "int16")
    _, compiled = compile_on_npu(tmp_path, model, accelerator, operations=1)
    assert _kernels(compiled) == [(8, 8)]
    ours, vela = cycles_against_vela(model, accelerator)
    assert ours <= vela
