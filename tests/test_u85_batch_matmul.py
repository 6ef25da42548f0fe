"""BATCH_MATMUL on the Ethos-U85 (#43): two computed operands multiplied as one matrix product,
the U85's convolution that takes its weights from IFM2 (lower_batch_matmul._multiply), as Vela 5.2
runs it there, in place of the U55/U65's MULs and channel sums.

Every case of test_lower_batch_matmul (adj_x / adj_y, ranks 2 to 5, broadcast batches, one row,
one column, K = 1, wide zero points, rescales above one and far below, TFLite's double rounding)
compiles for U85-128/256/512 and runs two seeds through the simulator and the reference
interpreter; so do a product written into a concatenation, one a least-SRAM schedule stripes by
rows and columns, and zoo transformer_block. Where a batch broadcasts, or the 32-bit accumulators
cannot hold every sum of K products, the MULs and sums remain.

int16 (U85 only, as Vela 5.2): every shape of those cases, the product in the 48-bit accumulators
with the reduced multiplier (one per output batch where a batch broadcasts, one over x's rows
where y has a single batch), rescales above one, near TFLite's largest shift and flushed to zero,
K = 65,535 products of the int16 extremes, a constant y, an output in a concatenation; the CPU
on the U55/U65, with a non-zero zero point or mixed types; cycles against Vela's.
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
ACCELERATORS_U55_U65 = ("ethos-u55-128", "ethos-u65-256")
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


# int16 (TFLite's BatchMatMul<int16_t, int64_t>, every zero point 0): the matrix product in the
# 48-bit accumulators, rescaled by the reduced 15-bit multiplier, one rounding half up.


def _int16_model(x_shape, y_shape, out_shape, adj_x=False, adj_y=False, scales=None, y_constant=None,
                 concat_with=None, x_zero_point=0, y_dtype="int16"):
    """x @ y of int16 maps (y of `y_dtype`). By default the output scale puts a random product's
    typical sum (sqrt(K) x 2^30 / 3) near 2^14 / 3: within the type, not clamped."""
    k = x_shape[-2] if adj_x else x_shape[-1]
    sx, sy = 1.3 * 2.0 ** -15, 0.7 * 2.0 ** -15
    sx, sy, so = scales or (sx, sy, sx * sy * np.sqrt(k) * 2.0 ** 16)
    b = ModelBuilder()
    x = b.add_input("x", x_shape, "int16", quantization(sx, x_zero_point))
    if y_constant is None:
        y = b.add_input("y", y_shape, y_dtype, quantization(sy, 0))
    else:
        y = b.add_constant("y", y_constant, "int16", quantization(sy, 0))
    z = b.add_tensor("z", out_shape, "int16", quantization(so, 0))
    b.add_operator("BATCH_MATMUL", [x, y], [z], {"adj_x": adj_x, "adj_y": adj_y}, version=4)
    if concat_with is not None:
        w = b.add_input("w", concat_with, "int16", quantization(so, 0))
        c = b.add_tensor("joined", (*out_shape[:-1], out_shape[-1] + concat_with[-1]), "int16", quantization(so, 0))
        b.add_operator("CONCATENATION", [z, w], [c], {"axis": len(out_shape) - 1}, version=3)
        z = c
    b.mark_output(z)
    return b.build()


# Every shape of CASES (their zero points and scales are int8's); broadcast batches are one
# product per output batch, or one over x's rows where y has a single batch.
INT16_CASES = {name: case[:5] for name, case in CASES.items()}
# The products each broadcast case takes: y of one batch folds x's batches into its rows.
INT16_PRODUCTS = {"y_2d": 1, "y_batch_1": 1, "x_batch_1": 3, "crossed_broadcast": 6}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("case", list(INT16_CASES))
def test_int16_bit_exact(case, accelerator):
    compiled = _check(_int16_model(*INT16_CASES[case]), accelerator)
    products = _products(compiled)
    assert len(products) == INT16_PRODUCTS.get(case, 1) and "elementwise" not in _kinds(compiled)
    assert all(p["acc_format"] == 1 and p["u85"]["ofm_round_mode"] == 1 and p["ofm_scale"][0] < 1 << 15
               for p in products)


INT16_SCALES = {
    # A rescale above one (K = 1: every product times 1.33 stays within int32, as TFLite asserts).
    "rescale_above_one": (((2, 5, 1), (2, 1, 7), (2, 5, 7)), (0.05, 0.04, 0.0015)),
    # Exponent -30: the reduced multiplier's shift is 45, near TFLite's end (46).
    "shift_45": (((2, 5, 64), (2, 64, 7), (2, 5, 7)), (1.0, 1.0, 2.0 ** 30.5)),
    # Below 2^-31 TFLite flushes the multiplier to 0: every output is 0.
    "flushes_to_zero": (((2, 5, 16), (2, 16, 7), (2, 5, 7)), (1e-6, 1e-6, 1e3)),
    # Many outputs rescaled by about 1/2^13: ties of the one rounding.
    "rounding": (((4, 32, 2), (4, 2, 32), (4, 32, 32)), (1.0, 1.0, 2.0 ** 13)),
}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("case", list(INT16_SCALES))
def test_int16_scales(case, accelerator):
    shapes, scales = INT16_SCALES[case]
    _check(_int16_model(*shapes, scales=scales), accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_int16_deep_extremes(accelerator):
    """K = 65,535 (the NPU's largest depth) products of the int16 extremes: sums up to 2^46, held
    exactly by the 48-bit accumulators and rescaled by 2^-32 (TFLite's int64 kernel the same)."""
    k = 65_535
    model = _int16_model((1, 2, k), (1, 3, k), (1, 2, 3), adj_y=True, scales=(2.0 ** -8, 2.0 ** -8, 2.0 ** 16))
    compiled = cascader.compile(model, accelerator=accelerator)
    assert compiled.summary().cpu_operators == 0 and len(_products(compiled)) == 1
    x = np.stack([np.full(k, -32768), np.full(k, 32767)]).astype(np.int16).reshape(1, 2, k)
    alternating = np.where(np.arange(k) % 2, -32768, 32767)
    y = np.stack([np.full(k, -32768), np.full(k, 32767), alternating]).astype(np.int16).reshape(1, 3, k)
    ours = cascader.simulate(compiled, [x, y])[0]
    np.testing.assert_array_equal(ours, ReferenceInterpreter(model).run([x, y])[0])
    assert ours[0, 0, 0] == 16384  # 65,535 x 2^30 / 2^32 = 16,383.75


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_int16_constant_y_and_a_concatenation(accelerator):
    """A constant y is the product's IFM2 too (the NPU's weights are 8-bit), transposed by a
    copy where K is not innermost; the output written into a concatenation's slice."""
    y = np.random.default_rng(3).integers(-32768, 32767, size=(2, 16, 7), endpoint=True).astype(np.int16)
    assert _products(_check(_int16_model((2, 5, 16), (2, 16, 7), (2, 5, 7), y_constant=y), accelerator))
    # With adj_y the constant is the IFM2 as stored (one matrix for both batches: x's rows folded).
    y_t = np.ascontiguousarray(np.swapaxes(y[:1], 1, 2))
    compiled = _check(_int16_model((2, 5, 16), (1, 7, 16), (2, 5, 7), adj_y=True, y_constant=y_t), accelerator)
    assert [s.lowered.name for s in compiled.schedule.operations] == ["0:BATCH_MATMUL(matmul)"]
    assert _products(_check(_int16_model((2, 5, 16), (2, 16, 7), (2, 5, 7), concat_with=(2, 5, 3)), accelerator))


def test_int16_cpu_where_the_reference_or_the_target_refuses():
    """int16 stays on the CPU of the U55/U65 (Vela: IFM precision must be Int8), and with a
    non-zero zero point (TFLite's kernel refuses it) or mixed types on the U85."""
    def reasons(model, accelerator):
        return [v.reason for v in cascader.compile(model, accelerator=accelerator).partition.verdicts if not v.npu]

    model = _int16_model(*CASES["plain"][:3])
    for accelerator in ACCELERATORS_U55_U65:
        (reason,) = reasons(model, accelerator)
        assert "BATCH_MATMUL takes int8 operands and output" in reason
    (reason,) = reasons(_int16_model(*CASES["plain"][:3], x_zero_point=3), "ethos-u85-256")
    assert "zero points must be 0" in reason
    (reason,) = reasons(_int16_model(*CASES["plain"][:3], y_dtype="int8"), "ethos-u85-256")
    assert "int8 or int16 operands and output, one type" in reason


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_no_slower_than_velas(dtype, accelerator):
    """The estimator's cycles on our binary of the zoo's BATCH_MATMUL against Vela's, its
    default U85 system for both."""
    pytest.importorskip("ethosu.vela")
    from cascader import vela
    from cascader.operator_zoo import operator_model
    from cascader.sim.estimator import total_cycles

    model = operator_model("BATCH_MATMUL", dtype)
    ours = total_cycles(cascader.compile(model, accelerator=accelerator).model)
    theirs = total_cycles(vela.compile(model, accelerator=accelerator).model)
    assert ours <= 1.02 * theirs, (ours, theirs)
