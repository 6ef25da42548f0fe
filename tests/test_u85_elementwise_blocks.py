"""Ethos-U85 elementwise blocks (#43): Vela 5.2's own elementwise block (the output buffer's
row shared between width and depth granules, or a chaining-buffer slot of bricks when an
operand broadcasts in C or H; arch/ethos_u85/block_search) is one of the blocks the search
costs. A long map whose 32-bit channel column broadcasts over few channels (a softmax over 2
classes of 1118 anchors) has no block on the search's grid of tilings, only Vela's: such
softmaxes ran on the CPU before. Compiled for U85-128/256/512 and simulated bit-exact against
the reference interpreter on 2 seeds."""

from __future__ import annotations

import pytest

from cascader import zoo

from test_u85_lowering import _bit_exact_on_the_npu, _shared_model_on_the_npu

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
