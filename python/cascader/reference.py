"""TFLite's *reference* kernels: the baseline every bit-exactness check compares against.

LiteRT (`ai-edge-litert`, a test extra) is run with `OpResolverType.BUILTIN_REF`. The default
resolver uses XNNPACK and optimised kernels, which may round differently from the reference
kernels that TFLM and the Ethos-U semantics follow. LiteRT registers no reference kernel for the
operators in `BUILTIN_ONLY_OPERATORS`; those run on the builtin kernels (XNNPACK off).

Where LiteRT's reference kernel departs from TFLM's (`MICRO_OPERATORS`), the operator runs on
TFLM itself (`tflite-micro`, a test extra), the runtime an Ethos-U binary's CPU operators run
on: its kernels are the reference ones there, and the NPU lowering follows them. A model that
mixes such operators with others runs in runs of one engine each (`engine_runs`), so every
operator meets its own kernels: a 16x8 network holding a FULLY_CONNECTED and an int16 EXP
(TFLM's EXP is float only), judged on LiteRT whole before, took LiteRT's FULLY_CONNECTED
rounding (random_network int16 seeds 84, 90, 216, 233, 257 of 0-299), and one holding a
FULLY_CONNECTED and an int16 MUL, judged on TFLM whole, took TFLM's MUL rounding (seed 944).
A model with state or more subgraphs still runs whole on one engine: TFLM where it holds a
`MICRO_OPERATORS` operator and TFLM can prepare it, else LiteRT.
"""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
import threading
from dataclasses import replace
from typing import Mapping, Sequence, Union

import numpy as np

from .errors import CascaderError, ReferenceCrashed
from .tflite import Model, load_model, save_model
from .tflite.model import SubGraph

ModelLike = Union[Model, bytes, str, os.PathLike]

# Operators whose builtin kernel is TFLite's only one (the reference resolver refuses them).
# ELU's fills its int8 table in Prepare and looks codes up in Eval, as a reference kernel would.
BUILTIN_ONLY_OPERATORS = frozenset({"ELU"})

# Operators (and the activation types) whose LiteRT 2.3 reference kernel departs from TFLM's:
# a model holding one is judged on TFLM.
MICRO_OPERATORS: Mapping[str, frozenset[str]] = {
    # LiteRT's integer LSTM computes its gates with gemmlowp's fixed-point logistic and tanh,
    # TFLM's with the LUT-based int16 functions the NPU's SIGMOID and TANH follow; LiteRT
    # refuses the 16x8 LSTM outright.
    "UNIDIRECTIONAL_SEQUENCE_LSTM": frozenset({"int8", "int16"}),
    # LiteRT runs every quantized SUM through its uint8 code: int8 and int16 bytes read as
    # uint8, results clamped to 0..255 (TFLM sums them as signed values).
    "SUM": frozenset({"int8", "int16"}),
    # LiteRT's 16x8 FULLY_CONNECTED rescales its int64 accumulator with the whole 32-bit
    # multiplier; TFLM's (and Vela's binaries) with the reduced 16-bit one, formed from the
    # double-precision scale product: 701 of 10,309 outputs of 200 random layers disagree.
    "FULLY_CONNECTED": frozenset({"int16"}),
    # LiteRT has no int8 DIV kernel (it stops in div.cc); TFLM has one.
    "DIV": frozenset({"int8"}),
}


