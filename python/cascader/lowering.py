"""The lower stage: a TFLite model -> its partition (what runs where, and why) and the NPU
segments as register-level operations (`frontend.lower`)."""

from __future__ import annotations

from functools import partial

from .arch import Accelerator, arch_config
from .emit import ethos_u85
from .errors import InvalidArgumentError, ModelError, UnsupportedError
from .frontend.lower import lower_segment
from .frontend.lower_arg_max import bands_in_least_scratch
from .frontend.lower_movement import planes_in_least_scratch
from .frontend.lower_resize import cascades_in_least_scratch
from .frontend.lowered import LoweredSegment
from .frontend.partition import NPU, Partition, partition
from .frontend.support import Verdict
from .schedule import operation_cycles
from .tflite import Model


# Operators whose lowering trades scratch SRAM for cycles (`lower(..., least_scratch=True)`
# takes the least scratch): a model with none on the NPU (nor a bilinear resize
# `cascades_in_least_scratch`, nor an ARG_MAX `bands_in_least_scratch`, nor a transpose
# `planes_in_least_scratch`) lowers the same either way (`Partition.trades_scratch`).
SCRATCH_TRADING_OPERATORS = frozenset({"BATCH_MATMUL"})


def lower(model: Model, accelerator: str | None = None,
          least_scratch: bool = False) -> tuple[Partition, list[LoweredSegment]]:
    """Partition the model and lower every NPU segment (`least_scratch`: see `lower_segment`).

    An operator the rules accept but the lowering cannot express goes to the CPU, with the
    lowering's reason as its verdict, and the partition is redone. So does one whose lowered
    operations `accelerator`'s emitter cannot express (`_target_refusals`).
    """
    forced: dict[int, Verdict] = {}
    u85 = Accelerator.is_u85(accelerator)
    # The target resolved once: the rules weigh a few rewrites by the cycle model, two
    # placements each (`lowering_context.placement_cycles`).
    cost = None if accelerator is None else partial(operation_cycles, arch=arch_config(accelerator))
    while True:
        part = partition(model, forced, u85)
        malformed = [(i, v) for i, v in enumerate(part.verdicts) if v.rule == "operand_count"]
        if malformed:  # not a limit of the NPU: the model itself is broken
            i, v = malformed[0]
            raise ModelError(f"operator {i} is malformed: {v.reason}")
        try:
            # Transposes as planes: the least scratch, and the Ethos-U85's faster choice
            # (`lower_movement._takes_planes`).
            segments = [lower_segment(part.graph, s.operators, part.removed, least_scratch, accelerator,
                                      channel_planes=least_scratch or u85, cost=cost)
                        for s in part.segments if s.target == NPU]
        except UnsupportedError as e:
            op = getattr(e, "operator", None)
            if op is None or op in forced:
                raise
            forced[op] = Verdict(False, "lowering", str(e))
            continue
        refused = _target_refusals(segments, accelerator)
        if not refused:
            # The bilinear's int16 sums are not emitted for the Ethos-U85 yet (`_target_refusals`):
            # there its least-scratch lowering would run the resize on the CPU; and its
            # default lowering takes the transposes' planes already; its ARG_MAX is one pooling
            # (lower_u85_arg_max), with no bands to trade.
            part.trades_scratch = any(part.graph.operators[i].opcode in SCRATCH_TRADING_OPERATORS
                                      or (not u85 and (cascades_in_least_scratch(part.graph, part.graph.operators[i])
                                                       or planes_in_least_scratch(part.graph, part.graph.operators[i])
                                                       or bands_in_least_scratch(part.graph, part.graph.operators[i])))
                                      for s in part.segments if s.target == NPU for i in s.operators)
            return part, segments
        forced.update(refused)


def _target_refusals(segments: list[LoweredSegment], accelerator: str | None) -> dict[int, Verdict]:
    """The operators whose lowered operations the target's emitter refuses (the Ethos-U85's
    does not express every U55/U65 operation yet: `emit.ethos_u85.refusal`), with its reason."""
    if not Accelerator.is_u85(accelerator):
        return {}
    refused: dict[int, Verdict] = {}
    target = None
    for seg in segments:
        for op in seg.operations:
            reason = ethos_u85.refusal(op)
            if reason is None and ethos_u85.needs_block_check(op):
                # Whether an OFM block of the U85 holds it (its operand's broadcast in the
                # chaining buffer) is the block search's to say: asked here, not at scheduling.
                from .schedule import _Target  # the scheduler imports the lowering's modules

                target = target or _Target(accelerator, None, None, segments)
                try:
                    target.cost(op)
                except InvalidArgumentError as e:
                    reason = f"its 32-bit operand's broadcast has no Ethos-U85 block yet ({e})"
            if reason is not None:
                refused.update((i, Verdict(False, "target", reason)) for i in op.sources)
    return refused


def final_partition(model: Model, accelerator: str | None = None) -> Partition:
    """Where each operator runs in the binary compiled for `accelerator` (`lower`'s partition),
    for reports (`inspect`): a malformed model, which `lower` refuses, gets the rules' partition,
    whose verdicts name the malformed operators."""
    part = partition(model, u85=Accelerator.is_u85(accelerator))
    if any(v.rule == "operand_count" for v in part.verdicts):
        return part
    return lower(model, accelerator)[0]
