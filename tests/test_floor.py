"""The floor (`cascader.floor`): the least SRAM any schedule needs, reported with the frontier.

It is a lower bound of every frontier point on every zoo and shared model, tight where a whole
tensor dominates, and its accounting (which tensors TFLM sees, which a reduction needs whole,
which arena they sit in) is checked on hand-built models against sums worked out by hand."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import cascader
from cascader import zoo
from cascader._zoo_layers import CalibratedNet
from cascader.floor import floor
from cascader.lowering import lower
from cascader.planner import plan
from cascader.scheduling import schedule

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")  # Shared_Sram and Dedicated_Sram by default


def _shared_models() -> list[Path]:
    folder = os.environ.get("CASCADER_MODELS")
    return sorted(Path(folder).glob("*.tflite")) if folder else []


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_floor_is_below_the_least_point(name, accelerator):
    frontier = plan(zoo.get(name), accelerator=accelerator)
    assert 0 <= frontier.floor_bytes <= frontier.points[0].sram_bytes, frontier
    assert bool(frontier.floor_operator) == (frontier.floor_bytes > 0)
    if accelerator == "ethos-u55-128":  # Shared_Sram: TFLM's input is in the SRAM
        assert frontier.floor_bytes > 0


@pytest.mark.parametrize("path", _shared_models(), ids=lambda p: p.stem)
def test_floor_is_below_the_least_point_on_shared_models(path):
    for accelerator in ACCELERATORS:
        frontier = plan(path, accelerator=accelerator)
        assert frontier.floor_bytes <= frontier.points[0].sram_bytes, frontier


def test_floor_is_tight_where_whole_tensors_dominate():
    """The autoencoder's input and first dense layer's output are whole together (TFLM hands
    the input in; the second layer reads all of the first's output at once): no schedule does
    better, and the planner's least point is exactly that."""
    frontier = plan(zoo.fc_autoencoder())
    assert frontier.floor_bytes == 640 + 128 == frontier.points[0].sram_bytes
    assert frontier.floor_operator == "0:FULLY_CONNECTED"


def _resident_floor(model, accelerator: str) -> tuple[int, str]:
    """The floor of the schedules that keep every feature map but TFLM's in SRAM
    (`floor(..., resident=True)`; on Dedicated_Sram the floor itself is 0)."""
    acc = cascader.Accelerator(accelerator)
    part, segments = lower(model, acc.name)
    least = floor(part, schedule(part, segments, acc.name, acc.default_system, acc.default_memory_mode.value),
                  resident=True)
    return least.bytes, least.operator


def _pooled(in_channels: int, channels: int) -> cascader.Model:
    """input 16x16x`in_channels` -> conv 1x1 to `channels` -> MEAN -> dense 8: the conv's
    output is needed whole by the MEAN."""
    net = CalibratedNet(0)
    x = net.conv2d(net.input((1, 16, 16, in_channels)), channels, (1, 1), name="features")
    x = net.mean(x, keep_dims=False, name="pool")
    net.output(net.fully_connected(x, 8, name="logits"))
    return net.build()


def test_a_reduction_needs_its_input_whole():
    # The MEAN reads all 4,096 B of features at once, and writes 16 B the dense layer reads
    # whole. At the conv, the features may be written over the dying input (a staircase): the
    # floor counts the larger of the two there.
    frontier = plan(_pooled(4, 16))
    assert (frontier.floor_bytes, frontier.floor_operator) == (4096 + 16, "1:MEAN(average)")
    assert frontier.points[0].sram_bytes >= frontier.floor_bytes
    # A wide input: in Shared_Sram it is TFLM's tensor in the SRAM, and the floor; in
    # Dedicated_Sram TFLM's tensors are in the slow memory, and the features and the MEAN's
    # output are what SRAM must hold.
    frontier = plan(_pooled(16, 4))
    assert (frontier.floor_bytes, frontier.floor_operator) == (4096, "inputs")
    assert _resident_floor(_pooled(16, 4), "ethos-u65-256") == (1024 + 16, "1:MEAN(average)")
    # And with feature maps in DRAM, no SRAM at all.
    assert plan(_pooled(16, 4), accelerator="ethos-u65-256").floor_bytes == 0


def test_the_squeeze_excite_gate_needs_the_features_whole():
    """The gate depends on every feature it multiplies: the features are whole when the MUL
    starts, beside the gate, whatever cascades run."""
    net = CalibratedNet(0)
    x = net.conv2d(net.input((1, 16, 16, 8)), 32, (1, 1), name="features")
    s = net.conv2d(net.mean(x, name="squeeze"), 8, (1, 1), activation="RELU", name="reduce")
    gate = net.logistic(net.conv2d(s, 32, (1, 1), activation=None, name="expand"), name="gate")
    y = net.mul(x, gate, name="excite")
    net.output(net.conv2d(y, 8, (1, 1), name="project"))
    model = net.build()
    frontier = plan(model, accelerator="ethos-u65-256")
    features, gate_bytes = 16 * 16 * 32, 32
    resident, _ = _resident_floor(model, "ethos-u65-256")
    assert resident >= features + gate_bytes
    assert resident <= frontier.resident.sram_bytes


def test_the_compiled_frontier_carries_the_floor_and_plots_it(tmp_path):
    pytest.importorskip("matplotlib")
    compiled = cascader.compile(zoo.fc_autoencoder())
    frontier = compiled.pareto
    assert (frontier.floor_bytes, frontier.floor_operator) == (768, "0:FULLY_CONNECTED")
    assert frontier.floor_bytes <= frontier.points[0].sram_bytes
    fig = compiled.plot_pareto(str(tmp_path / "pareto.png"))
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert any("floor" in label and "0:FULLY_CONNECTED" in label for label in labels)
