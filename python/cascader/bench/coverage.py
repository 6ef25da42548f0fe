"""Operator coverage against Vela 5.2: how many operators stay on the CPU, and which.

    python -m cascader.bench.coverage [--models DIR] [--accelerators a,b] [--only SUBSTR]

Per model (the zoo networks and operator cases, then every `.tflite` in `--models` /
`$CASCADER_MODELS`) and per accelerator: the operators cascader's compiled model leaves to the
CPU, the operators Vela's output leaves to the CPU (every operator of its main subgraph that
is not an `ethos-u` custom operator), and the operator types where the two differ (+: only
cascader keeps it on the CPU; -: only Vela does). Whether each of our binaries is bit-exact is
the compile benchmark's job (`python -m cascader.bench.compile`).
"""

from __future__ import annotations

from collections import Counter

from .. import zoo
from ..compiler import compile as compile_model
from ..errors import CascaderError
from ..tflite import load_model
from ..vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela
from .compile import ZOO_NETWORKS, model_parser, model_paths

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")


def cpu_operators(model) -> Counter:
    """Opcodes of the main subgraph's operators that are not NPU calls."""
    return Counter(op.opcode for op in model.main.operators if not (op.opcode == "CUSTOM" and op.custom_code == "ethos-u"))


def _difference(ours: Counter, vela: Counter) -> str:
    more, fewer = ours - vela, vela - ours
    return " ".join([f"+{k}x{n}" for k, n in sorted(more.items())] + [f"-{k}x{n}" for k, n in sorted(fewer.items())])


def main(argv: list[str] | None = None) -> int:
    args = model_parser(__doc__, ACCELERATORS).parse_args(argv)
    zoo_models = [(n, zoo.get(n)) for n in ZOO_NETWORKS] + zoo.activation_op_cases()
    paths = model_paths(args.models, args.only, zoo_models)
    header = f"{'model':<40} {'accelerator':<14} {'ours':>5} {'vela':>5}  difference"
    print(header)
    print("-" * len(header))
    at_most, total = 0, 0
    for path in paths:
        for acc in args.accelerators.split(","):
            try:
                ours = cpu_operators(compile_model(path, accelerator=acc).model)
                vela = cpu_operators(load_model(compile_with_vela(path, VelaConfig(acc, "Performance", UNLIMITED_SRAM)).path))
            except CascaderError as e:
                print(f"{path.stem[:40]:<40} {acc:<14} error: {e}")
                continue
            n, m = sum(ours.values()), sum(vela.values())
            total += 1
            at_most += n <= m
            print(f"{path.stem[:40]:<40} {acc:<14} {n:>5} {m:>5}  {_difference(ours, vela)}", flush=True)
    print()
    print(f"CPU operators at most Vela's: {at_most}/{total}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
