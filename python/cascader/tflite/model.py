"""Plain-value view of a TFLite model: what `load_model` returns and `save_model` writes.

Everything here is Python and numpy values; nothing keeps a reference to the flatbuffer.
Buffers are the storage; a constant tensor's `data` is a read-only numpy view of its buffer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# TFLite TensorType names (lower case) -> numpy dtype, for the types that have one.
NUMPY_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "float64": np.dtype(np.float64),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "uint16": np.dtype(np.uint16),
    "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32),
    "int64": np.dtype(np.int64),
    "uint64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
    "complex64": np.dtype(np.complex64),
    "complex128": np.dtype(np.complex128),
}


def _arrays_equal(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


@dataclass(eq=False)
class Quantization:
    """Affine quantization: real = scale * (q - zero_point), per tensor or per channel."""

    scale: np.ndarray  # float32, one per channel (length 1 when per tensor)
    zero_point: np.ndarray  # int64, same length as scale
    quantized_dimension: int = 0
    min: np.ndarray | None = None  # float32 calibration range, if the converter kept it
    max: np.ndarray | None = None

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantization):
            return NotImplemented
        return (
            _arrays_equal(self.scale, other.scale)
            and _arrays_equal(self.zero_point, other.zero_point)
            and self.quantized_dimension == other.quantized_dimension
            and _arrays_equal(self.min, other.min)
            and _arrays_equal(self.max, other.max)
        )

    def __repr__(self) -> str:
        if self.scale.size == 1:
            return f"Quantization(scale={float(self.scale[0]):.6g}, zero_point={int(self.zero_point[0])})"
        return f"Quantization(per-channel x{self.scale.size}, axis={self.quantized_dimension})"


@dataclass(eq=False)
class Tensor:
    """One tensor of a subgraph. `dtype` is the TFLite type name in lower case ('int8', ...)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    buffer: int = 0
    quantization: Quantization | None = None
    data: np.ndarray | None = None  # constant values, a read-only view of the model buffer
    is_variable: bool = False
    shape_signature: tuple[int, ...] | None = None
    has_rank: bool = False

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def numpy_dtype(self) -> np.dtype:
        try:
            return NUMPY_DTYPES[self.dtype]
        except KeyError:
            raise TypeError(f"TFLite type {self.dtype!r} has no numpy equivalent") from None

    @property
    def itemsize(self) -> int:
        return self.numpy_dtype.itemsize

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        return (
            self.name == other.name
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.buffer == other.buffer
            and self.quantization == other.quantization
            and _arrays_equal(self.data, other.data)
            and self.is_variable == other.is_variable
            and self.shape_signature == other.shape_signature
            and self.has_rank == other.has_rank
        )

    def __repr__(self) -> str:
        const = ", constant" if self.is_constant else ""
        return f"Tensor({self.name!r}, {self.dtype}{list(self.shape)}{const})"


@dataclass(eq=False)
class Operator:
    """One operator. `opcode` is the builtin name ('CONV_2D') or 'CUSTOM'.

    `options` holds the builtin options table as snake_case fields; the enum fields the
    compiler reads (padding, fused_activation_function, weights_format) are names
    ('SAME', 'RELU6', 'DEFAULT'), other fields keep the schema's value. `options_type` is
    the options table's schema name ('Conv2DOptions'), or None when the operator has none.
    """

    opcode: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)
    options_type: str | None = None
    version: int = 1
    custom_code: str | None = None
    custom_options: bytes | None = None
    intermediates: tuple[int, ...] = ()
    mutating_variable_inputs: tuple[bool, ...] = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Operator):
            return NotImplemented
        if self.options.keys() != other.options.keys():
            return False
        for k, v in self.options.items():
            w = other.options[k]
            if isinstance(v, np.ndarray) or isinstance(w, np.ndarray):
                if not _arrays_equal(np.asarray(v), np.asarray(w)):
                    return False
            elif v != w and not (isinstance(v, float) and isinstance(w, float) and math.isnan(v) and math.isnan(w)):
                return False
        return (
            self.opcode == other.opcode
            and self.inputs == other.inputs
            and self.outputs == other.outputs
            and self.options_type == other.options_type
            and self.version == other.version
            and self.custom_code == other.custom_code
            and self.custom_options == other.custom_options
            and self.intermediates == other.intermediates
            and self.mutating_variable_inputs == other.mutating_variable_inputs
        )

    @property
    def name(self) -> str:
        """The opcode, or the custom code for custom operators."""
        return self.custom_code if self.opcode == "CUSTOM" and self.custom_code else self.opcode

    def __repr__(self) -> str:
        return f"Operator({self.name}, in={list(self.inputs)}, out={list(self.outputs)})"


@dataclass
class SubGraph:
    tensors: list[Tensor] = field(default_factory=list)
    operators: list[Operator] = field(default_factory=list)
    inputs: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()
    name: str = ""


@dataclass
class SignatureDef:
    key: str
    subgraph_index: int
    inputs: dict[str, int]  # signature name -> tensor index
    outputs: dict[str, int]


@dataclass
class Model:
    """A TFLite model as plain values. `buffers[0]` is the empty sentinel buffer."""

    subgraphs: list[SubGraph] = field(default_factory=list)
    buffers: list[bytes] = field(default_factory=lambda: [b""])
    metadata: dict[str, int] = field(default_factory=dict)  # name -> buffer index
    signature_defs: list[SignatureDef] = field(default_factory=list)
    description: str = ""
    version: int = 3
    metadata_buffer: tuple[int, ...] = ()  # deprecated schema field, kept for round trips

    @property
    def main(self) -> SubGraph:
        """Subgraph 0, the one TFLite runs."""
        return self.subgraphs[0]

    def metadata_bytes(self, name: str) -> bytes:
        return self.buffers[self.metadata[name]]

    def add_buffer(self, data: bytes) -> int:
        """Append a buffer and return its index."""
        self.buffers.append(bytes(data))
        return len(self.buffers) - 1

    def add_metadata(self, name: str, data: bytes) -> int:
        """Add (or replace) a named metadata entry; returns its buffer index."""
        index = self.add_buffer(data)
        self.metadata[name] = index
        return index

    def __repr__(self) -> str:
        ops = sum(len(s.operators) for s in self.subgraphs)
        return f"Model({len(self.subgraphs)} subgraph(s), {ops} operators, {len(self.buffers)} buffers)"
