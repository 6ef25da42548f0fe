"""Build a `Model` from scratch: tensors, constant buffers, operators, subgraph inputs/outputs.

`ModelBuilder` appends to one subgraph and hands back a `Model` that `save_model` writes and
that equals its own round trip (`load_model(save_model(m)) == m`). Equality holds because
operator options are canonicalised at `add_operator` time: they are written to a flatbuffer
options table and read back, so every schema field is present with the value the reader
would produce (defaults filled in, enums as names, vectors as int32 arrays).

Example
-------
>>> b = ModelBuilder()
>>> x = b.add_input("x", (1, 8, 8, 4), "int8", quantization(0.05, -3))
>>> y = b.add_tensor("y", (1, 4, 4, 4), "int8", quantization(0.05, -3))
>>> b.add_operator("MAX_POOL_2D", [x], [y], {"padding": "VALID", "stride_h": 2, "stride_w": 2,
...                                          "filter_height": 2, "filter_width": 2})
0
>>> b.mark_output(y)
>>> model = b.build()
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import flatbuffers
import numpy as np

from ..errors import InvalidArgumentError, ModelError
from . import schema
from .model import NUMPY_DTYPES, Model, Operator, Quantization, SubGraph, Tensor

_DEFAULT = object()  # sentinel: "use the conventional options table for this opcode"


def quantization(
    scale: float | Sequence[float] | np.ndarray,
    zero_point: int | Sequence[int] | np.ndarray = 0,
    quantized_dimension: int = 0,
) -> Quantization:
    """An affine `Quantization` with the dtypes the reader produces (float32 scales, int64 zero points).

    A scalar `scale` gives per-tensor quantization; a sequence gives one scale per channel along
    `quantized_dimension`. A scalar `zero_point` is broadcast to the number of scales.
    """
    scales = np.atleast_1d(np.asarray(scale, dtype=np.float32)).copy()
    zero_points = np.atleast_1d(np.asarray(zero_point, dtype=np.int64))
    if scales.ndim != 1 or scales.size == 0:
        raise InvalidArgumentError(f"quantization scale must be a scalar or a 1-D sequence, got shape {scales.shape}")
    if zero_points.size == 1 and scales.size > 1:
        zero_points = np.full(scales.size, zero_points[0], dtype=np.int64)
    if zero_points.shape != scales.shape:
        raise InvalidArgumentError(
            f"quantization has {scales.size} scale(s) but {zero_points.size} zero point(s); give one per scale"
        )
    if not np.all(np.isfinite(scales)) or np.any(scales <= 0):
        raise InvalidArgumentError(f"quantization scales must be finite and positive, got {scales.tolist()}")
    return Quantization(scales, zero_points.copy(), int(quantized_dimension))


@functools.lru_cache(maxsize=None)
def _options_field_names(options_type: str) -> frozenset[str]:
    return frozenset(schema.options_table(options_type).fields)


def canonical_options(options_type: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` as the reader would return them: every field present, enums as names.

    Raises
    ------
    InvalidArgumentError
        If a field is not in the options table or a value does not fit its type.
    """
    try:
        unknown = set(options) - _options_field_names(options_type)
    except ModelError as e:
        raise InvalidArgumentError(str(e)) from None
    if unknown:
        raise InvalidArgumentError(
            f"{options_type} has no field(s) {sorted(unknown)}; its fields are {sorted(_options_field_names(options_type))}"
        )
    fb = flatbuffers.Builder(64)
    try:
        offset = schema.build_options(fb, options_type, dict(options))
    except ModelError as e:
        raise InvalidArgumentError(str(e)) from None
    except (TypeError, ValueError, OverflowError) as e:  # e.g. a string where an int belongs
        raise InvalidArgumentError(f"{options_type}: a value does not fit its field ({e})") from None
    fb.Finish(offset)
    buf = fb.Output()
    table = flatbuffers.table.Table(buf, flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0))
    return schema.read_options(options_type, table)


