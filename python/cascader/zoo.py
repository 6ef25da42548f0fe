"""A zoo of real-architecture int8 TFLite models, built from scratch and deterministically.

Every model has per-channel int8 weights (symmetric, zero point 0; quantized dimension 0 for
CONV_2D and FULLY_CONNECTED, 3 for DEPTHWISE_CONV_2D), int32 biases with scale
input_scale * weight_scale, int8 activations and fused ReLU / ReLU6 as the architecture has
them. Weights are random (He initialisation with a batch norm folded in) but the quantization
is realistic: every activation's scale and zero point come from the ranges a float forward
pass observes on a calibration batch (see `cascader._zoo_layers`). Inputs cover [-1, 1].

The networks end at their logits: the final softmax of the originals is left out, so the int8
output spreads over its range and varies with the input, which is what tests need.

Same arguments (including `seed`) give the same model bytes on the same numpy build.

>>> from cascader import zoo, save_model
>>> model = zoo.mobilenet_v2(alpha=0.35, resolution=96)
>>> data = save_model(model)
"""

from __future__ import annotations

import inspect
import math
from typing import Callable, Sequence

from ._zoo_layers import ACTIVATIONS, Activation, CalibratedNet
from .errors import InvalidArgumentError
from .tflite import Model

__all__ = [
    "ACTIVATIONS",
    "MODELS",
    "add",
    "conv2d",
    "depthwise_conv2d",
    "ds_cnn_kws",
    "fc_autoencoder",
    "fully_connected",
    "get",
    "mobilenet_v1",
    "mobilenet_v2",
    "mobilenet_v3_blocks",
    "mul",
    "pad",
    "pool",
    "resnet8",
    "unet",
    "attention_pooling",
    "blazeface_blocks",
    "deeplab_aspp",
    "kws_mean",
    "mobilenet_v2_nchw",
    "unet_128",
    "lstm_kws",
    "single_op_cases",
    "SINGLE_OP_CASES",
    "ACTIVATION_OP_CASES",
    "REDUCE_OP_CASES",
    "activation_op_cases",
    "elu",
    "reduce",
    "reduce_op_cases",
    "exp",
    "gelu",
    "hard_swish",
    "leaky_relu",
    "log",
    "logistic",
    "neg",
    "prelu",
    "softmax",
    "tanh",
    "transformer_block",
]

Shape = Sequence[int]


def _positive_int(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"{what} must be a positive int, got {value!r}")
    return value


def _check_image_network(alpha: float, resolution: int, classes: int, channels: int) -> None:
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not alpha > 0:
        raise InvalidArgumentError(f"alpha (the width multiplier) must be a positive number, got {alpha!r}")
    _positive_int(resolution, "resolution")
    _positive_int(classes, "classes")
    _positive_int(channels, "channels")


def _global_average_pool(net: CalibratedNet, x: Activation) -> Activation:
    """AVERAGE_POOL_2D over the whole feature map, strided by its size as Keras writes it."""
    return net.pool(x, "AVERAGE", size=x.shape[1:3], stride=x.shape[1:3], padding="VALID", name="global_pool")


def _classifier_head(net: CalibratedNet, x: Activation, classes: int) -> Activation:
    """Global average pool, flatten, dense logits: the head of MobileNetV2 and the MLPerf Tiny nets."""
    x = _global_average_pool(net, x)
    x = net.reshape(x, (1, x.shape[3]), name="flatten")
    return net.fully_connected(x, classes, activation=None, name="logits")


# -- named networks ----------------------------------------------------------------------------


def mobilenet_v1(alpha: float = 0.25, resolution: int | tuple[int, int] = 96, classes: int = 2, channels: int = 3,
                 seed: int = 0, output_stride: int = 32) -> Model:
    """MobileNetV1 (Howard et al. 2017) with width multiplier `alpha`.

    A 3x3/2 stem conv and 13 depthwise-separable blocks (3x3 depthwise + 1x1 pointwise, ReLU6,
    SAME padding), then global average pool and a 1x1 conv classifier reshaped to (1, classes).
    Channel counts are int(filters * alpha), as in Keras. `resolution`: the input's side, or
    its (height, width). `output_stride` 16 keeps the last block at the 16th of the input, its
    depthwise stride 1 and the next one dilated 2, as the dense-prediction backbones run it
    (PoseNet's MobileNetV1-0.75 at 353 x 481).
    """
    return _mobilenet_v1(alpha, resolution, classes, channels, seed, output_stride).build()


def _mobilenet_v1(alpha: float, resolution: int | tuple[int, int], classes: int, channels: int, seed: int,
                  output_stride: int = 32) -> CalibratedNet:
    height, width = (resolution, resolution) if isinstance(resolution, int) else tuple(resolution)
    _check_image_network(alpha, height, classes, channels)
    _positive_int(width, "resolution")
    if output_stride not in (16, 32):
        raise InvalidArgumentError(f"output_stride must be 16 or 32, got {output_stride!r}")
    shape = f"{height}x{width}" if height != width else f"{height}"
    stride_note = "" if output_stride == 32 else f" output_stride={output_stride}"
    net = CalibratedNet(seed, description=f"cascader.zoo mobilenet_v1 alpha={alpha} resolution={shape}{stride_note}")
    x = net.input((1, height, width, channels))
    x = net.conv2d(x, max(1, int(32 * alpha)), (3, 3), (2, 2), activation="RELU6", name="conv1")
    blocks = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
    for i, (filters, stride) in enumerate(blocks, start=1):
        dilation = 1
        if output_stride == 16 and i >= 12:  # the last stride 2 becomes a dilation of what follows
            stride, dilation = 1, (1 if i == 12 else 2)
        x = net.depthwise_conv2d(x, (3, 3), (stride, stride), dilation=(dilation, dilation), activation="RELU6",
                                 name=f"block{i}/depthwise")
        x = net.conv2d(x, max(1, int(filters * alpha)), (1, 1), activation="RELU6", name=f"block{i}/pointwise")
    x = _global_average_pool(net, x)
    x = net.conv2d(x, classes, (1, 1), activation=None, name="logits")
    net.output(net.reshape(x, (1, classes), name="flatten"))
    return net


