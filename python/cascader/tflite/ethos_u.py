"""The Ethos-U packager: replace NPU subgraphs of a model by `ethos-u` custom operators.

The output is what Vela 5.2 writes, and what TFLM's `ethos-u` kernel and the Ethos-U core
driver expect:

- One `ethos-u` operator per NPU subgraph, custom options ``01 04 01`` (a flexbuffer holding
  the integer 1, TFLM's ``CO_TYPE_ETHOSU``). Its inputs are the driver payload (COP1 header
  + command stream, tensor ``ethos_u_command_stream``), then the base pointers: ``read_only``
  (the flash: weights, biases, LUTs), ``scratch``, ``scratch_fast``, then the IFMs; its
  outputs are the OFMs. TFLM hands inputs 1.. and then the outputs to the driver as base
  addresses, so the *position* of a tensor is its region: 0 flash, 1 scratch, 2
  scratch_fast, 3 the first IFM and so on; the kernel passes at most 8 (regions 0-7).
- All operators share one ``read_only`` and one ``scratch`` tensor (each has its own
  command stream). When there is no dedicated fast memory (scratch_fast size 0), the scratch
  tensor is passed again as region 2, as Vela 5.2 does.
- The IFMs and OFMs live inside the scratch arena: the `OfflineMemoryAllocation` metadata
  gives TFLM their offsets (and the scratch tensor's), so the command stream addresses them
  through region 1. Tensors are numbered in first-use order over the operators and constant
  buffers follow that order, then the model's metadata, as Vela writes them.

**Persistent arena** (our addition; Vela has none). Buffers that must outlive one inference
(the LUTs, any state) go to a ``persistent`` tensor: uint8, ``is_variable``, no offline
offset (-1). TFLM places a variable tensor without an offline offset in its *persistent*
(tail) arena, not in the planned non-persistent one, and zero-fills it when it allocates
the tensors (``ResetVariableTensors``; uint8 resets to 0). It is input 4 of every `ethos-u`
operator, right after scratch_fast, so it is always **region 3** whatever the number of
IFMs (the IFMs move up by one; Vela's command streams never address IFM regions, and an
emitter that does gets them checked here). Readers recognise it by ``is_variable``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _core
from ..errors import InvalidArgumentError
from .model import Model, Operator, SignatureDef, SubGraph, Tensor

if TYPE_CHECKING:
    from ..memory import MemoryLayout

ETHOSU_CUSTOM_CODE = "ethos-u"
# A flexbuffer whose root is the integer 1 (TFLM's CO_TYPE_ETHOSU): value, type (INT, 8 bit), width.
ETHOSU_CUSTOM_OPTIONS = b"\x01\x04\x01"
COMMAND_STREAM_NAME = "ethos_u_command_stream"
FLASH_NAME, SCRATCH_NAME, SCRATCH_FAST_NAME, PERSISTENT_NAME = "read_only", "scratch", "scratch_fast", "persistent"
REGION_FLASH, REGION_SCRATCH, REGION_SCRATCH_FAST, REGION_PERSISTENT = 0, 1, 2, 3
MAX_REGIONS = 8  # NPU base pointer registers; TFLM's kernel passes no more
DEFAULT_ID_WORD = 0x10066001  # the ID word Vela 5.2 writes for the U55/U65 (arch/ethos_u55)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class ArenaSizes:
    """Bytes of each arena the `ethos-u` operators address.

    `scratch` is the non-persistent arena TFLM plans (it holds the IFMs and OFMs);
    `scratch_fast` a dedicated fast memory (0: none, region 2 is the scratch arena);
    `persistent` the arena that outlives an inference (0: none).
    """

    scratch: int
    scratch_fast: int = 0
    persistent: int = 0

    @classmethod
    def from_layout(cls, layout: "MemoryLayout") -> "ArenaSizes":
        """The arena sizes of a `cascader.memory.layout` result (arenas named as the driver names them)."""
        sizes = layout.sizes
        return cls(sizes.get("scratch", 0), sizes.get("scratch_fast", 0), sizes.get("persistent", 0))

    @property
    def non_persistent(self) -> int:
        return self.scratch + self.scratch_fast

    def _repr_html_(self) -> str:
        return (f"<table><tr><th>scratch</th><th>scratch_fast</th><th>persistent</th></tr>"
                f"<tr><td>{self.scratch:,}</td><td>{self.scratch_fast:,}</td><td>{self.persistent:,}</td></tr></table>")


@dataclass(frozen=True)
class NpuSubgraph:
    """Operators of the main subgraph to run as one `ethos-u` operator, and its command stream.

    `ifms` / `ofms` fix the order of the operator's feature-map tensors (indices into the input
    model); by default they are the subgraph's boundary in first-use order.
    """

    operators: tuple[int, ...]
    command_stream: np.ndarray  # uint32 command words
    ifms: tuple[int, ...] | None = None
    ofms: tuple[int, ...] | None = None


@dataclass(frozen=True)
class NpuInitialiser:
    """A CALL_ONCE initialiser subgraph made one `ethos-u` operator (Vela's, for resource
    variables the NPU keeps in the arena): its command stream copies `flash` into the
    `variables`, tensors of the subgraph's own at fixed offsets of the arena (the offsets the
    main subgraph's command streams address them at); `kept` are the initialiser's operators
    left to TFLM (those of variables the NPU does not hold), after it."""

    command_stream: np.ndarray  # uint32 command words
    flash: bytes
    variables: tuple[tuple[Tensor, int], ...]  # (tensor, arena offset)
    kept: tuple[int, ...] = ()  # operator indices of the source initialiser


@dataclass
class _Npu:
    """One NPU subgraph being packaged: its boundary and the operator that replaces it."""

    ops: frozenset[int]
    ifms: tuple[int, ...]
    ofms: tuple[int, ...]
    payload: bytes
    position: int = 0


def package(
    model: Model,
    subgraphs: Sequence[NpuSubgraph],
    flash: bytes | np.ndarray,
    arenas: ArenaSizes,
    arena_offsets: Mapping[int, int],
    *,
    accelerator: str = "ethos-u55-128",
    id_word: int = DEFAULT_ID_WORD,
    scratch_offset: int = 0,
    description: str = "cascader Optimised",
    order: Sequence[tuple[str, int]] | None = None,
    removed: Collection[int] = (),
    initialisers: Mapping[int, NpuInitialiser] | None = None,
) -> Model:
    """Replace each NPU subgraph of `model` by one `ethos-u` operator (see the module docstring).

    Parameters
    ----------
    model
        The CPU model (not modified). Only its main subgraph is rewritten, and the CALL_ONCE
        initialisers given in `initialisers`.
    subgraphs
        The NPU subgraphs, with their command streams; their operators must not overlap.
    flash
        The read-only bytes every command stream addresses as region 0.
    arenas
        Scratch, scratch_fast and persistent sizes (`ArenaSizes.from_layout` gives them).
    arena_offsets
        Byte offset in TFLM's non-persistent arena per tensor index of `model`: every IFM and
        OFM needs one inside the scratch arena; CPU tensors may have one (else TFLM plans them);
        offsets of tensors that disappear inside an NPU subgraph are ignored.
    accelerator, id_word
        Fill the driver payload's config action.
    scratch_offset
        Where the scratch tensor sits in the arena (Vela: 0).
    description
        The model's description string (Vela writes "Vela Optimised").
    order
        The execution order, as ``("cpu", operator index)`` and ``("npu", index into
        subgraphs)``; by default each NPU subgraph goes where its first operator was, or just
        after the last producer of its IFMs.
    removed
        Operators left out of the output, in no NPU subgraph (nor in `order`): their results are
        read by no operator the output keeps and are no model output (a dead branch).
    initialisers
        Subgraph index -> the `ethos-u` operator that replaces that CALL_ONCE initialiser.

    Returns
    -------
    Model
        A new model; constants only the NPU used are gone (they are in `flash`).

    Raises
    ------
    InvalidArgumentError
        Overlapping or unknown operators, an NPU subgraph that cannot be placed in the operator
        order, a size out of range, an IFM/OFM without an offset or outside the scratch arena,
        or a command stream addressing a region the operator does not pass or beyond its size.
    """
    sg = model.main
    flash = np.ascontiguousarray(flash, dtype=np.uint8).tobytes() if isinstance(flash, np.ndarray) else bytes(flash)
    _check_sizes(arenas, len(flash), scratch_offset)
    removed = frozenset(removed)
    npus = [_boundary(model, s, accelerator, id_word, removed) for s in subgraphs]
    _check_disjoint(npus)
    for npu in npus:
        _check_offsets(sg, npu, arena_offsets, scratch_offset, arenas.scratch)
    if order is None:
        items = [item for item in _operator_order(sg, npus) if not isinstance(item, int) or item not in removed]
    else:
        owned = {i for npu in npus for i in npu.ops}
        items = [npus[k] if kind == "npu" else k for kind, k in order]
        cpu = [k for kind, k in order if kind != "npu"]
        if (sorted(cpu) != sorted(set(range(len(sg.operators))) - owned - removed)
                or len(items) != len(cpu) + len(npus)):
            raise InvalidArgumentError("order must name every CPU operator and every NPU subgraph exactly once")
    items = _check_order(sg, items)

    out = Model(description=description, version=model.version, metadata_buffer=())
    tensors: list[Tensor] = []
    index: dict[int, int] = {}  # input tensor -> output tensor
    buffer_of: dict[int, int] = {}  # input buffer -> output buffer (constants keep sharing)

    def take(t: int) -> int:
        if t < 0:
            return t
        if t not in index:
            index[t] = len(tensors)
            tensors.append(_copy_tensor(model, sg.tensors[t], out, buffer_of))
        return index[t]

    def new_tensor(name: str, size: int, data: bytes | None = None, variable: bool = False) -> int:
        buffer = out.add_buffer(data) if data else 0
        view = np.frombuffer(out.buffers[buffer], np.uint8) if data else None
        tensors.append(Tensor(name, (size,), "uint8", buffer=buffer, data=view, is_variable=variable))
        return len(tensors) - 1

    shared: dict[str, int] = {}
    operators: list[Operator] = []
    offsets: dict[int, int] = {}
    for item in items:
        if isinstance(item, int):
            op = sg.operators[item]
            inputs = tuple(take(t) for t in op.inputs)
            outputs = tuple(take(t) for t in op.outputs)
            operators.append(replace(op, inputs=inputs, outputs=outputs,
                                     intermediates=tuple(take(t) for t in op.intermediates)))
            continue
        npu = item
        cmd = new_tensor(COMMAND_STREAM_NAME, len(npu.payload), npu.payload)
        if not shared:
            shared[FLASH_NAME] = new_tensor(FLASH_NAME, len(flash), flash)
            shared[SCRATCH_NAME] = new_tensor(SCRATCH_NAME, arenas.scratch)
            offsets[shared[SCRATCH_NAME]] = scratch_offset
            shared[SCRATCH_FAST_NAME] = shared[SCRATCH_NAME]
            if arenas.scratch_fast:
                # A memory of its own: the driver points region 2 at it, whatever the arena plan says.
                shared[SCRATCH_FAST_NAME] = new_tensor(SCRATCH_FAST_NAME, arenas.scratch_fast)
                offsets[shared[SCRATCH_FAST_NAME]] = scratch_offset
            if arenas.persistent:
                shared[PERSISTENT_NAME] = new_tensor(PERSISTENT_NAME, arenas.persistent, variable=True)
        persistent = (shared[PERSISTENT_NAME],) if PERSISTENT_NAME in shared else ()
        inputs = (cmd, shared[FLASH_NAME], shared[SCRATCH_NAME], shared[SCRATCH_FAST_NAME], *persistent,
                  *(take(t) for t in npu.ifms))
        outputs = tuple(take(t) for t in npu.ofms)
        _check_regions(npu, [tensors[t] for t in (*inputs[1:], *outputs)], len(persistent) > 0)
        operators.append(Operator("CUSTOM", inputs, outputs, custom_code=ETHOSU_CUSTOM_CODE,
                                  custom_options=ETHOSU_CUSTOM_OPTIONS, version=1))
    for t in (*sg.inputs, *sg.outputs):  # model I/O no operator touches still exists
        take(t)
    for t, off in arena_offsets.items():
        if t in index:
            offsets[index[t]] = int(off)
        elif not 0 <= t < len(sg.tensors):
            raise InvalidArgumentError(f"arena_offsets names tensor {t}; the main subgraph has {len(sg.tensors)}")

    main = SubGraph(tensors, operators, tuple(index[t] for t in sg.inputs), tuple(index[t] for t in sg.outputs),
                    sg.name)
    others = []
    for k, g in enumerate(model.subgraphs[1:], start=1):
        init = (initialisers or {}).get(k)
        if init is None:
            others.append(replace(g, tensors=[_copy_tensor(model, t, out, buffer_of) for t in g.tensors]))
            continue
        first = len(main.tensors) + sum(len(o.tensors) for o in others)  # TFLM numbers every subgraph's tensors
        sub, sub_offsets = _initialiser(model, g, init, accelerator, id_word, out, buffer_of)
        offsets.update((first + t, off) for t, off in sub_offsets.items())
        others.append(sub)
    out.subgraphs = [main, *others]
    out.signature_defs = [_remap_signature(s, index) for s in model.signature_defs]
    for name, buffer in model.metadata.items():
        if name != "OfflineMemoryAllocation":
            out.add_metadata(name, model.buffers[buffer])
    _add_offline_plan(out, offsets)
    return out


def _initialiser(model: Model, g: SubGraph, init: NpuInitialiser, accelerator: str, id_word: int, out: Model,
                 buffer_of: dict[int, int]) -> tuple[SubGraph, dict[int, int]]:
    """Initialiser subgraph `g` as one `ethos-u` operator (and the operators it keeps): the
    subgraph and its tensors' arena offsets."""
    payload = driver_payload(np.asarray(init.command_stream), accelerator, id_word)
    end = max((off + t.nbytes for t, off in init.variables), default=0)
    tensors = [Tensor(COMMAND_STREAM_NAME, (len(payload),), "uint8", buffer=out.add_buffer(payload),
                      data=np.frombuffer(payload, np.uint8)),
               Tensor(FLASH_NAME, (len(init.flash),), "uint8", buffer=out.add_buffer(init.flash) if init.flash else 0,
                      data=np.frombuffer(init.flash, np.uint8) if init.flash else None),
               Tensor(SCRATCH_NAME, (end,), "uint8")]
    offsets = {2: 0}
    outputs = []
    for t, off in init.variables:
        offsets[len(tensors)] = off
        outputs.append(len(tensors))
        tensors.append(replace(t, buffer=0, data=None))
    operators = [Operator("CUSTOM", (0, 1, 2, 2), tuple(outputs), custom_code=ETHOSU_CUSTOM_CODE,
                          custom_options=ETHOSU_CUSTOM_OPTIONS, version=1)]
    index: dict[int, int] = {}
    for i in init.kept:
        op = g.operators[i]
        for t in (*op.inputs, *op.outputs):
            if t >= 0 and t not in index:
                index[t] = len(tensors)
                tensors.append(_copy_tensor(model, g.tensors[t], out, buffer_of))
        operators.append(replace(op, inputs=tuple(index.get(t, t) for t in op.inputs),
                                 outputs=tuple(index.get(t, t) for t in op.outputs)))
    return SubGraph(tensors, operators, (), (), g.name), offsets


