"""The `cascader` command.

`cascader compile` takes Vela's option names (--accelerator-config, --system-config,
--memory-mode, --config, --arena-cache-size, --optimise, --output-dir) where the concept is the
same, so switching from Vela is changing the program's name.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

# This process is ours and does no linear algebra: without this, numpy's OpenBLAS starts a
# thread per core at import that busy-waits for about 0.1 s of CPU, which on a small machine
# is taken from the compile (user time of a small compile: 0.28 -> 0.15 s). Set before numpy
# is imported; a value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from . import __version__  # noqa: E402
from .errors import CascaderError, InfeasibleError, InvalidArgumentError, one_line  # noqa: E402
from .tflite import Model, load_model  # noqa: E402

_ZOO_PREFIX = "zoo:"
DEMO_MODEL = "zoo:mobilenet_v2"


def resolve_model(spec: str) -> tuple[Model, str]:
    """A path to a .tflite file, or `zoo:<name>` for a built-in model."""
    if spec.startswith(_ZOO_PREFIX):
        from . import zoo

        name = spec[len(_ZOO_PREFIX) :]
        return zoo.get(name), spec
    return load_model(spec), spec


def _stem(spec: str) -> str:
    return spec[len(_ZOO_PREFIX):] if spec.startswith(_ZOO_PREFIX) else Path(spec).stem


def _add_accelerator(p: argparse.ArgumentParser) -> None:
    p.add_argument("--accelerator-config", "--accelerator", dest="accelerator", default=None,
                   help="ethos-u55-32/64/128/256, ethos-u65-256/512 or ethos-u85-128/256/512/1024/2048 "
                        "(default: ethos-u55-128, or the binary's own)")


def _add_target(p: argparse.ArgumentParser) -> None:
    """The target options, named as Vela names them."""
    _add_accelerator(p)
    p.add_argument("--system-config", "--system", dest="system", default=None,
                   help="a System_Config section of --config or a vela.ini preset, e.g. Ethos_U55_High_End_Embedded, "
                        "Ethos_U85_SYS_DRAM_Mid")
    p.add_argument("--memory-mode", default=None,
                   help="a Memory_Mode section of --config or Shared_Sram, Sram_Only, Dedicated_Sram[_256KB/_384KB/_512KB]")
    p.add_argument("--config", action="append", default=[], metavar="FILE.ini",
                   help="a Vela-style .ini with System_Config / Memory_Mode sections (may repeat)")


def _target(args: argparse.Namespace) -> tuple[object, object, int | None]:
    """(system, memory mode, arena cache size) from the options, reading --config files first."""
    from .arch import MemoryMode, SystemConfig, ini_sections

    system, mode, cache = args.system, args.memory_mode, None
    for path in args.config:
        sections = ini_sections(path)
        if system is not None and f"System_Config.{system}" in sections:
            system = SystemConfig.from_ini(path, system)
        if isinstance(mode, str) and f"Memory_Mode.{mode}" in sections:
            mode, cache = MemoryMode.from_ini(path, mode)
    return system, mode, cache


def _output_dir(path: str) -> Path:
    """The --output-dir, created and shown to take files before the compile, so that a path
    that cannot hold them (under a regular file, in /proc, read-only) fails at once."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise InvalidArgumentError(f"--output-dir {path}: cannot write there ({e.strerror or e})") from None
    return out


def _on_command_line(error: CascaderError, args: argparse.Namespace) -> str:
    """The error's message, with the library's advice to pass a keyword argument (InfeasibleError:
    "Pass sram=N or more") given as the option the user typed instead."""
    message = str(error)
    if isinstance(error, InfeasibleError) and error.minimum_sram is not None:
        option = "--arena-cache-size" if getattr(args, "arena_cache_size", None) is not None else "--sram"
        message = message.replace(f"sram={error.minimum_sram}", f"{option} {error.minimum_sram}")
    return message


def _compile(args: argparse.Namespace) -> int:
    from .compiler import compile as compile_model
    from .sizes import parse_size

    if args.demo == (args.model is not None):
        raise InvalidArgumentError("give a model (a .tflite file or zoo:<name>) or --demo, not both or neither")
    spec = DEMO_MODEL if args.demo else args.model
    model, _ = resolve_model(spec)
    system, mode, cache = _target(args)
    budgets = [b for b in (parse_size(args.sram), parse_size(args.arena_cache_size), cache) if b is not None]
    out_dir = _output_dir(args.output_dir)
    result = compile_model(model, sram=min(budgets) if budgets else None, accelerator=args.accelerator or "ethos-u55-128",
                           system=system, memory_mode=mode, optimise=args.optimise, progress=True)
    stem = _stem(spec)
    binary = out_dir / f"{stem}_cascader.tflite"
    result.save(binary)
    result.summary().to_csv(out_dir / f"{stem}_summary.csv")
    result.layers.to_csv(out_dir / f"{stem}_layers.csv")
    print(f"Network summary for {stem}")
    print(result.summary())
    print(f"{'output':<22}{binary}")
    print(f"{'reports':<22}{out_dir / (stem + '_summary.csv')}, {out_dir / (stem + '_layers.csv')}")
    if args.verbose_layers:
        print()
        print(result.layers.table())
    return 0


