"""Ethos-U85 (#43): lowered operations the U85 emitter (emit/ethos_u85) expresses beyond
test_u85_compile's zoo, each compiled for U85-128/256/512 and simulated bit-exact against the
reference interpreter on 2 seeds, with no operator left on the CPU.

- Unscaled elementwise operations (the lowering leaves both operands as they are, OPA/OPB scale
  1.0): PRELU's MIN, per-channel MUL and ADD of codes of one scale; MINIMUM/MAXIMUM of operands
  of one quantization, broadcast in H/W/C or a scalar.
- REDUCE_SUM pooling of 8-bit maps (SUM and MEAN over the channels, alone or after a sum over H):
  the U85's REDUCE_SUM with the U55's OFM scale.
- 16-bit maps of pooling (SUM, MEAN, REDUCE_MAX over H/W, C, both, past one window) and of
  unscaled elementwise operations (int16 LEAKY_RELU with its own output scale: AVERAGE, MUL, ADD).
- int16 tables (LUT_S16_S16, 512 interpolated words): int16 EXP and int16 SOFTMAX.
- int8 SOFTMAX: its exponentials' table (LUT_S8_S32), 32-bit SHR/SHL/CLZ/ADD/SUB/MUL steps (the
  U55's unclipped 32-bit OFM is the U85's clip range NONE), REDUCE_SUM of 32-bit maps, SUBs with
  reversed operands as the U85's swapped ones (IFM_BROADCAST); the shared models whose SOFTMAX
  was their only CPU operator on the U85, wholly on the NPU.
- REDUCE_MIN (int8 and int16): its negations are SUBs with reversed operands from a one-element
  map, the U85's SUB of that map broadcast as the IFM (IFM_BROADCAST).

- 8x8 convolutions writing 16-bit OFMs from 32-bit accumulators: the int8 LSTM's gates
  (lstm_kws), which ran on the CPU on the U85 before. (ARG_MAX, coral_deeplabv3's 513 x 513 x 21
  included, is the U85's ARGMAX pooling: test_u85_arg_max.)

16x8 convolutions, int16 TANH/LOGISTIC and int16 ADD/SUB have files of their own
(test_u85_16x8, test_u85_tanh_sigmoid, test_u85_int16_add_sub).
"""

from __future__ import annotations

import collections

import pytest

import cascader
from cascader import zoo
from cascader.sim import npu_calls

from conftest import shared_models_dir

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]


def _bit_exact_on_the_npu(model, accelerator: str, tmp_path) -> cascader.CompiledModel:
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    c = cascader.compile(model, accelerator=accelerator)
    assert [v.reason for v in c.partition.verdicts if not v.npu] == []
    path = tmp_path / "model.tflite"
    cascader.save_model(model, path)
    result = validate(path, c.binary, seeds=(0, 1), config_label=accelerator)
    assert result.bit_exact, (result.error, result.details)
    return c


def _sub_ops(c: cascader.CompiledModel) -> collections.Counter:
    return collections.Counter(s.lowered.registers.get("sub_op") for s in c.schedule.operations
                               if s.lowered.kind == "elementwise")


ELEMENTWISE = {
    "prelu": lambda seed: zoo.prelu((1, 9, 7, 20), seed=seed),
    "prelu_negative_alpha": lambda seed: zoo.prelu((1, 5, 6, 16), alpha_range=(-2.0, -0.1), seed=seed),
    "prelu_positive_alpha": lambda seed: zoo.prelu((1, 4, 33, 3), alpha_range=(0.05, 1.5), seed=seed),
    "minimum": lambda seed: zoo._single_op_net("minimum", [(1, 6, 5, 24), (1, 6, 5, 24)], seed).build(),
    "maximum_broadcast_channels": lambda seed: zoo._single_op_net("maximum", [(1, 6, 5, 24), (1, 1, 1, 24)],
                                                                  seed).build(),
    "minimum_broadcast_rows": lambda seed: zoo._single_op_net("minimum", [(1, 6, 5, 8), (1, 1, 5, 8)], seed).build(),
    "maximum_scalar": lambda seed: zoo._single_op_net("maximum", [(1, 6, 5, 8), (1, 1, 1, 1)], seed).build(),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(ELEMENTWISE))
def test_unscaled_elementwise_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(ELEMENTWISE[case](0), accelerator, tmp_path)
    assert set(_sub_ops(c)) <= {"MIN", "MAX", "MUL", "ADD"} and _sub_ops(c)


REDUCE_SUM = {
    "sum_c": lambda: zoo.reduce((1, 8, 8, 32), "SUM", (3,), False),
    "sum_hc": lambda: zoo.reduce((1, 4, 5, 6), "SUM", (1, 3), True),
    "sum_c_300": lambda: zoo.reduce((1, 3, 4, 300), "SUM", (3,), True),
    "mean_c": lambda: zoo._single_op_net("mean", [(1, 6, 5, 24)], 0, axes=(3,)).build(),
    "mean_c_3": lambda: zoo._single_op_net("mean", [(1, 17, 1, 3)], 0, axes=(3,)).build(),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(REDUCE_SUM))
def test_reduce_sum_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(REDUCE_SUM[case](), accelerator, tmp_path)
    assert any(s.lowered.registers.get("sub_op") == "REDUCE_SUM" for s in c.schedule.operations)


REDUCE_MIN = {name: (lambda shape=shape, axes=axes, keep=keep: zoo.reduce(shape, "REDUCE_MIN", axes, keep, "int8"))
              for name, shape, opcode, axes, keep, dtype in zoo.REDUCE_OP_CASES
              if dtype == "int8" and opcode == "REDUCE_MIN"}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(REDUCE_MIN))