def _model_bytes(model: ModelLike) -> bytes:
    if isinstance(model, Model):
        return save_model(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    with open(model, "rb") as f:
        return f.read()


def _litert_compatible(data: bytes) -> bytes:
    """Mend the one legacy quirk current LiteRT refuses, without changing any computed value.

    TOCO-era converters (e.g. TFLM's person_detect) quantize 1-D biases per channel along
    axis 3. TFLM and the kernels ignore the axis of a bias, but LiteRT 2.x rejects the file;
    for a 1-D tensor the only meaningful axis is 0, so that is what we write.
    """
    model = load_model(data)
    mended = False
    for graph in model.subgraphs:
        for t in graph.tensors:
            q = t.quantization
            if q is not None and q.scale.size > 1 and len(t.shape) == 1 and q.quantized_dimension != 0:
                q.quantized_dimension = 0
                mended = True
    return save_model(model) if mended else data


class _Died(Exception):
    """The child process ended in the middle of a call."""


class _Worker:
    """One child process running LiteRT (`cascader._reference_worker`), started on first use
    and again after a crash. A plain subprocess, so a caller's script needs no main guard."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "cascader._reference_worker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE)

    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, *message):
        try:
            pickle.dump(message, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.process.stdin.flush()
            status, reply = pickle.load(self.process.stdout)
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError, pickle.UnpicklingError):
            self.process.wait(timeout=10)
            raise _Died from None
        if status == "error":
            raise CascaderError(f"the reference interpreter: {reply}")
        return reply

    def send(self, *message) -> None:
        try:
            pickle.dump(message, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass


_worker: _Worker | None = None
_dropped: list[int] = []  # interpreters collected since the last call
_lock = threading.Lock()
_keys = itertools.count()


def _call(*message):
    """A call to the worker; a new one replaces a worker that has died."""
    global _worker
    with _lock:
        if _worker is None or not _worker.alive():
            _worker = _Worker()
            _dropped.clear()
        while _dropped:
            _worker.send("drop", _dropped.pop())
        try:
            return _worker.call(*message)
        except _Died:
            _worker = None
            raise


def _operator_engine(op, graph: SubGraph) -> str:
    """The kernels that judge one operator: "micro" (TFLM) for one of `MICRO_OPERATORS`,
    "builtin" for one only the builtin resolver runs, else "reference"."""
    if (op.opcode in MICRO_OPERATORS and op.inputs and op.inputs[0] >= 0
            and graph.tensors[op.inputs[0]].dtype in MICRO_OPERATORS[op.opcode]):
        return "micro"
    return "builtin" if op.opcode in BUILTIN_ONLY_OPERATORS else "reference"


def _engine(data: bytes) -> tuple[str, tuple]:
    """Which kernels judge the model whole: ("micro", (input tensors, output tensors)) for TFLM
    where an operator of `MICRO_OPERATORS` is in it, ("builtin", ()) for one only the builtin
    resolver runs, else ("reference", ())."""
    model = load_model(data)
    engines = {_operator_engine(op, graph) for graph in model.subgraphs for op in graph.operators}
    if "micro" in engines:
        return "micro", _io(data)
    return ("builtin" if "builtin" in engines else "reference"), ()


def engine_runs(model: Model) -> list[tuple[str, list[int]]] | None:
    """The main subgraph's operators in runs of one engine each (`_operator_engine`, in the
    model's order) where a model mixes operators whose engines differ, so each is judged by its
    own kernels: a 16x8 FULLY_CONNECTED on TFLM's, the int16 MUL and LEAKY_RELU before it on
    LiteRT's (TFLM's round one off on some values; random network int16 seed 944), an int16
    EXP (TFLM has none) on LiteRT's. None where one engine runs it whole: a single engine, or
    state or more subgraphs, which only a whole run keeps."""
    sg = model.main
    if len(model.subgraphs) > 1 or any(t.is_variable for t in sg.tensors):
        return None
    runs: list[tuple[str, list[int]]] = []
    for i, op in enumerate(sg.operators):
        engine = _operator_engine(op, sg)
        if runs and runs[-1][0] == engine:
            runs[-1][1].append(i)
        else:
            runs.append((engine, [i]))
    return runs if len({engine for engine, _ in runs}) > 1 else None


def _io(data: bytes) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The main subgraph's input and output tensors (TFLM's interpreter is told them)."""
    main = load_model(data).main
    return tuple(main.inputs), tuple(main.outputs)


def _crash_error(data: bytes) -> ReferenceCrashed:
    """The error for a model that took the interpreter down, naming the first operator that does
    so alone (each run in turn, on random inputs, in one more child process)."""
    model = load_model(data)
    name = model.description or "the model"
    for index, op in enumerate(model.main.operators):
        try:
            sub, _, _ = single_operator_model(model, model.main, index)
            sub_data = save_model(sub)
            key = next(_keys)
            _call("load", key, sub_data, True, *_engine(sub_data))
            _call("run", key, random_inputs(sub_data), {})
            _dropped.append(key)
        except _Died:
            return ReferenceCrashed(f"the reference interpreter crashed (its process aborted) on {name!r}, at "
                                    f"operator {index} ({op.opcode}); the reference cannot judge this model",
                                    operator=index, opcode=op.opcode)
        except CascaderError:
            continue
    return ReferenceCrashed(f"the reference interpreter crashed (its process aborted) on {name!r}; no single "
                            "operator does so alone")


