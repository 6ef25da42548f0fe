"""Input staging (`cascader.input_staging`): on the U65's Dedicated_Sram the image a network is
handed lives in DRAM, and the first convolution reads its 3 channels in 8-byte bursts of DRAM's
128. A DMA copies it whole into the SRAM first where the cycle model says that pays; the
estimator costs that copy in full, even after a later DMA reuses its bytes; where the budget
cannot hold the copy the operation reads its input in place; Shared_Sram (U55) never stages.
"""

from __future__ import annotations

import pytest

import cascader
from cascader import _core, zoo
from cascader.arch import arch_config
from cascader.bench.simulate import validate
from cascader.emit.commands import encode_command_stream
from cascader.sim import decode
from cascader.tflite.ethos_u import driver_payload

pytest.importorskip("ai_edge_litert")

U65 = "ethos-u65-256"
IMAGE_BYTES = 96 * 96 * 3  # zoo MobileNetV1's input
# Vela 5.2's --optimise Size SRAM for zoo MobileNetV1 on U65-256 (bench.cascade's budget), and
# one below the copy's own size.
VELA_SIZE_SRAM = 74_480
BELOW_THE_COPY = 20_000
REGION_SCRATCH, REGION_SCRATCH_FAST = 1, 2


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("staging") / "mobilenet_v1.tflite"
    cascader.save_model(zoo.mobilenet_v1(), path)
    return path


def _operations(compiled) -> list[dict]:
    (stream,) = decode(compiled.model)
    return stream.operations


def _staging_copies(operations: list[dict]) -> list[dict]:
    """DMAs from the arena TFLM plans (where the CPU's maps are) into the fast memory."""
    return [o for o in operations if o["kind"] == "dma" and o["src"]["region"] == REGION_SCRATCH
            and o["dst"]["region"] == REGION_SCRATCH_FAST]


def test_u65_stages_the_image_and_the_estimator_costs_the_copy(model_path):
    compiled = cascader.compile(model_path, sram=VELA_SIZE_SRAM, accelerator=U65)
    assert compiled.sram_bytes <= VELA_SIZE_SRAM
    operations = _operations(compiled)
    copy, conv = operations[0], operations[1]
    assert _staging_copies(operations) == [copy] and copy["src"]["length"] == IMAGE_BYTES
    assert conv["kind"] == "conv" and conv["ifm"]["region"] == REGION_SCRATCH_FAST
    assert conv["ifm"]["base"][0] == copy["dst"]["address"]
    assert validate(model_path, compiled.model, (0, 1)).bit_exact
    estimate = compiled.estimate()
    rows = {o.operation: o for o in estimate.operations}
    assert rows[0].kind == "dma" and rows[0].cycles > 0
    # The schedule counted the copy as the estimator does: the two agree to the cycle.
    assert estimate.total_cycles == pytest.approx(compiled.schedule.total_cycles)
    # Read in place (the budget below the copy), the same network is much slower.
    in_place = cascader.compile(model_path, sram=BELOW_THE_COPY, accelerator=U65)
    assert in_place.sram_bytes <= BELOW_THE_COPY and not _staging_copies(_operations(in_place))
    assert validate(model_path, in_place.model, (0, 1)).bit_exact
    assert estimate.total_cycles < 0.9 * in_place.estimate().total_cycles


def test_a_copy_read_is_costed_after_a_later_dma_over_its_bytes(model_path):
    """A later DMA over the copy's bytes (a weight buffer the layout put there) does not make
    the copy moot: an operation read it."""
    compiled = cascader.compile(model_path, sram=VELA_SIZE_SRAM, accelerator=U65)
    copy, conv = _operations(compiled)[:2]
    over = dict(kind="dma", src=dict(region=0, address=0, length=IMAGE_BYTES + 16),
                dst=dict(region=REGION_SCRATCH_FAST, address=copy["dst"]["address"], length=IMAGE_BYTES + 16))
    arch = arch_config(U65)
    payload = driver_payload(encode_command_stream([copy, conv, over], U65), U65)
    rows = _core.estimate_driver_payload(payload, arch, merge_as_vela=True)["operations"]
    assert sorted(r["operation"] for r in rows) == [0, 1, 2]


def test_u55_reads_its_input_in_place(model_path):
    compiled = cascader.compile(model_path, sram=None, accelerator="ethos-u55-128")
    assert not any(o["kind"] == "dma" and o["src"]["region"] == REGION_SCRATCH for o in _operations(compiled))


def test_the_planner_and_the_least_sram_compile_do_not_stage(model_path):
    """The copy is the allocator's extra, as a weight buffer: the lean schedule the planner,
    the floors and the cascades work on reads its input in place (the planner offers the copy
    only as a part's buffering), so the least SRAM is the lean schedule's."""
    from cascader.lowering import lower
    from cascader.schedule import without_weight_buffers
    from cascader.scheduling import schedule

    acc = cascader.Accelerator(U65)
    part, segments = lower(cascader.load_model(model_path), acc.name)
    sched = schedule(part, segments, acc.name, acc.default_system, acc.default_memory_mode.value)
    assert sched.operations[0].staged_cycles > 0
    assert not any(op.staged_cycles for op in without_weight_buffers(sched).operations)
    least = cascader.compile(model_path, accelerator=U65, optimise="size")
    assert not _staging_copies(_operations(least))
