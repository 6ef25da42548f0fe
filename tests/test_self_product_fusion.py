"""A MUL of an 8-bit map by a table lookup of that same map (SiLU) as one table lookup
(`cascader.frontend.self_product_fusion`), bit-exact against the reference interpreter on two
seeds on ethos-u55-128, ethos-u65-256 and ethos-u85-256: SiLU (the MUL's operands either way
round), uint8, TANH and HARD_SWISH, a fused RELU, rescales whose product wraps int32 and far
below one, and the map a convolution's output (the lookup then goes into the convolution). A
unary output something else reads keeps both passes.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.lowering import lower
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from test_lower_movement import _check  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")
SHAPE = (1, 9, 10, 24)
VERSIONS = {"LOGISTIC": 2, "TANH": 2, "HARD_SWISH": 1, "MUL": 2, "CONV_2D": 3}


def _self_product(unary="LOGISTIC", dtype="int8", x_q=(0.08, 5), unary_q=(1 / 256, -128), out_q=(0.05, -20),
                  swapped=False, activation="NONE", convolution=False, unary_read=False) -> cascader.Model:
    """[CONV ->] x -> unary -> s; MUL(x, s) (or (s, x)) -> out."""
    b = ModelBuilder()
    if dtype == "uint8":  # uint8 codes: the zero points moved up by 128
        x_q, unary_q, out_q = [(s, z + 128) for s, z in (x_q, unary_q, out_q)]
    x = b.add_input("x", SHAPE, dtype, quantization(*x_q))
    if convolution:
        w = np.random.default_rng(3).integers(-127, 128, size=(SHAPE[3], 1, 1, SHAPE[3])).astype(np.int8)
        weights = b.add_constant("w", w, "int8", quantization(0.01, 0))
        bias = b.add_constant("bias", np.zeros(SHAPE[3], np.int32), "int32", quantization(0.08 * 0.01, 0))
        conv = b.add_tensor("conv", SHAPE, dtype, quantization(*x_q))
        b.add_operator("CONV_2D", [x, weights, bias], [conv], {"padding": "VALID", "stride_w": 1, "stride_h": 1},
                       version=VERSIONS["CONV_2D"])
        x = conv
    s = b.add_tensor("s", SHAPE, dtype, quantization(*unary_q))
    b.add_operator(unary, [x], [s], {}, version=VERSIONS[unary])
    out = b.add_tensor("out", SHAPE, dtype, quantization(*out_q))
    b.add_operator("MUL", [s, x] if swapped else [x, s], [out], {"fused_activation_function": activation},
                   version=VERSIONS["MUL"])
    b.mark_output(out)
    if unary_read:
        b.mark_output(s)
    return b.build()


def _lookups(model, accelerator) -> tuple[int, int]:
    """(operations, table lookups) of the model's lowering."""
    _, segments = lower(model, accelerator)
    ops = [op for seg in segments for op in seg.operations]
    return len(ops), sum(op.lut is not None for op in ops)


CASES = {
    "silu": {},
    "silu_swapped": {"swapped": True},
    "silu_uint8": {"dtype": "uint8"},
    "tanh": {"unary": "TANH", "unary_q": (1 / 128, 0)},
    "hard_swish": {"unary": "HARD_SWISH", "unary_q": (0.04, -10)},
    "relu": {"activation": "RELU"},
    "wrapping_product": {"out_q": (1e-6, 0)},  # multiplier far above one: the product << s wraps
    "tiny_rescale": {"out_q": (40.0, 3)},
}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("case", list(CASES))
def test_one_lookup(tmp_path, case, accelerator):
    model = _self_product(**CASES[case])
    assert _lookups(model, accelerator) == (1, 1)
    _check(tmp_path, model, accelerator=accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_into_the_producing_convolution(tmp_path, accelerator):
    model = _self_product(convolution=True)
    assert _lookups(model, accelerator) == (1, 1)  # the convolution applies the table
    _check(tmp_path, model, accelerator=accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_a_unary_output_read_elsewhere_keeps_both(tmp_path, accelerator):
    model = _self_product(unary_read=True)
    assert _lookups(model, accelerator) == (2, 1)
    _check(tmp_path, model, accelerator=accelerator)