class ReferenceInterpreter:
    """A LiteRT interpreter on the reference kernels (or TFLM, see the module docstring),
    single-threaded and deterministic.

    It runs in a child process: LiteRT's reference kernels abort the whole process on some
    models, and a crash then raises ReferenceCrashed (naming the operator) here instead of
    ending the caller. `engine` "reference" forces LiteRT's reference kernels (to show where
    they depart from TFLM's); by default the model's operators choose.

    `preserve_all_tensors` (the default) gives every tensor a buffer of its own, as TFLM's
    interpreter here does too: LiteRT's arena otherwise lets an operator write its output over
    an input that a later operator still reads (random network uint8 seed 916: a dead MUL by
    a broadcast constant ran in place over a RESHAPE's output that a TANH read next, and 28,035
    of 28,160 TANH outputs came out wrong).
    """

    def __init__(self, model: ModelLike, preserve_all_tensors: bool = True, engine: str | None = None) -> None:
        self.model_bytes = _litert_compatible(_model_bytes(model))
        self._key = next(_keys)
        self._runs: list[tuple[ReferenceInterpreter, tuple[int, ...], tuple[int, ...]]] | None = None
        runs = engine_runs(load_model(self.model_bytes)) if engine is None else None
        if runs is not None:
            self._load_runs(runs, preserve_all_tensors)
            return
        if engine is None:
            chosen = _engine(self.model_bytes)
        else:
            chosen = (engine, _io(self.model_bytes) if engine == "micro" else ())
        try:
            self.input_details, self.output_details = _call("load", self._key, self.model_bytes, preserve_all_tensors,
                                                            *chosen)
        except _Died:
            raise _crash_error(self.model_bytes) from None

    def _load_runs(self, runs: list[tuple[str, list[int]]], preserve_all_tensors: bool) -> None:
        """One interpreter per run of `engine_runs`, each reading the tensors earlier runs (or
        the model's inputs) give and giving those later runs (or the model's outputs) read."""
        model = load_model(self.model_bytes)
        sg = model.main
        later_reads = [set(sg.outputs)]
        for _, indices in reversed(runs[1:]):
            later_reads.insert(0, later_reads[0] | {t for i in indices for t in sg.operators[i].inputs if t >= 0})
        self._runs = []
        for (engine, indices), later in zip(runs, later_reads):
            made = {t for i in indices for t in sg.operators[i].outputs}
            reads = tuple(dict.fromkeys(t for i in indices for t in sg.operators[i].inputs
                                        if t >= 0 and t not in made and sg.tensors[t].data is None))
            gives = tuple(t for t in dict.fromkeys(t for i in indices for t in sg.operators[i].outputs) if t in later)
            part = operators_model(model, sg, indices, reads, gives)
            self._runs.append((ReferenceInterpreter(part, preserve_all_tensors, engine), reads, gives))

        def details(tensors: Sequence[int]) -> list[dict]:
            return [{"index": t, "name": sg.tensors[t].name, "dtype": sg.tensors[t].numpy_dtype,
                     "shape": np.array(sg.tensors[t].shape, np.int32)} for t in tensors]
        self.input_details, self.output_details = details(sg.inputs), details(sg.outputs)
        self._values: dict[int, np.ndarray] = {}

    def run(self, inputs: Sequence[np.ndarray] | np.ndarray) -> list[np.ndarray]:
        """Run one inference; returns the subgraph outputs in order. Variable tensors keep their
        values from one run to the next, as in any TFLite interpreter."""
        return self.run_with_variables(inputs, {})[0]

    def run_with_variables(self, inputs: Sequence[np.ndarray] | np.ndarray, variables: Mapping[int, np.ndarray]
                           ) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
        """Run one inference with the variable tensors (subgraph-0 index -> value) set first;
        returns the outputs and those variables' values after the run (the state it leaves)."""
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if len(inputs) != len(self.input_details):
            raise CascaderError(f"model has {len(self.input_details)} inputs, got {len(inputs)}")
        values = []
        for detail, value in zip(self.input_details, inputs):
            value = np.asarray(value)
            if value.dtype != detail["dtype"] or tuple(value.shape) != tuple(detail["shape"]):
                raise CascaderError(
                    f"input {detail['name']!r} needs {np.dtype(detail['dtype']).name}{list(detail['shape'])}, "
                    f"got {value.dtype.name}{list(value.shape)}"
                )
            values.append(value)
        if self._runs is not None:  # no state: `engine_runs` leaves a stateful model whole
            self._values = dict(zip((d["index"] for d in self.input_details), values))
            for interpreter, reads, gives in self._runs:
                self._values.update(zip(gives, interpreter.run([self._values[t] for t in reads])))
            return [self._values[d["index"]] for d in self.output_details], {}
        try:
            return _call("run", self._key, values, dict(variables))
        except _Died:
            raise _crash_error(self.model_bytes) from None

    def tensor(self, index: int) -> np.ndarray:
        """Any tensor by subgraph-0 index (intermediates need preserve_all_tensors; of a model
        judged in runs of one engine each, the tensors that pass between runs)."""
        if self._runs is not None:
            if index not in self._values:
                raise CascaderError(f"tensor {index} is inside one run of the reference's engines, not kept")
            return self._values[index]
        try:
            return _call("tensor", self._key, index)
        except _Died:
            raise _crash_error(self.model_bytes) from None

    def __del__(self) -> None:
        # Only queued: a collection can run this in the middle of another message's write.
        if hasattr(self, "_key"):
            _dropped.append(self._key)


