"""The `cascader` command."""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .errors import CascaderError
from .inspection import inspect
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
    args = parser.parse_args(argv)
    try:
        if args.command == "inspect":
            model, name = resolve_model(args.model)
            print(inspect(model, name=name).table())
    except CascaderError as e:
        print(f"cascader: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
