"""The Ethos-U85's comparisons and logical operators (#43, frontend/lower_u85_compare): EQUAL,
NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL (two NPU operations each, as Vela 5.2's) and
LOGICAL_AND/OR/NOT (one each), per slice where the axes do not fold, bit-exact against the reference
interpreter on U85-128/256/512:

- every operator and type of operator_zoo's U85 cases on its own, on 2 seeds;
- every comparison written as Vela 5.2's binaries write it (decoded): the comparison into an int8
  map of -1/0 with OFM zero point 0, unit OFM scale and the type's clamp, then an AND with 1;
- every value pair of int8 and uint8 (256 x 256), with the operands quantized apart, alike with a
  small scale (the reference's rounding makes neighbouring codes equal), a multiplier that flushes
  to zero, scales at 0.5 and just below 1; edge-value grids of int16 and int32;
- broadcasts of either operand (rows, columns, channels, one element, a lower rank), a constant
  operand, bool operands broadcast;
- broadcasts of both operands at once (IFM_BROADCAST and IFM2_BROADCAST, as Vela); a batch above 1
  and five axes, folded into three; broadcasts that do not fold (along the batch and the width),
  one operation per batch;
- a chain of them after a pool, striped under a small SRAM budget;
- Vela 5.2's binary missing pairs the reference rounds twice;
- what stays on the CPU, with the reason: axes that take more than 64 operations, a scale the
  reference's kernel refuses, mixed operand types.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.frontend import fixed_point as fp
from cascader.operator_zoo import U85_OPERATOR_DTYPES, operator_model
from cascader.tflite.builder import ModelBuilder, quantization

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]
COMPARISONS = ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")
LOGICAL = ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT")
CASES = [(op, dt) for op in COMPARISONS + LOGICAL for dt in U85_OPERATOR_DTYPES[op]]
NUMPY = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32, "bool": np.bool_}


def _compile_on_the_npu(model, accelerator: str) -> cascader.CompiledModel:
    c = cascader.compile(model, accelerator=accelerator)
    assert [v.reason for v in c.partition.verdicts if not v.npu] == []
    return c


def _bit_exact_on_two_seeds(model, accelerator: str, tmp_path) -> cascader.CompiledModel:
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    c = _compile_on_the_npu(model, accelerator)
    path = tmp_path / "model.tflite"
    cascader.save_model(model, path)
    result = validate(path, c.binary, seeds=(0, 1), config_label=accelerator)
    assert result.bit_exact and result.elements, (result.error, result.details)
    return c


def _elementwise_modes(c: cascader.CompiledModel) -> list[str]:
    return [s.lowered.registers["sub_op"] for s in c.schedule.operations]


# The U85 comparison of each operator in Vela 5.2's binaries (LESS, LESS_EQUAL: operands swapped).
VELAS_COMPARISON = {"EQUAL": "CMP_EQ", "NOT_EQUAL": "CMP_NE", "GREATER": "CMP_GT", "GREATER_EQUAL": "CMP_GE",
                    "LESS": "CMP_GT", "LESS_EQUAL": "CMP_GE"}
LOGICAL_MODES = {"LOGICAL_AND": "AND", "LOGICAL_OR": "OR", "LOGICAL_NOT": "XOR"}


def _operations(opcode: str) -> list[str]:
    """The modes of one operator's operations: a comparison and an AND with 1, or one logical mode."""
    return [VELAS_COMPARISON[opcode], "AND"] if opcode in COMPARISONS else [LOGICAL_MODES[opcode]]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("opcode, dtype", CASES)
def test_zoo_case_is_bit_exact(opcode: str, dtype: str, accelerator: str, tmp_path):
    c = _bit_exact_on_two_seeds(operator_model(opcode, dtype), accelerator, tmp_path)
    assert _elementwise_modes(c) == _operations(opcode)  # Vela: the same (and a CMP_NE per bool input)


