"""Read a TFLite flatbuffer into plain values (`Model`).

Every way a file can be bad ends in `ModelError` naming the problem: the flatbuffer library
raises assorted low-level exceptions on corrupt offsets, and those are translated here;
index and size checks that the flatbuffer format cannot express are done in `_validate`.
"""

from __future__ import annotations

import math
import os
import struct
from pathlib import Path
from typing import Union

import numpy as np
import tflite

from ..errors import InvalidArgumentError, ModelError
from . import schema
from .model import NUMPY_DTYPES, Model, Operator, Quantization, SignatureDef, SubGraph, Tensor

ModelSource = Union[str, os.PathLike, bytes, bytearray, memoryview]
ModelLike = Union[ModelSource, Model]  # what the public entry points take as a model

SUPPORTED_SCHEMA_VERSION = 3
_IDENTIFIER = b"TFL3"

# What the flatbuffers runtime raises when offsets or lengths point outside the buffer.
_CORRUPTION = (struct.error, IndexError, ValueError, TypeError, OverflowError, UnicodeDecodeError, AttributeError)


def _source_bytes(source: ModelSource) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    path = Path(source)
    try:
        return path.read_bytes()
    except OSError as e:
        raise ModelError(f"cannot read model file {str(path)!r}: {e.strerror}") from None


def as_model(model: "ModelLike") -> Model:
    """`model` itself when it is a `Model`, else read from its path or bytes (`load_model`)."""
    if isinstance(model, Model):
        return model
    if isinstance(model, (bytes, bytearray, memoryview, str, os.PathLike)):
        return load_model(model)
    raise InvalidArgumentError(f"model must be a path, bytes or a cascader.Model, not {type(model).__name__}")


def load_model(source: ModelSource) -> Model:
    """Read a TFLite model from a path or from bytes.

    Raises
    ------
    ModelError
        If the input is not a TFLite flatbuffer, is truncated or corrupt, references
        buffers or tensors out of range, or uses an unsupported schema version.
    """
    buf = _source_bytes(source)
    if len(buf) < 8:
        raise ModelError(f"truncated model: {len(buf)} bytes, a TFLite flatbuffer has at least 8")
    if buf[4:8] != _IDENTIFIER:
        raise ModelError(
            f"not a TFLite model: flatbuffer file identifier is {bytes(buf[4:8])!r}, expected {_IDENTIFIER!r}"
        )
    try:
        root = tflite.Model.GetRootAs(buf, 0)
        version = root.Version()
        if version != SUPPORTED_SCHEMA_VERSION:
            raise ModelError(
                f"unsupported TFLite schema version {version}; cascader reads version {SUPPORTED_SCHEMA_VERSION}"
            )
        model = _read_model(root, buf)
    except ModelError:
        raise
    except _CORRUPTION as e:
        raise ModelError(f"corrupt or truncated TFLite flatbuffer ({type(e).__name__}: {e})") from None
    except (MemoryError, RecursionError):
        raise ModelError("corrupt TFLite flatbuffer: a length field is implausibly large") from None
    _validate(model)
    return model


def _count(n: int, buf: bytes, what: str) -> int:
    # Every vector element takes at least 4 bytes (an offset or a 4-byte scalar), so a
    # length beyond this is corruption; checking first avoids walking garbage for long.
    if n < 0 or n * 4 > len(buf):
        raise ModelError(f"corrupt TFLite flatbuffer: {what} count {n} does not fit in {len(buf)} bytes")
    return n


def _vector(obj, field: str) -> np.ndarray | None:
    # The generated accessor returns 0 for an absent vector: one vtable lookup, not two.
    v = getattr(obj, f"{field}AsNumpy")()
    return None if isinstance(v, int) else np.array(v)


def _ints(obj, field: str) -> tuple[int, ...]:
    v = _vector(obj, field)
    return () if v is None else tuple(v.tolist())


def _string(raw: bytes | None) -> str:
    return "" if raw is None else raw.decode("utf-8")


def _read_model(root, buf: bytes) -> Model:
    buffers = [_read_buffer(root.Buffers(i), buf) for i in range(_count(root.BuffersLength(), buf, "buffer"))]
    opcodes = [_read_opcode(root.OperatorCodes(i)) for i in range(_count(root.OperatorCodesLength(), buf, "opcode"))]
    subgraphs = [
        _read_subgraph(root.Subgraphs(i), opcodes, buffers, buf)
        for i in range(_count(root.SubgraphsLength(), buf, "subgraph"))
    ]
    metadata = {}
    for i in range(_count(root.MetadataLength(), buf, "metadata")):
        entry = root.Metadata(i)
        metadata[_string(entry.Name())] = entry.Buffer()
    signatures = [_read_signature(root.SignatureDefs(i)) for i in range(_count(root.SignatureDefsLength(), buf, "signature"))]
    return Model(
        subgraphs=subgraphs,
        buffers=buffers,
        metadata=metadata,
        signature_defs=signatures,
        description=_string(root.Description()),
        version=root.Version(),
        metadata_buffer=_ints(root, "MetadataBuffer"),
    )


