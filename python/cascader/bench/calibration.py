"""Calibration of the cycle model against Vela's per-layer estimates.

Each case is one single-operator zoo model. We compile it with Vela (``--verbose-performance``,
a large arena so that nothing is cascaded), read Vela's cycles for the network (the op and its
fused activation), and estimate the same op with :func:`cascader.estimate_op`. The encoded
weight size is an input of the model (the weight codec is another component), so it is taken
from Vela's summary for the case.

Two sweeps: ``sram_only`` (memory mode Sram_Only: every tensor in SRAM; this is the calibration
of the model itself) and ``preset`` (the presets' own memory modes: weights in flash or DRAM,
buffered into SRAM as Vela's scheduler decides; those decisions -- feature-map placement, weight
buffer, depth slices -- are the scheduler's and are read from Vela's debug database).

A third sweep, ``networks``, covers the operators Vela lowers to several NPU operations or to
primitives the single-op cases do not reach (LUT activations in int8 and int16, SOFTMAX, MEAN,
resizes, TRANSPOSE_CONV, MINIMUM/MAXIMUM, ABS, SQUARED_DIFFERENCE, MIRROR_PAD, ARG_MAX, TRANSPOSE):
each model is compiled by Vela (Performance, the presets' memory modes) and our estimator costs
Vela's own binary, decoded (``cascader.estimate``), beside Vela's total for the network.

A fourth, ``u85``, is the Ethos-U85's (#42): Vela's U85 binaries of whole networks (the zoo's,
and the models of ``--models`` / $CASCADER_MODELS) on every U85 size, on Vela's default U85
system and on Flash_High with Shared_Sram, against our estimator on each binary.

Run the whole sweep and print the error table::

    python -m cascader.bench.calibration [--cache build/calibration_vela.json]
"""

from __future__ import annotations

import argparse
import csv
import functools
import hashlib
import io
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..perf import estimate_op

ACCELERATORS = ("ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256", "ethos-u65-512")
PRESET = {
    "ethos-u55-64": "Ethos_U55_High_End_Embedded",
    "ethos-u55-128": "Ethos_U55_High_End_Embedded",
    "ethos-u55-256": "Ethos_U55_High_End_Embedded",
    "ethos-u65-256": "Ethos_U65_High_End",
    "ethos-u65-512": "Ethos_U65_High_End",
}
MEMORY_MODE = "Sram_Only"
# The second sweep: the presets' own memory modes, where weights live in flash / DRAM and Vela
# decides where feature maps go and how weights are buffered. Those decisions are the
# scheduler's (inputs of the cost model), so they are read from Vela's debug database.
PRESET_MODE = {
    "ethos-u55-64": "Shared_Sram",
    "ethos-u55-128": "Shared_Sram",
    "ethos-u55-256": "Shared_Sram",
    "ethos-u65-256": "Dedicated_Sram",
    "ethos-u65-512": "Dedicated_Sram",
}
MODES = ("sram_only", "preset", "networks", "u85")
ARENA_BYTES = 64 * 1024 * 1024  # "unlimited": larger than every sweep tensor together
WITHIN = 0.05
WORST = 0.15

# Cases where our figure is known to differ from Vela's, with the reason. Empty unless measured.
KNOWN_DEVIATIONS: Dict[str, str] = {}


@dataclass(frozen=True)
class Case:
    """One single-op model: `kind` is a zoo builder, `args` its arguments."""

    name: str
    kind: str  # conv2d | depthwise_conv2d | max_pool | avg_pool | add | mul | fully_connected
    ifm: Tuple[int, ...]
    out_channels: int = 0
    kernel: Tuple[int, int] = (1, 1)
    stride: Tuple[int, int] = (1, 1)
    padding: str = "SAME"
    ifm2: Optional[Tuple[int, ...]] = None
    activation: Optional[str] = None

    def key(self) -> str:
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]

    def ofm_shape(self) -> Tuple[int, int, int, int]:
        if self.kind == "fully_connected":
            return (1, 1, 1, self.out_channels)
        n, h, w, c = self.ifm
        if self.kind in ("add", "mul"):
            return (n, h, w, c)
        kh, kw = self.kernel
        sh, sw = self.stride
        if self.padding == "SAME":
            oh, ow = math.ceil(h / sh), math.ceil(w / sw)
        else:
            oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
        return (n, oh, ow, self.out_channels if self.kind == "conv2d" else c)

    def build(self):
        """The zoo model of this case."""
        from .. import zoo

        if self.kind == "conv2d":
            return zoo.conv2d(self.ifm, self.out_channels, self.kernel, self.stride, self.padding,
                              activation=self.activation)
        if self.kind == "depthwise_conv2d":
            return zoo.depthwise_conv2d(self.ifm, self.kernel, self.stride, self.padding, activation=self.activation)
        if self.kind in ("max_pool", "avg_pool"):
            return zoo.pool(self.ifm, "MAX" if self.kind == "max_pool" else "AVERAGE", self.kernel, self.stride,
                            self.padding)
        if self.kind == "add":
            return zoo.add(self.ifm, self.ifm2, activation=self.activation)
        if self.kind == "mul":
            return zoo.mul(self.ifm, self.ifm2, activation=self.activation)
        if self.kind == "fully_connected":
            return zoo.fully_connected((1, self.ifm[-1]), self.out_channels, activation=self.activation)
        raise ValueError(f"unknown case kind {self.kind!r}")


