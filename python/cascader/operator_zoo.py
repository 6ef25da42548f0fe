"""One small model per TFLite operator and activation type: the rows of the coverage table.

`operator_model(opcode, dtype)` builds a single-operator model as TFLite's converter writes it
(the operand types and fixed output quantizations its reference kernels demand), for every
operator on Vela 5.2's Ethos-U55/U65 list. `python -m cascader.bench.coverage` compiles each
with cascader and with Vela and checks both binaries against the reference interpreter; the
per-family test files hold the constraint edges.

`OPERATOR_DTYPES[opcode]` lists the activation types the reference kernels take for the
operator (int8, uint8, int16 of the three Vela's feature maps may have); a type the reference
cannot run is not a row. `U85_OPERATOR_DTYPES` does the same for the operators Vela 5.2 runs on
the Ethos-U85 only (comparisons, logical operators, DIV, CAST, SELECT, GATHER, SCATTER_ND,
resource variables, REDUCE_ALL/ANY; bool and int32 types included); they are kept apart so
the U55/U65 tables keep their rows.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .errors import InvalidArgumentError
from .tflite.builder import ModelBuilder, quantization
from .tflite.schema import TENSOR_TYPE_CODES
from .tflite.model import Model

Shape = tuple[int, ...]
_FM = (1, 8, 8, 16)

_ALL = ("int8", "uint8", "int16")
_SIGNED = ("int8", "int16")


def _q(dtype: str, scale: float, zero_point: int = 0):
    # int16 feature maps are symmetric in TFLite's kernels.
    return quantization(scale, 0 if dtype == "int16" else zero_point + (128 if dtype == "uint8" else 0))


def _fixed_output(opcode: str, dtype: str):
    """The output quantization TFLite's kernels require of LOGISTIC, TANH and SOFTMAX."""
    if dtype == "int16":
        return quantization(1 / 32768, 0)
    if opcode == "TANH":
        return _q(dtype, 1 / 128, 0)
    return _q(dtype, 1 / 256, -128)


class _Net:
    """A ModelBuilder with the conveniences the cases share: a seeded generator and one
    activation type."""

    def __init__(self, opcode: str, dtype: str, seed: int) -> None:
        self.b = ModelBuilder(description=f"cascader.operator_zoo {opcode} {dtype}")
        self.dtype, self.rng = dtype, np.random.default_rng(seed)

    def input(self, shape: Shape, scale: float = 0.05, zero_point: int = 0, name: str = "input") -> int:
        return self.b.add_input(name, shape, self.dtype, _q(self.dtype, scale, zero_point))

    def output(self, shape: Shape, scale: float = 0.06, zero_point: int = 3, q=None, dtype: str | None = None) -> int:
        t = self.b.add_tensor("output", shape, dtype or self.dtype, q or _q(self.dtype, scale, zero_point))
        self.b.mark_output(t)
        return t

    def const_i32(self, name: str, values) -> int:
        return self.b.add_constant(name, np.asarray(values, np.int32))

    def weights(self, shape: Shape, scale: float = 0.02) -> int:
        return self.b.add_constant("weights", self.rng.integers(-127, 128, shape).astype(np.int8), "int8",
                                   quantization(scale, 0))

    def bias(self, n: int, weight_scale: float, input_scale: float) -> int:
        wide = self.dtype == "int16"  # 16x8 kernels take int64 bias
        data = self.rng.integers(-2000, 2000, n).astype(np.int64 if wide else np.int32)
        return self.b.add_constant("bias", data, "int64" if wide else "int32",
                                   quantization(weight_scale * input_scale, 0))

    def op(self, opcode: str, inputs, outputs, options=None, **kwargs) -> None:
        self.b.add_operator(opcode, inputs, outputs, options or {}, **kwargs)


def _unary(opcode: str, options=None, in_scale: float = 0.05, in_zp: int = 0, out=None) -> Callable:
    def build(n: _Net) -> None:
        x = n.input(_FM, in_scale, in_zp)
        n.op(opcode, [x], [n.output(_FM, q=out(opcode, n.dtype) if out else None)], options)
    return build