def test_reduce_min_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(REDUCE_MIN[case](), accelerator, tmp_path)
    # The faster of the U85's MIN pools (tests/test_u85_reduce_min_max) and the U55's reversed
    # maximum, whose SUBs from a one-element constant broadcast it as the IFM.
    records = [r for call in npu_calls(c.model) for r in call.decode().operations]
    subs = [r for r in records if r.get("sub_op") == "SUB"]
    if subs:
        assert len(subs) == 2 and all(r["u85"]["ifm_broadcast_mode"] for r in subs)
    else:
        assert any((r["kind"], r.get("sub_op")) == ("pool", "MIN") for r in records)


SIXTEEN_BIT = {
    **{name: (lambda shape=shape, opcode=opcode, axes=axes, keep=keep: zoo.reduce(shape, opcode, axes, keep, "int16"))
       for name, shape, opcode, axes, keep, dtype in zoo.REDUCE_OP_CASES
       if dtype == "int16"},
    "leaky_relu_int16_rescaled": lambda: zoo.leaky_relu((1, 6, 5, 16), dtype="int16"),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(SIXTEEN_BIT))
def test_sixteen_bit_maps_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(SIXTEEN_BIT[case](), accelerator, tmp_path)
    assert all(s.lowered.ifm.element_size == 2 for s in c.schedule.operations)


SOFTMAX = {
    "softmax_int16_4x4x32": lambda: zoo.softmax((1, 4, 4, 32), dtype="int16"),
    "softmax_int16_10_beta": lambda: zoo.softmax((1, 10), dtype="int16", beta=0.5),
    "softmax_4x4x32": lambda: zoo.softmax((1, 4, 4, 32), dtype="int8"),
    "softmax_10": lambda: zoo.softmax((1, 10), dtype="int8"),
    "softmax_300_beta": lambda: zoo.softmax((1, 2, 300), dtype="int8", beta=0.3),
    "softmax_3x7_beta2": lambda: zoo.softmax((1, 3, 7), dtype="int8", beta=2.0),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(SOFTMAX))
def test_softmax_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(SOFTMAX[case](), accelerator, tmp_path)
    steps = {"ADD", "SUB"} if "int16" in case else {"SHR", "CLZ", "SHL"}  # int16: two tables between them
    assert steps <= set(_sub_ops(c))


@pytest.mark.parametrize("accelerator", SIZES)
def test_int16_exp_table_bit_exact(accelerator: str, tmp_path) -> None:
    """An int16 EXP: one 512-word interpolated table (LUT_S16_S16)."""
    c = _bit_exact_on_the_npu(zoo.exp((1, 4, 5, 16)), accelerator, tmp_path)
    assert [len(s.lowered.lut) for s in c.schedule.operations] == [2048]


@pytest.mark.parametrize("name", ["mlperftiny_kws_ref_model", "mlperftiny_resnet8_quant", "tflm_person_detect",
                                  "coral_mobilenet_v1_0.25_128_quant"])
def test_shared_models_softmax_on_the_npu(name: str) -> None:
    _shared_model_on_the_npu(name, set(), 0)


def test_tinyengine_vww_channel_means_on_the_npu(tmp_path) -> None:
    """tinyengine_vww's two channel MEANs (REDUCE_SUM, the U85's CPU operators before): only its
    QUANTIZE from float and DEQUANTIZE stay on the CPU, bit-exact on U85-256."""
    _shared_model_on_the_npu("tinyengine_vww", {"QUANTIZE", "DEQUANTIZE"}, 2)


def _shared_model_on_the_npu(name: str, cpu_opcodes: set[str], cpu_count: int) -> None:
    folder = shared_models_dir()
    if folder is None or not (folder / f"{name}.tflite").exists():
        pytest.skip("CASCADER_MODELS is not set")
    pytest.importorskip("ai_edge_litert")
    from cascader.bench.simulate import validate

    path = folder / f"{name}.tflite"
    c = cascader.compile(path, accelerator="ethos-u85-256")
    cpu = [v.reason for v in c.partition.verdicts if not v.npu]
    assert len(cpu) == cpu_count and all(r.split()[0] in cpu_opcodes for r in cpu), cpu
    result = validate(path, c.binary, seeds=(0, 1), config_label="ethos-u85-256")
    assert result.bit_exact, (result.error, result.details)


def test_palm_detection_prelus_on_the_npu(tmp_path) -> None:
    """openmv_palm_detection_full_192's 31 PRELUs (their ADDs were the U85's CPU operators):
    only its two DEQUANTIZEs stay on the CPU, bit-exact on U85-256."""
    _shared_model_on_the_npu("openmv_palm_detection_full_192", {"DEQUANTIZE"}, 2)


# 8x8 convolutions writing a 16-bit OFM from 32-bit accumulators (emit/ethos_u85 `_widening`):
# the int8 LSTM's gates (FULLY_CONNECTEDs of int8 inputs into int16, lower_lstm).
WIDENING = {
    "lstm_kws": lambda: zoo.lstm_kws(),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(WIDENING))
def test_widening_convolutions_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(WIDENING[case](), accelerator, tmp_path)
    weighted = [s.lowered for s in c.schedule.operations if s.lowered.weights is not None]
    assert weighted and all(op.ifm.element_size == 1 and op.registers["acc_format"] == 0 for op in weighted)
    assert any(op.ofm.dtype == "int16" for op in weighted)


def test_deeplab_arg_max_on_the_npu() -> None:
    """coral_deeplabv3's ARG_MAX over 513 x 513 x 21 (the U85's ARGMAX pooling, five bands of
    rows): wholly on the NPU, bit-exact on U85-256."""
    _shared_model_on_the_npu("coral_deeplabv3_mnv2_dm05_pascal_quant", set(), 0)
