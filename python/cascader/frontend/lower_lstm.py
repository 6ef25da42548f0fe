"""UNIDIRECTIONAL_SEQUENCE_LSTM unrolled over its time steps, as Vela decomposes it, with its
state in the persistent arena.

TFLM's integer LSTM (``lstm_eval.h``'s ``LstmStep``, the kernel that judges it: int8 or int16
activations, int16 cell state) computes each time step as

- each gate: two fully connected layers, the input's and the previous output's, each rescaled
  to int16 Q3.12 (2^-12, TFLite's gate scale without layer normalisation) and saturated, summed
  (saturating), then the int16 sigmoid (input, forget, output gates) or tanh (cell gate) to
  Q0.15;
- the cell: ``c = clip(f * c >> 15 + i * g >> (30 + log2 cell_scale))``, int16, rounded by
  ``RoundingDivideByPOT``;
- the output: ``h = o * tanh(c)`` rescaled to the output state's scale, plus its zero point
  (TFLM's choice; LiteRT and Vela take the hidden intermediate's).

Each fully connected layer is an NPU convolution whose bias folds in the input's zero point
(the reference adds ``-zero_point * row_sum(W)``; the NPU subtracts the IFM zero point), each
gate sum an int16 ADD whose fused activation is the NPU's own SIGMOID or TANH (Q3.12 scaled by
3 to their input format), clamped to [11, 32757] after a sigmoid, the range the reference's
sigmoid reaches (Vela's bounds). The products are int16 MULs with TFL rounding, which rounds
twice (``SaturatingRoundingDoublingHighMul``, then ``RoundingDivideByPOT``) as the reference
build does.

16x8 (int16 activations, int8 weights, int64 biases) is the same decomposition with int16
fully connected inputs and an int16 output. Its fully connected layers accumulate in int64,
which the reference rescales with the reduced 16-bit multiplier, rounded once half up (LiteRT
refuses this LSTM; TFLM runs it). The 32-bit multiplier was a step off on 60 of 5,760 gate
values of calibrated LSTMs (up to 5 steps in the output); small weights hide it.

The state outlives an inference, as TFLite's variable tensors do: the cell state and the
output state live in the persistent arena (`LoweringContext.state`), which TFLM zero-fills once
when it allocates it. TFLite resets an int8 variable to its zero point, not to 0: an int8
output state with a non-zero zero point is therefore kept as int16 ``h - zero_point`` (0 is
the reset value), copied in before the first step and out after the last (exact copies). The
steps pass the output state through the OFM: step t reads step t-1's slice of it.

A keyword spotter keeps only the last step (a STRIDED_SLICE of it, the LSTM's one reader): the
slice is folded in (`_last_step_slice`). The steps before the last then write two scratch
vectors in turn (step t reads step t-1's), the last one writes the slice's output, and the
whole sequence (49 x 64 bytes in zoo lstm_kws, its least SRAM's peak) is never stored.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from ..tflite.model import Tensor
from .lower_movement import slice_boxes
from .lower_lut import builtin_scale
from .lowered import (SIGMOID_FUNCTION, TANH_FUNCTION, FeatureMapView, LoweredOperation, WeightVolume,
                      dense_strides, full_range, kernel_record)
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder, pool_copy
from .operator_view import OperatorView
from .quantization import convolution_scales, quantise_scale

# The operator's inputs (TFLite's lstm_shared.h).
INPUT = 0
INPUT_WEIGHTS = (1, 2, 3, 4)  # to the input, forget, cell and output gates
RECURRENT_WEIGHTS = (5, 6, 7, 8)
PEEPHOLE_WEIGHTS = (9, 10, 11)
GATE_BIASES = (12, 13, 14, 15)
PROJECTION = (16, 17)
OUTPUT_STATE, CELL_STATE = 18, 19
LAYER_NORM = (20, 21, 22, 23)
INPUT_COUNT = 24
INTERMEDIATE_COUNT = 5  # the gates' four, then the hidden state's (its scale and zero point)

GATE_SCALE = 2.0**-12  # Q3.12: the gates before their activation
Q15_SCALE = 2.0**-15  # the gates after it, and tanh of the cell
SIGMOID_RANGE = (11, 32757)  # what the reference's int16 sigmoid reaches
GATES = ("input", "forget", "cell", "output")


def lstm_variant(v: OperatorView) -> str | None:
    """Why the operator is not the LSTM the NPU decomposition takes, or None. Vela's own
    constraints: 24 inputs and 5 intermediates, every gate's weights (no CIFG), no peephole,
    projection or layer normalisation, 2-D recurrent weights, variable state tensors, a 3-D
    input and output."""
    op = v.op
    present = lambda i: i < len(op.inputs) and op.inputs[i] >= 0  # noqa: E731
    if len(op.inputs) != INPUT_COUNT:
        return f"{len(op.inputs)} inputs (the full LSTM has {INPUT_COUNT})"
    if len(op.intermediates) != INTERMEDIATE_COUNT:
        return f"{len(op.intermediates)} intermediate tensors (the integer LSTM has {INTERMEDIATE_COUNT})"
    if not all(present(i) for i in INPUT_WEIGHTS + RECURRENT_WEIGHTS):
        return "a gate's weights are missing (CIFG: the input gate coupled to the forget gate)"
    if not all(present(i) and v.graph.tensors[op.inputs[i]].data is not None
               for i in INPUT_WEIGHTS + RECURRENT_WEIGHTS + GATE_BIASES):
        return "a gate's weights or bias are missing or not constant (the NPU streams them as encoded weights)"
    if any(present(i) for i in PEEPHOLE_WEIGHTS):
        return "peephole connections"
    if any(present(i) for i in PROJECTION):
        return "a projection"
    if any(present(i) for i in LAYER_NORM):
        return "layer normalisation"
    if any(len(v.graph.tensors[op.inputs[i]].shape) != 2 for i in RECURRENT_WEIGHTS):
        return "recurrent weights that are not 2-D"
    for i in (OUTPUT_STATE, CELL_STATE):
        if not present(i) or not v.graph.tensors[op.inputs[i]].is_variable:
            return "a state tensor that is not variable"
    ifm, ofm = v.ifm, v.ofm
    if ifm is None or ofm is None or len(ifm.shape) != 3 or len(ofm.shape) != 3:
        return f"input {list(ifm.shape) if ifm else None} and output {list(ofm.shape) if ofm else None}, not 3-D"
    if ifm.dtype not in ("int8", "int16") or ofm.dtype != ifm.dtype:
        return f"{ifm.dtype} -> {ofm.dtype} (the LSTM takes int8 or int16 in and out)"
    return None


def _scale(t: Tensor) -> float:
    return float(t.quantization.scale[0])


def _zero_point(t: Tensor) -> int:
    return int(t.quantization.zero_point[0])


def _cell_exponent(cell: Tensor) -> int:
    """log2 of the cell state's scale, which the integer LSTM requires to be a power of two."""
    if cell.dtype != "int16" or _zero_point(cell) != 0:
        raise UnsupportedError(f"the cell state {cell.name!r} is {cell.dtype} with zero point {_zero_point(cell)}; "
                               "the integer LSTM keeps it int16 around 0")
    mantissa, exponent = math.frexp(_scale(cell))
    if mantissa != 0.5:
        raise UnsupportedError(f"the cell state's scale {_scale(cell):g} is not a power of two")
    return exponent - 1