def _copy_tensor(model: Model, t: Tensor, out: Model, buffer_of: dict[int, int]) -> Tensor:
    """`t` with its constant buffer appended to `out` (once per input buffer); others use buffer 0."""
    data = model.buffers[t.buffer] if 0 <= t.buffer < len(model.buffers) else b""
    if not data:
        return replace(t, buffer=0, data=None)
    if t.buffer not in buffer_of:
        buffer_of[t.buffer] = out.add_buffer(data)
    b = buffer_of[t.buffer]
    view = None if t.data is None else np.frombuffer(out.buffers[b], dtype=t.data.dtype).reshape(t.data.shape)
    return replace(t, buffer=b, data=view)


def _add_offline_plan(model: Model, offsets: dict[int, int]) -> None:
    from ..memory import offline_memory_allocation  # memory imports the core; keep tflite light

    total = sum(len(g.tensors) for g in model.subgraphs)  # TFLM counts the tensors of every subgraph
    # Word 1 is the subgraph index in TFLM's documentation; TFLM ignores it and Vela writes the
    # number of subgraphs there. We write what Vela writes, so the two compare equal.
    model.add_metadata("OfflineMemoryAllocation", offline_memory_allocation(total, offsets, len(model.subgraphs)))


def _remap_signature(s: SignatureDef, index: dict[int, int]) -> SignatureDef:
    if s.subgraph_index != 0:
        return s
    missing = [n for n, t in (*s.inputs.items(), *s.outputs.items()) if t not in index]
    if missing:
        raise InvalidArgumentError(f"signature {s.key!r}: tensors {missing} are inside an NPU subgraph")
    return replace(s, inputs={n: index[t] for n, t in s.inputs.items()},
                   outputs={n: index[t] for n, t in s.outputs.items()})


