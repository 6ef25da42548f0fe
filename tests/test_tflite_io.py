"""TFLite reader/writer: round trips, semantic preservation, and named errors on bad input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import shared_manifest, shared_model_paths, shared_params

import cascader
from cascader import ModelError, load_model, save_model
from cascader import zoo
from cascader.reference import ReferenceInterpreter, random_inputs
from cascader.tflite import Operator


def zoo_models() -> list:
    return [pytest.param(name, id=name) for name in sorted(zoo.MODELS)]


@pytest.mark.parametrize("name", zoo_models())
def test_zoo_round_trip(name):
    model = zoo.get(name)
    data = save_model(model)
    again = load_model(data)
    assert again == model
    assert save_model(again) == data  # the writer is deterministic and idempotent


@pytest.mark.parametrize("path", shared_params(shared_model_paths()))
def test_shared_round_trip(path):
    model = load_model(path)
    data = save_model(model)
    again = load_model(data)
    assert again == model
    assert save_model(again) == data
    entry = shared_manifest().get(path.name)
    if entry:
        ops = {}
        for op in model.main.operators:
            ops[op.name] = ops.get(op.name, 0) + 1
        assert ops == entry["op_hist"]


@pytest.mark.parametrize(
    "path",
    shared_params(
        [p for p in shared_model_paths() if p.stem in ("tflm_person_detect", "tinyengine_vww", "mlperftiny_kws_ref_model")]
    ),
)
def test_rewritten_model_computes_the_same(path):
    # Equality of records could hide a field the writer drops that the runtime needs; running
    # both files through the reference kernels cannot.
    original = ReferenceInterpreter(path)
    rewritten = ReferenceInterpreter(save_model(load_model(path)))
    for seed in range(2):
        x = random_inputs(path, seed)
        for a, b in zip(original.run(x), rewritten.run(x)):
            np.testing.assert_array_equal(a, b)


def test_reads_typed_values():
    model = zoo.conv2d((1, 16, 16, 8), 16, kernel=(3, 3), stride=(2, 2), padding="SAME", activation="RELU6")
    g = model.main
    (conv,) = [op for op in g.operators if op.opcode == "CONV_2D"]
    assert conv.options["padding"] == "SAME"
    assert conv.options["fused_activation_function"] == "RELU6"
    assert (conv.options["stride_w"], conv.options["stride_h"]) == (2, 2)
    weights = g.tensors[conv.inputs[1]]
    assert weights.dtype == "int8" and weights.data.shape == (16, 3, 3, 8)
    assert weights.quantization.per_channel and weights.quantization.scale.shape == (16,)
    assert not weights.data.flags.writeable  # a view of the model's buffer, not a copy to edit
    bias = g.tensors[conv.inputs[2]]
    assert bias.dtype == "int32" and bias.data.shape == (16,)
    ofm = g.tensors[conv.outputs[0]]
    assert ofm.shape == (1, 8, 8, 16) and ofm.data is None


def test_writer_adds_custom_operator_and_metadata():
    model = zoo.fully_connected((1, 32), 8)
    g = model.main
    out = g.tensors[g.outputs[0]]
    extra = dataclasses.replace(out, name="npu_out", buffer=0, data=None)
    g.tensors.append(extra)
    g.operators.append(
        Operator("CUSTOM", inputs=(g.outputs[0],), outputs=(len(g.tensors) - 1,), custom_code="ethos-u",
                 custom_options=b"\x01\x02\x03")
    )
    model.add_metadata("OfflineMemoryAllocation", np.arange(4, dtype=np.int32).tobytes())
    again = load_model(save_model(model))
    assert again == model
    op = again.main.operators[-1]
    assert (op.opcode, op.name, op.custom_options) == ("CUSTOM", "ethos-u", b"\x01\x02\x03")
    assert np.frombuffer(again.metadata_bytes("OfflineMemoryAllocation"), np.int32).tolist() == [0, 1, 2, 3]


# --- errors -------------------------------------------------------------------------------


def _error(data) -> str:
    with pytest.raises(ModelError) as info:
        load_model(data)
    return str(info.value)


def test_error_not_a_flatbuffer():
    assert "not a TFLite model" in _error(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)


def test_error_empty_and_tiny():
    assert "truncated" in _error(b"")
    assert "truncated" in _error(b"\x10\x00\x00\x00TF")


def test_error_truncated():
    data = save_model(zoo.conv2d((1, 8, 8, 4), 8))
    for cut in (12, len(data) // 3, len(data) // 2, len(data) - 7):
        msg = _error(data[:cut])
        assert "corrupt" in msg or "truncated" in msg or "count" in msg, msg


def test_error_missing_file(tmp_path):
    assert "cannot read model file" in _error(tmp_path / "missing.tflite")


def test_error_schema_version():
    model = zoo.conv2d((1, 8, 8, 4), 8)
    model.version = 2
    assert "unsupported TFLite schema version 2" in _error(save_model(model))


def test_error_buffer_index_out_of_range():
    model = zoo.conv2d((1, 8, 8, 4), 8)
    model.main.tensors[0].buffer = len(model.buffers) + 5
    assert f"uses buffer {len(model.buffers) + 5}" in _error(save_model(model))


def test_error_tensor_index_out_of_range():
    model = zoo.conv2d((1, 8, 8, 4), 8)
    op = model.main.operators[0]
    op.inputs = (len(model.main.tensors) + 3,) + op.inputs[1:]
    assert "uses tensor" in _error(save_model(model))
    model = zoo.conv2d((1, 8, 8, 4), 8)
    model.main.outputs = (99,)
    assert "out of range" in _error(save_model(model))


def test_error_constant_size_mismatch():
    model = zoo.conv2d((1, 8, 8, 4), 8)
    op = model.main.operators[0]
    weights = model.main.tensors[op.inputs[1]]
    model.buffers[weights.buffer] = model.buffers[weights.buffer][:-3]
    assert "needs" in _error(save_model(model)) and "holds" in _error(save_model(model))


def test_error_several_subgraphs_where_it_matters():
    model = zoo.conv2d((1, 8, 8, 4), 8)
    model.subgraphs.append(dataclasses.replace(model.main))
    again = load_model(save_model(model))  # reading is fine...
    assert len(again.subgraphs) == 2
    with pytest.raises(ModelError, match="2 subgraphs"):  # ...compiling is not
        cascader.inspect(again)


def test_schema_package_is_imported_name_by_name():
    """cascader puts a lazy `tflite` package in place (lazy_schema): a compile loads a few of
    the schema's modules, and the package still answers as the real one does."""
    import subprocess
    import sys

    code = """
import sys
import cascader
from cascader import zoo
cascader.compile(zoo.resnet8())
loaded = sorted(m for m in sys.modules if m.startswith("tflite."))
assert 0 < len(loaded) < 60, loaded
import tflite
import tflite.Model
assert isinstance(tflite.Model, type) and tflite.Model.__name__ == "Model"
assert tflite.ModelStart.__module__ == "tflite.Model"
assert tflite.OperatorCodeAddVersion.__module__ == "tflite.OperatorCode"
assert tflite.BuiltinOperator.CONV_2D == 3
assert tflite.__version__
assert "ATan2Options" in dir(tflite) and isinstance(tflite.ATan2Options, type)
"""
    subprocess.run([sys.executable, "-c", code], check=True)