def _output_stage(op: dict) -> tuple:
    """What an operation's output stage does to its result: the OFM's type and zero point, the
    OFM scale, the activation's clip range and bounds."""
    act = op["activation"]
    return (op["ofm"]["dtype"], op["ofm"]["zero_point"], tuple(op["ofm_scale"]), act["clip_range"], act["min"],
            act["max"])


NPU_BOOLEAN_STAGE = ("int8", 0, (1, 0), 0, -128, 127)  # int8 -1/0, zero point 0, unit scale, int8's clamp


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("opcode, dtype", [(op, dt) for op, dt in CASES if op in COMPARISONS])
def test_comparisons_are_written_as_velas(opcode: str, dtype: str, accelerator: str):
    """No comparison relies on the output stage applying a zero point or a scale to its -1/0:
    decoded from the binaries, ours writes the comparison with OFM zero point 0, unit OFM scale
    and int8's clamp into an int8 map, and ANDs that with a constant 1 (a one-element IFM2
    broadcast) into the bool output, as Vela 5.2's binary of the same model does, operands in
    Vela's order (their zero points)."""
    pytest.importorskip("ethosu.vela")
    from cascader.sim.simulate import decode

    model = operator_model(opcode, dtype)
    (ours,) = decode(_compile_on_the_npu(model, accelerator).binary)
    (theirs,) = decode(cascader.vela.compile(model, accelerator).model)
    cmp_op, and_op = ours.operations
    assert [cmp_op["sub_op"], and_op["sub_op"]] == _operations(opcode)
    assert _output_stage(cmp_op) == NPU_BOOLEAN_STAGE
    assert and_op["ifm"]["dtype"] == "int8" and and_op["ifm"]["zero_point"] == 0
    assert and_op["ifm2"]["shape"] == (1, 1, 1) and and_op["broadcast"] == (True, True, True)
    assert and_op["ofm"]["zero_point"] == 0 and tuple(and_op["ofm_scale"]) == (1, 0)
    # Vela's last two operations (a bool input's CMP_NE to -1/0 comes first in its binary).
    vela_cmp, vela_and = theirs.operations[-2:]
    assert [vela_cmp["sub_op"], vela_and["sub_op"]] == _operations(opcode)
    assert _output_stage(vela_cmp) == NPU_BOOLEAN_STAGE
    if dtype in ("int8", "uint8"):  # the operands' zero points tell their order
        assert [(o["ifm"]["zero_point"], o["ifm2"]["zero_point"]) for o in (cmp_op, vela_cmp)] == [
            (vela_cmp["ifm"]["zero_point"], vela_cmp["ifm2"]["zero_point"])] * 2


# Modes whose result is the NPU's boolean or bits: their output stage must pass it as it is.
BOOLEAN_AND_BITWISE = {"CMP_EQ", "CMP_NE", "CMP_GE", "CMP_GT", "AND", "OR", "XOR", "NOT", "AND_NOT"}


def _u85_models():
    """Every U85-only operator's zoo models, a CAST of each type to bool, 8-bit DIVs whose
    quotients take patches (a CMP_EQ mask each), and a chain of comparisons."""
    from test_u85_cast import TYPES, _cast
    from test_u85_div import _div

    for op, dtypes in U85_OPERATOR_DTYPES.items():
        for dt in dtypes:
            yield f"{op}-{dt}", operator_model(op, dt)
    for dt in TYPES[1:]:
        yield f"CAST-{dt}-bool", _cast(dt, "bool")
    for dt, zp in (("int8", 0), ("uint8", 128)):  # test_u85_div.test_a_trained_models_divisor_is_one_convolution
        yield f"DIV-{dt}-patched", _div(dt, (1, 6, 5, 16), (1, 1, 1, 16), np.arange(2, 18) + zp,
                                         q=((0.1, zp - 3), (1.0, zp), (0.023, zp + 5)), activation="RELU")
    yield "chain", _chain()


