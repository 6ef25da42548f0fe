"""Ethos-U85 chains whose operations read tables (#43, u85_chaining, emit/program._table_loads):
an elementwise operation with a table (a lookup `lut_fusion` fused into it, a softmax's exp or
reciprocal table) joins a chain as Vela 5.2 chains its fused table activations, with every table
of the chain loaded before the chain's first operation, each into LUT RAM bytes of its own
(`ethos_u85.table_offsets`: Vela's 256-byte slots, a table at a multiple of its size).

- int8 tables (LUT_S8_S8, 256 bytes): ABS -> ADD + TANH, and ABS -> ADD + TANH -> MUL + LOGISTIC
  (two tables, at bytes 0 and 256: table indices 0 and 1); a convolution with a fused TANH
  heading a chain into ADD + LOGISTIC. Each bit-exact on 2 seeds on U85-128/256/512, the
  tables' DMAs before the chain's first operation, planned as estimated (but where a convolution
  reads a table: the planner costs that table's DMA, Vela's cost leaves it out). int16 tables (LUT_S16_S16,
  2 KiB): the int16 softmax's MUL -> ADD + exp table and SHR -> SUB + reciprocal table,
  bit-exact likewise, chained by force (no int16 table joiner is faster chained on the cycle
  model within Vela's limits in our lowerings yet);
- the grouping, the tables' DMAs and indices decoded from Vela 5.2's binaries of the same
  models are ours, and the cycles on the same estimator within 1.02x of Vela's;
- tables that do not fit in the LUT RAM together end the chain (Vela would load them over the
  same bytes): `table_offsets` on the sizes, and a LUT RAM made too small for two tables;
- the simulator refuses a DMA into a table an operation of an unfinished chain reads: the
  tables loaded each before its own operation (the emitter before chaining with tables), into
  the same bytes, is refused there.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import cascader
from cascader import u85_chaining
from cascader.emit import ethos_u85, program
from cascader.sim.estimator import total_cycles
from cascader.sim.simulate import decode
from cascader.tflite.builder import ModelBuilder, quantization
from cascader.zoo import softmax
from conftest import cycles_against_vela
from test_u85_chaining import chain_positions as _chains
from test_u85_lowering import SIZES, _bit_exact_on_the_npu

LUT_REGION = 0x103  # a DMA destination in the LUT RAM
SHAPE = (1, 16, 16, 32)


def _input(b: ModelBuilder, name: str, shape=SHAPE, scale: float = 0.05, zero_point: int = 3) -> int:
    return b.add_input(name, shape, "int8", quantization(scale, zero_point))


def _map(b: ModelBuilder, name: str, shape=SHAPE, scale: float = 0.1, zero_point: int = 0) -> int:
    return b.add_tensor(name, shape, "int8", quantization(scale, zero_point))


def _tables_after_abs(lookups: list[tuple[str, str]]):
    """ABS(x), then per (operator, lookup) the operator (ADD/MUL with an input of its own, or
    ABS) and the lookup (TANH/LOGISTIC) of its output, which `lut_fusion` fuses into it."""
    b = ModelBuilder()
    t = _map(b, "abs")
    b.add_operator("ABS", [_input(b, "x")], [t])
    for i, (opcode, lookup) in enumerate(lookups):
        u = _map(b, f"{opcode.lower()}{i}", scale=0.2)
        other = [] if opcode == "ABS" else [_input(b, f"y{i}", scale=0.04, zero_point=1 - 3 * i)]
        b.add_operator(opcode, [t, *other], [u])
        t = _map(b, f"{lookup.lower()}{i}", scale=1 / 256 if lookup == "LOGISTIC" else 1 / (128 + i),
                 zero_point=-128 if lookup == "LOGISTIC" else 0)
        b.add_operator(lookup, [u], [t])
    b.mark_output(t)
    return b.build()


def _convolution_with_tables():
    """CONV_2D, its TANH (fused into it: a table on the chain's first operation), then ADD of
    another input and a LOGISTIC (fused into the ADD)."""
    b = ModelBuilder()
    shape = (16, 3, 3, 32)
    w = b.add_tensor("w", shape, "int8", quantization(0.01, 0),
                     data=np.random.default_rng(7).integers(-60, 60, shape).astype(np.int8))
    bias = b.add_tensor("bias", (16,), "int32", quantization(0.0005, 0), data=np.arange(16, dtype=np.int32))
    out_shape = (1, 16, 16, 16)
    head, tanh = _map(b, "head", out_shape), _map(b, "tanh", out_shape, scale=1 / 128)
    b.add_operator("CONV_2D", [_input(b, "x"), w, bias], [head], dict(padding="SAME", stride_w=1, stride_h=1))
    b.add_operator("TANH", [head], [tanh])
    added, out = _map(b, "add", out_shape, scale=0.2), _map(b, "out", out_shape, scale=1 / 256, zero_point=-128)
    b.add_operator("ADD", [tanh, _input(b, "y", out_shape, scale=0.04, zero_point=-2)], [added])
    b.add_operator("LOGISTIC", [added], [out])
    b.mark_output(out)
    return b.build()


# A model -> per chain of it, the NPU operations (kind/sub-op) and, for each, whether it reads a table.
MODELS = {
    "add_tanh": (lambda: _tables_after_abs([("ADD", "TANH")]), [[("ABS", False), ("ADD", True)]]),
    "add_tanh_mul_logistic": (lambda: _tables_after_abs([("ADD", "TANH"), ("MUL", "LOGISTIC")]),
                              [[("ABS", False), ("ADD", True), ("MUL", True)]]),
    "conv_tanh_add_logistic": (_convolution_with_tables, [[("conv", True), ("ADD", True)]]),
}
INT16 = ("softmax_int16", lambda: softmax((1, 2, 16, 16), dtype="int16"))


def _stream(binary) -> list[dict]:
    (stream,) = decode(binary)
    return stream.operations


def _name(o: dict) -> str:
    return o.get("sub_op") or o["kind"]


def _reads_table(o: dict) -> bool:
    return o["activation"]["function"] in (1, 4, 7, 8)


def _table_loads(ops: list[dict], chain: list[int]) -> dict[int, int]:
    """The LUT RAM bytes each table DMA before `chain` loads (since the operation before it),
    by destination address -> length."""
    loads, i = {}, chain[0] - 1
    while i >= 0 and ops[i]["kind"] == "dma":
        if ops[i]["dst"]["region"] == LUT_REGION:
            loads[ops[i]["dst"]["address"]] = ops[i]["dst"]["length"]
        i -= 1
    return loads


def _check_chain_tables(ops: list[dict], chain: list[int]) -> None:
    """Every table a chain reads is loaded before its first operation (none between its
    operations), each into bytes of its own, at its table index x its size."""
    assert all(ops[i]["kind"] != "dma" for i in range(chain[0], chain[-1] + 1))
    loads = _table_loads(ops, chain)
    spans = set()
    for i in chain:
        if _reads_table(ops[i]):
            index = ops[i]["u85"]["activation_table"]
            size = {1: 256, 4: 256, 7: 1024, 8: 2048}[ops[i]["activation"]["function"]]
            spans.add((index * size, size))
    assert all(loads.get(at) == size for at, size in spans), (loads, spans)
    ordered = sorted(spans)
    assert all(a + n <= b for (a, n), (b, _) in zip(ordered, ordered[1:]))  # apart


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(MODELS))
def test_int8_table_joiners_chain_bit_exactly(case: str, accelerator: str, tmp_path):
    model, expected = MODELS[case]
    c = _bit_exact_on_the_npu(model(), accelerator, tmp_path)
    if not case.startswith("conv"):  # the planner costs a table fused into a convolution, Vela does not
        assert total_cycles(c.binary, accelerator=accelerator) == pytest.approx(c.schedule.total_cycles)
    ops = _stream(c.binary)
    chains = _chains(ops)
    assert [[(_name(ops[i]), _reads_table(ops[i])) for i in chain] for chain in chains] == expected
    for chain in chains:
        _check_chain_tables(ops, chain)


def test_two_int8_tables_take_two_slots():
    """ADD + TANH and MUL + LOGISTIC in one chain: the two tables are loaded at bytes 0 and 256
    before the ABS, read as tables 0 and 1."""
    c = cascader.compile(MODELS["add_tanh_mul_logistic"][0](), accelerator="ethos-u85-256")
    ops = _stream(c.binary)
    (chain,) = _chains(ops)
    assert _table_loads(ops, chain) == {0: 256, 256: 256}
    assert [ops[i]["u85"]["activation_table"] for i in chain[1:]] == [0, 1]


@pytest.mark.parametrize("accelerator", SIZES)
def test_an_int16_table_joiner_chains_bit_exactly(accelerator: str, monkeypatch, tmp_path):
    """The int16 softmax's SUB reading the 2 KiB reciprocal table (LUT_S16_S16) as the joiner
    of the SHR before it, bit-exact. The cycle model finds that pair no faster chained (each
    runs over one value per row), and the softmax's other int16 table, its exp on an ADD, would
    be a fourth operand from memory in the SUB -> MUL chain before it (Vela chains all three: it
    reads their one-element constants from registers). So here only operations with a table
    join chains, each chain costed as nothing: the ADD + exp joins the MUL, the SUB the SHR."""
    cost, operand = u85_chaining.cost_from_core, u85_chaining._chained_operand
    monkeypatch.setattr(u85_chaining, "cost_from_core", lambda r, d=None: replace(cost(r, d), total_cycles=0.0))
    monkeypatch.setattr(u85_chaining, "_chained_operand", lambda first, second, *rest: (
        operand(first, second, *rest) if ethos_u85.lut(second.lowered) is not None else None))
    c = _bit_exact_on_the_npu(INT16[1](), accelerator, tmp_path)
    ops = _stream(c.binary)
    chains = _chains(ops)
    assert [[(_name(ops[i]), _reads_table(ops[i])) for i in chain] for chain in chains] == [
        [("MUL", False), ("ADD", True)], [("SHR", False), ("SUB", True)]]
    for chain in chains:
        _check_chain_tables(ops, chain)
        assert _table_loads(ops, chain) == {0: 2048}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(MODELS))
def test_velas_grouping_and_tables(case: str, accelerator: str):
    """Vela 5.2 groups the same operations with the same tables, loaded before the group into
    the same bytes (its least recently used slots: the first ones here)."""
    pytest.importorskip("ethosu.vela")
    model = MODELS[case][0]()
    ours = _stream(cascader.compile(model, accelerator=accelerator).binary)
    vela = _stream(cascader.vela.compile(model, accelerator).model)

    def grouping(ops):
        return [[(_name(ops[i]), ops[i]["u85"]["activation_table"] if _reads_table(ops[i]) else None) for i in chain]
                for chain in _chains(ops)], [_table_loads(ops, chain) for chain in _chains(ops)]

    assert grouping(ours) == grouping(vela)


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(MODELS) + [INT16[0]])
def test_cycles_against_vela(case: str, accelerator: str):
    model = INT16[1]() if case == INT16[0] else MODELS[case][0]()
    ours, vela = cycles_against_vela(model, accelerator)
    assert ours <= 1.02 * vela


def test_table_offsets():
    """Distinct tables each at a multiple of its size, largest first; None where they do not
    fit in the 2 KiB together (Vela 5.2 would load the later ones over the earlier)."""
    t256 = [bytes([i]) * 256 for i in range(9)]
    t1k = [bytes([i]) * 1024 for i in range(3)]
    t2k = [bytes([i]) * 2048 for i in range(2)]
    assert ethos_u85.table_offsets([t256[0], t1k[0]]) == {t1k[0]: 0, t256[0]: 1024}
    assert ethos_u85.table_offsets([t256[0], t256[1], t256[0]]) == {t256[0]: 0, t256[1]: 256}
    assert ethos_u85.table_offsets(t256[:8]) == {t: 256 * i for i, t in enumerate(t256[:8])}
    assert ethos_u85.table_offsets(t1k[:2] + [t256[0]]) is None
    assert ethos_u85.table_offsets(t256) is None
    assert ethos_u85.table_offsets(t2k) is None
    assert ethos_u85.table_offsets([t2k[0], t256[0]]) is None
    assert ethos_u85.table_offsets([t2k[0], t2k[0]]) == {t2k[0]: 0}


# ABS(x), then ADD + TANH, ABS + LOGISTIC and ABS + TANH (of another scale): three tables.
THREE_TABLES = [("ADD", "TANH"), ("ABS", "LOGISTIC"), ("ABS", "TANH")]


@pytest.mark.parametrize("lut_ram,expected", [(2048, [["ABS", "ADD", "ABS", "ABS"]]), (512, [["ABS", "ADD", "ABS"]])])
def test_tables_that_do_not_fit_end_the_chain(lut_ram: int, expected, monkeypatch, tmp_path):
    """All four operations chain with their three tables in the 2 KiB; with a LUT RAM of two
    256-byte slots the last ABS's table cannot be in place beside the other two: the chain ends
    before it, and it runs apart with its table loaded before it."""
    monkeypatch.setattr(ethos_u85, "LUT_RAM_BYTES", lut_ram)
    c = _bit_exact_on_the_npu(_tables_after_abs(THREE_TABLES), "ethos-u85-256", tmp_path)
    ops = _stream(c.binary)
    assert [[_name(ops[i]) for i in chain] for chain in _chains(ops)] == expected
    for chain in _chains(ops):
        _check_chain_tables(ops, chain)


def _each_table_before_its_operation(operations, npu):
    """The emitter before chains read tables: each table loaded into the first bytes right
    before the operation that reads it."""
    plan, loaded = [], None
    for sop in operations:
        table = ethos_u85.lut(sop.lowered)
        plan.append(([(table, 0)] if table is not None and table != loaded else [], 0))
        loaded = table
    return plan


def test_a_table_loaded_inside_a_chain_is_refused(monkeypatch, tmp_path):
    """The simulator runs a chain's operations one after the other, but the NPU runs them block
    by block together: the MUL's table loaded after the ADD (into the ADD's bytes) would be read
    by the ADD's later blocks. The simulator refuses the DMA, naming why."""
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    monkeypatch.setattr(program, "_table_loads", _each_table_before_its_operation)
    model = MODELS["add_tanh_mul_logistic"][0]()
    c = cascader.compile(model, accelerator="ethos-u85-256")
    path = tmp_path / "model.tflite"
    cascader.save_model(model, path)
    result = validate(path, c.binary, seeds=(0,), config_label="ethos-u85-256")
    assert not result.bit_exact
    assert "(dma): a DMA writes LUT RAM bytes [0, 256) while an operation of the unfinished chain" in result.error
