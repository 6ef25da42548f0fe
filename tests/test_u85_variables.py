"""Resource variables on the Ethos-U85 (frontend/lower_resource_variables, emit/variable_initialisers):
VAR_HANDLE, READ_VARIABLE and ASSIGN_VARIABLE on the NPU with the variable at one offset of
the arena, the CALL_ONCE initialiser an `ethos-u` operator copying the start there, as Vela
5.2 compiles them. Each binary is judged over consecutive inferences (the state carries) and
after a reset, against the reference interpreter, on two seeds."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.errors import ModelError
from cascader.operator_zoo import operator_model
from cascader.sim.binary import npu_calls
from cascader.tflite.builder import ModelBuilder, add_variable_initialiser, quantization

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]
STEPS = 4
RESOURCE_OPS = {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}


def _runs(model, binary, seed: int, steps: int = STEPS):
    """`steps` inferences of the binary and of the reference on new inputs, one session each,
    then a reset and the first inputs again: (ours, reference) per step, the last after the reset."""
    from cascader.reference import ReferenceInterpreter, random_inputs
    from cascader.sim import Session

    session, reference = Session(binary), ReferenceInterpreter(model)
    inputs = [random_inputs(model, seed * 100 + k) for k in range(steps)]
    runs = [(session.run(x)[0], reference.run(x)[0]) for x in inputs]
    session.reset()
    runs.append((session.run(inputs[0])[0], ReferenceInterpreter(model).run(inputs[0])[0]))
    return runs


def _on_the_npu(compiled) -> None:
    """Only CALL_ONCE stays with TFLM; the output keeps no resource-variable operator."""
    cpu = [(op.opcode, v.reason) for op, v in zip(compiled.source.main.operators, compiled.partition.verdicts)
           if not v.npu]
    assert cpu == [("CALL_ONCE", "CALL_ONCE is not supported by the Ethos-U NPU")], cpu
    opcodes = {op.opcode for g in compiled.model.subgraphs for op in g.operators}
    assert not opcodes & RESOURCE_OPS, opcodes


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_the_state_carries_bit_exact(dtype: str, accelerator: str):
    pytest.importorskip("ai_edge_litert")
    model = operator_model("READ_VARIABLE", dtype)
    compiled = cascader.compile(model, accelerator=accelerator)
    _on_the_npu(compiled)
    for seed in (0, 1):
        runs = _runs(model, compiled.model, seed)
        for step, (got, want) in enumerate(runs):
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}, step {step}")
        assert not np.array_equal(runs[0][0], runs[1][0])  # the state moved
        np.testing.assert_array_equal(runs[-1][0], runs[0][0])  # reset: the start again


@pytest.mark.parametrize("accelerator", SIZES)
def test_int32_state_is_velas_saturated_sum(accelerator: str):
    """int32: the first inference is bit-exact; later ones, where the running sum leaves int32,
    saturate as Vela's binary does on the simulated NPU (test_u85_operators.VELA_DEVIATES: the
    32-bit ADD, not the variable), so the state is judged against the saturated sum."""
    pytest.importorskip("ai_edge_litert")
    from cascader.reference import random_inputs
    from cascader.sim import Session

    model = operator_model("READ_VARIABLE", "int32")
    compiled = cascader.compile(model, accelerator=accelerator)
    _on_the_npu(compiled)
    for seed in (0, 1):
        runs = _runs(model, compiled.model, seed)
        np.testing.assert_array_equal(runs[0][0], runs[0][1])
        np.testing.assert_array_equal(runs[-1][0], runs[0][0])
        session = Session(compiled.model)
        state = model.subgraphs[1].tensors[1].data.astype(np.int64)
        for step in range(STEPS):
            x = random_inputs(model, seed * 100 + step)[0]
            state = np.clip(state + x, -(2**31), 2**31 - 1)
            np.testing.assert_array_equal(session.run([x])[0], state)


def test_the_variable_lives_at_one_arena_offset():
    """The initialiser's DMA writes the start where the main command stream reads and writes
    the variable (the ADD reads it in place and writes the sum over it), and nothing else in
    the arena is there."""
    model = operator_model("READ_VARIABLE", "int8")
    compiled = cascader.compile(model, accelerator="ethos-u85-256")
    (init,) = npu_calls(compiled.model, 1)
    (dma,) = init.decode().operations
    assert dma["kind"] == "dma" and dma["src"]["region"] == 0 and dma["dst"]["region"] == 1
    assert dma["src"]["length"] == 1024
    assert bytes(init.flash) == model.subgraphs[1].tensors[1].data.tobytes()
    (main,) = npu_calls(compiled.model)
    (add,) = main.decode().operations
    assert add["sub_op"] == "ADD"
    at = dma["dst"]["address"]
    assert add["ifm2"]["base"][0] == add["ofm"]["base"][0] == at and add["ifm"]["base"][0] != at
    assert add["ifm2"]["layout"] == "NHWC"
    assert init.arena_offsets[init.ofms[0]] == at


def _delay_line(dtype: str = "int8", shape=(1, 4, 6, 16)):
    """Each inference outputs the input before (the start at first): READ_VARIABLE's output is
    a model output (copied out), and ASSIGN_VARIABLE assigns the model input (copied in)."""
    b = ModelBuilder(description="test_u85_variables delay line")
    q = None if dtype == "int64" else quantization(0.05, 3)  # the converter's int64: plain integers
    x = b.add_input("input", shape, dtype, q)
    b.add_operator("CALL_ONCE", [], [], dict(init_subgraph_index=1))
    handle = b.add_tensor("handle", (), "resource")
    b.add_operator("VAR_HANDLE", [], [handle], dict(shared_name="last"))
    out = b.add_tensor("output", shape, dtype, q)
    b.mark_output(out)
    b.add_operator("READ_VARIABLE", [handle], [out])
    b.add_operator("ASSIGN_VARIABLE", [handle, x], [])
    model = b.build()
    span = 2**40 if dtype == "int64" else 50  # int64: values beyond the low words
    start = np.random.default_rng(7).integers(-span, span, shape).astype(dtype)
    add_variable_initialiser(model, "last", start, dtype, q)
    return model


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_a_delay_line_copies_out_then_in(dtype: str, accelerator: str):
    pytest.importorskip("ai_edge_litert")
    model = _delay_line(dtype)
    compiled = cascader.compile(model, accelerator=accelerator)
    _on_the_npu(compiled)
    (main,) = npu_calls(compiled.model)
    ops = main.decode().operations
    # Read out, then assign in: a pooling of the bytes, or an ADD of 0 of int64's int32 words.
    assert [op["kind"] for op in ops] == ["elementwise" if dtype == "int64" else "pool"] * 2
    for seed in (0, 1):
        runs = _runs(model, compiled.model, seed)
        for step, (got, want) in enumerate(runs):
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}, step {step}")
        np.testing.assert_array_equal(runs[0][0], model.subgraphs[1].tensors[1].data)


def test_two_variables_in_one_initialiser():
    """Two variables, one initialiser: two DMAs into two offsets; both states carry."""
    pytest.importorskip("ai_edge_litert")
    b = ModelBuilder(description="test_u85_variables two variables")
    q = quantization(0.05, 0)
    shape = (1, 3, 5, 16)
    x = b.add_input("input", shape, "int8", q)
    b.add_operator("CALL_ONCE", [], [], dict(init_subgraph_index=1))
    outs = []
    for name in ("a", "b"):
        handle = b.add_tensor(f"{name}_handle", (), "resource")
        b.add_operator("VAR_HANDLE", [], [handle], dict(shared_name=name))
        state = b.add_tensor(f"{name}_state", shape, "int8", q)
        b.add_operator("READ_VARIABLE", [handle], [state])
        total = b.add_tensor(f"{name}_total", shape, "int8", q)
        b.add_operator("ADD" if name == "a" else "SUB", [x, state], [total])
        b.add_operator("ASSIGN_VARIABLE", [handle, total], [])
        b.mark_output(total)
        outs.append(total)
    model = b.build()
    rng = np.random.default_rng(3)
    for name in ("a", "b"):
        add_variable_initialiser(model, name, rng.integers(-9, 9, shape).astype(np.int8), "int8", q)
    # Both start assignments go in the first initialiser; the second is left unused, as TFLM would.
    first, second = model.subgraphs[1], model.subgraphs.pop()
    first.tensors += second.tensors[1:]
    first.operators.append(type(second.operators[0])("VAR_HANDLE", (), (len(first.tensors),),
                                                     second.operators[0].options, second.operators[0].options_type))
    first.tensors.append(second.tensors[0])
    first.operators.append(type(second.operators[1])("ASSIGN_VARIABLE", (len(first.tensors) - 1, 2), (),
                                                     second.operators[1].options, second.operators[1].options_type))
    compiled = cascader.compile(model, accelerator="ethos-u85-256")
    _on_the_npu(compiled)
    (init,) = npu_calls(compiled.model, 1)
    dmas = init.decode().operations
    assert len(dmas) == 2 and dmas[0]["dst"]["address"] != dmas[1]["dst"]["address"]
    for seed in (0, 1):
        for step, (got, want) in enumerate(_runs(model, compiled.model, seed, steps=3)):
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}, step {step}")


def test_a_variable_without_an_initialiser_stays_with_tflm():
    """TFLM fills a variable no initialiser assigns with its zero point; an arena buffer holds
    what it held. Its operators stay on the CPU with the reason, and the binary is still exact."""
    model = operator_model("READ_VARIABLE", "int8")
    model.main.operators.pop(0)  # the CALL_ONCE
    model.subgraphs.pop()
    compiled = cascader.compile(model, accelerator="ethos-u85-256")
    verdicts = {op.opcode: v for op, v in zip(model.main.operators, compiled.partition.verdicts)}
    for opcode in RESOURCE_OPS:
        assert not verdicts[opcode].npu and "no CALL_ONCE initialiser" in verdicts[opcode].reason
    assert verdicts["ADD"].npu and compiled.check(2, steps=3).bit_exact


def _split_by_the_cpu():
    """READ_VARIABLE, then CPU operators (SPACE_TO_DEPTH and back), then the ADD and the ASSIGN."""
    b = ModelBuilder(description="test_u85_variables split")
    q = quantization(0.05, 0)
    shape = (1, 4, 4, 16)
    x = b.add_input("input", shape, "int8", q)
    b.add_operator("CALL_ONCE", [], [], dict(init_subgraph_index=1))
    handle = b.add_tensor("handle", (), "resource")
    b.add_operator("VAR_HANDLE", [], [handle], dict(shared_name="state"))
    state = b.add_tensor("state", shape, "int8", q)
    b.add_operator("READ_VARIABLE", [handle], [state])
    deep = b.add_tensor("deep", (1, 2, 2, 64), "int8", q)
    b.add_operator("SPACE_TO_DEPTH", [state], [deep], dict(block_size=2))
    back = b.add_tensor("back", shape, "int8", q)
    b.add_operator("DEPTH_TO_SPACE", [deep], [back], dict(block_size=2))
    total = b.add_tensor("total", shape, "int8", q)
    b.add_operator("ADD", [x, back], [total])
    b.mark_output(total)
    b.add_operator("ASSIGN_VARIABLE", [handle, total], [])
    model = b.build()
    add_variable_initialiser(model, "state", np.random.default_rng(5).integers(-9, 9, shape).astype(np.int8), "int8", q)
    return model


def test_a_cpu_operator_between_read_and_assign_leaves_the_variable_with_tflm():
    """A CPU operator between READ_VARIABLE and ASSIGN_VARIABLE: the variable's operators
    cannot share one NPU segment, so they all stay with TFLM (the lowering refuses them one by
    one), the ADD runs on the NPU, and the state carries."""
    pytest.importorskip("ai_edge_litert")
    model = _split_by_the_cpu()
    compiled = cascader.compile(model, accelerator="ethos-u85-256")
    verdicts = {op.opcode: v for op, v in zip(model.main.operators, compiled.partition.verdicts)}
    assert verdicts["ADD"].npu and not any(verdicts[o].npu for o in RESOURCE_OPS), verdicts
    assert {op.opcode for op in compiled.model.subgraphs[1].operators} == {"VAR_HANDLE", "ASSIGN_VARIABLE"}
    for seed in (0, 1):
        for step, (got, want) in enumerate(_runs(model, compiled.model, seed, steps=3)):
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}, step {step}")


def test_control_flow_is_still_refused():
    model = operator_model("READ_VARIABLE", "int8")
    model.main.operators[0].options["init_subgraph_index"] = 0
    with pytest.raises(ModelError, match="control flow such as WHILE or IF"):
        cascader.compile(model, accelerator="ethos-u85-256")


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_u55_and_u65_keep_the_variable_with_tflm(accelerator: str):
    model = operator_model("READ_VARIABLE", "int8")
    compiled = cascader.compile(model, accelerator=accelerator)
    for op, verdict in zip(model.main.operators, compiled.partition.verdicts):
        if op.opcode in RESOURCE_OPS:
            assert not verdict.npu and "Ethos-U85 only" in verdict.reason, verdict
    assert {op.opcode for op in compiled.model.subgraphs[1].operators} == {"VAR_HANDLE", "ASSIGN_VARIABLE"}
    assert compiled.check(2, steps=3).bit_exact


# Where ours is over 1.02x Vela's: its READ copy is chained into the ADD (the U85's chaining,
# costed with the ADD as one operation: 5,000 cycles on U85-128), and our one int16 ADD in
# place, reading both maps from the DRAM arena, costs 10,000 (its two copies 9,112 in all).
CYCLE_GAPS = {("ethos-u85-128", "int16"): 1.10}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32"])
def test_cycles_against_vela(dtype: str, accelerator: str):
    """The same estimator over both binaries, Vela with its default U85 system: ours is one
    ADD writing the sum in place, Vela's a copy out chained into the ADD and a copy back."""
    pytest.importorskip("ethosu.vela")
    from cascader.sim.estimator import total_cycles

    system = "Ethos_U85_SYS_DRAM_Mid"
    model = operator_model("READ_VARIABLE", dtype)
    vela = cascader.vela.compile(model, accelerator, system=system, memory_mode="Dedicated_Sram_384KB").model
    ours = cascader.compile(model, accelerator=accelerator, system=system, memory_mode="Dedicated_Sram").model
    target = dict(system=system, memory_mode="Dedicated_Sram", accelerator=accelerator)
    ratio = total_cycles(ours, **target) / total_cycles(vela, **target)
    assert ratio <= CYCLE_GAPS.get((accelerator, dtype), 1.02), ratio