class _Steps:
    """Views of the operator's sequences one time step at a time: (1, batch, depth) maps."""

    def __init__(self, lw: LoweringContext, t: int, time_major: bool, zero_point: int | None = None) -> None:
        self.base = lw.view(t)
        if zero_point is not None:
            self.base = replace(self.base, zero_point=zero_point)
        self.time_major = time_major
        rows, columns, depth = self.base.shape  # (time, batch, depth) or (batch, time, depth)
        self.batch = columns if time_major else rows
        self.depth = depth

    def at(self, step: int, zero_point: int | None = None) -> FeatureMapView:
        b = self.base
        y_stride, x_stride, c_stride = b.strides
        if self.time_major:
            offset, strides = step * y_stride, (y_stride, x_stride, c_stride)
        else:
            offset, strides = step * x_stride, (y_stride * self.batch, y_stride, c_stride)
        return replace(b, shape=(1, self.batch, self.depth), offset=b.offset + offset, strides=strides,
                       zero_point=b.zero_point if zero_point is None else zero_point)


def _last_step_slice(lw: LoweringContext, v: OperatorView, steps: int, time_major: bool) -> tuple[int, int] | None:
    """(operator, output) of the STRIDED_SLICE or SLICE that is the one reader of the LSTM's
    output and takes its last time step whole (every batch row and unit, quantized alike), when
    the sequence is no model output and the slice is lowered in this segment as a copy; else
    None."""
    out = v.op.outputs[0]
    readers = lw.consumers.get(out, [])
    if out in lw.graph.outputs or len(readers) != 1 or readers[0] not in lw.members or readers[0] in lw.skipped:
        return None
    reader = OperatorView(lw.graph, readers[0])
    if reader.opcode not in ("STRIDED_SLICE", "SLICE") or reader.op.inputs[0] != out:
        return None
    try:
        ((sliced, box),) = slice_boxes(reader)
    except UnsupportedError:
        return None
    time_axis = 0 if time_major else 1  # of the output's (rows, columns, units)
    last, extent = [0, 0, 0], list(lw.view(out).shape)
    last[time_axis], extent[time_axis] = steps - 1, 1
    quantization = lambda t: (_scale(t), _zero_point(t))  # noqa: E731
    if (box.origin, box.extent, box.step) != (tuple(last), tuple(extent), (1, 1, 1)) \
            or quantization(lw.graph.tensors[sliced]) != quantization(v.ofm):
        return None
    return readers[0], sliced


