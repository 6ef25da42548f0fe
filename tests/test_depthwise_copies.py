"""Copies run as 1x1 depthwise convolutions by a weight of 1 (`frontend.depthwise_copies`):
each copy form bit-exact against the reference interpreter on two seeds on ethos-u55-128 and
ethos-u65-256 (a QUANTIZE into a concatenation's slice, a standalone RELU / RELU6 that
rescales, each RELU, a uint8 concatenation that rescales an input, a concatenation's plain
copy of an input it reads twice, a SLICE's copy, a 2x nearest-neighbour upscale, a channel
PAD's interior copy), int8 and uint8, taken only where the cycle model says it is
faster, with fewer cycles where it is; int16 copies, transposes' pieces and the U85 keep their
pools.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader import zoo
from cascader._zoo_layers import CalibratedNet
from cascader.frontend import depthwise_copies
from cascader.frontend import lower as lower_module
from cascader.lowering import lower
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from conftest import compile_exact  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")


def _copies(model, accelerator) -> dict[str, list[str]]:
    """The lowering's 1x1 depthwise copies and pool copies, by name."""
    _, segments = lower(model, accelerator)
    ops = [op for seg in segments for op in seg.operations]
    return {"depthwise": [op.name for op in ops if op.kind == "depthwise" and np.all(op.weights.values == 1)
                          and op.weights.values.shape[1:3] == (1, 1)],
            "pool": [op.name for op in ops if op.kind == "pool" and op.registers.get("sub_op") == "AVERAGE"]}


@pytest.fixture
def always_convert(monkeypatch):
    """Convert every plain copy, whatever the cycle model says: the arithmetic is checked on
    shapes where the pool would be kept too."""
    monkeypatch.setattr(depthwise_copies, "placement_cycles",
                        lambda lw, op: (0.0, 0.0) if op.kind == "depthwise" else (1.0, 1.0))


