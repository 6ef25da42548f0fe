"""The lowering rules, by TFLite operator: `LOWERING_RULES[opcode]` turns one operator into NPU
operations.

The core (`lower`) looks up each operator of a segment here; an operator with no entry has no
NPU lowering. RESHAPE, SQUEEZE and EXPAND_DIMS (`ALIAS_OPS`) need none: the core makes their
output an alias of their input's buffer. Every rule is `rule(context, operator)`
(`lowering_context.LoweringRule`): it reads the operator through its `OperatorView`, appends
operations through the `LoweringContext`, and raises UnsupportedError for what it cannot
express (the compiler then sends that operator to the CPU). Supporting an operator is a rule
module and a line here; `support.NPU_OPERATORS` follows from this table.

How the families map (each module's docstring has the details):

- CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED (`lower_convolution`), TRANSPOSE_CONV
  (`lower_transpose_conv`): one convolution.
- UNIDIRECTIONAL_SEQUENCE_LSTM (`lower_lstm`): unrolled over time, gates as fully connected
  layers, elementwise operations and the NPU's SIGMOID/TANH, its state in the persistent arena.
- BATCH_MATMUL (`lower_batch_matmul`): elementwise MULs and channel sums (both operands are
  run-time maps, which the convolutions cannot take as weights).
- AVERAGE_POOL_2D, MAX_POOL_2D (`lower_pool`): one pooling operation.
- ADD, SUB, MUL (`lower_elementwise`); MINIMUM, MAXIMUM, ABS (`lower_minmax`): one elementwise
  operation. SQUARED_DIFFERENCE (`lower_squared_difference`) takes several, NEG
  (`lower_negate`) one or two (a table for 8 bits).
- QUANTIZE and the RELUs (`lower_requantize`), CONCATENATION (`lower_concatenation`), PAD and
  PADV2 (`lower_pad`), MIRROR_PAD (`lower_mirror_pad`), TILE (`lower_tile`), REVERSE_V2
  (`lower_reverse`): copies, as 1x1 average pools.
- Slices, TRANSPOSE, PACK (`lower_movement`): views where the readers allow, raw copies otherwise.
- MEAN, SUM, REDUCE_MAX, REDUCE_MIN (`lower_reduce`): pools over a re-viewed map, one or a few.
- Ethos-U85 only: SELECT, SELECT_V2 (`lower_u85_select`), CAST (`lower_u85_cast`), DIV
  (`lower_u85_div`), REDUCE_ALL and REDUCE_ANY (`lower_reduce`).
- GATHER, SCATTER_ND (`lower_indexed_dma`): the Ethos-U85's indexed DMA (U85 only).
- Tables (`lower_lut`), SOFTMAX, PRELU and int16 LEAKY_RELU, the resizes, ARG_MAX: a module each.
- The Ethos-U85's comparisons and LOGICAL_AND/OR/NOT (`lower_u85_compare`): one operation each.
- VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE (`lower_resource_variables`, the Ethos-U85's):
  the variable a buffer at one arena offset, reads and assignments copies or aliases of it.
"""

from __future__ import annotations

from collections.abc import Mapping

from .lower_arg_max import lower_arg_max
from .lower_batch_matmul import lower_batch_matmul
from .lower_concatenation import lower_concatenation
from .lower_convolution import lower_convolution
from .lower_elementwise import lower_elementwise
from .lower_indexed_dma import lower_gather, lower_scatter_nd
from .lower_lstm import lower_lstm
from .lower_lut import lower_lut
from .lower_minmax import lower_abs, lower_min_max
from .lower_mirror_pad import lower_mirror_pad
from .lower_movement import lower_pack, lower_slice, lower_transpose
from .lower_negate import lower_negate
from .lower_pad import lower_pad
from .lower_pool import lower_pool
from .lower_prelu import lower_leaky_relu, lower_prelu
from .lower_reduce import lower_reduce, lower_reduce_all_any, lower_reduce_min_max
from .lower_resource_variables import lower_assign_variable, lower_read_variable, lower_var_handle
from .lower_requantize import lower_clamp, lower_quantize
from .lower_resize import lower_resize_bilinear, lower_resize_nearest
from .lower_reverse import lower_reverse
from .lower_softmax import lower_softmax
from .lower_squared_difference import lower_squared_difference
from .lower_tile import lower_tile
from .lower_transpose_conv import lower_transpose_conv
from .lower_u85_cast import lower_cast
from .lower_u85_div import lower_div
from .lower_u85_select import lower_select
from .lower_u85_compare import COMPARISON, LOGICAL, lower_u85_comparison, lower_u85_logical
from .lowering_context import LoweringRule