def _conv(name, ifm, oc, k, s, pad="SAME", act="RELU"):
    return Case(name, "conv2d", ifm, oc, (k, k), (s, s), pad, activation=act)


def _dw(name, ifm, k, s, act="RELU"):
    return Case(name, "depthwise_conv2d", ifm, 0, (k, k), (s, s), "SAME", activation=act)


def sweep() -> List[Case]:
    """The full calibration sweep (64 single-op models)."""
    c: List[Case] = [
        _conv("conv1x1_s1_56x56x32_64", (1, 56, 56, 32), 64, 1, 1),
        _conv("conv1x1_s1_14x14x256_512", (1, 14, 14, 256), 512, 1, 1),
        _conv("conv1x1_s1_224x224x8_16", (1, 224, 224, 8), 16, 1, 1),
        _conv("conv1x1_s1_7x7x512_128", (1, 7, 7, 512), 128, 1, 1),
        _conv("conv1x1_s1_1x1x256_64", (1, 1, 1, 256), 64, 1, 1),
        _conv("conv1x1_s2_28x28x64_128", (1, 28, 28, 64), 128, 1, 2, "VALID", None),
        _conv("conv1x1_s2_112x112x16_32", (1, 112, 112, 16), 32, 1, 2, "VALID"),
        _conv("conv3x3_s1_56x56x64_64", (1, 56, 56, 64), 64, 3, 1),
        _conv("conv3x3_s1_28x28x128_128", (1, 28, 28, 128), 128, 3, 1),
        _conv("conv3x3_s1_14x14x256_256", (1, 14, 14, 256), 256, 3, 1),
        _conv("conv3x3_s1_112x112x16_32", (1, 112, 112, 16), 32, 3, 1),
        _conv("conv3x3_s1_7x7x512_512", (1, 7, 7, 512), 512, 3, 1),
        _conv("conv3x3_s1_32x32x24_40_valid", (1, 32, 32, 24), 40, 3, 1, "VALID", None),
        _conv("conv3x3_s2_224x224x8_16", (1, 224, 224, 8), 16, 3, 2),
        _conv("conv3x3_s2_56x56x32_64", (1, 56, 56, 32), 64, 3, 2),
        _conv("conv3x3_s2_14x14x128_256", (1, 14, 14, 128), 256, 3, 2),
        _conv("conv5x5_s1_28x28x32_32", (1, 28, 28, 32), 32, 5, 1),
        _conv("conv5x5_s1_14x14x64_64", (1, 14, 14, 64), 64, 5, 1),
        _conv("conv5x5_s2_56x56x16_32", (1, 56, 56, 16), 32, 5, 2),
        _conv("conv5x5_s2_28x28x64_128", (1, 28, 28, 64), 128, 5, 2, "SAME", None),
        _conv("conv7x7_s1_14x14x16_16", (1, 14, 14, 16), 16, 7, 1),
        _conv("conv7x7_s2_112x112x8_32", (1, 112, 112, 8), 32, 7, 2),
        _conv("conv7x7_s2_224x224x8_64", (1, 224, 224, 8), 64, 7, 2),
        _dw("dw3x3_s1_112x112x32", (1, 112, 112, 32), 3, 1),
        _dw("dw3x3_s1_56x56x128", (1, 56, 56, 128), 3, 1),
        _dw("dw3x3_s1_14x14x512", (1, 14, 14, 512), 3, 1),
        _dw("dw3x3_s1_7x7x256", (1, 7, 7, 256), 3, 1, None),
        _dw("dw3x3_s2_112x112x64", (1, 112, 112, 64), 3, 2),
        _dw("dw3x3_s2_28x28x256", (1, 28, 28, 256), 3, 2),
        _dw("dw5x5_s1_28x28x96", (1, 28, 28, 96), 5, 1),
        _dw("dw5x5_s1_14x14x192", (1, 14, 14, 192), 5, 1),
        _dw("dw5x5_s2_56x56x48", (1, 56, 56, 48), 5, 2),
        _dw("dw5x5_s2_14x14x512", (1, 14, 14, 512), 5, 2, None),
        Case("maxpool2x2_s2_112x112x16", "max_pool", (1, 112, 112, 16), 0, (2, 2), (2, 2), "VALID"),
        Case("maxpool2x2_s2_28x28x128", "max_pool", (1, 28, 28, 128), 0, (2, 2), (2, 2), "VALID"),
        Case("maxpool2x2_s2_14x14x512", "max_pool", (1, 14, 14, 512), 0, (2, 2), (2, 2), "VALID"),
        Case("maxpool3x3_s2_56x56x64", "max_pool", (1, 56, 56, 64), 0, (3, 3), (2, 2), "SAME"),
        Case("maxpool3x3_s1_28x28x32", "max_pool", (1, 28, 28, 32), 0, (3, 3), (1, 1), "SAME"),
        Case("avgpool2x2_s2_56x56x32", "avg_pool", (1, 56, 56, 32), 0, (2, 2), (2, 2), "VALID"),
        Case("avgpool2x2_s2_14x14x256", "avg_pool", (1, 14, 14, 256), 0, (2, 2), (2, 2), "VALID"),
        Case("avgpool3x3_s1_28x28x64", "avg_pool", (1, 28, 28, 64), 0, (3, 3), (1, 1), "SAME"),
        Case("avgpool7x7_global_7x7x512", "avg_pool", (1, 7, 7, 512), 0, (7, 7), (1, 1), "VALID"),
        Case("avgpool5x5_s1_1x1x8", "avg_pool", (1, 5, 5, 8), 0, (5, 5), (1, 1), "VALID"),
        Case("add_56x56x32", "add", (1, 56, 56, 32)),
        Case("add_28x28x128", "add", (1, 28, 28, 128)),
        Case("add_7x7x512", "add", (1, 7, 7, 512)),
        Case("add_224x224x8", "add", (1, 224, 224, 8)),
        Case("add_1x1x512", "add", (1, 1, 1, 512)),
        Case("add_relu_28x28x64", "add", (1, 28, 28, 64), activation="RELU"),
        Case("add_bcast_channel_28x28x64", "add", (1, 28, 28, 64), ifm2=(1, 1, 1, 64)),
        Case("add_bcast_scalar_14x14x32", "add", (1, 14, 14, 32), ifm2=(1, 1, 1, 1)),
        Case("mul_56x56x16", "mul", (1, 56, 56, 16)),
        Case("mul_14x14x256", "mul", (1, 14, 14, 256)),
        Case("mul_bcast_channel_28x28x128", "mul", (1, 28, 28, 128), ifm2=(1, 1, 1, 128)),
        Case("mul_bcast_scalar_56x56x8", "mul", (1, 56, 56, 8), ifm2=(1, 1, 1, 1)),
        Case("mul_bcast_row_16x16x32", "mul", (1, 16, 16, 32), ifm2=(1, 1, 16, 32)),
        Case("fc_8_16", "fully_connected", (1, 8), 16),
        Case("fc_64_10", "fully_connected", (1, 64), 10),
        Case("fc_128_128_relu", "fully_connected", (1, 128), 128, activation="RELU"),
        Case("fc_256_32", "fully_connected", (1, 256), 32),
        Case("fc_512_512", "fully_connected", (1, 512), 512),
        Case("fc_512_10", "fully_connected", (1, 512), 10),
        Case("fc_320_1000", "fully_connected", (1, 320), 1000),
        Case("fc_480_96_relu", "fully_connected", (1, 480), 96, activation="RELU"),
    ]
    return c