def _binary(opcode: str, options=None, second: Shape = _FM) -> Callable:
    def build(n: _Net) -> None:
        a = n.input(_FM, 0.05, 2)
        b = n.input(second, 0.03, -5, name="input_b")
        n.op(opcode, [a, b], [n.output(_FM)], options)
    return build


def _same_quantization_binary(opcode: str) -> Callable:
    def build(n: _Net) -> None:  # MINIMUM and MAXIMUM: one quantization in and out
        a, b = n.input(_FM, 0.05, 2), n.input(_FM, 0.05, 2, name="input_b")
        n.op(opcode, [a, b], [n.output(_FM, 0.05, 2)])
    return build


def _conv(n: _Net) -> None:
    x = n.input((1, 12, 12, 8), 0.05)
    w, b = n.weights((16, 3, 3, 8)), n.bias(16, 0.02, 0.05)
    n.op("CONV_2D", [x, w, b], [n.output((1, 6, 6, 16), 0.2)],
         dict(padding="SAME", stride_w=2, stride_h=2, fused_activation_function="RELU"))


def _depthwise(n: _Net) -> None:
    x = n.input((1, 12, 12, 8), 0.05)
    w, b = n.weights((1, 3, 3, 8)), n.bias(8, 0.02, 0.05)
    n.op("DEPTHWISE_CONV_2D", [x, w, b], [n.output((1, 12, 12, 8), 0.05)],
         dict(padding="SAME", stride_w=1, stride_h=1, depth_multiplier=1))


def _fully_connected(n: _Net) -> None:
    x = n.input((1, 64), 0.05)
    w, b = n.weights((10, 64)), n.bias(10, 0.02, 0.05)
    n.op("FULLY_CONNECTED", [x, w, b], [n.output((1, 10), 0.2)])


def _transpose_conv(n: _Net) -> None:
    x = n.input((1, 6, 6, 8), 0.05)
    shape = n.const_i32("output_shape", [1, 12, 12, 8])
    w = n.weights((8, 3, 3, 8))
    n.op("TRANSPOSE_CONV", [shape, w, x], [n.output((1, 12, 12, 8), 0.1)], dict(padding="SAME", stride_w=2, stride_h=2))


def _pool(opcode: str) -> Callable:
    def build(n: _Net) -> None:
        x = n.input(_FM, 0.05, 1)
        same = opcode == "MAX_POOL_2D"  # MAX_POOL_2D keeps the quantization in TFLite's kernel
        n.op(opcode, [x], [n.output((1, 4, 4, 16), 0.05 if same else 0.04, 1 if same else -2)],
             dict(padding="VALID", stride_w=2, stride_h=2, filter_width=2, filter_height=2))
    return build


def _reduce(opcode: str, keep: bool = True, same: bool = False) -> Callable:
    def build(n: _Net) -> None:
        x = n.input(_FM, 0.05, 1)
        axes = n.const_i32("axes", [1, 2])
        out = (1, 1, 1, 16) if keep else (1, 16)
        n.op(opcode, [x, axes], [n.output(out, 0.05, 1) if same else n.output(out, 0.3, -4)], dict(keep_dims=keep))
    return build


def _arg_max(n: _Net) -> None:
    x = n.input(_FM, 0.05, 1)
    out = n.b.add_tensor("output", (1, 8, 8), "int32")
    n.b.mark_output(out)
    n.op("ARG_MAX", [x, n.const_i32("axis", [3])], [out], dict(output_type=2))  # TensorType.INT32


def _concatenation(n: _Net) -> None:
    # One quantization for all: TFLite's int8 and int16 kernels require it.
    a, b = n.input((1, 8, 8, 8), 0.05, 1), n.input((1, 8, 8, 16), 0.05, 1, name="input_b")
    n.op("CONCATENATION", [a, b], [n.output((1, 8, 8, 24), 0.05, 1)], dict(axis=3))


