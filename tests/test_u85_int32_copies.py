"""PACK and CONCATENATION of int32 maps on the Ethos-U85 (indices, as movenet's): copies as
ADDs of 0 (lower_movement.raw_copy), bit-exact on two seeds of full-range int32 values on
U85-128/256/512. Vela 5.2 runs them on the U85's NPU and leaves them on the U55/U65's CPU, and
so do we. An ARG_MAX whose indices a concatenation takes writes them into its slice (through a
dense scratch map: the pooling's A x 1 x B view needs dense rows).
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.tflite.builder import ModelBuilder
from cascader.tflite.model import Quantization

from test_u85_lowering import SIZES, _bit_exact_on_the_npu


def _pack(shape: tuple[int, ...], count: int, axis: int) -> cascader.Model:
    b = ModelBuilder(description="test_u85_int32_copies PACK")
    xs = [b.add_input(f"x{k}", shape, "int32") for k in range(count)]
    out_shape = list(shape)
    out_shape.insert(axis % (len(shape) + 1), count)
    y = b.add_tensor("y", tuple(out_shape), "int32")
    b.add_operator("PACK", xs, [y], dict(axis=axis, values_count=count))
    b.mark_output(y)
    return b.build()


def _concatenation(shapes: list[tuple[int, ...]], axis: int, constant: int | None = None) -> cascader.Model:
    """`constant`: which input is a constant (movenet's column of keypoint numbers)."""
    b = ModelBuilder(description="test_u85_int32_copies CONCATENATION")
    xs = [b.add_constant(f"c{k}", np.arange(np.prod(s), dtype=np.int32).reshape(s) - 7) if k == constant
          else b.add_input(f"x{k}", s, "int32") for k, s in enumerate(shapes)]
    out_shape = list(shapes[0])
    out_shape[axis] = sum(s[axis] for s in shapes)
    y = b.add_tensor("y", tuple(out_shape), "int32")
    b.add_operator("CONCATENATION", xs, [y], dict(axis=axis, fused_activation_function="NONE"))
    b.mark_output(y)
    return b.build()


def _arg_max_into_a_concatenation() -> cascader.Model:
    b = ModelBuilder(description="test_u85_int32_copies ARG_MAX slice")
    q = Quantization(scale=np.array([0.05], np.float32), zero_point=np.array([3], np.int64))
    x = b.add_input("x", (1, 6, 4, 9), "int8", q)
    index = b.add_tensor("index", (1, 6, 4), "int32")
    b.add_operator("ARG_MAX", [x, b.add_constant("axis", np.array([3], np.int32))], [index], {"output_type": 2},
                   version=2)
    column = b.add_constant("column", np.arange(6, dtype=np.int32).reshape(1, 6, 1))
    y = b.add_tensor("y", (1, 6, 5), "int32")
    b.add_operator("CONCATENATION", [index, column], [y], dict(axis=2, fused_activation_function="NONE"))
    b.mark_output(y)
    return b.build()


CASES = {
    "movenet_pack_of_scalars": lambda: _pack((1,), 3, 1),
    "movenet_pack_of_keypoints": lambda: _pack((17,), 3, 1),
    "pack_along_the_first_axis": lambda: _pack((4, 5), 2, 0),
    "movenet_concatenation_with_a_constant": lambda: _concatenation([(17, 3), (17, 1)], 1, constant=1),
    "concatenation_of_maps": lambda: _concatenation([(1, 3, 4, 5), (1, 3, 2, 5)], 2),
    "concatenation_of_channels": lambda: _concatenation([(2, 3, 4), (2, 3, 7), (2, 3, 1)], 2),
    "arg_max_into_a_concatenation": _arg_max_into_a_concatenation,
}


@pytest.mark.parametrize("accelerator", SIZES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_bit_exact(case: str, accelerator: str, tmp_path) -> None:
    _bit_exact_on_the_npu(CASES[case](), accelerator, tmp_path)


def test_copies_are_adds_of_zero() -> None:
    c = cascader.compile(_pack((17,), 3, 1), accelerator="ethos-u85-256")
    ops = [s.lowered for s in c.schedule.operations]
    assert len(ops) == 3 and all(op.kind == "elementwise" and op.registers["sub_op"] == "ADD" for op in ops)
    assert all(op.ifm.dtype == op.ofm.dtype == "int32" for op in ops)


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_the_u55_and_u65_keep_them_on_the_cpu(accelerator: str) -> None:
    for model in (_pack((17,), 3, 1), _concatenation([(17, 3), (17, 1)], 1, constant=1)):
        report = cascader.inspect(model, accelerator=accelerator)
        assert report.operators[0].target == "CPU" and report.operators[0].rule == "data_type"
