"""BATCH_MATMUL on the Ethos-U85 (#43): two computed operands multiplied as one matrix product,
the U85's convolution that takes its weights from IFM2 (lower_batch_matmul._multiply), as Vela 5.2
runs it there, in place of the U55/U65's MULs and channel sums.

Every case of test_lower_batch_matmul (adj_x / adj_y, ranks 2 to 5, broadcast batches, one row,
one column, K = 1, wide zero points, rescales above one and far below, TFLite's double rounding)
compiles for U85-128/256/512 and runs two seeds through the simulator and the reference
interpreter; so do a product written into a concatenation, one a least-SRAM schedule stripes by
rows and columns, and zoo transformer_block. Where a batch broadcasts, or the 32-bit accumulators
cannot hold every sum of K products, the MULs and sums remain.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader import zoo
from cascader.sim import decode
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter, random_inputs  # noqa: E402
from test_lower_batch_matmul import CASES, WIDE_ZERO_POINTS, _check, _model  # noqa: E402

ACCELERATORS = ("ethos-u85-128", "ethos-u85-256", "ethos-u85-512")
BROADCAST = {"y_2d", "y_batch_1", "x_batch_1", "crossed_broadcast"}


def _products(compiled) -> list[dict]:
    """The matrix products of a binary (convolutions with their weights from IFM2)."""
    return [op for stream in decode(compiled) for op in stream.operations
            if op["kind"] == "conv" and op["u85"]["weights_ifm2"]]


def _kinds(compiled) -> set[str]:
    return {op["kind"] for stream in decode(compiled) for op in stream.operations}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("case", list(CASES))
def test_batch_matmul_bit_exact(case, accelerator):
    compiled = _check(_model(*CASES[case]), accelerator)
    if case in BROADCAST:  # a broadcast batch: the MULs and sums
        assert not _products(compiled) and "elementwise" in _kinds(compiled)
    else:
        assert _products(compiled) and "elementwise" not in _kinds(compiled)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_output_written_into_a_concatenation(accelerator):
    assert _products(_check(_model((2, 5, 16), (2, 16, 7), (2, 5, 7), concat_with=(2, 5, 3)), accelerator))


def _between_relus(x_shape, y_shape, out_shape):
    """x @ y of a RELU of x, and a RELU of the product: maps a cascade may keep in stripes."""
    b = ModelBuilder()
    q = quantization(0.05, 3)
    x = b.add_input("x", x_shape, "int8", q)
    y = b.add_input("y", y_shape, "int8", quantization(0.04, -5))
    relu_x = b.add_tensor("relu_x", x_shape, "int8", q)
    b.add_operator("RELU", [x], [relu_x])
    z = b.add_tensor("z", out_shape, "int8", quantization(0.3, 1))
    b.add_operator("BATCH_MATMUL", [relu_x, y], [z], {"adj_x": False, "adj_y": False}, version=2)
    out = b.add_tensor("out", out_shape, "int8", quantization(0.3, 1))
    b.add_operator("RELU", [z], [out])
    b.mark_output(out)
    return b.build()


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_a_least_sram_schedule_stripes_the_product(accelerator):
    """The least-SRAM schedule runs the product in stripes of rows and columns of its OFM, each
    reading its IFM2 rows whole (the planner's IFM2 propagator)."""
    model = _between_relus((4, 64, 48), (4, 48, 40), (4, 64, 40))
    whole = cascader.compile(model, accelerator=accelerator)
    smallest = cascader.compile(model, accelerator=accelerator, optimise="size")
    assert len(_products(smallest)) > len(_products(whole)) == 1
    assert smallest.sram_bytes < whole.sram_bytes
    for seed in (0, 1):
        inputs = random_inputs(model, seed=seed)
        reference = ReferenceInterpreter(model).run(inputs)[0]
        for compiled in (whole, smallest):
            np.testing.assert_array_equal(cascader.simulate(compiled, inputs)[0], reference)


def test_sums_beyond_the_accumulators_keep_the_multiplies():
    # K = 33,100 products of up to 255 x 255 (zero points -128 and 127): beyond 2^31 - 1.
    k = 33_100
    compiled = _check(_model((1, 1, k), (1, k, 1), (1, 1, 1), zero_points=(-128, 127, 0), scales=(0.01, 0.01, 40.0)),
                      "ethos-u85-256")
    assert not _products(compiled) and "elementwise" in _kinds(compiled)
    # With zero points 0 the sum is at most 128 x 128 x K: one product.
    assert _products(_check(_model((1, 1, k), (1, k, 1), (1, 1, 1), zero_points=(0, 0, 0), scales=(0.01, 0.01, 40.0)),
                            "ethos-u85-256"))


def _transposed_copies(compiled) -> list[str]:
    """The names of the operations that write their OFM with the U85's OFM transpose."""
    return [s.lowered.name for s in compiled.schedule.operations if s.lowered.registers.get("ofm_transpose")]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("case, transposed", [("plain", ["y"]), ("adj_x", ["x", "y"]), ("attention_context", ["y"]),
                                              ("rank4_batches", ["y"]), ("adj_y", [])])
def test_operand_transposed_in_one_copy(case, transposed, accelerator):
    """An operand stored K outermost (x with adj_x, y without adj_y) is transposed by one copy
    with the U85's OFM transpose, not by depth-1 planes per batch, where the cycle model finds it
    faster (on every size here)."""
    compiled = _check(_model(*CASES[case]), accelerator)
    assert _transposed_copies(compiled) == [f"0:BATCH_MATMUL({t}_transposed)" for t in transposed]
    assert [op["kind"] for stream in decode(compiled) for op in stream.operations if op["kind"] != "dma"] == \
        ["pool"] * len(transposed) + ["conv"]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_transformer_block(accelerator):
    model = zoo.transformer_block()
    compiled = _check(model, accelerator)
    assert len(_products(compiled)) == 2  # the attention scores and context
    # The context's values (K = the sequence outermost) transposed in one copy, the softmax's
    # row maximum read from another (test_u85_softmax); no depth-1 copies or pools remain.
    assert {"11:SOFTMAX(max_columns)", "12:BATCH_MATMUL(y_transposed)"} <= set(_transposed_copies(compiled))
    assert not [op for stream in decode(compiled) for op in stream.operations
                if op["kind"] == "pool" and op["sub_op"] != "REDUCE_SUM" and op["ofm"]["shape"][2] == 1]


def test_u55_u65_keep_the_multiplies():
    compiled = _check(_model(*CASES["plain"], zero_points=WIDE_ZERO_POINTS), "ethos-u55-128")
    assert "elementwise" in _kinds(compiled) and "conv" not in _kinds(compiled)