def _make_divisible(value: float, divisor: int = 8) -> int:
    """Round channel counts as the MobileNetV2 reference does: to a multiple of 8, never below 90%."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


# (expansion t, output channels c, repeats n, first stride s), from the MobileNetV2 paper, table 2.
MOBILENET_V2_BLOCKS = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)
)


def mobilenet_v2(alpha: float = 0.35, resolution: int = 96, classes: int = 2, channels: int = 3, seed: int = 0) -> Model:
    """MobileNetV2 (Sandler et al. 2018) with width multiplier `alpha`.

    Stem conv 3x3/2, then the 17 inverted-residual blocks of `MOBILENET_V2_BLOCKS`: 1x1 expand
    (ReLU6; absent when t = 1), 3x3 depthwise (ReLU6), 1x1 linear projection, and a residual ADD
    exactly when the block has stride 1 and equal input and output channels. Then the 1x1 conv
    to 1280 channels (ReLU6; scaled by alpha only when alpha > 1), global average pool and the
    dense classifier. Channel rounding follows Keras' `_make_divisible`.
    """
    return _mobilenet_v2(alpha, resolution, classes, channels, seed).build()


def mobilenet_v2_nchw(alpha: float = 0.35, resolution: int = 96, classes: int = 2, channels: int = 3,
                      seed: int = 0) -> Model:
    """`mobilenet_v2` as a PyTorch export starts it: an NCHW input (1, channels, resolution,
    resolution) and a TRANSPOSE to NHWC before the stem conv (the converters keep PyTorch's
    input layout and transpose once)."""
    return _mobilenet_v2_nchw(alpha, resolution, classes, channels, seed).build()


def _mobilenet_v2_nchw(alpha: float, resolution: int, classes: int, channels: int, seed: int) -> CalibratedNet:
    return _mobilenet_v2(alpha, resolution, classes, channels, seed, nchw=True)


def _mobilenet_v2(alpha: float, resolution: int, classes: int, channels: int, seed: int,
                  nchw: bool = False) -> CalibratedNet:
    _check_image_network(alpha, resolution, classes, channels)
    layout = " NCHW" if nchw else ""
    net = CalibratedNet(seed, description=f"cascader.zoo mobilenet_v2{layout} alpha={alpha} resolution={resolution}")
    if nchw:
        x = net.transpose(net.input((1, channels, resolution, resolution)), (0, 2, 3, 1), name="to_nhwc")
    else:
        x = net.input((1, resolution, resolution, channels))
    x = net.conv2d(x, _make_divisible(32 * alpha), (3, 3), (2, 2), activation="RELU6", name="conv1")
    block = 0
    for t, c, n, s in MOBILENET_V2_BLOCKS:
        out_channels = _make_divisible(c * alpha)
        for repeat in range(n):
            stride = s if repeat == 0 else 1
            prefix = f"block{block}"
            y = x
            if t != 1:
                y = net.conv2d(y, x.shape[3] * t, (1, 1), activation="RELU6", name=f"{prefix}/expand")
            y = net.depthwise_conv2d(y, (3, 3), (stride, stride), activation="RELU6", name=f"{prefix}/depthwise")
            y = net.conv2d(y, out_channels, (1, 1), activation=None, name=f"{prefix}/project")
            if stride == 1 and x.shape[3] == out_channels:
                y = net.add(x, y, name=f"{prefix}/add")
            x = y
            block += 1
    last = _make_divisible(1280 * alpha) if alpha > 1.0 else 1280
    x = net.conv2d(x, last, (1, 1), activation="RELU6", name="conv_last")
    net.output(_classifier_head(net, x, classes))
    return net


def resnet8(seed: int = 0) -> Model:
    """ResNet-8 of MLPerf Tiny image classification (CIFAR-10: 32x32x3 in, 10 classes out).

    Stem conv 3x3 16 (ReLU), then three residual stacks of 16, 32 and 64 filters: conv 3x3
    (stride 1, 2, 2; ReLU), conv 3x3, the shortcut (identity, then 1x1/2 convs), ADD with fused
    ReLU. Then 8x8 average pool, flatten and a dense layer of 10 logits. Three ADDs.
    """
    return _resnet8(seed).build()


def _resnet8(seed: int) -> CalibratedNet:
    net = CalibratedNet(seed, description="cascader.zoo resnet8 (MLPerf Tiny IC)")
    x = net.input((1, 32, 32, 3))
    x = net.conv2d(x, 16, (3, 3), activation="RELU", name="conv1")
    for stack, (filters, stride) in enumerate(((16, 1), (32, 2), (64, 2)), start=1):
        prefix = f"stack{stack}"
        y = net.conv2d(x, filters, (3, 3), (stride, stride), activation="RELU", name=f"{prefix}/conv_a")
        y = net.conv2d(y, filters, (3, 3), activation=None, name=f"{prefix}/conv_b")
        if stride != 1 or x.shape[3] != filters:
            x = net.conv2d(x, filters, (1, 1), (stride, stride), activation=None, name=f"{prefix}/shortcut")
        x = net.add(x, y, activation="RELU", name=f"{prefix}/add")
    net.output(_classifier_head(net, x, 10))
    return net


def ds_cnn_kws(seed: int = 0) -> Model:
    """DS-CNN of MLPerf Tiny keyword spotting (49x10x1 MFCC in, 12 classes out).

    Conv 10x4/2 with 64 filters (ReLU), four depthwise-separable blocks (3x3 depthwise + 1x1
    conv 64, each ReLU), 25x5 average pool, flatten and a dense layer of 12 logits.
    """
    return _ds_cnn_kws(seed).build()


def _ds_cnn_body(net: CalibratedNet) -> Activation:
    """DS-CNN up to its head: the 49x10x1 MFCC input, conv 10x4/2 and four separable blocks."""
    x = net.input((1, 49, 10, 1))
    x = net.conv2d(x, 64, (10, 4), (2, 2), activation="RELU", name="conv1")
    for i in range(1, 5):
        x = net.depthwise_conv2d(x, (3, 3), activation="RELU", name=f"block{i}/depthwise")
        x = net.conv2d(x, 64, (1, 1), activation="RELU", name=f"block{i}/pointwise")
    return x


def _ds_cnn_kws(seed: int) -> CalibratedNet:
    net = CalibratedNet(seed, description="cascader.zoo ds_cnn_kws (MLPerf Tiny KWS)")
    net.output(_classifier_head(net, _ds_cnn_body(net), 12))
    return net


def fc_autoencoder(seed: int = 0) -> Model:
    """The fully connected autoencoder of MLPerf Tiny anomaly detection.

    640 inputs, four dense layers of 128 (ReLU), a bottleneck of 8 (ReLU), four dense layers
    of 128 (ReLU) and a linear dense output of 640.
    """
    return _fc_autoencoder(seed).build()


def _fc_autoencoder(seed: int) -> CalibratedNet:
    net = CalibratedNet(seed, description="cascader.zoo fc_autoencoder (MLPerf Tiny AD)")
    x = net.input((1, 640))
    for i, units in enumerate([128] * 4 + [8] + [128] * 4, start=1):
        x = net.fully_connected(x, units, activation="RELU", name=f"dense{i}")
    net.output(net.fully_connected(x, 640, activation=None, name="dense_out"))
    return net


# The first six bottlenecks of MobileNetV3-Small (Howard et al. 2019, table 2): kernel,
# expansion channels, output channels, squeeze-excite, nonlinearity, stride. With random
# weights the int8 output stops tracking the float pass much deeper (correlation 0.5-0.7 at
# eight blocks, over 0.9 at six).
MOBILENET_V3_BLOCKS = (
    (3, 16, 16, True, "RELU", 2), (3, 72, 24, False, "RELU", 2), (3, 88, 24, False, "RELU", 1),
    (5, 96, 40, True, "HARD_SWISH", 2), (5, 240, 40, True, "HARD_SWISH", 1), (5, 240, 40, True, "HARD_SWISH", 1),
)


def mobilenet_v3_blocks(alpha: float = 0.5, resolution: int = 64, classes: int = 10, channels: int = 3,
                        seed: int = 0) -> Model:
    """MobileNetV3-Small's stem, first six bottlenecks and head (Howard et al. 2019), width `alpha`.

    Stem conv 3x3/2 with hard-swish, the bottlenecks of `MOBILENET_V3_BLOCKS`: 1x1
    expansion (absent when it would not widen), depthwise k x k, squeeze-excite where the table
    has it (MEAN over H and W, 1x1 conv to a quarter of the channels with ReLU, 1x1 conv back
    with the hard sigmoid's + 3 in its bias and RELU6 fused, MUL by 1/6, then a broadcast MUL
    of the features),
    1x1 linear projection, residual ADD when shapes allow. Head: 1x1 conv to 576 * alpha with
    hard-swish, MEAN, 1x1 conv to 1024 with hard-swish, 1x1 conv to the logits.
    """
    return _mobilenet_v3_blocks(alpha, resolution, classes, channels, seed).build()


def _activate(net: CalibratedNet, x: Activation, nonlinearity: str, name: str) -> Activation:
    return net.hard_swish(x, name=f"{name}/hard_swish") if nonlinearity == "HARD_SWISH" else x


def _squeeze_excite(net: CalibratedNet, x: Activation, name: str) -> Activation:
    s = net.mean(x, name=f"{name}/squeeze")
    s = net.conv2d(s, _make_divisible(x.shape[3] / 4), (1, 1), activation="RELU", name=f"{name}/reduce")
    # The hard sigmoid relu6(s + 3) / 6 as the converter leaves it: the + 3 folded into the
    # convolution's bias, the RELU6 fused, the / 6 a MUL by a constant.
    s = net.conv2d(s, x.shape[3], (1, 1), activation="RELU6", bias_offset=3.0, name=f"{name}/expand")
    gate = net.mul(s, net.constant(1.0 / 6.0, name=f"{name}/sixth"), name=f"{name}/gate")
    return net.mul(x, gate, name=f"{name}/excite")


def _mobilenet_v3_blocks(alpha: float, resolution: int, classes: int, channels: int, seed: int) -> CalibratedNet:
    _check_image_network(alpha, resolution, classes, channels)
    net = CalibratedNet(seed, description=f"cascader.zoo mobilenet_v3_blocks alpha={alpha} resolution={resolution}")
    x = net.input((1, resolution, resolution, channels))
    x = net.hard_swish(net.conv2d(x, _make_divisible(16 * alpha), (3, 3), (2, 2), activation=None, name="conv1"),
                       name="conv1/hard_swish")
    for i, (kernel, expansion, out, se, nonlinearity, stride) in enumerate(MOBILENET_V3_BLOCKS):
        prefix, y = f"block{i}", x
        relu = "RELU" if nonlinearity == "RELU" else None
        expanded = _make_divisible(expansion * alpha)
        if expanded != x.shape[3]:
            y = _activate(net, net.conv2d(y, expanded, (1, 1), activation=relu, name=f"{prefix}/expand"),
                          nonlinearity, f"{prefix}/expand")
        y = net.depthwise_conv2d(y, (kernel, kernel), (stride, stride), activation=relu, name=f"{prefix}/depthwise")
        y = _activate(net, y, nonlinearity, f"{prefix}/depthwise")
        if se:
            y = _squeeze_excite(net, y, f"{prefix}/se")
        y = net.conv2d(y, _make_divisible(out * alpha), (1, 1), activation=None, name=f"{prefix}/project")
        if stride == 1 and y.shape[3] == x.shape[3]:
            y = net.add(x, y, name=f"{prefix}/add")
        x = y
    x = net.hard_swish(net.conv2d(x, _make_divisible(576 * alpha), (1, 1), activation=None, name="conv_last"),
                       name="conv_last/hard_swish")
    x = net.mean(x, name="global_pool")
    x = net.hard_swish(net.conv2d(x, 1024, (1, 1), activation=None, name="head"), name="head/hard_swish")
    x = net.conv2d(x, classes, (1, 1), activation=None, name="logits")
    net.output(net.reshape(x, (1, classes), name="flatten"))
    return net


def unet(resolution: int = 32, classes: int = 4, channels: int = 3, filters: int = 8, seed: int = 0,
         upsampling: str = "NEAREST") -> Model:
    """A small U-Net (Ronneberger et al. 2015) for per-pixel classification.

    Encoder: two 3x3 convs (ReLU) at each of three scales, 2x2 max pools between them
    (`filters`, 2x, 4x channels). Decoder: a 2x2/2 TRANSPOSE_CONV up to the middle scale,
    CONCATENATION with its skip, two 3x3 convs; a 2x nearest-neighbour RESIZE (Keras'
    UpSampling2D default) up to the full scale, a 1x1 conv, CONCATENATION with the first skip,
    two 3x3 convs; a 1x1 conv to the class logits.
    `resolution` must be a multiple of 4. `upsampling="BILINEAR"`: the full-scale upsampling is
    a RESIZE_BILINEAR with half-pixel centres (segmentation heads' choice) instead.
    """
    return _unet(resolution, classes, channels, filters, seed, upsampling).build()


def _unet(resolution: int, classes: int, channels: int, filters: int, seed: int,
          upsampling: str = "NEAREST") -> CalibratedNet:
    _check_image_network(1.0, resolution, classes, channels)
    _positive_int(filters, "filters")
    if resolution % 4:
        raise InvalidArgumentError(f"the U-Net halves its input twice: resolution must be a multiple of 4, got {resolution}")
    described = f" upsampling={upsampling}" if upsampling != "NEAREST" else ""
    net = CalibratedNet(seed, description=f"cascader.zoo unet resolution={resolution}{described}")

    def double_conv(x: Activation, width: int, name: str) -> Activation:
        x = net.conv2d(x, width, (3, 3), name=f"{name}/conv_a")
        return net.conv2d(x, width, (3, 3), name=f"{name}/conv_b")

    x = net.input((1, resolution, resolution, channels))
    skip1 = double_conv(x, filters, "encoder1")
    skip2 = double_conv(net.pool(skip1, name="encoder2/pool"), 2 * filters, "encoder2")
    x = double_conv(net.pool(skip2, name="bottleneck/pool"), 4 * filters, "bottleneck")
    x = net.transpose_conv2d(x, 2 * filters, name="decoder2/up")
    x = double_conv(net.concatenation([x, skip2], name="decoder2/concat"), 2 * filters, "decoder2")
    x = net.conv2d(net.resize(x, upsampling, name="decoder1/up"), filters, (1, 1), name="decoder1/reduce")
    x = double_conv(net.concatenation([x, skip1], name="decoder1/concat"), filters, "decoder1")
    net.output(net.conv2d(x, classes, (1, 1), activation=None, name="logits"))
    return net


def unet_128(classes: int = 4, channels: int = 3, filters: int = 8, seed: int = 0, upsampling: str = "NEAREST") -> Model:
    """`unet` at 128x128: full-scale maps of 128x128x`filters` and a 2 * `filters` wide
    concatenation, the size at which the skips and the upsampling dominate the SRAM."""
    return _unet_128(classes, channels, filters, seed, upsampling).build()


def _unet_128(classes: int, channels: int, filters: int, seed: int, upsampling: str = "NEAREST") -> CalibratedNet:
    return _unet(128, classes, channels, filters, seed, upsampling)


# BlazeFace's single BlazeBlocks (Bazarevsky et al. 2019), output channels and stride, as the
# front-facing detector widens them (24 -> 28 -> 32 ...).
BLAZE_BLOCKS = ((24, 1), (28, 1), (32, 2), (36, 1), (42, 1), (48, 2), (56, 1), (64, 1), (72, 1), (80, 1), (88, 1))


def blazeface_blocks(resolution: int = 128, anchors: int = 2, channels: int = 3, seed: int = 0) -> Model:
    """A BlazeFace-style detector backbone (Bazarevsky et al. 2019) as TFLite's converter writes it.

    Stem conv 5x5/2 (24, ReLU), then the BlazeBlocks of `BLAZE_BLOCKS`: depthwise 5x5 and a
    linear 1x1 projection, added to a shortcut with ReLU fused. A block that widens pads its
    shortcut's channels with zeros (a PAD on the channel axis, 24 -> 28); a strided one
    max-pools the shortcut 2x2 first. Head: a 1x1 conv of `anchors` scores per position,
    reshaped to (1, positions * anchors, 1) as the detector's classifier outputs them.
    """
    return _blazeface_blocks(resolution, anchors, channels, seed).build()


def _blazeface_blocks(resolution: int, anchors: int, channels: int, seed: int) -> CalibratedNet:
    _check_image_network(1.0, resolution, anchors, channels)
    if resolution % 8:
        raise InvalidArgumentError(f"BlazeFace halves its input three times: resolution must be a multiple of 8, "
                                   f"got {resolution}")
    net = CalibratedNet(seed, description=f"cascader.zoo blazeface_blocks resolution={resolution}")
    x = net.input((1, resolution, resolution, channels))
    x = net.conv2d(x, 24, (5, 5), (2, 2), activation="RELU", name="conv1")
    for i, (out, stride) in enumerate(BLAZE_BLOCKS):
        prefix = f"blaze{i}"
        y = net.depthwise_conv2d(x, (5, 5), (stride, stride), activation=None, name=f"{prefix}/depthwise")
        y = net.conv2d(y, out, (1, 1), activation=None, name=f"{prefix}/project")
        shortcut = x
        if stride == 2:
            shortcut = net.pool(shortcut, "MAX", name=f"{prefix}/shortcut_pool")
        if out > x.shape[3]:
            shortcut = net.pad(shortcut, ((0, 0), (0, 0), (0, 0), (0, out - x.shape[3])), name=f"{prefix}/channel_pad")
        x = net.add(shortcut, y, activation="RELU", name=f"{prefix}/add")
    _, h, w, _ = x.shape
    scores = net.conv2d(x, anchors, (1, 1), activation=None, name="classifier")
    net.output(net.reshape(scores, (1, h * w * anchors, 1), name="classifier/flatten"))
    return net


def deeplab_aspp(resolution: int = 32, filters: int = 16, classes: int = 4, channels: int = 3, seed: int = 0) -> Model:
    """DeepLabV3's head over a small stem (Chen et al. 2017, as the MobileNetV2 DeepLabV3 TFLite
    models write it): conv 3x3/2 (`filters`, ReLU6) and a depthwise-separable block, then
    atrous spatial pyramid pooling: a 1x1 conv branch beside the image pooling branch (a global
    average pool, a 1x1 conv, and RESIZE_BILINEAR of its 1x1 output back to the map's size),
    concatenated along the channels, projected 1x1 and classified 1x1."""
    return _deeplab_aspp(resolution, filters, classes, channels, seed).build()


def _deeplab_aspp(resolution: int, filters: int, classes: int, channels: int, seed: int) -> CalibratedNet:
    _check_image_network(1.0, resolution, classes, channels)
    if resolution % 2:
        raise InvalidArgumentError(f"the stem halves the input: resolution must be even, got {resolution}")
    net = CalibratedNet(seed, description=f"cascader.zoo deeplab_aspp resolution={resolution}")
    x = net.input((1, resolution, resolution, channels))
    x = net.conv2d(x, filters, (3, 3), (2, 2), activation="RELU6", name="stem")
    x = net.depthwise_conv2d(x, (3, 3), activation="RELU6", name="block/depthwise")
    x = net.conv2d(x, 2 * filters, (1, 1), activation="RELU6", name="block/project")
    _, h, w, _ = x.shape
    branch = net.conv2d(x, 2 * filters, (1, 1), activation="RELU", name="aspp0")
    pooled = net.pool(x, "AVERAGE", size=(h, w), stride=(h, w), name="image_pooling/pool")
    pooled = net.conv2d(pooled, 2 * filters, (1, 1), activation="RELU", name="image_pooling")
    pooled = net.resize(pooled, "BILINEAR", name="image_pooling/resize", size=(h, w))
    x = net.concatenation([branch, pooled], name="aspp/concat")
    x = net.conv2d(x, 2 * filters, (1, 1), activation="RELU", name="concat_projection")
    net.output(net.conv2d(x, classes, (1, 1), activation=None, name="logits"))
    return net


def attention_pooling(resolution: int = 32, classes: int = 10, channels: int = 3, seed: int = 0) -> Model:
    """A small CNN whose head pools with softmax attention over positions.

    Conv 3x3/2 (16, ReLU), two depthwise-separable blocks (32 and 64 channels, the first with
    stride 2), then the attention block: a 1x1 conv scores every position, RESHAPE to one row,
    SOFTMAX over the positions, RESHAPE back, MUL broadcasting the weights over the channels,
    MEAN over H and W (the weighted sum, scaled by 1 / positions), and a dense logits layer.
    """
    return _attention_pooling(resolution, classes, channels, seed).build()


def _attention_pooling(resolution: int, classes: int, channels: int, seed: int) -> CalibratedNet:
    _check_image_network(1.0, resolution, classes, channels)
    net = CalibratedNet(seed, description=f"cascader.zoo attention_pooling resolution={resolution}")
    x = net.input((1, resolution, resolution, channels))
    x = net.conv2d(x, 16, (3, 3), (2, 2), name="conv1")
    for i, (width, stride) in enumerate(((32, 2), (64, 1)), start=1):
        x = net.depthwise_conv2d(x, (3, 3), (stride, stride), name=f"block{i}/depthwise")
        x = net.conv2d(x, width, (1, 1), name=f"block{i}/pointwise")
    _, h, w, _ = x.shape
    scores = net.conv2d(x, 1, (1, 1), activation=None, name="attention/score")
    weights = net.softmax(net.reshape(scores, (1, h * w), name="attention/flatten"), name="attention/softmax")
    weights = net.reshape(weights, (1, h, w, 1), name="attention/unflatten")
    x = net.mean(net.mul(x, weights, name="attention/weigh"), keep_dims=False, name="attention/pool")
    net.output(net.fully_connected(x, classes, name="logits"))
    return net


def kws_mean(seed: int = 0) -> Model:
    """A keyword spotter (49x10x1 MFCC in, 12 classes out) with the head TF2 converts
    GlobalAveragePooling2D to: DS-CNN's conv 10x4/2 (64, ReLU) and four depthwise-separable
    blocks, then MEAN over H and W and a dense layer of 12 logits."""
    return _kws_mean(seed).build()


def _kws_mean(seed: int) -> CalibratedNet:
    net = CalibratedNet(seed, description="cascader.zoo kws_mean (DS-CNN, MEAN head)")
    x = net.mean(_ds_cnn_body(net), keep_dims=False, name="global_pool")
    net.output(net.fully_connected(x, 12, activation=None, name="logits"))
    return net


def lstm_kws(steps: int = 49, features: int = 10, units: int = 64, classes: int = 12, dtype: str = "int8",
             seed: int = 0) -> Model:
    """A keyword spotter on an LSTM (49 frames x 10 MFCC in, 12 classes out): one
    UNIDIRECTIONAL_SEQUENCE_LSTM of `units` cells over the frames, its last output, a dense
    layer of logits and a softmax; `dtype` "int8", or "int16" for the 16x8 model (int16
    activations, int8 weights). Its state carries from one inference to the next, as a
    streaming spotter's does."""
    for value, what in ((steps, "steps"), (features, "features"), (units, "units"), (classes, "classes")):
        _positive_int(value, what)
    if dtype not in ("int8", "int16"):
        raise InvalidArgumentError(f"dtype must be 'int8' or 'int16' (16x8), got {dtype!r}")
    return _lstm_kws(steps, features, units, classes, dtype, seed).build()


def _lstm_kws(steps: int, features: int, units: int, classes: int, dtype: str, seed: int) -> CalibratedNet:
    net = CalibratedNet(seed, description=f"cascader.zoo lstm_kws {dtype} (LSTM, last step, dense, softmax)")
    x = net.lstm(net.input((1, steps, features), dtype=dtype), units)
    last = net.strided_slice(x, (0, steps - 1, 0), (1, steps, units), (1, 1, 1), name="last_step")
    logits = net.fully_connected(net.reshape(last, (1, units), name="flatten"), classes, name="logits")
    net.output(net.softmax(logits))
    return net


def transformer_block(sequence: int = 16, width: int = 32, heads: int = 2, expansion: int = 2, seed: int = 0) -> Model:
    """A transformer encoder block (Vaswani et al. 2017, post-norm) as TFLite's converter writes it.

    Input (1, sequence, width). Multi-head self-attention: dense Q, K, V projections, each
    RESHAPE to (1, sequence, heads, width / heads) and TRANSPOSE to (1, heads, sequence, width /
    heads); Q MUL 1 / sqrt(width / heads); scores BATCH_MATMUL(Q, K, adj_y); SOFTMAX; BATCH_MATMUL
    with V; TRANSPOSE and RESHAPE back, a dense output projection, a residual ADD and a layer
    norm. Feed-forward: dense (width * expansion), GELU, dense (width), residual ADD, layer
    norm. Each layer norm is the converter's MEAN, SQUARED_DIFFERENCE, MEAN, ADD epsilon,
    RSQRT, MUL gamma, MUL, MUL, SUB from beta, ADD.
    """
    return _transformer_block(sequence, width, heads, expansion, seed).build()


def _layer_norm(net: CalibratedNet, x: Activation, name: str, epsilon: float = 1e-3) -> Activation:
    rank, depth = len(x.shape), x.shape[-1]
    mean = net.mean(x, axes=(rank - 1,), name=f"{name}/mean")
    variance = net.mean(net.squared_difference(x, mean, name=f"{name}/squared_difference"), axes=(rank - 1,),
                        name=f"{name}/variance")
    inverse = net.rsqrt(net.add(variance, net.constant(epsilon, f"{name}/epsilon", rank), name=f"{name}/add_epsilon"),
                        name=f"{name}/rsqrt")
    gamma = net.vector(net.rng.uniform(0.75, 1.25, depth), rank, name=f"{name}/gamma")
    beta = net.vector(net.rng.normal(0.0, 0.25, depth), rank, name=f"{name}/beta")
    scale = net.mul(inverse, gamma, name=f"{name}/scale")
    shifted = net.sub(beta, net.mul(mean, scale, name=f"{name}/mean_scaled"), name=f"{name}/shift")
    return net.add(net.mul(x, scale, name=f"{name}/x_scaled"), shifted, name=f"{name}/output")


def _transformer_block(sequence: int, width: int, heads: int, expansion: int, seed: int) -> CalibratedNet:
    for value, what in ((sequence, "sequence"), (width, "width"), (heads, "heads"), (expansion, "expansion")):
        _positive_int(value, what)
    if width % heads:
        raise InvalidArgumentError(f"width {width} must be a multiple of heads {heads}")
    depth = width // heads
    net = CalibratedNet(seed, description=f"cascader.zoo transformer_block sequence={sequence} width={width} "
                                          f"heads={heads}")
    x = net.input((1, sequence, width))

    def split_heads(t: Activation, name: str) -> Activation:
        t = net.reshape(t, (1, sequence, heads, depth), name=f"{name}/split")
        return net.transpose(t, (0, 2, 1, 3), name=f"{name}/heads")

    q = split_heads(net.dense(x, width, name="attention/query"), "attention/query")
    k = split_heads(net.dense(x, width, name="attention/key"), "attention/key")
    v = split_heads(net.dense(x, width, name="attention/value"), "attention/value")
    q = net.mul(q, net.constant(1.0 / math.sqrt(depth), "attention/scale"), name="attention/query_scaled")
    scores = net.batch_matmul(q, k, adj_y=True, name="attention/scores")
    context = net.batch_matmul(net.softmax(scores, name="attention/softmax"), v, name="attention/context")
    context = net.transpose(context, (0, 2, 1, 3), name="attention/merge")
    context = net.reshape(context, (1, sequence, width), name="attention/merged")
    x = _layer_norm(net, net.add(x, net.dense(context, width, name="attention/output"), name="attention/residual"),
                    "attention/norm")
    hidden = net.gelu(net.dense(x, width * expansion, name="ffn/expand"), name="ffn/gelu")
    x = _layer_norm(net, net.add(x, net.dense(hidden, width, name="ffn/project"), name="ffn/residual"), "ffn/norm")
    net.output(x)
    return net


MODELS: dict[str, Callable[..., Model]] = {
    "mobilenet_v1": mobilenet_v1,
    "mobilenet_v2": mobilenet_v2,
    "resnet8": resnet8,
    "ds_cnn_kws": ds_cnn_kws,
    "fc_autoencoder": fc_autoencoder,
    "mobilenet_v3_blocks": mobilenet_v3_blocks,
    "unet": unet,
    "attention_pooling": attention_pooling,
    "kws_mean": kws_mean,
    "blazeface_blocks": blazeface_blocks,
    "mobilenet_v2_nchw": mobilenet_v2_nchw,
    "unet_128": unet_128,
    "lstm_kws": lstm_kws,
    "transformer_block": transformer_block,
}


def get(name: str, **kwargs) -> Model:
    """Build the named network of `MODELS` with its keyword arguments.

    Raises
    ------
    InvalidArgumentError
        If `name` is not a zoo network (the message lists the valid names).
    """
    try:
        factory = MODELS[name]
    except (KeyError, TypeError):
        raise InvalidArgumentError(f"no zoo model named {name!r}; valid names: {', '.join(sorted(MODELS))}") from None
    parameters = inspect.signature(factory).parameters
    unknown = sorted(set(kwargs) - set(parameters))
    if unknown:
        raise InvalidArgumentError(f"{name} takes no argument(s) {unknown}; its arguments are {list(parameters)}")
    return factory(**kwargs)


# -- single-operator models ------------------------------------------------------------------

# The second operand of ADD and MUL gets its own range, so the kernel must rescale both inputs.
_SECOND_OPERAND_RANGE = (-0.5, 2.0)


def _single_op_net(
    method: str,
    input_shapes: Sequence[Shape],
    seed: int,
    dtype: str = "int8",
    input_range: tuple[float, float] = (-1.0, 1.0),
    **params,
) -> CalibratedNet:
    """A network of one `CalibratedNet` layer (`method`) applied to fresh model inputs; the
    first input is `dtype` and covers `input_range`."""
    net = CalibratedNet(seed, description=f"cascader.zoo {method}")
    inputs = [net.input(input_shapes[0], *input_range, name="input", dtype=dtype)]
    for shape in input_shapes[1:]:
        inputs.append(net.input(shape, *_SECOND_OPERAND_RANGE, name="input_b"))
    net.output(getattr(net, method)(*inputs, **params))
    return net


def conv2d(
    input_shape: Shape,
    filters: int,
    kernel=(3, 3),
    stride=(1, 1),
    padding: str = "SAME",
    dilation=(1, 1),
    activation: str | None = "RELU",
    seed: int = 0,
) -> Model:
    """One CONV_2D on an NHWC int8 input."""
    params = dict(filters=filters, kernel=kernel, stride=stride, padding=padding, dilation=dilation, activation=activation)
    return _single_op_net("conv2d", [input_shape], seed, **params).build()


def depthwise_conv2d(
    input_shape: Shape,
    kernel=(3, 3),
    stride=(1, 1),
    padding: str = "SAME",
    depth_multiplier: int = 1,
    dilation=(1, 1),
    activation: str | None = "RELU",
    seed: int = 0,
) -> Model:
    """One DEPTHWISE_CONV_2D on an NHWC int8 input."""
    params = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation, activation=activation)
    params["depth_multiplier"] = depth_multiplier
    return _single_op_net("depthwise_conv2d", [input_shape], seed, **params).build()


