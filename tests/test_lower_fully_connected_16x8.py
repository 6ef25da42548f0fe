"""16x8 FULLY_CONNECTED (int16 activations, int8 weights, int64 or no bias), judged on TFLM
(`reference.MICRO_OPERATORS`): TFLM rescales the int64 accumulator with the reduced 16-bit
multiplier of the double-precision scale product, rounded once, where LiteRT uses the whole
32-bit one (on 200 random layers the two disagree on 701 of 10,309 outputs). Random scales,
per-tensor and per-channel weights, several rows, with and without a bias; Vela 5.2's binaries
of the same layers match TFLM too."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.reference import ReferenceInterpreter, random_inputs
from cascader.tflite import Model
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
pytest.importorskip("tflite_micro")

ACCELERATORS = ["ethos-u55-128", "ethos-u65-256"]
# (depth, units, rows, per-channel weights, bias)
LAYERS = [(7, 5, 1, False, True), (64, 16, 3, True, True), (300, 12, 2, False, False), (33, 40, 4, True, False)]


def _layer(depth: int, units: int, rows: int, per_channel: bool, bias: bool, seed: int) -> Model:
    """One FULLY_CONNECTED with random scales whose outputs spread over most of int16."""
    rng = np.random.default_rng(seed)
    in_scale = float(10 ** rng.uniform(-5, -2))
    w_scale = (10 ** rng.uniform(-3, -1, size=units if per_channel else 1)).astype(np.float32)
    out_scale = in_scale * float(w_scale.mean()) * np.sqrt(depth) / 10 ** rng.uniform(-3, -1)
    b = ModelBuilder(description="16x8 fully connected")
    x = b.add_input("x", (rows, depth), "int16", quantization(in_scale, 0))
    w = b.add_constant("w", rng.integers(-127, 128, size=(units, depth)).astype(np.int8), "int8",
                       quantization(w_scale if per_channel else w_scale[0], 0, 0))
    inputs = [x, w, -1]
    if bias:
        bias_scale = np.float32(in_scale) * w_scale.astype(np.float64)
        inputs[2] = b.add_constant("b", rng.integers(-2**20, 2**20, size=units), "int64",
                                   quantization(bias_scale if per_channel else bias_scale[0], 0, 0))
    y = b.add_tensor("y", (rows, units), "int16", quantization(out_scale, 0))
    b.add_operator("FULLY_CONNECTED", inputs, [y], {"fused_activation_function": "NONE"}, version=7)
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("layer", LAYERS, ids=lambda p: "x".join(map(str, p[:3])) + ("_pc" if p[3] else "_pt")
                         + ("" if p[4] else "_nobias"))
def test_16x8_fully_connected_bit_exact_on_tflm(layer, seed, accelerator):
    model = _layer(*layer, seed)
    compiled = cascader.compile(model, accelerator=accelerator)
    assert compiled.summary().cpu_operators == 0
    result = compiled.check(seeds=2)
    assert result.bit_exact, result.details


def test_litert_departs_from_tflm_on_these_layers():
    """What makes the judge matter: LiteRT's 32-bit multiplier differs on some outputs."""
    departs = 0
    for layer in LAYERS:
        for seed in (0, 1):
            model = _layer(*layer, seed)
            inputs = random_inputs(model)
            departs += not np.array_equal(ReferenceInterpreter(model).run(inputs)[0],
                                          ReferenceInterpreter(model, engine="reference").run(inputs)[0])
    assert departs >= 4


@pytest.mark.parametrize("layer", LAYERS[:2])
def test_vela_binaries_match_tflm(layer, tmp_path):
    pytest.importorskip("ethosu.vela")
    from cascader.bench.simulate import validate
    from cascader.tflite import save_model
    from cascader.vela import VelaConfig, compile_with_vela

    path = tmp_path / "fc16x8.tflite"
    path.write_bytes(save_model(_layer(*layer, 0)))
    result = validate(path, compile_with_vela(path, VelaConfig("ethos-u55-128")).path)
    assert result.bit_exact, result.details
