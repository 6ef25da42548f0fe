"""Resource variables (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE) and CALL_ONCE, as TFLM runs them.

A converted model keeps state across inferences in resource variables: VAR_HANDLE names a
variable (container, shared_name), ASSIGN_VARIABLE copies a tensor into it, READ_VARIABLE copies
it out, and CALL_ONCE runs an initialiser subgraph on the first inference only. The variables
belong to the interpreter, not to any operator, so these operators cannot run one at a time on
the reference kernels as other CPU operators do (each would be an interpreter of its own); the
simulator keeps them here. They move bytes only, so nothing is computed that could round.

TFLM's MicroResourceVariables: a variable gets its buffer when an ASSIGN_VARIABLE writing it is
prepared (before the first inference), filled with the assigned tensor's zero point (as an int8
byte, for every byte) until a value is assigned; reads and assignments copy bytes. LiteRT
refuses a read before the first assignment; TFLM, and so this simulator, reads the fill.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import BinaryError
from ..tflite import Model, Operator, Tensor

RESOURCE_OPERATORS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"})


def _fill_byte(tensor: Tensor) -> int:
    q = tensor.quantization
    return int(q.zero_point[0]) & 0xFF if q is not None and q.zero_point.size else 0


class ResourceVariables:
    """The resource variables of one loaded model and which CALL_ONCE operators have run."""

    def __init__(self, model: Model) -> None:
        self._ids: dict[tuple[str, str], int] = {}
        self._fill: dict[int, tuple[int, int]] = {}  # id -> (bytes, fill byte) from the preparation
        for graph in model.subgraphs:  # TFLM prepares every subgraph before the first inference
            handles: dict[int, int] = {}
            for op in graph.operators:
                if op.opcode == "VAR_HANDLE":
                    handles[op.outputs[0]] = self._id(op)
                elif op.opcode == "ASSIGN_VARIABLE" and op.inputs[0] in handles:
                    value = graph.tensors[op.inputs[1]]
                    self._fill.setdefault(handles[op.inputs[0]], (value.nbytes, _fill_byte(value)))
        self.reset()

    def reset(self) -> None:
        """The state of a freshly loaded model: every variable its fill, no CALL_ONCE run."""
        self.buffers = {i: np.full(size, fill, np.uint8) for i, (size, fill) in self._fill.items()}
        self.called: set[tuple[int, int]] = set()  # (subgraph, operator) of the CALL_ONCEs that ran

    def _id(self, op: Operator) -> int:
        key = (op.options.get("container") or "", op.options.get("shared_name") or "")
        return self._ids.setdefault(key, len(self._ids))

    def run(self, graph_index: int, index: int, op: Operator, tensors: list[Tensor], values: dict[int, np.ndarray],
            run_subgraph: Callable[[int], None]) -> None:
        """Run one of RESOURCE_OPERATORS; `run_subgraph(i)` runs subgraph i (CALL_ONCE's initialiser)."""
        where = f"operator {index} ({op.opcode})"
        if op.opcode == "VAR_HANDLE":
            values[op.outputs[0]] = np.array(self._id(op), np.int32)  # the resource id, as TFLM's handle
        elif op.opcode == "CALL_ONCE":
            if (graph_index, index) not in self.called:
                self.called.add((graph_index, index))
                run_subgraph(int(op.options["init_subgraph_index"]))
        else:
            handle = values.get(op.inputs[0])
            if handle is None:
                raise BinaryError(f"{where}: its resource handle has no value (no VAR_HANDLE ran before it)")
            buffer = self.buffers.get(int(handle))
            if buffer is None:
                raise BinaryError(f"{where}: the variable has no buffer: no ASSIGN_VARIABLE in the model writes it")
            if op.opcode == "ASSIGN_VARIABLE":
                value = values.get(op.inputs[1], tensors[op.inputs[1]].data)  # an initialiser assigns a constant
                if value is None:
                    raise BinaryError(f"{where}: the value it assigns has none")
                raw = np.ascontiguousarray(value).view(np.uint8).reshape(-1)
                if raw.size != buffer.size:
                    raise BinaryError(f"{where}: assigns {raw.size} bytes to a variable of {buffer.size}")
                buffer[:] = raw
            elif op.opcode == "READ_VARIABLE":
                out = tensors[op.outputs[0]]
                if out.nbytes != buffer.size:
                    raise BinaryError(f"{where}: reads {out.nbytes} bytes from a variable of {buffer.size}")
                values[op.outputs[0]] = buffer.view(out.numpy_dtype).reshape(out.shape).copy()
