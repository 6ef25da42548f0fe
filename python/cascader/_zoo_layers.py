"""The zoo's layer builder: a float forward pass in numpy that calibrates int8 quantization.

Activations are int8 by default; the weightless activation layers (`leaky_relu`, `tanh`,
`logistic`, `exp`, `softmax`) also take int16 inputs, quantized as TFLite's 16x8 scheme quantizes
activations: symmetric, zero point 0.

`CalibratedNet` builds a model layer by layer while pushing a batch of calibration inputs
through it in float. Each layer:

1. draws He-initialised float weights from the seeded generator;
2. folds a batch norm into them with the *calibration batch's* statistics (per output channel:
   zero mean, unit variance, then a random gamma/beta near (1, 0)), which is what a trained
   network with folded batch norm looks like and keeps activations healthy through any depth;
3. quantizes the weights per channel (symmetric int8, zero point 0) and runs the float pass
   again with the *dequantized* weights;
4. takes the activation's observed min/max over the batch, widened to contain 0 and mean +- 4
   sigma (small tensors such as logits show too few samples for their tails), as the int8
   output range, and quantizes the bias with scale input_scale * weight_scale.

Depthwise kernels are drawn with a positive mean (low-pass); see `depthwise_conv2d`.

Pooling, padding and reshapes keep their input's quantization, as the TFLite converter does
(TFLite's int8 pooling kernels require equal input and output scales).

Cost: the float pass is O(N * MACs) numpy work for N calibration samples (default 16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import InvalidArgumentError
from .tflite import Model, Quantization
from .tflite.builder import ModelBuilder, quantization

ACTIVATIONS = (None, "RELU", "RELU6", "RELU_N1_TO_1")
ACTIVATION_DTYPES = ("int8", "int16")

# Operator versions the TFLite converter writes for int8 / int16 operands
# (tensorflow/lite/tools/versioning/op_version.cc).
_VERSION = {
    "int8": {
        "CONV_2D": 3,
        "DEPTHWISE_CONV_2D": 3,
        "FULLY_CONNECTED": 4,
        "ADD": 2,
        "MUL": 2,
        "SUB": 2,
        "AVERAGE_POOL_2D": 2,
        "MAX_POOL_2D": 2,
        "PAD": 2,
        "RESHAPE": 1,
        "LEAKY_RELU": 1,
        "TANH": 2,
        "LOGISTIC": 2,
        "EXP": 2,
        "SOFTMAX": 2,
        "HARD_SWISH": 1,
        "PRELU": 1,
        "MEAN": 2,
        "CONCATENATION": 2,
        "QUANTIZE": 2,
        "RESIZE_NEAREST_NEIGHBOR": 2,
        "RESIZE_BILINEAR": 3,  # half-pixel centres
        "TRANSPOSE_CONV": 3,  # with a bias
        "STRIDED_SLICE": 2,
        "TRANSPOSE": 2,
        "MIRROR_PAD": 2,
        "SPLIT": 2,
        "MAXIMUM": 2,
        "MINIMUM": 2,
        "SQUARED_DIFFERENCE": 2,
        "ABS": 2,
        "RSQRT": 2,
        "SLICE": 2,
        "SPLIT_V": 2,
        "PACK": 2,
        "UNPACK": 2,
        "EXPAND_DIMS": 1,
        "SQUEEZE": 1,
        "ARG_MAX": 2,
        "RELU": 2,
        "RELU6": 2,
        "RELU_N1_TO_1": 1,
        "RELU_0_TO_1": 1,
        "PADV2": 2,
        "TILE": 1,
        "REVERSE_V2": 2,
        "ELU": 1,  # LiteRT registers version 1 only
        "GELU": 2,
        "LOG": 2,
        "NEG": 1,
        "SUM": 2,
        "REDUCE_MAX": 2,
        "REDUCE_MIN": 2,
        "UNIDIRECTIONAL_SEQUENCE_LSTM": 2,
        "BATCH_MATMUL": 2,
    },
    # 16x8: int16 activations, int8 weights, int64 bias.
    "int16": {"LEAKY_RELU": 2, "TANH": 3, "LOGISTIC": 3, "EXP": 2, "SOFTMAX": 3, "CONV_2D": 4, "DEPTHWISE_CONV_2D": 5,
              "FULLY_CONNECTED": 7, "AVERAGE_POOL_2D": 3, "MAX_POOL_2D": 3, "ADD": 3, "SUB": 3, "MUL": 4,
              "UNIDIRECTIONAL_SEQUENCE_LSTM": 4, "STRIDED_SLICE": 4, "RESHAPE": 1, "PADV2": 4, "TILE": 1, "REVERSE_V2": 3, "LOG": 2, "NEG": 1, "SUM": 1, "REDUCE_MAX": 3,
              "REDUCE_MIN": 3},
}

# TFLite's int8/int16 TANH, LOGISTIC and SOFTMAX kernels require these output quantizations.
_FIXED_OUTPUT = {
    ("TANH", "int8"): (1.0 / 128, 0),
    ("LOGISTIC", "int8"): (1.0 / 256, -128),
    ("TANH", "int16"): (1.0 / 32768, 0),
    ("LOGISTIC", "int16"): (1.0 / 32768, 0),
    ("SOFTMAX", "int8"): (1.0 / 256, -128),
    ("SOFTMAX", "int16"): (1.0 / 32768, 0),
}


@dataclass
class Activation:
    """An int8 (or int16) activation tensor of the model being built, with its float calibration batch."""

    index: int  # tensor index in the model
    value: np.ndarray  # float32 calibration values, shape (N, *tensor shape[1:])
    quant: Quantization
    dtype: str = "int8"

    @property
    def shape(self) -> tuple[int, ...]:
        return (1,) + tuple(self.value.shape[1:])

    @property
    def scale(self) -> float:
        return float(self.quant.scale[0])


def _pair(value: int | Sequence[int], what: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in pair):
        raise InvalidArgumentError(f"{what} must be a positive int or a pair of positive ints, got {value!r}")
    return int(pair[0]), int(pair[1])


def _check_activation(activation: str | None) -> None:
    if activation not in ACTIVATIONS:
        raise InvalidArgumentError(f"activation must be one of {list(ACTIVATIONS)}, got {activation!r}")


def _require_int8(opcode: str, *xs: "Activation") -> None:
    for x in xs:
        if x.dtype != "int8":
            raise InvalidArgumentError(
                f"{opcode} is built for int8 activations only, got {x.dtype}; the int16 layers are "
                "conv2d, depthwise_conv2d, fully_connected, pool, add, sub, mul, reshape, leaky_relu, tanh, "
                "logistic, exp, softmax, log, neg, lstm and strided_slice"
            )


def _same_dtype(opcode: str, *xs: "Activation") -> str:
    """The operands' one activation type (int8 or 16x8 int16)."""
    dtypes = {x.dtype for x in xs}
    if len(dtypes) != 1 or not dtypes <= set(ACTIVATION_DTYPES):
        raise InvalidArgumentError(f"{opcode} needs int8 or int16 operands of one type, got {sorted(dtypes)}")
    return dtypes.pop()


def _check_padding(padding: str) -> None:
    if padding not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"padding must be 'SAME' or 'VALID', got {padding!r}")


