"""Cycle gaps against Vela (#44), each pinned on the same yardstick: both binaries on our estimator.

- A weight buffer in one slot: where no double buffer of depth slices fits beside an operation's
  IFM and OFM, the slices take turns in one slot (Vela's Size binaries do so), instead of the
  NPU reading the weights from flash once per OFM block row.
- On Dedicated_Sram without a budget, a weight buffer above the feature maps' peak is kept
  when it saves a cycle per 20 bytes, as under a budget (zoo MobileNetV1's last pointwise on
  U65-256: 1,391 cycles for 14,848 B, which left our binary 0.9% slower than Vela's).
- Weights the NPU reads in one pass from flash are double-buffered in depth slices where that
  pays with the first slice's DMA hidden only in the flash time the previous operation leaves
  idle (Vela's Performance binaries read them in place; uncascaded on U55-128, 0.9319 -> 0.9288
  of Vela's cycles, geomean of 32 models).
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ethosu.vela")

from cascader import vela, zoo  # noqa: E402
from cascader.bench.simulate import validate  # noqa: E402
from cascader.compiler import compile as compile_model  # noqa: E402
from cascader.tflite import save_model  # noqa: E402


def test_single_slot_weight_buffer_at_vela_size_sram(tmp_path):
    # MobileNetV1-0.75 at output stride 16: its last 768 x 768 pointwise, beside its IFM and
    # OFM, is the peak; at Vela's Size SRAM a 16-channel slice fits once, not twice.
    model = zoo.mobilenet_v1(alpha=0.75, resolution=(97, 129), output_stride=16)
    size = vela.compile(model, "ethos-u55-128", optimise="Size")
    budget = math.ceil(size.sram_bytes)
    ours = compile_model(model, sram=budget, accelerator="ethos-u55-128")
    assert ours.sram_bytes <= budget
    single = [op for op in ours.schedule.operations if op.single_slot]
    assert single and all(op.weight_buffer and op.depth_step for op in single)
    last = single[-1]
    assert last.cost.total_cycles < 0.85 * last.direct_cost.total_cycles  # 884,562 against 1,115,712 in place
    ratio = ours.estimate().total_cycles / size.estimate().total_cycles
    assert ratio <= 0.9, ratio  # 2,405,949 against 2,830,840: 0.850 (1.048 with the weights read in place)
    save_model(model, tmp_path / "model.tflite")
    v = validate(tmp_path / "model.tflite", ours.model, (0, 1), config_label="ethos-u55-128")
    assert v.bit_exact, v.details[:2]


def test_dedicated_sram_unlimited_keeps_paying_buffers(tmp_path):
    model = zoo.mobilenet_v1()
    perf = vela.compile(model, "ethos-u65-256", optimise="Performance", sram=vela.UNLIMITED_SRAM)
    ours = compile_model(model, accelerator="ethos-u65-256")
    assert ours.estimate().total_cycles <= perf.estimate().total_cycles  # 1.009x before
    assert ours.sram_bytes <= perf.sram_bytes  # 70,144 B against 74,480
    save_model(model, tmp_path / "model.tflite")
    v = validate(tmp_path / "model.tflite", ours.model, (0, 1), config_label="ethos-u65-256")
    assert v.bit_exact, v.details[:2]


def _single_pass(sop) -> bool:
    h, w, _ = sop.lowered.ofm.shape
    return -(-h // sop.block[0]) * -(-w // sop.block[1]) == 1


def test_single_pass_weights_buffered_where_flash_is_idle(tmp_path):
    model = zoo.mobilenet_v2()
    perf = vela.compile(model, "ethos-u55-128", optimise="Performance", sram=vela.UNLIMITED_SRAM)
    ours = compile_model(model, accelerator="ethos-u55-128")
    buffered = [op for op in ours.schedule.operations if op.weight_buffer and _single_pass(op)]
    assert buffered and all(op.depth_step and op.cost.total_cycles < op.direct_cost.total_cycles for op in buffered)
    ratio = ours.estimate().total_cycles / perf.estimate().total_cycles
    assert ratio <= 0.95, ratio  # 0.968 reading single-pass weights in place, 0.948 so
    save_model(model, tmp_path / "model.tflite")
    v = validate(tmp_path / "model.tflite", ours.model, (0, 1), config_label="ethos-u55-128")
    assert v.bit_exact, v.details[:2]


def test_single_pass_weights_stay_in_flash_behind_flash_bound_operations():
    # Each fully connected layer reads its weights from flash for most of its time: the next
    # one's DMA would share that bandwidth, which Vela's accounting does not see.
    model = zoo.get("fc_autoencoder")
    perf = vela.compile(model, "ethos-u55-128", optimise="Performance", sram=vela.UNLIMITED_SRAM)
    ours = compile_model(model, accelerator="ethos-u55-128")
    assert not any(op.weight_buffer for op in ours.schedule.operations)
    assert ours.sram_bytes == 768  # 26,256 B with their weights buffered, for 5% on the estimator alone
    assert ours.estimate().total_cycles <= perf.estimate().total_cycles