# A fixed, fast subset for CI: one of each kind, small tensors, both sweeps.
CI_SUBSET = (
    ("conv3x3_s1_28x28x128_128", "ethos-u55-128", "sram_only"),
    ("conv1x1_s2_28x28x64_128", "ethos-u55-256", "sram_only"),
    ("conv5x5_s1_14x14x64_64", "ethos-u65-512", "sram_only"),
    ("dw3x3_s2_28x28x256", "ethos-u55-64", "sram_only"),
    ("maxpool2x2_s2_28x28x128", "ethos-u65-256", "sram_only"),
    ("avgpool3x3_s1_28x28x64", "ethos-u55-128", "sram_only"),
    ("add_bcast_channel_28x28x64", "ethos-u55-256", "sram_only"),
    ("mul_14x14x256", "ethos-u55-128", "sram_only"),
    ("fc_256_32", "ethos-u65-256", "sram_only"),
    ("conv3x3_s2_56x56x32_64", "ethos-u55-128", "preset"),
    ("dw3x3_s1_14x14x512", "ethos-u65-256", "preset"),
)


@functools.cache
def network_cases() -> Dict[str, Callable[[], object]]:
    """The `networks` sweep: name -> a builder of a small int8/int16 model of one operator (the
    activation cases are zoo.ACTIVATION_OP_CASES, built once here; the others on demand)."""
    import numpy as np

    from .. import zoo
    from .._zoo_layers import CalibratedNet
    from ..operator_zoo import operator_model
    from ..tflite.builder import ModelBuilder, quantization

    q_in, q_out = quantization(0.05, 3), quantization(0.07, -5)

    def one(opcode, shape, out_shape=None, consts=(), options=None, out_dtype="int8", out_q=q_out, second=None):
        b = ModelBuilder()
        inputs = [b.add_input("x", shape, "int8", q_in)]
        if second is not None:
            inputs.append(b.add_input("x2", second, "int8", q_in))
        inputs += [b.add_constant(f"c{i}", np.asarray(c, np.int32)) for i, c in enumerate(consts)]
        y = b.add_tensor("y", out_shape or shape, out_dtype, out_q)
        b.add_operator(opcode, inputs, [y], options or {}, version=2)
        b.mark_output(y)
        return b.build()

    def net(layer, shape, **params):
        n = CalibratedNet(0, description=f"cascader.bench.calibration {layer}")
        n.output(getattr(n, layer)(n.input(shape, -1.0, 1.0, name="input"), **params))
        return n.build()

    cases: Dict[str, Callable[[], object]] = {name: (lambda m=model: m) for name, model in zoo.activation_op_cases()}
    cases.update({
        "mean_hw_8x8x64": lambda: net("mean", (1, 8, 8, 64)),
        "mean_hw_24x24x32": lambda: net("mean", (1, 24, 24, 32)),
        "resize_bilinear_12x12x32": lambda: net("resize", (1, 12, 12, 32), method="BILINEAR"),
        "resize_nearest_12x12x32": lambda: net("resize", (1, 12, 12, 32), method="NEAREST"),
        "transpose_conv_2x2_s2_12x12x32_16": lambda: net("transpose_conv2d", (1, 12, 12, 32), filters=16),
        "transpose_conv_3x3_s2_8x8x16_16": lambda: net("transpose_conv2d", (1, 8, 8, 16), filters=16, kernel=(3, 3)),
        # MINIMUM and MAXIMUM run on the NPU (Vela) only with one quantization throughout.
        "minimum_16x16x32": lambda: one("MINIMUM", (1, 16, 16, 32), out_q=q_in, second=(1, 16, 16, 32)),
        "maximum_bcast_16x16x32": lambda: one("MAXIMUM", (1, 16, 16, 32), out_q=q_in, second=(1, 1, 1, 32)),
        "squared_difference_16x16x16": lambda: one("SQUARED_DIFFERENCE", (1, 16, 16, 16), second=(1, 16, 16, 16)),
        "abs_16x16x32": lambda: one("ABS", (1, 16, 16, 32), out_q=q_in),
        "mirror_pad_16x16x16": lambda: one("MIRROR_PAD", (1, 16, 16, 16), (1, 18, 18, 16),
                                           [[[0, 0], [1, 1], [1, 1], [0, 0]]], {"mode": 0}, out_q=q_in),
        "arg_max_16x16x21": lambda: one("ARG_MAX", (1, 16, 16, 21), (1, 16, 16), [[3]], {"output_type": 2},
                                        out_dtype="int32", out_q=None),
        "transpose_hw_16x24x32": lambda: one("TRANSPOSE", (1, 16, 24, 32), (1, 24, 16, 32), [[0, 2, 1, 3]], out_q=q_in),
        "transpose_nchw_6x6x65": lambda: one("TRANSPOSE", (1, 6, 6, 65), (1, 65, 6, 6), [[0, 3, 1, 2]], out_q=q_in),
        "lstm_kws_12x10_20": lambda: zoo.lstm_kws(steps=12, units=20),
    })
    # The operators of Vela's U55/U65 list that the single-op and activation cases above do not
    # reach, one case per type Vela runs each in (REVERSE_V2 is not one: Vela keeps it on the CPU).
    for opcode, dtype in NEW_OPERATOR_CASES:
        cases[f"op_{opcode.lower()}_{dtype}"] = functools.partial(operator_model, opcode, dtype)
    return cases


