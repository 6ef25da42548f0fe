"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR on the Ethos-U85 (#43): one resize operation
(NPU_OP_RESIZE, frontend/lower_u85_resize) for the scales the U55/U65 lowering refuses (other
than 2, align_corners); compiled for U85-128/256/512 and simulated bit-exact against the
reference interpreter on 2 seeds, wholly on the NPU. At the constraint edges: NEAREST at
integer, fractional and downscaling ratios (to one pixel) with and without half-pixel centres
and with align_corners; BILINEAR at power-of-two scales (2^9 with half-pixel centres, 2^10 without),
int8, uint8 and int16, an axis of one pixel."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.tflite.builder import ModelBuilder, quantization

from test_u85_lowering import _bit_exact_on_the_npu

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]
NEAREST, BILINEAR = "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"


def _resize(opcode: str, shape, out_hw, align: bool = False, half: bool = False, dtype: str = "int8"):
    b = ModelBuilder()
    q = quantization(0.05, {"int8": 3, "uint8": 128, "int16": 0}[dtype])
    x = b.add_input("x", shape, dtype, q)
    y = b.add_tensor("y", (1, *out_hw, shape[3]), dtype, q)
    b.add_operator(opcode, [x, b.add_constant("size", np.array(out_hw, np.int32))], [y],
                   {"align_corners": align, "half_pixel_centers": half}, version=3 if half else 2)
    b.mark_output(y)
    return b.build()


