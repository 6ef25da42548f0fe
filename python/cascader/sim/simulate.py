"""`cascader.simulate`: run an Ethos-U binary bit-exactly, NPU operators in the C++ core.

CPU operators left in the model run through the reference interpreter (one operator at a
time, on the values the simulation produced), so `simulate(binary, inputs)` needs nothing
but the binary and gives the whole model's outputs. We chose this over comparing per NPU
subgraph against the reference interpreter's intermediate tensors because the latter needs
the original model beside the binary, and `simulate` must work on any binary alone (ours
included). Its cost is that a CPU operator's result is the reference kernel's, which is the
baseline anyway.
"""

from __future__ import annotations

import os
from typing import Any, Sequence, Union

import numpy as np

from .. import _core
from ..errors import BinaryError, CascaderError
from ..reference import ReferenceInterpreter, single_operator_model
from ..tflite import Model, SubGraph, Tensor, load_model
from ..tflite.ethos_u import REGION_FLASH, REGION_SCRATCH, REGION_SCRATCH_FAST
from .binary import DecodedStream, NpuCall, is_npu_operator, npu_calls

BinaryLike = Union[Model, bytes, bytearray, memoryview, str, os.PathLike, Any]


def _as_model(binary: BinaryLike) -> Model:
    if isinstance(binary, Model):
        return binary
    if isinstance(binary, (bytes, bytearray, memoryview, str, os.PathLike)):
        return load_model(bytes(binary) if not isinstance(binary, (str, os.PathLike)) else binary)
    model = getattr(binary, "model", None)  # a CompiledModel carries its output Model
    if isinstance(model, Model):
        return model
    raise TypeError(f"binary must be a path, bytes, a Model or a CompiledModel, not {type(binary).__name__}")


def decode(binary: BinaryLike) -> list[DecodedStream]:
    """Decode every `ethos-u` operator: its config and its typed NPU operations.

    Returns
    -------
    list of DecodedStream
        One per NPU operator, with ``config``, ``command_stream_words`` and ``operations``
        (shapes, formats, regions, addresses, tiles, kernel, weights, scales, activation,
        block config, DMA); it renders as a table in a notebook.

    Raises
    ------
    BinaryError
        A malformed payload or command stream; the message names the word offset.
    """
    return [call.decode() for call in npu_calls(_as_model(binary))]


def _arena(sg: SubGraph, calls: list[NpuCall]) -> np.ndarray:
    """One arena for the whole inference: Vela keeps feature maps that pass from one NPU
    operator to a later one in the shared scratch tensor, across the CPU operators between."""
    size = 0
    for call in calls:
        offsets = call.arena_offsets
        planned = [call.scratch_tensor, *call.ifms, *call.ofms]
        missing = [sg.tensors[t].name for t in planned if t not in offsets]
        if missing:
            raise BinaryError(
                f"operator {call.index} (ethos-u): no OfflineMemoryAllocation offset for {missing}; "
                "the IFM/OFM placement inside the scratch arena is unknown"
            )
        size = max(size, *(offsets[t] + max(sg.tensors[t].nbytes, 1) for t in planned))
    return np.zeros(size, dtype=np.uint8)


def _fast_memory(sg: SubGraph, calls: list[NpuCall]) -> np.ndarray:
    """Region 2 (scratch_fast). Vela addresses it only when it spills to a dedicated SRAM
    (Dedicated_Sram); that SRAM is a memory of its own, whatever offset the arena plan gives
    the placeholder tensor, so it never aliases the arena."""
    size = max((sg.tensors[c.scratch_fast_tensor].nbytes for c in calls), default=0)
    return np.zeros(max(size, 1), dtype=np.uint8)


def _persistent_memory(sg: SubGraph, calls: list[NpuCall]) -> dict[int, np.ndarray]:
    """One zeroed buffer per persistent (variable) tensor the NPU operators take."""
    return {t: np.zeros(max(sg.tensors[t].nbytes, 1), dtype=np.uint8) for c in calls for t in c.persistent}


def _reset(sg: SubGraph, persistent: dict[int, np.ndarray]) -> None:
    """What TFLM's ResetVariableTensors does: int8 variables to their zero point, others to 0."""
    for t, memory in persistent.items():
        tensor = sg.tensors[t]
        q = tensor.quantization
        memory.fill(int(q.zero_point[0]) & 0xFF if tensor.dtype == "int8" and q is not None else 0)


