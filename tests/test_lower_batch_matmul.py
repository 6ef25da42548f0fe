"""BATCH_MATMUL on the NPU against the reference kernel, and the zoo transformer block.

Every case compiles for ethos-u55-128 and ethos-u65-256 and runs two seeds of random inputs
through the simulator and TFLite's reference interpreter, at the edges of the lowering (see
`cascader.frontend.lower_batch_matmul`): adj_x / adj_y, ranks 2 to 5, batch axes that fold or
broadcast (or neither), one row, one column or K = 1, products in int16 and int32, rescales
above one and far below, sums split by the scratch budget and by the NPU's height limit, an
output written into a concatenation, and a constant y (convolutions, or the MULs where its
weight sum is beyond the accumulator budget).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
import cascader.vela as vela
from cascader import zoo
from cascader.frontend.lower_batch_matmul import PRODUCTS_PER_OPERAND, SUM_SCRATCH_BYTES, product_type
from cascader.lowering import lower
from cascader.planner import plan
from cascader.sim import decode
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter, random_inputs  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
SMALL_ZERO_POINTS = (3, -5, 1)  # int16 products
WIDE_ZERO_POINTS = (-128, 100, -20)  # int32 products


def _model(x_shape, y_shape, out_shape, adj_x=False, adj_y=False, zero_points=SMALL_ZERO_POINTS,
           scales=(0.05, 0.04, 0.3), y_constant=None, concat_with=None):
    b = ModelBuilder()
    x = b.add_input("x", x_shape, "int8", quantization(scales[0], zero_points[0]))
    if y_constant is None:
        y = b.add_input("y", y_shape, "int8", quantization(scales[1], zero_points[1]))
    else:
        y = b.add_constant("y", y_constant, "int8", quantization(scales[1], zero_points[1]))
    z = b.add_tensor("z", out_shape, "int8", quantization(scales[2], zero_points[2]))
    b.add_operator("BATCH_MATMUL", [x, y], [z], {"adj_x": adj_x, "adj_y": adj_y}, version=2)
    if concat_with is not None:  # the product is written into a slice of a concatenation
        w = b.add_input("w", concat_with, "int8", quantization(scales[2], zero_points[2]))
        joined = (*out_shape[:-1], out_shape[-1] + concat_with[-1])
        c = b.add_tensor("joined", joined, "int8", quantization(scales[2], zero_points[2]))
        b.add_operator("CONCATENATION", [z, w], [c], {"axis": len(out_shape) - 1}, version=2)
        z = c
    b.mark_output(z)
    return b.build()


def _check(model, accelerator, seeds=(0, 1)):
    compiled = cascader.compile(model, accelerator=accelerator)
    assert compiled.summary().cpu_operators == 0
    for seed in seeds:
        inputs = random_inputs(model, seed=seed)
        ours = cascader.simulate(compiled, inputs)[0]
        reference = ReferenceInterpreter(model).run(inputs)[0]
        wrong = np.nonzero(ours != reference)
        assert not wrong[0].size, (seed, [(int(ours[i]), int(reference[i])) for i in zip(*wrong)][:5])
    return compiled


def _kinds(compiled) -> list[str]:
    return [op["kind"] for stream in decode(compiled) for op in stream.operations]


CASES = {
    # adj flags, odd sizes: both, one or neither operand transposed.
    "plain": ((2, 5, 19), (2, 19, 7), (2, 5, 7)),
    "adj_x": ((2, 19, 5), (2, 19, 7), (2, 5, 7), True, False),
    "adj_y": ((2, 5, 19), (2, 7, 19), (2, 5, 7), False, True),
    "adj_x_adj_y": ((2, 19, 5), (2, 7, 19), (2, 5, 7), True, True),
    "int32_products": ((2, 5, 19), (2, 19, 7), (2, 5, 7), False, False, WIDE_ZERO_POINTS),
    # ranks: 2-D, attention's (1, heads, sequence, depth), a 4-D batch above 1, 5-D.
    "rank2": ((5, 19), (19, 7), (5, 7)),
    "attention_scores": ((1, 2, 16, 8), (1, 2, 16, 8), (1, 2, 16, 16), False, True),
    "attention_context": ((1, 2, 16, 16), (1, 2, 16, 8), (1, 2, 16, 8), False, False, (-128, 4, -3)),
    "rank4_batches": ((2, 3, 4, 16), (2, 3, 16, 8), (2, 3, 4, 8)),
    "rank5": ((2, 1, 2, 16, 4), (2, 1, 2, 16, 8), (2, 1, 2, 4, 8), True, False),
    # broadcast batches: y 2-D, y batch 1, x batch 1, and each broadcast along a different axis.
    "y_2d": ((3, 4, 16), (16, 8), (3, 4, 8)),
    "y_batch_1": ((3, 4, 16), (1, 8, 16), (3, 4, 8), False, True),
    "x_batch_1": ((1, 4, 16), (3, 16, 8), (3, 4, 8)),
    "crossed_broadcast": ((2, 1, 4, 16), (1, 3, 16, 8), (2, 3, 4, 8)),
    # one row, one column, K = 1.
    "one_row": ((3, 1, 16), (3, 16, 8), (3, 1, 8)),
    "one_column": ((3, 5, 16), (3, 16, 1), (3, 5, 1)),
    "k_1": ((2, 1, 5), (2, 7, 1), (2, 5, 7), True, True),
    "dot_products": ((4, 1, 33), (4, 33, 1), (4, 1, 1), False, False, WIDE_ZERO_POINTS),
    # rescales: above one (left shift), and far below; many outputs with a small shift, where
    # the reference's two roundings differ from one about once in 300.
    "rounding": ((4, 32, 2), (4, 2, 32), (4, 32, 32), False, False, (0, 0, 0), (0.05, 0.04, 0.45)),
    # rescales: above one (left shift), and far below.
    "rescale_above_one": ((2, 5, 3), (2, 3, 7), (2, 5, 7), False, False, SMALL_ZERO_POINTS, (0.05, 0.04, 0.0015)),
    "rescale_tiny": ((2, 5, 64), (2, 64, 7), (2, 5, 7), False, False, WIDE_ZERO_POINTS, (0.002, 0.003, 2.5)),
}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("case", list(CASES))
def test_batch_matmul_bit_exact(case, accelerator):
    compiled = _check(_model(*CASES[case]), accelerator)
    kinds = _kinds(compiled)
    assert "elementwise" in kinds and "pool" in kinds and "conv" not in kinds


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_products_beyond_the_scratch_budget_are_summed_in_pieces(accelerator):
    # 64 rows x K 256 of int32 products per column: 64 KiB, the whole budget, so one sum each.
    model = _model((1, 64, 256), (1, 256, 64), (1, 64, 64), zero_points=WIDE_ZERO_POINTS, scales=(0.02, 0.02, 2.0))
    assert 64 * 256 * 4 >= SUM_SCRATCH_BYTES
    compiled = _check(model, accelerator)
    sums = [op for stream in decode(compiled) for op in stream.operations if op.get("sub_op") == "REDUCE_SUM"]
    assert len(sums) > 1


def _products_bytes(model, least_scratch: bool) -> int:
    _, segments = lower(model, least_scratch=least_scratch)
    return max(size for seg in segments for b, size in seg.buffers.items() if "products" in seg.scratch.get(b, ""))


def test_a_least_scratch_lowering_takes_products_of_a_few_operands():
    # Attention scores, 2 heads x 16 x 16 by 8: 256 B operands, so at most 1 KiB of products
    # least_scratch; the default takes up to SUM_SCRATCH_BYTES (all 2 x 16 x 16 x 8 int16 products).
    model = _model(*CASES["attention_scores"])
    assert _products_bytes(model, least_scratch=True) <= PRODUCTS_PER_OPERAND * 2 * 16 * 16
    assert _products_bytes(model, least_scratch=False) == 2 * 16 * 16 * 8 * 2


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_every_frontier_point_of_the_transformer_block_compiles_within_it(accelerator):
    """zoo transformer_block: 512 B maps, whose scores products took 16 KiB and set the least
    SRAM (18,432 B on U55-128, Vela's Size 9,344 B). The frontier has the least-scratch lowering's
    points too (below 5 KiB), and the fastest is the default lowering's; each point compiles
    within its SRAM to a bit-exact binary, the least-scratch ones from that lowering."""
    model = zoo.transformer_block()
    frontier = plan(model, accelerator=accelerator)
    # The least with every map in SRAM (on Dedicated_Sram the DRAM points go lower).
    assert frontier.resident.least_scratch and frontier.resident.sram_bytes < 5 * 1024
    assert not frontier.points[-1].least_scratch
    assert frontier.points[-1].cycles < frontier.resident.cycles
    for point in frontier.points:
        compiled = cascader.compile(model, sram=point.sram_bytes, accelerator=accelerator)
        assert compiled.sram_bytes <= point.sram_bytes
        for seed in (0, 1):
            inputs = random_inputs(model, seed=seed)
            np.testing.assert_array_equal(cascader.simulate(compiled, inputs)[0],
                                          ReferenceInterpreter(model).run(inputs)[0])
    smallest = cascader.compile(model, accelerator=accelerator, optimise="size")
    assert smallest.sram_bytes <= frontier.resident.sram_bytes
    if accelerator.startswith("ethos-u55"):  # Shared_Sram: below the least, nothing fits (no DRAM)
        with pytest.raises(cascader.InfeasibleError) as e:
            cascader.compile(model, sram=frontier.points[0].sram_bytes - 1024, accelerator=accelerator)
        assert e.value.minimum_sram <= frontier.points[0].sram_bytes


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_batches_beyond_the_npu_height_are_split(accelerator):
    # 300 batches x 256 rows sum as one map of 76,800 rows: above 65,535, so in two.
    _check(_model((300, 256, 1), (300, 1, 1), (300, 256, 1)), accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_output_written_into_a_concatenation(accelerator):
    _check(_model((2, 5, 16), (2, 16, 7), (2, 5, 7), concat_with=(2, 5, 3)), accelerator)


CONSTANT_CASES = {
    "y_2d": ((3, 5, 19), (19, 7), (3, 5, 7), False, False, (3, -7, 2), (0.05, 0.04, 0.3)),
    "y_batched_adj": ((2, 19, 5), (2, 7, 19), (2, 5, 7), True, True, (3, -7, 2), (0.05, 0.04, 0.3)),
    "y_broadcast_to_x": ((2, 3, 5, 19), (1, 3, 19, 7), (2, 3, 5, 7), False, False, (3, -7, 2), (0.05, 0.04, 0.3)),
    "rounding": ((4, 32, 2), (2, 32), (4, 32, 32), False, False, (0, 0, 0), (0.05, 0.04, 0.45)),
}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("case", list(CONSTANT_CASES))
def test_constant_y_is_a_convolution(case, accelerator):
    x_shape, y_shape, out_shape, adj_x, adj_y, zero_points, scales = CONSTANT_CASES[case]
    y = np.random.default_rng(7).integers(-128, 128, size=y_shape).astype(np.int8)
    model = _model(x_shape, y_shape, out_shape, adj_x, adj_y, zero_points, scales, y_constant=y)
    kinds = _kinds(_check(model, accelerator))
    assert "conv" in kinds and "elementwise" not in kinds


def test_constant_y_beyond_the_accumulator_budget_keeps_the_multiplies():
    # |y - zp| = 255 over K = 33,000: 8.4 million per column, above 127 * 65536.
    k = 33_000
    y = np.full((k, 1), -128, np.int8)
    model = _model((1, k), (k, 1), (1, 1), zero_points=(0, 127, 0), scales=(0.01, 0.01, 40.0), y_constant=y)
    kinds = _kinds(_check(model, "ethos-u55-128"))
    assert "conv" not in kinds and "elementwise" in kinds


def test_product_type_follows_the_zero_points():
    assert product_type(0, 0) == "int16"  # 128 * 128
    assert product_type(53, -53) == "int16"  # 181 * 180 = 32580
    assert product_type(54, -54) == "int32"  # 182 * 181 = 32942
    assert product_type(54, 0) == "int16"  # 182 * 128
    assert product_type(-128, 0) == "int16"  # 255 * 128 = 32640
    assert product_type(-128, 4) == "int32"  # 255 * 132: a softmax output by most maps


@settings(max_examples=12, deadline=None)
@given(batch=st.integers(1, 3), m=st.integers(1, 9), k=st.integers(1, 40), n=st.integers(1, 9),
       adj_x=st.booleans(), adj_y=st.booleans(), zp_x=st.integers(-128, 127), zp_y=st.integers(-128, 127),
       out_scale=st.floats(0.01, 4.0), seed=st.integers(0, 3))
def test_batch_matmul_any_shape_and_quantization(batch, m, k, n, adj_x, adj_y, zp_x, zp_y, out_scale, seed):
    model = _model((batch, k, m) if adj_x else (batch, m, k), (batch, n, k) if adj_y else (batch, k, n),
                   (batch, m, n), adj_x, adj_y, (zp_x, zp_y, 0), (0.05, 0.04, out_scale))
    _check(model, "ethos-u55-128", seeds=(seed,))


def test_int16_batch_matmul_stays_on_the_cpu_with_its_reason():
    b = ModelBuilder()
    x = b.add_input("x", (2, 4, 8), "int16", quantization(0.01, 0))
    y = b.add_input("y", (2, 8, 4), "int16", quantization(0.01, 0))
    z = b.add_tensor("z", (2, 4, 4), "int16", quantization(0.05, 0))
    b.add_operator("BATCH_MATMUL", [x, y], [z], {"adj_x": False, "adj_y": False}, version=3)
    b.mark_output(z)
    report = cascader.inspect(b.build())
    assert report.operators[0].target == "CPU" and report.operators[0].rule == "batch_matmul_int8"


def test_cycles_against_vela():
    """Both binaries costed by the same estimator, command by command as the NPU runs them
    (stripes="as_run"): at most Vela's cycles on every case (measured ratios are in the commit
    message), and a constant y far below (convolutions). The default yardstick costs Vela's
    MUL and REDUCE_SUM per column as Vela's own MatMul figure does (cycle_model.hpp
    estimate_matmul, its int32 products counted as one byte each); on that one, attention_context
    on U55-128 is 7.6% above Vela's (5,408 vs 5,024 cycles), the other cases below."""
    try:
        vela.executable()
    except vela.VelaNotInstalled:
        pytest.skip("Vela is not installed")
    y = np.random.default_rng(7).integers(-128, 128, size=(19, 7)).astype(np.int8)
    models = {name: _model(*CASES[name]) for name in ("plain", "attention_scores", "attention_context", "rank4_batches")}
    models["constant"] = _model((3, 5, 19), (19, 7), (3, 5, 7), zero_points=(3, -7, 2), y_constant=y)
    for accelerator in ACCELERATORS:
        for name, model in models.items():
            ours = cascader.compile(model, accelerator=accelerator).estimate(stripes="as_run").total_cycles
            theirs = vela.compile(model, accelerator).estimate(stripes="as_run").total_cycles
            assert ours <= theirs * (0.25 if name == "constant" else 1.0), (accelerator, name, ours, theirs)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_transformer_block_bit_exact_with_only_gelu_on_the_cpu(accelerator):
    model = zoo.transformer_block()
    compiled = cascader.compile(model, accelerator=accelerator)
    on_cpu = {o.opcode for o in cascader.inspect(model).operators if o.target == "CPU"}
    assert on_cpu <= {"GELU"}, on_cpu  # GELU is lowered on another branch; everything else is on the NPU
    assert [o.opcode for o in model.main.operators].count("BATCH_MATMUL") == 2
    for seed in (0, 1):
        inputs = random_inputs(model, seed=seed)
        np.testing.assert_array_equal(cascader.simulate(compiled, inputs)[0], ReferenceInterpreter(model).run(inputs)[0])