def test_no_comparison_or_bitwise_result_is_rescaled():
    """Across the U85 lowerings (comparisons, logical operators, SELECT, CAST, DIV, REDUCE_ALL/ANY...),
    decoded from our binaries: every comparison is written as Vela writes it (an int8 -1/0, OFM
    zero point 0, unit OFM scale, int8's clamp), and every bitwise operation with OFM zero point 0
    and unit OFM scale, so none relies on the output stage rescaling or offsetting the NPU's
    boolean."""
    from cascader.sim.simulate import decode

    seen = set()
    for name, model in _u85_models():
        c = cascader.compile(model, accelerator="ethos-u85-256")
        for stream in decode(c.binary):
            for op in stream.operations:
                if op["kind"] != "elementwise" or op["sub_op"] not in BOOLEAN_AND_BITWISE:
                    continue
                seen.add(op["sub_op"])
                stage = _output_stage(op)
                if op["sub_op"].startswith("CMP_"):
                    assert stage == NPU_BOOLEAN_STAGE, (name, op["sub_op"], stage)
                assert stage[1:3] == (0, (1, 0)), (name, op["sub_op"], stage)
    assert seen == BOOLEAN_AND_BITWISE - {"NOT"}  # LOGICAL_NOT is an XOR with 1


# --- every value pair ----------------------------------------------------------------------


def _all_comparisons(shape_a, shape_b, dtype: str, qa=None, qb=None, opcodes=COMPARISONS, constant_b=None):
    """One model of every comparison in `opcodes` of the same two operands (b: an input, or the
    constant `constant_b`)."""
    b = ModelBuilder()
    x = b.add_input("a", shape_a, dtype, qa)
    y = (b.add_input("b", shape_b, dtype, qb) if constant_b is None
         else b.add_tensor("b", shape_b, dtype, qb, data=np.asarray(constant_b).reshape(shape_b)))
    out_shape = tuple(np.broadcast_shapes(tuple(shape_a), tuple(shape_b)))
    for opcode in opcodes:
        out = b.add_tensor(opcode.lower(), out_shape, "bool")
        b.add_operator(opcode, [x, y], [out])
        b.mark_output(out)
    return b.build()