def pool(input_shape: Shape, kind: str = "MAX", size=(2, 2), stride=(2, 2), padding: str = "VALID", seed: int = 0) -> Model:
    """One MAX_POOL_2D or AVERAGE_POOL_2D (`kind` 'MAX' or 'AVERAGE')."""
    return _single_op_net("pool", [input_shape], seed, kind=kind, size=size, stride=stride, padding=padding).build()


def add(shape_a: Shape, shape_b: Shape | None = None, activation: str | None = None, seed: int = 0) -> Model:
    """One ADD of two int8 inputs; `shape_b` broadcasts against `shape_a` (default: the same)."""
    return _single_op_net("add", [shape_a, shape_a if shape_b is None else shape_b], seed, activation=activation).build()


def mul(shape_a: Shape, shape_b: Shape | None = None, activation: str | None = None, seed: int = 0) -> Model:
    """One MUL of two int8 inputs; `shape_b` broadcasts against `shape_a` (default: the same)."""
    return _single_op_net("mul", [shape_a, shape_a if shape_b is None else shape_b], seed, activation=activation).build()


def sub(shape_a: Shape, shape_b: Shape | None = None, activation: str | None = None, seed: int = 0) -> Model:
    """One SUB of two int8 inputs (a - b); either may broadcast against the other."""
    return _single_op_net("sub", [shape_a, shape_a if shape_b is None else shape_b], seed, activation=activation).build()