# (operator, activation type) of the operator-zoo models in the `networks` sweep.
NEW_OPERATOR_CASES = (
    ("BATCH_MATMUL", "int8"), ("ELU", "int8"), ("GELU", "int8"), ("LOG", "int8"), ("LOG", "int16"),
    ("NEG", "int8"), ("NEG", "int16"), ("PADV2", "int8"), ("PADV2", "int16"), ("REDUCE_MAX", "int8"),
    ("REDUCE_MAX", "int16"), ("REDUCE_MIN", "int8"), ("SUM", "int8"), ("SUM", "int16"), ("TILE", "int8"),
    ("TILE", "int16"),
)


def calibrate_networks(names: Sequence[str], accelerators: Sequence[str], verbose: bool = False) -> List[Result]:
    """Vela's total cycles for each case against our estimator on Vela's binary.

    Vela's outputs are cached by `cascader.vela.compile_with_vela` (keyed by the model
    bytes and options), so a second run only estimates."""
    from ..sim import estimate
    from ..tflite import load_model, save_model
    from ..vela import VelaConfig, compile_with_vela

    builders = network_cases()
    results: List[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = os.path.join(tmp, f"{name}.tflite")
            save_model(builders[name](), path)
            for acc in accelerators:
                vela = compile_with_vela(path, VelaConfig(acc, "Performance"))
                ours = estimate(vela.path).total_cycles
                cpu = sum(op.name != "ethos-u" for op in load_model(vela.path).main.operators)
                note = KNOWN_DEVIATIONS.get(name, "")
                if cpu:
                    note = (note + "; " if note else "") + f"Vela left {cpu} operator(s) on the CPU"
                results.append(Result(name, acc, float(vela.cycles), float(ours), note, "networks"))
                if verbose:
                    r = results[-1]
                    print(f"{name:36s} {acc:14s} vela {r.vela:>10.0f} ours {r.ours:>10.0f} {100 * r.error:+6.1f}%",
                          flush=True)
    return results


# The Ethos-U85 rows (#42): Vela's U85 binaries of whole networks on every array size, on Vela's
# default U85 system and a second one, costed by our estimator beside Vela's total.
U85_ACCELERATORS = ("ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048")
U85_SYSTEMS = {  # label -> (system config, memory mode); None: Vela's defaults for the U85
    "DRAM_Mid": (None, None),
    "Flash_High": ("Ethos_U85_SYS_Flash_High", "Shared_Sram"),
}
U85_ZOO = ("mobilenet_v1", "mobilenet_v2", "resnet8", "ds_cnn_kws", "fc_autoencoder", "mobilenet_v3_blocks", "unet",
           "attention_pooling", "kws_mean", "mobilenet_v2_nchw", "blazeface_blocks", "unet_128")


def u85_networks(models_dir: str = "") -> Dict[str, Callable[[], object]]:
    """The U85 sweep's networks: name -> a builder of the model (zoo) or its path (the
    .tflite files of `models_dir`, e.g. $CASCADER_MODELS)."""
    from .. import zoo

    cases: Dict[str, Callable[[], object]] = {name: functools.partial(zoo.get, name) for name in U85_ZOO}
    if models_dir:
        for path in sorted(Path(models_dir).glob("*.tflite")):
            cases[path.stem] = (lambda p=path: p)
    return cases


def calibrate_u85(names: Sequence[str], accelerators: Sequence[str], systems: Sequence[str], models_dir: str = "",
                  verbose: bool = False) -> List[Result]:
    """Vela's total cycles for each U85 binary against our estimator on it, per array size and
    system. A configuration Vela cannot compile is left out (said with `verbose`); a binary the
    estimator refuses is a row with no figure of ours (error -100%), its reason in the note."""
    from ..errors import CascaderError
    from ..tflite import save_model
    from ..vela import VelaConfig, compile_with_vela

    builders = u85_networks(models_dir)
    results: List[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            source = builders[name]()
            if isinstance(source, Path):
                path = str(source)
            else:
                path = os.path.join(tmp, f"{name}.tflite")
                save_model(source, path)
            for acc in accelerators:
                for label in systems:
                    system, mode = U85_SYSTEMS[label]
                    try:
                        vela = compile_with_vela(path, VelaConfig(acc, system_config=system, memory_mode=mode))
                    except CascaderError as e:
                        if verbose:
                            print(f"{name:36s} {acc:14s} {label:10s} Vela fails: {str(e).splitlines()[-1][:80]}")
                        continue
                    if not vela.cycles:
                        continue
                    try:
                        ours, note = float(vela.estimate().total_cycles), ""
                    except CascaderError as e:
                        ours, note = 0.0, f"refused: {e}"[:120]
                    results.append(Result(f"{name} [{label}]", acc, float(vela.cycles), ours, note, "u85"))
                    if verbose:
                        r = results[-1]
                        print(f"{r.case:48s} {acc:14s} vela {r.vela:>11.0f} ours {r.ours:>11.0f} "
                              f"{100 * r.error:+6.1f}% {note}", flush=True)
    return results


def vela_version() -> str:
    from ethosu.vela import __version__  # type: ignore

    return str(__version__)


def _debug_ops(out_dir: str) -> List[Dict[str, str]]:
    """Vela's scheduled NPU ops that carry cycles (from --enable-debug-db), in order, with their
    operator name, memories, shapes and weight buffering."""
    text = next(Path(out_dir).glob("*_debug.xml")).read_text()
    tables: Dict[str, List[Dict[str, str]]] = {}
    for m in re.finditer(r'<table name="([^"]+)">\s*<!\[CDATA\[(.*?)\]\]>', text, re.S):
        rows = list(csv.reader(io.StringIO(m.group(2).strip())))
        tables[m.group(1)] = [dict(zip(rows[0], r)) for r in rows[1:]]
    names = {r["id"]: r.get("operator", "") for r in tables.get("perf", [])}
    ops = []
    for d in tables.get("perf_debug", []):
        if d.get("est_op_cycles_without_buffering", "0") not in ("0", ""):
            ops.append(dict(d, operator=names.get(d["id"], "")))
    return ops


def run_vela(case: Case, accelerator: str, mode: str = "sram_only", workdir: Optional[str] = None) -> Dict[str, object]:
    """Compile `case` with Vela; return its cycles, encoded weight sizes and schedule choices."""
    from ..tflite import save_model

    vela = shutil.which("vela") or os.path.join(os.path.dirname(sys.executable), "vela")
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = os.path.join(tmp, f"{case.name}.tflite")
        save_model(case.build(), path)
        out = os.path.join(tmp, "out")
        memory_mode = MEMORY_MODE if mode == "sram_only" else PRESET_MODE[accelerator]
        cmd = [vela, path, "--accelerator-config", accelerator, "--system-config", PRESET[accelerator],
               "--memory-mode", memory_mode, "--arena-cache-size", str(ARENA_BYTES), "--verbose-performance",
               "--enable-debug-db", "--output-dir", out]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"vela failed on {case.name} ({accelerator}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        summary = next(Path(out).glob("*_summary_*.csv"))
        row = next(csv.DictReader(open(summary)))
        layers = list(csv.DictReader(open(next(Path(out).glob("*_per-layer.csv")))))
        ops = _debug_ops(out)
    weights = float(row["total_npu_encoded_weights"])

    def shape(d: Dict[str, str], t: str) -> List[int]:
        return [int(d.get(f"{t}_shape_{a}") or 1) for a in "nhwc"]

    # Vela may add ops of its own around the op (e.g. a copy of a DRAM input into SRAM).
    schedule = [
        {"operator": d["operator"], "ifm_memory": d.get("ifm_memory") or "Sram",
         "ofm_memory": d.get("ofm_memory") or "Sram", "ifm_shape": shape(d, "ifm"), "ofm_shape": shape(d, "ofm"),
         "weight_buffering": d.get("weight_buffering") or "None", "ofm_depth_slices": d.get("ofm_depth_slices") or "",
         "weight_total_bytes": float(d.get("weight_total_bytes") or 0)}
        for d in ops
    ]
    main = next((o for o in schedule if o["operator"] != "MemoryCopy"), schedule[0] if schedule else {})
    return {
        "schedule": schedule,
        "ifm_memory": main.get("ifm_memory", "Sram"),
        "ofm_memory": main.get("ofm_memory", "Sram"),
        "weight_buffering": main.get("weight_buffering", "None"),
        "ofm_depth_slices": main.get("ofm_depth_slices", ""),
        "weight_total_bytes": main.get("weight_total_bytes", 0.0),
        "total": float(row["cycles_total"]),
        "npu": float(row["cycles_npu"]),
        "sram_access": float(row["cycles_sram_access"]),
        "weight_bytes": weights,
        # Vela encodes scale and bias in 10 bytes per output channel.
        "scale_bytes": 10.0 * case.ofm_shape()[3] if weights else 0.0,
        "npu_ops": float(len([r for r in layers if r["Target"] == "NPU" and float(r["Op Cycles"]) > 0])),
        "cpu_ops": float(len([r for r in layers if r["Target"] != "NPU"])),
    }


def our_estimate(case: Case, accelerator: str, vela: Dict[str, object], mode: str = "sram_only") -> float:
    """Our total cycles for `case`, with Vela's encoded sizes and (preset mode) schedule choices."""
    ifm = case.ifm if case.kind != "fully_connected" else (1, 1, 1, case.ifm[-1])
    elementwise = case.kind in ("add", "mul")
    kw: Dict[str, object] = dict(
        ifm2_shape=(case.ifm2 or case.ifm) if elementwise else None,
        kernel=case.kernel, stride=case.stride, padding=case.padding,
        weight_bytes=int(vela["weight_bytes"]), scale_bytes=int(vela["scale_bytes"]), activation=case.activation,
        accelerator=accelerator, system=PRESET[accelerator],
    )
    if mode == "sram_only":
        kw.update(memory_mode=MEMORY_MODE, weight_memory="Sram")
    else:
        kw.update(memory_mode=PRESET_MODE[accelerator], ifm_memory=vela["ifm_memory"], ofm_memory=vela["ofm_memory"])
        if vela["weight_buffering"] not in ("None", ""):
            # Vela's weight buffer and depth slices; the first DMA is taken as the first slice's
            # share of the encoded stream (its exact range size is not in Vela's output).
            slices = [int(v) for v in str(vela["ofm_depth_slices"]).split("|")]
            depth = case.ofm_shape()[3]
            first = round(float(vela["weight_total_bytes"]) * (slices[1] - slices[0]) / depth)
            kw.update(weight_buffer_memory="Sram", weight_first_dma_bytes=first,
                      weight_last_slice_depth=slices[-1] - slices[-2])
    total = estimate_op(case.kind, ifm, case.ofm_shape(), **kw).total_cycles
    if mode == "preset":
        # Vela's copies of feature maps between memories run on the NPU as 1x1 average pools.
        for op in vela.get("schedule", []):
            if op["operator"] == "MemoryCopy":
                total += estimate_op("avg_pool", op["ifm_shape"], op["ofm_shape"], ifm_memory=op["ifm_memory"],
                                     ofm_memory=op["ofm_memory"], accelerator=accelerator, system=PRESET[accelerator],
                                     memory_mode=PRESET_MODE[accelerator]).total_cycles
    return total


@dataclass
class Result:
    case: str
    accelerator: str
    vela: float
    ours: float
    note: str = ""
    mode: str = "sram_only"

    @property
    def error(self) -> float:
        return (self.ours - self.vela) / self.vela if self.vela else 0.0


def load_cache(path: Optional[str]) -> Dict[str, Dict[str, float]]:
    if path and os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
        if data.get("vela_version") == vela_version():
            return data["results"]
    return {}


def save_cache(path: Optional[str], results: Dict[str, Dict[str, float]]) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"vela_version": vela_version(), "results": results}, f, indent=1, sort_keys=True)


