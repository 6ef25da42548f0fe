"""Ethos-U85 elementwise blocks (#43): Vela 5.2's own elementwise block (the output buffer's
row shared between width and depth granules, or a chaining-buffer slot of bricks when an
operand broadcasts in C or H; arch/ethos_u85/block_search) is one of the blocks the search
costs. A long map whose 32-bit channel column broadcasts over few channels (a softmax over 2
classes of 1118 anchors) has no block on the search's grid of tilings, only Vela's: such
softmaxes ran on the CPU before. Compiled for U85-128/256/512 and simulated bit-exact against
the reference interpreter on 2 seeds.

The cycle model spreads each block's memory latency over the block's whole volume, so a block
wider than the OFM is faster where the buffers hold it (Vela's own block is: a 1x1x1 OFM runs
in a 1x128x16 block on U85-256); the search costs such blocks too and takes one only where it
is faster than every block within the OFM."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader import zoo

from test_u85_lowering import _bit_exact_on_the_npu, _shared_model_on_the_npu
from test_u85_select import _both_broadcast

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]

SOFTMAX = {
    "anchors_1118x2": lambda: zoo.softmax((1, 1118, 2), dtype="int8"),  # emza_ssd_slim's
    "anchors_756x80": lambda: zoo.softmax((1, 756, 80), dtype="int8"),  # openmv_yolov8n's classes
    "rows_3x500x3": lambda: zoo.softmax((1, 3, 500, 3), dtype="int8"),
    "anchors_1118x2_int16": lambda: zoo.softmax((1, 1118, 2), dtype="int16"),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(SOFTMAX))
def test_broadcast_softmax_bit_exact_on_the_npu(case: str, accelerator: str, tmp_path) -> None:
    _bit_exact_on_the_npu(SOFTMAX[case](), accelerator, tmp_path)


@pytest.mark.parametrize("name, cpu_opcodes, cpu_count", [
    ("emza_ssd_slim_120x160x1_v1_int8", set(), 0),
    ("openmv_yolov8n_192", {"DEQUANTIZE"}, 1),
])
def test_shared_models_softmax_on_the_npu(name: str, cpu_opcodes: set[str], cpu_count: int) -> None:
    """emza_ssd_slim's and openmv_yolov8n's SOFTMAX (their CPU operators on the U85 before):
    on the NPU, bit-exact on U85-256."""
    _shared_model_on_the_npu(name, cpu_opcodes, cpu_count)


@pytest.mark.parametrize("accelerator", SIZES)
def test_blocks_wider_than_the_ofm_where_faster(accelerator: str, tmp_path) -> None:
    """A SELECT_V2 of a scalar condition and x and y that broadcast: its 1x1x1 comparison and its
    steps on few columns run in blocks wider than their OFM (bit-exact), and the whole is no
    slower than Vela's binary on the estimator (2.30/1.91/2.33x Vela's cycles with blocks within
    the OFM)."""
    model = _both_broadcast("scalar_condition_x_and_y_broadcast")
    c = _bit_exact_on_the_npu(model, accelerator, tmp_path)
    wider = [s for s in c.schedule.operations if s.block[1] > s.lowered.ofm.shape[1]]
    assert any(s.lowered.ofm.shape == (1, 1, 1) for s in wider)
    pytest.importorskip("ethosu.vela")
    from cascader import vela
    from cascader.sim.estimator import total_cycles

    ours, theirs = total_cycles(c.model), total_cycles(vela.compile(model, accelerator=accelerator).model)
    assert ours <= 1.02 * theirs, (ours, theirs)


@pytest.mark.parametrize("accelerator", SIZES)
def test_a_tie_keeps_the_block_within_the_ofm(accelerator: str) -> None:
    """A requantizing PRELU's MINIMUM (mixed-sign alphas; with one quantization in and out the
    U85 takes MAX(x, MUL(x, alpha)) instead, tests/test_u85_prelu) is as fast in a block within
    its 8x8x16 OFM as in a wider one, and keeps the one within: the MULTIPLY it is chained into
    accepts that block (not a wider one, its broadcast operand's bricks fill a chaining-buffer
    slot), so the pair stays chained."""
    from test_u85_prelu import _prelu

    model = _prelu([int(a) for a in np.random.default_rng(0).integers(-100, 100, 16)], "int8", (1, 8, 8, 16),
                   same=False)
    c = cascader.compile(model, accelerator=accelerator)
    ops = [s for s in c.schedule.operations if s.lowered.kind == "elementwise"]
    k = [s.lowered.registers["sub_op"] for s in ops].index("MIN")
    assert [s.lowered.registers["sub_op"] for s in ops[k:k + 2]] == ["MIN", "MUL"]
    assert [s.chain for s in ops[k:k + 2]] == [(("ofm", 0),), (("ifm", 0),)]
    assert all(s.block[1] <= s.lowered.ofm.shape[1] for s in ops)