def output_size(size: int, kernel: int, stride: int, dilation: int, padding: str) -> tuple[int, int]:
    """TFLite's output length and leading pad along one axis (SAME puts the odd pad at the end)."""
    effective = (kernel - 1) * dilation + 1
    if padding == "SAME":
        out = -(-size // stride)
        total = max((out - 1) * stride + effective - size, 0)
        return out, total // 2
    out = (size - effective) // stride + 1
    if out < 1:
        raise InvalidArgumentError(
            f"VALID padding: the {kernel}-tap kernel (dilation {dilation}) does not fit in an axis of {size}; "
            "use SAME padding or a larger input"
        )
    return out, 0


def apply_activation(x: np.ndarray, activation: str | None) -> np.ndarray:
    if activation == "RELU":
        return np.maximum(x, 0.0)
    if activation == "RELU6":
        return np.clip(x, 0.0, 6.0)
    if activation == "RELU_N1_TO_1":
        return np.clip(x, -1.0, 1.0)
    return x


# Bounds each fused activation puts on its output: a calibrated range never goes past them.
_ACTIVATION_BOUNDS = {None: (-np.inf, np.inf), "RELU": (0.0, np.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}

# Tail allowance in standard deviations. A small tensor (the logits: a few values per sample)
# shows too few samples in the calibration batch to reveal its extremes, so new inputs would
# saturate; 4 sigma covers a Gaussian tail. Large tensors already show extremes beyond it.
_TAIL_SIGMAS = 4.0


def calibrated_range(value: np.ndarray, activation: str | None) -> tuple[float, float]:
    """The int8 range of an activation: observed min/max widened to mean +- 4 sigma, within the
    activation's bounds."""
    mean, std = float(value.mean()), float(value.std())
    low, high = _ACTIVATION_BOUNDS[activation]
    lo = max(min(float(value.min()), mean - _TAIL_SIGMAS * std), low)
    hi = min(max(float(value.max()), mean + _TAIL_SIGMAS * std), high)
    return lo, hi


def range_quantization(lo: float, hi: float, dtype: str = "int8") -> Quantization:
    """Quantization covering [lo, hi] widened to contain 0 (so 0 is exact): asymmetric for int8,
    symmetric with zero point 0 for int16 (TFLite's 16x8 scheme)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo < 1e-6:  # an all-zero activation still needs a valid scale
        hi = lo + 1e-6
    if dtype == "int16":
        return quantization(max(-lo, hi) / 32767.0, 0)
    scale = (hi - lo) / 255.0
    zero_point = int(np.clip(np.round(-128.0 - lo / scale), -128, 127))
    return quantization(scale, zero_point)


def _windows(x: np.ndarray, kernel, stride, dilation, padding, fill: float):
    """Yield (tap_y, tap_x, strided view) for every kernel tap over the padded input."""
    n, h, w, c = x.shape
    oh, pt = output_size(h, kernel[0], stride[0], dilation[0], padding)
    ow, pl = output_size(w, kernel[1], stride[1], dilation[1], padding)
    pb = max((oh - 1) * stride[0] + (kernel[0] - 1) * dilation[0] + 1 - h - pt, 0)
    pr = max((ow - 1) * stride[1] + (kernel[1] - 1) * dilation[1] + 1 - w - pl, 0)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            y0, x0 = i * dilation[0], j * dilation[1]
            rows = slice(y0, y0 + (oh - 1) * stride[0] + 1, stride[0])
            cols = slice(x0, x0 + (ow - 1) * stride[1] + 1, stride[1])
            yield i, j, xp[:, rows, cols, :]


def conv2d_float(x, w, stride, dilation, padding) -> np.ndarray:
    """NHWC convolution with OHWI weights; one matmul per kernel tap."""
    out = None
    for i, j, view in _windows(x, w.shape[1:3], stride, dilation, padding, 0.0):
        # A contiguous 2-D product takes the BLAS path; a strided 4-D one does not.
        rows = np.ascontiguousarray(view).reshape(-1, view.shape[3])
        term = rows @ np.ascontiguousarray(w[:, i, j, :].T)
        out = term if out is None else out + term
    return out.reshape(view.shape[:3] + (w.shape[0],))


def depthwise_conv2d_float(x, w, stride, dilation, padding, multiplier: int) -> np.ndarray:
    """NHWC depthwise convolution with 1HW(C*M) weights: output channel c*M+m reads input c."""
    x = np.repeat(x, multiplier, axis=3) if multiplier > 1 else x
    out = None
    for i, j, view in _windows(x, w.shape[1:3], stride, dilation, padding, 0.0):
        term = view * w[0, i, j, :]
        out = term if out is None else out + term
    return out


def pool_float(x, kind: str, size, stride, padding) -> np.ndarray:
    """Max or average pool; average counts only real (unpadded) elements, as TFLite does."""
    if kind == "MAX":
        out = None
        for _, _, view in _windows(x, size, stride, (1, 1), padding, -np.inf):
            out = view if out is None else np.maximum(out, view)
        return out
    total = count = None
    ones = np.ones((1,) + x.shape[1:3] + (1,), x.dtype)
    for (_, _, view), (_, _, cview) in zip(
        _windows(x, size, stride, (1, 1), padding, 0.0), _windows(ones, size, stride, (1, 1), padding, 0.0)
    ):
        total = view if total is None else total + view
        count = cview if count is None else count + cview
    return total / count


def transpose_conv2d_float(x, w, stride, padding: str) -> np.ndarray:
    """TFLite's TRANSPOSE_CONV with OHWI weights: every input element scatters the kernel,
    stride apart, and the output is the window of the forward convolution's padding."""
    n, h, width, _ = x.shape
    (kh, kw), (sh, sw) = w.shape[1:3], stride
    out_h, out_w = transposed_size(h, kh, sh, padding), transposed_size(width, kw, sw, padding)
    top, left = transposed_padding(out_h, kh, sh, padding), transposed_padding(out_w, kw, sw, padding)
    canvas = np.zeros((n, max((h - 1) * sh + kh, top + out_h), max((width - 1) * sw + kw, left + out_w), w.shape[0]),
                      np.float32)
    for i in range(kh):
        for j in range(kw):
            canvas[:, i : i + (h - 1) * sh + 1 : sh, j : j + (width - 1) * sw + 1 : sw, :] += x @ w[:, i, j, :].T
    return canvas[:, top : top + out_h, left : left + out_w, :]


def transposed_size(size: int, kernel: int, stride: int, padding: str) -> int:
    """TRANSPOSE_CONV's output length: the input's times the stride, plus the kernel's overhang (VALID)."""
    return size * stride + (max(kernel - stride, 0) if padding == "VALID" else 0)


def transposed_padding(out_size: int, kernel: int, stride: int, padding: str) -> int:
    """The leading pad of the forward convolution from the output back to the input."""
    forward = -(-out_size // stride) if padding == "SAME" else (out_size - kernel + stride) // stride
    return max((forward - 1) * stride + kernel - out_size, 0) // 2


def upsample_bilinear_float(x: np.ndarray) -> np.ndarray:
    """2x bilinear resize with half-pixel centres (edges repeat), TFLite's RESIZE_BILINEAR."""
    for axis in (1, 2):
        n = x.shape[axis]
        source = (np.arange(2 * n) + 0.5) / 2 - 0.5
        base = np.floor(source)
        frac = (source - base).reshape([-1 if a == axis else 1 for a in range(x.ndim)]).astype(np.float32)
        lo = np.take(x, np.clip(base, 0, n - 1).astype(np.int64), axis=axis)
        hi = np.take(x, np.clip(base + 1, 0, n - 1).astype(np.int64), axis=axis)
        x = lo * (1 - frac) + hi * frac
    return x


class CalibratedNet:
    """Builds an int8 TFLite model whose quantization comes from a float calibration pass.

    Parameters
    ----------
    seed
        Seeds every random draw (weights, batch-norm gamma/beta, calibration inputs).
    calibration_samples
        Size of the calibration batch.
    description
        The model description.
    """

    def __init__(self, seed: int = 0, calibration_samples: int = 16, description: str = "cascader.zoo") -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InvalidArgumentError(f"seed must be a non-negative int, got {seed!r}")
        if calibration_samples < 2:
            raise InvalidArgumentError("calibration needs at least 2 samples to estimate a spread")
        self.rng = np.random.default_rng(seed)
        self.samples = calibration_samples
        self.builder = ModelBuilder(description=description)
        self._names: dict[str, int] = {}
        # The calibration batch at the model's ends: int8 input codes (N, *shape[1:]) and the
        # float outputs, so tests can check the int8 model against the float pass.
        self.calibration_inputs: list[np.ndarray] = []
        self.calibration_outputs: list[Activation] = []

    # -- naming and bookkeeping -------------------------------------------------------------
    def _name(self, stem: str) -> str:
        count = self._names.get(stem, 0)
        self._names[stem] = count + 1
        return stem if count == 0 else f"{stem}_{count}"

    def _activation(
        self,
        name: str,
        value: np.ndarray,
        quant: Quantization | None = None,
        activation: str | None = None,
        dtype: str = "int8",
    ) -> Activation:
        """A `dtype` tensor named `name` (already unique), quantized by `quant` or else by the
        calibrated range of `value` (the output of fused `activation`)."""
        value = value.astype(np.float32)
        if quant is None:
            quant = range_quantization(*calibrated_range(value, activation), dtype)
        index = self.builder.add_tensor(name, (1,) + value.shape[1:], dtype, quant)
        return Activation(index, value, quant, dtype)

    def _op(
        self, opcode: str, inputs: Sequence[int], outputs: Sequence[int], options: dict | None = None, dtype: str = "int8"
    ) -> None:
        self.builder.add_operator(opcode, inputs, outputs, options, version=_VERSION[dtype][opcode])

    # -- graph ends ---------------------------------------------------------------------------
    def input(
        self, shape: Sequence[int], low: float = -1.0, high: float = 1.0, name: str = "input", dtype: str = "int8"
    ) -> Activation:
        """A model input covering [low, high]; the calibration batch is uniform over its codes.

        `dtype` 'int16' gives a symmetric input (zero point 0) for the int16 activation layers.
        """
        shape = tuple(int(d) for d in shape)
        if len(shape) < 2 or shape[0] != 1 or any(d < 1 for d in shape):
            raise InvalidArgumentError(f"input shape must be (1, ...) with positive dimensions, got {shape!r}")
        if dtype not in ACTIVATION_DTYPES:
            raise InvalidArgumentError(f"input dtype must be one of {list(ACTIVATION_DTYPES)}, got {dtype!r}")
        quant = range_quantization(low, high, dtype)
        index = self.builder.add_input(self._name(name), shape, dtype, quant)
        info = np.iinfo(dtype)
        codes = self.rng.integers(info.min, info.max, size=(self.samples,) + shape[1:], endpoint=True)
        value = (codes - quant.zero_point[0]).astype(np.float32) * quant.scale[0]
        self.calibration_inputs.append(codes.astype(dtype))
        return Activation(index, value, quant, dtype)

    def output(self, x: Activation) -> None:
        self.builder.mark_output(x.index)
        self.calibration_outputs.append(x)

    def build(self) -> Model:
        return self.builder.build()

    # -- weighted layers ----------------------------------------------------------------------
    def _weighted(
        self, opcode: str, x: Activation, w: np.ndarray, axis: int, forward, activation, name: str, options: dict,
        bias_offset: float = 0.0,
    ) -> Activation:
        """One weighted layer: fold a batch norm with the calibration statistics into the float
        weights `w` (output channels on `axis`), quantize them per channel, run the float pass
        with the dequantized weights, and add the weights, bias, output tensor and operator.

        `forward(w)` is the layer's float output without bias, channels last.
        """
        z = forward(w)
        reduce = tuple(range(z.ndim - 1))
        mean, std = z.mean(axis=reduce), z.std(axis=reduce)
        std = np.where(std > 1e-6, std, 1.0)  # a constant channel stays as it is
        gamma = self.rng.uniform(0.75, 1.25, size=mean.shape)
        beta = self.rng.normal(0.0, 0.25, size=mean.shape)
        channel_shape = [1] * w.ndim
        channel_shape[axis] = -1
        w = w * (gamma / std).reshape(channel_shape)
        bias = beta - mean * gamma / std + bias_offset

        # Symmetric per-channel int8 (TFLite uses [-127, 127] for weights), int32 bias (int64 in
        # 16x8, as the converter writes it).
        absmax = np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)).max(axis=1)
        w_scale = (np.maximum(absmax, 1e-12) / 127.0).astype(np.float32)
        w_q = np.clip(np.round(w / w_scale.reshape(channel_shape)), -127, 127).astype(np.int8)
        b_scale = x.scale * w_scale.astype(np.float64)
        bias_dtype = "int64" if x.dtype == "int16" else "int32"
        limit = np.iinfo(bias_dtype)
        b_q = np.clip(np.round(bias / b_scale), float(limit.min), float(limit.max)).astype(bias_dtype)

        dequantized = w_q.astype(np.float32) * w_scale.reshape(channel_shape)
        y = apply_activation(forward(dequantized) + bias.astype(np.float32), activation)
        stem = self._name(name)
        wi = self.builder.add_constant(f"{stem}/weights", w_q, "int8", quantization(w_scale, 0, axis))
        bi = self.builder.add_constant(f"{stem}/bias", b_q, bias_dtype, quantization(b_scale, 0, 0))
        out = self._activation(stem, y, activation=activation, dtype=x.dtype)
        inputs = [x.index, wi, bi]
        if opcode == "TRANSPOSE_CONV":  # (output shape, weights, input, bias)
            shape = self.builder.add_constant(f"{stem}/output_shape", np.asarray(out.shape, np.int32))
            inputs = [shape, wi, x.index, bi]
        self._op(opcode, inputs, [out.index], {**options, "fused_activation_function": activation or "NONE"},
                 dtype=x.dtype)
        return out

    def _window(self, x: Activation, opcode: str, kernel, stride, dilation, padding: str, activation):
        """Validate a sliding-window op's arguments; returns (kernel, stride, dilation) pairs."""
        _same_dtype(opcode, x)
        kernel, stride, dilation = _pair(kernel, "kernel"), _pair(stride, "stride"), _pair(dilation, "dilation")
        _check_padding(padding)
        _check_activation(activation)
        self._spatial(x, opcode)
        for axis in (1, 2):  # raises when the window does not fit the input
            output_size(x.shape[axis], kernel[axis - 1], stride[axis - 1], dilation[axis - 1], padding)
        return kernel, stride, dilation

    def conv2d(
        self,
        x: Activation,
        filters: int,
        kernel=(3, 3),
        stride=(1, 1),
        padding: str = "SAME",
        dilation=(1, 1),
        activation: str | None = "RELU",
        name: str = "conv",
        bias_offset: float = 0.0,
    ) -> Activation:
        """CONV_2D; `bias_offset` is added to the folded bias (a constant ADD the converter
        folds into the convolution, such as the + 3 of a hard sigmoid)."""
        if not isinstance(filters, (int, np.integer)) or filters < 1:
            raise InvalidArgumentError(f"filters must be a positive int, got {filters!r}")
        kernel, stride, dilation = self._window(x, "CONV_2D", kernel, stride, dilation, padding, activation)
        cin = x.shape[3]
        std = math.sqrt(2.0 / (kernel[0] * kernel[1] * cin))  # He initialisation
        w = self.rng.normal(0.0, std, size=(filters, *kernel, cin)).astype(np.float32)

        def forward(weights):
            return conv2d_float(x.value, weights, stride, dilation, padding)

        options = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1]}
        options.update(dilation_h_factor=dilation[0], dilation_w_factor=dilation[1])
        return self._weighted("CONV_2D", x, w, 0, forward, activation, name, options, bias_offset)

    def depthwise_conv2d(
        self,
        x: Activation,
        kernel=(3, 3),
        stride=(1, 1),
        padding: str = "SAME",
        depth_multiplier: int = 1,
        dilation=(1, 1),
        activation: str | None = "RELU",
        name: str = "depthwise",
    ) -> Activation:
        if not isinstance(depth_multiplier, (int, np.integer)) or depth_multiplier < 1:
            raise InvalidArgumentError(f"depth_multiplier must be a positive int, got {depth_multiplier!r}")
        kernel, stride, dilation = self._window(x, "DEPTHWISE_CONV_2D", kernel, stride, dilation, padding, activation)
        channels = x.shape[3] * depth_multiplier
        # He-scaled taps with a positive mean (a low-pass filter, as trained depthwise kernels
        # tend to be): zero-mean random taps amplify the white int8 rounding noise layer after
        # layer, and a deep MobileNet's int8 output would then barely track its float output.
        std = math.sqrt(2.0 / (kernel[0] * kernel[1]))
        w = self.rng.normal(std, std, size=(1, *kernel, channels)).astype(np.float32)

        def forward(weights):
            return depthwise_conv2d_float(x.value, weights, stride, dilation, padding, depth_multiplier)

        options = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1], "depth_multiplier": depth_multiplier}
        options.update(dilation_h_factor=dilation[0], dilation_w_factor=dilation[1])
        # TFLite requires per-channel depthwise weights quantized along dimension 3.
        return self._weighted("DEPTHWISE_CONV_2D", x, w, 3, forward, activation, name, options)

    def fully_connected(self, x: Activation, units: int, activation: str | None = None, name: str = "fc") -> Activation:
        """FULLY_CONNECTED of a single row: the input is (1, ..., 1, depth), the output (1, units)."""
        _same_dtype("FULLY_CONNECTED", x)
        _check_activation(activation)
        if not isinstance(units, (int, np.integer)) or units < 1:
            raise InvalidArgumentError(f"units must be a positive int, got {units!r}")
        depth = x.shape[-1]
        if math.prod(x.shape) != depth:
            raise InvalidArgumentError(
                f"fully_connected takes one row of features, shape (1, ..., 1, depth), got {list(x.shape)}; reshape first"
            )
        flat = x.value.reshape(self.samples, depth)
        w = self.rng.normal(0.0, math.sqrt(2.0 / depth), size=(units, depth)).astype(np.float32)

        def forward(weights):
            return flat @ weights.T

        return self._weighted("FULLY_CONNECTED", x, w, 0, forward, activation, name, {})

    def lstm(self, x: Activation, units: int, name: str = "lstm") -> Activation:
        """UNIDIRECTIONAL_SEQUENCE_LSTM over a (1, time, features) input, batch-major, as the
        TFLite converter writes the integer LSTM: every gate, no peephole, projection or layer
        normalisation; int8 weights (symmetric, per tensor), int32 biases at input scale x weight
        scale; a variable int16 cell state whose scale is the power of two covering the
        calibrated cell; a variable output state quantized like the output; five intermediates
        (the gates' at Q3.12, then the hidden state's, the output's quantization). The output
        state starts at 0 (TFLite resets it to its zero point). An int16 input makes the 16x8
        LSTM: int16 activations and output state, int64 biases."""
        dtype = _same_dtype("UNIDIRECTIONAL_SEQUENCE_LSTM", x)
        if not isinstance(units, (int, np.integer)) or units < 1:
            raise InvalidArgumentError(f"units must be a positive int, got {units!r}")
        if len(x.shape) != 3:
            raise InvalidArgumentError(f"lstm takes a (1, time, features) input, got {list(x.shape)}")
        _, steps, features = x.shape
        stem = self._name(name)
        b = self.builder
        # Gates i, f, c, o; the forget gate's bias starts at 1 (keep the cell by default).
        w_in = self.rng.normal(0.0, 1.0 / math.sqrt(features), size=(4, units, features)).astype(np.float32)
        w_rec = self.rng.normal(0.0, 0.5 / math.sqrt(units), size=(4, units, units)).astype(np.float32)
        bias = self.rng.normal(0.0, 0.1, size=(4, units)).astype(np.float32) + np.array([0, 1, 0, 0])[:, None]
        w_scale = (np.maximum(np.abs(w_in).reshape(4, -1).max(axis=1), 1e-12) / 127.0).astype(np.float32)
        r_scale = (np.maximum(np.abs(w_rec).reshape(4, -1).max(axis=1), 1e-12) / 127.0).astype(np.float32)
        w_in_q = np.clip(np.round(w_in / w_scale[:, None, None]), -127, 127).astype(np.int8)
        w_rec_q = np.clip(np.round(w_rec / r_scale[:, None, None]), -127, 127).astype(np.int8)
        b_scale = x.scale * w_scale.astype(np.float64)
        b_q = np.round(bias / b_scale[:, None]).astype(np.int32 if dtype == "int8" else np.int64)
        # The float pass with the quantized weights.
        w_in_f = w_in_q * w_scale[:, None, None]
        w_rec_f = w_rec_q * r_scale[:, None, None]
        bias_f = (b_q * b_scale[:, None]).astype(np.float32)
        sigmoid = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
        h = np.zeros((self.samples, units), np.float32)
        c = np.zeros((self.samples, units), np.float32)
        outputs, cells = [], []
        for t in range(steps):
            z = [x.value[:, t] @ w_in_f[k].T + h @ w_rec_f[k].T + bias_f[k] for k in range(4)]
            c = sigmoid(z[1]) * c + sigmoid(z[0]) * np.tanh(z[2])
            h = sigmoid(z[3]) * np.tanh(c)
            outputs.append(h)
            cells.append(c)
        y = np.stack(outputs, axis=1)
        out_q = range_quantization(*calibrated_range(y, None), dtype)
        cell_scale = 2.0 ** math.ceil(math.log2(max(float(np.abs(np.stack(cells)).max()), 1e-6) / 32767.0))
        gates = ("input", "forget", "cell", "output")
        wi = [b.add_constant(f"{stem}/input_to_{g}_weights", w_in_q[k], "int8", quantization(w_scale[k], 0))
              for k, g in enumerate(gates)]
        wr = [b.add_constant(f"{stem}/recurrent_to_{g}_weights", w_rec_q[k], "int8", quantization(r_scale[k], 0))
              for k, g in enumerate(gates)]
        bias_dtype = "int32" if dtype == "int8" else "int64"
        bi = [b.add_constant(f"{stem}/{g}_gate_bias", b_q[k], bias_dtype, quantization(b_scale[k], 0))
              for k, g in enumerate(gates)]
        h_state = b.add_tensor(f"{stem}/output_state", (1, units), dtype, out_q)
        c_state = b.add_tensor(f"{stem}/cell_state", (1, units), "int16", quantization(cell_scale, 0))
        for t in (h_state, c_state):
            b.tensors[t].is_variable = True
        intermediates = [b.add_tensor(f"{stem}/{g}_gate_intermediate", (0,), "int16", quantization(2.0**-12, 0))
                         for g in gates]
        intermediates.append(b.add_tensor(f"{stem}/hidden_intermediate", (0,), dtype, out_q))
        out = self._activation(stem, y, out_q, dtype=dtype)
        absent = [-1, -1, -1]
        op = b.add_operator("UNIDIRECTIONAL_SEQUENCE_LSTM",
                            [x.index, *wi, *wr, *absent, *bi, -1, -1, h_state, c_state, -1, -1, -1, -1], [out.index],
                            {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0,
                             "time_major": False}, version=_VERSION[dtype]["UNIDIRECTIONAL_SEQUENCE_LSTM"])
        b.operators[op].intermediates = tuple(intermediates)
        return out

    def dense(self, x: Activation, units: int, activation: str | None = None, name: str = "dense") -> Activation:
        """FULLY_CONNECTED over the last axis keeping the others (keep_num_dims), as the converter
        writes a Keras Dense on a sequence: (1, ..., depth) -> (1, ..., units)."""
        _same_dtype("FULLY_CONNECTED", x)
        _check_activation(activation)
        if not isinstance(units, (int, np.integer)) or units < 1:
            raise InvalidArgumentError(f"units must be a positive int, got {units!r}")
        depth = x.shape[-1]
        w = self.rng.normal(0.0, math.sqrt(2.0 / depth), size=(units, depth)).astype(np.float32)

        def forward(weights):
            return x.value @ weights.T

        return self._weighted("FULLY_CONNECTED", x, w, 0, forward, activation, name, {"keep_num_dims": True})

    def batch_matmul(self, a: Activation, b: Activation, adj_x: bool = False, adj_y: bool = False,
                     name: str = "batch_matmul") -> Activation:
        """BATCH_MATMUL of two activations (attention's scores and weighted values), output calibrated."""
        _require_int8("BATCH_MATMUL", a, b)
        x = np.swapaxes(a.value, -1, -2) if adj_x else a.value
        y = np.swapaxes(b.value, -1, -2) if adj_y else b.value
        if x.shape[-1] != y.shape[-2]:
            raise InvalidArgumentError(f"cannot multiply {list(a.shape)} by {list(b.shape)} (adj_x {adj_x}, adj_y {adj_y})")
        out = self._activation(self._name(name), x @ y)
        self._op("BATCH_MATMUL", [a.index, b.index], [out.index], {"adj_x": bool(adj_x), "adj_y": bool(adj_y)})
        return out

    # -- layers without weights --------------------------------------------------------------
    def pool(
        self, x: Activation, kind: str = "MAX", size=(2, 2), stride=(2, 2), padding: str = "VALID", name: str = "pool"
    ) -> Activation:
        _same_dtype(f"{kind}_POOL_2D", x)
        if kind not in ("MAX", "AVERAGE"):
            raise InvalidArgumentError(f"pool kind must be 'MAX' or 'AVERAGE', got {kind!r}")
        size, stride = _pair(size, "pool size"), _pair(stride, "pool stride")
        _check_padding(padding)
        opcode = f"{kind}_POOL_2D"
        self._spatial(x, opcode)
        for axis in (1, 2):
            output_size(x.shape[axis], size[axis - 1], stride[axis - 1], 1, padding)
        value = pool_float(x.value, kind, size, stride, padding)
        out = self._activation(self._name(name), value, x.quant, dtype=x.dtype)
        self._op(
            opcode,
            [x.index],
            [out.index],
            {
                "padding": padding,
                "stride_h": stride[0],
                "stride_w": stride[1],
                "filter_height": size[0],
                "filter_width": size[1],
                "fused_activation_function": "NONE",
            },
            dtype=x.dtype,
        )
        return out

    def _elementwise(self, opcode: str, a: Activation, b: Activation, activation: str | None, name: str) -> Activation:
        dtype = _same_dtype(opcode, a, b)
        _check_activation(activation)
        if len(a.shape) != len(b.shape):
            raise InvalidArgumentError(f"{opcode} operands need the same rank, got {list(a.shape)} and {list(b.shape)}")
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            shapes = f"{list(a.shape)} and {list(b.shape)}"
            raise InvalidArgumentError(f"{opcode} operand shapes {shapes} do not broadcast") from None
        value = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply}[opcode](a.value, b.value)
        value = apply_activation(value, activation)
        out = self._activation(self._name(name), value, activation=activation, dtype=dtype)
        options = {"fused_activation_function": activation or "NONE"}
        if dtype == "int16" and opcode != "MUL":
            options["pot_scale_int16"] = False  # any scales, as the converter writes 16x8 ADD/SUB
        self._op(opcode, [a.index, b.index], [out.index], options, dtype=dtype)
        return out

    def add(self, a: Activation, b: Activation, activation: str | None = None, name: str = "add") -> Activation:
        return self._elementwise("ADD", a, b, activation, name)

    def mul(self, a: Activation, b: Activation, activation: str | None = None, name: str = "mul") -> Activation:
        return self._elementwise("MUL", a, b, activation, name)

    def sub(self, a: Activation, b: Activation, activation: str | None = None, name: str = "sub") -> Activation:
        return self._elementwise("SUB", a, b, activation, name)

    # -- activation layers (int8 or int16) ----------------------------------------------------
    def leaky_relu(
        self, x: Activation, alpha: float = 0.2, same_quantization: bool = False, name: str = "leaky_relu"
    ) -> Activation:
        """LEAKY_RELU: x for x >= 0, alpha * x below.

        With `same_quantization` the output keeps the input's quantization (for int16, Vela then
        runs it as the NPU's elementwise LRELU); otherwise it is calibrated (Vela lowers int16 to
        a MUL and a MAXIMUM, int8 to a 256-entry LUT either way).
        """
        alpha = float(alpha)
        if not math.isfinite(alpha):
            raise InvalidArgumentError(f"alpha must be a finite number, got {alpha!r}")
        value = np.where(x.value >= 0, x.value, alpha * x.value)
        quant = x.quant if same_quantization else None
        out = self._activation(self._name(name), value, quant, dtype=x.dtype)
        self._op("LEAKY_RELU", [x.index], [out.index], {"alpha": alpha}, dtype=x.dtype)
        return out

    def _fixed_output(
        self, opcode: str, x: Activation, value: np.ndarray, name: str, options: dict | None = None
    ) -> Activation:
        scale, zero_point = _FIXED_OUTPUT[(opcode, x.dtype)]
        out = self._activation(self._name(name), value, quantization(scale, zero_point), dtype=x.dtype)
        self._op(opcode, [x.index], [out.index], options, dtype=x.dtype)
        return out

    def tanh(self, x: Activation, name: str = "tanh") -> Activation:
        """TANH; the output quantization is the one TFLite requires (2^-15 for int16, 2^-7 for int8)."""
        return self._fixed_output("TANH", x, np.tanh(x.value), name)

    def logistic(self, x: Activation, name: str = "logistic") -> Activation:
        """LOGISTIC (sigmoid); TFLite's required output quantization (2^-15 for int16, 2^-8 - 128 for int8)."""
        return self._fixed_output("LOGISTIC", x, 1.0 / (1.0 + np.exp(-x.value)), name)

    def softmax(self, x: Activation, beta: float = 1.0, name: str = "softmax") -> Activation:
        """SOFTMAX over the last axis; TFLite's required output quantization (2^-15 for int16,
        2^-8 - 128 for int8)."""
        z = float(beta) * (x.value - x.value.max(axis=-1, keepdims=True))
        e = np.exp(z)
        return self._fixed_output("SOFTMAX", x, e / e.sum(axis=-1, keepdims=True), name, {"beta": float(beta)})

    def gelu(self, x: Activation, approximate: bool = False, name: str = "gelu") -> Activation:
        """GELU, x * Phi(x) (the tanh form with `approximate`), int8 with a calibrated output."""
        _require_int8("GELU", x)
        v = x.value.astype(np.float64)
        if approximate:
            value = 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))
        else:
            value = 0.5 * v * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0)))
        out = self._activation(self._name(name), value)
        self._op("GELU", [x.index], [out.index], {"approximate": bool(approximate)})
        return out

    def exp(self, x: Activation, name: str = "exp") -> Activation:
        """EXP with a calibrated output (Vela runs it as a LUT: interpolating 16-bit for int16)."""
        out = self._activation(self._name(name), np.exp(x.value), dtype=x.dtype)
        self._op("EXP", [x.index], [out.index], dtype=x.dtype)
        return out

    def hard_swish(self, x: Activation, name: str = "hard_swish") -> Activation:
        """HARD_SWISH, x * relu6(x + 3) / 6 (MobileNetV3), int8 with a calibrated output."""
        _require_int8("HARD_SWISH", x)
        out = self._activation(self._name(name), x.value * np.clip(x.value + 3.0, 0.0, 6.0) / 6.0, dtype=x.dtype)
        self._op("HARD_SWISH", [x.index], [out.index], dtype=x.dtype)
        return out

    def elu(self, x: Activation, name: str = "elu") -> Activation:
        """ELU, x above 0 and exp(x) - 1 below, int8 with a calibrated output (Vela: a 256-entry LUT)."""
        _require_int8("ELU", x)
        out = self._activation(self._name(name), np.where(x.value > 0, x.value, np.expm1(np.minimum(x.value, 0))))
        self._op("ELU", [x.index], [out.index])
        return out

    def log(self, x: Activation, name: str = "log") -> Activation:
        """LOG, int8 or int16, calibrated over the positive inputs (Vela: a 256-entry or an
        interpolating 16-bit LUT). At and below 0 TFLite gives the output type's minimum, and so
        does the calibration batch."""
        dtype = _same_dtype("LOG", x)
        positive = x.value > 0
        logs = np.log(np.where(positive, x.value, 1.0))
        quant = range_quantization(*calibrated_range(logs[positive], None), dtype)
        floor = (np.iinfo(dtype).min - quant.zero_point[0]) * quant.scale[0]
        out = self._activation(self._name(name), np.where(positive, logs, floor), quant, dtype=dtype)
        self._op("LOG", [x.index], [out.index], dtype=dtype)
        return out

    def neg(self, x: Activation, name: str = "neg") -> Activation:
        """NEG, int8 or int16. TFLite negates the stored codes and ignores the quantization, so
        the output keeps the input's."""
        dtype = _same_dtype("NEG", x)
        out = self._activation(self._name(name), -x.value, x.quant, dtype=dtype)
        self._op("NEG", [x.index], [out.index], dtype=dtype)
        return out

    def prelu(self, x: Activation, alpha_range: tuple[float, float] = (-0.5, 0.5), name: str = "prelu") -> Activation:
        """PRELU with a random per-channel alpha in `alpha_range` (int8, one quantization for
        the whole alpha tensor, as TFLite's kernel requires), output calibrated."""
        _require_int8("PRELU", x)
        alpha = self.rng.uniform(*alpha_range, size=(1, 1, x.shape[-1])).astype(np.float32)
        a_quant = range_quantization(min(float(alpha.min()), 0.0), max(float(alpha.max()), 0.0))
        a_q = np.clip(np.round(alpha / a_quant.scale[0]) + a_quant.zero_point[0], -128, 127).astype(np.int8)
        a_real = (a_q.astype(np.float32) - a_quant.zero_point[0]) * a_quant.scale[0]
        stem = self._name(name)
        ai = self.builder.add_constant(f"{stem}/alpha", a_q, "int8", a_quant)
        out = self._activation(stem, np.where(x.value >= 0, x.value, x.value * a_real), dtype=x.dtype)
        self._op("PRELU", [x.index, ai], [out.index], dtype=x.dtype)
        return out

    def pad(self, x: Activation, paddings, name: str = "pad") -> Activation:
        """PAD with zeros (the zero point in int8); `paddings` is one (before, after) pair per axis."""
        _require_int8("PAD", x)
        pads = np.asarray(paddings)
        if pads.shape != (len(x.shape), 2) or pads.dtype.kind not in "iu" or np.any(pads < 0):
            raise InvalidArgumentError(
                f"paddings must be {len(x.shape)} (before, after) pairs of non-negative ints, got {paddings!r}"
            )
        if pads[0].any():
            raise InvalidArgumentError("paddings must not pad the batch axis: use (0, 0) first")
        value = np.pad(x.value, [(0, 0)] + [tuple(p) for p in pads[1:].tolist()])
        out = self._activation(self._name(name), value, x.quant)
        pi = self.builder.add_constant(self._name(name + "/paddings"), pads.astype(np.int32), "int32")
        self._op("PAD", [x.index, pi], [out.index])
        return out

    def reshape(self, x: Activation, shape: Sequence[int], name: str = "reshape") -> Activation:
        _same_dtype("RESHAPE", x)
        shape = tuple(int(d) for d in shape)
        if math.prod(shape) != math.prod(x.shape) or shape[0] != 1:
            raise InvalidArgumentError(f"cannot reshape {list(x.shape)} to {list(shape)}")
        out = self._activation(self._name(name), x.value.reshape((self.samples,) + shape[1:]), x.quant, dtype=x.dtype)
        si = self.builder.add_constant(self._name(name + "/shape"), np.asarray(shape, np.int32), "int32")
        self._op("RESHAPE", [x.index, si], [out.index], {"new_shape": np.asarray(shape, np.int32)}, dtype=x.dtype)
        return out

    def transpose_conv2d(self, x: Activation, filters: int, kernel=(2, 2), stride=(2, 2), padding: str = "SAME",
                         name: str = "transpose_conv") -> Activation:
        """TRANSPOSE_CONV (a learned upsampling), linear, per-channel weights along dimension 0."""
        if not isinstance(filters, (int, np.integer)) or filters < 1:
            raise InvalidArgumentError(f"filters must be a positive int, got {filters!r}")
        kernel, stride = _pair(kernel, "kernel"), _pair(stride, "stride")
        _require_int8("TRANSPOSE_CONV", x)
        _check_padding(padding)
        self._spatial(x, "TRANSPOSE_CONV")
        cin = x.shape[3]
        # Each output sums about kh * kw * cin / (sh * sw) taps.
        std = math.sqrt(2.0 * stride[0] * stride[1] / (kernel[0] * kernel[1] * cin))
        w = self.rng.normal(0.0, std, size=(filters, *kernel, cin)).astype(np.float32)

        def forward(weights):
            return transpose_conv2d_float(x.value, weights, stride, padding)

        options = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1]}
        return self._weighted("TRANSPOSE_CONV", x, w, 0, forward, None, name, options)

    def mean(self, x: Activation, axes: Sequence[int] = (1, 2), keep_dims: bool = True, name: str = "mean") -> Activation:
        """MEAN over `axes` (Keras' GlobalAveragePooling2D as TF2 converts it), output calibrated."""
        _require_int8("MEAN", x)
        rank = len(x.shape)
        axes = tuple(sorted({int(a) % rank for a in axes}))
        if 0 in axes:
            raise InvalidArgumentError("mean must not reduce the batch axis")
        out = self._activation(self._name(name), x.value.mean(axis=axes, keepdims=bool(keep_dims)))
        ai = self.builder.add_constant(self._name(name + "/axes"), np.asarray(axes, np.int32))
        self._op("MEAN", [x.index, ai], [out.index], {"keep_dims": bool(keep_dims)})
        return out

    def reduce(self, x: Activation, opcode: str = "SUM", axes: Sequence[int] = (1, 2), keep_dims: bool = True,
               name: str = "reduce") -> Activation:
        """SUM (output calibrated), REDUCE_MAX or REDUCE_MIN (output in the input's quantization,
        as TFLite's kernel requires) over `axes` of an int8 or int16 map."""
        functions = {"SUM": np.sum, "REDUCE_MAX": np.max, "REDUCE_MIN": np.min}
        if opcode not in functions:
            raise InvalidArgumentError(f"reduce opcode must be one of {list(functions)}, got {opcode!r}")
        rank = len(x.shape)
        axes = tuple(sorted({int(a) % rank for a in axes}))
        if 0 in axes:
            raise InvalidArgumentError(f"{opcode} must not reduce the batch axis")
        value = functions[opcode](x.value, axis=axes, keepdims=bool(keep_dims))
        out = self._activation(self._name(name), value, None if opcode == "SUM" else x.quant, dtype=x.dtype)
        ai = self.builder.add_constant(self._name(name + "/axes"), np.asarray(axes, np.int32))
        self._op(opcode, [x.index, ai], [out.index], {"keep_dims": bool(keep_dims)}, dtype=x.dtype)
        return out

    def resize(self, x: Activation, method: str = "BILINEAR", name: str = "resize",
               size: tuple[int, int] | None = None) -> Activation:
        """2x upsampling: RESIZE_BILINEAR with half-pixel centres (Keras' UpSampling2D) or
        RESIZE_NEAREST_NEIGHBOR; the output keeps the input's quantization, as TFLite's
        kernels interpolate stored codes. `size`: a 1x1 input resized to (height, width), every
        output pixel the input's (DeepLab's image pooling branch)."""
        _require_int8(f"RESIZE_{method}", x)
        self._spatial(x, f"RESIZE_{method}")
        if size is not None and x.shape[1:3] != (1, 1):
            raise InvalidArgumentError(f"resize to a size takes a 1x1 input, got shape {list(x.shape)}")
        if method not in ("BILINEAR", "NEAREST"):
            raise InvalidArgumentError(f"resize method must be 'BILINEAR' or 'NEAREST', got {method!r}")
        if size is not None:
            value = np.broadcast_to(x.value, (x.value.shape[0], *size, x.value.shape[3])).copy()
            options = {"align_corners": False, "half_pixel_centers": method == "BILINEAR"}
            opcode = "RESIZE_BILINEAR" if method == "BILINEAR" else "RESIZE_NEAREST_NEIGHBOR"
        elif method == "BILINEAR":
            opcode, value = "RESIZE_BILINEAR", upsample_bilinear_float(x.value)
            options = {"align_corners": False, "half_pixel_centers": True}
        else:
            opcode, value = "RESIZE_NEAREST_NEIGHBOR", x.value.repeat(2, axis=1).repeat(2, axis=2)
            options = {"align_corners": False, "half_pixel_centers": False}
        out = self._activation(self._name(name), value, x.quant)
        si = self.builder.add_constant(self._name(name + "/size"), np.asarray(value.shape[1:3], np.int32))
        self._op(opcode, [x.index, si], [out.index], options)
        return out

    def requantize(self, x: Activation, quant: Quantization, name: str = "requantize") -> Activation:
        """QUANTIZE from one int8 quantization to another (what the converter inserts where
        an operator needs its inputs in one quantization)."""
        out = self._activation(self._name(name), x.value, quant)
        self._op("QUANTIZE", [x.index], [out.index])
        return out

    def concatenation(self, xs: Sequence[Activation], axis: int = -1, name: str = "concat") -> Activation:
        """CONCATENATION; TFLite's int8 kernel wants every input in the output's quantization, so
        inputs calibrated otherwise are requantized first (as the converter does)."""
        _require_int8("CONCATENATION", *xs)
        if len({len(x.shape) for x in xs}) != 1:
            raise InvalidArgumentError("concatenation inputs need the same rank")
        axis %= len(xs[0].shape)
        value = np.concatenate([x.value for x in xs], axis=axis)
        quant = range_quantization(*calibrated_range(value, None))
        inputs = self._requantized(xs, quant, name)
        out = self._activation(self._name(name), value, quant)
        self._op("CONCATENATION", inputs, [out.index], {"axis": axis, "fused_activation_function": "NONE"})
        return out

    def _requantized(self, xs: Sequence[Activation], quant: Quantization, name: str) -> list[int]:
        """Each of `xs` in `quant`: itself, or a QUANTIZE of it where its own differs."""
        same = lambda x: x.quant.scale[0] == quant.scale[0] and x.quant.zero_point[0] == quant.zero_point[0]  # noqa: E731
        return [x.index if same(x) else self.requantize(x, quant, name=f"{name}/requantize").index for x in xs]

    # -- data movement: the quantization passes through --------------------------------------
    def strided_slice(self, x: Activation, begin: Sequence[int], end: Sequence[int], strides: Sequence[int],
                      name: str = "strided_slice") -> Activation:
        """STRIDED_SLICE with positive strides and no masks; `begin`, `end`, `strides` cover
        every axis, the batch axis whole."""
        dtype = _same_dtype("STRIDED_SLICE", x)
        if (not len(begin) == len(end) == len(strides) == len(x.shape) or any(st < 1 for st in strides)
                or (begin[0], end[0], strides[0]) != (0, 1, 1)):
            raise InvalidArgumentError(f"begin, end and strides need {len(x.shape)} entries, strides positive, "
                                       "the batch axis whole")
        # The calibration batch is the first axis of the values.
        value = x.value[(slice(None), *(slice(b, e, st) for b, e, st in zip(begin[1:], end[1:], strides[1:])))]
        if value.size == 0:
            raise InvalidArgumentError(
                f"the slice {list(begin)}:{list(end)}:{list(strides)} of {list(x.shape)} is empty")
        out = self._activation(self._name(name), value, x.quant, dtype=dtype)
        consts = [self.builder.add_constant(self._name(f"{name}/{what}"), np.asarray(v, np.int32), "int32")
                  for what, v in (("begin", begin), ("end", end), ("strides", strides))]
        self._op("STRIDED_SLICE", [x.index, *consts], [out.index], {"begin_mask": 0, "end_mask": 0}, dtype=dtype)
        return out

    def split(self, x: Activation, parts: int, axis: int, name: str = "split") -> list[Activation]:
        """SPLIT into `parts` equal parts along `axis`."""
        _require_int8("SPLIT", x)
        axis %= len(x.shape)
        if axis == 0 or parts < 1 or x.shape[axis] % parts:
            raise InvalidArgumentError(f"cannot split axis {axis} of {list(x.shape)} into {parts} parts")
        outs = [self._activation(self._name(name), v, x.quant) for v in np.split(x.value, parts, axis=axis)]
        ai = self.builder.add_constant(self._name(name + "/axis"), np.asarray(axis, np.int32), "int32")
        self._op("SPLIT", [ai, x.index], [o.index for o in outs], {"num_splits": parts})
        return outs

    def split_v(self, x: Activation, sizes: Sequence[int], axis: int, name: str = "split_v") -> list[Activation]:
        """SPLIT_V into parts of the given `sizes` along `axis`."""
        _require_int8("SPLIT_V", x)
        axis %= len(x.shape)
        sizes = [int(v) for v in sizes]
        if axis == 0 or not sizes or min(sizes) < 1 or sum(sizes) != x.shape[axis]:
            raise InvalidArgumentError(f"cannot split axis {axis} of {list(x.shape)} into parts of {sizes}")
        values = np.split(x.value, np.cumsum(sizes)[:-1], axis=axis)
        outs = [self._activation(self._name(name), v, x.quant) for v in values]
        si = self.builder.add_constant(self._name(name + "/sizes"), np.asarray(sizes, np.int32), "int32")
        ai = self.builder.add_constant(self._name(name + "/axis"), np.asarray(axis, np.int32), "int32")
        self._op("SPLIT_V", [x.index, si, ai], [o.index for o in outs], {"num_splits": len(sizes)})
        return outs

    def slice(self, x: Activation, begin: Sequence[int], size: Sequence[int], name: str = "slice") -> Activation:
        """SLICE: `size` elements from `begin` on every axis (-1: to the end), the batch axis whole."""
        _require_int8("SLICE", x)
        begin, size = [int(v) for v in begin], [int(v) for v in size]
        ends = [d if n == -1 else b + n for b, n, d in zip(begin, size, x.shape)]
        if (not len(begin) == len(size) == len(x.shape) or begin[0] != 0 or ends[0] != 1
                or any(b < 0 or e <= b or e > d for b, e, d in zip(begin, ends, x.shape))):
            raise InvalidArgumentError(f"cannot slice {list(x.shape)} from {begin} by {size}")
        value = x.value[(slice(None), *(slice(b, e) for b, e in zip(begin[1:], ends[1:])))]
        out = self._activation(self._name(name), value, x.quant)
        consts = [self.builder.add_constant(self._name(f"{name}/{what}"), np.asarray(v, np.int32), "int32")
                  for what, v in (("begin", begin), ("size", size))]
        self._op("SLICE", [x.index, *consts], [out.index])
        return out

    def pack(self, xs: Sequence[Activation], axis: int, name: str = "pack") -> Activation:
        """PACK (stack) along a new `axis`; TFLite's int8 kernel wants every input in the output's
        quantization, so inputs calibrated otherwise are requantized first."""
        _require_int8("PACK", *xs)
        if len({x.shape for x in xs}) != 1 or not 1 <= axis <= len(xs[0].shape):
            raise InvalidArgumentError(f"cannot pack {[list(x.shape) for x in xs]} along axis {axis}")
        value = np.stack([x.value for x in xs], axis=axis)
        quant = range_quantization(*calibrated_range(value, None))
        inputs = self._requantized(xs, quant, name)
        out = self._activation(self._name(name), value, quant)
        self._op("PACK", inputs, [out.index], {"values_count": len(xs), "axis": axis})
        return out

    def unpack(self, x: Activation, axis: int, name: str = "unpack") -> list[Activation]:
        """UNPACK (unstack) along `axis`: one output per element of it, one rank lower."""
        _require_int8("UNPACK", x)
        axis %= len(x.shape)
        if axis == 0:
            raise InvalidArgumentError("UNPACK of the batch axis is not supported: the batch is 1")
        outs = [self._activation(self._name(name), np.take(x.value, i, axis=axis), x.quant)
                for i in range(x.shape[axis])]
        self._op("UNPACK", [x.index], [o.index for o in outs], {"num": len(outs), "axis": axis})
        return outs

    def expand_dims(self, x: Activation, axis: int, name: str = "expand_dims") -> Activation:
        """EXPAND_DIMS: a new axis of 1 at `axis` (after the batch)."""
        _require_int8("EXPAND_DIMS", x)
        if not 1 <= axis <= len(x.shape):
            raise InvalidArgumentError(f"cannot insert axis {axis} into {list(x.shape)}")
        out = self._activation(self._name(name), np.expand_dims(x.value, axis), x.quant)
        ai = self.builder.add_constant(self._name(name + "/axis"), np.asarray(axis, np.int32), "int32")
        self._op("EXPAND_DIMS", [x.index, ai], [out.index])
        return out

    def squeeze(self, x: Activation, axes: Sequence[int], name: str = "squeeze") -> Activation:
        """SQUEEZE the given axes of 1 (after the batch)."""
        _require_int8("SQUEEZE", x)
        axes = [int(a) % len(x.shape) for a in axes]
        if not axes or any(a == 0 or x.shape[a] != 1 for a in axes):
            raise InvalidArgumentError(f"cannot squeeze axes {axes} of {list(x.shape)}")
        out = self._activation(self._name(name), np.squeeze(x.value, axis=tuple(axes)), x.quant)
        self._op("SQUEEZE", [x.index], [out.index], {"squeeze_dims": np.asarray(axes, np.int32)})
        return out

    def arg_max(self, x: Activation, axis: int = -1, name: str = "arg_max") -> Activation:
        """ARG_MAX along `axis` (the axis dropped): an int32 map of indices, unquantized, that no
        int8 layer can read, so it ends its branch (an output)."""
        _require_int8("ARG_MAX", x)
        axis %= len(x.shape)
        if axis == 0:
            raise InvalidArgumentError("ARG_MAX over the batch axis is not supported: the batch is 1")
        value = np.argmax(x.value, axis=axis).astype(np.float32)
        stem = self._name(name)
        index = self.builder.add_tensor(stem, (1,) + value.shape[1:], "int32", None)
        ai = self.builder.add_constant(f"{stem}/axis", np.asarray([axis], np.int32), "int32")
        self._op("ARG_MAX", [x.index, ai], [index], {"output_type": 2})  # TensorType INT32
        return Activation(index, value, quantization(1.0, 0), "int32")

    def relu(self, x: Activation, kind: str = "RELU", name: str = "relu") -> Activation:
        """A ReLU as its own operator (RELU, RELU6, RELU_N1_TO_1 or RELU_0_TO_1), the output
        calibrated: the NPU runs it as a rescale and a clamp."""
        _require_int8(kind, x)
        bounds = {"RELU": (0.0, np.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}
        if kind not in bounds:
            raise InvalidArgumentError(f"kind must be one of {list(bounds)}, got {kind!r}")
        out = self._activation(self._name(name), np.clip(x.value, *bounds[kind]))
        self._op(kind, [x.index], [out.index])
        return out

    def transpose(self, x: Activation, perm: Sequence[int], name: str = "transpose") -> Activation:
        _require_int8("TRANSPOSE", x)
        perm = tuple(int(p) for p in perm)
        if sorted(perm) != list(range(len(x.shape))) or perm[0] != 0:
            raise InvalidArgumentError(f"perm must permute the axes of {list(x.shape)} and keep the batch first")
        out = self._activation(self._name(name), np.transpose(x.value, perm), x.quant)
        pi = self.builder.add_constant(self._name(name + "/perm"), np.asarray(perm, np.int32), "int32")
        self._op("TRANSPOSE", [x.index, pi], [out.index])
        return out

    def mirror_pad(self, x: Activation, paddings, mode: str = "REFLECT", name: str = "mirror_pad") -> Activation:
        """MIRROR_PAD (REFLECT or SYMMETRIC); `paddings` is one (before, after) pair per axis."""
        _require_int8("MIRROR_PAD", x)
        pads = np.asarray(paddings)
        limit = 1 if mode == "REFLECT" else 0  # REFLECT repeats no edge: pads stop short of it
        if (mode not in ("REFLECT", "SYMMETRIC") or pads.shape != (len(x.shape), 2) or np.any(pads < 0)
                or pads[0].any() or any(p > d - limit for d, pair in zip(x.shape, pads) for p in pair)):
            raise InvalidArgumentError(f"cannot {mode}-pad {list(x.shape)} by {paddings!r}")
        value = np.pad(x.value, [(0, 0)] + [tuple(p) for p in pads[1:].tolist()], mode=mode.lower())
        out = self._activation(self._name(name), value, x.quant)
        pi = self.builder.add_constant(self._name(name + "/paddings"), pads.astype(np.int32), "int32")
        self._op("MIRROR_PAD", [x.index, pi], [out.index], {"mode": 0 if mode == "REFLECT" else 1})
        return out

    def padv2(self, x: Activation, paddings, value: float = 0.0, name: str = "padv2") -> Activation:
        """PADV2 with the real `value` (quantized as the input, clamped to its type); `paddings`
        is one (before, after) pair per axis, the batch's (0, 0). int8 or int16."""
        dtype = _same_dtype("PADV2", x)
        pads = np.asarray(paddings)
        if pads.shape != (len(x.shape), 2) or pads.dtype.kind not in "iu" or np.any(pads < 0) or pads[0].any():
            raise InvalidArgumentError(f"cannot pad {list(x.shape)} by {paddings!r} (a non-negative pair per axis, "
                                       "the batch's (0, 0))")
        info = np.iinfo(dtype)
        scale, zero_point = float(x.quant.scale[0]), int(x.quant.zero_point[0])
        code = int(np.clip(zero_point + np.round(float(value) / scale), info.min, info.max))
        value = np.pad(x.value, [(0, 0)] + [tuple(p) for p in pads[1:].tolist()],
                       constant_values=(code - zero_point) * scale)
        out = self._activation(self._name(name), value, x.quant, dtype=dtype)
        pi = self.builder.add_constant(self._name(name + "/paddings"), pads.astype(np.int32), "int32")
        ci = self.builder.add_constant(self._name(name + "/value"), np.asarray([code], dtype), dtype, x.quant)
        self._op("PADV2", [x.index, pi, ci], [out.index], dtype=dtype)
        return out

    def tile(self, x: Activation, multiples: Sequence[int], name: str = "tile") -> Activation:
        """TILE by one positive multiple per axis, the batch's 1. int8 or int16."""
        dtype = _same_dtype("TILE", x)
        m = tuple(int(k) for k in multiples)
        if len(m) != len(x.shape) or any(k < 1 for k in m) or m[0] != 1:
            raise InvalidArgumentError(f"multiples must be one positive int per axis of {list(x.shape)}, the batch's 1")
        out = self._activation(self._name(name), np.tile(x.value, m), x.quant, dtype=dtype)
        mi = self.builder.add_constant(self._name(name + "/multiples"), np.asarray(m, np.int32), "int32")
        self._op("TILE", [x.index, mi], [out.index], dtype=dtype)
        return out

    def reverse_v2(self, x: Activation, axes: Sequence[int], name: str = "reverse") -> Activation:
        """REVERSE_V2 along `axes` (TFLite's kernel takes a contiguous run of them). int8 or int16."""
        dtype = _same_dtype("REVERSE_V2", x)
        rank = len(x.shape)
        ax = sorted(int(a) % rank for a in axes) if all(-rank <= int(a) < rank for a in axes) else []
        if not ax or ax != list(range(ax[0], ax[0] + len(ax))):
            raise InvalidArgumentError(f"axes must be distinct, contiguous axes of {list(x.shape)}, got {axes!r}")
        out = self._activation(self._name(name), np.flip(x.value, axis=tuple(ax)), x.quant, dtype=dtype)
        ai = self.builder.add_constant(self._name(name + "/axes"), np.asarray(list(axes), np.int32), "int32")
        self._op("REVERSE_V2", [x.index, ai], [out.index], dtype=dtype)
        return out

    # -- more elementwise layers ------------------------------------------------------------
    def _extremum(self, opcode: str, a: Activation, b: Activation, name: str) -> Activation:
        """MAXIMUM/MINIMUM: TFLite compares codes, so the converter gives both operands and the
        output one quantization (the output's calibrated one): an operand calibrated otherwise
        is requantized first."""
        _require_int8(opcode, a, b)
        value = (np.maximum if opcode == "MAXIMUM" else np.minimum)(a.value, b.value)
        quant = range_quantization(*calibrated_range(value, None))
        inputs = self._requantized((a, b), quant, name)
        out = self._activation(self._name(name), value, quant)
        self._op(opcode, inputs, [out.index])
        return out

    def maximum(self, a: Activation, b: Activation, name: str = "maximum") -> Activation:
        return self._extremum("MAXIMUM", a, b, name)

    def minimum(self, a: Activation, b: Activation, name: str = "minimum") -> Activation:
        return self._extremum("MINIMUM", a, b, name)

    def squared_difference(self, a: Activation, b: Activation, name: str = "squared_difference") -> Activation:
        _require_int8("SQUARED_DIFFERENCE", a, b)
        out = self._activation(self._name(name), np.square(a.value - b.value))
        self._op("SQUARED_DIFFERENCE", [a.index, b.index], [out.index])
        return out

    def abs(self, x: Activation, name: str = "abs") -> Activation:
        _require_int8("ABS", x)
        out = self._activation(self._name(name), np.abs(x.value))
        self._op("ABS", [x.index], [out.index])
        return out

    def rsqrt(self, x: Activation, name: str = "rsqrt") -> Activation:
        """RSQRT of a non-negative map (the reference stops on a code below the zero point); its
        calibration takes the least positive value as one quantum."""
        _require_int8("RSQRT", x)
        if x.value.min() < 0:
            raise InvalidArgumentError("RSQRT needs a non-negative input (ABS, a ReLU or a LOGISTIC before it)")
        out = self._activation(self._name(name), 1.0 / np.sqrt(np.maximum(x.value, x.quant.scale[0])))
        self._op("RSQRT", [x.index], [out.index])
        return out

    def constant(self, value: float, name: str = "constant", rank: int = 4) -> Activation:
        """A scalar int8 constant (1, ..., 1) of `rank` axes, symmetric: its own code is +-127."""
        value = float(value)
        if not math.isfinite(value) or value == 0.0:
            raise InvalidArgumentError(f"constant must be finite and non-zero, got {value!r}")
        quant = quantization(abs(value) / 127.0, 0)
        shape = (1,) * rank
        code = np.full(shape, 127 if value > 0 else -127, np.int8)
        index = self.builder.add_constant(self._name(name), code, "int8", quant)
        return Activation(index, np.full(shape, code.flat[0] * quant.scale[0], np.float32), quant)

    def vector(self, values: np.ndarray, rank: int, name: str = "vector") -> Activation:
        """An int8 constant (1, ..., 1, C) of `values` along the last axis (a layer norm's gamma
        or beta), symmetric over its largest magnitude."""
        values = np.asarray(values, np.float64).reshape(-1)
        if not np.all(np.isfinite(values)) or not np.abs(values).max() > 0:
            raise InvalidArgumentError("vector values must be finite and not all zero")
        quant = quantization(float(np.abs(values).max()) / 127.0, 0)
        shape = (1,) * (rank - 1) + (values.size,)
        codes = np.clip(np.round(values / quant.scale[0]), -127, 127).astype(np.int8).reshape(shape)
        index = self.builder.add_constant(self._name(name), codes, "int8", quant)
        return Activation(index, (codes.astype(np.float32) * quant.scale[0]), quant)

    @staticmethod
    def _spatial(x: Activation, opcode: str) -> None:
        if len(x.shape) != 4:
            raise InvalidArgumentError(f"{opcode} needs an NHWC input of rank 4, got shape {list(x.shape)}")
