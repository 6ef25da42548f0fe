"""cascader: an open compiler for Arm Ethos-U NPUs with a cascading scheduler."""

from . import _core
from .arch import Accelerator, MemoryMode, SystemConfig
from .errors import (BinaryError, BudgetError, CascaderError, InfeasibleError, InvalidArgumentError, ModelError,
                     UnsupportedError)
from .inspection import Inspection, inspect
from .memory import allocate, layout, live_ranges, lower_bound
from .perf import OpCost, block_configs, estimate_op
from .sim import Estimate, Session, estimate, simulate
from .tflite import Model, Operator, Quantization, SubGraph, Tensor, load_model, save_model
from .compiled import CompiledModel, Summary
from .compiler import compile
from . import zoo

__version__ = "0.1.0"

__all__ = [
    "CompiledModel",
    "InfeasibleError",
    "Summary",
    "UnsupportedError",
    "compile",
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