def _simulate(args: argparse.Namespace) -> int:
    import numpy as np

    if args.check_against:
        return _check(args)
    binary = load_model(args.binary)
    from .reference import random_inputs
    from .sim import simulate

    if args.inputs:
        with np.load(args.inputs) as data:
            inputs = [data[k] for k in data.files]
    else:
        inputs = random_inputs(binary, args.seed)
    outputs = simulate(binary, inputs)
    for i, o in enumerate(outputs):
        print(f"output {i}: {o.dtype}{list(o.shape)} min {o.min()} max {o.max()} sum {int(o.astype(np.int64).sum())}")
    if args.save:
        np.savez(args.save, *outputs)
        print(f"saved {args.save}")
    return 0


def _check(args: argparse.Namespace) -> int:
    """0 bit-exact, 1 a mismatch, 2 could not check (with the reason on one line, no traceback)."""
    from .checking import check

    try:
        source, _ = resolve_model(args.check_against)
    except Exception as e:  # noqa: BLE001 - a check answers with an exit code, never a traceback
        print(f"cascader: could not check: cannot read {args.check_against}: {one_line(e)}", file=sys.stderr)
        return 2
    result = check(source, args.binary, args.seeds, steps=args.steps)
    print(result)
    if result.mismatched:
        return 1
    if not result.checked:
        print(f"cascader: could not check: {result.reason}", file=sys.stderr)
        return 2
    return 0


def _estimate(args: argparse.Namespace) -> int:
    from .records import Records
    from .sim import estimate

    system, mode, _ = _target(args)
    est = estimate(args.binary, system=system, memory_mode=mode, accelerator=args.accelerator)
    rows = Records(est.operations)
    print(rows.table(["call", "operation", "kind", "ofm_shape", "block", "npu_cycles", "dma_cycles", "macs", "cycles"]))
    print()
    print(est._headline())
    for m, b in est.bytes_per_memory.items():
        print(f"  {m}: {b / 1024:,.1f} KiB, {est.access_cycles.get(m, 0.0):,.0f} access cycles")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cascader", description="Compiler for Arm Ethos-U NPUs.")
    parser.add_argument("--version", action="version", version=f"cascader {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("inspect", help="show which operators run on the NPU and what each costs (MACs, bytes)")
    p.add_argument("model", help="a .tflite file, or zoo:<name> for a built-in model")
    _add_accelerator(p)

    p = commands.add_parser("compile", help="compile a model into an Ethos-U binary (.tflite with ethos-u ops)")
    p.add_argument("model", nargs="?", help="a .tflite file, or zoo:<name> for a built-in model")
    p.add_argument("--demo", action="store_true", help=f"compile the built-in MobileNetV2 ({DEMO_MODEL})")
    _add_target(p)
    budget = p.add_mutually_exclusive_group()
    # Both sizes are read by sizes.parse_size, as the API reads sram=.
    budget.add_argument("--sram", default=None,
                        help="hard SRAM budget: bytes or a size such as 256KiB, 1.5MiB, 1e6 (default: unlimited)")
    budget.add_argument("--arena-cache-size", default=None,
                        help="Vela's name for the same hard budget (a size, as --sram); a sized memory mode sets it too")
    p.add_argument("--optimise", default="Performance", choices=["Performance", "Size"],
                   help="Performance: fastest within the budget; Size: least SRAM (as Vela's option)")
    p.add_argument("--output-dir", default="output", help="where the binary and the reports go (default: output)")
    p.add_argument("--verbose-layers", action="store_true", help="also print the per-layer table")

    p = commands.add_parser("simulate", help="run an Ethos-U binary on the bit-exact simulator")
    p.add_argument("binary", help="a .tflite with ethos-u operators (cascader's or Vela's)")
    p.add_argument("--check-against", metavar="MODEL",
                   help="compare with the reference interpreter on this source model (a .tflite or zoo:<name>); "
                        "exit 0 bit-exact, 1 a mismatch, 2 could not check")
    p.add_argument("--seeds", type=int, default=2, help="random input sets for --check-against (default 2)")
    p.add_argument("--steps", type=int, default=None,
                   help="inferences per seed for --check-against, state carried (default: 3 with state, else 1)")
    p.add_argument("--inputs", metavar="FILE.npz", help="inputs in order (default: random, --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", metavar="FILE.npz", help="write the outputs")

    p = commands.add_parser("estimate", help="cycles of an Ethos-U binary on the shared cycle model")
    p.add_argument("binary", help="a .tflite with ethos-u operators (cascader's or Vela's)")
    _add_target(p)

    commands.add_parser("bench", help="benchmark against Vela: python -m cascader.bench's options", add_help=False)

    args, rest = parser.parse_known_args(argv)
    if args.command != "bench" and rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        if args.command == "inspect":
            from .inspection import inspect

            model, name = resolve_model(args.model)
            print(inspect(model, name=name, accelerator=args.accelerator).table())
            return 0
        if args.command == "compile":
            return _compile(args)
        if args.command == "simulate":
            return _simulate(args)
        if args.command == "estimate":
            return _estimate(args)
        from .bench.versus import main as bench_main

        return bench_main(rest, prog="cascader bench")
    except CascaderError as e:
        print(f"cascader: error: {_on_command_line(e, args)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
