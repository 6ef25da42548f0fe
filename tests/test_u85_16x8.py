"""Ethos-U85 (#43): 16x8 convolutions (int16 activations, int8 weights) on the U85's 48-bit
accumulators (emit/ethos_u85 `_sixteen_by_eight`), each compiled for U85-128/256/512 and
simulated bit-exact against the reference interpreter on 2 seeds, wholly on the NPU.

TFLite's 16x8 kernels with an int64 bias (and TRANSPOSE_CONV's, and TFLM's FULLY_CONNECTED,
which accumulate in int64 either way) rescale with the reduced 16-bit multiplier and round once,
half up: the 48-bit accumulators' scale entry (48-bit bias, 15-bit multiplier) with the NATURAL
round mode, as in Vela's U85 binaries. Covered: CONV_2D (3x3, 5x5 stride 2 VALID, 1x1 deep,
dilated), DEPTHWISE_CONV_2D (stride 1 and 2, a depth multiplier from one channel),
FULLY_CONNECTED (test_lower_fully_connected_16x8's layers: rows, per-tensor and per-channel
weights, no bias), TRANSPOSE_CONV (SAME and VALID, with and without a bias), a chain cascaded
under a budget and with its weights streamed in depth slices, and the int64
bias at both ends of the 40 bits the rules allow on every target (Vela's U85 takes up to 2^48 - 1;
the 48-bit entry would too, but the rules do not know the target yet).

Not on the U85's NPU, with the reason: a 16x8 convolution with an int32 bias (TFLite's 31-bit
multiplier, which the 15-bit entry does not hold). Vela 5.2 keeps it on the NPU, and its U85
binary is wrong in every output (`test_vela_int32_bias_binary_is_wrong`).
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader import zoo
from cascader.tflite.builder import ModelBuilder, quantization

from test_lower_fully_connected_16x8 import LAYERS, _layer
from test_lower_transpose_conv import transpose_conv
from test_u85_lowering import SIZES, _bit_exact_on_the_npu

RULE_BIAS_LIMIT = 1 << 39  # support.py's `bias` rule: |bias| below 2^39, on every target


def _conv16(shape, filters: int, kernel=(3, 3), bias_dtype: str = "int64", bias=None, seed: int = 0) -> cascader.Model:
    """One 16x8 CONV_2D (SAME, per-channel weights) with `bias` (default random) of `bias_dtype`."""
    rng = np.random.default_rng(seed)
    in_scale, out_scale = 1e-3, 4e-2
    b = ModelBuilder(description="16x8 conv")
    x = b.add_input("x", shape, "int16", quantization(in_scale, 0))
    ws = rng.uniform(0.002, 0.01, size=filters).astype(np.float32)
    w = b.add_constant("w", rng.integers(-127, 128, size=(filters, *kernel, shape[3])).astype(np.int8), "int8",
                       quantization(ws, 0, 0))
    values = rng.integers(-2**20, 2**20, size=filters) if bias is None else np.asarray(bias)
    bias_t = b.add_constant("b", values.astype(bias_dtype), bias_dtype,
                            quantization(np.float32(in_scale) * ws.astype(np.float64), 0, 0))
    y = b.add_tensor("y", (*shape[:3], filters), "int16", quantization(out_scale, 0))
    b.add_operator("CONV_2D", [x, w, bias_t], [y],
                   {"padding": "SAME", "stride_h": 1, "stride_w": 1, "fused_activation_function": "NONE"}, version=4)
    b.mark_output(y)
    return b.build()


def _net(method: str, shape, **params) -> cascader.Model:
    return zoo._single_op_net(method, [shape], 1, "int16", **params).build()


CASES = {
    "conv_3x3": lambda: _net("conv2d", (1, 8, 8, 16), filters=8),
    "conv_5x5_s2_valid": lambda: _net("conv2d", (1, 13, 11, 20), filters=24, kernel=(5, 5), stride=(2, 2),
                                      padding="VALID"),
    "conv_1x1_deep": lambda: _net("conv2d", (1, 7, 9, 33), filters=70, kernel=(1, 1)),
    "conv_dilated": lambda: _net("conv2d", (1, 12, 12, 8), filters=8, dilation=(2, 2)),
    # The bias at the ends of the 40 bits the rules allow (support.py's `bias`, the U55's
    # limit): the outputs saturate, as the reference's do.
    "conv_bias_40_bits": lambda: _conv16((1, 5, 5, 8), 4, bias=[-RULE_BIAS_LIMIT + 1, RULE_BIAS_LIMIT - 1, 5, -5]),
    "depthwise_3x3": lambda: _net("depthwise_conv2d", (1, 8, 8, 16)),
    "depthwise_s2": lambda: _net("depthwise_conv2d", (1, 9, 10, 24), stride=(2, 2), activation=None),
    "depthwise_multiplier": lambda: _net("depthwise_conv2d", (1, 9, 9, 1), depth_multiplier=8),
    **{"fc_" + "x".join(map(str, layer[:3])) + ("_pc" if layer[3] else "_pt") + ("" if layer[4] else "_nobias"):
       (lambda layer=layer: _layer(*layer, seed=0)) for layer in LAYERS},
    "transpose_conv_s2_same": lambda: transpose_conv((1, 4, 5, 8), 16, (3, 3), (2, 2), "SAME", dtype="int16",
                                                     ifm_q=(1e-3, 0), ofm_q=(4e-3, 0)),
    "transpose_conv_valid_relu": lambda: transpose_conv((1, 3, 4, 5), 7, (2, 4), (2, 2), "VALID", dtype="int16",
                                                        bias=False, activation="RELU", ifm_q=(1e-3, 0),
                                                        ofm_q=(4e-3, 0)),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_16x8_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(CASES[case](), accelerator, tmp_path)
    weighted = [s.lowered for s in c.schedule.operations if s.lowered.weights is not None]
    assert weighted and all(op.ifm.dtype == "int16" and op.registers["acc_format"] == 1 for op in weighted)


def _u85_round_modes(c: cascader.CompiledModel) -> set[int]:
    from cascader.sim import npu_calls

    return {r["u85"]["ofm_round_mode"] for call in npu_calls(c.model) for r in call.decode().operations
            if r["kind"] in ("conv", "depthwise")}


def test_16x8_rounds_once_half_up() -> None:
    """The registers Vela writes: ACC_FORMAT's 48-bit accumulators and the NATURAL round mode."""
    c = cascader.compile(CASES["conv_3x3"](), accelerator="ethos-u85-256")
    assert _u85_round_modes(c) == {1}