def _check_sizes(arenas: ArenaSizes, flash_size: int, scratch_offset: int) -> None:
    for name, value in (("scratch", arenas.scratch), ("scratch_fast", arenas.scratch_fast),
                        ("persistent", arenas.persistent), ("scratch_offset", scratch_offset)):
        if not isinstance(value, (int, np.integer)) or not 0 <= value <= _INT32_MAX:
            raise InvalidArgumentError(f"{name} must be an integer in 0..{_INT32_MAX} (a TFLite int32 dimension), "
                                       f"got {value!r}")
    if arenas.scratch == 0:
        raise InvalidArgumentError("the scratch arena size is 0; it holds the IFMs and OFMs, so it needs at least "
                                   "their bytes")
    if scratch_offset + arenas.scratch > _INT32_MAX:
        raise InvalidArgumentError(f"the scratch arena ends at {scratch_offset + arenas.scratch:,}, beyond the "
                                   "int32 offsets of OfflineMemoryAllocation")
    if flash_size > _INT32_MAX:
        raise InvalidArgumentError(f"the flash is {flash_size:,} bytes, over the {_INT32_MAX:,} a tensor can hold")


def _boundary(model: Model, s: NpuSubgraph, accelerator: str, id_word: int, removed: frozenset[int]) -> _Npu:
    sg = model.main
    ops = tuple(int(i) for i in s.operators)
    if not ops:
        raise InvalidArgumentError("an NPU subgraph needs at least one operator")
    bad = [i for i in ops if not 0 <= i < len(sg.operators)]
    if bad:
        raise InvalidArgumentError(f"operators {bad} do not exist; the main subgraph has {len(sg.operators)}")
    if len(set(ops)) != len(ops):
        raise InvalidArgumentError(f"an NPU subgraph lists an operator twice: {list(ops)}")
    words = np.asarray(s.command_stream)
    if words.ndim != 1 or words.dtype.kind not in "iu" or words.size == 0:
        raise InvalidArgumentError("command_stream must be a non-empty 1-D array of uint32 command words")
    if words.min() < 0 or words.max() > 0xFFFFFFFF:
        raise InvalidArgumentError("command_stream words must fit 32 bits unsigned")
    payload = driver_payload(words, accelerator, id_word)
    inside = set(ops)
    produced: dict[int, None] = {}
    consumed: dict[int, None] = {}
    for i in sorted(inside):
        op = sg.operators[i]
        consumed.update((t, None) for t in op.inputs if t >= 0)
        produced.update((t, None) for t in op.outputs)
    used_outside = {t for i, op in enumerate(sg.operators) if i not in inside and i not in removed for t in op.inputs}
    # A variable tensor (an LSTM's state) is no IFM: the command stream keeps that state in the
    # persistent arena, and the tensor drops out of the model with its operator.
    ifms = tuple(t for t in consumed if t not in produced and not _is_constant(model, sg.tensors[t])
                 and not sg.tensors[t].is_variable)
    ofms = tuple(t for t in produced if t in used_outside or t in sg.outputs)
    for given, found, what in ((s.ifms, ifms, "IFMs"), (s.ofms, ofms, "OFMs")):
        # A command stream that keeps the state in the scratch arena (Vela's) names the
        # variable tensors among its IFMs and OFMs, once per step that reads or writes them.
        named = None if given is None else sorted({t for t in given if not sg.tensors[t].is_variable})
        if named is not None and named != sorted(found):
            raise InvalidArgumentError(f"the NPU subgraph's {what} are tensors {sorted(found)}, not {named}")
    return _Npu(frozenset(inside), tuple(s.ifms) if s.ifms is not None else ifms,
                tuple(s.ofms) if s.ofms is not None else ofms, payload)


