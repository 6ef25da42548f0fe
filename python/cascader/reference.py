"""TFLite's *reference* kernels: the baseline every bit-exactness check compares against.

LiteRT (`ai-edge-litert`, a test extra) is run with `OpResolverType.BUILTIN_REF`. The default
resolver uses XNNPACK and optimised kernels, which may round differently from the reference
kernels that TFLM and the Ethos-U semantics follow.
"""

from __future__ import annotations

import os
from typing import Sequence, Union

import numpy as np

from .errors import CascaderError
from .tflite import Model, load_model, save_model

ModelLike = Union[Model, bytes, str, os.PathLike]


def _model_bytes(model: ModelLike) -> bytes:
    if isinstance(model, Model):
        return save_model(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    with open(model, "rb") as f:
        return f.read()


def _litert_compatible(data: bytes) -> bytes:
    """Mend the one legacy quirk current LiteRT refuses, without changing any computed value.

    TOCO-era converters (e.g. TFLM's person_detect) quantize 1-D biases per channel along
    axis 3. TFLM and the kernels ignore the axis of a bias, but LiteRT 2.x rejects the file;
    for a 1-D tensor the only meaningful axis is 0, so that is what we write.
    """
    model = load_model(data)
    mended = False
    for graph in model.subgraphs:
        for t in graph.tensors:
            q = t.quantization
            if q is not None and q.scale.size > 1 and len(t.shape) == 1 and q.quantized_dimension != 0:
                q.quantized_dimension = 0
                mended = True
    return save_model(model) if mended else data


class ReferenceInterpreter:
    """A LiteRT interpreter on the reference kernels, single-threaded and deterministic."""

    def __init__(self, model: ModelLike, preserve_all_tensors: bool = False) -> None:
        try:
            from ai_edge_litert.interpreter import Interpreter, OpResolverType
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise CascaderError(
                "the reference interpreter needs ai-edge-litert: pip install 'cascader[test]'"
            ) from e
        self.model_bytes = _litert_compatible(_model_bytes(model))
        self._interpreter = Interpreter(
            model_content=self.model_bytes,
            experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
            experimental_preserve_all_tensors=preserve_all_tensors,
            num_threads=1,
        )
        self._interpreter.allocate_tensors()
        self.input_details = self._interpreter.get_input_details()
        self.output_details = self._interpreter.get_output_details()

    def run(self, inputs: Sequence[np.ndarray] | np.ndarray) -> list[np.ndarray]:
        """Run one inference; returns the subgraph outputs in order."""
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if len(inputs) != len(self.input_details):
            raise CascaderError(f"model has {len(self.input_details)} inputs, got {len(inputs)}")
        for detail, value in zip(self.input_details, inputs):
            value = np.asarray(value)
            if value.dtype != detail["dtype"] or tuple(value.shape) != tuple(detail["shape"]):
                raise CascaderError(
                    f"input {detail['name']!r} needs {np.dtype(detail['dtype']).name}{list(detail['shape'])}, "
                    f"got {value.dtype.name}{list(value.shape)}"
                )
            self._interpreter.set_tensor(detail["index"], value)
        self._interpreter.invoke()
        return [self._interpreter.get_tensor(d["index"]).copy() for d in self.output_details]

    def tensor(self, index: int) -> np.ndarray:
        """Any tensor by subgraph-0 index (intermediates need preserve_all_tensors=True)."""
        return self._interpreter.get_tensor(index).copy()


def run(model: ModelLike, inputs: Sequence[np.ndarray] | np.ndarray) -> list[np.ndarray]:
    """Run `model` once on the reference kernels and return its outputs."""
    return ReferenceInterpreter(model).run(inputs)


def random_inputs(model: ModelLike, seed: int = 0) -> list[np.ndarray]:
    """Uniformly random inputs over each input's full integer range (normal for floats)."""
    m = model if isinstance(model, Model) else load_model(_model_bytes(model))
    rng = np.random.default_rng(seed)
    out = []
    for index in m.main.inputs:
        t = m.main.tensors[index]
        dtype = t.numpy_dtype
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, info.max, size=t.shape, dtype=dtype, endpoint=True))
        else:
            out.append(rng.standard_normal(t.shape).astype(dtype))
    return out
