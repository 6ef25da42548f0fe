"""The route of a model through `cascader.compile`: which stage runs when, and how often the
work climbs back up to a higher layer.

    python -m cascader.bench.route [zoo:NAME | model.tflite] [--sram SIZE] [--accelerator NAME]

The layers, from the top: the compile policy (`compiler.py`), then the stages in pipeline
order, each its own modules. Everything else is the shared foundation below them (the schedule
value and its per-operation primitives in `schedule.py`, the lowered-operation values, the
cycle model, the weight codec, the allocator, the C++ core), which any stage may call: it is
not a stay.

A stay is a run of execution inside one layer, entered by calling a top-level function of that
layer's modules (methods of value types are the foundation's). A return to a higher layer is a
step from a stay to the policy or to an earlier stage.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

POLICY = "policy"
STAGES = ("lower", "schedule", "plan", "allocate", "emit", "package")
# cascader's own modules (relative paths) -> layer; the rest is foundation.
LAYERS = {
    "compiler.py": POLICY,
    "lowering.py": "lower", "frontend/partition.py": "lower", "frontend/support.py": "lower",
    "frontend/lower.py": "lower", "frontend/lowering_rules.py": "lower",
    "scheduling.py": "schedule", "brick_layout.py": "schedule",
    "planner.py": "plan", "stripes.py": "plan",
    "allocation.py": "allocate",
    "emit/binary.py": "emit", "emit/program.py": "emit", "emit/commands.py": "emit",
    "packaging.py": "package", "tflite/ethos_u.py": "package",
}
_RANK = {POLICY: 0, **{s: k + 1 for k, s in enumerate(STAGES)}}


def _layer(path: str, root: str) -> str | None:
    if not path.startswith(root):
        return None
    rel = path[len(root):]
    if rel.startswith("frontend/lower_"):
        return "lower"  # the lowering rules
    return LAYERS.get(rel)


def route(run: Callable[[], object]) -> list[str]:
    """The layers `run()` stays in, in order (consecutive stays in one layer merged), from the
    first call into the policy."""
    import cascader

    root = os.path.dirname(cascader.__file__) + os.sep
    stays: list[str] = []
    stack: list[str] = []

    def profile(frame, event, arg):  # noqa: ARG001 (sys.setprofile's signature)
        code = frame.f_code
        if event not in ("call", "return") or "." in code.co_qualname or code.co_qualname.startswith("<"):
            return
        layer = _layer(code.co_filename, root)
        if layer is None:
            return
        if event == "call":
            if not stack and layer != POLICY:
                return  # not yet inside the compile
            stack.append(layer)
        elif stack:
            stack.pop()
        if stack and (not stays or stays[-1] != stack[-1]):
            stays.append(stack[-1])

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return stays


def returns_up(stays: list[str]) -> int:
    """Steps from a stay to a higher layer: to the policy, or to an earlier stage."""
    return sum(1 for a, b in zip(stays, stays[1:]) if _RANK[b] < _RANK[a])


def in_order(stays: list[str]) -> bool:
    """Each stage visited in one stay at most, in pipeline order (the policy between them)."""
    stages = [s for s in stays if s != POLICY]
    return len(stages) == len(set(stages)) and stages == sorted(stages, key=_RANK.get)


def main(argv: list[str] | None = None) -> int:
    import cascader
    from cascader.cli import resolve_model

    parser = argparse.ArgumentParser(prog="python -m cascader.bench.route", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="zoo:mobilenet_v2")
    parser.add_argument("--sram", default=None)
    parser.add_argument("--accelerator", default="ethos-u55-128")
    args = parser.parse_args(argv)
    model, _ = resolve_model(args.model)
    stays = route(lambda: cascader.compile(model, sram=args.sram, accelerator=args.accelerator))
    print(" -> ".join(stays))
    print(f"{len(stays)} stays, {returns_up(stays)} returns to a higher layer, "
          f"stages {'once each, in order' if in_order(stays) else 'NOT once each in order'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