def _read_buffer(b, buf: bytes) -> bytes:
    offset, size = b.Offset(), b.Size()
    if offset > 1:  # data stored after the flatbuffer (models over 2 GB)
        if offset + size > len(buf):
            raise ModelError(f"truncated model: a buffer at offset {offset} of {size} bytes ends past the file")
        return bytes(buf[offset : offset + size])
    if b.DataIsNone():
        return b""
    return b.DataAsNumpy().tobytes()


def _read_opcode(code) -> tuple[str, str | None, int]:
    value = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    try:
        name = schema.BUILTIN_OPERATOR_NAMES[value]
    except KeyError:
        raise ModelError(f"unknown builtin operator code {value} (newer than the TFLite schema cascader reads?)") from None
    custom = code.CustomCode()
    return name, None if custom is None else custom.decode("utf-8"), code.Version()


def _read_quantization(q) -> Quantization | None:
    if q is None:
        return None
    if q.DetailsType() != 0:
        raise ModelError("custom quantization details are not supported")
    scale = _vector(q, "Scale")
    zero_point = _vector(q, "ZeroPoint")
    qmin, qmax = _vector(q, "Min"), _vector(q, "Max")
    if scale is None and zero_point is None and qmin is None and qmax is None:
        return None  # converters write an empty table for float tensors
    scale = np.zeros(0, np.float32) if scale is None else scale.astype(np.float32)
    zero_point = np.zeros(0, np.int64) if zero_point is None else zero_point.astype(np.int64)
    return Quantization(scale, zero_point, q.QuantizedDimension(), qmin, qmax)


def _read_tensor(t, buffers: list[bytes]) -> Tensor:
    if t.Sparsity() is not None:
        raise ModelError(f"tensor {_string(t.Name())!r} is sparse; sparse tensors are not supported")
    type_code = t.Type()
    try:
        dtype = schema.TENSOR_TYPE_NAMES[type_code]
    except KeyError:
        raise ModelError(f"tensor {_string(t.Name())!r} has unknown type code {type_code}") from None
    signature = _vector(t, "ShapeSignature")
    tensor = Tensor(
        name=_string(t.Name()),
        shape=_ints(t, "Shape"),
        dtype=dtype,
        buffer=t.Buffer(),
        quantization=_read_quantization(t.Quantization()),
        is_variable=t.IsVariable(),
        shape_signature=None if signature is None else tuple(int(x) for x in signature),
        has_rank=t.HasRank(),
    )
    if 0 <= tensor.buffer < len(buffers) and buffers[tensor.buffer] and dtype in NUMPY_DTYPES:
        tensor.data = _constant_view(tensor, buffers[tensor.buffer])
    return tensor


def _constant_view(tensor: Tensor, data: bytes) -> np.ndarray:
    if any(d < 0 for d in tensor.shape):
        raise ModelError(f"constant tensor {tensor.name!r} has a negative dimension in shape {list(tensor.shape)}")
    expected = math.prod(tensor.shape) * NUMPY_DTYPES[tensor.dtype].itemsize
    if expected != len(data):
        raise ModelError(
            f"tensor {tensor.name!r} of shape {list(tensor.shape)} and type {tensor.dtype} needs "
            f"{expected} bytes, but buffer {tensor.buffer} holds {len(data)}"
        )
    return np.frombuffer(data, dtype=NUMPY_DTYPES[tensor.dtype]).reshape(tensor.shape)


def _read_operator(op, opcodes, buf: bytes) -> Operator:
    index = op.OpcodeIndex()
    if not 0 <= index < len(opcodes):
        raise ModelError(f"operator uses opcode index {index}, but the model has {len(opcodes)} opcodes")
    name, custom, version = opcodes[index]
    options_type, options = None, {}
    for union, type_getter, table_getter in (
        ("builtin_options", op.BuiltinOptionsType, op.BuiltinOptions),
        ("builtin_options_2", op.BuiltinOptions2Type, op.BuiltinOptions2),
    ):
        code = type_getter()
        if code == 0:
            continue
        try:
            options_type = schema.OPTIONS_NAMES[union][code]
        except KeyError:
            raise ModelError(f"{name} operator has unknown options type {code}") from None
        table = table_getter()
        options = {} if table is None else schema.read_options(options_type, table)
    custom_options = None
    if not op.CustomOptionsIsNone():
        custom_options = op.CustomOptionsAsNumpy().tobytes()
    elif op.LargeCustomOptionsSize() > 0:
        start, size = op.LargeCustomOptionsOffset(), op.LargeCustomOptionsSize()
        if start + size > len(buf):
            raise ModelError("truncated model: large custom options end past the file")
        custom_options = bytes(buf[start : start + size])
    mutating = _vector(op, "MutatingVariableInputs")
    return Operator(
        opcode=name,
        inputs=_ints(op, "Inputs"),
        outputs=_ints(op, "Outputs"),
        options=options,
        options_type=options_type,
        version=version,
        custom_code=custom,
        custom_options=custom_options,
        intermediates=_ints(op, "Intermediates"),
        mutating_variable_inputs=() if mutating is None else tuple(bool(x) for x in mutating),
    )


