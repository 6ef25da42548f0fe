"""Functional simulator of Ethos-U binaries (Vela's or ours): decode and bit-exact execution."""

from .binary import DecodedStream, NpuCall, npu_calls
from .simulate import decode, simulate

__all__ = ["DecodedStream", "NpuCall", "decode", "npu_calls", "simulate"]
