"""A MUL of an 8-bit map by a table-lookup operator of that same map (SiLU's x * LOGISTIC(x),
x * TANH(x), ...) as one table lookup of the map.

The unary operator's output code is a function of the map's code (`lower_lut`: its table), and
the reference MUL of the two codes is a function of them (`exact_elementwise.reference_multiply`:
operand values less their zero points, the product rescaled by MultiplyByQuantizedMultiplier
with its int32 wrap, then the zero point and the fused clamp). So the MUL's output code is a
function of the map's code alone: a 256-entry table, each entry the reference's arithmetic for
that code, bit-exact. One lookup replaces the unary pass and the MUL pass, and where the map's
only reader is then the lookup, `lut_fusion` applies it in the map's producer (YOLOv8n's SiLUs:
a convolution, its LOGISTIC and its MUL become the convolution alone; Vela 5.2 chains the MUL to
the LOGISTIC on the U85, and keeps both passes on the U55/U65).

The unary operator must have no other reader, and the MUL no broadcast (both operands the map's
shape): the product is then the map's elementwise function.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..tflite.model import SubGraph
from . import fixed_point as fp
from .exact_elementwise import reference_multiply
from .lower_lut import lut_table, table_lookup
from .lowering_context import LoweringContext
from .operation_builder import EIGHT_BIT_RANGE, fused_clamp
from .operator_view import OperatorView
from .quantization import multiply_real

# The 8-bit unary operators `lower_lut` lowers as a table of the input code.
TABLE_UNARIES = ("LOGISTIC", "TANH", "EXP", "ELU", "GELU", "LOG", "NEG", "HARD_SWISH", "LEAKY_RELU", "RSQRT")


def plan_self_products(graph: SubGraph, operators: tuple[int, ...], consumers: dict[int, list[int]]) -> dict[int, int]:
    """MUL operator -> the unary operator of `TABLE_UNARIES` whose output it multiplies by that
    operator's own input, for every such pair of the segment's `operators` whose unary output
    only the MUL reads (neither a model output), all three maps of one 8-bit type and shape."""
    members = set(operators)
    producer = {t: i for i in operators for t in graph.operators[i].outputs}
    pairs: dict[int, int] = {}
    for j in operators:
        mul = graph.operators[j]
        if mul.opcode != "MUL" or len(mul.inputs) != 2 or len(set(mul.inputs)) != 2:
            continue
        for s, x in (mul.inputs, mul.inputs[::-1]):
            i = producer.get(s)
            if i is None or i not in members or graph.operators[i].opcode not in TABLE_UNARIES:
                continue
            unary = graph.operators[i]
            maps = [graph.tensors[t] for t in (x, s, mul.outputs[0])]
            if (unary.inputs[0] != x or consumers.get(s) != [j] or s in graph.outputs
                    or len({m.dtype for m in maps}) != 1 or maps[0].dtype not in EIGHT_BIT_RANGE
                    or len({tuple(m.shape) for m in maps}) != 1 or any(m.is_constant for m in maps)):
                continue
            pairs[j] = i
            break
    return pairs


def lower_self_product(lw: LoweringContext, v: OperatorView, unary: OperatorView) -> None:
    """MUL `v` of `unary`'s input by `unary`'s output (`plan_self_products`) as one lookup."""
    x_t = unary.op.inputs[0]
    x, s, out = lw.view(x_t), lw.view(unary.op.outputs[0]), lw.view(v.op.outputs[0])
    if x.scale <= 0 or s.scale <= 0 or out.scale <= 0:
        raise UnsupportedError(f"operator {v.index} (MUL): non-positive scales")
    lo, hi = EIGHT_BIT_RANGE[x.dtype]
    codes = np.arange(lo, hi + 1, dtype=np.int64)
    unary_codes = lut_table(unary.opcode, (x.scale, x.zero_point), (s.scale, s.zero_point), x.dtype, unary.options)
    # TFLite's operands in the MUL's order (its float32 multiplier is formed in that order).
    scales = (x.scale, s.scale) if v.op.inputs[0] == x_t else (s.scale, x.scale)
    multiplier, exponent = fp.quantize_multiplier(multiply_real(*scales, out.scale))
    product = reference_multiply(codes - x.zero_point, unary_codes - s.zero_point, multiplier, exponent)
    clamp = fused_clamp(v)
    table = np.clip(product + out.zero_point, max(clamp["min"], lo), min(clamp["max"], hi))
    lw.add(table_lookup(x, out, table.astype(x.dtype).tobytes(), f"{v.index}:MUL({unary.index}:{unary.opcode})",
                        (unary.index, v.index)))
