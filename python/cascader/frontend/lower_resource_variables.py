"""Resource variables on the Ethos-U85: VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE (Vela 5.2's way).

A converted stateful model keeps a variable between inferences: VAR_HANDLE names it
(container, shared_name), READ_VARIABLE copies it out, ASSIGN_VARIABLE copies a value in, and a
CALL_ONCE initialiser subgraph assigns its start. Vela 5.2 compiles them for the U85 so: the
handles disappear, the variable is a buffer at one fixed offset of TFLM's tensor arena (the
same offset in every subgraph: TFLM neither clears nor moves the arena between invocations),
READ and ASSIGN are NPU copies from and into it, and the initialiser becomes an `ethos-u`
operator that copies the start from flash into that buffer (CALL_ONCE stays on the CPU).

Here the variable is a *resident* buffer of the segment (`LoweringContext.resident`): in the
scratch arena, live from the first step of the inference to the last, dense (never bricked),
never another buffer's in-place home, so that its offset holds its value across inferences.
Its id is the handle tensor of the variable's first VAR_HANDLE in the subgraph, the same in
every segment. A variable's operators all sit in one NPU segment, with their VAR_HANDLE, or
all stay with TFLM.

- VAR_HANDLE makes no operation; the variable's buffer is registered once.
- READ_VARIABLE is an alias of the variable's buffer where every reader is a same-shaped
  elementwise operation before any ASSIGN of it (each output element reads the variable's
  element at its own position, so stripes read each element before a later copy overwrites
  it); otherwise one copy out (Vela always copies, chained into its reader).
- ASSIGN_VARIABLE copies nothing where one operation produces the one value assigned, after
  every read of the variable or as its own same-position elementwise read of it: that
  operation writes the value straight into the variable (`_assign_in_place`; the zoo model's
  ADD). The value, a model output there, is then read at the variable's offset: an
  application that wrote into its output tensor between inferences would change the state
  (Vela's copy keeps the two apart). Otherwise one raw copy of the value's bytes into the
  buffer (the 1x1 copy takes 8-bit maps on every target, so wider types go as their bytes).

`variable_verdicts` keeps a variable on the CPU where the arena cannot hold it as TFLM's
resource variables would: no CALL_ONCE initialiser of a constant (TFLM fills the variable with
its zero point until the first assignment; the arena holds whatever it held), or an
initialiser that computes.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import UnsupportedError
from ..tflite.model import Model, Operator, SubGraph, Tensor
from .lower_movement import raw_copy
from .lowered import ELEMENT_SIZE, FeatureMapView, dense_strides
from .lowering_context import LoweringContext
from .operation_builder import pool_copy
from .operator_view import BINARY_ELEMENTWISE_OPS, OperatorView

# Operators whose output element depends only on the operands' elements at its own position
# (an operand of the output's shape), so that they may write over what they read.
IN_PLACE_WRITERS = BINARY_ELEMENTWISE_OPS
RESOURCE_VARIABLE_OPS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"})
# Vela 5.2's U85 variable data types (tflite_supported_operators_u85: its supported types).
VARIABLE_DTYPES = ("uint8", "int8", "int16", "int32", "int64", "bool")


def variable_key(op: Operator) -> str:
    """The variable a VAR_HANDLE names: TFLM's identity, container and shared name."""
    return f"{op.options.get('container') or ''}/{op.options.get('shared_name') or ''}"


def _handles(graph: SubGraph) -> dict[int, str]:
    """Handle tensor -> variable key, for the VAR_HANDLEs of `graph`."""
    return {op.outputs[0]: variable_key(op) for op in graph.operators if op.opcode == "VAR_HANDLE" and op.outputs}