def driver_payload(words: np.ndarray, accelerator: str, id_word: int = DEFAULT_ID_WORD) -> bytes:
    """The driver payload (COP1 header, command stream) of an `ethos-u` operator's commands."""
    return _core.encode_driver_payload(np.asarray(words).astype(np.uint32), accelerator, int(id_word))


def _is_constant(model: Model, t: Tensor) -> bool:
    return 0 <= t.buffer < len(model.buffers) and bool(model.buffers[t.buffer])


def _check_disjoint(npus: list[_Npu]) -> None:
    seen: set[int] = set()
    for npu in npus:
        if seen & npu.ops:
            raise InvalidArgumentError(f"operators {sorted(seen & npu.ops)} are in two NPU subgraphs")
        seen |= npu.ops


def _check_offsets(sg: SubGraph, npu: _Npu, offsets: Mapping[int, int], start: int, size: int) -> None:
    """Every IFM/OFM lies inside the scratch arena, where the command stream addresses it."""
    for t in (*npu.ifms, *npu.ofms):
        tensor = sg.tensors[t]
        if t not in offsets:
            raise InvalidArgumentError(f"IFM/OFM {tensor.name!r} (tensor {t}) has no arena offset; the command "
                                       "stream addresses it inside the scratch arena, so it needs one")
        off = int(offsets[t])
        if off < start or off + tensor.nbytes > start + size:
            raise InvalidArgumentError(
                f"IFM/OFM {tensor.name!r} at arena offset {off:,} ({tensor.nbytes:,} B) is outside the scratch arena "
                f"[{start:,}, {start + size:,}); raise the scratch size or move the tensor")