def fully_connected(input_shape: Shape, units: int, activation: str | None = None, seed: int = 0) -> Model:
    """One FULLY_CONNECTED; `input_shape` is (1, ..., 1, depth) and the output (1, units)."""
    return _single_op_net("fully_connected", [input_shape], seed, units=units, activation=activation).build()


def pad(input_shape: Shape, paddings, seed: int = 0) -> Model:
    """One PAD; `paddings` is ((0, 0), (top, bottom), (left, right), (0, 0)) for NHWC."""
    return _single_op_net("pad", [input_shape], seed, paddings=paddings).build()


def padv2(input_shape: Shape, paddings, value: float = 0.5, dtype: str = "int8", seed: int = 0) -> Model:
    """One PADV2 filling with the real `value`; `paddings` is one (before, after) pair per axis."""
    return _single_op_net("padv2", [input_shape], seed, dtype, paddings=paddings, value=value).build()


def tile(input_shape: Shape, multiples, dtype: str = "int8", seed: int = 0) -> Model:
    """One TILE by `multiples` (one per axis, the batch's 1)."""
    return _single_op_net("tile", [input_shape], seed, dtype, multiples=multiples).build()


def reverse_v2(input_shape: Shape, axes, dtype: str = "int8", seed: int = 0) -> Model:
    """One REVERSE_V2 along `axes` (a contiguous run of axes)."""
    return _single_op_net("reverse_v2", [input_shape], seed, dtype, axes=axes).build()