CASES = {
    "nearest_3x": (NEAREST, (1, 6, 5, 8), (18, 15)),
    "nearest_3x_half_pixel": (NEAREST, (1, 6, 5, 8), (18, 15), False, True),
    "nearest_align_corners": (NEAREST, (1, 6, 5, 8), (12, 10), True),
    "nearest_1_5x": (NEAREST, (1, 6, 5, 20), (9, 7)),
    "nearest_1_5x_half_pixel": (NEAREST, (1, 6, 5, 20), (9, 7), False, True),
    "nearest_halved": (NEAREST, (1, 12, 10, 8), (6, 5)),
    "nearest_halved_half_pixel": (NEAREST, (1, 12, 10, 8), (6, 5), False, True),
    "nearest_quartered_half_pixel": (NEAREST, (1, 24, 20, 8), (6, 5), False, True),
    "nearest_to_one_pixel": (NEAREST, (1, 6, 5, 8), (1, 1)),
    "nearest_to_one_pixel_half_pixel": (NEAREST, (1, 6, 5, 8), (1, 1), False, True),
    "nearest_to_one_pixel_align_corners": (NEAREST, (1, 6, 5, 8), (1, 1), True),
    "nearest_width_only_int16": (NEAREST, (1, 4, 5, 8), (4, 20), False, False, "int16"),
    "nearest_4x_uint8": (NEAREST, (1, 3, 4, 17), (12, 16), False, False, "uint8"),
    "bilinear_4x": (BILINEAR, (1, 4, 5, 8), (16, 20)),
    "bilinear_4x_half_pixel": (BILINEAR, (1, 4, 5, 8), (16, 20), False, True),
    "bilinear_8x_half_pixel": (BILINEAR, (1, 3, 2, 24), (24, 16), False, True),
    "bilinear_512x_half_pixel": (BILINEAR, (1, 1, 2, 3), (1, 1024), False, True),
    "bilinear_1024x": (BILINEAR, (1, 1, 2, 3), (1, 2048)),
    "bilinear_align_corners": (BILINEAR, (1, 6, 5, 8), (11, 9), True),
    "bilinear_align_corners_4x_int16": (BILINEAR, (1, 3, 4, 8), (9, 13), True, False, "int16"),
    "bilinear_4x_half_pixel_int16": (BILINEAR, (1, 4, 3, 16), (16, 12), False, True, "int16"),
    "bilinear_4x_half_pixel_uint8": (BILINEAR, (1, 4, 3, 16), (16, 12), False, True, "uint8"),
    "bilinear_one_row_8x": (BILINEAR, (1, 1, 4, 8), (8, 32), False, True),
    # 2x, which the U55/U65 lowering upscales through a pool: the resize operation too, as Vela's.
    "nearest_2x": (NEAREST, (1, 4, 4, 16), (8, 8)),
    "nearest_2x_half_pixel_int16": (NEAREST, (1, 5, 3, 8), (10, 6), False, True, "int16"),
    "nearest_2x_align_corners_uint8": (NEAREST, (1, 5, 3, 8), (10, 6), True, False, "uint8"),
    "bilinear_2x": (BILINEAR, (1, 4, 4, 16), (8, 8)),
    "bilinear_2x_half_pixel": (BILINEAR, (1, 5, 7, 8), (10, 14), False, True),
    "bilinear_2x_half_pixel_int16": (BILINEAR, (1, 5, 7, 8), (10, 14), False, True, "int16"),
    "bilinear_2x_uint8": (BILINEAR, (1, 5, 7, 8), (10, 14), False, False, "uint8"),
    "bilinear_2x_rows_only_uint8": (BILINEAR, (1, 5, 7, 8), (10, 7), False, True, "uint8"),
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_resize_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    c = _bit_exact_on_the_npu(_resize(*CASES[case]), accelerator, tmp_path)
    assert [s.lowered.kind for s in c.schedule.operations] == ["resize"]


CPU = {
    # TFLite steps a bilinear resize in 1/1024 of a pixel: a scale of 3 is not exact in them.
    "bilinear_3x": (BILINEAR, (1, 6, 5, 8), (18, 15)),
    # scale_10 / 2 rounds away at 2^10 with half-pixel centres (Vela runs it, inexactly).
    "bilinear_1024x_half_pixel": (BILINEAR, (1, 1, 2, 3), (1, 2048), False, True),
    # uint8 blends in float32: past 2^8 its sums round.
    "bilinear_512x_uint8": (BILINEAR, (1, 1, 2, 3), (1, 1024), False, False, "uint8"),
}


@pytest.mark.parametrize("case", sorted(CPU))
def test_inexact_resizes_stay_on_the_cpu(case: str) -> None:
    verdicts = cascader.compile(_resize(*CPU[case]), accelerator="ethos-u85-256").partition.verdicts
    assert [v.rule for v in verdicts if not v.npu] == ["lowering"]


def test_u55_and_u65_keep_their_lowering() -> None:
    """The U55/U65 have no resize operation: a resize by 3 stays on their CPU, by 2 keeps the
    upscaled copy, a pool or a 1x1 depthwise (`depthwise_copies`), whichever the cycle model
    costs less (the U85 resizes it in one resize operation, `test_resize_bit_exact`)."""
    for accelerator in ("ethos-u55-128", "ethos-u65-256"):
        assert not all(v.npu for v in cascader.compile(_resize(*CASES["nearest_3x"]),
                                                       accelerator=accelerator).partition.verdicts)
        c = cascader.compile(_resize(NEAREST, (1, 6, 5, 8), (12, 10)), accelerator=accelerator)
        [op] = [s.lowered for s in c.schedule.operations]
        assert op.kind in ("pool", "depthwise") and op.registers["ifm_upscale"] == 1


@pytest.mark.parametrize("case", ["nearest_3x", "bilinear_4x_half_pixel", "nearest_2x", "bilinear_2x"])
def test_resize_no_slower_than_velas(case: str) -> None:
    """The estimator's cycles on our binary against Vela's (the same operation and block)."""
    from cascader import vela

    model = _resize(*CASES[case])
    ours = cascader.compile(model, accelerator="ethos-u85-256").estimate().total_cycles
    theirs = cascader.estimate(vela.compile(model, "ethos-u85-256").model, accelerator="ethos-u85-256").total_cycles
    assert ours <= theirs, (ours, theirs)
