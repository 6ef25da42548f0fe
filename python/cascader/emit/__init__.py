"""The emitter: weight and scale streams, register command streams (the forward path's last
stage before packaging)."""

from .commands import encode_command_stream
from .weights import EncodedWeights, StreamRanges, encode_weights

__all__ = ["EncodedWeights", "StreamRanges", "encode_command_stream", "encode_weights"]
