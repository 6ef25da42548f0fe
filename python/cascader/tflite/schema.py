"""Bridges between the generated TFLite schema tables (the `tflite` package) and plain values.

The options tables are handled by reflection over the generated code (each table `X` has
accessors `X.Field()` and builders `XAddField`), so every builtin options table of the
schema reads and writes without per-operator code.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from typing import Any

import flatbuffers
import numpy as np
import tflite

from ..errors import ModelError


def _enum_names(enum_cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


BUILTIN_OPERATOR_NAMES: dict[int, str] = _enum_names(tflite.BuiltinOperator)
BUILTIN_OPERATOR_CODES: dict[str, int] = {v: k for k, v in BUILTIN_OPERATOR_NAMES.items()}
TENSOR_TYPE_NAMES: dict[int, str] = {k: v.lower() for k, v in _enum_names(tflite.TensorType).items()}
TENSOR_TYPE_CODES: dict[str, int] = {v: k for k, v in TENSOR_TYPE_NAMES.items()}

# Operator codes at or above this value are stored in `builtin_code`; the deprecated int8
# field then holds this placeholder (schema v3a).
PLACEHOLDER_FOR_GREATER_OP_CODES = 127

# Options unions: name -> (union code, which union). BuiltinOptions2 holds the newer tables.
_UNIONS = (("builtin_options", tflite.BuiltinOptions), ("builtin_options_2", tflite.BuiltinOptions2))
OPTIONS_UNION: dict[str, tuple[str, int]] = {}
OPTIONS_NAMES: dict[str, dict[int, str]] = {}
for _union_name, _enum in _UNIONS:
    OPTIONS_NAMES[_union_name] = {k: v for k, v in _enum_names(_enum).items() if v != "NONE"}
    for _code, _name in OPTIONS_NAMES[_union_name].items():
        OPTIONS_UNION[_name] = (_union_name, _code)

# Enum-valued option fields that the compiler reads, decoded to their names.
_ENUM_FIELDS: dict[str, dict[int, str]] = {
    "Padding": _enum_names(tflite.Padding),
    "FusedActivationFunction": _enum_names(tflite.ActivationFunctionType),
    "WeightsFormat": _enum_names(tflite.FullyConnectedOptionsWeightsFormat),
}
_ENUM_CODES = {f: {v: k for k, v in names.items()} for f, names in _ENUM_FIELDS.items()}


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


@dataclass(frozen=True)
class OptionsTable:
    """Reflection data for one generated options table."""

    name: str
    module: Any
    cls: type
    fields: dict[str, str]  # snake_case -> CamelCase
    vectors: frozenset[str]  # CamelCase names of scalar-vector fields


@functools.lru_cache(maxsize=None)
def options_table(name: str) -> OptionsTable:
    try:
        module = importlib.import_module(f"tflite.{name}")
    except ImportError:
        raise ModelError(f"options table {name!r} is not in the TFLite schema") from None
    cls = getattr(module, name)
    prefix = f"{name}Add"
    camels = [n[len(prefix) :] for n in dir(module) if n.startswith(prefix)]
    vectors = frozenset(c for c in camels if hasattr(cls, f"{c}AsNumpy"))
    return OptionsTable(name, module, cls, {_snake(c): c for c in camels}, vectors)


def read_options(name: str, table: flatbuffers.table.Table) -> dict[str, Any]:
    """Read a builtin options table into {snake_case_field: value}."""
    spec = options_table(name)
    obj = spec.cls()
    obj.Init(table.Bytes, table.Pos)
    out: dict[str, Any] = {}
    for snake, camel in spec.fields.items():
        if camel in spec.vectors:
            out[snake] = None if getattr(obj, f"{camel}IsNone")() else np.array(getattr(obj, f"{camel}AsNumpy")())
            continue
        if hasattr(spec.cls, f"{camel}Length"):
            raise ModelError(f"{name}.{snake} is a vector of tables, which cascader does not read")
        value = getattr(obj, camel)()
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        elif value is None:  # a string or a nested table left out (VarHandleOptions' container)
            pass
        elif not isinstance(value, (bool, int, float)):
            raise ModelError(f"{name}.{snake} is a nested table, which cascader does not read")
        if camel in _ENUM_FIELDS and not isinstance(value, bool):
            try:
                value = _ENUM_FIELDS[camel][value]
            except KeyError:
                raise ModelError(f"{name}.{snake} has value {value}, which is not a valid {camel}") from None
        out[snake] = value
    return out


@functools.lru_cache(maxsize=None)
def _is_string_field(table: str, camel: str) -> bool:
    """Whether the generated accessor reads a string (the schema keeps no field types at run time)."""
    import inspect

    return "String(" in inspect.getsource(getattr(options_table(table).cls, camel))


def build_options(builder: flatbuffers.Builder, name: str, options: dict[str, Any]) -> int:
    """Serialise {snake_case_field: value} as the options table `name`; returns its offset."""
    spec = options_table(name)
    unknown = set(options) - set(spec.fields)
    if unknown:
        raise ModelError(f"{name} has no field(s) {sorted(unknown)}; its fields are {sorted(spec.fields)}")
    # Vectors and strings must be finished before the table starts.
    children: dict[str, int] = {}
    for snake, value in options.items():
        camel = spec.fields[snake]
        if value is None:
            continue
        if camel in spec.vectors:
            array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=np.int32)
            children[camel] = builder.CreateNumpyVector(array)
        elif isinstance(value, str) and camel not in _ENUM_FIELDS:
            if not _is_string_field(name, camel):
                # Written as a string, its offset would become the field's number, silently.
                raise ModelError(f"{name}.{snake} is a number, not a string: got {value!r}")
            children[camel] = builder.CreateString(value)
    getattr(spec.module, f"{name}Start")(builder)
    for snake, value in options.items():
        camel = spec.fields[snake]
        if value is None:
            continue
        if camel in children:
            value = children[camel]
        elif camel in _ENUM_FIELDS and isinstance(value, str):
            try:
                value = _ENUM_CODES[camel][value]
            except KeyError:
                raise ModelError(f"{name}.{snake}={value!r} is not one of {sorted(_ENUM_CODES[camel])}") from None
        getattr(spec.module, f"{name}Add{camel}")(builder, value)
    return getattr(spec.module, f"{name}End")(builder)


def options_type_for(opcode: str) -> str | None:
    """The options table an operator uses by convention ('CONV_2D' -> 'Conv2DOptions')."""
    special = {
        "CONV_2D": "Conv2DOptions",
        "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
        "AVERAGE_POOL_2D": "Pool2DOptions",
        "MAX_POOL_2D": "Pool2DOptions",
        "L2_POOL_2D": "Pool2DOptions",
        "PAD": "PadOptions",
        "PADV2": "PadV2Options",
        "MEAN": "ReducerOptions",
        "SUM": "ReducerOptions",
        "REDUCE_MAX": "ReducerOptions",
        "REDUCE_MIN": "ReducerOptions",
        "RESIZE_BILINEAR": "ResizeBilinearOptions",
        "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
        "TRANSPOSE_CONV": "TransposeConvOptions",
        "LEAKY_RELU": "LeakyReluOptions",
        "BATCH_MATMUL": "BatchMatMulOptions",
        "QUANTIZE": None,
        "DEQUANTIZE": None,
        "RELU": None,
        "RELU6": None,
        "RELU_N1_TO_1": None,
        "LOGISTIC": None,
        "TANH": None,
        "LSTM": "LSTMOptions",
        "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
        "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions",
    }
    if opcode in special:
        return special[opcode]
    camel = "".join(part.capitalize() for part in opcode.split("_")) + "Options"
    return camel if camel in OPTIONS_UNION else None
