"""The `cascader` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import CascaderError
from .tflite import Model, load_model

_ZOO_PREFIX = "zoo:"


def resolve_model(spec: str) -> tuple[Model, str]:
    """A path to a .tflite file, or `zoo:<name>` for a built-in model."""
    if spec.startswith(_ZOO_PREFIX):
        from . import zoo

        name = spec[len(_ZOO_PREFIX) :]
        return zoo.get(name), spec
    return load_model(spec), spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cascader", description="Compiler for Arm Ethos-U NPUs.")
    parser.add_argument("--version", action="version", version=f"cascader {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    p_inspect = commands.add_parser(
        "inspect", help="show which operators run on the NPU and what each costs (MACs, bytes)"
    )
    p_inspect.add_argument("model", help="a .tflite file, or zoo:<name> for a built-in model")
    p_compile = commands.add_parser("compile", help="compile a model into an Ethos-U binary (.tflite with ethos-u ops)")
    p_compile.add_argument("model", help="a .tflite file, or zoo:<name> for a built-in model")
    p_compile.add_argument("--accelerator-config", "--accelerator", dest="accelerator", default="ethos-u55-128",
                           help="ethos-u55-32/64/128/256 or ethos-u65-256/512 (default: ethos-u55-128)")
    p_compile.add_argument("--system-config", "--system", dest="system", default=None,
                           help="a vela.ini system preset, e.g. Ethos_U55_High_End_Embedded")
    p_compile.add_argument("--memory-mode", default=None, help="Shared_Sram, Sram_Only or Dedicated_Sram")
    p_compile.add_argument("--sram", default=None, help="hard SRAM budget: bytes or e.g. 256KiB (default: unlimited)")
    p_compile.add_argument("--optimise", default="Performance", choices=["Performance", "Size"],
                           help="Performance: fastest within the budget; Size: least SRAM (as Vela's option)")
    p_compile.add_argument("--output-dir", default=".", help="where <model>_cascader.tflite goes (default: .)")
    args = parser.parse_args(argv)
    try:
        if args.command == "inspect":
            from .inspection import inspect

            model, name = resolve_model(args.model)
            print(inspect(model, name=name).table())
        elif args.command == "compile":
            from .compiler import compile as compile_model

            model, name = resolve_model(args.model)
            result = compile_model(model, sram=args.sram, accelerator=args.accelerator, system=args.system,
                                   memory_mode=args.memory_mode, optimise=args.optimise)
            stem = name[len(_ZOO_PREFIX):] if name.startswith(_ZOO_PREFIX) else Path(name).stem
            out = Path(args.output_dir) / f"{stem}_cascader.tflite"
            out.parent.mkdir(parents=True, exist_ok=True)
            result.save(out)
            print(result.summary())
            print(f"output           {out}")
    except CascaderError as e:
        print(f"cascader: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