def _run_npu(
    sg: SubGraph,
    call: NpuCall,
    values: dict[int, np.ndarray],
    arena: np.ndarray,
    fast: np.ndarray,
    persistent: dict[int, np.ndarray],
) -> dict[str, Any]:
    tensors = sg.tensors
    offsets = call.arena_offsets
    for t in call.ifms:
        value = values.get(t)
        if value is None:
            raise CascaderError(f"operator {call.index} (ethos-u): input {tensors[t].name!r} has no value")
        raw = np.ascontiguousarray(value, dtype=tensors[t].numpy_dtype).view(np.uint8).reshape(-1)
        arena[offsets[t] : offsets[t] + raw.size] = raw
    # Regions 3.. are the tensors at those positions, as TFLM passes them: a persistent arena,
    # or an IFM/OFM inside the scratch arena (Vela's command streams never address those).
    regions = {}
    for region, t in enumerate(call.region_tensors):
        if region > REGION_SCRATCH_FAST and t >= 0:
            if t in persistent:
                regions[region] = persistent[t]
            elif t in offsets:
                regions[region] = arena[offsets[t] : offsets[t] + tensors[t].nbytes]
    start = offsets[call.scratch_tensor]
    regions[REGION_FLASH] = call.flash.copy()
    regions[REGION_SCRATCH] = arena[start : start + tensors[call.scratch_tensor].nbytes]  # a view of the arena
    regions[REGION_SCRATCH_FAST] = fast[: tensors[call.scratch_fast_tensor].nbytes]
    stats = _core.simulate_driver_payload(call.payload, regions)
    for t in call.ofms:
        tensor = tensors[t]
        raw = arena[offsets[t] : offsets[t] + tensor.nbytes]
        values[t] = raw.view(tensor.numpy_dtype).reshape(tensor.shape).copy()
    return stats


def _run_cpu(model: Model, sg: SubGraph, index: int, values: dict[int, np.ndarray]) -> None:
    """Run operator `index` alone on the reference kernels; constants keep their buffers."""
    sub, inputs, outputs = single_operator_model(model, sg, index)
    # Vela rewrites some shapes around the operators it leaves on the CPU (a (1,) CAST input
    # feeding a (1, 1) output); TFLM only needs the element counts to agree, so do we.
    feed = [_as_declared(values[t], sg.tensors[t]) for t in inputs]
    for t, v in zip(outputs, ReferenceInterpreter(sub).run(feed)):
        values[t] = _as_declared(v, sg.tensors[t])


def _as_declared(value: np.ndarray, tensor: Tensor) -> np.ndarray:
    if tuple(value.shape) != tuple(tensor.shape) and value.size == tensor.size:
        return value.reshape(tensor.shape)
    return value


class Session:
    """A binary loaded for repeated inferences: persistent arenas keep their bytes between runs.

    TFLM allocates a variable tensor once, in its persistent arena, and zero-fills it (int8: the
    zero point) when it allocates the tensors; it is not cleared between invocations. A session
    does the same: `run` after `run` sees the state the previous inference left, `reset` clears
    it. The scratch arena is not promised to survive (TFLM reuses it), and CPU operators run
    without state.

    Parameters
    ----------
    binary
        A path, the `.tflite` bytes, a `Model`, or a CompiledModel.

    Raises
    ------
    BinaryError
        The binary is malformed (see `simulate`).
    """

    def __init__(self, binary: BinaryLike) -> None:
        self.model = _as_model(binary)
        sg = self.model.main
        self._calls = npu_calls(self.model)
        self._arena = _arena(sg, self._calls)
        self._fast = _fast_memory(sg, self._calls)
        self._persistent = _persistent_memory(sg, self._calls)
        self.reset()

    @property
    def persistent(self) -> dict[str, np.ndarray]:
        """The persistent arenas' bytes by tensor name (live views)."""
        return {self.model.main.tensors[t].name: m for t, m in self._persistent.items()}

    def reset(self) -> None:
        """Zero the persistent arenas, as TFLM's ResetVariableTensors does."""
        _reset(self.model.main, self._persistent)

    def run(self, inputs: Sequence[np.ndarray] | np.ndarray) -> list[np.ndarray]:
        """One inference on `inputs` (one array per model input); returns the model outputs."""
        sg = self.model.main
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if len(inputs) != len(sg.inputs):
            raise CascaderError(f"the model has {len(sg.inputs)} inputs, got {len(inputs)}")
        values: dict[int, np.ndarray] = {}
        for t, value in zip(sg.inputs, inputs):
            tensor = sg.tensors[t]
            value = np.asarray(value)
            if value.dtype != tensor.numpy_dtype or tuple(value.shape) != tuple(tensor.shape):
                raise CascaderError(
                    f"input {tensor.name!r} needs {tensor.dtype}{list(tensor.shape)}, "
                    f"got {value.dtype.name}{list(value.shape)}"
                )
            values[t] = value
        calls = {c.index: c for c in self._calls}
        for index, op in enumerate(sg.operators):
            if is_npu_operator(op):
                _run_npu(sg, calls[index], values, self._arena, self._fast, self._persistent)
            else:
                _run_cpu(self.model, sg, index, values)
        return [values[t] for t in sg.outputs]


def simulate(binary: BinaryLike, inputs: Sequence[np.ndarray] | np.ndarray) -> list[np.ndarray]:
    """Run an Ethos-U binary on `inputs` and return the model outputs.

    NPU operators are decoded and executed bit-exactly in the C++ core; CPU operators left
    in the model run on TFLite's reference kernels (see the module docstring for why).
    Persistent arenas start at zero; use a `Session` to keep them across inferences.

    Parameters
    ----------
    binary
        A path, the `.tflite` bytes, a `Model`, or a CompiledModel.
    inputs
        One array per model input, in the model's input order, with its dtype and shape.

    Raises
    ------
    BinaryError
        The binary is malformed (the message names the command-stream word or the payload
        word), or it uses a feature the simulator does not implement.
    """
    return Session(binary).run(inputs)