def add_variable_initialiser(model: Model, shared_name: str, start: np.ndarray, dtype: str,
                              quant: Quantization) -> int:
    """Append the subgraph a converter writes for a resource variable's start value (CALL_ONCE's
    `init_subgraph_index`): VAR_HANDLE `shared_name`, then ASSIGN_VARIABLE of the constant
    `start`. Returns the subgraph's index."""
    buffer = model.add_buffer(np.ascontiguousarray(start).tobytes())
    init = SubGraph([Tensor("init_handle", (), "resource"),
                     Tensor("start", tuple(start.shape), dtype, buffer=buffer, quantization=quant, data=start)],
                    [Operator("VAR_HANDLE", (), (0,), canonical_options("VarHandleOptions", {"shared_name": shared_name}),
                              "VarHandleOptions"),
                     Operator("ASSIGN_VARIABLE", (0, 1), (), canonical_options("AssignVariableOptions", {}),
                              "AssignVariableOptions")], (), (), "init")
    model.subgraphs.append(init)
    return len(model.subgraphs) - 1


class ModelBuilder:
    """Appends tensors and operators to a single-subgraph TFLite `Model`.

    Tensor and operator indices are returned as they are added, so a caller wires operators
    by index exactly as the flatbuffer does. Non-constant tensors share the empty buffer 0;
    each constant gets its own buffer.

    Parameters
    ----------
    description
        The model's description string.
    subgraph_name
        The name of subgraph 0.
    """

    def __init__(self, description: str = "cascader", subgraph_name: str = "main") -> None:
        self._model: Model | None = Model(description=description)
        self._graph = SubGraph(name=subgraph_name)
        self._model.subgraphs.append(self._graph)

    @property
    def tensors(self) -> list[Tensor]:
        """The tensors added so far (read them, do not mutate them)."""
        return self._graph.tensors

    @property
    def operators(self) -> list[Operator]:
        """The operators added so far."""
        return self._graph.operators

    def add_tensor(
        self,
        name: str,
        shape: Sequence[int],
        dtype: str = "int8",
        quantization: Quantization | None = None,
        data: np.ndarray | None = None,
    ) -> int:
        """Add a tensor and return its index. With `data` it is a constant with its own buffer.

        `data` must have exactly `shape`; it is converted to `dtype` (little-endian) and must not
        change value in the conversion.
        """
        self._check_open()
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise InvalidArgumentError(f"tensor {name!r}: shape {list(shape)} has a negative dimension")
        if dtype not in schema.TENSOR_TYPE_CODES:
            raise InvalidArgumentError(f"tensor {name!r}: {dtype!r} is not a TFLite type; use one of {sorted(NUMPY_DTYPES)}")
        tensor = Tensor(name=name, shape=shape, dtype=dtype, quantization=quantization)
        if data is not None:
            tensor.buffer, tensor.data = self._constant_buffer(name, shape, dtype, data)
        self._graph.tensors.append(tensor)
        return len(self._graph.tensors) - 1

    def add_constant(
        self, name: str, data: np.ndarray, dtype: str | None = None, quantization: Quantization | None = None
    ) -> int:
        """Add a constant tensor shaped like `data`; `dtype` defaults to data's own type."""
        data = np.asarray(data)
        if dtype is None:
            names = {v: k for k, v in NUMPY_DTYPES.items()}
            if data.dtype.newbyteorder("=") not in names:
                raise InvalidArgumentError(f"constant {name!r}: numpy type {data.dtype} has no TFLite equivalent")
            dtype = names[data.dtype.newbyteorder("=")]
        return self.add_tensor(name, data.shape, dtype, quantization, data)

    def add_input(
        self, name: str, shape: Sequence[int], dtype: str = "int8", quantization: Quantization | None = None
    ) -> int:
        """Add a tensor and make it the next subgraph input."""
        index = self.add_tensor(name, shape, dtype, quantization)
        self._graph.inputs = self._graph.inputs + (index,)
        return index

    def mark_output(self, tensor: int) -> None:
        """Make an existing tensor the next subgraph output."""
        self._check_open()
        self._check_tensor(tensor, "output")
        self._graph.outputs = self._graph.outputs + (int(tensor),)

    def add_operator(
        self,
        opcode: str,
        inputs: Sequence[int],
        outputs: Sequence[int],
        options: Mapping[str, Any] | None = None,
        *,
        version: int = 1,
        options_type: Any = _DEFAULT,
    ) -> int:
        """Add a builtin operator and return its index.

        Parameters
        ----------
        opcode
            Builtin operator name, e.g. 'CONV_2D'.
        inputs, outputs
            Tensor indices; -1 in `inputs` marks an omitted optional input.
        options
            Fields of the options table (snake_case); missing fields take the schema defaults.
        version
            The operator version written to the opcode table (what the TFLite converter would
            choose for these types; runtimes reject versions newer than they implement).
        options_type
            The options table name; by default the one `schema.options_type_for(opcode)` gives.
        """
        self._check_open()
        if opcode not in schema.BUILTIN_OPERATOR_CODES or opcode == "CUSTOM":
            raise InvalidArgumentError(f"{opcode!r} is not a TFLite builtin operator")
        if options_type is _DEFAULT:
            options_type = schema.options_type_for(opcode)
        if options_type is None:
            if options:
                raise InvalidArgumentError(f"{opcode} takes no options table, but options {sorted(options)} were given")
            canonical: dict[str, Any] = {}
        else:
            canonical = canonical_options(options_type, options or {})
        for i in inputs:
            if int(i) != -1:
                self._check_tensor(i, f"{opcode} input")
        for i in outputs:
            self._check_tensor(i, f"{opcode} output")
        op = Operator(
            opcode=opcode,
            inputs=tuple(int(i) for i in inputs),
            outputs=tuple(int(i) for i in outputs),
            options=canonical,
            options_type=options_type,
            version=int(version),
        )
        self._graph.operators.append(op)
        return len(self._graph.operators) - 1

    def add_custom_operator(
        self, custom_code: str, inputs: Sequence[int], outputs: Sequence[int], custom_options: bytes | None = None,
        *, version: int = 1,
    ) -> int:
        """Add a custom operator (opcode CUSTOM named `custom_code`) and return its index.

        `custom_options` are the operator's raw option bytes (a flexbuffer for TFLite's own
        custom operators such as TFLite_Detection_PostProcess); -1 in `inputs` is an omitted input.
        """
        self._check_open()
        if not isinstance(custom_code, str) or not custom_code:
            raise InvalidArgumentError(f"a custom operator needs a non-empty custom_code, got {custom_code!r}")
        for i in inputs:
            if int(i) != -1:
                self._check_tensor(i, f"{custom_code} input")
        for i in outputs:
            self._check_tensor(i, f"{custom_code} output")
        op = Operator(opcode="CUSTOM", inputs=tuple(int(i) for i in inputs), outputs=tuple(int(i) for i in outputs),
                      custom_code=custom_code, custom_options=None if custom_options is None else bytes(custom_options),
                      version=int(version))
        self._graph.operators.append(op)
        return len(self._graph.operators) - 1

    def build(self) -> Model:
        """The model built so far. The builder cannot be used afterwards (the model is not copied)."""
        self._check_open()
        if not self._graph.inputs or not self._graph.outputs:
            raise InvalidArgumentError("the model needs at least one input and one output (add_input, mark_output)")
        model, self._model = self._model, None
        return model

    def _check_open(self) -> None:
        if self._model is None:
            raise InvalidArgumentError("build() was already called on this ModelBuilder; start a new one")

    def _check_tensor(self, index: int, role: str) -> None:
        if not 0 <= int(index) < len(self._graph.tensors):
            raise InvalidArgumentError(f"{role} tensor {index} does not exist ({len(self._graph.tensors)} tensors so far)")

    def _constant_buffer(self, name: str, shape: tuple[int, ...], dtype: str, data: np.ndarray) -> tuple[int, np.ndarray]:
        if dtype not in NUMPY_DTYPES:
            raise InvalidArgumentError(f"constant {name!r}: type {dtype!r} has no numpy equivalent to hold its data")
        source = np.asarray(data)
        if source.shape != shape:
            raise InvalidArgumentError(
                f"constant {name!r}: data shape {list(source.shape)} differs from shape {list(shape)}"
            )
        if source.size == 0:
            raise InvalidArgumentError(f"constant {name!r} has no elements; TFLite stores empty constants as no buffer")
        target = NUMPY_DTYPES[dtype].newbyteorder("<")
        converted = source.astype(target)
        if not np.array_equal(converted, source):
            raise InvalidArgumentError(f"constant {name!r}: values change when converted to {dtype}; convert them first")
        raw = converted.tobytes()
        index = self._model.add_buffer(raw)
        # A read-only view of the stored buffer, as `load_model` gives.
        return index, np.frombuffer(self._model.buffers[index], dtype=target).reshape(shape)
