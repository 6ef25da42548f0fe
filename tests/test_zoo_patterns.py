"""The zoo's models of the patterns real networks cascade through (#44): a BlazeBlock's
channel-padded shortcut, an NCHW input's TRANSPOSE, a U-Net's concatenated skips and
upsampling at 128x128. Each is the architecture as TFLite's converter writes it, and compiles
bit-exact, uncascaded and at its least SRAM (cascaded)."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader import zoo
from cascader.bench.simulate import validate

PATTERNS = ("blazeface_blocks", "mobilenet_v2_nchw", "unet_128")


def opcodes(model: cascader.Model) -> list[str]:
    return [op.opcode for op in model.main.operators]


def test_blazeface_pads_its_widening_shortcuts_on_the_channel_axis():
    model = zoo.blazeface_blocks()
    pads = [op for op in model.main.operators if op.opcode == "PAD"]
    widening = sum(out > prev for (out, _), (prev, _) in zip(zoo.BLAZE_BLOCKS, ((24, 1),) + zoo.BLAZE_BLOCKS))
    assert len(pads) == widening
    first = model.main.tensors[pads[0].inputs[1]].data
    assert first.tolist() == [[0, 0], [0, 0], [0, 0], [0, 4]]  # 24 -> 28 channels
    assert opcodes(model).count("MAX_POOL_2D") == sum(s == 2 for _, s in zoo.BLAZE_BLOCKS)
    assert opcodes(model).count("ADD") == len(zoo.BLAZE_BLOCKS)
    assert model.main.tensors[model.main.outputs[0]].shape == (1, 16 * 16 * 2, 1)


def test_mobilenet_v2_nchw_transposes_its_input_once():
    model = zoo.mobilenet_v2_nchw()
    ops = opcodes(model)
    assert ops[0] == "TRANSPOSE" and ops.count("TRANSPOSE") == 1
    assert model.main.tensors[model.main.inputs[0]].shape == (1, 3, 96, 96)
    assert ops[1:] == opcodes(zoo.mobilenet_v2())


def test_unet_128_runs_at_128():
    model = zoo.unet_128()
    assert model.main.tensors[model.main.outputs[0]].shape == (1, 128, 128, 4)
    ops = opcodes(model)
    assert ops.count("CONCATENATION") == 2 and ops.count("TRANSPOSE_CONV") == 1
    assert ops.count("RESIZE_NEAREST_NEIGHBOR") == 1


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
@pytest.mark.parametrize("name", PATTERNS)
def test_pattern_compiles_bit_exact(tmp_path, name, accelerator):
    path = tmp_path / f"{name}.tflite"
    cascader.save_model(zoo.get(name), path)
    for optimise in ("performance", "size"):
        compiled = cascader.compile(path, accelerator=accelerator, optimise=optimise)
        assert compiled.summary().npu_operators == len(zoo.get(name).main.operators), "all on the NPU"
        result = validate(path, compiled.model, seeds=(0,))
        assert result.bit_exact, f"{name} on {accelerator} ({optimise}): {result.details}"