_HW = (1, 16, 16, 8)
# (case name, CalibratedNet method, input shapes, parameters): what `single_op_cases` builds.
SINGLE_OP_CASES: tuple[tuple[str, str, tuple[Shape, ...], dict], ...] = (
    ("conv_1x1_s1", "conv2d", (_HW,), dict(filters=16, kernel=(1, 1))),
    ("conv_1x1_s2_linear", "conv2d", (_HW,), dict(filters=16, kernel=(1, 1), stride=(2, 2), activation=None)),
    ("conv_3x3_s1_same", "conv2d", (_HW,), dict(filters=16)),
    ("conv_3x3_s1_valid", "conv2d", (_HW,), dict(filters=16, padding="VALID")),
    ("conv_3x3_s2_same", "conv2d", (_HW,), dict(filters=16, stride=(2, 2))),
    ("conv_3x3_s2_valid", "conv2d", (_HW,), dict(filters=16, stride=(2, 2), padding="VALID")),
    ("conv_3x3_s1_same_relu6", "conv2d", (_HW,), dict(filters=16, activation="RELU6")),
    ("conv_3x3_dilation2", "conv2d", (_HW,), dict(filters=16, dilation=(2, 2))),
    ("conv_5x5_s1_same", "conv2d", (_HW,), dict(filters=16, kernel=(5, 5))),
    ("conv_5x5_s2_valid", "conv2d", (_HW,), dict(filters=16, kernel=(5, 5), stride=(2, 2), padding="VALID")),
    ("conv_7x7_s2_same", "conv2d", ((1, 32, 32, 3),), dict(filters=16, kernel=(7, 7), stride=(2, 2))),
    ("conv_3x1_odd_shape", "conv2d", ((1, 15, 13, 5),), dict(filters=7, kernel=(3, 1), stride=(2, 1))),
    ("dw_3x3_s1_same", "depthwise_conv2d", (_HW,), dict()),
    ("dw_3x3_s2_same", "depthwise_conv2d", (_HW,), dict(stride=(2, 2))),
    ("dw_3x3_s1_valid_relu6", "depthwise_conv2d", (_HW,), dict(padding="VALID", activation="RELU6")),
    ("dw_5x5_s1_same", "depthwise_conv2d", (_HW,), dict(kernel=(5, 5))),
    ("dw_5x5_s2_same_linear", "depthwise_conv2d", (_HW,), dict(kernel=(5, 5), stride=(2, 2), activation=None)),
    ("dw_3x3_multiplier2", "depthwise_conv2d", (_HW,), dict(depth_multiplier=2)),
    # The depth-multiplier form of Vela's semantic rule: one input channel, OFM depth = multiplier.
    ("dw_3x3_multiplier8_1ch", "depthwise_conv2d", ((1, 16, 16, 1),), dict(depth_multiplier=8)),
    ("maxpool_2x2_s2_valid", "pool", (_HW,), dict(kind="MAX")),
    ("maxpool_3x3_s2_same", "pool", (_HW,), dict(kind="MAX", size=(3, 3), stride=(2, 2), padding="SAME")),
    ("avgpool_2x2_s2_valid", "pool", (_HW,), dict(kind="AVERAGE")),
    ("avgpool_3x3_s1_same", "pool", (_HW,), dict(kind="AVERAGE", size=(3, 3), stride=(1, 1), padding="SAME")),
    ("avgpool_global", "pool", ((1, 7, 7, 16),), dict(kind="AVERAGE", size=(7, 7), stride=(1, 1))),
    ("add", "add", (_HW, _HW), dict()),
    ("add_relu", "add", (_HW, _HW), dict(activation="RELU")),
    ("add_broadcast_channel", "add", (_HW, (1, 1, 1, 8)), dict()),
    ("mul", "mul", (_HW, _HW), dict()),
    ("mul_broadcast_channel", "mul", (_HW, (1, 1, 1, 8)), dict()),
    ("mul_broadcast_scalar_relu_n1_to_1", "mul", (_HW, (1, 1, 1, 1)), dict(activation="RELU_N1_TO_1")),
    ("fc_64_10", "fully_connected", ((1, 64),), dict(units=10)),
    ("fc_256_32_relu", "fully_connected", ((1, 256),), dict(units=32, activation="RELU")),
    ("pad_1111", "pad", (_HW,), dict(paddings=((0, 0), (1, 1), (1, 1), (0, 0)))),
    ("pad_asymmetric", "pad", (_HW,), dict(paddings=((0, 0), (0, 1), (2, 0), (0, 0)))),
)