def _reshape_like(opcode: str) -> Callable:
    def build(n: _Net) -> None:
        if opcode == "RESHAPE":
            x = n.input((1, 8, 8, 16), 0.05, 1)
            n.op(opcode, [x, n.const_i32("shape", [1, 64, 16])], [n.output((1, 64, 16), 0.05, 1)],
                 dict(new_shape=[1, 64, 16]))
        elif opcode == "EXPAND_DIMS":
            x = n.input((1, 8, 16), 0.05, 1)
            n.op(opcode, [x, n.const_i32("axis", [1])], [n.output((1, 1, 8, 16), 0.05, 1)])
        else:  # SQUEEZE
            x = n.input((1, 1, 8, 16), 0.05, 1)
            n.op(opcode, [x], [n.output((1, 8, 16), 0.05, 1)], dict(squeeze_dims=[1]))
    return build


def _pack(n: _Net) -> None:
    a, b = n.input((1, 8, 16), 0.05, 1), n.input((1, 8, 16), 0.05, 1, name="input_b")
    n.op("PACK", [a, b], [n.output((1, 2, 8, 16), 0.05, 1)], dict(values_count=2, axis=1))


def _unpack(n: _Net) -> None:
    x = n.input((1, 2, 8, 16), 0.05, 1)
    outs = [n.b.add_tensor(f"output_{i}", (1, 8, 16), n.dtype, _q(n.dtype, 0.05, 1)) for i in range(2)]
    for t in outs:
        n.b.mark_output(t)
    n.op("UNPACK", [x], outs, dict(num=2, axis=1))


def _pad(opcode: str) -> Callable:
    def build(n: _Net) -> None:
        x = n.input(_FM, 0.05, 1)
        pads = n.const_i32("paddings", [[0, 0], [1, 2], [2, 1], [0, 0]])
        inputs = [x, pads]
        if opcode == "PADV2":
            value = n.b.add_constant("constant_value", np.array([7 if n.dtype != "uint8" else 135],
                                                                 dtype={"int8": np.int8, "uint8": np.uint8,
                                                                        "int16": np.int16}[n.dtype]),
                                     n.dtype, _q(n.dtype, 0.05, 1))
            inputs.append(value)
        options = dict(mode=1) if opcode == "MIRROR_PAD" else None  # MirrorPadMode.SYMMETRIC
        n.op(opcode, inputs, [n.output((1, 11, 11, 16), 0.05, 1)], options)
    return build


def _slice(n: _Net) -> None:
    x = n.input(_FM, 0.05, 1)
    n.op("SLICE", [x, n.const_i32("begin", [0, 1, 2, 0]), n.const_i32("size", [1, 5, 4, 16])],
         [n.output((1, 5, 4, 16), 0.05, 1)])


def _strided_slice(n: _Net) -> None:
    x = n.input(_FM, 0.05, 1)
    n.op("STRIDED_SLICE", [x, n.const_i32("begin", [0, 1, 0, 0]), n.const_i32("end", [1, 7, 8, 16]),
                           n.const_i32("strides", [1, 2, 1, 1])], [n.output((1, 3, 8, 16), 0.05, 1)])


def _split(opcode: str) -> Callable:
    def build(n: _Net) -> None:
        x = n.input(_FM, 0.05, 1)
        outs = [n.b.add_tensor(f"output_{i}", (1, 8, 8, 8), n.dtype, _q(n.dtype, 0.05, 1)) for i in range(2)]
        for t in outs:
            n.b.mark_output(t)
        if opcode == "SPLIT":
            n.op(opcode, [n.const_i32("axis", [3]), x], outs, dict(num_splits=2))
        else:
            n.op(opcode, [x, n.const_i32("size_splits", [8, 8]), n.const_i32("axis", [3])], outs, dict(num_splits=2))
    return build


def _transpose(n: _Net) -> None:
    x = n.input((1, 8, 4, 16), 0.05, 1)
    n.op("TRANSPOSE", [x, n.const_i32("perm", [0, 2, 1, 3])], [n.output((1, 4, 8, 16), 0.05, 1)])


def _tile(n: _Net) -> None:
    x = n.input((1, 4, 4, 16), 0.05, 1)
    n.op("TILE", [x, n.const_i32("multiples", [1, 2, 2, 1])], [n.output((1, 8, 8, 16), 0.05, 1)])


def _reverse(n: _Net) -> None:
    x = n.input(_FM, 0.05, 1)
    n.op("REVERSE_V2", [x, n.const_i32("axis", [1])], [n.output(_FM, 0.05, 1)])


