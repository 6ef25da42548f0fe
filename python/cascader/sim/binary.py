"""Reading Ethos-U binaries: the `ethos-u` custom operator and its memory layout.

An Ethos-U `.tflite` (Vela's or ours) holds one `ethos-u` custom operator per NPU subgraph.
Its inputs are, in order: the driver payload (COP1 header + command stream), the flash
tensor (weights, biases, LUTs), the scratch and scratch_fast tensors (the NPU's working
memory) and then the IFMs; its outputs are the OFMs. TFLM passes inputs 1.. and then the
outputs to the driver as base pointers, so a tensor's position is its region: 0 flash, 1
scratch, 2 scratch_fast, 3.. the rest (at most 8 regions). The IFMs and OFMs live *inside*
the scratch arena, at the offsets the `OfflineMemoryAllocation` metadata gives (TFLM honours
them), so the simulator lays out one arena from those offsets; region 1 is a view of it.
Region 2 is only used when Vela spills to a dedicated SRAM, a memory of its own.

A variable (`is_variable`) input is a persistent arena (see `cascader.tflite.ethos_u`: ours
is input 4, region 3): TFLM keeps it in its persistent arena, zeroed at allocation, so it
is state, not an IFM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _core
from ..errors import BinaryError
from ..tflite import Model, Operator, SubGraph
from ..tflite.ethos_u import ETHOSU_CUSTOM_CODE, MAX_REGIONS, ArenaSizes


@dataclass
class NpuCall:
    """One `ethos-u` operator: its payload, memories and where its IFMs/OFMs sit."""

    index: int  # operator index in the subgraph
    payload: bytes
    flash: np.ndarray  # uint8
    scratch_tensor: int
    scratch_fast_tensor: int
    ifms: tuple[int, ...]  # tensor indices
    ofms: tuple[int, ...]
    arena_offsets: dict[int, int] = field(default_factory=dict)  # tensor index -> byte offset
    persistent: tuple[int, ...] = ()  # variable inputs: arenas that outlive an inference
    region_tensors: tuple[int, ...] = ()  # the tensor each region (base pointer) 0..7 points at

    def decode(self) -> "DecodedStream":
        """The config and typed NPU operations of the command stream."""
        d = _core.decode_driver_payload(self.payload)
        return DecodedStream(self.index, d["config"], d["command_stream_words"], d["operations"])


@dataclass
class DecodedStream:
    """One decoded command stream: the NPU config and one dict per operation (kind, IFM/IFM2/
    OFM feature maps with region, tile bases, shape, strides, dtype, layout and zero point;
    kernel, padding, weights, scales, activation, rounding, scales, block config; or a DMA's
    source and destination)."""

    operator_index: int
    config: dict[str, Any]
    command_stream_words: int
    operations: list[dict[str, Any]]

    def __getitem__(self, key: str) -> Any:  # dict-style access, as the core returns it
        return getattr(self, key)

    def _repr_html_(self) -> str:
        rows = []
        for i, op in enumerate(self.operations):
            if op["kind"] == "dma":
                src, dst = op["src"], op["dst"]
                what = f"region {src['region']} @0x{src['address']:x} &rarr; region {dst['region']} @0x{dst['address']:x}"
                rows.append(f"<tr><td>{i}</td><td>{op['word_offset']}</td><td>DMA</td><td colspan=4>{what}, "
                            f"{src['length']} B</td></tr>")
                continue
            fm = lambda f: f"{'x'.join(map(str, f['shape']))} {f['dtype']} {f['layout']}"  # noqa: E731
            k = op["kernel"]
            rows.append(
                f"<tr><td>{i}</td><td>{op['word_offset']}</td><td>{op['kind']} {op.get('sub_op', '')}</td>"
                f"<td>{fm(op['ifm'])}</td><td>{fm(op['ofm'])}</td>"
                f"<td>{k['height']}x{k['width']} /{k['stride'][0]}x{k['stride'][1]}</td>"
                f"<td>{'x'.join(map(str, op['block']))}</td></tr>"
            )
        head = ("<tr><th>#</th><th>word</th><th>operation</th><th>IFM</th><th>OFM</th><th>kernel/stride</th>"
                "<th>block</th></tr>")
        return (f"<p>ethos-u operator {self.operator_index}: {self.config['accelerator']}, "
                f"{self.command_stream_words} command words, {len(self.operations)} operations</p>"
                f"<table>{head}{''.join(rows)}</table>")


def _offline_offsets(model: Model, subgraph: int) -> dict[int, int]:
    """Tensor arena offsets from TFLM's `OfflineMemoryAllocation` metadata (-1 = not planned)."""
    if "OfflineMemoryAllocation" not in model.metadata:
        return {}
    raw = model.metadata_bytes("OfflineMemoryAllocation")
    if len(raw) < 12 or len(raw) % 4:
        raise BinaryError(f"OfflineMemoryAllocation metadata has a bad size ({len(raw)} bytes)")
    words = np.frombuffer(raw, dtype="<i4")
    count = int(words[2])
    if count != len(words) - 3:
        raise BinaryError(
            f"OfflineMemoryAllocation declares {count} tensors but holds {len(words) - 3} offsets"
        )
    # TFLM reads one offset per tensor of every subgraph, the subgraphs one after another.
    total = sum(len(g.tensors) for g in model.subgraphs)
    if count != total:
        raise BinaryError(f"OfflineMemoryAllocation covers {count} tensors, the model's subgraphs have {total}")
    first = sum(len(g.tensors) for g in model.subgraphs[:subgraph])
    own = words[3 + first : 3 + first + len(model.subgraphs[subgraph].tensors)]
    return {i: int(o) for i, o in enumerate(own) if o >= 0}