def leaky_relu(
    input_shape: Shape, alpha: float = 0.2, dtype: str = "int8", same_quantization: bool = False, seed: int = 0
) -> Model:
    """One LEAKY_RELU on an int8 or int16 input (see `CalibratedNet.leaky_relu`)."""
    params = dict(alpha=alpha, same_quantization=same_quantization)
    return _single_op_net("leaky_relu", [input_shape], seed, dtype, _ACTIVATION_RANGE, **params).build()


def tanh(input_shape: Shape, dtype: str = "int16", seed: int = 0) -> Model:
    """One TANH on an int8 or int16 input covering [-12, 12] (past both saturation points)."""
    return _single_op_net("tanh", [input_shape], seed, dtype, _ACTIVATION_RANGE).build()


def logistic(input_shape: Shape, dtype: str = "int16", seed: int = 0) -> Model:
    """One LOGISTIC on an int8 or int16 input covering [-12, 12] (past both saturation points)."""
    return _single_op_net("logistic", [input_shape], seed, dtype, _ACTIVATION_RANGE).build()


def exp(input_shape: Shape, dtype: str = "int16", seed: int = 0) -> Model:
    """One EXP on an int8 or int16 input covering [-4, 4]."""
    return _single_op_net("exp", [input_shape], seed, dtype, (-4.0, 4.0)).build()


