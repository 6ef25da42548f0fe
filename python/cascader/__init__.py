"""cascader: an open compiler for Arm Ethos-U NPUs with a cascading scheduler.

The public names are imported on first use (PEP 562): `cascader compile` then loads only the
modules a compile needs, which is most of what separates its process time from Vela's.
"""

from importlib import import_module
from typing import Any

from .errors import (BinaryError, BudgetError, CascaderError, InfeasibleError, InvalidArgumentError, ModelError,
                     ReferenceCrashed, UnsupportedError)

# name -> module that defines it
_LAZY = {
    "Accelerator": ".arch", "MemoryMode": ".arch", "SystemConfig": ".arch",
    "Inspection": ".inspection", "inspect": ".inspection",
    "allocate": ".memory", "layout": ".memory", "live_ranges": ".memory", "lower_bound": ".memory",
    "OpCost": ".perf", "block_configs": ".perf", "estimate_op": ".perf",
    "Estimate": ".sim", "Session": ".sim", "estimate": ".sim", "simulate": ".sim",
    "Model": ".tflite", "Operator": ".tflite", "Quantization": ".tflite", "SubGraph": ".tflite",
    "Tensor": ".tflite", "load_model": ".tflite", "save_model": ".tflite",
    "CompiledModel": ".compiled", "Summary": ".summary", "Layer": ".layers", "Records": ".records",
    "check": ".checking", "CheckResult": ".checking", "sweep": ".sweeping", "SweepRow": ".sweeping",
    "compile": ".compiler",
    "plan": ".compiler", "CompiledPoint": ".compiler", "Frontier": ".planner", "PlanOptions": ".planner", "PlanPoint": ".planner",
}
_SUBMODULES = {"zoo", "sim", "emit", "frontend", "tflite", "memory", "perf", "arch", "schedule", "compiler",
               "compiled", "reference", "bench", "_core", "errors", "inspection", "plot", "cli", "graph", "vela",
               "planner", "summary", "layers", "records", "checking", "stripes", "sweeping", "progress"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
    elif name in _SUBMODULES:
        value = import_module("." + name, __name__)
    else:
        raise AttributeError(f"module 'cascader' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)


__version__ = "0.1.0"

__all__ = [
    "CompiledModel",
    "InfeasibleError",
    "ReferenceCrashed",
    "Summary",
    "Layer",
    "Records",
    "check",
    "CheckResult",
    "sweep",
    "SweepRow",
    "UnsupportedError",
    "compile",
    "plan",
    "Frontier",
    "PlanOptions",
    "PlanPoint",
    "CompiledPoint",
    "Accelerator",
    "MemoryMode",
    "OpCost",
    "SystemConfig",
    "block_configs",
    "estimate_op",
    "BinaryError",
    "BudgetError",
    "CascaderError",
    "Inspection",
    "InvalidArgumentError",
    "Model",
    "ModelError",
    "Operator",
    "Quantization",
    "SubGraph",
    "Tensor",
    "allocate",
    "inspect",
    "layout",
    "live_ranges",
    "lower_bound",
    "load_model",
    "save_model",
    "simulate",
    "Session",
    "Estimate",
    "estimate",
]
