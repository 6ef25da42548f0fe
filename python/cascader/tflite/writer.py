"""Write a `Model` as a TFLite flatbuffer. `load_model(save_model(m)) == m` for any read model."""

from __future__ import annotations

import os
from pathlib import Path

import flatbuffers
import numpy as np
import tflite

from ..errors import ModelError
from . import schema
from .model import Model, Operator, Quantization, SignatureDef, SubGraph, Tensor

# TFLite aligns buffer data to 16 bytes so that runtimes can map weights in place.
_BUFFER_ALIGNMENT = 16


def save_model(model: Model, path: str | os.PathLike | None = None) -> bytes:
    """Serialise `model`; also write it to `path` when given. Returns the bytes."""
    builder = flatbuffers.Builder(1024 + sum(len(b) + _BUFFER_ALIGNMENT for b in model.buffers))
    opcode_keys = _opcode_table(model)
    opcode_index = {key: i for i, key in enumerate(opcode_keys)}

    # Flatbuffers are built leaves first; the big buffers go first so they land at the end.
    buffers = [_build_buffer(builder, data) for data in model.buffers]
    opcodes = [_build_opcode(builder, key) for key in opcode_keys]
    subgraphs = [_build_subgraph(builder, g, opcode_index) for g in model.subgraphs]
    metadata = [_build_metadata(builder, name, index) for name, index in model.metadata.items()]
    signatures = [_build_signature(builder, s) for s in model.signature_defs]
    description = builder.CreateString(model.description)

    vectors = {
        "OperatorCodes": _offsets(builder, tflite.ModelStartOperatorCodesVector, opcodes),
        "Subgraphs": _offsets(builder, tflite.ModelStartSubgraphsVector, subgraphs),
        "Buffers": _offsets(builder, tflite.ModelStartBuffersVector, buffers),
    }
    if model.metadata:
        vectors["Metadata"] = _offsets(builder, tflite.ModelStartMetadataVector, metadata)
    if model.signature_defs:
        vectors["SignatureDefs"] = _offsets(builder, tflite.ModelStartSignatureDefsVector, signatures)
    if model.metadata_buffer:
        vectors["MetadataBuffer"] = builder.CreateNumpyVector(np.asarray(model.metadata_buffer, np.int32))

    tflite.ModelStart(builder)
    tflite.ModelAddVersion(builder, model.version)
    tflite.ModelAddDescription(builder, description)
    for name, offset in vectors.items():
        getattr(tflite, f"ModelAdd{name}")(builder, offset)
    builder.Finish(tflite.ModelEnd(builder), file_identifier=b"TFL3")
    data = bytes(builder.Output())
    if path is not None:
        Path(path).write_bytes(data)
    return data


def _opcode_table(model: Model) -> list[tuple[str, str | None, int]]:
    keys: dict[tuple[str, str | None, int], None] = {}
    for g in model.subgraphs:
        for op in g.operators:
            keys.setdefault((op.opcode, op.custom_code, op.version), None)
    return list(keys)


def _offsets(builder: flatbuffers.Builder, start_vector, offsets: list[int]) -> int:
    start_vector(builder, len(offsets))
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _ints(builder: flatbuffers.Builder, values, dtype=np.int32) -> int:
    return builder.CreateNumpyVector(np.asarray(values, dtype=dtype))


def _build_buffer(builder: flatbuffers.Builder, data: bytes) -> int:
    vector = None
    if data:
        builder.StartVector(1, len(data), _BUFFER_ALIGNMENT)
        builder.head = builder.Head() - len(data)
        builder.Bytes[builder.Head() : builder.Head() + len(data)] = data
        vector = builder.EndVector()
    tflite.BufferStart(builder)
    if vector is not None:
        tflite.BufferAddData(builder, vector)
    return tflite.BufferEnd(builder)


def _build_opcode(builder: flatbuffers.Builder, key: tuple[str, str | None, int]) -> int:
    name, custom, version = key
    try:
        code = schema.BUILTIN_OPERATOR_CODES[name]
    except KeyError:
        raise ModelError(f"{name!r} is not a TFLite builtin operator") from None
    custom_offset = builder.CreateString(custom) if custom is not None else None
    tflite.OperatorCodeStart(builder)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(builder, min(code, schema.PLACEHOLDER_FOR_GREATER_OP_CODES))
    tflite.OperatorCodeAddBuiltinCode(builder, code)
    if custom_offset is not None:
        tflite.OperatorCodeAddCustomCode(builder, custom_offset)
    tflite.OperatorCodeAddVersion(builder, version)
    return tflite.OperatorCodeEnd(builder)


def _build_quantization(builder: flatbuffers.Builder, q: Quantization) -> int:
    vectors = {
        "Scale": _ints(builder, q.scale, np.float32),
        "ZeroPoint": _ints(builder, q.zero_point, np.int64),
    }
    if q.min is not None:
        vectors["Min"] = _ints(builder, q.min, np.float32)
    if q.max is not None:
        vectors["Max"] = _ints(builder, q.max, np.float32)
    tflite.QuantizationParametersStart(builder)
    for name, offset in vectors.items():
        getattr(tflite, f"QuantizationParametersAdd{name}")(builder, offset)
    tflite.QuantizationParametersAddQuantizedDimension(builder, q.quantized_dimension)
    return tflite.QuantizationParametersEnd(builder)