def elu(input_shape: Shape, seed: int = 0) -> Model:
    """One int8 ELU over an input covering [-6, 6] (exp(x) - 1 flattens to -1 below about -5)."""
    return _single_op_net("elu", [input_shape], seed, "int8", (-6.0, 6.0)).build()


def gelu(input_shape: Shape, approximate: bool = False, seed: int = 0) -> Model:
    """One int8 GELU (the erf form, or with `approximate` the tanh form) over [-6, 6]."""
    return _single_op_net("gelu", [input_shape], seed, "int8", (-6.0, 6.0), approximate=approximate).build()


def log(input_shape: Shape, dtype: str = "int16", seed: int = 0) -> Model:
    """One LOG on an int8 or int16 input covering [-1, 16] (the codes at and below 0 give the minimum)."""
    return _single_op_net("log", [input_shape], seed, dtype, (-1.0, 16.0)).build()


def neg(input_shape: Shape, dtype: str = "int8", seed: int = 0) -> Model:
    """One NEG on an int8 or int16 input covering [-4, 4] (every code, the wrapping minimum included)."""
    return _single_op_net("neg", [input_shape], seed, dtype, (-4.0, 4.0)).build()


def hard_swish(input_shape: Shape, seed: int = 0) -> Model:
    """One int8 HARD_SWISH over an input covering [-6, 6]."""
    return _single_op_net("hard_swish", [input_shape], seed, "int8", (-6.0, 6.0)).build()


def prelu(input_shape: Shape, alpha_range: tuple[float, float] = (-0.5, 0.5), seed: int = 0) -> Model:
    """One int8 PRELU with a per-channel alpha drawn from `alpha_range`, input over [-4, 4]."""
    return _single_op_net("prelu", [input_shape], seed, "int8", (-4.0, 4.0), alpha_range=alpha_range).build()