def _resize(opcode: str) -> Callable:
    def build(n: _Net) -> None:
        x = n.input((1, 4, 4, 16), 0.05, 1)
        n.op(opcode, [x, n.const_i32("size", [8, 8])], [n.output((1, 8, 8, 16), 0.05, 1)],
             dict(align_corners=False, half_pixel_centers=False))
    return build


def _prelu(n: _Net) -> None:
    x = n.input(_FM, 0.05, 1)
    # int16 PRELU takes an int8 alpha (TFLM refuses an int16 one; LiteRT reads its bytes as int8).
    dtype = "int8" if n.dtype == "int16" else n.dtype
    alpha = n.b.add_constant("alpha", n.rng.integers(-100, 100, (1, 1, 16)).astype(
        {"int8": np.int8, "uint8": np.uint8}[dtype]) + (128 if dtype == "uint8" else 0), dtype, _q(dtype, 0.004, 0))
    n.op("PRELU", [x, alpha], [n.output(_FM, 0.05, 1)])


def _batch_matmul(n: _Net) -> None:
    a, b = n.input((1, 8, 16), 0.05, 1), n.input((1, 16, 12), 0.04, -2, name="input_b")
    n.op("BATCH_MATMUL", [a, b], [n.output((1, 8, 12), 0.3, 0)], dict(adj_x=False, adj_y=False),
         options_type="BatchMatMulOptions")


def _positive_log(n: _Net) -> None:
    # LOG of the positive codes: TFLite's kernel takes any input, so the range spans 0 too.
    x = n.input(_FM, 0.05, -120)
    n.op("LOG", [x], [n.output(_FM, 0.05, 10)])


_SOFTMAX = _unary("SOFTMAX", dict(beta=1.0), 0.1, out=_fixed_output)

def _lstm(dtype: str, seed: int) -> Model:
    """An LSTM alone, quantized as the converter quantizes one: its weights, state and gate
    intermediates follow from a float pass (`CalibratedNet.lstm`)."""
    from ._zoo_layers import CalibratedNet

    net = CalibratedNet(seed, description=f"cascader.operator_zoo UNIDIRECTIONAL_SEQUENCE_LSTM {dtype}")
    net.output(net.lstm(net.input((1, 8, 10), dtype=dtype), 16))
    return net.build()


