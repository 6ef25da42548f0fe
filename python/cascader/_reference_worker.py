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


def make_interpreter(data: bytes, preserve_all_tensors: bool, builtin: bool = False):
    """`builtin`: the builtin kernels (XNNPACK off) instead of the reference ones, for the
    operators LiteRT has no reference kernel for (`reference.BUILTIN_ONLY_OPERATORS`)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES if builtin else OpResolverType.BUILTIN_REF
    interpreter = Interpreter(model_content=data, experimental_op_resolver_type=resolver,
                              experimental_preserve_all_tensors=preserve_all_tensors, num_threads=1)
    interpreter.allocate_tensors()
    return interpreter


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
