"""Random int8 (or uint8, or 16x8) networks from the zoo's layers: inputs for fuzzing the compiler.

`random_network(seed)` draws 2-11 layers over an input of 3-47 x 3-47 x 1-40: convolutions
(strided, dilated, SAME or VALID), depthwise convolutions (multiplier 1 or 2), max and average
pools, ADD/SUB/MUL against an earlier map of the same shape or a broadcast scalar constant,
MAXIMUM/MINIMUM/SQUARED_DIFFERENCE against an earlier map, squeeze-and-excite gates (MEAN, 1x1
conv, LOGISTIC, a MUL broadcast along H and W), concatenations of two or three maps along any
axis, PAD, MIRROR_PAD, STRIDED_SLICE, SPLIT, TRANSPOSE, RESHAPE, QUANTIZE, MEAN, RESIZE,
TRANSPOSE_CONV, the activation layers (LEAKY_RELU, TANH, LOGISTIC, EXP, HARD_SWISH, PRELU,
SOFTMAX, ABS, RSQRT of an ABS, and RELU, RELU6, RELU_N1_TO_1 and RELU_0_TO_1 as operators of
their own), FULLY_CONNECTED, SLICE, SPLIT_V, PACK (of maps seen as rank 3), UNPACK then
EXPAND_DIMS, SQUEEZE then EXPAND_DIMS, ARG_MAX (an int32 model output), and convolutions strided
by 4, which the NPU cannot run: the CPU runs them between two NPU parts. A layer may read any
earlier map instead of the last one, so maps get several readers, and some none (dead operators,
legal in a .tflite); sometimes a middle map is a second output, and sometimes a second input. A
layer whose output calibrates to zeros only is left a dead end. Weights and quantization come
from the zoo's float calibration, so each model is what a converter writes from such a network.
A seed always gives the same model. `random_network(seed, "uint8")` draws the uint8 network an
older converter writes (maps moved up by 128, weights per tensor with a zero point) of the
layers TFLite runs on uint8 (not EXP, RSQRT, ABS or SQUARED_DIFFERENCE); `"int16"` a 16x8
network (int16 maps, int8 weights, int64 biases) of the layers TFLite runs on int16:
convolutions, depthwise convolutions, pools, ADD/SUB/MUL, FULLY_CONNECTED, RESHAPE and the
activation layers.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np

from ._zoo_layers import Activation, CalibratedNet, apply_activation, output_size, range_quantization
from .errors import InvalidArgumentError
from .tflite import Model
from .tflite.builder import quantization

_ACTIVATIONS = (None, "RELU", "RELU6", "RELU_N1_TO_1")
_KINDS = ("conv", "conv", "conv", "depthwise", "depthwise", "pool", "add", "sub", "mul", "concatenation", "pad",
          "mean", "resize", "transpose_conv", "leaky_relu", "tanh", "logistic", "hard_swish", "prelu", "softmax",
          "fully_connected", "scalar", "squeeze_excite", "reshape", "requantize", "strided_slice", "split",
          "transpose", "mirror_pad", "maximum", "minimum", "squared_difference", "abs", "rsqrt", "exp", "slice",
          "split_v", "pack", "unpack", "squeeze", "arg_max", "relu", "cpu_conv")
# What a 16x8 network draws: the layers TFLite and the NPU run on int16 maps.
_INT16_KINDS = ("conv", "conv", "conv", "depthwise", "depthwise", "pool", "add", "sub", "mul", "leaky_relu", "tanh",
                "logistic", "softmax", "exp", "fully_connected", "reshape")
# A uint8 network draws what TFLite runs on uint8 (not EXP, RSQRT, ABS or SQUARED_DIFFERENCE).
_UINT8_KINDS = tuple(k for k in _KINDS if k not in ("exp", "rsqrt", "abs", "squared_difference"))
_WEIGHTED = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"}
_ELEMENTWISE = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
_LEAST_SCALE = 1e-6  # below, a map was calibrated on zeros only


def _zeros(value: np.ndarray, activation: str | None) -> bool:
    """Whether an elementwise result calibrates to zeros only (a map minus itself, a ReLU of
    negatives): its scale (4e-9) takes TFLite's own ADD/SUB outside the arithmetic it defines,
    and the reference's ADD aborts, even with the result read by nobody."""
    return bool(np.abs(apply_activation(value, activation)).max() < _LEAST_SCALE)