# opcode -> (activation types, builder).
OPERATOR_CASES: dict[str, tuple[tuple[str, ...], Callable[[_Net], None]]] = {
    "ABS": (_SIGNED, _unary("ABS")),
    "ADD": (_ALL, _binary("ADD")),
    "ARG_MAX": (("int8", "uint8"), _arg_max),
    "AVERAGE_POOL_2D": (_ALL, _pool("AVERAGE_POOL_2D")),
    "BATCH_MATMUL": (_SIGNED, _batch_matmul),
    "CONCATENATION": (_ALL, _concatenation),
    "CONV_2D": (("int8", "int16"), _conv),
    "DEPTHWISE_CONV_2D": (("int8", "int16"), _depthwise),
    "ELU": (("int8",), _unary("ELU")),
    "EXP": (_SIGNED, _unary("EXP", in_scale=0.02)),
    "EXPAND_DIMS": (_ALL, _reshape_like("EXPAND_DIMS")),
    "FULLY_CONNECTED": (("int8", "int16"), _fully_connected),
    "GELU": (("int8", "uint8"), _unary("GELU", dict(approximate=False))),
    "HARD_SWISH": (("int8", "uint8"), _unary("HARD_SWISH", in_scale=0.05)),
    "LEAKY_RELU": (_ALL, _unary("LEAKY_RELU", dict(alpha=0.2))),
    "LOG": (_SIGNED, _positive_log),
    "LOGISTIC": (_ALL, _unary("LOGISTIC", in_scale=0.1, out=_fixed_output)),
    "MAXIMUM": (_ALL, _same_quantization_binary("MAXIMUM")),
    "MAX_POOL_2D": (_ALL, _pool("MAX_POOL_2D")),
    "MEAN": (_ALL, _reduce("MEAN")),
    "MINIMUM": (_ALL, _same_quantization_binary("MINIMUM")),
    "MIRROR_PAD": (_ALL, _pad("MIRROR_PAD")),
    "MUL": (_ALL, _binary("MUL")),
    "NEG": (_SIGNED, _unary("NEG")),
    "PACK": (_ALL, _pack),
    "PAD": (_ALL, _pad("PAD")),
    "PADV2": (_ALL, _pad("PADV2")),
    "PRELU": (_ALL, _prelu),
    "QUANTIZE": (_ALL, _unary("QUANTIZE")),
    "REDUCE_MAX": (_ALL, _reduce("REDUCE_MAX", same=True)),
    "REDUCE_MIN": (_ALL, _reduce("REDUCE_MIN", same=True)),
    "RELU": (_ALL, _unary("RELU")),
    "RELU6": (_ALL, _unary("RELU6")),
    "RELU_0_TO_1": (("int8", "uint8"), _unary("RELU_0_TO_1")),
    "RELU_N1_TO_1": (("int8", "uint8"), _unary("RELU_N1_TO_1")),
    "RESHAPE": (_ALL, _reshape_like("RESHAPE")),
    "RESIZE_BILINEAR": (_ALL, _resize("RESIZE_BILINEAR")),
    "RESIZE_NEAREST_NEIGHBOR": (_ALL, _resize("RESIZE_NEAREST_NEIGHBOR")),
    "REVERSE_V2": (_ALL, _reverse),
    "RSQRT": (("int8",), _unary("RSQRT", in_zp=-128)),  # int16 inputs span negatives, which it refuses
    "SLICE": (_ALL, _slice),
    "SOFTMAX": (_ALL, _SOFTMAX),
    "SPLIT": (_ALL, _split("SPLIT")),
    "SPLIT_V": (_ALL, _split("SPLIT_V")),
    "SQUARED_DIFFERENCE": (("int8",), _binary("SQUARED_DIFFERENCE")),
    "SQUEEZE": (_ALL, _reshape_like("SQUEEZE")),
    "STRIDED_SLICE": (_ALL, _strided_slice),
    "SUB": (_ALL, _binary("SUB")),
    "SUM": (_ALL, _reduce("SUM")),
    "TANH": (_ALL, _unary("TANH", in_scale=0.05, out=_fixed_output)),
    "TILE": (_ALL, _tile),
    "TRANSPOSE": (_ALL, _transpose),
    "TRANSPOSE_CONV": (("int8", "int16"), _transpose_conv),
    "UNPACK": (_ALL, _unpack),
}
# Operators whose case is a calibrated network layer: opcode -> (activation types, builder(dtype, seed)).
CALIBRATED_CASES: dict[str, tuple[tuple[str, ...], Callable[[str, int], Model]]] = {
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (_SIGNED, _lstm),
}
OPERATOR_DTYPES = {op: dtypes for op, (dtypes, _) in {**OPERATOR_CASES, **CALIBRATED_CASES}.items()}


# -- Operators only the Ethos-U85 runs (Vela 5.2 keeps them on the CPU of the U55 and U65) --------
# Booleans carry no quantization; Vela's U85 keeps them as -1/0 inside a network and converts
# TFLite's 0/1 at its edges. A type is a row where Vela puts the operator on the U85's NPU and
# the reference kernels take it.

_INTS = ("int8", "uint8", "int16", "int32")


def _maybe_q(dtype: str, scale: float, zero_point: int):
    return None if dtype in ("bool", "int32") else _q(dtype, scale, zero_point)


def _plain_output(n: _Net, shape: Shape, dtype: str, q=None) -> int:
    """An output of any type, with `q` or no quantization (bool, int32)."""
    t = n.b.add_tensor("output", shape, dtype, q)
    n.b.mark_output(t)
    return t


def _comparison(opcode: str) -> Callable:
    def build(n: _Net) -> None:
        # Different scales and zero points: the comparison rescales both operands first. Not
        # for int16, whose reference kernel compares the raw values (Vela compares the real ones).
        second = (0.05, 0) if n.dtype == "int16" else (0.03, -5)
        a = n.b.add_input("input", _FM, n.dtype, _maybe_q(n.dtype, 0.05, 2))
        b = n.b.add_input("input_b", _FM, n.dtype, _maybe_q(n.dtype, *second))
        n.op(opcode, [a, b], [_plain_output(n, _FM, "bool")])
    return build