def _operator_order(sg: SubGraph, npus: list[_Npu]) -> list[Any]:
    """CPU operators (their indices) and NPU subgraphs in an order TFLM can run.

    An NPU operator goes where its first operator was, or later, just after the last producer
    of its IFMs (a CPU operator, or another NPU operator's position). O(operators + tensors).
    """
    producer = {t: i for i, op in enumerate(sg.operators) for t in op.outputs}
    owner = {i: npu for npu in npus for i in npu.ops}
    depth: dict[int, int] = {}

    def place(npu: _Npu, visiting: frozenset[int] = frozenset()) -> None:
        if id(npu) in depth:
            return
        if id(npu) in visiting:
            raise InvalidArgumentError("two NPU subgraphs feed each other; merge them or split them differently")
        npu.position, d = min(npu.ops), 0
        for t in npu.ifms:
            if t not in producer:
                continue
            other = owner.get(producer[t])
            if other is None:
                npu.position = max(npu.position, producer[t])
            else:
                place(other, visiting | {id(npu)})
                npu.position, d = max(npu.position, other.position), max(d, depth[id(other)] + 1)
        depth[id(npu)] = d

    for npu in npus:
        place(npu)
    keyed: list[tuple[tuple[int, int, int], Any]] = [((i, 0, 0), i) for i in range(len(sg.operators)) if i not in owner]
    keyed += [((n.position, 1, depth[id(n)]), n) for n in npus]
    return [item for _, item in sorted(keyed, key=lambda k: k[0])]


