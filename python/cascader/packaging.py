"""The package stage of a whole compile: the source model, an allocated schedule and its
emission -> the output `.tflite`, one `ethos-u` operator per NPU segment in Vela's layout
(`tflite.ethos_u.package`)."""

from __future__ import annotations

from .emit.binary import Emission
from .emit.variable_initialisers import held_variables, variable_initialisers
from .tflite import Model
from .tflite.ethos_u import ArenaSizes, NpuSubgraph, package


def package_binary(m: Model, allocated: tuple, emission: Emission, accelerator: str,
                   removed: tuple[int, ...] = ()) -> tuple[Model, bytes, list[list[dict]]]:
    """The packaged binary of an allocated schedule and its emission (`emit.binary.emit`): the
    output model, its flash image and the emitted operation records per `ethos-u` operator.
    `removed`: the partition's operators left out (`Partition.removed`)."""
    sched, result, _, offsets = allocated
    flash, segments = emission
    subgraphs, records = [], []
    for seg, ops, words in segments:
        records.append(ops)
        subgraphs.append(NpuSubgraph(seg.segment.operators, words))
    data = flash.data
    held = held_variables(allocated)  # resource variables in the arena: their initialisers copy the starts in
    # Nothing on the NPU (every operator's verdict is CPU): the model runs on TFLM as it is.
    out = m if not subgraphs else package(m, subgraphs, data, ArenaSizes.from_layout(result), offsets,
                                          accelerator=accelerator, description="cascader Optimised", order=sched.order,
                                          removed=removed,
                                          initialisers=variable_initialisers(m, held, accelerator) if held else None)
    return out, data, records