def calibrate(pairs: Sequence[Tuple[Case, str]], cache_path: Optional[str] = None, verbose: bool = False,
              mode: str = "sram_only") -> List[Result]:
    """Compare Vela and our model on (case, accelerator) pairs; Vela results cached in `cache_path`."""
    cache = load_cache(cache_path)
    results: List[Result] = []
    for i, (case, acc) in enumerate(pairs):
        key = f"{case.name}|{acc}|{mode}|{case.key()}"
        if key not in cache:
            cache[key] = run_vela(case, acc, mode)
            if cache_path and i % 10 == 9:
                save_cache(cache_path, cache)
        v = cache[key]
        ours = our_estimate(case, acc, v, mode)
        note = KNOWN_DEVIATIONS.get(case.name, "")
        if v["cpu_ops"]:
            note = (note + "; " if note else "") + "Vela ran part on the CPU"
        if mode == "preset" and v["weight_buffering"] not in ("None", ""):
            note = (note + "; " if note else "") + f"weights {v['weight_buffering']}-buffered in {len(str(v['ofm_depth_slices']).split('|')) - 1} slices"
        copies = sum(o["operator"] == "MemoryCopy" for o in v.get("schedule", []))
        if mode == "preset" and copies:
            note = (note + "; " if note else "") + f"Vela added {copies} feature-map copy op(s)"
        results.append(Result(case.name, acc, float(v["total"]), ours, note, mode))
        if verbose:
            r = results[-1]
            print(f"{r.case:36s} {acc:14s} vela {r.vela:>10.0f} ours {r.ours:>10.0f} {100 * r.error:+6.1f}%", flush=True)
    save_cache(cache_path, cache)
    return results


