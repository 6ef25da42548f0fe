"""Ethos-U85 chaining (#43, cascader.u85_chaining): an operation's OFM kept in a chaining buffer
for the next elementwise operation instead of a map in memory, along chains of up to 4
operations (Vela 5.2's reach).

- the comparisons' CMP into their AND with 1, a SELECT's AND_NOT into its OR, a CAST to bool's
  CMP_NE into its AND: the storage fields decoded from the binary (OFM CHAINED on the first, the
  operand CHAINED on the second, one OFM block for both), bit-exact on 2 seeds on U85-128/256/512,
  and the map between them given no bytes by the layout;
- chains of 3 and 4 elementwise operations, each map in the next chaining buffer (REGION 0, 1,
  2), and chains headed by a convolution, a depthwise convolution, a matrix product, an
  average and a max pooling: bit-exact likewise;
- the cycle model costs each chain as the estimator costs the binary (planned = estimated), each
  chain faster than its operations apart, and the comparisons cost what Vela 5.2's binaries of
  them cost (which chain the same pair);
- no chain where a map is read twice (or by a third operation), is a graph output, where a
  cascade stripes an operation, beyond 4 operations or 3 operands from memory, nor on the
  Ethos-U55/U65.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.operator_zoo import operator_model
from cascader.sim.estimator import total_cycles
from cascader.sim.simulate import decode
from cascader.tflite.builder import ModelBuilder, quantization
from cascader.u85_chaining import chained_buffers, with_chains
from cascader.zoo import lstm_kws, softmax
from test_u85_cast import _cast
from test_u85_lowering import SIZES, _bit_exact_on_the_npu

CHAINED = 2  # IFM/IFM2/OFM_PRECISION's storage field

# A model -> the elementwise modes of its chained pair and the operand the second reads from the
# chaining buffer.
PAIRS = {
    "EQUAL-int8": (lambda: operator_model("EQUAL", "int8"), "CMP_EQ", "AND", "ifm"),
    "LESS-uint8": (lambda: operator_model("LESS", "uint8"), "CMP_GT", "AND", "ifm"),
    "GREATER_EQUAL-int16": (lambda: operator_model("GREATER_EQUAL", "int16"), "CMP_GE", "AND", "ifm"),
    "NOT_EQUAL-int32": (lambda: operator_model("NOT_EQUAL", "int32"), "CMP_NE", "AND", "ifm"),
    "EQUAL-bool": (lambda: operator_model("EQUAL", "bool"), "CMP_EQ", "AND", "ifm"),
    "SELECT-int8": (lambda: operator_model("SELECT", "int8"), "AND_NOT", "OR", "ifm2"),
    "SELECT_V2-int32": (lambda: operator_model("SELECT_V2", "int32"), "AND_NOT", "OR", "ifm2"),
    "CAST-int16-bool": (lambda: _cast("int16", "bool"), "CMP_NE", "AND", "ifm"),
}
STORAGE = {"ifm": (CHAINED, 0, 0), "ifm2": (0, CHAINED, 0)}


def _chained_pairs(c: cascader.CompiledModel) -> list[tuple[dict, dict]]:
    """The decoded operations whose OFM is chained, each with the operation after it."""
    (stream,) = decode(c.binary)
    ops = [o for o in stream.operations if o["kind"] != "dma"]
    return [(a, b) for a, b in zip(ops, ops[1:]) if a["u85"]["storage"][2] == CHAINED]


def _chains(schedule) -> list[list]:
    """The scheduled operations of each chain, in order."""
    chains: list[list] = []
    for sop in schedule.operations:
        maps = dict(sop.chain)
        if maps and "ifm" not in maps and "ifm2" not in maps:
            chains.append([sop])
        elif maps:
            chains[-1].append(sop)
    return chains


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(PAIRS))
def test_pairs_chain_bit_exactly_without_their_scratch_map(case: str, accelerator: str, tmp_path):
    model, first_mode, second_mode, operand = PAIRS[case]
    c = _bit_exact_on_the_npu(model(), accelerator, tmp_path)
    pairs = _chained_pairs(c)
    assert (first_mode, second_mode, (0, 0, CHAINED), STORAGE[operand]) in [
        (a["sub_op"], b["sub_op"], a["u85"]["storage"], b["u85"]["storage"]) for a, b in pairs]
    assert all(a["block"] == b["block"] for a, b in pairs)
    # The scratch maps between them are laid out with no bytes.
    scratch = c.schedule.segments[0].segment.scratch
    names = {scratch[b] for b in chained_buffers(c.schedule)}
    assert len(names) == len(pairs)
    assert [b.size for b in c.layout.buffers if b.name in names] == [0] * len(pairs)


def _planned_as_estimated(c: cascader.CompiledModel, accelerator: str) -> list[list]:
    """`c`'s chains, after checking the binary costs what was planned and each chain is faster
    than its operations apart, costed as its first operation, in buffers 0, 1, 2..."""
    assert total_cycles(c.binary, accelerator=accelerator) == pytest.approx(c.schedule.total_cycles)
    chains = _chains(c.schedule)
    for chain in chains:
        assert 2 <= len(chain) <= 4
        assert chain[0].cost.total_cycles < sum(s.unchained_cost.total_cycles for s in chain)
        assert all(s.cost.total_cycles == 0 for s in chain[1:])
        for i, sop in enumerate(chain):
            maps = dict(sop.chain)
            assert maps.get("ofm") == (i if i + 1 < len(chain) else None)
            assert i == 0 or maps.get("ifm", maps.get("ifm2")) == i - 1
    return chains


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(PAIRS))
def test_the_pair_is_planned_as_estimated(case: str, accelerator: str):
    c = cascader.compile(PAIRS[case][0](), accelerator=accelerator)
    assert _planned_as_estimated(c, accelerator)


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", [("EQUAL", "int8"), ("LESS_EQUAL", "int8"), ("GREATER", "uint8"),
                                  ("NOT_EQUAL", "int16"), ("LESS", "int32")], ids="-".join)
def test_comparisons_cost_velas_cycles(case, accelerator: str):
    """Vela 5.2 chains the CMP into the AND too: both binaries cost the same on the estimator
    (unchained, ours cost 1.25-1.41x Vela's on the 8-bit comparisons)."""
    pytest.importorskip("ethosu.vela")
    model = operator_model(*case)
    ours = total_cycles(cascader.compile(model, accelerator=accelerator).binary, accelerator=accelerator)
    vela = total_cycles(cascader.vela.compile(model, accelerator).model, accelerator=accelerator)
    assert ours <= 1.02 * vela


def test_a_mask_read_twice_is_not_chained():
    """A SELECT's CMP_NE mask feeds its AND and its AND_NOT: it stays in memory, and only the
    AND_NOT (whose OFM only the OR reads) chains."""
    c = cascader.compile(operator_model("SELECT", "int8"), accelerator="ethos-u85-256")
    chains = [(s.lowered.registers["sub_op"], s.chain) for s in c.schedule.operations]
    assert chains == [("CMP_NE", ()), ("AND", ()), ("AND_NOT", (("ofm", 0),)), ("OR", (("ifm2", 0),))]


def test_no_chains_on_the_u55_and_u65():
    """A softmax's elementwise pairs chain on the U85 only."""
    model = softmax((1, 2, 16, 16), dtype="int8")
    assert any(s.chain for s in cascader.compile(model, accelerator="ethos-u85-256").schedule.operations)
    for accelerator in ("ethos-u55-128", "ethos-u65-256"):
        c = cascader.compile(model, accelerator=accelerator)
        assert with_chains(c.schedule) is c.schedule and not any(s.chain for s in c.schedule.operations)


def test_cascaded_stripes_are_not_chained(tmp_path):
    """Under a small SRAM budget the comparisons after a pool are striped in a cascade: no stripe
    is chained, the whole operations left may be, and the binary stays bit-exact."""
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate
    from test_u85_compare import _chain

    model = _chain()
    c = cascader.compile(model, accelerator="ethos-u85-256", sram="48KiB")
    assert any(s.cascade is not None for s in c.schedule.operations)
    assert all(not s.chain for s in c.schedule.operations if s.cascade is not None)
    path = tmp_path / "model.tflite"
    cascader.save_model(model, path)
    result = validate(path, c.binary, seeds=(0, 1), config_label="ethos-u85-256")
    assert result.bit_exact, (result.error, result.details)
    assert total_cycles(c.binary, accelerator="ethos-u85-256") == pytest.approx(c.schedule.total_cycles)


LOWERINGS = {
    "softmax_int8": lambda: softmax((1, 2, 16, 16), dtype="int8"),  # MUL into SHR
    "softmax_int16": lambda: softmax((1, 2, 16, 16), dtype="int16"),  # SUB into MUL
    "lstm_int8": lambda: lstm_kws(steps=4),  # the gates' MUL into ADD, SUB into SHL...
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(LOWERINGS))
def test_other_lowerings_chain_their_elementwise_pairs(case: str, accelerator: str, tmp_path):
    c = _bit_exact_on_the_npu(LOWERINGS[case](), accelerator, tmp_path)
    pairs = _chained_pairs(c)
    assert pairs and all(b["u85"]["storage"] in STORAGE.values() and a["block"] == b["block"] for a, b in pairs)
    assert len(chained_buffers(c.schedule)) == len(pairs)


# Chains of up to 4 operations and chains headed by other kinds of operation, built from model
# operators: each TFLite operator below lowers to one NPU operation.
SHAPE = (1, 16, 16, 32)


def _input(b: ModelBuilder, name: str, shape=SHAPE, scale: float = 0.05, zero_point: int = 3) -> int:
    return b.add_input(name, shape, "int8", quantization(scale, zero_point))


def _map(b: ModelBuilder, name: str, shape=SHAPE, scale: float = 0.1) -> int:
    return b.add_tensor(name, shape, "int8", quantization(scale, 0))


def _elementwise(ops: list[str], output_too: int | None = None) -> object:
    """ABS(x) then `ops` ("ADD"/"MUL": with an input of their own; "ABS"), each into a model
    tensor; `output_too`: the index of an intermediate map (0: ABS(x)'s) also made a graph output."""
    b = ModelBuilder()
    t = _map(b, "abs")
    b.add_operator("ABS", [_input(b, "x")], [t])
    maps = [t]
    for i, opcode in enumerate(ops):
        out = _map(b, f"t{i}_{opcode.lower()}", scale=0.1 * (i + 2))
        operands = [t, _input(b, f"in{i}", scale=0.04, zero_point=-2)] if opcode in ("ADD", "MUL") else [t]
        b.add_operator(opcode, operands, [out])
        maps.append(t := out)
    b.mark_output(t)
    if output_too is not None:
        b.mark_output(maps[output_too])
    return b.build()


def _weights(shape):
    return dict(data=np.random.default_rng(7).integers(-60, 60, shape).astype(np.int8))


def _headed(kind: str) -> object:
    """A `kind` operator whose output an ADD of another input then reads."""
    b = ModelBuilder()
    x = _input(b, "x")
    if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        depthwise = kind == "DEPTHWISE_CONV_2D"
        oc = 32 if depthwise else 16
        shape = (1, 3, 3, 32) if depthwise else (16, 3, 3, 32)
        w = b.add_tensor("w", shape, "int8", quantization(0.01, 0), **_weights(shape))
        bias = b.add_tensor("bias", (oc,), "int32", quantization(0.0005, 0), data=np.arange(oc, dtype=np.int32))
        out_shape = (1, 16, 16, oc)
        head = _map(b, "head", out_shape)
        options = dict(padding="SAME", stride_w=1, stride_h=1)
        if depthwise:
            options["depth_multiplier"] = 1
        b.add_operator(kind, [x, w, bias], [head], options)
    elif kind == "BATCH_MATMUL":
        y = _input(b, "y", shape=(1, 32, 24), scale=0.04, zero_point=0)
        x = _input(b, "v", shape=(1, 64, 32), zero_point=0)
        out_shape = (1, 64, 24)
        head = _map(b, "head", out_shape)
        b.add_operator(kind, [x, y], [head], dict(adj_x=False, adj_y=False))
    else:  # a pooling
        out_shape = SHAPE
        head = _map(b, "head", out_shape)
        b.add_operator(kind, [x], [head], dict(padding="SAME", stride_w=1, stride_h=1, filter_width=3, filter_height=3))
    out = _map(b, "out", out_shape, scale=0.2)
    b.add_operator("ADD", [head, _input(b, "other", out_shape, scale=0.04, zero_point=-2)], [out])
    b.mark_output(out)
    return b.build()


def chain_positions(ops: list[dict]) -> list[list[int]]:
    """The positions in `ops` (decoded operations) of each chain's operations."""
    chains: list[list[int]] = []
    for i, o in enumerate(ops):
        if o["kind"] == "dma":
            continue
        ifm, ifm2, ofm = o["u85"]["storage"]
        if CHAINED in (ifm, ifm2):
            chains[-1].append(i)
        elif ofm == CHAINED:
            chains.append([i])
    return chains


def _stream_chains(c: cascader.CompiledModel) -> list[list[dict]]:
    """The decoded operations of each chain."""
    (stream,) = decode(c.binary)
    return [[stream.operations[i] for i in chain] for chain in chain_positions(stream.operations)]


def _chain_in_buffers(chain: list[dict]) -> None:
    """Each map between two operations of a chain in the next buffer, one OFM block for all."""
    for i, (a, b) in enumerate(zip(chain, chain[1:])):
        assert a["u85"]["storage"][2] == CHAINED and a["ofm"]["region"] == i
        chained = "ifm" if b["u85"]["storage"][0] == CHAINED else "ifm2"
        assert b[chained]["region"] == i
    assert chain[-1]["u85"]["storage"][2] == 0
    assert len({o["block"] for o in chain}) == 1


LONG = {  # ABS(x) then these -> the sub-ops of its chains
    "three": (["ADD", "MUL"], [["ABS", "ADD", "MUL"]]),
    "four": (["ADD", "MUL", "ABS"], [["ABS", "ADD", "MUL", "ABS"]]),
    # A fifth operation starts no chain of its own (none after it to chain into).
    "five": (["ADD", "MUL", "ABS", "ABS"], [["ABS", "ADD", "MUL", "ABS"]]),
    # 4 operands from memory (x and each binary operation's other input): no chain of all 4;
    # of the 3 first, none faster than apart, so the last two chain.
    "memory_operands": (["ADD", "MUL", "ADD"], [["MUL", "ADD"]]),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(LONG))
def test_chains_of_three_and_four(case: str, accelerator: str, tmp_path):
    ops, expected = LONG[case]
    c = _bit_exact_on_the_npu(_elementwise(ops), accelerator, tmp_path)
    chains = _planned_as_estimated(c, accelerator)
    assert [[s.lowered.registers["sub_op"] for s in chain] for chain in chains] == expected
    decoded = _stream_chains(c)
    assert [[o["sub_op"] for o in chain] for chain in decoded] == expected
    for chain in decoded:
        _chain_in_buffers(chain)
    names = {b for b in chained_buffers(c.schedule)}
    assert len(names) == sum(len(chain) - 1 for chain in expected)
    scratch = {s.lowered.ofm.buffer: s.lowered.ofm for s in c.schedule.operations}
    assert all(scratch[b].buffer == b for b in names)


HEADS = {  # a TFLite operator -> the kind of the NPU operation heading the chain
    "CONV_2D": "conv",
    "DEPTHWISE_CONV_2D": "depthwise",
    "BATCH_MATMUL": "conv",
    "AVERAGE_POOL_2D": "pool",
    "MAX_POOL_2D": "pool",
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("head", sorted(HEADS))
def test_chains_start_at_other_kinds(head: str, accelerator: str, tmp_path):
    c = _bit_exact_on_the_npu(_headed(head), accelerator, tmp_path)
    chains = _planned_as_estimated(c, accelerator)
    # On the U85-128 the cycle model finds a pooling and its ADD no faster chained: no chain.
    if not (head.endswith("POOL_2D") and accelerator == "ethos-u85-128"):
        assert [[s.lowered.kind for s in chain] for chain in chains] == [[HEADS[head], "elementwise"]]
    for decoded in _stream_chains(c):
        _chain_in_buffers(decoded)


def test_a_map_a_third_operation_reads_is_not_chained():
    """MUL(t, ABS(t)): t is read twice, so ABS(x) -> t stays in memory; ABS -> MUL chains."""
    b = ModelBuilder()
    t, u, out = _map(b, "t"), _map(b, "u"), _map(b, "out", scale=0.3)
    b.add_operator("ABS", [_input(b, "x")], [t])
    b.add_operator("ABS", [t], [u])
    b.add_operator("MUL", [u, t], [out])
    b.mark_output(out)
    c = cascader.compile(b.build(), accelerator="ethos-u85-256")
    chains = _planned_as_estimated(c, "ethos-u85-256")
    assert [[dict(s.chain) for s in chain] for chain in chains] == [[{"ofm": 0}, {"ifm": 0}]]
    assert chains[0][0].lowered.ifm.buffer == c.schedule.operations[0].lowered.ofm.buffer


def test_a_graph_output_is_not_chained():
    """ABS -> ADD -> MUL -> ABS, the ADD's output a graph output too: the chain stops there."""
    c = cascader.compile(_elementwise(["ADD", "MUL", "ABS"], output_too=1), accelerator="ethos-u85-256")
    chains = _planned_as_estimated(c, "ethos-u85-256")
    assert [[s.lowered.registers["sub_op"] for s in chain] for chain in chains] == [["ABS", "ADD"], ["MUL", "ABS"]]


def test_heads_and_long_chains_not_on_the_u55_and_u65():
    for model in (_elementwise(["ADD", "MUL", "ABS"]), _headed("CONV_2D")):
        for accelerator in ("ethos-u55-128", "ethos-u65-256"):
            c = cascader.compile(model, accelerator=accelerator)
            assert with_chains(c.schedule) is c.schedule and not any(s.chain for s in c.schedule.operations)


def test_the_memory_operands_limit_is_what_stops_the_chain(monkeypatch):
    """Without Vela's limit of 3 operands from memory, LONG["memory_operands"] would chain all 4
    (faster on the cycle model)."""
    import cascader.u85_chaining as chaining

    monkeypatch.setattr(chaining, "MAX_MEMORY_OPERANDS", 4)
    c = cascader.compile(_elementwise(LONG["memory_operands"][0]), accelerator="ethos-u85-256")
    assert [len(chain) for chain in _planned_as_estimated(c, "ethos-u85-256")] == [4]


def test_the_judge_reads_the_chaining_buffer_a_map_names(monkeypatch, tmp_path):
    """The simulator keeps each chaining buffer apart: an operation reading buffer 1 where the
    chain left its map in buffer 0 is refused (a binary error, not a silent read)."""
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate
    from cascader.emit import ethos_u85

    record = ethos_u85.record

    def misnumbered(r, whole, part_kernel_first, accelerator, chain=(), table_at=0):
        moved = tuple((m, n if m == "ofm" else n + 1) for m, n in chain)  # read the next buffer
        return record(r, whole, part_kernel_first, accelerator, moved, table_at)

    monkeypatch.setattr(ethos_u85, "record", misnumbered)
    model = _elementwise(["ADD", "MUL"])
    c = cascader.compile(model, accelerator="ethos-u85-256")
    path = tmp_path / "model.tflite"
    cascader.save_model(model, path)
    result = validate(path, c.binary, seeds=(0,), config_label="ethos-u85-256")
    assert not result.bit_exact and "IFM is chained, but no operation left its OFM in chaining buffer 1" in result.error