def softmax(input_shape: Shape, dtype: str = "int16", beta: float = 1.0, seed: int = 0) -> Model:
    """One SOFTMAX over the last axis of an int8 or int16 input covering [-12, 12]."""
    return _single_op_net("softmax", [input_shape], seed, dtype, _ACTIVATION_RANGE, beta=beta).build()


def single_op_cases() -> list[tuple[str, Model]]:
    """Small single-operator models (seed 0) covering the common kernel, stride and padding
    cases of `SINGLE_OP_CASES`: conv 1x1/3x3/5x5/7x7, strides 1 and 2, SAME and VALID,
    dilation, depthwise 3x3/5x5 and a depth multiplier, max and average pool, ADD/MUL with and
    without broadcast, FULLY_CONNECTED and PAD."""
    return [(name, _single_op_net(method, shapes, 0, **params).build()) for name, method, shapes, params in SINGLE_OP_CASES]


# Inputs of the activation cases: the int16 TANH table saturates past |x| = 5.3 and the
# LOGISTIC one past 10.6, so [-12, 12] reaches both.
_ACTIVATION_RANGE = (-12.0, 12.0)
_ACT = ((1, 8, 8, 16),)
# Activation operators, int8 and 16x8 int16, as Vela 5.2 runs them on Ethos-U55/U65: int8
# LEAKY_RELU / TANH / LOGISTIC as 256-entry LUTs; int16 LEAKY_RELU with equal input and output
# quantization as the elementwise LRELU (alpha above 1 included), otherwise as MUL + MAXIMUM;
# int16 TANH / LOGISTIC as the built-in activation functions; int16 EXP as a 512-entry
# interpolating LUT; int16 SOFTMAX as two such LUTs (exp, 1 / (1 + x)) and 32-bit arithmetic;
# int8 ELU, GELU (both forms), LOG as LUTs. (Not here: int16 LOG, whose interpolated table TFLite
# itself spreads over thousands of LSBs in the segment where log meets its floor at 0, and NEG,
# whose int8 form Vela saturates, -(-128) to 127, where TFLite wraps to -128.)
# They validate the simulator and the estimator on Vela's binaries, and cascader's own
# lowerings (tests/test_compile.py); what cascader does not lower yet runs on the CPU there.
ACTIVATION_OP_CASES: tuple[tuple[str, str, tuple[Shape, ...], dict], ...] = (
    ("leaky_relu_int8", "leaky_relu", _ACT, dict(alpha=0.2, input_range=_ACTIVATION_RANGE)),
    ("leaky_relu_int16", "leaky_relu", _ACT, dict(alpha=0.2, same_quantization=True, dtype="int16",
                                                  input_range=_ACTIVATION_RANGE)),
    ("leaky_relu_int16_alpha1.5", "leaky_relu", _ACT, dict(alpha=1.5, same_quantization=True, dtype="int16",
                                                           input_range=_ACTIVATION_RANGE)),
    ("leaky_relu_int16_rescaled", "leaky_relu", _ACT, dict(alpha=0.2, dtype="int16", input_range=_ACTIVATION_RANGE)),
    ("tanh_int8", "tanh", _ACT, dict(input_range=_ACTIVATION_RANGE)),
    ("tanh_int16", "tanh", _ACT, dict(dtype="int16", input_range=_ACTIVATION_RANGE)),
    ("logistic_int8", "logistic", _ACT, dict(input_range=_ACTIVATION_RANGE)),
    ("logistic_int16", "logistic", _ACT, dict(dtype="int16", input_range=_ACTIVATION_RANGE)),
    ("exp_int16", "exp", _ACT, dict(dtype="int16", input_range=(-4.0, 4.0))),
    ("hard_swish_int8", "hard_swish", _ACT, dict(input_range=(-6.0, 6.0))),
    ("exp_int8", "exp", _ACT, dict(input_range=(-4.0, 2.0))),
    ("prelu_int8", "prelu", _ACT, dict(input_range=(-4.0, 4.0))),
    ("softmax_int8", "softmax", _ACT, dict(input_range=_ACTIVATION_RANGE)),
    ("softmax_int16", "softmax", _ACT, dict(dtype="int16", input_range=_ACTIVATION_RANGE)),
    ("elu_int8", "elu", _ACT, dict(input_range=(-6.0, 6.0))),
    ("gelu_int8", "gelu", _ACT, dict(input_range=(-6.0, 6.0))),
    ("gelu_int8_approximate", "gelu", _ACT, dict(approximate=True, input_range=(-6.0, 6.0))),
    ("log_int8", "log", _ACT, dict(input_range=(-1.0, 16.0))),
)


def activation_op_cases() -> list[tuple[str, Model]]:
    """Single activation-operator models (seed 0) of `ACTIVATION_OP_CASES`: LEAKY_RELU, TANH,
    LOGISTIC, EXP, SOFTMAX, ELU, GELU and LOG in int8 and 16x8 int16, each hitting a different
    Vela lowering."""
    return [
        (name, _single_op_net(method, shapes, 0, **params).build()) for name, method, shapes, params in ACTIVATION_OP_CASES
    ]


def reduce(input_shape: Shape, opcode: str = "SUM", axes: Sequence[int] = (1, 2), keep_dims: bool = True,
           dtype: str = "int8", seed: int = 0) -> Model:
    """One SUM, REDUCE_MAX or REDUCE_MIN on an int8 or int16 input (see `CalibratedNet.reduce`)."""
    return _single_op_net("reduce", [input_shape], seed, dtype, opcode=opcode, axes=axes, keep_dims=keep_dims).build()


# (case name, input shape, opcode, axes, keep_dims, dtype): what `reduce_op_cases` builds, one
# case per lowering: one window, H and C around W, and past one window (300 x 300 elements).
REDUCE_OP_CASES: tuple[tuple[str, Shape, str, tuple[int, ...], bool, str], ...] = tuple(
    (f"{opcode.lower()}_{label}_{dtype}", shape, opcode, axes, keep, dtype)
    for opcode in ("SUM", "REDUCE_MAX", "REDUCE_MIN")
    for dtype in ("int8", "int16")
    for label, shape, axes, keep in (("hw", (1, 7, 7, 64), (1, 2), True), ("c", (1, 8, 8, 32), (3,), False),
                                     ("hc", (1, 4, 5, 6), (1, 3), True), ("hw_300", (1, 300, 300, 2), (1, 2), True))
    if not (opcode == "SUM" and dtype == "int16" and label == "hw_300")  # may overflow TFLite's int32 sum
)


def reduce_op_cases() -> list[tuple[str, Model]]:
    """Single reduction models (seed 0) of `REDUCE_OP_CASES`."""
    return [(name, reduce(shape, opcode, axes, keep, dtype)) for name, shape, opcode, axes, keep, dtype in REDUCE_OP_CASES]