def _gate_scale(ifm_scale: float, weight_scale: float, wide: bool) -> tuple[int, int]:
    """A gate's fully connected rescale, input x weight to Q3.12, as TFLM's LSTM forms it: the
    product of the scales in double (a float32 product moves the 32-bit multiplier's low bits,
    and the reduced one where those sit on a half: 30508 for 30507 in a calibrated LSTM); the
    32-bit multiplier on 8x8's int32 accumulator, the reduced 16-bit one on 16x8's int64
    accumulator (its 64-bit MultiplyByQuantizedMultiplier)."""
    multiplier, shift = (int(v) for v in convolution_scales(ifm_scale, np.array([weight_scale]), GATE_SCALE,
                                                           float32_product=False, reduced=wide)[0])
    if shift < 0:
        raise UnsupportedError(f"a gate rescale of {ifm_scale * weight_scale / GATE_SCALE:.6g} needs a left shift; "
                               "the NPU only shifts right")
    return multiplier, shift


def _fully_connected(lw: LoweringContext, v: OperatorView, name: str, ifm: FeatureMapView, ofm: FeatureMapView,
                     weights: Tensor, bias: np.ndarray, scale: tuple[int, int]) -> None:
    """ofm = saturate16(MultiplyByQuantizedMultiplier(W (x - zp) + bias)): the reference's
    FullyConnected into an int16 gate. Its weights are taken as stored, zero point 0, as the
    reference takes them. 16x8 accumulates in int64, whose rescale rounds once, half up
    (NATURAL); 8x8's int32 one rounds as gemmlowp does (TFL)."""
    w = np.asarray(weights.data)
    units = w.shape[0]
    wide = ifm.dtype == "int16"
    volume = WeightVolume(w.reshape(units, 1, 1, w.shape[1]), np.zeros(units, np.int64), bias.astype(np.int64),
                          np.tile(np.array(scale, np.int64), (units, 1)), False)
    registers = dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0), activation=full_range(ofm.dtype),
                     rounding="NATURAL" if wide else "TFL", global_scale=False, ofm_scale=(0, 0),
                     acc_format=1 if wide else 0)
    lw.add(LoweredOperation("conv", "fully_connected", f"{v.index}:{v.opcode}({name})", (v.index,), ifm, ofm,
                            weights=volume, registers=registers))


