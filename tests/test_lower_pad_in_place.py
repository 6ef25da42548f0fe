"""A PAD along one axis whose input's producer writes it into the padded output in place
(`lower`'s `_slice_pads`): the PAD only fills its border, with no copy of the interior.

Each case runs a MAX_POOL (the producer), the PAD (or PADV2) and an ADD reading the padded map,
bit-exact against the reference interpreter on two seeds on ethos-u55-128, ethos-u65-256 and
ethos-u85-256: channels (palm_detection's 32 -> 64 after its max pools, and unaligned depths),
rows, columns, before and after, and a PADV2 value. Where the pad is along two axes, or something
else reads the PAD's input, the interior is copied as before.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.lowering import lower
from cascader.tflite.builder import ModelBuilder, quantization

pytest.importorskip("ai_edge_litert")
from test_lower_movement import _check  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")
Q = quantization(0.05, 3)


def _pooled_pad(shape, pads, value=None, also_read=False) -> cascader.Model:
    """x -> MAX_POOL 2x2/2 -> PAD(pads) -> ADD(itself) -> out; `also_read`: the pool's output
    is a second output of the model too."""
    b = ModelBuilder()
    n, h, w, c = shape
    x = b.add_input("x", shape, "int8", Q)
    pooled_shape = (n, h // 2, w // 2, c)
    pooled = b.add_tensor("pooled", pooled_shape, "int8", Q)
    b.add_operator("MAX_POOL_2D", [x], [pooled], {"padding": "VALID", "stride_w": 2, "stride_h": 2,
                                                  "filter_width": 2, "filter_height": 2})
    padded_shape = tuple(d + sum(p) for d, p in zip(pooled_shape, pads))
    padded = b.add_tensor("padded", padded_shape, "int8", Q)
    inputs = [pooled, b.add_constant("pads", np.asarray(pads, np.int32), "int32")]
    if value is not None:
        inputs.append(b.add_constant("value", np.asarray([value], np.int8), "int8", Q))
    b.add_operator("PADV2" if value is not None else "PAD", inputs, [padded], {})
    out = b.add_tensor("out", padded_shape, "int8", quantization(0.1, -2))
    b.add_operator("ADD", [padded, padded], [out], {})
    b.mark_output(out)
    if also_read:
        b.mark_output(pooled)
    return b.build()


def _interior_copied(model, accelerator) -> bool:
    """Whether the lowering copies the PAD's input into its output (its operation named
    `<index>:PAD` / `<index>:PADV2`, apart from the border's fills)."""
    _, segments = lower(model, accelerator)
    names = [op.name for seg in segments for op in seg.operations]
    return any(name.endswith(":PAD") or name.endswith(":PADV2") for name in names)


IN_PLACE = {
    "channels_after": ((1, 16, 16, 32), [[0, 0], [0, 0], [0, 0], [0, 32]], None),
    "channels_before": ((1, 16, 16, 32), [[0, 0], [0, 0], [0, 0], [16, 0]], None),
    "channels_unaligned": ((1, 12, 10, 5), [[0, 0], [0, 0], [0, 0], [3, 4]], None),
    "rows": ((1, 12, 10, 8), [[0, 0], [2, 3], [0, 0], [0, 0]], None),
    "columns": ((1, 12, 10, 8), [[0, 0], [0, 0], [1, 0], [0, 0]], None),
    "padv2_value": ((1, 16, 16, 32), [[0, 0], [0, 0], [0, 0], [0, 32]], -7),
}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("case", list(IN_PLACE))
def test_written_in_place(tmp_path, case, accelerator):
    shape, pads, value = IN_PLACE[case]
    model = _pooled_pad(shape, pads, value)
    assert not _interior_copied(model, accelerator)
    _check(tmp_path, model, accelerator=accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_two_axes_copy_the_interior(tmp_path, accelerator):
    model = _pooled_pad((1, 12, 10, 8), [[0, 0], [1, 1], [0, 0], [0, 8]])
    assert _interior_copied(model, accelerator)
    _check(tmp_path, model, accelerator=accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_an_input_read_elsewhere_is_copied(tmp_path, accelerator):
    model = _pooled_pad((1, 16, 16, 32), [[0, 0], [0, 0], [0, 0], [0, 32]], also_read=True)
    assert _interior_copied(model, accelerator)
    _check(tmp_path, model, accelerator=accelerator)
