"""SOFTMAX's row maximum on the Ethos-U85 (#43): where the cycle model finds it faster, the rows
are copied with the U85's OFM transpose to C x G1 x G2 and max-pooled down their columns (a C x
1 kernel, OFM depth G2), in place of the U55/U65's 1 x C pool over the rows viewed as R x C x 1
(one-element-deep blocks: 2,146 cycles for zoo transformer_block's 32 x 16 scores on U85-128,
835 with the copy). Both forms write the same bytes, the R row maxima in order.

Every case compiles for U85-128/256/512 and runs two seeds through the simulator and the
reference interpreter (8-bit and int16 SOFTMAX, 8-bit in and int16 out, a grid of one row, one
channel, a depth above 256, rows beyond one grid axis); the U55/U65 keep the depth-1 pool.
"""

from __future__ import annotations

import pytest

import cascader
from cascader import zoo
from cascader.sim import decode
from cascader.tflite.builder import ModelBuilder, quantization

ACCELERATORS = ("ethos-u85-128", "ethos-u85-256", "ethos-u85-512")


def _to_int16(shape: tuple[int, ...]):
    """An int8 SOFTMAX into int16 (TFLite's Softmax<int8_t, int16_t>)."""
    b = ModelBuilder()
    x = b.add_input("x", shape, "int8", quantization(0.1, 0))
    y = b.add_tensor("y", shape, "int16", quantization(1 / 65536, -32768))
    b.add_operator("SOFTMAX", [x], [y], {"beta": 1.0}, version=3)
    b.mark_output(y)
    return b.build()


# name: (model, whether the row maximum is written transposed on every U85 size)
CASES = {
    "scores_int8": (lambda: zoo.softmax((1, 2, 16, 16), dtype="int8"), True),
    "scores_int16": (lambda: zoo.softmax((1, 2, 16, 16), dtype="int16"), True),
    "int8_to_int16": (lambda: _to_int16((1, 24, 16)), True),
    "one_row": (lambda: zoo.softmax((1, 1001), dtype="int8"), None),
    "one_channel": (lambda: zoo.softmax((1, 3, 5, 1), dtype="int8"), False),
    "deep_rows": (lambda: zoo.softmax((1, 3, 300), dtype="int8"), None),
    "long_grid": (lambda: zoo.softmax((1, 4, 75, 16), dtype="int8"), True),
}


def _max_pools(compiled) -> list[dict]:
    return [op for stream in decode(compiled) for op in stream.operations
            if op["kind"] == "pool" and op["sub_op"] == "MAX"]


def _transposed_copies(compiled) -> list[dict]:
    return [op for stream in decode(compiled) for op in stream.operations if op.get("u85", {}).get("ofm_transpose")]


def _bit_exact(model, accelerator: str, tmp_path) -> cascader.CompiledModel:
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    compiled = cascader.compile(model, accelerator=accelerator)
    assert compiled.summary().cpu_operators == 0
    path = tmp_path / "softmax.tflite"
    cascader.save_model(model, path)
    result = validate(path, compiled.binary, seeds=(0, 1), config_label=accelerator)
    assert result.bit_exact, (result.error, result.details)
    return compiled


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("case", list(CASES))
def test_row_max_bit_exact(case, accelerator, tmp_path):
    build, transposed = CASES[case]
    compiled = _bit_exact(build(), accelerator, tmp_path)
    (peak,) = _max_pools(compiled)
    if transposed is True:  # C x 1 down the transposed copy's columns, the OFM at least 16 deep
        assert len(_transposed_copies(compiled)) == 1
        assert peak["kernel"]["width"] == 1 and peak["ofm"]["shape"][2] >= 16, peak
    elif transposed is False:  # one channel: the maximum is the value, a 1 x 1 pool of depth 1
        assert not _transposed_copies(compiled) and peak["ofm"]["shape"][2] == 1


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_transformer_scores_row_max_is_deep(accelerator, tmp_path):
    """zoo transformer_block's softmax over 2 heads x 16 x 16 scores: a 16 x 1 pool whose OFM is
    at least 16 deep (the 2 x 16 grid, or the 32 rows in one line), faster than the depth-1 pool
    by the cycle model on every U85 size; the whole block bit-exact."""
    (peak,) = _max_pools(_bit_exact(zoo.transformer_block(), accelerator, tmp_path))
    assert (peak["kernel"]["height"], peak["kernel"]["width"]) == (16, 1)
    assert peak["ofm"]["shape"] in ((1, 2, 16), (1, 1, 32)), peak


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_u55_u65_keep_the_depth_one_pool(accelerator):
    compiled = cascader.compile(zoo.softmax((1, 2, 16, 16), dtype="int8"), accelerator=accelerator)
    (peak,) = _max_pools(compiled)
    assert (peak["kernel"]["height"], peak["kernel"]["width"], peak["ofm"]["shape"][2]) == (1, 16, 1)