@pytest.mark.parametrize("accelerator", SIZES)
def test_int64_delay_line_cycles_against_vela(accelerator: str):
    """Vela 5.2 runs int64 variables on the U85's NPU too, as one pooling into an int64 map per
    copy (which our judge does not find bit-exact); ours copies the int32 words, two ADDs of 0
    (twice the elements of Vela's copies: 3,750 cycles against 3,546 on U85-128, 0.79x and 0.67x
    on U85-256 and U85-512)."""
    pytest.importorskip("ethosu.vela")
    from cascader.sim.estimator import total_cycles

    system = "Ethos_U85_SYS_DRAM_Mid"
    model = _delay_line("int64")
    vela = cascader.vela.compile(model, accelerator, system=system, memory_mode="Dedicated_Sram_384KB").model
    assert [op.opcode for g in vela.subgraphs for op in g.operators] == ["CALL_ONCE", "CUSTOM", "CUSTOM"]
    ours = cascader.compile(model, accelerator=accelerator, system=system, memory_mode="Dedicated_Sram").model
    target = dict(system=system, memory_mode="Dedicated_Sram", accelerator=accelerator)
    ratio = total_cycles(ours, **target) / total_cycles(vela, **target)
    assert ratio <= (1.06 if accelerator == "ethos-u85-128" else 1.02), ratio
