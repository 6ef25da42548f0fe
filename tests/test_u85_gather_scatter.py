"""GATHER and SCATTER_ND on the Ethos-U85 (frontend/lower_indexed_dma): one indexed DMA each
(a scatter after a DMA of zeros), bit-exact on two seeds against the reference interpreter on
U85-128/256/512, for every type of the zoo, with constant and run-time indices (int32, int64,
int16 alike), repeated indices and the last row, the axis/batch_dims Vela takes; Vela's
constraints send the others to the CPU with the reason; the cycles as planned, and Vela's."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.operator_zoo import U85_OPERATOR_DTYPES, operator_model
from cascader.sim import decode
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]
NUMPY = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32, "int64": np.int64}


def _q(dtype: str):
    if dtype == "int32":
        return None
    return quantization(0.05, {"int8": 3, "uint8": 131, "int16": 0}[dtype])


def gather_model(dtype: str, params: tuple, indices, axis: int = 0, batch_dims: int = 0, index_dtype: str = "int32",
                 runtime: bool = False, constant_params: bool = False, seed: int = 0):
    """A GATHER of `params` (an input, or a constant table) by `indices` (constant, or an input
    of their shape when `runtime`)."""
    b = ModelBuilder(description="gather")
    if constant_params:
        values = np.random.default_rng(seed).integers(-100, 100, params).astype(NUMPY[dtype])
        x = b.add_constant("params", values, dtype, _q(dtype))
    else:
        x = b.add_input("params", params, dtype, _q(dtype))
    idx = np.asarray(indices)
    i = b.add_input("indices", idx.shape, index_dtype) if runtime else b.add_constant("indices",
                                                                                        idx.astype(NUMPY[index_dtype]))
    ax = axis % len(params)
    out_shape = tuple(params[:ax]) + tuple(idx.shape[batch_dims:]) + tuple(params[ax + 1:])
    o = b.add_tensor("output", out_shape, dtype, _q(dtype))
    b.mark_output(o)
    b.add_operator("GATHER", [x, i], [o], dict(axis=axis, batch_dims=batch_dims))
    return b.build()


def scatter_model(dtype: str, indices, updates: tuple, shape: tuple):
    b = ModelBuilder(description="scatter_nd")
    u = b.add_input("updates", updates, dtype, _q(dtype))
    i = b.add_constant("indices", np.asarray(indices, np.int32))
    s = b.add_constant("shape", np.asarray(shape, np.int32))
    o = b.add_tensor("output", tuple(shape), dtype, _q(dtype))
    b.mark_output(o)
    b.add_operator("SCATTER_ND", [i, u, s], [o])
    return b.build()


def _on_the_npu(model, accelerator: str) -> cascader.CompiledModel:
    c = cascader.compile(model, accelerator=accelerator)
    assert [v.reason for v in c.partition.verdicts if not v.npu] == []
    return c


def _bit_exact(model, accelerator: str, tmp_path) -> cascader.CompiledModel:
    from cascader.bench.simulate import validate

    c = _on_the_npu(model, accelerator)
    path = tmp_path / "model.tflite"
    cascader.save_model(model, path)
    result = validate(path, c.binary, seeds=(0, 1), config_label=accelerator)
    assert result.bit_exact, (result.error, result.details)
    return c


def _dmas(c: cascader.CompiledModel) -> list[dict]:
    return [op for s in decode(c.model) for op in s.operations if op["kind"] == "dma"]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("opcode, dtype", [(op, dt) for op in ("GATHER", "SCATTER_ND")
                                           for dt in U85_OPERATOR_DTYPES[op]])
def test_zoo_model_is_one_indexed_dma(opcode: str, dtype: str, accelerator: str, tmp_path):
    """The zoo's models (a gather with a repeated index and the last row; a scatter of three
    rows into eight): bit-exact, and the binary is Vela's shape: one indexed DMA (after a DMA of
    zeros for the scatter), nothing else."""
    c = _bit_exact(operator_model(opcode, dtype), accelerator, tmp_path)
    dmas = _dmas(c)
    assert [op for s in decode(c.model) for op in s.operations if op["kind"] != "dma"] == []
    indexed = [d["u85_dma"] for d in dmas if "u85_dma" in d]
    assert len(indexed) == 1 and len(dmas) == (1 if opcode == "GATHER" else 2)
    assert indexed[0]["src_indexed" if opcode == "GATHER" else "dst_indexed"]
    # The rows from the least index to the greatest: 0..9 of the gather's, 0..6 of the scatter's.
    assert indexed[0]["index_max"] == (9 if opcode == "GATHER" else 6)


GATHERS = {
    # batch_dims == axis == 1: one table per batch, a 3-D DMA (its second size the batch).
    "batch_dims_1": dict(dtype="int8", params=(3, 5, 8), indices=[[0, 4], [2, 2], [1, 3]], axis=1, batch_dims=1),
    "negative_axis": dict(dtype="uint8", params=(3, 5, 8), indices=[[4, 4], [0, 1], [3, 0]], axis=-2, batch_dims=1),
    "4d_batch": dict(dtype="int16", params=(2, 3, 4, 5), indices=[[2, 0, 2], [1, 1, 0]], axis=1, batch_dims=1),
    "2d_indices": dict(dtype="int16", params=(6, 3, 4), indices=[[1, 5], [0, 0]]),
    "one_index": dict(dtype="int32", params=(6, 7), indices=[5]),
    "1d_params": dict(dtype="int8", params=(9,), indices=[8, 0, 8, 3]),
    "int64_indices": dict(dtype="int16", params=(5, 8), indices=[4, 0, 2], index_dtype="int64"),
    "int16_indices": dict(dtype="int8", params=(5, 8), indices=[4, 0, 2], index_dtype="int16"),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(GATHERS))
def test_gather_edges(case: str, accelerator: str, tmp_path):
    c = _bit_exact(gather_model(**GATHERS[case]), accelerator, tmp_path)
    (dma,) = _dmas(c)
    assert dma["u85_dma"]["src_indexed"]
    if case in ("batch_dims_1", "negative_axis"):  # one table per batch: the 3-D mode
        assert dma["u85_dma"]["stride_mode"] == 2 and dma["u85_dma"]["sizes"] == (3, 2)


SCATTERS = {
    "rows_of_a_3d_map": dict(dtype="int8", indices=[[[1], [3]], [[0], [4]]], updates=(2, 2, 3, 4), shape=(5, 3, 4)),
    "1d": dict(dtype="uint8", indices=[[1], [4]], updates=(2,), shape=(5,)),
    "one_row": dict(dtype="int32", indices=[[2]], updates=(1, 6), shape=(3, 6)),
    "every_row": dict(dtype="int8", indices=[[3], [0], [2], [1]], updates=(4, 16), shape=(4, 16)),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(SCATTERS))
def test_scatter_edges(case: str, accelerator: str, tmp_path):
    c = _bit_exact(scatter_model(**SCATTERS[case]), accelerator, tmp_path)
    zeros, scatter = _dmas(c)
    assert "u85_dma" not in zeros and scatter["u85_dma"]["dst_indexed"]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("params, indices, axis, batch_dims, table, index_dtype", [
    ((10, 16), (6,), 0, 0, False, "int32"),
    ((3, 5, 8), (3, 4), 1, 1, False, "int32"),
    ((12, 3, 2), (2, 3), 0, 0, False, "int32"),
    ((7, 24), (5,), 0, 0, True, "int32"),  # an embedding lookup: a constant table, read in flash
    ((10, 16), (6,), 0, 0, False, "int64"),  # the low words: IDX_SKIP1 4
    ((3, 5, 8), (3, 4), 1, 1, False, "int64"),  # one DMA per batch
    ((10, 16), (6,), 0, 0, False, "int16"),  # widened to int32 words by two DMAs first
    ((3, 5, 8), (3, 4), 1, 1, True, "int16"),
])
def test_run_time_indices(params, indices, axis: int, batch_dims: int, table: bool, index_dtype: str,
                          accelerator: str):
    """Indices computed at run time (an input): the DMA reads them where they live. Two seeds of
    in-range indices (repeats and the last row likely), against the reference interpreter."""
    from cascader import reference
    from cascader.sim import simulate

    model = gather_model("int8", params, np.zeros(indices, np.int32), axis, batch_dims, runtime=True,
                         constant_params=table, index_dtype=index_dtype)
    c = _on_the_npu(model, accelerator)
    dmas = _dmas(c)
    gathers = [d for d in dmas if d.get("u85_dma", {}).get("src_indexed")]
    assert len(gathers) == (params[0] if index_dtype == "int64" and batch_dims else 1)
    assert len(dmas) == len(gathers) + (2 if index_dtype == "int16" else 0)
    for dma in gathers:
        assert dma["u85_dma"]["index"]["region"] != 0  # not in flash
        assert (dma["src"]["region"] == 0) == table
        assert dma["u85_dma"]["index_skip1"] == (4 if index_dtype == "int64" else 0)
    k = params[axis]
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, k, indices).astype(NUMPY[index_dtype])
        idx.reshape(-1)[-1] = k - 1
        x = [] if table else [rng.integers(-128, 128, params).astype(np.int8)]
        want = reference.run(model, [*x, idx])
        got = simulate(c.binary, [*x, idx])
        assert all(np.array_equal(a, b) for a, b in zip(want, got)), seed


def test_in_a_chain_and_a_cascade(tmp_path):
    """A gather between NPU operations, compiled whole and under an SRAM budget the planner
    must cascade for: the gather stays one whole DMA (never a stripe) and bit-exact."""
    b = ModelBuilder(description="gather chain")
    q = quantization(0.05, 3)
    x = b.add_input("input", (64, 48), "int8", q)
    r0, relu = b.add_tensor("relu0", (64, 48), "int8", q), b.add_tensor("relu", (64, 48), "int8", q)
    b.add_operator("RELU", [x], [r0])
    b.add_operator("RELU6", [r0], [relu])
    gathered = b.add_tensor("gathered", (40, 48), "int8", q)
    idx = (np.arange(40) * 7 % 64).astype(np.int32)
    b.add_operator("GATHER", [relu, b.add_constant("indices", idx)], [gathered], dict(axis=0, batch_dims=0))
    out = b.add_tensor("output", (40, 48), "int8", quantization(0.1, -2))
    b.add_operator("QUANTIZE", [gathered], [out])
    b.mark_output(out)
    model = b.build()
    from cascader.bench.simulate import validate

    path = tmp_path / "chain.tflite"
    cascader.save_model(model, path)
    # The default (uncascaded, Performance) and the planner's least-SRAM proposal ("size").
    for options in (dict(), dict(sram="4KiB"), dict(memory_mode="Shared_Sram", optimise="size")):
        c = cascader.compile(model, accelerator="ethos-u85-256", **options)
        assert [v.reason for v in c.partition.verdicts if not v.npu] == []
        gathers = [s for s in c.schedule.operations if s.lowered.kind == "dma"]
        assert len(gathers) == 1 and gathers[0].stripe_of is None and gathers[0].cascade is None
        result = validate(path, c.binary, seeds=(0, 1), config_label=str(options))
        assert result.bit_exact, (options, result.error, result.details)


@pytest.mark.parametrize("model, rule", [
    (lambda: gather_model("int8", (3, 5, 8), [0, 4], axis=1, batch_dims=0), "gather_axis"),
    (lambda: scatter_model("int8", [[1], [1]], (2, 8), (5, 8)), "scatter_indices"),
])
def test_velas_constraints_keep_them_on_the_cpu(model, rule: str):
    """Vela 5.2's U85 constraints: GATHER's axis must be its batch_dims; SCATTER_ND's indices
    unique (TFLite adds repeated ones' updates)."""
    c = cascader.compile(model(), accelerator="ethos-u85-256")
    assert [v.rule for v in c.partition.verdicts if not v.npu] == [rule]


CYCLE_CASES = {
    "zoo_gather": (lambda: operator_model("GATHER", "int8"), None),
    "zoo_scatter": (lambda: operator_model("SCATTER_ND", "int8"), None),
    # A table in flash and the arena in SRAM: the DMA crosses memories, so it costs cycles.
    "embedding": (lambda: gather_model("int8", (64, 32), np.zeros(8, np.int32), runtime=True, constant_params=True),
                  "Shared_Sram"),
    # The zeros come from flash; the scatter over them must not hide that copy.
    "scatter_shared_sram": (lambda: scatter_model("int8", [[6], [0], [3]], (3, 16), (8, 16)), "Shared_Sram"),
}


@pytest.mark.parametrize("case", sorted(CYCLE_CASES))
def test_cycles_are_planned_as_estimated_and_match_velas(case: str):
    """The schedule's cycles are the estimator's on the binary (the DMA costed by the bytes it
    may read, between its memories), and no more than Vela's binary on the same estimator."""
    pytest.importorskip("ethosu.vela")
    from cascader import vela
    from cascader.sim.estimator import total_cycles

    build, memory_mode = CYCLE_CASES[case]
    model = build()
    options = {} if memory_mode is None else dict(memory_mode=memory_mode)
    c = cascader.compile(model, accelerator="ethos-u85-256", **options)
    ours = total_cycles(c.model, memory_mode=memory_mode)
    assert ours == pytest.approx(c.schedule.total_cycles)
    theirs = total_cycles(vela.compile(model, accelerator="ethos-u85-256", **options).model, memory_mode=memory_mode)
    assert ours <= theirs
    if memory_mode is not None:
        assert ours > 0


def _commands(model) -> list[int]:
    """The opcodes of the (one) NPU call's command stream, a cmd1's payload word skipped."""
    from cascader import _core
    from cascader.sim import npu_calls

    (call,) = npu_calls(model)
    n = _core.decode_driver_payload(call.payload)["command_stream_words"]
    words = np.frombuffer(call.payload, np.uint32)[-n:].tolist()
    out, k = [], 0
    while k < len(words):
        out.append(words[k] & 0xFFFF)
        k += 2 if words[k] & 0x4000 else 1
    return out


def test_the_scatter_waits_for_its_zeros():
    """The scatter's DMA writes over the zeros the DMA before it copies: it waits for that one
    (NPU_OP_DMA_WAIT 0 between the two DMA starts), as Vela's stream does."""
    c = _on_the_npu(operator_model("SCATTER_ND", "int8"), "ethos-u85-256")
    dma_start, dma_wait = 0x10, 0x11
    starts = [k for k, op in enumerate(_commands(c.model)) if op == dma_start]
    assert len(starts) == 2 and dma_wait in _commands(c.model)[starts[0]:starts[1]]
