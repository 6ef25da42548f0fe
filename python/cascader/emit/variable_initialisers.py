"""The CALL_ONCE initialisers of the resource variables the NPU holds (`frontend.lower_resource_variables`).

A variable the NPU holds is a buffer at one offset of TFLM's arena; its converter-written
initialiser (VAR_HANDLE, then ASSIGN_VARIABLE of a constant) would fill TFLM's resource
variable instead, which nothing reads any more. As Vela 5.2 does, the initialiser becomes an
`ethos-u` operator that copies each start value from its own flash into the variable's offset
(one DMA each), and the CPU's CALL_ONCE runs it on the first inference. Operators of variables
the NPU does not hold stay in the initialiser for TFLM.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import CascaderError
from ..frontend.lower_resource_variables import constant_initialisers, variable_key
from ..tflite.ethos_u import REGION_FLASH, REGION_SCRATCH, NpuInitialiser
from ..tflite.model import Model
from .commands import encode_command_stream
from .program import FlashImage


def held_variables(allocated: tuple) -> dict[str, int]:
    """Variable key -> its arena offset, for the variables an allocated schedule holds."""
    sched, _, placement, _ = allocated
    held: dict[str, int] = {}
    for seg in sched.segments:
        for b, key in seg.segment.resident.items():
            region, address = placement.address[b]
            if region != REGION_SCRATCH:  # the layout keeps what the CPU sees in the arena
                raise CascaderError(f"variable {key!r} was laid out in region {region}, not in the arena")
            if held.setdefault(key, address) != address:
                raise CascaderError(f"variable {key!r} has two arena offsets ({held[key]} and {address})")
    return held


def variable_initialisers(model: Model, held: dict[str, int], accelerator: str) -> dict[int, NpuInitialiser]:
    """Subgraph index -> the `ethos-u` operator replacing that initialiser, for the initialisers
    of the variables `held` (key -> arena offset)."""
    starts = constant_initialisers(model)
    by_subgraph: dict[int, list[str]] = {}
    for key in sorted(held):
        if key not in starts:  # the partition keeps such a variable with TFLM
            raise CascaderError(f"variable {key!r} is held by the NPU but no CALL_ONCE initialiser assigns it")
        by_subgraph.setdefault(starts[key][0], []).append(key)
    out = {}
    for k, keys in sorted(by_subgraph.items()):
        flash, records, variables = FlashImage(), [], []
        for key in keys:
            start = starts[key][1]
            blob = start.data.tobytes()
            at = flash.append(blob)
            records.append(dict(kind="dma", src=dict(region=REGION_FLASH, address=at, length=len(blob)),
                                dst=dict(region=REGION_SCRATCH, address=held[key], length=len(blob))))
            variables.append((replace(start, name=key.lstrip("/")), held[key]))
        graph = model.subgraphs[k]
        handles = {op.outputs[0]: variable_key(op) for op in graph.operators if op.opcode == "VAR_HANDLE"}
        kept = tuple(i for i, op in enumerate(graph.operators)
                     if (handles.get(op.outputs[0]) if op.opcode == "VAR_HANDLE" else handles.get(op.inputs[0]))
                     not in held)
        out[k] = NpuInitialiser(encode_command_stream(records, accelerator), flash.data, tuple(variables), kept)
    return out
