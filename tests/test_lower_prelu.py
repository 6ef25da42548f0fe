"""PRELU on the NPU: bit-exact for alphas of either sign, one-signed or mixed, below and above 1."""

from __future__ import annotations

import pytest

import cascader
from cascader import zoo
from cascader.emit.program import REGION_SHRAM
from cascader.tflite.ethos_u import REGION_FLASH

pytest.importorskip("ai_edge_litert")
from cascader.bench.simulate import validate  # noqa: E402


@pytest.mark.parametrize("shape, alpha_range, operations", [
    ((1, 8, 8, 16), (-0.5, 0.5), 4),   # mixed signs: the MIN(x, zp) pass
    ((1, 4, 4, 3), (0.1, 0.9), 3),     # one-signed: the MUL's clamp does it
    ((1, 5, 7, 33), (-2.0, -0.5), 3),
    ((1, 5, 7, 33), (1.5, 3.0), 3),
    ((1, 3, 9, 20), (0.0, 0.3), 3),
])
def test_prelu_bit_exact(tmp_path, shape, alpha_range, operations):
    path = tmp_path / "prelu.tflite"
    cascader.save_model(zoo.prelu(shape, alpha_range, seed=len(shape) + shape[-1]), path)
    compiled = cascader.compile(path)
    summary = compiled.summary()
    assert (summary.npu_operations, summary.cpu_operators) == (operations, 0)
    result = validate(path, compiled.model, (0, 1, 2))
    assert result.bit_exact, result.details


@pytest.mark.parametrize("alpha", [0.2, -0.3, 1.7, -2.0, 0.0])
@pytest.mark.parametrize("same_quantization", [True, False])
def test_int16_leaky_relu_bit_exact(tmp_path, alpha, same_quantization):
    from cascader.zoo import _single_op_net

    model = _single_op_net("leaky_relu", [(1, 8, 8, 16)], 1, "int16", (-5.0, 5.0), alpha=alpha,
                           same_quantization=same_quantization).build()
    path = tmp_path / "leaky_relu.tflite"
    cascader.save_model(model, path)
    compiled = cascader.compile(path)
    # The NPU's LRELU where it applies (equal quantizations, alpha >= 0), else the sign select.
    expected = 1 if same_quantization and alpha >= 0 else 3
    assert (compiled.summary().npu_operations, compiled.summary().cpu_operators) == (expected, 0)
    assert validate(path, compiled.model, (0, 1, 2)).bit_exact


def test_broadcast_alpha_is_read_from_a_copy_in_sram(tmp_path):
    """PRELU's per-channel alpha is a constant the MUL broadcasts over H and W. Read from flash
    it would cost more than the MUL itself; a DMA copies it into the arena first, and the
    binary costs what the schedule predicted."""
    path = tmp_path / "prelu.tflite"
    cascader.save_model(zoo.prelu((1, 32, 32, 16), (-0.5, 0.5), seed=3), path)
    compiled = cascader.compile(path)
    records = [r for ops in compiled.operations for r in ops]
    muls = [r for r in records if r.get("sub_op") == "MUL"]
    assert muls and all(r["ifm2"]["region"] != REGION_FLASH for r in muls)
    copies = [r for r in records if r["kind"] == "dma" and r["src"]["region"] == REGION_FLASH
              and r["dst"]["region"] not in (REGION_FLASH, REGION_SHRAM)]
    assert len(copies) >= len(muls)
    assert compiled.estimate().total_cycles == pytest.approx(compiled.schedule.total_cycles, rel=0.01)
    assert validate(path, compiled.model, (0, 1)).bit_exact
