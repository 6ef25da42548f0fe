"""Functional simulator of Ethos-U binaries (Vela's or ours): decode and bit-exact execution."""

from .binary import DecodedStream, NpuCall, npu_calls
from .simulate import Session, decode, simulate
from .estimator import Estimate, OperationCycles, estimate

__all__ = ["DecodedStream", "Estimate", "NpuCall", "OperationCycles", "Session", "decode", "estimate", "npu_calls", "simulate"]
