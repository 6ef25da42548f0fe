"""Functional simulator of Ethos-U binaries (Vela's or ours): decode and bit-exact execution."""

from .binary import DecodedStream, NpuCall, npu_calls
from .simulate import decode, simulate
from .estimator import Estimate, OperationCycles, estimate

__all__ = ["DecodedStream", "Estimate", "NpuCall", "OperationCycles", "decode", "estimate", "npu_calls", "simulate"]
