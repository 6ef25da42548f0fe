"""Functional simulator of Ethos-U binaries (Vela's or ours): decode and bit-exact execution."""

from .binary import DecodedStream, NpuCall, npu_calls
from .simulate import Session, decode, simulate
from .estimator import Estimate, OperationCycles, estimate
from .in_place import InPlaceHazard, TraversalBlock, block_traversal, in_place_hazard, min_in_place_shift

__all__ = ["DecodedStream", "Estimate", "InPlaceHazard", "NpuCall", "OperationCycles", "Session", "TraversalBlock",
           "block_traversal", "decode", "estimate", "in_place_hazard", "min_in_place_shift", "npu_calls", "simulate"]
