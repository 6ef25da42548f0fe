"""`cascader.simulate`: run an Ethos-U binary bit-exactly, NPU operators in the C++ core.

CPU operators left in the model run through the reference interpreter (one operator at a
time, on the values the simulation produced; see `sim.cpu`), resource variables and CALL_ONCE
as TFLM runs them (`sim.resource_variables`), so `simulate(binary, inputs)` needs nothing
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
from ..tflite import Model, SubGraph, load_model
from ..tflite.ethos_u import REGION_FLASH, REGION_SCRATCH, REGION_SCRATCH_FAST
from .binary import DecodedStream, NpuCall, is_npu_operator, npu_calls
from .cpu import CpuOperator, initial_value
from .resource_variables import RESOURCE_OPERATORS, ResourceVariables

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


def _persistent_memory(sg: SubGraph, calls: list[NpuCall], arena: np.ndarray) -> dict[int, np.ndarray]:
    """The memory of each variable tensor the NPU operators take or give. TFLM allocates a
    variable tensor with an OfflineMemoryAllocation offset at that offset in the arena (Vela
    plans an LSTM's state so), and one without in its persistent arena, a buffer of its own."""
    memories = {}
    for call in calls:
        for t in (*call.persistent, *call.ofms):
            tensor = sg.tensors[t]
            if not tensor.is_variable or t in memories:
                continue
            offset = call.arena_offsets.get(t)
            memories[t] = (arena[offset : offset + tensor.nbytes] if offset is not None
                           else np.zeros(max(tensor.nbytes, 1), dtype=np.uint8))
    return memories


def _reset(sg: SubGraph, persistent: dict[int, np.ndarray]) -> None:
    """What TFLM's ResetVariableTensors does: int8 variables to their zero point, others to 0."""
    for t, memory in persistent.items():
        memory[: sg.tensors[t].nbytes] = initial_value(sg.tensors[t]).view(np.uint8).reshape(-1)


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
    produced = {t for op in sg.operators for t in op.outputs}
    for t in call.ifms:
        value = values.get(t)
        if value is None and t not in produced and t not in sg.inputs and tensors[t].data is None and t in offsets:
            continue  # state no operator of the subgraph gives: Vela's resource variable, kept in the arena
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


class Session:
    """A binary loaded for repeated inferences: its state carries from one run to the next.

    State is what a TFLite interpreter keeps between invocations: variable tensors (an NPU
    operator's persistent arena, an LSTM's output and cell state on the CPU), resource
    variables (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE) and whether each CALL_ONCE has run.
    TFLM sets it up when it allocates the tensors (variables zero-filled, int8 ones to their
    zero point) and never clears it between invocations; `run` after `run` sees the state the
    previous inference left, and `reset` gives the state of a freshly loaded binary. The
    scratch arena is not promised to survive (TFLM reuses it), except where a variable tensor
    is planned inside it.

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
        # NPU operators of every subgraph (a CALL_ONCE initialiser's too), on one arena: TFLM
        # has one for the model, and Vela keeps a resource variable at one offset of it in
        # every subgraph (the arena is not cleared between invocations).
        self._calls = {(g, c.index): c for g in range(len(self.model.subgraphs)) for c in npu_calls(self.model, g)}
        by_graph = [[c for (g, _), c in self._calls.items() if g == graph] for graph in range(len(self.model.subgraphs))]
        arenas = [_arena(self.model.subgraphs[g], calls) for g, calls in enumerate(by_graph) if calls]
        self._arena = np.zeros(max((a.size for a in arenas), default=0), dtype=np.uint8)
        self._fast = _fast_memory(sg, by_graph[0])
        self._persistent = _persistent_memory(sg, by_graph[0], self._arena)
        self._resources = ResourceVariables(self.model)
        self._cpu: dict[tuple[int, int], CpuOperator] = {}  # (subgraph, operator) -> loaded once
        self.reset()

    @property
    def persistent(self) -> dict[str, np.ndarray]:
        """The NPU operators' persistent arenas' bytes by tensor name (live views)."""
        return {self.model.main.tensors[t].name: m for t, m in self._persistent.items()}

    @property
    def variables(self) -> dict[str, np.ndarray]:
        """The CPU operators' variable tensors (an LSTM's state) by name, as the last run left them."""
        return {self.model.main.tensors[t].name: v for t, v in self._variables.get(0, {}).items()}

    def reset(self) -> None:
        """The state of a freshly loaded binary: variable tensors as TFLite's ResetVariableTensors
        leaves them, resource variables at their fill, no CALL_ONCE run."""
        self._arena[:] = 0
        _reset(self.model.main, self._persistent)
        self._variables: dict[int, dict[int, np.ndarray]] = {}  # subgraph -> tensor -> value
        self._resources.reset()

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
        self._run_subgraph(0, values)
        missing = [sg.tensors[t].name for t in sg.outputs if t not in values]
        if missing:
            raise BinaryError(f"model output(s) {missing}: no operator gives them a value")
        return [values[t] for t in sg.outputs]

    def run_operator(self, index: int, values: dict[int, np.ndarray]) -> None:
        """Run operator `index` of the main subgraph alone on `values` (tensor index -> array),
        adding its outputs to `values`; the session's state is used and updated as in `run`."""
        self._run_operator(0, index, values)

    def _run_subgraph(self, graph: int, values: dict[int, np.ndarray]) -> None:
        for index in range(len(self.model.subgraphs[graph].operators)):
            self._run_operator(graph, index, values)

    def _run_operator(self, graph: int, index: int, values: dict[int, np.ndarray]) -> None:
        sg = self.model.subgraphs[graph]
        op = sg.operators[index]
        if is_npu_operator(op):
            call = self._calls[graph, index]
            if graph == 0:
                _run_npu(sg, call, values, self._arena, self._fast, self._persistent)
                return
            if any(sg.tensors[t].is_variable for t in call.ifms + call.ofms):
                raise BinaryError(f"subgraph {graph}, operator {index}: an ethos-u operator outside the main "
                                  "subgraph with variable tensors, which the simulator does not run")
            _run_npu(sg, call, values, self._arena, _fast_memory(sg, [call]), {})
        elif op.opcode in RESOURCE_OPERATORS:
            self._resources.run(graph, index, op, sg.tensors, values, lambda g: self._run_subgraph(g, {}))
        else:
            cpu = self._cpu.get((graph, index))
            if cpu is None:
                cpu = self._cpu[(graph, index)] = CpuOperator(self.model, sg, index)
            cpu.run(values, self._variables.setdefault(graph, {}))


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