def constant_initialisers(model: Model) -> dict[str, tuple[int, Tensor]]:
    """Variable key -> (subgraph, start value) for the variables a CALL_ONCE initialiser of the
    main subgraph assigns a constant, where the initialiser does nothing else (the converter's:
    VAR_HANDLE and ASSIGN_VARIABLE of constants) and assigns each variable once."""
    found: dict[str, tuple[int, Tensor]] = {}
    twice: set[str] = set()
    for op in model.main.operators:
        index = op.options.get("init_subgraph_index") if op.opcode == "CALL_ONCE" else None
        if not isinstance(index, int) or not 0 < index < len(model.subgraphs):
            continue
        graph = model.subgraphs[index]
        handles = _handles(graph)
        assigns = [o for o in graph.operators if o.opcode == "ASSIGN_VARIABLE"]
        if any(o.opcode not in ("VAR_HANDLE", "ASSIGN_VARIABLE") for o in graph.operators) or any(
                len(o.inputs) != 2 or o.inputs[0] not in handles or graph.tensors[o.inputs[1]].data is None
                for o in assigns):
            continue
        for o in assigns:
            key = handles[o.inputs[0]]
            if key in found:
                twice.add(key)
            found[key] = (index, graph.tensors[o.inputs[1]])
    return {k: v for k, v in found.items() if k not in twice}


def _data(graph: SubGraph, op: Operator) -> Tensor | None:
    """The variable data a READ_VARIABLE gives or an ASSIGN_VARIABLE takes."""
    if op.opcode == "READ_VARIABLE":
        return graph.tensors[op.outputs[0]] if op.outputs and op.outputs[0] >= 0 else None
    return graph.tensors[op.inputs[1]] if len(op.inputs) > 1 and op.inputs[1] >= 0 else None


def variable_check(v: OperatorView) -> str | None:
    """Vela's constraints on the operator alone (None: it meets them): a resource handle, and
    variable data of a type Vela's U85 takes, with a static shape."""
    op = v.op
    if v.opcode == "VAR_HANDLE":
        ok = not op.inputs and len(op.outputs) == 1 and op.outputs[0] >= 0
        return None if ok and v.graph.tensors[op.outputs[0]].dtype == "resource" else "VAR_HANDLE gives one handle"
    want_inputs, want_outputs = (1, 1) if v.opcode == "READ_VARIABLE" else (2, 0)
    if len(op.inputs) != want_inputs or len(op.outputs) != want_outputs or min(op.inputs) < 0:
        return f"{v.opcode} takes {want_inputs} inputs and gives {want_outputs} outputs"
    if v.graph.tensors[op.inputs[0]].dtype != "resource":
        return "variable handle tensors must be resource"
    data = _data(v.graph, op)
    if data is None or data.dtype not in VARIABLE_DTYPES:
        return (f"variable data must be one of {', '.join(VARIABLE_DTYPES)}"
                + ("" if data is None else f", not {data.dtype}"))
    if any(d < 1 for d in data.shape):
        return f"variable data {data.name!r} has no static shape"
    return None


def variable_verdicts(model: Model, verdicts: list, verdict_type) -> list:
    """`verdicts` (one per main-subgraph operator) with the NPU resource-variable operators of
    each variable the arena cannot hold sent to the CPU (see the module docstring): no constant
    CALL_ONCE initialiser, an initialiser of another size or type, or a handle some operator
    other than READ/ASSIGN_VARIABLE reads."""
    graph = model.main
    starts = constant_initialisers(model)
    handles = _handles(graph)
    bad: dict[str, str] = {}
    for op in graph.operators:
        used = [t for t in op.inputs if t in handles]
        if used and op.opcode not in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
            bad[handles[used[0]]] = f"its handle is read by {op.opcode}"
        if op.opcode in ("READ_VARIABLE", "ASSIGN_VARIABLE") and op.inputs and op.inputs[0] in handles:
            key, data = handles[op.inputs[0]], _data(graph, op)
            start = starts.get(key)
            if start is None:
                bad.setdefault(key, "no CALL_ONCE initialiser assigns it a constant (TFLM fills it with its zero "
                                    "point, which an arena buffer does not hold)")
            elif data is not None and (data.dtype != start[1].dtype or data.nbytes != start[1].nbytes):
                bad.setdefault(key, f"its start is {start[1].dtype}{list(start[1].shape)}, its data "
                                    f"{data.dtype}{list(data.shape)}")
    out = list(verdicts)
    for i, op in enumerate(graph.operators):
        if op.opcode not in RESOURCE_VARIABLE_OPS or not out[i].npu:
            continue
        t = op.outputs[0] if op.opcode == "VAR_HANDLE" else op.inputs[0]
        key = handles.get(t)
        reason = "its handle comes from no VAR_HANDLE of the subgraph" if key is None else bad.get(key)
        if reason is not None:
            out[i] = verdict_type(False, "resource_variable", f"the variable stays with TFLM: {reason}")
    return out