class RandomNetwork(NamedTuple):
    model: Model
    layers: str  # what was drawn, in order ("<branch>" where a layer reads an earlier map)


def _window(rng: np.random.Generator, x: Activation, largest: int, dilate: bool):
    """A kernel, stride, dilation and padding that fit `x` (InvalidArgumentError if not). The
    builder checks too, but after the layer's other draws: checked here, a window that does not
    fit takes no more of the seed's numbers, and each seed keeps its network."""
    kernel = (int(rng.integers(1, largest + 1)), int(rng.integers(1, largest + 1)))
    stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    dilation = (1, 1)
    if dilate and stride == (1, 1) and rng.random() < 0.3:
        dilation = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    padding = str(rng.choice(["SAME", "VALID"]))
    for axis in (0, 1):
        output_size(x.shape[1 + axis], kernel[axis], stride[axis], dilation[axis], padding)
    return kernel, stride, dilation, padding


def _layer(net: CalibratedNet, rng: np.random.Generator, kind: str, x: Activation, kept: list[Activation]
           ) -> tuple[Activation, str] | None:
    """One layer of `kind` on `x`, or None when it does not apply to `x`'s shape."""
    spatial = len(x.shape) == 4
    h, w, c = x.shape[1:4] if spatial else (1, 1, x.shape[-1])
    if not spatial and kind not in ("fully_connected", "tanh", "logistic", "leaky_relu", "softmax", "requantize"):
        return None
    activation = _ACTIVATIONS[int(rng.integers(len(_ACTIVATIONS)))]
    if kind == "conv":
        k, s, d, p = _window(rng, x, 5, True)
        return net.conv2d(x, int(rng.choice([1, 3, 8, 16, 20, 32, 48, 64])), k, s, p, d, activation), f"conv{k}/{s}{d}{p}"
    if kind == "depthwise":
        k, s, d, p = _window(rng, x, 5, True)
        return (net.depthwise_conv2d(x, k, s, p, int(rng.choice([1, 1, 1, 2])), d, activation),
                f"depthwise{k}/{s}{d}{p}")
    if kind == "pool":
        k, s, _, p = _window(rng, x, 4, False)
        mode = str(rng.choice(["MAX", "AVERAGE"]))
        return net.pool(x, mode, k, s, p), f"{mode.lower()}_pool{k}/{s}{p}"
    if kind in ("add", "sub", "mul", "maximum", "minimum", "squared_difference"):
        same = [a for a in kept if a.shape == x.shape and a is not x]
        if not same:
            return None
        other = same[int(rng.integers(len(same)))]
        if kind == "squared_difference" and _zeros(np.square(x.value - other.value), None):
            return None
        if kind not in _ELEMENTWISE:  # no fused activation
            return getattr(net, kind)(x, other), kind
        if _zeros(_ELEMENTWISE[kind](x.value, other.value), activation):
            return None
        return getattr(net, kind)(x, other, activation), kind
    if kind == "scalar":  # a constant operand, broadcast
        op = str(rng.choice(["add", "sub", "mul"]))
        constant = net.constant(float(rng.choice([-1, 1]) * rng.uniform(0.05, 3.0)))
        operands = (x, constant) if rng.random() < 0.7 else (constant, x)
        if _zeros(_ELEMENTWISE[op](operands[0].value, operands[1].value), activation):
            return None
        return getattr(net, op)(*operands, activation), f"{op}_scalar"
    if kind == "squeeze_excite":  # a channel gate broadcast along H and W
        gate = net.logistic(net.conv2d(net.mean(x), c, (1, 1), activation=None))
        return net.mul(x, gate), kind
    if kind == "reshape":  # the same bytes seen as another H x W
        return net.reshape(x, (1, h * w, 1, c) if rng.random() < 0.5 else (1, 1, h * w, c)), kind
    if kind == "requantize":
        lo, hi = float(x.value.min()), float(x.value.max())
        stretch = float(rng.uniform(0.5, 2.0))
        return net.requantize(x, range_quantization(min(lo * stretch, 0.0), max(hi * stretch, 1e-3))), kind
    if kind == "concatenation":
        axis = int(rng.choice([3, 3, 1, 2]))
        fitting = [a for a in kept if a is not x and len(a.shape) == 4
                   and all(a.shape[j] == x.shape[j] for j in range(4) if j != axis)]
        if not fitting:
            return None
        others = [fitting[int(k)] for k in rng.integers(len(fitting), size=int(rng.integers(1, 3)))]
        inputs = [x, *others]
        rng.shuffle(inputs)
        return net.concatenation(inputs, axis=axis), f"concatenation{axis}x{len(inputs)}"
    if kind == "pad":
        pads = [[0, 0], [int(v) for v in rng.integers(0, 3, 2)], [int(v) for v in rng.integers(0, 3, 2)], [0, 0]]
        return net.pad(x, pads), f"pad{pads[1]}{pads[2]}"
    if kind == "mirror_pad":
        mode = str(rng.choice(["REFLECT", "SYMMETRIC"]))
        pads = [[0, 0], [int(v) for v in rng.integers(0, 3, 2)], [int(v) for v in rng.integers(0, 3, 2)], [0, 0]]
        return net.mirror_pad(x, pads, mode), f"mirror_pad_{mode.lower()}{pads[1]}{pads[2]}"
    if kind == "strided_slice":  # a box of rows, columns and channels, strided along H and W
        begin, end, strides = [0], [1], [1]
        for axis, n in enumerate((h, w, c)):
            first = int(rng.integers(0, n))
            begin.append(first)
            end.append(int(rng.integers(first + 1, n + 1)))
            strides.append(int(rng.choice([1, 1, 2])) if axis < 2 else 1)
        return net.strided_slice(x, begin, end, strides), f"strided_slice{begin[1:]}:{end[1:]}:{strides[1:3]}"
    if kind == "split":  # into equal parts: the first goes on, the others may be read later
        axis = int(rng.choice([1, 2, 3]))
        parts = [p for p in (2, 3) if x.shape[axis] % p == 0]
        if not parts:
            return None
        outs = net.split(x, int(rng.choice(parts)), axis)
        kept.extend(outs[1:])
        return outs[0], f"split{axis}x{len(outs)}"
    if kind == "slice":  # SLICE: a box, to the end of an axis where the size is -1
        begin, size = [0], [1]
        for n in (h, w, c):
            first = int(rng.integers(0, n))
            begin.append(first)
            size.append(-1 if rng.random() < 0.3 else int(rng.integers(1, n - first + 1)))
        return net.slice(x, begin, size), f"slice{begin[1:]}+{size[1:]}"
    if kind == "split_v":  # into 2 or 3 parts of drawn sizes: the first goes on
        axis = int(rng.choice([1, 2, 3]))
        n = x.shape[axis]
        if n < 2:
            return None
        cuts = sorted({int(v) for v in rng.integers(1, n, size=int(rng.integers(1, 3)))})
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, n])]
        outs = net.split_v(x, sizes, axis)
        kept.extend(outs[1:])
        return outs[0], f"split_v{axis}{sizes}"
    if kind == "pack":  # maps of x's shape, each seen as (1, H*W, C), stacked along a new axis
        same = [a for a in kept if a.shape == x.shape and a is not x] or [x]
        others = [same[int(k)] for k in rng.integers(len(same), size=int(rng.integers(1, 3)))]
        axis = int(rng.choice([1, 2]))
        flat = [net.reshape(a, (1, h * w, c)) for a in (x, *others)]
        return net.pack(flat, axis), f"pack{axis}x{len(flat)}"
    if kind == "unpack":  # along a short axis; each part back to rank 4 with an axis of 1
        axes = [a for a in (1, 2, 3) if 2 <= x.shape[a] <= 8]
        if not axes:
            return None
        axis = axes[int(rng.integers(len(axes)))]
        where = int(rng.choice([1, 2, 3]))
        outs = [net.expand_dims(part, where) for part in net.unpack(x, axis)]
        kept.extend(outs[1:])
        return outs[0], f"unpack{axis}_expand_dims{where}"
    if kind == "squeeze":  # an axis of 1 squeezed out and put back elsewhere
        ones = [a for a in (1, 2, 3) if x.shape[a] == 1]
        if not ones:
            return None
        axis = ones[int(rng.integers(len(ones)))]
        where = int(rng.choice([1, 2, 3]))
        return net.expand_dims(net.squeeze(x, [axis]), where), f"squeeze{axis}_expand_dims{where}"
    if kind == "arg_max":  # int32 indices: another model output, while x goes on
        net.output(net.arg_max(x, int(rng.choice([3, 3, 1, 2]))))
        return x, kind
    if kind == "relu":  # a ReLU operator of its own, its output calibrated
        relu = str(rng.choice(["RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1"]))
        return net.relu(x, relu), relu.lower()
    if kind == "cpu_conv":  # a stride of 4, which the NPU cannot run: the CPU runs it between NPU parts
        k = (int(rng.integers(1, 6)), int(rng.integers(1, 6)))
        st = (4, int(rng.choice([1, 4])))
        p = str(rng.choice(["SAME", "VALID"]))
        for axis in (0, 1):
            output_size(x.shape[1 + axis], k[axis], st[axis], 1, p)
        return net.conv2d(x, int(rng.choice([4, 8, 16])), k, st, p, (1, 1), activation), f"cpu_conv{k}/{st}{p}"
    if kind == "transpose":
        perm = [(0, 2, 1, 3), (0, 1, 3, 2), (0, 3, 1, 2), (0, 2, 3, 1), (0, 3, 2, 1)][int(rng.integers(5))]
        return net.transpose(x, perm), f"transpose{list(perm[1:])}"
    if kind == "abs":
        return net.abs(x), kind
    if kind == "rsqrt":  # of a non-negative map
        return net.rsqrt(net.abs(x)), "abs_rsqrt"
    if kind == "exp":  # of a map whose exponential int8 can hold
        return (net.exp(x), kind) if x.value.max() < 8 else None
    if kind in ("mean", "softmax") and h * w > (256 if kind == "mean" else 64):
        return None
    if kind in ("resize", "transpose_conv") and h * w > 300:
        return None
    if kind == "mean":
        return net.mean(x), kind
    if kind == "resize":
        method = str(rng.choice(["BILINEAR", "NEAREST"]))
        return net.resize(x, method), f"resize_{method.lower()}"
    if kind == "transpose_conv":
        return net.transpose_conv2d(x, int(rng.choice([4, 8, 16]))), kind
    if kind == "leaky_relu":
        return net.leaky_relu(x, float(rng.uniform(0.05, 0.5))), kind
    if kind == "softmax":
        return (net.softmax(x, beta=float(rng.choice([1.0, 0.5, 2.0]))), kind) if c > 1 else None
    if kind in ("tanh", "logistic", "hard_swish", "prelu"):
        return getattr(net, kind)(x), kind
    # fully_connected, of the map flattened
    if h * w * c > 2048:
        return None
    if spatial:
        x = net.reshape(x, (1, h * w * c))
    return net.fully_connected(x, int(rng.choice([1, 4, 10, 16, 33])), activation), kind