def _logical(opcode: str) -> Callable:
    def build(n: _Net) -> None:
        ins = [n.b.add_input("input", _FM, "bool")]
        if opcode != "LOGICAL_NOT":
            ins.append(n.b.add_input("input_b", _FM, "bool"))
        n.op(opcode, ins, [_plain_output(n, _FM, "bool")])
    return build


def _div(n: _Net) -> None:
    # The divisor is a constant broadcast over H and W, with negative values and no zero (the
    # reference kernels leave a zero divisor undefined).
    divisor = n.rng.integers(1, 100 if n.dtype == "int32" else 20, (1, 1, 1, 16)) * (
        n.rng.choice([-1, 1], (1, 1, 1, 16)) if n.dtype == "int32" else 1)
    q = _maybe_q(n.dtype, 0.05, 0)
    a = n.b.add_input("input", _FM, n.dtype, q)
    b = n.b.add_constant("divisor", divisor.astype(NUMPY[n.dtype]), n.dtype, q)
    n.op("DIV", [a, b], [_plain_output(n, _FM, n.dtype, q)])


# CAST: input type -> output type. TFLite's CAST converts values (wrapping where it narrows) and
# ignores quantization; Vela's U85 takes it on the NPU only with quantization (scale 1) on both.
CAST_TO = {"int8": "int16", "uint8": "int8", "int16": "int32", "int32": "int8", "bool": "int32"}


def _cast(n: _Net) -> None:
    to = CAST_TO[n.dtype]
    x = n.b.add_input("input", _FM, n.dtype, None if n.dtype == "bool" else quantization(1.0, 0))
    n.op("CAST", [x], [_plain_output(n, _FM, to, None if n.dtype == "bool" else quantization(1.0, 0))],
         dict(in_data_type=TENSOR_TYPE_CODES[n.dtype], out_data_type=TENSOR_TYPE_CODES[to]))


def _select(opcode: str) -> Callable:
    def build(n: _Net) -> None:
        condition = n.b.add_input("condition", _FM if opcode == "SELECT" else (1, 1, 8, 16), "bool")
        q = _maybe_q(n.dtype, 0.05, 1)
        x = n.b.add_input("input", _FM, n.dtype, q)
        y = n.b.add_input("input_b", _FM, n.dtype, q)
        n.op(opcode, [condition, x, y], [_plain_output(n, _FM, n.dtype, q)])
    return build


def _reduce_bool(opcode: str) -> Callable:
    def build(n: _Net) -> None:
        x = n.b.add_input("input", _FM, "bool")
        n.op(opcode, [x, n.const_i32("axes", [1, 2])], [_plain_output(n, (1, 1, 1, 16), "bool")],
             dict(keep_dims=True), options_type="ReducerOptions")
    return build


def _gather(n: _Net) -> None:
    # Constant indices (the reference refuses an index out of range), repeated, last row included.
    q = _maybe_q(n.dtype, 0.05, 1)
    x = n.b.add_input("input", (10, 16), n.dtype, q)
    n.op("GATHER", [x, n.const_i32("indices", [3, 0, 9, 3, 7, 1])], [_plain_output(n, (6, 16), n.dtype, q)],
         dict(axis=0, batch_dims=0))


def _scatter_nd(n: _Net) -> None:
    # Unique constant indices (Vela's constraint): the other rows of the output are zero.
    q = _maybe_q(n.dtype, 0.05, 0)
    updates = n.b.add_input("input", (3, 16), n.dtype, q)
    n.op("SCATTER_ND", [n.const_i32("indices", [[6], [0], [3]]), updates, n.const_i32("shape", [8, 16])],
         [_plain_output(n, (8, 16), n.dtype, q)])


NUMPY = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32, "bool": np.bool_}