# --- lowering ----------------------------------------------------------------------------


def _variable(ctx: LoweringContext, handle: int, index: int) -> FeatureMapView:
    """The variable's resident buffer, registered on first use (id: the handle tensor of its
    first VAR_HANDLE in the subgraph, so that every segment names it alike)."""
    graph = ctx.graph
    handles = _handles(graph)
    key = handles.get(handle)
    if key is None:
        raise UnsupportedError(f"operator {index}: its resource handle comes from no VAR_HANDLE")
    if not any(handle in graph.operators[i].outputs for i in ctx.members):
        raise UnsupportedError(f"operator {index}: its VAR_HANDLE is outside the NPU segment")
    first = next(t for t, k in handles.items() if k == key)  # `_handles` keeps the operator order
    data = [_data(graph, op) for op in graph.operators
            if op.opcode in ("READ_VARIABLE", "ASSIGN_VARIABLE") and op.inputs and handles.get(op.inputs[0]) == key]
    data = [d for d in data if d is not None]
    if not data or any(d.dtype != data[0].dtype or d.nbytes != data[0].nbytes for d in data):
        raise UnsupportedError(f"operator {index}: the variable {key!r} is read and assigned as different types")
    return ctx.resident(first, key, data[0])


def lower_var_handle(ctx: LoweringContext, v: OperatorView) -> None:
    handle = v.op.outputs[0]
    readers = ctx.consumers.get(handle, [])
    if any(r not in ctx.members for r in readers):
        raise UnsupportedError(f"operator {v.index} (VAR_HANDLE): its handle is read outside the NPU segment")
    view = _variable(ctx, handle, v.index)
    if view.buffer != handle:
        ctx.root[handle] = view.buffer  # a second handle of the same variable
    _assign_in_place(ctx, view.buffer, v.index)


def _assign_in_place(ctx: LoweringContext, buffer: int, index: int) -> None:
    """Let the operation producing the one value assigned to the variable write it straight
    into the variable's buffer, where every read of the variable comes before it or is its own
    elementwise read at the same position (the NPU reads an element before it writes it there):
    the ASSIGN then copies nothing (the state's ADD of the zoo model writes the sum in place, and
    the model output is read from the variable's offset, where nothing writes after it)."""
    graph = ctx.graph
    handles = _handles(graph)
    key = handles[graph.operators[index].outputs[0]]
    mine = [i for i in ctx.operators if graph.operators[i].opcode in ("READ_VARIABLE", "ASSIGN_VARIABLE")
            and handles.get(graph.operators[i].inputs[0]) == key]
    every = [i for i, op in enumerate(graph.operators) if op.opcode in ("READ_VARIABLE", "ASSIGN_VARIABLE")
             and op.inputs and handles.get(op.inputs[0]) == key]
    assigns = [i for i in mine if graph.operators[i].opcode == "ASSIGN_VARIABLE"]
    if len(assigns) != 1 or sorted(mine) != every:
        return
    value = graph.operators[assigns[0]].inputs[1]
    position = {i: k for k, i in enumerate(ctx.operators)}
    producer = next((i for i in ctx.operators if value in graph.operators[i].outputs), None)
    if (producer is None or position[producer] > position[assigns[0]] or len(graph.operators[producer].outputs) != 1
            or graph.operators[producer].opcode not in IN_PLACE_WRITERS or value in graph.inputs
            or value in ctx.root or value in ctx.slices or value in ctx.subviews):
        return
    shape = tuple(graph.tensors[value].shape)
    for r in mine:
        if graph.operators[r].opcode != "READ_VARIABLE":
            continue
        if position[r] > position[producer]:  # it would copy out the new value
            return
        for reader in ctx.consumers.get(graph.operators[r].outputs[0], []):
            if position.get(reader, len(ctx.operators)) > position[producer]:
                return
            if reader == producer and tuple(graph.tensors[graph.operators[r].outputs[0]].shape) != shape:
                return
    ctx.root[value] = buffer


