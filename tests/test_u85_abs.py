"""ABS on the Ethos-U85 (#43): the U55's one elementwise ABS (frontend/lower_minmax), which the
U85 runs as Vela 5.2 does there: IFM scale 1.0, |x - zp_in|, then OFM_SCALE (s_in / s_out, TFLite's
double rounding) and zp_out. Bit-exact against the reference interpreter on U85-128/256/512:

- the zoo's int8 and int16 ABS, on 2 seeds, one operation;
- every int8 code and the int16 extremes (-32768, whose magnitude leaves the type, and its
  neighbours) under equal quantizations, a rescale above one that saturates, one below, one
  whose multiplier needs a shift near the 6-bit field's end, one that flushes to zero, and the
  zero points at the type's ends;
- shapes of one element, of a lower rank, of an odd number of channels;
- cycles no more than Vela's on the shared estimator.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.operator_zoo import operator_model
from cascader.tflite.builder import ModelBuilder, quantization

from test_u85_lowering import _bit_exact_on_the_npu

SIZES = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]
NUMPY = {"int8": np.int8, "int16": np.int16}


def _abs(shape, dtype: str, q_in: tuple[float, int], q_out: tuple[float, int]):
    b = ModelBuilder()
    x = b.add_input("x", shape, dtype, quantization(*q_in))
    y = b.add_tensor("y", shape, dtype, quantization(*q_out))
    b.add_operator("ABS", [x], [y], version=2 if dtype == "int8" else 3)
    b.mark_output(y)
    return b.build()


def _sub_ops(c: cascader.CompiledModel) -> list[str]:
    return [s.lowered.registers.get("sub_op") for s in c.schedule.operations]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_zoo_abs_is_one_operation_and_bit_exact(dtype: str, accelerator: str, tmp_path):
    c = _bit_exact_on_the_npu(operator_model("ABS", dtype), accelerator, tmp_path)
    assert _sub_ops(c) == ["ABS"]


# (input (scale, zero point), output (scale, zero point)); int16 zero points are 0 (TFLite's).
QUANTIZATIONS = {
    "int8": {
        "equal": ((0.05, 0), (0.05, 0)),
        "equal_zero_point_at_the_bottom": ((0.05, -128), (0.05, -128)),  # |127 + 128| = 255 clamps
        "zero_points_apart": ((0.05, 127), (0.05, -100)),
        "rescale_up_saturates": ((0.2, 5), (0.004, -3)),
        "rescale_down": ((0.3, -7), (0.7, 11)),
        "shift_near_62": ((2.0 ** -29, 0), (1.0, -128)),  # s_in / s_out = 2^-29: shift 59
        "flushes_to_zero": ((1e-12, 3), (0.5, 9)),  # a multiplier below 2^-31 is 0
    },
    "int16": {
        "equal": ((0.001, 0), (0.001, 0)),  # |-32768| = 32768 clamps to 32767
        "rescale_up_saturates": ((0.01, 0), (0.0007, 0)),
        "rescale_down": ((0.0003, 0), (0.0007, 0)),
        "shift_near_62": ((2.0 ** -40, 0), (2.0 ** -10, 0)),
        "flushes_to_zero": ((1e-14, 0), (0.5, 0)),
    },
}
CASES = [(dt, case) for dt, cases in QUANTIZATIONS.items() for case in cases]


def _values(dtype: str) -> np.ndarray:
    """Every int8 code; the int16 extremes, their neighbours, zero and a spread between."""
    if dtype == "int8":
        return np.arange(-128, 128)
    info = np.iinfo(np.int16)
    edges = [info.min, info.min + 1, info.min + 2, -1, 0, 1, info.max - 1, info.max]
    spread = np.random.default_rng(7).integers(info.min, info.max, 256 - len(edges), endpoint=True)
    return np.concatenate([edges, spread])


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype, case", CASES)
def test_every_code_and_the_extremes(dtype: str, case: str, accelerator: str):
    pytest.importorskip("ai_edge_litert")
    from cascader import reference
    from cascader.sim.simulate import simulate

    q_in, q_out = QUANTIZATIONS[dtype][case]
    model = _abs((1, 16, 16, 1), dtype, q_in, q_out)
    c = cascader.compile(model, accelerator=accelerator)
    assert [v.reason for v in c.partition.verdicts if not v.npu] == [] and _sub_ops(c) == ["ABS"]
    x = _values(dtype).astype(NUMPY[dtype]).reshape(1, 16, 16, 1)
    (ours,), (theirs,) = simulate(c.binary, [x]), reference.run(model, [x])
    bad = np.flatnonzero(ours.astype(np.int64) != theirs.astype(np.int64))
    assert bad.size == 0, [(int(x.flat[i]), int(ours.flat[i]), int(theirs.flat[i])) for i in bad[:5]]


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("shape, dtype", [((1, 1, 1, 1), "int8"), ((2, 33), "int16"), ((1, 3, 7), "int8"),
                                          ((1, 5, 9, 19), "int16")])
def test_shapes(shape, dtype: str, accelerator: str, tmp_path):
    q_in, q_out = QUANTIZATIONS[dtype]["rescale_down"]
    _bit_exact_on_the_npu(_abs(shape, dtype, q_in, q_out), accelerator, tmp_path)


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_no_slower_than_velas(dtype: str, accelerator: str):
    """The estimator's cycles on our binary of the zoo's ABS against Vela's, its default U85
    system for both."""
    pytest.importorskip("ethosu.vela")
    from cascader import vela
    from cascader.sim.estimator import total_cycles

    model = operator_model("ABS", dtype)
    ours = total_cycles(cascader.compile(model, accelerator=accelerator).model)
    theirs = total_cycles(vela.compile(model, accelerator=accelerator).model)
    assert ours <= 1.02 * theirs, (ours, theirs)