def test_16x8_with_an_int32_bias_runs_on_the_cpu() -> None:
    """On the U85 only: the U55 runs it on the NPU."""
    model = _conv16((1, 5, 5, 8), 4, bias_dtype="int32")
    verdicts = cascader.compile(model, accelerator="ethos-u85-256").partition.verdicts
    refused = [v for v in verdicts if not v.npu]
    assert len(refused) == 1 and refused[0].rule == "target", refused
    assert refused[0].reason.startswith("a 16x8 convolution with a 31-bit multiplier (an int32 bias)")
    assert all(v.npu for v in cascader.compile(model, accelerator="ethos-u55-128").partition.verdicts)


def test_vela_int32_bias_binary_is_wrong(tmp_path) -> None:
    """Why an int32-bias 16x8 convolution stays on the CPU rather than following Vela: Vela 5.2's
    U85 binary of it differs from the reference in every output."""
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    try:
        binary = cascader.vela.compile(_conv16((1, 6, 6, 8), 4, bias_dtype="int32"), "ethos-u85-256")
    except cascader.vela.VelaNotInstalled:
        pytest.skip("Vela is not installed")
    path = tmp_path / "model.tflite"
    cascader.save_model(_conv16((1, 6, 6, 8), 4, bias_dtype="int32"), path)
    result = validate(path, binary.model, seeds=(0,), config_label="ethos-u85-256")
    assert result.bit_exact is False and "144/144 differ" in str(result.details), result.details


def _chain16() -> cascader.Model:
    from cascader._zoo_layers import CalibratedNet

    net = CalibratedNet(0, description="16x8 chain")
    x = net.input((1, 48, 48, 16), -1.0, 1.0, name="input", dtype="int16")
    x = net.conv2d(x, filters=32, kernel=(3, 3), stride=(2, 2))
    x = net.depthwise_conv2d(x, kernel=(3, 3))
    x = net.conv2d(x, filters=64, kernel=(1, 1))
    net.output(net.conv2d(x, filters=32, kernel=(3, 3)))
    return net.build()


def test_16x8_cascades_and_weight_slices_bit_exact(tmp_path) -> None:
    """A 16x8 chain cascaded under 40% of its uncascaded SRAM (stripes of the 48-bit
    operations), and with its weights streamed from flash in depth slices (Shared_Sram: each
    slice's scale stream in the 48-bit layout), bit-exact on U85-256."""
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    model = _chain16()
    path = tmp_path / "chain16.tflite"
    cascader.save_model(model, path)
    budget = int(cascader.compile(model, accelerator="ethos-u85-256").sram_bytes * 0.4)
    cascaded = cascader.compile(model, accelerator="ethos-u85-256", sram=budget)
    assert cascaded.sram_bytes <= budget and any(s.cascade is not None for s in cascaded.schedule.operations)
    sliced = cascader.compile(model, accelerator="ethos-u85-256", system="Ethos_U85_SYS_Flash_High",
                              memory_mode="Shared_Sram")
    assert any(s.depth_step for s in sliced.schedule.operations)
    for c in (cascaded, sliced):
        result = validate(path, c.binary, seeds=(0, 1), config_label="ethos-u85-256")
        assert result.bit_exact, (result.error, result.details)