def _resource_variable(dtype: str, seed: int) -> Model:
    """A stateful model as the converter writes one: CALL_ONCE runs an initialiser subgraph that
    assigns the variable its start; each inference reads it, adds the input and assigns the sum
    back (READ_VARIABLE and ASSIGN_VARIABLE, both through VAR_HANDLE)."""
    from .tflite.builder import add_variable_initialiser

    n = _Net("READ_VARIABLE", dtype, seed)
    q = _q(dtype, 0.05, 0)
    x = n.input(_FM, 0.05, 0)
    n.op("CALL_ONCE", [], [], dict(init_subgraph_index=1))
    handle = n.b.add_tensor("handle", (), "resource")
    n.op("VAR_HANDLE", [], [handle], dict(shared_name="state"))
    state = n.b.add_tensor("state", _FM, dtype, q)
    n.op("READ_VARIABLE", [handle], [state])
    total = _plain_output(n, _FM, dtype, q)
    n.op("ADD", [x, state], [total])
    n.op("ASSIGN_VARIABLE", [handle, total], [])
    model = n.b.build()
    add_variable_initialiser(model, "state", n.rng.integers(-20, 20, _FM).astype(NUMPY[dtype]), dtype, q)
    return model


_COMPARED = ("bool", *_INTS)
U85_OPERATOR_CASES: dict[str, tuple[tuple[str, ...], Callable[[_Net], None]]] = {
    "EQUAL": (_COMPARED, _comparison("EQUAL")),
    "NOT_EQUAL": (_COMPARED, _comparison("NOT_EQUAL")),
    **{op: (_INTS, _comparison(op)) for op in ("GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")},
    **{op: (("bool",), _logical(op)) for op in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT")},
    # LiteRT's DIV takes int32 and uint8, TFLM's int8 (cascader.reference judges int8 on TFLM);
    # Vela's U85 also runs int16, which LiteRT's reference kernel divides as uint8 (Vela's binary
    # divides the codes, not bit-exact; tests/test_u85_div judges ours, by constant divisors).
    "DIV": (("int32", "uint8", "int8"), _div),
    "CAST": (tuple(CAST_TO), _cast),
    # Vela 5.2 fails on a uint8 SELECT ("Non-passthrough operation (AndNot) could not run on NPU").
    "SELECT": (("int8", "int16", "int32"), _select("SELECT")),
    "SELECT_V2": (("int8", "int16", "int32"), _select("SELECT_V2")),
    "REDUCE_ALL": (("bool",), _reduce_bool("REDUCE_ALL")),
    "REDUCE_ANY": (("bool",), _reduce_bool("REDUCE_ANY")),
    "GATHER": (_INTS, _gather),
    # LiteRT's SCATTER_ND has no int16 kernel.
    "SCATTER_ND": (("int8", "uint8", "int32"), _scatter_nd),
}
# The stateful case: one model holds both operators (and VAR_HANDLE, CALL_ONCE).
U85_MODEL_CASES: dict[str, tuple[tuple[str, ...], Callable[[str, int], Model]]] = {
    "READ_VARIABLE": (("int8", "int16", "int32"), _resource_variable),
    "ASSIGN_VARIABLE": (("int8", "int16", "int32"), _resource_variable),
}
# Operators Vela 5.2 runs on the Ethos-U85 only: not rows of the U55/U65 tables.
U85_OPERATOR_DTYPES = {op: dtypes for op, (dtypes, _) in {**U85_OPERATOR_CASES, **U85_MODEL_CASES}.items()}


def operator_model(opcode: str, dtype: str = "int8", seed: int = 0) -> Model:
    """A single-`opcode` model with `dtype` activations (see the module docstring).

    Raises
    ------
    InvalidArgumentError
        For an operator without a case, or a type its reference kernel does not take.
    """
    every = {**OPERATOR_DTYPES, **U85_OPERATOR_DTYPES}
    if opcode not in every:
        raise InvalidArgumentError(f"no operator case for {opcode!r}; cases: {', '.join(sorted(every))}")
    dtypes = every[opcode]
    if dtype not in dtypes:
        raise InvalidArgumentError(f"{opcode} has no {dtype} case; its types: {', '.join(dtypes)}")
    models = {**CALIBRATED_CASES, **U85_MODEL_CASES}
    if opcode in models:
        return models[opcode][1](dtype, seed)
    net = _Net(opcode, dtype, seed)
    {**OPERATOR_CASES, **U85_OPERATOR_CASES}[opcode][1](net)
    return net.b.build()