def _read_subgraph(g, opcodes, buffers: list[bytes], buf: bytes) -> SubGraph:
    return SubGraph(
        tensors=[_read_tensor(g.Tensors(i), buffers) for i in range(_count(g.TensorsLength(), buf, "tensor"))],
        operators=[_read_operator(g.Operators(i), opcodes, buf) for i in range(_count(g.OperatorsLength(), buf, "operator"))],
        inputs=_ints(g, "Inputs"),
        outputs=_ints(g, "Outputs"),
        name=_string(g.Name()),
    )


def _read_signature(s) -> SignatureDef:
    def tensor_map(length, getter) -> dict[str, int]:
        return {_string(getter(i).Name()): getter(i).TensorIndex() for i in range(length)}

    return SignatureDef(
        key=_string(s.SignatureKey()),
        subgraph_index=s.SubgraphIndex(),
        inputs=tensor_map(s.InputsLength(), s.Inputs),
        outputs=tensor_map(s.OutputsLength(), s.Outputs),
    )


def _validate(model: Model) -> None:
    """Index checks the flatbuffer format does not enforce."""
    n_buffers = len(model.buffers)
    if not model.subgraphs:
        raise ModelError("model has no subgraphs")
    for g_index, g in enumerate(model.subgraphs):
        where = f"subgraph {g_index}"
        n = len(g.tensors)
        for t_index, t in enumerate(g.tensors):
            if not 0 <= t.buffer < n_buffers:
                raise ModelError(f"{where}: tensor {t_index} ({t.name!r}) uses buffer {t.buffer}, but the model has {n_buffers} buffers")
            _validate_tensor(t, f"{where}: tensor {t_index} ({t.name!r})")
        for o_index, op in enumerate(g.operators):
            # -1 marks an omitted optional input.
            for i in op.inputs + op.intermediates:
                if not -1 <= i < n:
                    raise ModelError(f"{where}: operator {o_index} ({op.name}) uses tensor {i}, but the subgraph has {n} tensors")
            for i in op.outputs:
                if not 0 <= i < n:
                    raise ModelError(f"{where}: operator {o_index} ({op.name}) writes tensor {i}, but the subgraph has {n} tensors")
        for i in g.inputs + g.outputs:
            if not 0 <= i < n:
                raise ModelError(f"{where}: input/output tensor index {i} is out of range ({n} tensors)")
    for name, index in model.metadata.items():
        if not 0 <= index < n_buffers:
            raise ModelError(f"metadata {name!r} uses buffer {index}, but the model has {n_buffers} buffers")
    for sig in model.signature_defs:
        if not 0 <= sig.subgraph_index < len(model.subgraphs):
            raise ModelError(f"signature {sig.key!r} names subgraph {sig.subgraph_index}, which does not exist")
        n = len(model.subgraphs[sig.subgraph_index].tensors)
        for i in list(sig.inputs.values()) + list(sig.outputs.values()):
            if not 0 <= i < n:
                raise ModelError(f"signature {sig.key!r} uses tensor {i}, which is out of range ({n} tensors)")


# No tensor an Ethos-U system can hold comes near this; beyond it a shape is corruption.
MAX_TENSOR_ELEMENTS = 1 << 31


def _validate_tensor(t: Tensor, where: str) -> None:
    if any(d < 0 for d in t.shape):
        raise ModelError(f"{where} has a negative dimension in shape {list(t.shape)}")
    if math.prod(t.shape) > MAX_TENSOR_ELEMENTS:
        raise ModelError(f"{where} has {math.prod(t.shape)} elements, more than cascader supports ({MAX_TENSOR_ELEMENTS})")
    q = t.quantization
    if q is None:
        return
    if q.zero_point.size and q.scale.size != q.zero_point.size:
        raise ModelError(f"{where} has {q.scale.size} quantization scales but {q.zero_point.size} zero points")
    # An out-of-range axis is tolerated: TOCO writes axis 3 on 1-D biases and TFLite accepts it.
    if q.scale.size > 1 and 0 <= q.quantized_dimension < len(t.shape):
        if t.shape[q.quantized_dimension] != q.scale.size:
            raise ModelError(
                f"{where} has {q.scale.size} per-channel scales for {t.shape[q.quantized_dimension]} channels "
                f"on axis {q.quantized_dimension}"
            )
