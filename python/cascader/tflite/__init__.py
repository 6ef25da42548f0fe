"""TFLite flatbuffer I/O as plain values: `load_model`, `save_model` and the `Model` records."""

from .model import Model, Operator, Quantization, SignatureDef, SubGraph, Tensor
from .reader import load_model
from .writer import save_model

__all__ = ["Model", "Operator", "Quantization", "SignatureDef", "SubGraph", "Tensor", "load_model", "save_model"]
