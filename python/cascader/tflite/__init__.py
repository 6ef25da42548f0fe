"""TFLite flatbuffer I/O as plain values: `load_model`, `save_model` and the `Model` records;
the Ethos-U packager (`ethos_u.package`)."""

from . import lazy_schema

lazy_schema.install()  # before anything here imports `tflite`: see lazy_schema

from .model import Model, Operator, Quantization, SignatureDef, SubGraph, Tensor
from .reader import ModelLike, as_model, load_model
from .writer import save_model
from .ethos_u import ArenaSizes, NpuSubgraph

__all__ = ["ArenaSizes", "Model", "NpuSubgraph", "Operator", "Quantization", "SignatureDef", "SubGraph", "Tensor", "ModelLike", "as_model", "load_model", "save_model"]