def _check_order(sg: SubGraph, order: list[Any]) -> list[Any]:
    """Every tensor is produced before it is read."""
    producer = {t: i for i, op in enumerate(sg.operators) for t in op.outputs}
    ready = set(sg.inputs)
    for item in order:
        reads = item.ifms if isinstance(item, _Npu) else sg.operators[item].inputs
        writes = item.ofms if isinstance(item, _Npu) else sg.operators[item].outputs
        late = [sg.tensors[t].name for t in reads if t >= 0 and t in producer and t not in ready]
        if late:
            what = "an NPU subgraph" if isinstance(item, _Npu) else f"operator {item}"
            raise InvalidArgumentError(f"{what} reads {late} before it is computed: the NPU subgraph is not convex "
                                       "(a path leaves it and comes back); split it")
        ready.update(writes)
    return order


def _check_regions(npu: _Npu, region_tensors: list[Tensor], has_persistent: bool) -> None:
    """Every region the command stream addresses is a base pointer the operator passes, and every
    access (weights, scales, DMA ranges, OFMs, IFM bases) stays inside that region's tensor."""
    passed = region_tensors[:MAX_REGIONS]
    for region, extent in enumerate(_core.region_extents(npu.payload)):
        if extent is None:
            continue
        end, i, what = extent
        if region >= len(passed):
            names = ", ".join(f"{r} {t.name}" for r, t in enumerate(passed))
            hint = "" if has_persistent or region != REGION_PERSISTENT else "; give a persistent arena size"
            raise InvalidArgumentError(f"command stream operation {i} ({what}) addresses region {region}, but the "
                                       f"ethos-u operator passes only regions {names}{hint}")
        if end > passed[region].nbytes:
            raise InvalidArgumentError(
                f"command stream operation {i} ({what}) reaches byte {end:,} of region {region} "
                f"({passed[region].name}, {passed[region].nbytes:,} B); the arena is too small")
