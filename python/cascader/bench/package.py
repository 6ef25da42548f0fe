"""Round trip of Vela's binaries through the packager: decode, re-package, compare.

Each shared model is compiled with Vela 5.2 (the configurations of `cascader.bench.simulate`);
the `ethos-u` operators of Vela's file are decoded into their parts (command stream words,
flash, arena sizes and offsets) and packaged into the original CPU model with
`cascader.tflite.ethos_u.package`. The table says whether the result equals Vela's model
(tensors, buffers, operators, custom options, metadata; `load_model` of both), whether the
simulator gives the same outputs on one random input, and how long packaging took.
"""

from __future__ import annotations

import argparse
import glob
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import _core
from ..errors import CascaderError
from ..reference import random_inputs
from ..sim import npu_calls, simulate
from ..sim.binary import arena_sizes
from ..tflite import Model, load_model
from ..tflite.ethos_u import ArenaSizes, NpuSubgraph, package
from ..vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela


def replaced_operators(model: Model, ifms: set[int], ofms: tuple[int, ...]) -> list[int]:
    """The operators of `model` between tensors `ifms` and `ofms`: what one `ethos-u` operator replaced."""
    sg = model.main
    producer = {t: i for i, op in enumerate(sg.operators) for t in op.outputs}
    ops: set[int] = set()
    stack = list(ofms)
    while stack:
        t = stack.pop()
        if t in ifms or t not in producer or producer[t] in ops:
            continue
        ops.add(producer[t])
        stack.extend(x for x in sg.operators[producer[t]].inputs if x >= 0)
    return sorted(ops)


def repackage(
    original: Model,
    vela: Model,
    description: str = "Vela Optimised",
    *,
    command_streams: list[np.ndarray] | None = None,
    arenas: ArenaSizes | None = None,
    arena_offsets: dict[int, int] | None = None,
) -> Model:
    """Decode Vela's binary into its parts and package them into the original model.

    Tensors are matched by name. `command_streams` (one per `ethos-u` operator), `arenas` and
    `arena_offsets` (by tensor index of `vela`) replace Vela's, e.g. after relocation. Raises
    InvalidArgumentError when an `ethos-u` operator's IFMs/OFMs do not delimit the operators it
    replaced (Vela 5.2 sometimes passes feature maps between `ethos-u` operators through the
    scratch arena without naming them).
    """
    vsg, osg = vela.main, original.main
    by_name = {t.name: i for i, t in enumerate(osg.tensors)}
    calls = npu_calls(vela)
    if not calls:
        raise CascaderError("Vela's model has no ethos-u operator")
    parts = []
    for call in calls:
        ifms = tuple(by_name[vsg.tensors[t].name] for t in call.ifms)
        ofms = tuple(by_name[vsg.tensors[t].name] for t in call.ofms)
        config, words = _core.split_driver_payload(call.payload)
        if command_streams is not None:
            words = command_streams[len(parts)]
        parts.append(NpuSubgraph(tuple(replaced_operators(original, set(ifms), ofms)), words, ifms, ofms))
    first = calls[0]
    # Vela 5.2 passes the scratch tensor again as region 2 when there is no dedicated fast memory.
    arenas = arenas or arena_sizes(vela)
    offsets = {by_name[vsg.tensors[t].name]: off for t, off in (arena_offsets or first.arena_offsets).items()
               if vsg.tensors[t].name in by_name}
    return package(original, parts, first.flash, arenas, offsets, accelerator=config["accelerator"],
                   id_word=config["id_word"], description=description)


@dataclass
class RoundTrip:
    model: str
    config: str
    npu_operators: int = 0
    equal: bool | None = None  # None: not packaged
    same_outputs: bool | None = None  # None: not simulated
    package_ms: float = 0.0
    note: str = ""


def round_trip(path: str | os.PathLike, config: VelaConfig, simulate_seed: int | None = 0) -> RoundTrip:
    row = RoundTrip(Path(path).stem, config.label)
    try:
        vela = load_model(compile_with_vela(path, config).path)
        original = load_model(path)
        start = time.perf_counter()
        ours = repackage(original, vela)
        row.package_ms = 1e3 * (time.perf_counter() - start)
    except CascaderError as e:
        row.note = f"{type(e).__name__}: {e}"[:110]
        return row
    row.npu_operators = len(npu_calls(vela))
    row.equal = ours == vela
    if not row.equal:
        row.note = "Vela ordered the CPU operators differently" if _same_up_to_order(ours, vela) else "differs"
    if simulate_seed is not None:
        inputs = random_inputs(original, simulate_seed)
        row.same_outputs = all(np.array_equal(a, b) for a, b in zip(simulate(ours, inputs), simulate(vela, inputs)))
    return row


def _same_up_to_order(a: Model, b: Model) -> bool:
    """Same operators (by opcode and tensor names) and same tensors, in any order."""
    def ops(m: Model) -> list[tuple]:
        names = [t.name for t in m.main.tensors]
        return sorted((op.name, tuple(names[t] for t in op.inputs if t >= 0), tuple(names[t] for t in op.outputs))
                      for op in m.main.operators)
    return ops(a) == ops(b) and sorted(t.name for t in a.main.tensors) == sorted(t.name for t in b.main.tensors)


def format_table(rows: list[RoundTrip]) -> str:
    head = f"{'model':40} {'config':38} {'npu ops':>7} {'equal':6} {'outputs':8} {'pack ms':>8}  note"
    lines = [head, "-" * len(head)]
    flag = lambda v, yes="yes": "-" if v is None else (yes if v else "NO")  # noqa: E731
    for r in rows:
        lines.append(f"{r.model[:40]:40} {r.config[:38]:38} {r.npu_operators:>7} {flag(r.equal):6} "
                     f"{flag(r.same_outputs, 'same'):8} {r.package_ms:>8.1f}  {r.note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=os.environ.get("CASCADER_MODELS", ""), help="folder of .tflite models")
    parser.add_argument("--only", default="", help="substring filter on model names")
    parser.add_argument("--no-simulate", action="store_true", help="compare structure only")
    args = parser.parse_args(argv)
    if not args.models:
        parser.error("give --models or set CASCADER_MODELS")
    paths = sorted(p for p in glob.glob(os.path.join(args.models, "*.tflite")) if args.only in Path(p).stem)
    configs = [VelaConfig("ethos-u55-128", "Performance", UNLIMITED_SRAM), VelaConfig("ethos-u65-256", "Size")]
    rows: list[RoundTrip] = []
    for path in paths:
        for config in configs:
            rows.append(round_trip(path, config, None if args.no_simulate else 0))
            print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(format_table(rows))
    print(f"\n{sum(1 for r in rows if r.equal)}/{len(rows)} equal to Vela's model; "
          f"{sum(1 for r in rows if r.same_outputs)}/{sum(1 for r in rows if r.same_outputs is not None)} "
          "with the same simulated outputs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
