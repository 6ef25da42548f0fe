"""REVERSE_V2 on the Ethos-U85 (#43): each reversed axis one copy that writes its OFM mirrored
(OFM_PRECISION's reverse field), as Vela 5.2's, where the U55/U65 copy row by row
(`lower_reverse`). Bit-exact against the reference interpreter on 2 seeds on U85-128/256/512 at
the edges of test_lower_padv2_reverse_tile (every axis, several, the batch, size-1 axes,
ranks 1 to 4, int8, uint8, int16); inside a network compiled for the least SRAM, where the
mirrored copy is never striped; no slower than Vela's on the zoo case."""

from __future__ import annotations

import pytest

import cascader
from cascader import zoo
from cascader.operator_zoo import operator_model
from conftest import cycles_against_vela

from test_lower_padv2_reverse_tile import REVERSE_CASES, one_op
from test_u85_lowering import _bit_exact_on_the_npu

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]


def _reversed_axes(c: cascader.CompiledModel) -> list[int]:
    return [s.lowered.registers.get("ofm_reverse", 0) for s in c.schedule.operations]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape,axes", REVERSE_CASES)
def test_reverse_v2_bit_exact(shape, axes, dtype: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(one_op("REVERSE_V2", shape, shape, axes, dtype), accelerator, tmp_path)
    rank = len(shape)
    hwc = sorted(a % rank - (rank - 3) for a in axes if a % rank - (rank - 3) >= 0 and shape[a] > 1)
    # One mirrored copy per reversed axis (H 1, W 2, C 3); reversing nothing is one plain copy.
    assert sorted(_reversed_axes(c)) == ([k + 1 for k in hwc] or [0])


@pytest.mark.parametrize("accelerator", SIZES)
def test_reverse_inside_a_cascade_bit_exact(accelerator: str, tmp_path) -> None:
    """conv -> REVERSE_V2 along H -> conv at the least SRAM (three convolutions cascade there):
    the mirrored copy is no stripe (a stripe's rows would be mirrored within the stripe)."""
    from cascader._zoo_layers import CalibratedNet

    net = CalibratedNet(3)
    x = net.input((1, 24, 16, 16))
    y = net.conv2d(net.reverse_v2(net.conv2d(x, 16), [1]), 16)
    net.output(y)
    model = net.build()
    c = cascader.compile(model, accelerator=accelerator, optimise="size")
    path = tmp_path / "model.tflite"
    cascader.save_model(model, path)
    from cascader.bench.simulate import validate

    result = validate(path, c.binary, seeds=(0, 1), config_label=accelerator)
    assert result.bit_exact, (result.error, result.details)
    (mirrored,) = [s for s in c.schedule.operations if s.lowered.registers.get("ofm_reverse")]
    assert mirrored.lowered.registers["ofm_reverse"] == 1 and mirrored.stripe_of is None and mirrored.cascade is None


def test_u55_and_u65_keep_their_copies() -> None:
    for accelerator in ("ethos-u55-128", "ethos-u65-256"):
        c = cascader.compile(zoo.reverse_v2((1, 3, 5, 16), [1]), accelerator=accelerator)
        assert len(c.schedule.operations) == 3 and set(_reversed_axes(c)) == {0}


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_reverse_no_slower_than_velas(dtype: str) -> None:
    ours, theirs = cycles_against_vela(operator_model("REVERSE_V2", dtype), "ethos-u85-256")
    assert ours <= theirs, (ours, theirs)