def lower_lstm(lw: LoweringContext, v: OperatorView) -> None:
    reason = lstm_variant(v)
    if reason is not None:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {reason}")
    tensors = lw.graph.tensors
    op = v.op
    ifm_t, ofm_t = v.ifm, v.ofm
    assert ifm_t is not None and ofm_t is not None
    state_t, cell_t = tensors[op.inputs[OUTPUT_STATE]], tensors[op.inputs[CELL_STATE]]
    cell_exponent = _cell_exponent(cell_t)
    input_weights = [tensors[op.inputs[i]] for i in INPUT_WEIGHTS]
    recurrent_weights = [tensors[op.inputs[i]] for i in RECURRENT_WEIGHTS]
    biases = [np.asarray(tensors[op.inputs[i]].data).reshape(-1) for i in GATE_BIASES]
    if any(w.dtype != "int8" for w in input_weights + recurrent_weights):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): weights must be int8")
    time_major = bool(v.options.get("time_major", False))
    state_zp = _zero_point(state_t)
    x = _Steps(lw, op.inputs[INPUT], time_major)
    units, batch = _Steps(lw, op.outputs[0], time_major).depth, x.batch
    if units != input_weights[0].shape[0] or recurrent_weights[0].shape[1] != units:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {units} output channels for "
                               f"{input_weights[0].shape[0]} cells")
    steps = x.base.shape[0] if time_major else x.base.shape[1]
    vector = (1, batch, units)
    ops = OperationBuilder(lw, v.index, v.opcode)
    # The output state: int8 with the reset value 0 where it can, else int16 h - zero point.
    store_dtype = ifm_t.dtype if state_zp == 0 else "int16"
    store = lw.state(v.index, "output_state", vector, store_dtype)
    cell = lw.state(v.index, "cell_state", vector, "int16")
    if store_dtype == ifm_t.dtype:
        previous = store
    else:
        previous = ops.scratch("output_state_in", vector, ifm_t.dtype, zero_point=state_zp)
        pool_copy(lw, v.index, f"{v.index}:{v.opcode}(restore output state)", store, previous, requantize=False)

    wide = ifm_t.dtype == "int16"
    in_scales = [_gate_scale(_scale(ifm_t), _scale(w), wide) for w in input_weights]
    rec_scales = [_gate_scale(_scale(state_t), _scale(w), wide) for w in recurrent_weights]
    gate_functions = (SIGMOID_FUNCTION, SIGMOID_FUNCTION, TANH_FUNCTION, SIGMOID_FUNCTION)
    cell_clip = float(v.options.get("cell_clip", 0.0))
    quantized_clip = int(min(max(np.float32(cell_clip) / np.float32(_scale(cell_t)), -32768.0), 32767.0))
    clip = dict(function=0, clip_range=0, min=-quantized_clip, max=quantized_clip) if quantized_clip > 0 else None
    # TFLM's CreateInterGateMulParams: to the output state's scale (not the hidden
    # intermediate's, which LiteRT and Vela take), the ratio formed in double; MUL's float32
    # ratio moved the multiplier's last bits (1611422208 for 1611422231 at 2.03e-5).
    hidden_scale = quantise_scale(Q15_SCALE * Q15_SCALE / _scale(state_t))
    zero_bias = np.zeros(units, np.int64)
    outputs = _step_outputs(lw, v, ops, steps, time_major, vector, state_zp)
    for t in range(steps):
        x_t = x.at(t)
        h_prev = previous if t == 0 else outputs[t - 1]
        gates = []
        for k, gate in enumerate(GATES):
            from_input = ops.scratch(f"{gate}_gate_input_{t}", vector, "int16")
            from_state = ops.scratch(f"{gate}_gate_state_{t}", vector, "int16")
            _fully_connected(lw, v, f"{gate} gate input {t}", x_t, from_input, input_weights[k], biases[k], in_scales[k])
            _fully_connected(lw, v, f"{gate} gate state {t}", h_prev, from_state, recurrent_weights[k], zero_bias,
                             rec_scales[k])
            activated = ops.scratch(f"{gate}_gate_{t}", vector, "int16")
            multiplier, shift = builtin_scale(GATE_SCALE, "TANH" if gate == "cell" else "LOGISTIC")
            lo, hi = SIGMOID_RANGE if gate_functions[k] == SIGMOID_FUNCTION else (-32768, 32767)
            ops.elementwise("ADD", from_input, from_state, activated, ofm_scale=(multiplier, shift),
                            activation=dict(function=gate_functions[k], clip_range=0, min=lo, max=hi))
            gates.append(activated)
        input_gate, forget_gate, cell_gate, output_gate = gates
        kept = ops.scratch(f"forget_times_cell_{t}", vector, "int16")
        added = ops.scratch(f"input_times_cell_gate_{t}", vector, "int16")
        ops.elementwise("MUL", forget_gate, cell, kept, ofm_scale=quantise_scale(Q15_SCALE))
        ops.elementwise("MUL", input_gate, cell_gate, added, ofm_scale=quantise_scale(2.0 ** -(30 + cell_exponent)))
        ops.elementwise("ADD", kept, added, cell, activation=clip)
        squashed = ops.scratch(f"tanh_cell_{t}", vector, "int16")
        ops.pool("AVERAGE", cell, squashed, ofm_scale=builtin_scale(_scale(cell_t), "TANH"),
                 activation=dict(function=TANH_FUNCTION, clip_range=0, min=-32768, max=32767))
        ops.elementwise("MUL", output_gate, squashed, outputs[t], ofm_scale=hidden_scale)
    # The last step's output is the next inference's state.
    pool_copy(lw, v.index, f"{v.index}:{v.opcode}(save output state)", outputs[-1], store, requantize=False)


def _step_outputs(lw: LoweringContext, v: OperatorView, ops: OperationBuilder, steps: int, time_major: bool,
                  vector: tuple[int, int, int], state_zp: int) -> list[FeatureMapView]:
    """Where each time step writes its output: its place in the output sequence, or with the
    last-step slice folded in (`_last_step_slice`), two scratch vectors in turn and the slice's
    output for the last step (the sequence itself is then no buffer)."""
    out = v.op.outputs[0]
    folded = _last_step_slice(lw, v, steps, time_major) if lw.buffer(out) == out else None
    if folded is None:
        y = _Steps(lw, out, time_major)
        return [y.at(t, zero_point=state_zp) for t in range(steps)]
    reader, sliced = folded
    lw.skipped.add(reader)
    lw.fused_away.add(out)
    dst = lw.view(sliced)  # the same elements in the same order as a step's (1, batch, units)
    last = replace(dst, shape=vector, strides=dense_strides(vector, dst.element_size), zero_point=state_zp)
    turns = [ops.scratch(f"output_{k}", vector, dst.dtype, zero_point=state_zp, scale=dst.scale)
             for k in range(min(steps - 1, 2))]
    return [turns[t % 2] for t in range(steps - 1)] + [last]