def _byte_view(view: FeatureMapView, what: str, index: int, dtype: str = "int8") -> FeatureMapView:
    """`view` as the map of its bytes in elements of `dtype` (the 1x1 copy moves 8-bit elements
    on every target)."""
    h, w, c = view.shape
    e = view.element_size
    if view.strides != dense_strides(view.shape, e):
        raise UnsupportedError(f"operator {index}: {what} is not one dense map")
    shape = (h, w, c * e // ELEMENT_SIZE[dtype])
    return replace(view, shape=shape, dtype=dtype, zero_point=0, scale=1.0,
                   strides=dense_strides(shape, ELEMENT_SIZE[dtype]))


def _copy(ctx: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
          what: tuple[str, str]) -> None:
    """dst = src, their bytes: int64 data as int32 words (`raw_copy`'s ADD of 0: the U85 moves
    a 32-bit element a cycle where it moves an 8-bit one, so a quarter of the elements), other
    types as bytes (one pooling)."""
    if src.element_size == 8:
        raw_copy(ctx, index, f"{index}:{name}", _byte_view(src, what[0], index, "int32"),
                 _byte_view(dst, what[1], index, "int32"))
        return
    pool_copy(ctx, index, name, _byte_view(src, what[0], index), _byte_view(dst, what[1], index), requantize=False)


def _assigns(ctx: LoweringContext, buffer: int) -> list[int]:
    """Positions in the segment of the ASSIGN_VARIABLEs writing the variable `buffer`."""
    return [k for k, i in enumerate(ctx.operators) if ctx.graph.operators[i].opcode == "ASSIGN_VARIABLE"
            and ctx.buffer(ctx.graph.operators[i].inputs[0]) == buffer]


def lower_read_variable(ctx: LoweringContext, v: OperatorView) -> None:
    handle, out = v.op.inputs[0], v.op.outputs[0]
    variable = _variable(ctx, handle, v.index)
    if ctx.buffer(handle) != variable.buffer:
        raise UnsupportedError(f"operator {v.index} (READ_VARIABLE): its VAR_HANDLE is outside the NPU segment")
    readers = ctx.consumers.get(out, [])
    position = {i: k for k, i in enumerate(ctx.operators)}
    first_assign = min(_assigns(ctx, variable.buffer), default=len(ctx.operators))
    shape = tuple(ctx.graph.tensors[out].shape)
    in_place = (out not in ctx.graph.outputs and readers
                and all(r in position and position[r] < first_assign
                        and ctx.graph.operators[r].opcode in BINARY_ELEMENTWISE_OPS
                        and tuple(ctx.graph.tensors[ctx.graph.operators[r].outputs[0]].shape) == shape
                        for r in readers))
    if in_place:
        ctx.root[out] = variable.buffer
        return
    _copy(ctx, v.index, "read", variable, ctx.view(out), ("the variable", "its output"))


def lower_assign_variable(ctx: LoweringContext, v: OperatorView) -> None:
    handle, value = v.op.inputs
    variable = _variable(ctx, handle, v.index)
    if ctx.buffer(handle) != variable.buffer:
        raise UnsupportedError(f"operator {v.index} (ASSIGN_VARIABLE): its VAR_HANDLE is outside the NPU segment")
    if ctx.graph.tensors[value].is_constant:
        raise UnsupportedError(f"operator {v.index} (ASSIGN_VARIABLE) assigns a constant")
    if ctx.buffer(value) == variable.buffer:
        return  # the value read from the variable, unchanged: nothing to copy
    _copy(ctx, v.index, "assign", ctx.view(value), variable, ("the value", "the variable"))
