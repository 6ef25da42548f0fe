"""Each NPU subgraph of a binary cut out, with the source operators it replaces, as a model of its own.

When the reference interpreter cannot run a whole model (a custom operator it does not know,
a pose decoder or an audio front end), the NPU subgraphs can still be checked one by one: an
`ethos-u` operator must compute, from its IFMs, what the source operators between those
tensors compute. The two are matched by tensor name: Vela and cascader both give an `ethos-u`
operator's IFMs and OFMs the names of the source tensors they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from .reference import operators_model
from .sim.binary import npu_calls
from .tflite import Model


@dataclass(frozen=True)
class NpuCut:
    """One `ethos-u` operator of a binary and the source operators it replaces."""

    operator: int  # the ethos-u operator's index in the binary's main subgraph
    source: Model  # those source operators as a model: its inputs are the IFMs, its outputs the OFMs
    ifms: tuple[int, ...]  # the binary tensor of each of `source`'s inputs
    ofms: tuple[int, ...]  # the binary tensor of each of `source`'s outputs
    source_operators: tuple[int, ...]  # their indices in the source's main subgraph


def npu_cuts(source: Model, binary: Model) -> list[NpuCut | str]:
    """One entry per `ethos-u` operator of `binary`, in order: its cut, or why it has none."""
    sg, bg = source.main, binary.main
    names: dict[str, list[int]] = {}
    for i, t in enumerate(sg.tensors):
        names.setdefault(t.name, []).append(i)
    producer = {t: i for i, op in enumerate(sg.operators) for t in op.outputs}
    cuts: list[NpuCut | str] = []
    for call in npu_calls(binary):
        where = f"ethos-u operator {call.index}"
        # Variable tensors are state (an LSTM's), not values the operator is given or gives.
        ifms = tuple(t for t in call.ifms if not bg.tensors[t].is_variable)
        ofms = tuple(t for t in call.ofms if not bg.tensors[t].is_variable)
        unmatched = [bg.tensors[t].name for t in (*ifms, *ofms) if len(names.get(bg.tensors[t].name, ())) != 1]
        if unmatched:
            cuts.append(f"{where}: no single source tensor named {unmatched[0]!r}")
            continue
        inputs = tuple(names[bg.tensors[t].name][0] for t in ifms)
        outputs = tuple(names[bg.tensors[t].name][0] for t in ofms)
        resized = [bg.tensors[b].name for b, s in zip((*ifms, *ofms), (*inputs, *outputs))
                   if bg.tensors[b].size != sg.tensors[s].size]
        if resized:
            cuts.append(f"{where}: {resized[0]!r} holds another number of elements than in the source")
            continue
        # The source operators between the IFMs and the OFMs: walk back from the OFMs.
        operators, stack, seen = set(), list(outputs), set(inputs)
        loose = None
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            tensor = sg.tensors[t]
            if tensor.data is not None or tensor.is_variable:
                continue
            if t not in producer:
                loose = tensor.name
                break
            operators.add(producer[t])
            stack.extend(u for u in sg.operators[producer[t]].inputs if u >= 0)
        if loose is not None:
            cuts.append(f"{where}: its IFMs do not cut it out of the source ({loose!r} is read and is not one)")
            continue
        order = tuple(sorted(operators))
        cuts.append(NpuCut(call.index, operators_model(source, sg, order, inputs, outputs), ifms, ofms, order))
    return cuts
