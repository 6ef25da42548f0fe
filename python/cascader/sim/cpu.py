"""A CPU operator of a binary, run alone on TFLite's reference kernels.

Each operator becomes a model of its own (constants keep their buffers), loaded once per
session. Its variable tensors (an LSTM's output and cell state) are the session's, not the
one-operator interpreter's: they are set before each run and read back after, so the state
an inference leaves is the state the next one starts from, as in one interpreter running the
whole model, and whatever else in the binary reads the same variable sees it.
"""

from __future__ import annotations

import numpy as np

from ..errors import CascaderError
from ..reference import ReferenceInterpreter, single_operator_model
from ..tflite import Model, SubGraph, Tensor


def as_run(value: np.ndarray, tensor: Tensor) -> np.ndarray:
    """A kernel's result as the reference gives it for `tensor`.

    A tensor declared with no dimensions is shaped by its kernel when the interpreter prepares
    it (TFLite_Detection_PostProcess makes its declared-scalar count (1,)); the reference
    reports the kernel's shape, and so do we. Otherwise the declared shape wins where the
    element counts agree: Vela rewrites some shapes around the operators it leaves on the CPU
    (a (1,) CAST input feeding a (1, 1) output), and TFLM only needs the counts to agree.
    """
    if tensor.shape and tuple(value.shape) != tuple(tensor.shape) and value.size == tensor.size:
        return value.reshape(tensor.shape)
    return value


def initial_value(tensor: Tensor) -> np.ndarray:
    """A variable tensor after TFLite's ResetVariableTensor: int8 at its zero point, others 0."""
    q = tensor.quantization
    fill = int(q.zero_point[0]) if tensor.dtype == "int8" and q is not None else 0
    return np.full(tensor.shape, fill, dtype=tensor.numpy_dtype)


class CpuOperator:
    """Operator `index` of subgraph `sg` of `model`, on the reference kernels."""

    def __init__(self, model: Model, sg: SubGraph, index: int) -> None:
        self.index = index
        self.opcode = sg.operators[index].name
        self._tensors = sg.tensors
        self._model, self.inputs, self.outputs = single_operator_model(model, sg, index)
        # subgraph tensor -> its index in the one-operator model (the operator's inputs, in place)
        self.variables = {t: alone for t, alone in zip(sg.operators[index].inputs, self._model.main.operators[0].inputs)
                          if t >= 0 and sg.tensors[t].is_variable and sg.tensors[t].data is None}
        self._interpreter: ReferenceInterpreter | None = None

    def run(self, values: dict[int, np.ndarray], variables: dict[int, np.ndarray]) -> None:
        """Run on `values` (tensor -> array), adding the outputs; `variables` (tensor -> array)
        holds the variable tensors' state, updated in place."""
        missing = [self._tensors[t].name for t in self.inputs if t not in values]
        if missing:
            raise CascaderError(f"operator {self.index} ({self.opcode}): input(s) {missing} have no value")
        if self._interpreter is None:
            self._interpreter = ReferenceInterpreter(self._model)
        feed = [as_run(values[t], self._tensors[t]) for t in self.inputs]
        state = {i: variables.setdefault(t, initial_value(self._tensors[t])) for t, i in self.variables.items()}
        outputs, after = self._interpreter.run_with_variables(feed, state)
        for t, i in self.variables.items():
            variables[t] = after[i]
        for t, v in zip(self.outputs, outputs):
            values[t] = as_run(v, self._tensors[t])