def _requantize_into_concat(dtype: str) -> cascader.Model:
    """Two maps of other quantizations concatenated: each QUANTIZE writes its slice."""
    b = ModelBuilder()
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    x = b.add_input("x", (1, 12, 10, 16), dtype, quantization(0.031, lo + 5))
    y = b.add_input("y", (1, 12, 10, 24), dtype, quantization(0.017, hi - 9))
    joined = quantization(0.043, (lo + hi) // 2)
    qx = b.add_tensor("qx", (1, 12, 10, 16), dtype, joined)
    qy = b.add_tensor("qy", (1, 12, 10, 24), dtype, joined)
    b.add_operator("QUANTIZE", [x], [qx], version=2)
    b.add_operator("QUANTIZE", [y], [qy], version=2)
    out = b.add_tensor("out", (1, 12, 10, 40), dtype, joined)
    b.add_operator("CONCATENATION", [qx, qy], [out], {"axis": 3, "fused_activation_function": "NONE"})
    b.mark_output(out)
    return b.build()


def _uint8_concat_rescaled() -> cascader.Model:
    """A uint8 CONCATENATION whose inputs keep their own quantizations: the kernel rescales."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 9, 14, 8), "uint8", quantization(0.05, 100))
    y = b.add_input("y", (1, 9, 14, 8), "uint8", quantization(0.021, 17))
    mx = b.add_tensor("mx", (1, 9, 14, 8), "uint8", quantization(0.05, 100))
    b.add_operator("MAXIMUM", [x, x], [mx], version=2)
    out = b.add_tensor("out", (1, 9, 14, 16), "uint8", quantization(0.037, 64))
    b.add_operator("CONCATENATION", [mx, y], [out], {"axis": 3, "fused_activation_function": "NONE"})
    b.mark_output(out)
    return b.build()


def _relu(kind: str) -> cascader.Model:
    net = CalibratedNet(3)
    x = net.input((1, 20, 12, 16))
    net.output(net.relu(net.conv2d(x, 16, (3, 3), activation=None), kind))
    return net.build()


def _concatenated_twice() -> cascader.Model:
    """A CONCATENATION of one map with itself: no producer can write both slices, so each is a
    plain copy (one quantization, no rescale)."""
    b = ModelBuilder()
    q = quantization(0.031, -3)
    x = b.add_input("x", (1, 7, 9, 16), "int8", q)
    m = b.add_tensor("m", (1, 7, 9, 16), "int8", q)
    b.add_operator("MAXIMUM", [x, x], [m], version=2)
    out = b.add_tensor("out", (1, 7, 9, 32), "int8", q)
    b.add_operator("CONCATENATION", [m, m], [out], {"axis": 3, "fused_activation_function": "NONE"})
    b.mark_output(out)
    return b.build()


def _slice(dtype: str) -> cascader.Model:
    """A SLICE of a map the NPU makes, to a model output: copied out of its box."""
    b = ModelBuilder()
    q = quantization(0.027, -11 if dtype == "int8" else 117)
    x = b.add_input("x", (1, 12, 10, 16), dtype, q)
    m = b.add_tensor("m", (1, 12, 10, 16), dtype, q)
    b.add_operator("MAXIMUM", [x, x], [m], version=2)
    begin = b.add_constant("begin", np.array([0, 2, 1, 0], np.int32))
    size = b.add_constant("size", np.array([1, 8, 6, 16], np.int32))
    y = b.add_tensor("y", (1, 8, 6, 16), dtype, q)
    b.add_operator("SLICE", [m, begin, size], [y])
    b.mark_output(y)
    return b.build()


def _upscale(dtype: str) -> cascader.Model:
    """A 2x RESIZE_NEAREST_NEIGHBOR of a map the NPU makes (a MAXIMUM: a lone resize stays on
    the CPU)."""
    b = ModelBuilder()
    q = quantization(0.023, 7 if dtype == "int8" else 131)
    x = b.add_input("x", (1, 10, 8, 16), dtype, q)
    m = b.add_tensor("m", (1, 10, 8, 16), dtype, q)
    b.add_operator("MAXIMUM", [x, x], [m], version=2)
    size = b.add_constant("size", np.array([20, 16], np.int32))
    y = b.add_tensor("y", (1, 20, 16, 16), dtype, q)
    b.add_operator("RESIZE_NEAREST_NEIGHBOR", [m, size], [y], {"align_corners": False, "half_pixel_centers": False})
    b.mark_output(y)
    return b.build()


def _channel_pad() -> cascader.Model:
    """A channel pad (24 -> 28) of a map another operation also reads: copied into the padded
    map's interior."""
    net = CalibratedNet(9)
    x = net.conv2d(net.input((1, 16, 16, 8)), 24, (3, 3))
    padded = net.pad(x, ((0, 0), (0, 0), (0, 0), (0, 4)))
    net.output(net.add(padded, net.conv2d(x, 28, (1, 1), activation=None)))
    return net.build()


FORMS = {
    "requantize into a concatenation int8": lambda: _requantize_into_concat("int8"),
    "requantize into a concatenation uint8": lambda: _requantize_into_concat("uint8"),
    "uint8 concatenation rescaled": _uint8_concat_rescaled,
    "RELU": lambda: _relu("RELU"),
    "RELU6": lambda: _relu("RELU6"),
    "RELU_N1_TO_1": lambda: _relu("RELU_N1_TO_1"),
    "RELU_0_TO_1": lambda: _relu("RELU_0_TO_1"),
    "concatenation plain copies": _concatenated_twice,
    "slice int8": lambda: _slice("int8"),
    "slice uint8": lambda: _slice("uint8"),
    "nearest upscale int8": lambda: _upscale("int8"),
    "nearest upscale uint8": lambda: _upscale("uint8"),
    "channel pad": _channel_pad,
}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("form", FORMS)
def test_each_copy_form_is_bit_exact_as_a_depthwise_convolution(tmp_path, always_convert, form, accelerator):
    model = FORMS[form]()
    assert _copies(model, accelerator)["depthwise"], "no copy converted"
    compile_exact(tmp_path, model, accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_unet_copies_convert_where_faster_and_cost_fewer_cycles(tmp_path, monkeypatch, accelerator):
    """zoo unet's requantizing copies into its concatenations and its 2x upscale run as
    depthwise convolutions (U55-128 unlimited: 138,595 -> 123,971 cycles), bit-exact."""
    model = zoo.unet()
    copies = _copies(model, accelerator)
    assert any("QUANTIZE" in n for n in copies["depthwise"]) and any("RESIZE" in n for n in copies["depthwise"])
    converted = compile_exact(tmp_path, model, accelerator)
    monkeypatch.setattr(lower_module, "convert_copies", lambda lw: None)
    pools = cascader.compile(model, accelerator=accelerator)
    assert cascader.estimate(converted).total_cycles < 0.95 * cascader.estimate(pools).total_cycles


def test_copies_the_cycle_model_prefers_as_pools_stay_pools(monkeypatch):
    """With the pool the faster form, nothing converts."""
    monkeypatch.setattr(depthwise_copies, "placement_cycles",
                        lambda lw, op: (2.0, 2.0) if op.kind == "depthwise" else (1.0, 1.0))
    copies = _copies(zoo.unet(), "ethos-u55-128")
    assert not copies["depthwise"] and copies["pool"]


def test_int16_transposes_and_the_u85_keep_their_pools(always_convert):
    net = CalibratedNet(4)
    x = net.input((1, 8, 8, 16), dtype="int16")
    net.output(net.requantize(net.conv2d(x, 16, (3, 3)), quantization(0.002, 0)))
    assert not _copies(net.build(), "ethos-u55-128")["depthwise"]
    b = ModelBuilder()
    x = b.add_input("x", (1, 6, 10, 16), "int8", quantization(0.02, 3))
    perm = b.add_constant("perm", np.array([0, 2, 1, 3], np.int32))
    y = b.add_tensor("y", (1, 10, 6, 16), "int8", quantization(0.02, 3))
    b.add_operator("TRANSPOSE", [x, perm], [y])
    b.mark_output(y)
    assert not _copies(b.build(), "ethos-u55-128")["depthwise"]
    assert not _copies(zoo.unet(), "ethos-u85-256")["depthwise"]
