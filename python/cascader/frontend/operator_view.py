"""A TFLite operator seen the way the NPU sees it: IFM, IFM2, weights, bias, OFM, kernel."""

from __future__ import annotations

from dataclasses import dataclass

from ..tflite.model import Operator, SubGraph, Tensor

# Operators whose second input is a constant weight tensor and third an optional bias.
WEIGHTED_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"})
POOL_OPS = frozenset({"AVERAGE_POOL_2D", "MAX_POOL_2D"})
BINARY_ELEMENTWISE_OPS = frozenset({"ADD", "SUB", "MUL", "MINIMUM", "MAXIMUM", "SQUARED_DIFFERENCE",
                                    # the Ethos-U85's
                                    "EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL",
                                    "LOGICAL_AND", "LOGICAL_OR"})
MULTI_OUTPUT_OPS = frozenset({"SPLIT", "SPLIT_V", "UNPACK"})
ALIAS_OPS = frozenset({"RESHAPE", "SQUEEZE", "EXPAND_DIMS"})  # operators that only rename their input's bytes


@dataclass(frozen=True)
class Kernel:
    height: int
    width: int
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1

    @property
    def dilated_height(self) -> int:
        return (self.height - 1) * self.dilation_h + 1

    @property
    def dilated_width(self) -> int:
        return (self.width - 1) * self.dilation_w + 1


class _once:
    """`functools.cached_property` without its lock, which Python 3.11 takes at each first read:
    a partition and a lowering make some four views per operator, and the support rules and the
    lowering read the operands of each several times."""

    def __init__(self, compute) -> None:
        self.compute, self.name, self.__doc__ = compute, compute.__name__, compute.__doc__

    def __get__(self, view, owner=None):
        if view is None:
            return self
        value = view.__dict__[self.name] = self.compute(view)
        return value


class OperatorView:
    """Read-only accessors over one operator of a subgraph, in NPU terms."""

    def __init__(self, graph: SubGraph, index: int) -> None:
        self.graph = graph
        self.index = index
        self.op: Operator = graph.operators[index]
        # An attribute, not a property: the support rules and the lowering ask for it some
        # fifty times per operator.
        self.opcode: str = self.op.opcode

    @property
    def options(self) -> dict:
        return self.op.options

    def _tensor(self, i: int) -> Tensor | None:
        return self.graph.tensors[i] if i >= 0 else None

    @_once
    def inputs(self) -> list[Tensor | None]:
        return [self._tensor(i) for i in self.op.inputs]

    @_once
    def outputs(self) -> list[Tensor]:
        return [self.graph.tensors[i] for i in self.op.outputs]

    @_once
    def ifm(self) -> Tensor | None:
        if self.opcode == "SPLIT":  # inputs: axis, data
            return self.inputs[1] if len(self.inputs) > 1 else None
        if self.opcode == "TRANSPOSE_CONV":  # inputs: output shape, weights, data, bias
            return self.inputs[2] if len(self.inputs) > 2 else None
        return self.inputs[0] if self.inputs else None

    @_once
    def ifm2(self) -> Tensor | None:
        if (self.opcode in BINARY_ELEMENTWISE_OPS or self.opcode == "BATCH_MATMUL") and len(self.inputs) > 1:
            return self.inputs[1]
        return None

    @_once
    def weights(self) -> Tensor | None:
        if self.opcode == "TRANSPOSE_CONV":
            return self.inputs[1] if len(self.inputs) > 1 else None
        if self.opcode in WEIGHTED_OPS and len(self.inputs) > 1:
            return self.inputs[1]
        return None

    @_once
    def bias(self) -> Tensor | None:
        if self.opcode == "TRANSPOSE_CONV":
            return self.inputs[3] if len(self.inputs) > 3 else None
        if self.opcode in WEIGHTED_OPS and len(self.inputs) > 2:
            return self.inputs[2]
        return None

    @_once
    def ofm(self) -> Tensor | None:
        return self.outputs[0] if self.outputs else None

    @_once
    def activation_tensors(self) -> list[Tensor]:
        """The feature maps the NPU reads and writes (constants and weights excluded). Made once,
        as `inputs` and `outputs` are: a dozen support rules ask for them."""
        candidates = [self.ifm, self.ifm2, self.ofm]
        if self.opcode in ("CONCATENATION", "PACK"):
            candidates = list(self.inputs) + [self.ofm]
        elif self.opcode in MULTI_OUTPUT_OPS:
            candidates = [self.ifm, *self.outputs]
        return [t for t in candidates if t is not None and not t.is_constant]

    @_once
    def kernel(self) -> Kernel | None:
        o = self.options
        if self.opcode in POOL_OPS:
            return Kernel(o["filter_height"], o["filter_width"], o["stride_h"], o["stride_w"])
        w = self.weights
        if w is None or len(w.shape) != 4:
            return None
        # Conv weights are [O, H, W, I] and depthwise weights [1, H, W, C]: H and W agree.
        return Kernel(
            w.shape[1],
            w.shape[2],
            o.get("stride_h", 1),
            o.get("stride_w", 1),
            o.get("dilation_h_factor", 1),
            o.get("dilation_w_factor", 1),
        )

    @property
    def fused_activation(self) -> str:
        return self.options.get("fused_activation_function", "NONE")

    def __repr__(self) -> str:
        return f"OperatorView({self.index}: {self.opcode})"
