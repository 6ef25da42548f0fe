"""Which TFLite operators run on the Ethos-U NPU, as data: one `Rule` per hardware constraint.

The limits are the Ethos-U55/U65 hardware limits as Arm's Vela documents them (its
`SUPPORTED_OPS.md`, generated from `tflite_supported_operators.py` and
`tflite_model_semantic.py`); each rule names its source. A rule's `check` returns None when
the operator satisfies it, or a sentence describing the violation.

To support a new operator: give it a lowering rule (`lowering_rules`), which puts it in
`NPU_OPERATORS` (take it out of `PLANNED_OPERATORS`), then add rules here whose `ops` name it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .lower_indexed_dma import gather_axes
from .lower_lstm import lstm_variant
from .lower_resource_variables import RESOURCE_VARIABLE_OPS, variable_check
from .lower_u85_arg_max import split_refusal as u85_arg_max_refusal
from .lowered import WEIGHT_SUM_MAX
from .lower_u85_compare import (COMPARED_TYPES, COMPARISON, EQUALITY_TYPES, LOGICAL, MAX_SLICES, NPU_AXIS_MAX,
                                RESCALED_TYPES, comparison_scale, sliced_shapes)
from .lowering_rules import LOWERING_RULES
from .operator_view import ALIAS_OPS, BINARY_ELEMENTWISE_OPS, POOL_OPS, OperatorView

# Operators cascader lowers to the NPU today: those with a lowering rule, and the reshapes the
# lowering makes aliases of their input.
NPU_OPERATORS = frozenset(LOWERING_RULES) | ALIAS_OPS

# Operators the hardware can run (Vela maps them) that cascader does not lower yet: none of
# Vela 5.2's U55/U65 list is left.
PLANNED_OPERATORS: frozenset[str] = frozenset()

# Operators that move or requantize data without computing anything.
CONV_LIKE = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"})
WEIGHTED = CONV_LIKE | {"FULLY_CONNECTED"}
ACTIVATION_DTYPES = ("int8", "uint8", "int16")
# Batch > 1 is only meaningful for these (they flatten or do not look at batch).
BATCH_FREE = frozenset({"FULLY_CONNECTED", "RESHAPE", "SQUEEZE", "SOFTMAX", "BATCH_MATMUL", "GATHER", "SCATTER_ND"})
# int32 feature maps are only legal for these (Vela: supported_int32_tensor_ops), and for the
# reshapes that only rename their bytes.
INT32_OPS = frozenset({"ADD", "SUB", "MUL", "NEG", "GATHER", "SCATTER_ND"})
INT32_MAP_OPS = INT32_OPS | ALIAS_OPS  # both, as the type rules ask for every operator
# The Ethos-U85's operators on bool (TFLite's 0/1 byte) and int32 maps, with the types their
# lowerings take beyond ACTIVATION_DTYPES (Vela 5.2: tflite_supported_operators_u85).
U85_DTYPES = {"SELECT": ("bool", "int32"), "SELECT_V2": ("bool", "int32"), "CAST": ("bool", "int32"),
              "DIV": ("int32",), "REDUCE_ALL": ("bool",), "REDUCE_ANY": ("bool",)}

TENSOR_DIM_RANGE = (1, 65535)
STRIDE_RANGE = (1, 3)
DILATED_HEIGHT_MAX = 64
DILATED_AREA_MAX = 64 * 64
AVG_POOL_SAME_FILTER_MAX = 8
POOL_FILTER_HEIGHT_MAX = 256
POOL_FILTER_AREA_MAX = 256 * 256
REDUCE_OPS = frozenset({"MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"})
FUSED_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")

Check = Callable[[OperatorView], Optional[str]]


@dataclass(frozen=True)
class Rule:
    """One NPU constraint. `ops` None means every NPU operator."""

    name: str
    reason: str
    check: Check
    ops: frozenset[str] | None = None
    exempt: frozenset[str] = frozenset()
    source: str = "Vela tflite_supported_operators"

    def applies_to(self, opcode: str) -> bool:
        return (self.ops is None or opcode in self.ops) and opcode not in self.exempt


@dataclass(frozen=True)
class Verdict:
    """Where an operator runs, and if on the CPU, the rule that sent it there."""

    npu: bool
    rule: str | None = None
    reason: str | None = None

    def __str__(self) -> str:
        return "NPU" if self.npu else f"CPU: {self.reason}"


ON_NPU = Verdict(True)  # every operator the rules accept shares it (a Verdict is immutable)


# --- checks -----------------------------------------------------------------------------


# TFLite's operand counts for the operators cascader lowers: (required inputs, all inputs or
# None for any number, outputs or None for at least one). The rest are optional (bias).
OPERAND_COUNTS: dict[str, tuple[int, int | None, int | None]] = {
    "CONV_2D": (2, 3, 1), "DEPTHWISE_CONV_2D": (2, 3, 1), "FULLY_CONNECTED": (2, 3, 1),
    "AVERAGE_POOL_2D": (1, 1, 1), "MAX_POOL_2D": (1, 1, 1), "ADD": (2, 2, 1), "SUB": (2, 2, 1), "MUL": (2, 2, 1),
    "RESHAPE": (1, 2, 1), "SQUEEZE": (1, 1, 1), "CONCATENATION": (1, None, 1), "PAD": (2, 2, 1),
    "RELU": (1, 1, 1), "RELU6": (1, 1, 1), "RELU_N1_TO_1": (1, 1, 1), "RELU_0_TO_1": (1, 1, 1),
    "QUANTIZE": (1, 1, 1), "SOFTMAX": (1, 1, 1), "LOGISTIC": (1, 1, 1), "TANH": (1, 1, 1), "EXP": (1, 1, 1),
    "HARD_SWISH": (1, 1, 1), "LEAKY_RELU": (1, 1, 1), "PRELU": (2, 2, 1), "STRIDED_SLICE": (4, 4, 1),
    "SLICE": (3, 3, 1), "SPLIT": (2, 2, None), "SPLIT_V": (3, 3, None), "UNPACK": (1, 1, None),
    "EXPAND_DIMS": (2, 2, 1), "TRANSPOSE": (2, 2, 1), "RESIZE_NEAREST_NEIGHBOR": (2, 2, 1), "MEAN": (2, 2, 1),
    "RESIZE_BILINEAR": (2, 2, 1), "PACK": (1, None, 1), "MINIMUM": (2, 2, 1), "MAXIMUM": (2, 2, 1),
    "ABS": (1, 1, 1), "TRANSPOSE_CONV": (3, 4, 1),
    "RSQRT": (1, 1, 1), "MIRROR_PAD": (2, 2, 1), "SQUARED_DIFFERENCE": (2, 2, 1), "ARG_MAX": (2, 2, 1),
    "PADV2": (2, 3, 1), "TILE": (2, 2, 1), "REVERSE_V2": (2, 2, 1),
    "ELU": (1, 1, 1), "GELU": (1, 1, 1), "LOG": (1, 1, 1), "NEG": (1, 1, 1),
    "SUM": (2, 2, 1), "REDUCE_MAX": (2, 2, 1), "REDUCE_MIN": (2, 2, 1),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (1, 24, 1),  # the optional inputs are -1 (lstm_variant checks them)
    "BATCH_MATMUL": (2, 2, 1),
    "SELECT": (3, 3, 1), "SELECT_V2": (3, 3, 1), "CAST": (1, 1, 1), "DIV": (2, 2, 1),
    "REDUCE_ALL": (2, 2, 1), "REDUCE_ANY": (2, 2, 1),
    **{op: (2, 2, 1) for op in (*COMPARISON, "LOGICAL_AND", "LOGICAL_OR")}, "LOGICAL_NOT": (1, 1, 1),
    "GATHER": (2, 2, 1), "SCATTER_ND": (3, 3, 1),
}


def operand_count(v: OperatorView) -> str | None:
    """What is wrong with an operator's operand lists, or None: a malformed model, not a
    limit of the NPU (the compiler refuses it as a ModelError)."""
    required, most, outputs = OPERAND_COUNTS.get(v.opcode, (0, None, None))
    inputs, outs = v.op.inputs, v.op.outputs
    if len(inputs) < required or (most is not None and len(inputs) > most):
        expect = f"{required}" if most == required else f"{required} to {most or 'any number of'}"
        return f"{v.opcode} takes {expect} inputs, this one has {len(inputs)}"
    if any(t < 0 for t in inputs[:required]):
        return f"{v.opcode} input {next(i for i, t in enumerate(inputs) if t < 0)} is missing"
    if (outputs is not None and len(outs) != outputs) or not outs or any(t < 0 for t in outs):
        return f"{v.opcode} has outputs {list(outs)}" + ("" if outputs is None else f"; it produces {outputs}")
    return None


def _dtypes(v: OperatorView) -> str | None:
    if v.opcode == "ARG_MAX":  # 8-bit values in, indices out
        i, o = v.ifm, v.ofm
        if i is not None and o is not None and (i.dtype not in ("int8", "uint8") or o.dtype not in ("int32", "int64")):
            return f"ARG_MAX takes int8 or uint8 to int32 or int64, not {i.dtype} to {o.dtype}"
        return None
    allowed = ACTIVATION_DTYPES + (("int32",) if v.opcode in INT32_MAP_OPS else ()) + U85_DTYPES.get(v.opcode, ())
    bad = [f"{t.name!r} is {t.dtype}" for t in v.activation_tensors if t.dtype not in allowed]
    return "; ".join(bad) or None


def _quantized(v: OperatorView) -> str | None:
    tensors = v.activation_tensors + ([v.weights] if v.weights is not None else [])
    if v.opcode == "ARG_MAX":
        tensors = [v.ifm] if v.ifm is not None else []  # its output is an index, not quantized
    if v.opcode in INT32_MAP_OPS or v.opcode in U85_DTYPES:
        # TFLite's int32 arithmetic ignores quantization, a reshape only renames bytes, and a
        # bool is a truth value.
        tensors = [t for t in tensors if t.dtype not in ("int32", "bool")]
    for t in tensors:
        q = t.quantization
        if q is None or q.scale.size == 0:
            return f"{t.name!r} has no quantization parameters"
        # Two reductions (one element read directly; the ufuncs' own, without ndarray.min's
        # Python wrapper): a NaN fails `lo > 0` as zero and negatives do.
        s = q.scale
        lo, hi = (s[0], s[0]) if s.size == 1 else (np.minimum.reduce(s, axis=None), np.maximum.reduce(s, axis=None))
        if not (lo > 0 and hi < math.inf):
            return f"{t.name!r} has a non-finite or non-positive scale"
    return None


def _rank(v: OperatorView) -> str | None:
    bad = [f"{t.name!r} is {len(t.shape)}-D" for t in v.activation_tensors if len(t.shape) > 4]
    return "; ".join(bad) or None


def _dims(v: OperatorView) -> str | None:
    lo, hi = TENSOR_DIM_RANGE
    bad = [f"{t.name!r} has shape {list(t.shape)}" for t in v.activation_tensors
           if t.shape and not lo <= min(t.shape) <= max(t.shape) <= hi]
    return "; ".join(bad) or None


def _static(v: OperatorView) -> str | None:
    # Converters mark the batch as -1 in the signature while `shape` holds the batch the
    # interpreter allocates (1), so only a dynamic non-batch dimension is really dynamic.
    for t in v.activation_tensors:
        if t.shape_signature is not None and any(d < 0 for d in t.shape_signature[1:]):
            return f"{t.name!r} has a dynamic shape {list(t.shape_signature)}"
    return None


def _batch(v: OperatorView) -> str | None:
    for t in (v.ifm, v.ifm2):
        if t is not None and len(t.shape) == 4 and t.shape[0] != 1:
            return f"{t.name!r} has batch {t.shape[0]}"
    return None


def _per_axis(v: OperatorView) -> str | None:
    for t in v.activation_tensors:
        if t.quantization is not None and t.quantization.per_channel:
            return f"{t.name!r} is quantized per axis"
    return None


def _fused_activation(v: OperatorView) -> str | None:
    act = v.fused_activation
    return None if act in FUSED_ACTIVATIONS else f"fused activation is {act}"


def _fused_activation_dtype(v: OperatorView) -> str | None:
    if v.fused_activation != "NONE" and v.ofm is not None and v.ofm.dtype not in ACTIVATION_DTYPES:
        return f"fused {v.fused_activation} on a {v.ofm.dtype} output"
    return None


def _stride(v: OperatorView) -> str | None:
    k, ofm = v.kernel, v.ofm
    if k is None or ofm is None or len(ofm.shape) != 4:
        return None
    lo, hi = STRIDE_RANGE
    # A stride only matters along an axis with more than one output element.
    h_ok = ofm.shape[1] == 1 or lo <= k.stride_h <= hi
    w_ok = ofm.shape[2] == 1 or lo <= k.stride_w <= hi
    return None if h_ok and w_ok else f"stride is {k.stride_w}x{k.stride_h} (WxH)"


def _dilated_height(v: OperatorView) -> str | None:
    k = v.kernel
    if k is None or k.dilated_height <= DILATED_HEIGHT_MAX:
        return None
    return f"dilated kernel height is {k.dilated_height}"


def _dilated_area(v: OperatorView) -> str | None:
    k = v.kernel
    if k is None or k.dilated_height * k.dilated_width <= DILATED_AREA_MAX:
        return None
    return f"dilated kernel area is {k.dilated_height * k.dilated_width}"


def _weights_8bit(v: OperatorView) -> str | None:
    w = v.weights
    if w is None:
        return "the operator has no weight tensor"
    return None if w.dtype in ("int8", "uint8") else f"weights {w.name!r} are {w.dtype}"


def _weights_constant(v: OperatorView) -> str | None:
    w = v.weights
    return None if w is not None and w.is_constant else "weights are computed at run time"


def _weights_sum(v: OperatorView) -> str | None:
    w = v.weights
    if w is None or w.data is None or w.quantization is None or len(w.shape) != 4:
        return None
    # Sum over everything except the output-channel axis (0 for conv, 3 for depthwise).
    out_axis = 3 if v.opcode == "DEPTHWISE_CONV_2D" else 0
    zero_points = w.quantization.zero_point
    if zero_points.size not in (0, 1, w.shape[out_axis]):
        return f"weights have {zero_points.size} zero points for {w.shape[out_axis]} output channels"
    # |w - zp| <= 255 for 8-bit weights: most layers are too small to reach the limit at all,
    # and need no pass over their weights.
    if w.dtype in ("int8", "uint8") and 255 * (w.data.size // max(w.shape[out_axis], 1)) <= WEIGHT_SUM_MAX:
        return None
    shape = [1, 1, 1, 1]
    shape[out_axis] = zero_points.size if zero_points.size > 1 else 1
    offsets = zero_points.reshape(shape) if zero_points.size else 0
    # int32 differences (|w - zp| <= 510), int64 sums.
    sums = np.abs(w.data.astype(np.int32) - np.asarray(offsets, np.int32)).sum(
        axis=tuple(a for a in range(4) if a != out_axis), dtype=np.int64)
    worst = int(sums.max()) if sums.size else 0
    return None if worst <= WEIGHT_SUM_MAX else f"the largest per-channel sum of |weights| is {worst}"


def _fc_weights(v: OperatorView) -> str | None:
    w, ifm = v.weights, v.ifm
    if w is None or ifm is None:
        return None
    if len(w.shape) != 2:
        return f"weights {w.name!r} have shape {list(w.shape)}"
    if w.shape[1] == 0 or math.prod(ifm.shape) % w.shape[1]:
        return f"input of {math.prod(ifm.shape)} elements is not rows of the weights' depth {w.shape[1]}"
    return None


def _bias(v: OperatorView) -> str | None:
    b = v.bias
    if b is None:
        return None
    if len(b.shape) != 1:
        return f"bias {b.name!r} has shape {list(b.shape)}, not 1-D"
    if b.dtype not in ("int32", "int64"):
        return f"bias {b.name!r} is {b.dtype}"
    if not b.is_constant:
        return f"bias {b.name!r} is computed at run time"
    if b.dtype == "int64" and b.data.size and int(np.abs(b.data).max()) >= 1 << 39:
        return f"bias {b.name!r} has values beyond 40 bits"
    return None


def _depth_multiplier(v: OperatorView) -> str | None:
    m = v.options.get("depth_multiplier", 1)
    if m <= 1 or v.ifm is None or v.ofm is None:
        return None
    if v.ifm.shape[-1] == 1 and v.ofm.shape[-1] == m:
        return None
    return f"depth multiplier {m} with {v.ifm.shape[-1]} input channels"


def _tconv_stride(v: OperatorView) -> str | None:
    k, ifm = v.kernel, v.ifm
    if k is None or ifm is None or len(ifm.shape) != 4:
        return None
    s = (k.stride_w, k.stride_h)
    if s in ((1, 1), (2, 2)) or (s == (2, 1) and ifm.shape[1] == 1 and k.height == 1):
        return None
    return f"stride {k.stride_w}x{k.stride_h} (WxH), input height {ifm.shape[1]}, kernel height {k.height}"


def _tconv_output_shape(v: OperatorView) -> str | None:
    k, ifm, ofm = v.kernel, v.ifm, v.ofm
    if k is None or ifm is None or ofm is None or len(ifm.shape) != 4 or len(ofm.shape) != 4:
        return None
    if v.options.get("padding") == "SAME":
        expected = (ifm.shape[1] * k.stride_h, ifm.shape[2] * k.stride_w)
    else:
        expected = (ifm.shape[1] * k.stride_h + max(k.height - k.stride_h, 0),
                    ifm.shape[2] * k.stride_w + max(k.width - k.stride_w, 0))
    if tuple(ofm.shape[1:3]) == expected:
        return None
    return f"{v.options.get('padding')}: input {list(ifm.shape)}, output {list(ofm.shape)}, expected {list(expected)}"


def _pool_filter(v: OperatorView) -> str | None:
    k = v.kernel
    if k is None:
        return None
    same = v.options.get("padding") == "SAME"
    if v.opcode == "AVERAGE_POOL_2D" and same:
        # The hardware pads average pooling itself only for small kernels.
        ok = k.height <= AVG_POOL_SAME_FILTER_MAX and (k.width <= AVG_POOL_SAME_FILTER_MAX or k.width == k.stride_w)
        return None if ok else f"SAME-padded average pool of {k.width}x{k.height} (WxH)"
    if k.height > POOL_FILTER_HEIGHT_MAX or k.height * k.width > POOL_FILTER_AREA_MAX:
        return f"pool filter is {k.width}x{k.height} (WxH)"
    return None


def _broadcast(v: OperatorView) -> str | None:
    a, b, o = v.ifm, v.ifm2, v.ofm
    if a is None or b is None or o is None:
        return None
    n = min(len(a.shape), len(b.shape))
    for i, j, k in zip(a.shape[len(a.shape) - n :], b.shape[len(b.shape) - n :], o.shape[len(o.shape) - n :]):
        if not (i == j or i == 1 or j == 1) or k != max(i, j):
            return f"cannot broadcast {list(a.shape)} with {list(b.shape)} to {list(o.shape)}"
    return None


def _either_shape(v: OperatorView) -> str | None:
    a, b, o = v.ifm, v.ifm2, v.ofm
    if a is None or b is None or o is None:
        return None

    def squeezed(shape) -> tuple[int, ...]:  # leading 1s do not change the NPU's H x W x C view
        shape = tuple(int(d) for d in shape)
        while shape and shape[0] == 1:
            shape = shape[1:]
        return shape

    if squeezed(o.shape) in (squeezed(a.shape), squeezed(b.shape)):
        return None
    # An 8-bit operand with one channel and the output's height and width is first expanded
    # to the output's channels (`lower_elementwise`); the other then broadcasts.
    if v.opcode in ("ADD", "SUB", "MUL") and any(
            t.dtype in ("int8", "uint8") and len(t.shape) >= 2 and int(t.shape[-1]) == 1
            and tuple(int(d) for d in t.shape[:-1])[-2:] == tuple(int(d) for d in o.shape[:-1])[-2:] for t in (a, b)):
        return None
    return f"inputs {list(a.shape)} and {list(b.shape)}, output {list(o.shape)}"


def _same_types(v: OperatorView) -> str | None:
    types = [t.dtype for t in (*v.inputs, v.ofm) if t is not None]
    return None if len(set(types)) == 1 else " -> ".join(types)


def _pad_tensor(v: OperatorView) -> str | None:
    if len(v.inputs) < 2 or v.inputs[1] is None:
        return f"{v.opcode} has no paddings tensor"
    p = v.inputs[1]
    if not p.is_constant:
        return "paddings are computed at run time"
    # PAD and PADV2 take any rank up to 4 (one pair per input axis), MIRROR_PAD 3 or 4.
    ranks = (3, 4) if v.opcode == "MIRROR_PAD" else (1, 2, 3, 4)
    rank = len(v.ifm.shape) if v.ifm is not None else 0
    if p.dtype not in ("int32", "int64") or list(p.shape) not in ([r, 2] for r in ranks) or p.shape[0] != rank:
        return f"paddings tensor is {p.dtype}{list(p.shape)} for a {rank}-D input"
    if (np.asarray(p.data) < 0).any():
        return f"paddings {np.asarray(p.data).tolist()} are negative"
    if p.shape[0] == 4 and int(p.data[0].sum()) != 0:
        return f"{v.opcode} pads the batch dimension"
    return None


def _pad_value(v: OperatorView) -> str | None:
    value = v.inputs[2] if len(v.inputs) > 2 else None
    if value is None:
        return None  # the output's zero point
    if not value.is_constant:
        return "the pad value is computed at run time"
    o = v.ofm
    if value.dtype != (o.dtype if o is not None else None) or np.asarray(value.data).size != 1:
        return f"the pad value is {value.dtype}{list(value.shape)}"
    # TFLite's kernel stops on a pad value quantized otherwise than the output.
    q, oq = value.quantization, o.quantization if o is not None else None
    if q is None or oq is None or q.scale.size != 1 or oq.scale.size != 1 or \
            (float(q.scale[0]), int(q.zero_point[0])) != (float(oq.scale[0]), int(oq.zero_point[0])):
        return "the pad value is not quantized as the output"
    return None


def _constant_vector(v: OperatorView, what: str, dtypes: tuple[str, ...]) -> tuple[np.ndarray | None, str | None]:
    """Input 1 of `v` as a constant 1-D vector of one of `dtypes`, or the reason it is not."""
    t = v.inputs[1] if len(v.inputs) > 1 else None
    if t is None or not t.is_constant:
        return None, f"the {what} are computed at run time"
    if t.dtype not in dtypes or len(t.shape) != 1:
        return None, f"the {what} tensor is {t.dtype}{list(t.shape)}"
    return np.asarray(t.data).astype(np.int64).reshape(-1), None


def _tile_multiples(v: OperatorView) -> str | None:
    multiples, reason = _constant_vector(v, "multiples", ("int32", "int64"))
    if reason is not None or v.ifm is None or v.ofm is None:
        return reason
    i, o = list(v.ifm.shape), list(v.ofm.shape)
    if len(multiples) != len(i) or [d * m for d, m in zip(i, multiples)] != o:
        return f"input {i} tiled by {multiples.tolist()} is not the output {o}"
    if len(i) == 4 and multiples[0] != 1:
        return "TILE tiles the batch"
    return None


def _gather_axis(v: OperatorView) -> str | None:
    axis, batch_dims = gather_axes(v)
    return None if axis == batch_dims else f"axis {axis}, batch_dims {batch_dims}"


def _scatter_indices(v: OperatorView) -> str | None:
    indices, shape = v.inputs[0], v.inputs[2]
    if not (indices.is_constant and shape.is_constant):
        return "the indices or the shape are computed at run time"
    if indices.shape[-1] != 1:
        return f"indices of shape {list(indices.shape)}"
    values = np.asarray(indices.data).reshape(-1)
    return None if len(np.unique(values)) == values.size else "repeated indices"


def _reverse_axes(v: OperatorView) -> str | None:
    axes, reason = _constant_vector(v, "axes", ("int32",))
    if reason is not None or v.ifm is None or v.ofm is None:
        return reason
    rank = len(v.ifm.shape)
    if list(v.ifm.shape) != list(v.ofm.shape):
        return f"input {list(v.ifm.shape)}, output {list(v.ofm.shape)}"
    if not len(axes) or any(not -rank <= a < rank for a in axes):
        return f"axes {axes.tolist()} of a {rank}-D input"
    # TFLite's kernel stops on repeated or non-contiguous axes.
    sorted_axes = sorted(int(a) % rank for a in axes)
    if sorted_axes != list(range(sorted_axes[0], sorted_axes[0] + len(sorted_axes))):
        return f"axes {axes.tolist()} are not distinct and contiguous"
    return None


def _mirror_pad_amounts(v: OperatorView) -> str | None:
    p, ifm = v.inputs[1], v.ifm
    if p is None or ifm is None or p.data is None:
        return None
    pads = np.asarray(p.data).reshape(-1, 2)
    if pads[-1].any():
        return f"the channels are padded by {pads[-1].tolist()}"
    # REFLECT does not repeat the edge, so it mirrors at most size - 1 elements.
    reach = 1 if int(v.options.get("mode", 0)) == 0 else 0
    for axis, (before, after) in enumerate(pads.tolist()):
        if max(before, after) > ifm.shape[axis] - reach:
            return f"axis {axis} of {ifm.shape[axis]} is padded by {[before, after]}"
    return None


def _shape_constant(v: OperatorView) -> str | None:
    shape = v.inputs[1] if len(v.inputs) > 1 else None
    return None if shape is None or shape.is_constant else "the new shape is computed at run time"


def _quantize_integer(v: OperatorView) -> str | None:
    if v.ifm is not None and v.ifm.dtype not in ACTIVATION_DTYPES:
        return f"QUANTIZE from {v.ifm.dtype} (float to integer conversion runs on the CPU)"
    return None


def _same_8bit_types(v: OperatorView) -> str | None:
    i, o = v.ifm, v.ofm
    if i is None or o is None:
        return None
    if i.dtype not in ("int8", "uint8") or o.dtype != i.dtype:
        return f"{i.dtype} -> {o.dtype}"
    return None


def _softmax_types(v: OperatorView) -> str | None:
    i, o = v.ifm, v.ofm
    if i is not None and o is not None and o.dtype == "int16" and i.dtype in ("int8", "uint8", "int16"):
        return None  # 8-bit in, int16 out: TFLite's Softmax<In, int16_t> (lower_softmax)
    return _same_8bit_types(v)


def _activation_types(v: OperatorView) -> str | None:
    i, o = v.ifm, v.ofm
    if i is not None and o is not None and v.opcode in ("LOGISTIC", "TANH", "LEAKY_RELU", "EXP", "PRELU") \
            and i.dtype == o.dtype == "int16":
        return None  # the NPU's own int16 functions; LRELU or the sign select; EXP's 16-bit table
    return _same_8bit_types(v)


# The types Vela 5.2 runs these in on Ethos-U55/U65, the same in and out (its ELU, GELU and LOG
# constraints; NEG has only the generic ones).
UNARY_TYPES = {"ELU": ("int8",), "GELU": ("int8", "uint8"), "LOG": ("int8", "int16"),
               "NEG": ("int8", "uint8", "int16", "int32")}


def _unary_types(v: OperatorView) -> str | None:
    i, o = v.ifm, v.ofm
    if i is None or o is None:
        return None
    if i.dtype != o.dtype or i.dtype not in UNARY_TYPES[v.opcode]:
        return f"{i.dtype} -> {o.dtype}"
    if v.opcode == "LOG" and i.dtype == "int16" and any(
            t.quantization is not None and t.quantization.zero_point.any() for t in (i, o)):
        return "int16 with a non-zero zero point (TFLite's kernel refuses it)"
    return None


def _int8_in_out(v: OperatorView) -> str | None:
    i, o = v.ifm, v.ofm
    if i is None or o is None or i.dtype == o.dtype == "int8":
        return None
    return f"{i.dtype} -> {o.dtype}"


def _all_int8(v: OperatorView) -> str | None:
    types = [t.dtype for t in (*v.inputs, v.ofm) if t is not None]
    return None if all(t == "int8" for t in types) else f"{' and '.join(types[:-1])} -> {types[-1]}"


def _arg_max(v: OperatorView) -> str | None:
    i, axis = v.ifm, v.inputs[1] if len(v.inputs) > 1 else None
    if i is None or axis is None or not axis.is_constant or np.asarray(axis.data).size != 1:
        return "the axis must be one constant"
    rank = len(i.shape)
    if int(np.asarray(axis.data).reshape(-1)[0]) % max(rank, 1) != rank - 1:
        return "the axis is not the last one"
    if rank and i.shape[-1] > 127:
        return f"{i.shape[-1]} channels"
    return None


def _reduce_axes_constant(v: OperatorView) -> str | None:
    axes = v.inputs[1] if len(v.inputs) > 1 else None
    return None if axes is not None and axes.is_constant else "the axes are computed at run time"


def _same_quantization(v: OperatorView) -> str | None:
    i, o = v.ifm, v.ofm
    if i is None or o is None or i.quantization is None or o.quantization is None:
        return None
    qi, qo = i.quantization, o.quantization
    if (i.dtype, float(qi.scale[0]), int(qi.zero_point[0])) == (o.dtype, float(qo.scale[0]), int(qo.zero_point[0])):
        return None
    return f"{i.dtype} scale {float(qi.scale[0]):g} zero point {int(qi.zero_point[0])} -> {o.dtype} scale " \
           f"{float(qo.scale[0]):g} zero point {int(qo.zero_point[0])}"


def _softmax_beta(v: OperatorView) -> str | None:
    beta = float(v.options.get("beta", 1.0))
    return None if beta > 0 else f"beta is {beta}"


def _matching_shapes(v: OperatorView) -> str | None:
    i, o = v.ifm, v.ofm
    if i is None or o is None or list(i.shape) == list(o.shape):
        return None
    return f"input {list(i.shape)}, output {list(o.shape)}"


def _concat_axis(v: OperatorView) -> str | None:
    o = v.ofm
    if o is None:
        return None
    axis = v.options.get("axis", 0)
    rank = len(o.shape)
    if not -rank <= axis < rank:
        return f"axis {axis} is out of range for a {rank}-D output"
    axis %= rank
    for t in v.inputs:
        if t is None or len(t.shape) != rank:
            return "inputs and output differ in rank"
        if any(t.shape[i] != o.shape[i] for i in range(rank) if i != axis):
            return f"input shape {list(t.shape)} does not match output {list(o.shape)} off the concat axis"
    return None


# The Ethos-U85's comparisons and logical operators take bool and int32 maps (lower_u85_compare).
U85_COMPARE_OPS = frozenset(COMPARISON) | frozenset(LOGICAL)


def _comparison_operands(v: OperatorView) -> str | None:
    """TFLite's types for a comparison (one operand type, bool out) or a logical operator (bool),
    and the scales its int8/uint8 kernel takes (QuantizeMultiplierSmallerThanOneExp: in (0, 1))."""
    ins = [v.graph.tensors[t] for t in v.op.inputs]
    out = v.ofm
    if v.opcode in LOGICAL:
        allowed: tuple[str, ...] = ("bool",)
    else:
        allowed = EQUALITY_TYPES if v.opcode in ("EQUAL", "NOT_EQUAL") else COMPARED_TYPES
    if ins[0].dtype not in allowed or any(t.dtype != ins[0].dtype for t in ins) or out.dtype != "bool":
        return f"{', '.join(t.dtype for t in ins)} -> {out.dtype}; {v.opcode} takes one of {', '.join(allowed)} to bool"
    if ins[0].dtype in RESCALED_TYPES:
        for t in ins:
            q = t.quantization
            if q is None or q.scale.size != 1 or comparison_scale(float(q.scale[0])) is None:
                return (f"{t.name!r} needs one scale in (0, 1) (TFLite's kernel rescales each operand by its scale "
                        "as a multiplier below one)")
    return None


def _comparison_shapes(v: OperatorView) -> str | None:
    ins = [v.graph.tensors[t] for t in v.op.inputs]
    if sliced_shapes(tuple(v.ofm.shape), [tuple(t.shape) for t in ins]) is None:
        return f"{' and '.join(str(list(t.shape)) for t in ins)} to {list(v.ofm.shape)}"
    return None


# --- the rules --------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    # First: every other rule reads the operands this one checks.
    Rule("operand_count", "the operator's inputs and outputs are not TFLite's for it", operand_count,
         source="TFLite operator definitions"),
    # Before the generic type rule, so a float QUANTIZE gets the specific reason.
    Rule("quantize_integer", "QUANTIZE on the NPU rescales between integer types only", _quantize_integer,
         ops=frozenset({"QUANTIZE"})),
    Rule("data_type", f"feature maps must be {', '.join(ACTIVATION_DTYPES)} (int32 only for ADD/SUB/MUL)", _dtypes,
         exempt=U85_COMPARE_OPS),
    Rule("quantized", "feature maps and weights must have finite, positive quantization scales", _quantized,
         exempt=U85_COMPARE_OPS, source="Vela tflite_model_semantic"),
    Rule("comparison_operands", "comparisons take one operand type to bool (EQUAL/NOT_EQUAL bool too, int8/uint8 "
         "with scales below one), logical operators bool", _comparison_operands, ops=U85_COMPARE_OPS,
         source="TFLite comparisons.cc, logical.cc"),
    Rule("comparison_shapes", "a comparison's or logical operator's axes must fold into three runs along which each "
         f"operand has the output's extent or 1, each at most {NPU_AXIS_MAX}, in at most {MAX_SLICES} operations "
         "over the leading axes",
         _comparison_shapes, ops=U85_COMPARE_OPS, source="cascader"),
    # BATCH_MATMUL folds its batch axes (TFLite allows 5-D operands, and Vela takes them).
    Rule("rank", "feature maps must be at most 4-D", _rank, exempt=frozenset({"BATCH_MATMUL"}) | U85_COMPARE_OPS,
         source="Vela tflite_model_semantic"),
    Rule("dimension_range", f"every tensor dimension must be in [{TENSOR_DIM_RANGE[0]}, {TENSOR_DIM_RANGE[1]}]", _dims),
    Rule("static_shape", "feature maps must have static shapes", _static, source="Vela tflite_model_semantic"),
    Rule("batch_size", "the IFM batch size must be 1", _batch, exempt=BATCH_FREE | U85_COMPARE_OPS),
    Rule("per_axis_quantization", "per-axis quantization is only supported on weights of conv and fully connected",
         _per_axis),
    # The LSTM's option names its cell activation, which TFLite's integer kernel takes as tanh.
    Rule("fused_activation", f"a fused activation must be one of {', '.join(FUSED_ACTIVATIONS)}", _fused_activation,
         exempt=frozenset({"UNIDIRECTIONAL_SEQUENCE_LSTM"})),
    Rule("fused_activation_type", "a fused activation needs an 8- or 16-bit output", _fused_activation_dtype),
    Rule("stride_range", f"strides must be in [{STRIDE_RANGE[0]}, {STRIDE_RANGE[1]}]", _stride,
         ops=CONV_LIKE | POOL_OPS),
    Rule("dilated_kernel_height", f"the dilated kernel height must be at most {DILATED_HEIGHT_MAX}", _dilated_height,
         ops=CONV_LIKE),
    Rule("dilated_kernel_area", f"the dilated kernel area must be at most {DILATED_AREA_MAX}", _dilated_area,
         ops=CONV_LIKE),
    Rule("weights_8bit", "weights must be 8-bit", _weights_8bit, ops=WEIGHTED),
    Rule("weights_constant", "weights must be constant", _weights_constant, ops=WEIGHTED),
    Rule("weights_sum", f"per output channel, the sum of |weights| must be at most {WEIGHT_SUM_MAX}", _weights_sum,
         ops=CONV_LIKE),
    Rule("fc_weights", "FULLY_CONNECTED takes 2-D weights whose depth divides its input", _fc_weights,
         ops=frozenset({"FULLY_CONNECTED"}), source="TFLite fully_connected kernel"),
    Rule("bias", "bias must be a constant 1-D int32, or int64 within 40 bits", _bias, ops=WEIGHTED),
    Rule("depth_multiplier", "a depth multiplier > 1 needs 1 input channel and as many output channels as the multiplier",
         _depth_multiplier, ops=frozenset({"DEPTHWISE_CONV_2D"})),
    Rule("tconv_stride", "TRANSPOSE_CONV strides must be 1x1 or 2x2, or 2x1 (WxH) with input and kernel height 1",
         _tconv_stride, ops=frozenset({"TRANSPOSE_CONV"})),
    Rule("tconv_output_shape", "TRANSPOSE_CONV output: input x stride (SAME), plus max(kernel - stride, 0) (VALID)",
         _tconv_output_shape, ops=frozenset({"TRANSPOSE_CONV"})),
    Rule("pool_filter", "pool kernels: SAME-padded average pool up to 8x8, otherwise height <= 256 and area <= 65536",
         _pool_filter, ops=POOL_OPS),
    Rule("broadcast", "elementwise broadcasting only along dimensions of size 1", _broadcast,
         ops=BINARY_ELEMENTWISE_OPS),
    Rule("matching_either_shape", "one elementwise input must have the output's shape (the NPU broadcasts only "
         "its second operand)", _either_shape, ops=BINARY_ELEMENTWISE_OPS, exempt=U85_COMPARE_OPS,
         source="Vela tflite_model_semantic"),
    Rule("matching_types", "MINIMUM, MAXIMUM and ABS take and give one data type", _same_types,
         ops=frozenset({"MINIMUM", "MAXIMUM", "ABS"}), source="Vela tflite_model_semantic"),
    Rule("pad_tensor", "PAD and PADV2 need constant int32/int64 paddings, one non-negative pair per axis of the "
         "input (MIRROR_PAD: a 3-D or 4-D input), that leave the batch alone", _pad_tensor,
         ops=frozenset({"PAD", "PADV2", "MIRROR_PAD"})),
    Rule("pad_value", "PADV2's pad value must be one constant of the output's type and quantization", _pad_value,
         ops=frozenset({"PADV2"}), source="Vela tflite_supported_operators; TFLite pad.cc"),
    Rule("tile_multiples", "TILE needs constant int32/int64 multiples, one per axis, that leave the batch alone",
         _tile_multiples, ops=frozenset({"TILE"}), source="Vela tflite_supported_operators; cascader"),
    Rule("reverse_axes", "REVERSE_V2 needs constant int32 axes, distinct and contiguous", _reverse_axes,
         ops=frozenset({"REVERSE_V2"}), source="TFLite reverse.cc"),
    Rule("gather_axis", "GATHER's axis must equal its batch_dims", _gather_axis, ops=frozenset({"GATHER"}),
         source="Vela tflite_supported_operators_u85"),
    Rule("scatter_indices", "SCATTER_ND needs constant, unique indices of depth 1 and a constant shape",
         _scatter_indices, ops=frozenset({"SCATTER_ND"}), source="Vela tflite_supported_operators_u85"),
    Rule("mirror_pad_amounts", "MIRROR_PAD pads H and W only, each side by at most the input's size (less one "
         "for REFLECT)", _mirror_pad_amounts, ops=frozenset({"MIRROR_PAD"})),
    Rule("reshape_shape_constant", "the target shape of a reshape must be constant", _shape_constant,
         ops=frozenset({"RESHAPE"})),
    Rule("softmax_types", "SOFTMAX is lowered for int8, uint8 or int16 in and out, or 8-bit in and int16 out", _softmax_types,
         ops=frozenset({"SOFTMAX"}), source="cascader"),
    Rule("activation_types", "LOGISTIC, TANH, EXP, HARD_SWISH, LEAKY_RELU and PRELU are lowered for int8 or uint8 "
         "in and out, all but HARD_SWISH for int16 too (TFLite's HARD_SWISH takes no int16)", _activation_types,
         ops=frozenset({"LOGISTIC", "TANH", "EXP", "HARD_SWISH", "LEAKY_RELU", "PRELU"}),
         source="cascader"),
    Rule("unary_types", "ELU takes int8, GELU int8 or uint8, LOG int8 or int16 (zero points 0), NEG int8, uint8, "
         "int16 or int32, the same type in and out", _unary_types, ops=frozenset(UNARY_TYPES),
         source="Vela tflite_supported_operators"),
    Rule("rsqrt_int8", "RSQRT takes int8 in and out (int16 is TFLite's interpolated table)", _int8_in_out,
         ops=frozenset({"RSQRT"})),
    Rule("batch_matmul_int8", "BATCH_MATMUL takes int8 operands and output (Vela: IFM precision must be Int8)",
         _all_int8, ops=frozenset({"BATCH_MATMUL"})),
    Rule("squared_difference_int8", "SQUARED_DIFFERENCE is lowered for int8 inputs and output (int16 is not yet)",
         _all_int8, ops=frozenset({"SQUARED_DIFFERENCE"}), source="cascader"),
    Rule("arg_max", f"ARG_MAX over the last axis (the channels) of at most {127} channels", _arg_max,
         ops=frozenset({"ARG_MAX"}), source="Vela tflite_supported_operators"),
    Rule("reduce_axes_constant", "the axes of a reduction must be constant", _reduce_axes_constant,
         ops=REDUCE_OPS),
    Rule("reduce_min_max_quantization", "REDUCE_MAX and REDUCE_MIN keep the type and quantization (TFLite's kernel "
         "refuses any other output)", _same_quantization, ops=frozenset({"REDUCE_MAX", "REDUCE_MIN"}),
         source="TFLite reduce kernel"),
    Rule("softmax_beta", "SOFTMAX needs a positive beta", _softmax_beta, ops=frozenset({"SOFTMAX"}),
         source="Vela tflite_model_semantic"),
    Rule("matching_shapes", "input and output shapes must match", _matching_shapes,
         ops=frozenset({"SOFTMAX", *UNARY_TYPES}),
         source="Vela tflite_model_semantic"),
    Rule("lstm_variant", "the LSTM must have every gate (no CIFG), no peephole, projection or layer normalisation, "
         "2-D recurrent weights, variable states, 3-D int8 or int16 input and output", lstm_variant,
         ops=frozenset({"UNIDIRECTIONAL_SEQUENCE_LSTM"}), source="Vela tflite_supported_operators, tflite_model_semantic"),
    Rule("concat_shapes", "concatenation inputs must match the output except along the axis", _concat_axis,
         ops=frozenset({"CONCATENATION"}), source="Vela tflite_model_semantic"),
)


# Operators Vela 5.2 runs on the Ethos-U85's NPU and on the CPU of the U55 and U65: the U85's
# comparisons, bitwise modes, integer DIV, indexed DMAs and resource variables have no U55/U65
# counterpart (cascader.operator_zoo.U85_OPERATOR_DTYPES holds their models). Their lowering
# rules are in LOWERING_RULES like any other's; `check_operator` sends them to the CPU on the
# other targets.
U85_ONLY_OPERATORS = frozenset({
    "EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
    "LOGICAL_NOT", "DIV", "CAST", "SELECT", "SELECT_V2", "REDUCE_ALL", "REDUCE_ANY", "GATHER", "SCATTER_ND",
    "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
})


def _u85_arg_max(v: OperatorView) -> str | None:
    i, axis = v.ifm, v.inputs[1] if len(v.inputs) > 1 else None
    if i is None or axis is None or not axis.is_constant or np.asarray(axis.data).size != 1:
        return "the axis must be one constant"
    shape = tuple(i.shape) or (1,)
    return u85_arg_max_refusal(shape, int(np.asarray(axis.data).reshape(-1)[0]) % len(shape))


# Vela 5.2 copies int32 maps on the Ethos-U85 (a pooling that moves 32-bit values); on the
# U55/U65 it leaves these operators on the CPU.
U85_INT32_COPIES = frozenset({"PACK", "CONCATENATION"})


def _int32_copy(v: OperatorView) -> bool:
    return v.opcode in U85_INT32_COPIES and all(t.dtype == "int32" for t in v.activation_tensors)


def _batch_matmul_u85(v: OperatorView) -> str | None:
    types = [t.dtype for t in (*v.inputs, v.ofm) if t is not None]
    if len(set(types)) == 1 and types[0] in ("int8", "int16"):
        return None
    return f"{' and '.join(types[:-1])} -> {types[-1]}"


# The Ethos-U85's rules where Vela 5.2's differ from the U55/U65's, by the name of the rule they
# replace on the U85.
U85_RULES: dict[str, Rule] = {
    "arg_max": Rule("arg_max", "ARG_MAX over one constant axis (one longer than a pooling takes is split, its "
                    "parts combined over at most 65535 rows and channels)",
                    _u85_arg_max, ops=frozenset({"ARG_MAX"}), source="Vela ethos_u85_constraints"),
    "data_type": Rule("data_type", f"feature maps must be {', '.join(ACTIVATION_DTYPES)} (int32 only for ADD/SUB/MUL, "
                      "PACK and CONCATENATION)", lambda v: None if _int32_copy(v) else _dtypes(v)),
    "quantized": Rule("quantized", "feature maps and weights must have finite, positive quantization scales",
                      lambda v: None if _int32_copy(v) else _quantized(v), source="Vela tflite_model_semantic"),
    # The U85 multiplies int16 matrices in its 48-bit accumulators (frontend/lower_batch_matmul).
    "batch_matmul_int8": Rule("batch_matmul_int8", "BATCH_MATMUL takes int8 or int16 operands and output, one type",
                              _batch_matmul_u85, ops=frozenset({"BATCH_MATMUL"}), source="Vela ethos_u85_constraints"),
    # ARG_MAX views its input as A x N x B around the axis, whatever the batch, pooled in bands
    # of A and B and parts of N (lower_u85_arg_max), so no dimension is one NPU map's.
    "batch_size": Rule("batch_size", "the IFM batch size must be 1 (but for ARG_MAX)",
                       lambda v: None if v.opcode == "ARG_MAX" else _batch(v)),
    "dimension_range": Rule("dimension_range", f"every tensor dimension must be in [{TENSOR_DIM_RANGE[0]}, "
                            f"{TENSOR_DIM_RANGE[1]}] (but for ARG_MAX)",
                            lambda v: None if v.opcode == "ARG_MAX" else _dims(v)),
}


def check_operator(view: OperatorView, u85: bool = False) -> Verdict:
    """Decide whether one operator can run on the NPU (`u85`: the Ethos-U85's, which runs the
    `U85_ONLY_OPERATORS` too); on the CPU, say which rule forbids it."""
    opcode = view.op.name
    if view.opcode == "CUSTOM":
        return Verdict(False, "operator_type", f"custom operator {opcode!r} runs on the CPU")
    if opcode in U85_ONLY_OPERATORS and not u85:
        return Verdict(False, "operator_type", f"{opcode} has no Ethos-U55/U65 NPU operation (Vela 5.2 runs it "
                                               "on the Ethos-U85 only)")
    if opcode not in NPU_OPERATORS:
        if opcode in PLANNED_OPERATORS or opcode in U85_ONLY_OPERATORS:
            return Verdict(False, "operator_type", f"{opcode} is NPU-capable but not lowered by cascader yet")
        return Verdict(False, "operator_type", f"{opcode} is not supported by the Ethos-U NPU")
    if opcode in RESOURCE_VARIABLE_OPS:  # byte copies of a variable: Vela's variable constraints alone
        detail = variable_check(view)
        return Verdict(True) if detail is None else Verdict(False, "resource_variable", detail)
    for rule in _rules_for(opcode, u85):
        detail = rule.check(view)
        if detail is not None:
            return Verdict(False, rule.name, f"{rule.reason} ({detail})")
    return ON_NPU


# The rules that apply to each operator type, in RULES's order, by (type, for the Ethos-U85:
# its `U85_RULES` in place): a partition checks every operator, and asking each of the rules
# whether it applies was a third of that.
_RULES_BY_OPCODE: dict[tuple[str, bool], tuple[Rule, ...]] = {}


def _rules_for(opcode: str, u85: bool) -> tuple[Rule, ...]:
    rules = _RULES_BY_OPCODE.get((opcode, u85))
    if rules is None:
        rules = _RULES_BY_OPCODE[opcode, u85] = tuple(U85_RULES.get(rule.name, rule) if u85 else rule
                                                      for rule in RULES if rule.applies_to(opcode))
    return rules


def macs(view: OperatorView) -> int:
    """Multiply-accumulates of conv, depthwise, transpose conv and fully connected ops."""
    w, ofm = view.weights, view.ofm
    if w is None or ofm is None or len(w.shape) < 2:
        return 0
    if view.opcode == "DEPTHWISE_CONV_2D":  # one kernel window per output element
        return math.prod(ofm.shape) * w.shape[1] * w.shape[2]
    if view.opcode == "CONV_2D":
        return math.prod(ofm.shape) * w.shape[1] * w.shape[2] * w.shape[3]
    if view.opcode == "FULLY_CONNECTED":
        return math.prod(ofm.shape) * w.shape[-1]
    if view.opcode == "TRANSPOSE_CONV":  # every input element scatters a full kernel
        ifm = view.ifm
        return 0 if ifm is None else math.prod(ifm.shape) * w.shape[0] * w.shape[1] * w.shape[2]
    return 0