def _build_tensor(builder: flatbuffers.Builder, t: Tensor) -> int:
    try:
        type_code = schema.TENSOR_TYPE_CODES[t.dtype]
    except KeyError:
        raise ModelError(f"tensor {t.name!r} has type {t.dtype!r}, which TFLite does not define") from None
    name = builder.CreateString(t.name)
    shape = _ints(builder, t.shape)
    quant = _build_quantization(builder, t.quantization) if t.quantization is not None else None
    signature = _ints(builder, t.shape_signature) if t.shape_signature is not None else None
    tflite.TensorStart(builder)
    tflite.TensorAddShape(builder, shape)
    tflite.TensorAddType(builder, type_code)
    tflite.TensorAddBuffer(builder, t.buffer)
    tflite.TensorAddName(builder, name)
    if quant is not None:
        tflite.TensorAddQuantization(builder, quant)
    tflite.TensorAddIsVariable(builder, t.is_variable)
    if signature is not None:
        tflite.TensorAddShapeSignature(builder, signature)
    tflite.TensorAddHasRank(builder, t.has_rank)
    return tflite.TensorEnd(builder)


def _build_operator(builder: flatbuffers.Builder, op: Operator, opcode_index: dict) -> int:
    inputs = _ints(builder, op.inputs)
    outputs = _ints(builder, op.outputs)
    options = None
    union, union_code = None, 0
    if op.options_type is not None:
        try:
            union, union_code = schema.OPTIONS_UNION[op.options_type]
        except KeyError:
            raise ModelError(f"{op.name}: {op.options_type!r} is not a TFLite options table") from None
        options = schema.build_options(builder, op.options_type, op.options)
    custom = builder.CreateByteVector(op.custom_options) if op.custom_options is not None else None
    intermediates = _ints(builder, op.intermediates) if op.intermediates else None
    mutating = _ints(builder, op.mutating_variable_inputs, np.bool_) if op.mutating_variable_inputs else None

    tflite.OperatorStart(builder)
    tflite.OperatorAddOpcodeIndex(builder, opcode_index[(op.opcode, op.custom_code, op.version)])
    tflite.OperatorAddInputs(builder, inputs)
    tflite.OperatorAddOutputs(builder, outputs)
    if union == "builtin_options":
        tflite.OperatorAddBuiltinOptionsType(builder, union_code)
        tflite.OperatorAddBuiltinOptions(builder, options)
    elif union == "builtin_options_2":
        tflite.OperatorAddBuiltinOptions2Type(builder, union_code)
        tflite.OperatorAddBuiltinOptions2(builder, options)
    if custom is not None:
        tflite.OperatorAddCustomOptions(builder, custom)
    if intermediates is not None:
        tflite.OperatorAddIntermediates(builder, intermediates)
    if mutating is not None:
        tflite.OperatorAddMutatingVariableInputs(builder, mutating)
    return tflite.OperatorEnd(builder)


def _build_subgraph(builder: flatbuffers.Builder, g: SubGraph, opcode_index: dict) -> int:
    tensors = _offsets(builder, tflite.SubGraphStartTensorsVector, [_build_tensor(builder, t) for t in g.tensors])
    operators = _offsets(
        builder, tflite.SubGraphStartOperatorsVector, [_build_operator(builder, op, opcode_index) for op in g.operators]
    )
    inputs = _ints(builder, g.inputs)
    outputs = _ints(builder, g.outputs)
    name = builder.CreateString(g.name)
    tflite.SubGraphStart(builder)
    tflite.SubGraphAddTensors(builder, tensors)
    tflite.SubGraphAddInputs(builder, inputs)
    tflite.SubGraphAddOutputs(builder, outputs)
    tflite.SubGraphAddOperators(builder, operators)
    tflite.SubGraphAddName(builder, name)
    return tflite.SubGraphEnd(builder)


def _build_metadata(builder: flatbuffers.Builder, name: str, buffer_index: int) -> int:
    name_offset = builder.CreateString(name)
    tflite.MetadataStart(builder)
    tflite.MetadataAddName(builder, name_offset)
    tflite.MetadataAddBuffer(builder, buffer_index)
    return tflite.MetadataEnd(builder)


def _build_signature(builder: flatbuffers.Builder, s: SignatureDef) -> int:
    def tensor_maps(mapping: dict[str, int]) -> list[int]:
        out = []
        for name, index in mapping.items():
            name_offset = builder.CreateString(name)
            tflite.TensorMapStart(builder)
            tflite.TensorMapAddName(builder, name_offset)
            tflite.TensorMapAddTensorIndex(builder, index)
            out.append(tflite.TensorMapEnd(builder))
        return out

    inputs = _offsets(builder, tflite.SignatureDefStartInputsVector, tensor_maps(s.inputs))
    outputs = _offsets(builder, tflite.SignatureDefStartOutputsVector, tensor_maps(s.outputs))
    key = builder.CreateString(s.key)
    tflite.SignatureDefStart(builder)
    tflite.SignatureDefAddInputs(builder, inputs)
    tflite.SignatureDefAddOutputs(builder, outputs)
    tflite.SignatureDefAddSignatureKey(builder, key)
    tflite.SignatureDefAddSubgraphIndex(builder, s.subgraph_index)
    return tflite.SignatureDefEnd(builder)
