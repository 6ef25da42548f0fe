"""The reference interpreter runs in a child process: a model that aborts LiteRT's reference
kernels raises ReferenceCrashed naming the operator, and the caller lives on."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.errors import ReferenceCrashed
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter, random_inputs  # noqa: E402


def _narrow_softmax() -> cascader.Model:
    """ADD, RESHAPE, then an int8 SOFTMAX whose input scale (1e-9) leaves its fixed-point input
    multiplier below 1: the reference kernel's CHECK aborts the process."""
    b = ModelBuilder(description="narrow softmax")
    x = b.add_input("x", (1, 10), "int8", quantization(0.05, 0))
    h = b.add_tensor("h", (1, 10), "int8", quantization(0.05, 0))
    b.add_operator("ADD", [x, x], [h], {"fused_activation_function": "NONE"}, version=2)
    narrow = b.add_tensor("narrow", (1, 10), "int8", quantization(1e-9, 0))
    b.add_operator("RESHAPE", [h, b.add_constant("shape", np.array([1, 10], np.int32))], [narrow])
    y = b.add_tensor("y", (1, 10), "int8", quantization(1 / 256, -128))
    b.add_operator("SOFTMAX", [narrow], [y], {"beta": 1.0}, version=2)
    b.mark_output(y)
    return b.build()


def test_a_reference_abort_is_an_error_naming_the_operator():
    with pytest.raises(ReferenceCrashed) as err:
        ReferenceInterpreter(_narrow_softmax()).run([np.zeros((1, 10), np.int8)])
    assert (err.value.operator, err.value.opcode) == (2, "SOFTMAX")
    assert "narrow softmax" in str(err.value)
    # The next model runs in a fresh child process.
    model = cascader.zoo.resnet8()
    assert ReferenceInterpreter(model).run(random_inputs(model))[0].shape == (1, 10)