def npu_calls(model: Model, subgraph: int = 0) -> list[NpuCall]:
    """Every `ethos-u` operator of a subgraph, with its payload and memories."""
    sg: SubGraph = model.subgraphs[subgraph]
    offsets = _offline_offsets(model, subgraph)
    calls = []
    for index, op in enumerate(sg.operators):
        if not is_npu_operator(op):
            continue
        if len(op.inputs) < 4:
            raise BinaryError(
                f"operator {index} (ethos-u) has {len(op.inputs)} inputs; it needs the command stream, "
                "flash, scratch and scratch_fast tensors first"
            )
        cmd, flash, scratch, scratch_fast = op.inputs[:4]
        if cmd < 0 or sg.tensors[cmd].data is None:
            raise BinaryError(f"operator {index} (ethos-u): the command stream tensor is not a constant")
        if flash < 0:
            raise BinaryError(f"operator {index} (ethos-u): no flash tensor")
        # An operation without weights, biases or LUTs gets an empty flash tensor (no buffer).
        flash_bytes = sg.tensors[flash].data.tobytes() if sg.tensors[flash].data is not None else b""
        rest = tuple(op.inputs[4:])
        persistent = tuple(t for t in rest if t >= 0 and sg.tensors[t].is_variable)
        calls.append(
            NpuCall(
                index=index,
                payload=sg.tensors[cmd].data.tobytes(),
                flash=np.frombuffer(flash_bytes, dtype=np.uint8),
                scratch_tensor=scratch,
                scratch_fast_tensor=scratch_fast,
                ifms=tuple(t for t in rest if t not in persistent),
                ofms=tuple(op.outputs),
                arena_offsets=offsets,
                persistent=persistent,
                region_tensors=(*op.inputs[1:], *op.outputs)[:MAX_REGIONS],
            )
        )
    return calls


def is_npu_operator(op: Operator) -> bool:
    return op.opcode == "CUSTOM" and op.custom_code == ETHOSU_CUSTOM_CODE


def arena_sizes(model: Model) -> ArenaSizes:
    """The arena sizes a packaged model (ours or Vela's) records in its `ethos-u` operators.

    This reader lives with the simulator, not with the packager: `tflite` never imports `sim`.
    """
    tensors = model.main.tensors
    calls = npu_calls(model)
    scratch = max((tensors[c.scratch_tensor].nbytes for c in calls), default=0)
    fast = max((tensors[c.scratch_fast_tensor].nbytes for c in calls if c.scratch_fast_tensor != c.scratch_tensor),
               default=0)
    persistent = sum(tensors[t].nbytes for t in {t for c in calls for t in c.persistent})
    return ArenaSizes(scratch, fast, persistent)