def _as_uint8(model: Model) -> Model:
    """The int8 `model` as an older converter writes it in uint8: every int8 tensor moved up by
    128 (the same real values), and the weights of convolutions and FULLY_CONNECTED requantized
    per tensor with a zero point (uint8 kernels take no per-channel weights), their biases
    rescaled to match."""
    model = copy.deepcopy(model)
    sg = model.subgraphs[0]
    weights: dict[int, list[tuple[int, int]]] = {}  # weight tensor -> (bias, input) of each reader
    for op in sg.operators:
        if op.opcode in _WEIGHTED:
            # TRANSPOSE_CONV's inputs are (output shape, weights, input, bias)
            x, slot = (op.inputs[2], 3) if op.opcode == "TRANSPOSE_CONV" else (op.inputs[0], 2)
            weights.setdefault(op.inputs[1], []).append((op.inputs[slot] if len(op.inputs) > slot else -1, x))
    for index, t in enumerate(sg.tensors):
        if t.dtype != "int8" or t.quantization is None:
            continue
        q = t.quantization
        if index in weights:
            real = t.data.astype(np.float64) * q.scale.astype(np.float64).reshape(
                [-1 if a == q.quantized_dimension else 1 for a in range(t.data.ndim)])  # symmetric: no zero point
            lo, hi = min(float(real.min()), 0.0), max(float(real.max()), 1e-9)
            scale = (hi - lo) / 255.0
            zero_point = int(np.clip(np.round(-lo / scale), 0, 255))
            data = np.clip(np.round(real / scale) + zero_point, 0, 255).astype(np.uint8)
            for b, x in weights[index]:
                bias = sg.tensors[b] if b >= 0 else None
                if bias is None or bias.data is None:
                    continue
                real_bias = bias.data.astype(np.float64) * bias.quantization.scale.astype(np.float64)
                input_scale = float(sg.tensors[x].quantization.scale[0])
                bias_scale = np.float32(input_scale * np.float32(scale))
                codes = np.clip(np.round(real_bias / float(bias_scale)), -(2**31), 2**31 - 1).astype(np.int32)
                bias.data, bias.quantization = codes, quantization(bias_scale, 0)
                model.buffers[bias.buffer] = codes.tobytes()
            t.quantization = quantization(scale, zero_point)
        else:
            data = None if t.data is None else (t.data.astype(np.int16) + 128).astype(np.uint8)
            t.quantization = quantization(q.scale, q.zero_point + 128, q.quantized_dimension)
        t.dtype = "uint8"
        if data is not None:
            t.data = data
            model.buffers[t.buffer] = data.tobytes()
    return model