LOWERING_RULES: Mapping[str, LoweringRule] = {
    # Weighted operators.
    "CONV_2D": lower_convolution,
    "DEPTHWISE_CONV_2D": lower_convolution,
    "FULLY_CONNECTED": lower_convolution,
    "TRANSPOSE_CONV": lower_transpose_conv,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": lower_lstm,
    "BATCH_MATMUL": lower_batch_matmul,
    # Pools and reductions.
    "AVERAGE_POOL_2D": lower_pool,
    "MAX_POOL_2D": lower_pool,
    "MEAN": lower_reduce,
    "SUM": lower_reduce,
    "REDUCE_MAX": lower_reduce_min_max,
    "REDUCE_MIN": lower_reduce_min_max,
    "ARG_MAX": lower_arg_max,
    # Elementwise.
    "ADD": lower_elementwise,
    "SUB": lower_elementwise,
    "MUL": lower_elementwise,
    "MINIMUM": lower_min_max,
    "MAXIMUM": lower_min_max,
    "ABS": lower_abs,
    "SQUARED_DIFFERENCE": lower_squared_difference,
    "NEG": lower_negate,
    # Requantizing copies.
    "QUANTIZE": lower_quantize,
    "RELU": lower_clamp,
    "RELU6": lower_clamp,
    "RELU_N1_TO_1": lower_clamp,
    "RELU_0_TO_1": lower_clamp,
    # Activations: tables, the NPU's own functions, several operations.
    "LOGISTIC": lower_lut,
    "TANH": lower_lut,
    "EXP": lower_lut,
    "HARD_SWISH": lower_lut,
    "RSQRT": lower_lut,
    "ELU": lower_lut,
    "GELU": lower_lut,
    "LOG": lower_lut,
    "LEAKY_RELU": lower_leaky_relu,
    "PRELU": lower_prelu,
    "SOFTMAX": lower_softmax,
    # Data movement.
    "CONCATENATION": lower_concatenation,
    "PAD": lower_pad,
    "PADV2": lower_pad,
    "MIRROR_PAD": lower_mirror_pad,
    "STRIDED_SLICE": lower_slice,
    "SLICE": lower_slice,
    "SPLIT": lower_slice,
    "SPLIT_V": lower_slice,
    "UNPACK": lower_slice,
    "TRANSPOSE": lower_transpose,
    "PACK": lower_pack,
    "TILE": lower_tile,
    "REVERSE_V2": lower_reverse,
    "RESIZE_NEAREST_NEIGHBOR": lower_resize_nearest,
    "RESIZE_BILINEAR": lower_resize_bilinear,
    # Ethos-U85 only (its bitwise, comparison and DIV modes, MIN pools).
    "SELECT": lower_select,
    "SELECT_V2": lower_select,
    "CAST": lower_cast,
    "DIV": lower_div,
    "REDUCE_ALL": lower_reduce_all_any,
    "REDUCE_ANY": lower_reduce_all_any,
    # The Ethos-U85's comparisons and logical operators (support.U85_ONLY_OPERATORS).
    **{opcode: lower_u85_comparison for opcode in COMPARISON},
    **{opcode: lower_u85_logical for opcode in LOGICAL},
    # The Ethos-U85's indexed DMA (support.U85_ONLY_OPERATORS: the CPU's on the U55/U65).
    "GATHER": lower_gather,
    "SCATTER_ND": lower_scatter_nd,
    # Resource variables (the Ethos-U85's): a buffer of the arena, copies in and out.
    "VAR_HANDLE": lower_var_handle,
    "READ_VARIABLE": lower_read_variable,
    "ASSIGN_VARIABLE": lower_assign_variable,
}