def operators_model(model: Model, sg: SubGraph, indices: Sequence[int], inputs: Sequence[int],
                    outputs: Sequence[int]) -> Model:
    """Operators `indices` of `sg` (in that order) as a model of their own, reading `inputs` and
    giving `outputs` (subgraph tensor indices); constants keep their buffers and variable
    tensors stay variables (state of the new model's interpreter, not inputs)."""
    ops = [sg.operators[i] for i in indices]
    used = sorted({t for op in ops for t in (*op.inputs, *op.outputs, *op.intermediates) if t >= 0}
                  | set(inputs) | set(outputs))
    remap = {t: i for i, t in enumerate(used)}
    cut = [replace(op, inputs=tuple(remap[t] if t >= 0 else -1 for t in op.inputs),
                   outputs=tuple(remap[t] for t in op.outputs),
                   intermediates=tuple(remap[t] for t in op.intermediates if t >= 0)) for op in ops]
    buffers, buffer_of = [b""], {}  # only the buffers these tensors use: a cut of a big model stays small
    tensors = []
    for t in used:
        tensor = sg.tensors[t]
        if 0 < tensor.buffer < len(model.buffers) and model.buffers[tensor.buffer]:
            if tensor.buffer not in buffer_of:
                buffer_of[tensor.buffer] = len(buffers)
                buffers.append(model.buffers[tensor.buffer])
            tensor = replace(tensor, buffer=buffer_of[tensor.buffer])
        else:
            tensor = replace(tensor, buffer=0)
        tensors.append(tensor)
    return Model(subgraphs=[SubGraph(tensors=tensors, operators=cut, inputs=tuple(remap[t] for t in inputs),
                                     outputs=tuple(remap[t] for t in outputs))], buffers=buffers)


def single_operator_model(model: Model, sg: SubGraph, index: int) -> tuple[Model, tuple[int, ...], tuple[int, ...]]:
    """Operator `index` of `sg` alone as a model (constants keep their buffers, variable tensors
    are its state); with the subgraph tensor each of its inputs and outputs is."""
    op = sg.operators[index]
    inputs = tuple(dict.fromkeys(t for t in op.inputs
                                 if t >= 0 and sg.tensors[t].data is None and not sg.tensors[t].is_variable))
    outputs = tuple(op.outputs)
    return operators_model(model, sg, [index], inputs, outputs), inputs, outputs


def run(model: ModelLike, inputs: Sequence[np.ndarray] | np.ndarray) -> list[np.ndarray]:
    """Run `model` once on the reference kernels and return its outputs."""
    return ReferenceInterpreter(model).run(inputs)


def random_inputs(model: ModelLike, seed: int = 0) -> list[np.ndarray]:
    """Uniformly random inputs over each input's full integer range (normal for floats)."""
    m = model if isinstance(model, Model) else load_model(_model_bytes(model))
    rng = np.random.default_rng(seed)
    out = []
    for index in m.main.inputs:
        t = m.main.tensors[index]
        dtype = t.numpy_dtype
        if dtype.kind == "b":
            out.append(rng.integers(0, 2, size=t.shape).astype(bool))
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, info.max, size=t.shape, dtype=dtype, endpoint=True))
        else:
            out.append(rng.standard_normal(t.shape).astype(dtype))
    return out
