"""Small deterministic cases of what a fuzz campaign (random networks and the operator zoo at
random budgets on ethos-u55-128, ethos-u65-256 and ethos-u85-128/256/512) found, each bit-exact
or within its budget now."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")


def _sliced_mean(dtype: str, channels: int) -> cascader.Model:
    """STRIDED_SLICE of every other row and column, then MEAN over H and W (random network
    uint8 seed 211's first two layers, channels widened)."""
    zero_point = {"int8": 3, "uint8": 128, "int16": 0}[dtype]
    b = ModelBuilder()
    x = b.add_input("x", (1, 10, 23, channels), dtype, quantization(0.05, zero_point))
    sliced = b.add_tensor("sliced", (1, 2, 3, channels), dtype, quantization(0.05, zero_point))
    b.add_operator("STRIDED_SLICE", [x, *(b.add_constant(name, np.array(v, np.int32)) for name, v in (
        ("begin", [0, 3, 18, 0]), ("end", [1, 6, 23, channels]), ("strides", [1, 2, 2, 1])))], [sliced], {})
    y = b.add_tensor("y", (1, 1, 1, channels), dtype, quantization(0.04, zero_point // 2))
    b.add_operator("MEAN", [sliced, b.add_constant("axes", np.array([1, 2], np.int32))], [y], {"keep_dims": True},
                   version=2)
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype, channels", [("int8", 1), ("uint8", 8), ("int16", 16)])
def test_mean_of_a_strided_slice_is_bit_exact(accelerator: str, dtype: str, channels: int):
    """MEAN's pools walk their input as dense rows (`lower_reduce.banded_pool`), so a slice
    read in place by the MEAN (a strided view of the input) summed the wrong elements (max error
    37 on seed 211). The slice is now a copy when a MEAN reads it."""
    compiled = cascader.compile(_sliced_mean(dtype, channels), accelerator=accelerator)
    verdict = compiled.check(seeds=(0, 1))
    assert verdict.bit_exact, verdict.details