def random_network(seed: int, dtype: str = "int8") -> RandomNetwork:
    """The random network of `seed` (see the module) with `dtype` maps: "int8", "uint8" or
    "int16" (16x8)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidArgumentError(f"seed must be a non-negative int, got {seed!r}")
    if dtype not in ("int8", "uint8", "int16"):
        raise InvalidArgumentError(f"dtype must be 'int8', 'uint8' or 'int16', got {dtype!r}")
    kinds = {"int8": _KINDS, "uint8": _UINT8_KINDS, "int16": _INT16_KINDS}[dtype]
    rng = np.random.default_rng(seed)
    description = f"cascader.random_networks {seed}" + ("" if dtype == "int8" else f" {dtype}")
    net = CalibratedNet(int(seed), calibration_samples=8, description=description)
    shape = (1, int(rng.integers(3, 48)), int(rng.integers(3, 48)), int(rng.choice([1, 2, 3, 4, 5, 8, 16, 17, 24, 32, 40])))
    maps = "int16" if dtype == "int16" else "int8"  # uint8 is built in int8, then moved up
    x = net.input(shape, dtype=maps)
    kept, drawn = [x], [f"input{list(shape[1:])}"]
    if rng.random() < 0.3:  # a second model input, as wide or not
        second = (*shape[:3], int(rng.choice([shape[3], 8])))
        kept.append(net.input(second, name="input_2", dtype=maps))
        drawn.append(f"input{list(second[1:])}")
    for _ in range(int(rng.integers(2, 12))):
        if len(kept) > 2 and rng.random() < 0.25:
            x = kept[int(rng.integers(len(kept)))]
            drawn.append("<branch>")
        try:
            made = _layer(net, rng, kinds[int(rng.integers(len(kinds)))], x, kept)
        except InvalidArgumentError:  # the draw does not fit the map (a window larger than it)
            continue
        if made is not None and made[0].quant.scale[0] < _LEAST_SCALE:
            # Calibrated on zeros only (a ReLU of a map that is all negative, say), its scale of
            # 4e-9 takes TFLite's own arithmetic after it outside what it defines: it stays a
            # dead end.
            drawn.append(f"({made[1]}: zeros)")
        elif made is not None:
            x = made[0]
            kept.append(x)
            drawn.append(made[1])
    if len(kept) > 3 and rng.random() < 0.3 and kept[len(kept) // 2] is not x:
        net.output(kept[len(kept) // 2])
    net.output(x)
    model = net.build()
    return RandomNetwork(_as_uint8(model) if dtype == "uint8" else model, " ".join(drawn))