def error_table(results: Sequence[Result], mode: str = "sram_only") -> str:
    """Per accelerator: cases, median and worst |error|, share within 5%, and the cases outside 5%."""
    memory = MEMORY_MODE if mode == "sram_only" else "U55 Shared_Sram / U65 Dedicated_Sram"
    what = "per-network total cycles of Vela's binary" if mode in ("networks", "u85") else "per-op total cycles"
    presets = ", ".join(sorted(set(PRESET.values())))
    if mode == "u85":
        memory, presets = "Ethos-U85", "Vela's default (Ethos_U85_SYS_DRAM_Mid), Ethos_U85_SYS_Flash_High/Shared_Sram"
    lines = [f"Cycle model vs Vela {vela_version()} ({what}, {memory}, presets: {presets})", ""]
    lines.append(f"{'accelerator':15s} {'cases':>5s} {'median |err|':>12s} {'worst err':>10s} {'within 5%':>10s} "
                 f"{'exact':>6s}")
    for acc in ACCELERATORS + U85_ACCELERATORS + ("all",):
        rs = [r for r in results if acc == "all" or r.accelerator == acc]
        if not rs:
            continue
        errs = [abs(r.error) for r in rs]
        worst = max(rs, key=lambda r: abs(r.error))
        within = sum(e <= WITHIN for e in errs) / len(errs)
        exact = sum(r.ours == r.vela for r in rs)
        lines.append(f"{acc:15s} {len(rs):5d} {100 * statistics.median(errs):11.2f}% {100 * worst.error:+9.2f}% "
                     f"{100 * within:9.1f}% {exact:6d}")
    outside = sorted((r for r in results if abs(r.error) > WITHIN), key=lambda r: -abs(r.error))
    lines += ["", f"cases outside ±{100 * WITHIN:.0f}%: {len(outside)}"]
    for r in outside:
        lines.append(f"  {r.case:36s} {r.accelerator:14s} vela {r.vela:>10.0f} ours {r.ours:>10.0f} "
                     f"{100 * r.error:+6.1f}%  {r.note}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", default=os.path.join("build", "calibration_vela.json"),
                   help="JSON file caching Vela's results (not committed)")
    p.add_argument("--accelerator", action="append", help="restrict to these accelerators")
    p.add_argument("--case", action="append", help="restrict to cases whose name contains this")
    p.add_argument("--mode", choices=MODES + ("all",), default="all",
                   help="sram_only: every tensor in SRAM (the calibration); preset: the presets' memory modes; "
                        "networks: multi-operation lowerings, our estimator on Vela's binary")
    p.add_argument("--models", default=os.environ.get("CASCADER_MODELS", ""),
                   help="u85 mode: a folder of .tflite models costed beside the zoo networks")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    accs = args.accelerator or list(ACCELERATORS)
    cases = [c for c in sweep() if not args.case or any(s in c.name for s in args.case)]
    ok = True
    for mode in (MODES if args.mode == "all" else (args.mode,)):
        if mode == "networks":
            names = [n for n in network_cases() if not args.case or any(s in n for s in args.case)]
            results = calibrate_networks(names, accs, args.verbose)
        elif mode == "u85":
            names = [n for n in u85_networks(args.models) if not args.case or any(s in n for s in args.case)]
            u85_accs = [a for a in (args.accelerator or U85_ACCELERATORS) if a in U85_ACCELERATORS]
            results = calibrate_u85(names, u85_accs, list(U85_SYSTEMS), args.models, args.verbose)
        else:
            results = calibrate([(c, a) for c in cases for a in accs], args.cache, args.verbose, mode)
        if not results:
            continue
        print(error_table(results, mode), end="\n\n")
        errs = [abs(r.error) for r in results]
        if mode == "u85":  # the bar of #42: 95% within 5%, none beyond 10%
            ok = ok and sum(e <= WITHIN for e in errs) >= 0.95 * len(errs) and max(errs) <= 0.10
        else:
            ok = ok and sum(e <= WITHIN for e in errs) >= 0.9 * len(errs) and max(errs) <= WORST
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
