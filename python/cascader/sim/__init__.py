"""Functional simulator of Ethos-U binaries (Vela's or ours): decode and bit-exact execution."""

from .binary import NpuCall, npu_calls
from .simulate import decode, simulate

__all__ = ["NpuCall", "decode", "npu_calls", "simulate"]