def _grid(values: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every (a, b) pair of `values`: a along the rows, b along the columns."""
    a, b = np.meshgrid(values, values, indexing="ij")
    shape = (1, len(values), len(values), 1)
    return a.astype(NUMPY[dtype]).reshape(shape), b.astype(NUMPY[dtype]).reshape(shape)


def _simulated_equals_reference(model, accelerator: str, inputs: list[np.ndarray]) -> None:
    pytest.importorskip("ai_edge_litert")
    from cascader import reference
    from cascader.sim.simulate import simulate

    c = _compile_on_the_npu(model, accelerator)
    ours, theirs = simulate(c.binary, inputs), reference.run(model, inputs)
    for opcode, o, r in zip(COMPARISONS, ours, theirs):
        bad = np.argwhere(o.astype(np.int64) != r.astype(np.int64))
        assert bad.size == 0, (opcode, [(int(inputs[0][tuple(i)]), int(inputs[1][tuple(i)])) for i in bad[:5]])


def _reference_operand(code: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """What TFLite's int8/uint8 comparison compares: the code less its zero point, shifted left
    by 8 and scaled with two roundings."""
    m, e = fp.quantize_multiplier(float(np.float32(scale)))
    return fp.rounding_divide_by_pot(fp.saturating_rounding_doubling_high_mul(
        (code.astype(np.int64) - zero_point) * 256, m), -e)


def _singly_rounded_operand(code: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Vela 5.2's: the left shift folded into one rounding of the product."""
    m, e = fp.quantize_multiplier(float(np.float32(scale)))
    p = (code.astype(np.int64) - zero_point) * m
    k = 23 - e
    return (p + (1 << (k - 1))) >> k


# (scale, zero point) of each operand; the uint8 zero points are these plus 128.
EIGHT_BIT_QUANTIZATIONS = {
    "apart": ((0.05, 2), (0.03, -5)),
    "alike_small_scale": ((0.0011, 3), (0.0011, 3)),  # neighbouring codes compare equal
    "one_flushes_to_zero": ((1e-12, 0), (0.37, -100)),  # a multiplier below 2^-31 is 0
    "half_and_below_one": ((0.5, 7), (0.99999994, -8)),  # exponents 0: one rounding
    "far_apart": ((0.9, -128), (2e-4, 127)),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("case", sorted(EIGHT_BIT_QUANTIZATIONS))
def test_every_eight_bit_value_pair(case: str, dtype: str, accelerator: str):
    offset = 128 if dtype == "uint8" else 0
    (sa, za), (sb, zb) = EIGHT_BIT_QUANTIZATIONS[case]
    qa, qb = quantization(sa, za + offset), quantization(sb, zb + offset)
    info = np.iinfo(NUMPY[dtype])
    inputs = list(_grid(np.arange(info.min, info.max + 1), dtype))
    _simulated_equals_reference(_all_comparisons(inputs[0].shape, inputs[1].shape, dtype, qa, qb), accelerator, inputs)


def test_the_grid_tells_double_rounding_from_single():
    """Vela 5.2's one rounding of each operand (its binaries' IFM_SCALE without DBL_RND) gives
    other answers than the reference's two on some pairs of these quantizations: the grid above
    would catch an operand scale without DBL_RND."""
    codes = np.arange(-128, 128)
    differ = []
    for case, ((sa, za), (sb, zb)) in EIGHT_BIT_QUANTIZATIONS.items():
        ref = _reference_operand(codes, sa, za)[:, None] - _reference_operand(codes, sb, zb)[None, :]
        single = _singly_rounded_operand(codes, sa, za)[:, None] - _singly_rounded_operand(codes, sb, zb)[None, :]
        if np.any(np.sign(ref) != np.sign(single)):
            differ.append(case)
    assert "alike_small_scale" in differ, differ


def test_velas_single_rounding_misses_pairs_of_alike_small_scales():
    """Vela 5.2's binary of the same comparisons (one rounding of each operand) answers 650 of the
    65,536 int8 EQUAL pairs of the 'alike_small_scale' quantization otherwise than the reference;
    ours answers all as the reference does (test_every_eight_bit_value_pair)."""
    pytest.importorskip("ethosu.vela")
    pytest.importorskip("ai_edge_litert")
    from cascader import reference
    from cascader.sim.simulate import simulate

    (sa, za), (sb, zb) = EIGHT_BIT_QUANTIZATIONS["alike_small_scale"]
    inputs = list(_grid(np.arange(-128, 128), "int8"))
    model = _all_comparisons(inputs[0].shape, inputs[1].shape, "int8", quantization(sa, za), quantization(sb, zb),
                             opcodes=("EQUAL",))
    got = simulate(cascader.vela.compile(model, "ethos-u85-256").model, inputs)[0]
    assert int(np.sum(got.astype(int) != reference.run(model, inputs)[0].astype(int))) == 650


def _edges(dtype: str, rng: np.random.Generator, n: int) -> np.ndarray:
    info = np.iinfo(NUMPY[dtype])
    edge = [info.min, info.min + 1, -2, -1, 0, 1, 2, info.max - 1, info.max]
    rest = rng.integers(info.min, info.max, n - len(edge), endpoint=True, dtype=np.int64)
    return np.concatenate([np.asarray(edge, np.int64), rest])


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int16", "int32"])
@pytest.mark.parametrize("seed", [0, 1])
def test_wide_value_pairs_at_the_edges(dtype: str, seed: int, accelerator: str):
    """int16 and int32 compare the stored values (TFLite ignores their quantization)."""
    values = _edges(dtype, np.random.default_rng(seed), 48)
    inputs = list(_grid(values, dtype))
    q = quantization(0.02, 0) if dtype == "int16" else None
    _simulated_equals_reference(_all_comparisons(inputs[0].shape, inputs[1].shape, dtype, q, q), accelerator, inputs)


# --- broadcasts and constants ---------------------------------------------------------------

FULL = (1, 6, 5, 20)
BROADCASTS = {  # (shape of a, shape of b): the smaller one broadcast
    "second_channels": (FULL, (1, 1, 1, 20)),
    "second_rows": (FULL, (1, 6, 1, 20)),
    "second_columns_and_channels": (FULL, (1, 1, 5, 1)),
    "second_one_element": (FULL, (1, 1, 1, 1)),
    "second_lower_rank": (FULL, (20,)),
    "second_scalar": (FULL, ()),
    "first_scalar": ((), FULL),
    "first_channels": ((1, 1, 1, 20), FULL),
    "first_rows_and_channels": ((1, 6, 1, 1), FULL),
    "both_rows_and_columns": ((1, 6, 1, 20), (1, 1, 5, 20)),  # IFM_BROADCAST and IFM2_BROADCAST
    "both_channels_and_rows": ((1, 6, 5, 1), (1, 1, 5, 20)),
}


# Every type on U85-256, int8 on the other sizes too (the file's runtime).
BROADCAST_TARGETS = [("ethos-u85-256", dt) for dt in ("int8", "uint8", "int16", "int32")] + [
    (size, "int8") for size in SIZES if size != "ethos-u85-256"]


@pytest.mark.parametrize("accelerator, dtype", BROADCAST_TARGETS)
@pytest.mark.parametrize("case", sorted(BROADCASTS))
def test_broadcast_operands(case: str, dtype: str, accelerator: str, tmp_path):
    """A broadcast second operand is the IFM2's broadcast; a broadcast first one stays first for
    the ordered comparisons (the U85's IFM broadcast) and swaps for EQUAL/NOT_EQUAL; both may
    broadcast."""
    shape_a, shape_b = BROADCASTS[case]
    qa = qb = None
    if dtype in ("int8", "uint8"):
        offset = 128 if dtype == "uint8" else 0
        qa, qb = quantization(0.05, 2 + offset), quantization(0.03, -5 + offset)
    elif dtype == "int16":
        qa, qb = quantization(0.05, 0), quantization(0.03, 0)
    c = _bit_exact_on_two_seeds(_all_comparisons(shape_a, shape_b, dtype, qa, qb), accelerator, tmp_path)
    assert _elementwise_modes(c) == [m for op in COMPARISONS for m in _operations(op)]


FOLDED = {  # a batch above 1 and a fifth axis, folded into the map's three axes: operations per operator
    "batch": ((2, 6, 5, 20), (2, 6, 5, 20), 1),
    "batch_channels_broadcast": ((2, 6, 5, 20), (1, 1, 1, 20), 1),
    "per_batch_channels": ((2, 6, 5, 20), (2, 1, 1, 20), 1),
    "five_axes": ((2, 3, 4, 5, 6), (2, 3, 4, 5, 6), 1),
    "five_axes_broadcast": ((2, 3, 4, 5, 6), (3, 1, 1, 1), 1),
    "rows_of_sixteen": ((1, 24, 5, 6), (1, 24, 5, 6), 1),  # viewed as 1 x 45 x 16
    # Broadcast along the batch and the width, not the height between: one operation per batch.
    "sliced_batch": ((2, 6, 5, 20), (1, 6, 1, 20), 2),
    "sliced_both_broadcast": ((3, 1, 5, 16), (1, 4, 1, 16), 3),
    "sliced_two_axes": ((2, 3, 1, 5, 4), (1, 1, 4, 1, 4), 6),
}


def test_unbroadcast_maps_are_rows_of_sixteen_channels():
    """Without a broadcast, a depth that is not a multiple of 16 is viewed as rows of 16 channels
    (Vela reshapes so too: an eighth of the cycles of 24 x 5 x 6 on U85-256); broadcasts keep
    the tensors' axes."""
    from cascader.frontend.lower_u85_compare import folded_shapes

    assert folded_shapes((1, 24, 5, 6), [(1, 24, 5, 6)] * 2) == [(1, 45, 16)] * 3
    assert folded_shapes((2, 3, 4, 5, 6), [(2, 3, 4, 5, 6)]) == [(1, 45, 16)] * 2
    assert folded_shapes((1, 8, 8, 16), [(1, 8, 8, 16)] * 2) == [(8, 8, 16)] * 3
    assert folded_shapes((1, 24, 5, 6), [(1, 24, 5, 6), (6,)]) == [(24, 5, 6), (24, 5, 6), (1, 1, 6)]
    assert folded_shapes((2, 8, 8, 16), [(2, 8, 8, 16), (1, 8, 1, 16)]) is None  # sliced_shapes: 2 operations


@pytest.mark.parametrize("accelerator", ["ethos-u85-128", "ethos-u85-512"])
@pytest.mark.parametrize("case", sorted(FOLDED))
def test_folded_axes(case: str, accelerator: str, tmp_path):
    """Vela 5.2 takes these; the axes fold into H x W x C where every operand has or broadcasts
    each run of them (lower_u85_compare.folded_shapes), else one operation per index of the
    leading axes (sliced_shapes)."""
    shape_a, shape_b, operations = FOLDED[case]
    model = _all_comparisons(shape_a, shape_b, "int8", quantization(0.05, 2), quantization(0.03, -5))
    c = _bit_exact_on_two_seeds(model, accelerator, tmp_path)
    assert len(_elementwise_modes(c)) == 2 * len(COMPARISONS) * operations


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("shape", [(1, 1, 1, 20), ()])
def test_constant_threshold(shape, accelerator: str, tmp_path):
    """A constant threshold, per channel or one scalar (a model's typical comparison), is read
    from flash."""
    q = quantization(0.05, 2)
    thresholds = np.arange(-120, 120, 12, dtype=np.int8)[:int(np.prod(shape))]
    model = _all_comparisons(FULL, shape, "int8", q, quantization(0.04, -1), constant_b=thresholds)
    _bit_exact_on_two_seeds(model, accelerator, tmp_path)


def _logical(opcode: str, shape_a, shape_b=None):
    b = ModelBuilder()
    ins = [b.add_input("a", shape_a, "bool")] + ([b.add_input("b", shape_b, "bool")] if shape_b else [])
    out = b.add_tensor("out", tuple(np.broadcast_shapes(*[tuple(s) for s in (shape_a, shape_b) if s])), "bool")
    b.add_operator(opcode, ins, [out])
    b.mark_output(out)
    return b.build()


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("opcode, shapes", [
    ("LOGICAL_AND", ((1, 1, 5, 20), (1, 6, 5, 20))),
    ("LOGICAL_OR", ((1, 6, 5, 20), (1, 6, 1, 1))),
    ("EQUAL", ((1, 6, 5, 20), (1, 1, 1, 20))),
    ("NOT_EQUAL", ((1, 1, 1, 1), (1, 6, 5, 20))),
    ("LOGICAL_AND", ((1, 6, 1, 20), (1, 1, 5, 1))),
    ("LOGICAL_NOT", ((1, 3, 7, 33), None)),
])
def test_bool_operands(opcode: str, shapes, accelerator: str, tmp_path):
    """Bools (bytes of 0 or 1) broadcast either way; LOGICAL_NOT is an XOR with a constant 1."""
    c = _bit_exact_on_two_seeds(_logical(opcode, *shapes), accelerator, tmp_path)
    assert _elementwise_modes(c) == _operations(opcode)


def _chain():
    """A pool, then comparisons of its output with a broadcast input (its operands reversed) and a
    constant, ORed and negated: bools between NPU operations."""
    b = ModelBuilder()
    q = quantization(0.05, 3)
    x = b.add_input("x", (1, 96, 96, 16), "int8", q)
    y = b.add_input("y", (1, 96, 1, 16), "int8", quantization(0.02, -7))
    p = b.add_tensor("p", (1, 96, 96, 16), "int8", q)
    b.add_operator("MAX_POOL_2D", [x], [p], dict(padding="SAME", stride_w=1, stride_h=1, filter_width=3,
                                                 filter_height=3))
    t = b.add_tensor("t", (1, 1, 1, 16), "int8", quantization(0.04, 0),
                     data=np.arange(-8, 8, dtype=np.int8).reshape(1, 1, 1, 16))
    maps = []
    for opcode, operands in (("GREATER", [y, p]), ("LESS_EQUAL", [p, t])):
        maps.append(b.add_tensor(opcode.lower(), (1, 96, 96, 16), "bool"))
        b.add_operator(opcode, operands, [maps[-1]])
    either, out = b.add_tensor("either", (1, 96, 96, 16), "bool"), b.add_tensor("out", (1, 96, 96, 16), "bool")
    b.add_operator("LOGICAL_OR", maps, [either])
    b.add_operator("LOGICAL_NOT", [either], [out])
    b.mark_output(out)
    return b.build()


@pytest.mark.parametrize("accelerator", ["ethos-u85-128", "ethos-u85-512"])
def test_a_chain_striped_under_a_small_budget(accelerator: str, tmp_path):
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    model = _chain()
    c = cascader.compile(model, accelerator=accelerator, sram="48KiB")
    assert [v.reason for v in c.partition.verdicts if not v.npu] == []
    assert len(c.schedule.operations) > 5  # striped: more stripes than operations
    path = tmp_path / "model.tflite"
    cascader.save_model(model, path)
    result = validate(path, c.binary, seeds=(0, 1), config_label=accelerator)
    assert result.bit_exact, (result.error, result.details)


# --- what stays on the CPU ------------------------------------------------------------------


def _cpu_reasons(model) -> list[str]:
    c = cascader.compile(model, accelerator="ethos-u85-256")
    return [v.reason for v in c.partition.verdicts if not v.npu]


def test_axes_that_take_too_many_operations_stay_on_the_cpu():
    """A broadcast along the batch and the width but not the height between takes an operation
    per batch: beyond MAX_SLICES of them, the operator stays on the CPU."""
    from cascader.frontend.lower_u85_compare import MAX_SLICES

    q = quantization(0.05, 0)
    c = cascader.compile(_all_comparisons((MAX_SLICES + 1, 4, 4, 16), (1, 4, 1, 16), "int8", q, q,
                                          opcodes=("LESS",)), accelerator="ethos-u85-256")
    assert [v.rule for v in c.partition.verdicts if not v.npu] == ["comparison_shapes"]


def test_a_scale_the_reference_refuses_stays_on_the_cpu():
    """TFLite's int8 comparison takes each scale as a multiplier below one (its kernel aborts on
    1.0): the operator stays on the CPU, whose kernel says so."""
    reasons = _cpu_reasons(_all_comparisons(FULL, FULL, "int8", quantization(1.0, 0), quantization(0.5, 0),
                                            opcodes=("GREATER",)))
    assert len(reasons) == 1 and "scale in (0, 1)" in reasons[0]


def test_mixed_operand_types_stay_on_the_cpu():
    b = ModelBuilder()
    x = b.add_input("a", FULL, "int8", quantization(0.05, 0))
    y = b.add_input("b", FULL, "int16", quantization(0.05, 0))
    out = b.add_tensor("out", FULL, "bool")
    b.add_operator("EQUAL", [x, y], [out])
    b.mark_output(out)
    reasons = _cpu_reasons(b.build())
    assert len(reasons) == 1 and "to bool" in reasons[0]


def test_int64_stays_on_the_cpu():
    """The U85 compares 8-, 16- and 32-bit maps (Vela 5.2 fails on int64: no OFM micro-block)."""
    reasons = _cpu_reasons(_all_comparisons(FULL, FULL, "int64", opcodes=("EQUAL",)))
    assert len(reasons) == 1 and "int64" in reasons[0]
