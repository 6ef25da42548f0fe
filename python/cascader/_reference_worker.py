"""The child process behind `cascader.reference.ReferenceInterpreter`.

    python -m cascader._reference_worker

Reads pickled (command, key, ...) messages from stdin and writes pickled ("ok" | "error",
reply) messages to the protocol stream, fd 1 as it was at start; fd 1 itself then points at
stderr, so a library that prints cannot corrupt the protocol. LiteRT's reference kernels abort
the process on some models: the parent sees the stream end and raises ReferenceCrashed.
"""

from __future__ import annotations

import os
import pickle
import resource
import signal
import sys
from typing import Any


MICRO_ARENA_BYTES = 64 << 20  # TFLM plans a model's tensors in one arena; every model under test fits


def make_interpreter(data: bytes, preserve_all_tensors: bool, engine: str = "reference", io: tuple = ()):
    """LiteRT on its reference kernels; on the builtin ones (XNNPACK off) for `engine`
    "builtin" (`reference.BUILTIN_ONLY_OPERATORS`); TFLM for "micro", `io` then being the
    model's input and output tensors (`reference.MICRO_OPERATORS`). A model TFLM cannot
    prepare (an LSTM variant it has no kernel for: CIFG, peephole) runs on LiteRT's reference."""
    if engine == "micro":
        try:
            return MicroInterpreter(data, *io)
        except RuntimeError:
            pass
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES if engine == "builtin" else OpResolverType.BUILTIN_REF
    interpreter = Interpreter(model_content=data, experimental_op_resolver_type=resolver,
                              experimental_preserve_all_tensors=preserve_all_tensors, num_threads=1)
    interpreter.allocate_tensors()
    return interpreter


class MicroInterpreter:
    """TFLM's interpreter behind the part of LiteRT's interface `serve` uses: tensors by their
    subgraph index. TFLM sets only inputs, so a variable tensor is "set" only to the value it
    holds (a session running on) or to its reset value (a session starting again)."""

    def __init__(self, data: bytes, inputs: tuple, outputs: tuple) -> None:
        from tflite_micro.python.tflite_micro import runtime

        self.it = runtime.Interpreter.from_bytes(data, arena_size=MICRO_ARENA_BYTES,
                                                 intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
        self.inputs, self.outputs = list(inputs), list(outputs)

    def _details(self, tensors: list, get) -> list[dict]:
        out = []
        for position, index in enumerate(tensors):
            d = get(position)
            out.append({"index": index, "name": d.get("name", ""), "dtype": d["dtype"], "shape": d["shape"]})
        return out

    def get_input_details(self) -> list[dict]:
        return self._details(self.inputs, self.it.get_input_details)

    def get_output_details(self) -> list[dict]:
        return self._details(self.outputs, self.it.get_output_details)

    def set_tensor(self, index: int, value) -> None:
        import numpy as np

        if index in self.inputs:
            self.it.set_input(value, self.inputs.index(index))
        elif not np.array_equal(self.get_tensor(index), value):
            self.it.reset()
            if not np.array_equal(self.get_tensor(index), value):
                raise ValueError(f"TFLM sets no variable tensor ({index}) to a value of the caller's")

    def invoke(self) -> None:
        self.it.invoke()

    def get_tensor(self, index: int):
        if index in self.outputs:
            return self.it.get_output(self.outputs.index(index))
        return self.it.GetTensor(index, 0)["tensor_data"]


def serve(inp, out) -> None:
    interpreters: dict[int, Any] = {}
    while True:
        try:
            command, key, *args = pickle.load(inp)
        except EOFError:
            return
        try:
            if command == "load":
                it = interpreters[key] = make_interpreter(*args)
                reply = (it.get_input_details(), it.get_output_details())
            elif command == "run":  # inputs, then the variable tensors to set before and read after
                it = interpreters[key]
                inputs, variables = args
                for detail, value in zip(it.get_input_details(), inputs):
                    it.set_tensor(detail["index"], value)
                for index, value in variables.items():
                    it.set_tensor(index, value)
                it.invoke()
                reply = ([it.get_tensor(d["index"]).copy() for d in it.get_output_details()],
                         {index: it.get_tensor(index).copy() for index in variables})
            elif command == "tensor":
                reply = interpreters[key].get_tensor(args[0]).copy()
            else:  # "drop": no reply
                interpreters.pop(key, None)
                continue
            message = ("ok", reply)
        except Exception as e:  # the interpreter refused the model or the inputs
            message = ("error", f"{type(e).__name__}: {e}")
        pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


def main() -> None:
    # An abort must end this process at once: no core file (writing one takes seconds).
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Ctrl-C (or a notebook kernel's interrupt) reaches the whole process group: the parent
    # decides, and this process ends when its pipe closes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.stdin.buffer, protocol)


if __name__ == "__main__":
    main()
