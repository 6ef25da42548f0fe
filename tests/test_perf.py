"""The NPU cycle model through its Python interface."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader.perf import OpCost


def conv(**kw) -> OpCost:
    args = dict(kernel=3, padding="SAME", weight_bytes=9 * 64 * 64, scale_bytes=640, activation="RELU",
                accelerator="ethos-u55-128", memory_mode="Sram_Only")
    args.update(kw)
    return cascader.estimate_op("conv2d", (1, 56, 56, 64), (1, 56, 56, 64), **args)


def test_matches_vela_on_a_known_conv() -> None:
    """Vela 5.2 --verbose-performance: 905204 NPU cycles, SRAM AC 422772, 115605504 MACs (U55-128,
    High_End_Embedded, Sram_Only, 34592 + 640 encoded weight + scale bytes)."""
    c = conv(weight_bytes=34592, scale_bytes=640)
    assert c.macs == 56 * 56 * 64 * 9 * 64
    assert c.access_cycles["Sram"] == 422772
    assert abs(c.npu_cycles - 905204) / 905204 < 0.01
    assert c.block_config.ofm_block == (8, 8, 16)


def test_total_is_the_max_of_compute_and_memory() -> None:
    c = conv()
    assert c.total_cycles == max([c.npu_cycles, *c.access_cycles.values()])
    assert c.bound in ("compute", "Sram")
    # Weights in slow off-chip flash make the same conv memory bound.
    slow = conv(memory_mode="Shared_Sram", system="Ethos_U55_Deep_Embedded")
    assert slow.bound == "OffChipFlash" and slow.total_cycles > c.total_cycles
    assert "<table>" in c._repr_html_()


def test_cost_grows_with_work() -> None:
    small = cascader.estimate_op("conv2d", (1, 28, 28, 32), (1, 28, 28, 32), kernel=3, padding="SAME",
                                 weight_bytes=9216, scale_bytes=320)
    big = cascader.estimate_op("conv2d", (1, 28, 28, 64), (1, 28, 28, 128), kernel=3, padding="SAME",
                               weight_bytes=73728, scale_bytes=1280)
    assert big.macs == 8 * small.macs and big.npu_cycles > 4 * small.npu_cycles
    fast = conv(accelerator="ethos-u55-256")
    slow = conv(accelerator="ethos-u55-64")
    assert fast.npu_cycles < conv().npu_cycles < slow.npu_cycles
    dual = conv(accelerator="ethos-u65-512", system="Ethos_U65_High_End")
    single = conv(accelerator="ethos-u65-256", system="Ethos_U65_High_End")
    assert dual.npu_cycles < single.npu_cycles


def test_activation_and_lut() -> None:
    relu = cascader.estimate_op("add", (1, 32, 32, 64), (1, 32, 32, 64), ifm2_shape=(1, 32, 32, 64),
                                activation="RELU", accelerator="ethos-u55-256")
    lut = cascader.estimate_op("add", (1, 32, 32, 64), (1, 32, 32, 64), ifm2_shape=(1, 32, 32, 64),
                               activation="SIGMOID", lut_bytes=256, accelerator="ethos-u55-256")
    # U55-256: ADD costs 0.75 cycles/element, a LUT activation 1.0.
    assert lut.npu_cycles > relu.npu_cycles
    assert lut.dma_cycles > 0 and relu.dma_cycles == 0


def test_weight_buffering_and_dma() -> None:
    direct = conv(memory_mode="Shared_Sram")
    buffered = conv(memory_mode="Shared_Sram", weight_buffer_memory="Sram")
    assert buffered.dma_cycles > 0 and buffered.npu_cycles == direct.npu_cycles + buffered.dma_cycles
    assert buffered.access_cycles["OffChipFlash"] < direct.access_cycles["OffChipFlash"]
    dma = cascader.estimate_op("dma", (1, 1, 1, 4096), (1, 1, 1, 4096), dma_bytes=4096,
                               ifm_memory="OffChipFlash", ofm_memory="Sram")
    # 4096 B over 8 B/cycle x 0.125 clock scale, plus 64 cycles read latency.
    assert dma.npu_cycles == dma.dma_cycles == 4096 // 1 + 64
    assert dma.read_bytes["OffChipFlash"] == 4096


def test_explicit_block_config_and_traversal() -> None:
    auto = conv()
    fixed = conv(block_config=auto.block_config.ofm_block)
    assert fixed.npu_cycles == auto.npu_cycles
    other = conv(block_config=(2, 2, 16))
    assert other.npu_cycles != auto.npu_cycles
    pk = conv(traversal="part_kernel_first")
    assert pk.block_config.part_kernel_first and not auto.block_config.part_kernel_first
    with pytest.raises(cascader.InvalidArgumentError, match="block config"):
        conv(block_config=(3, 3, 16))


def test_block_depth_fixes_the_depth_and_searches_the_rest() -> None:
    """The stripes of one operation share a weight stream encoded for one block depth: the
    model then chooses only the block's height and width, the best of that depth."""
    auto = conv()
    assert conv(block_depth=auto.block_config.ofm_block[2]).block_config == auto.block_config
    valid = cascader.block_configs("conv2d", (1, 56, 56, 64), (1, 56, 56, 64), kernel=3, accelerator="ethos-u55-128")
    for depth in sorted({c[2] for c in valid} - {auto.block_config.ofm_block[2]}):
        fixed = conv(block_depth=depth)
        assert tuple(fixed.block_config.ofm_block) in [c for c in valid if c[2] == depth]
    with pytest.raises(cascader.InvalidArgumentError, match="block_depth"):
        conv(block_depth=-16)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: cascader.estimate_op("conv2d", (1, 8, 8, 8), (1, 9, 9, 8), kernel=3), "does not follow"),
        (lambda: cascader.estimate_op("conv3d", (1, 8, 8, 8), (1, 8, 8, 8)), "unknown op kind"),
        (lambda: cascader.estimate_op("conv2d", (1, 8, 8, 8), (1, 8, 8, 8), ifm_dtype="int4"), "dtype"),
        (lambda: cascader.estimate_op("conv2d", (1, 8, 8, 8), (1, 8, 8, 8), ifm2_shape=(1, 8, 8, 8)), "ifm2"),
        (lambda: cascader.estimate_op("add", (1, 8, 8, 8), (1, 8, 8, 8), ifm2_shape=(1, 8, 3, 8)), "broadcast"),
        (lambda: cascader.estimate_op("conv2d", (1, 0, 8, 8), (1, 8, 8, 8)), "positive"),
        (lambda: cascader.estimate_op("conv2d", (1, 8, 8, 8), (1, 8, 8, 8), weight_bytes=-1), ">= 0"),
        (lambda: cascader.estimate_op("conv2d", (1, 8, 8, 8), (1, 8, 8, 8), padding="FULL"), "padding"),
        (lambda: cascader.estimate_op("depthwise_conv2d", (1, 8, 8, 8), (1, 8, 8, 16)), "depth"),
        (lambda: cascader.estimate_op("conv2d", (1, 8, 8, 8), (1, 8, 8, 8), ifm_memory="L2"), "memory"),
        (lambda: cascader.estimate_op("conv2d", (1, 8, 8, 8), (1, 8, 8, 8), activation="GELU"), "activation"),
        (lambda: cascader.estimate_op("avg_pool", (1, 8, 8, 8), (1, 8, 8, 8), ifm_upscale=3), "ifm_upscale"),
    ],
)
def test_bad_input_is_a_clear_error(call, message) -> None:
    with pytest.raises(cascader.InvalidArgumentError, match=message):
        call()


@settings(max_examples=60, deadline=None)
@given(
    acc=st.sampled_from(["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256",
                         "ethos-u65-512"]),
    kind=st.sampled_from(["conv2d", "depthwise_conv2d", "max_pool", "avg_pool", "add", "mul", "fully_connected"]),
    hw=st.integers(1, 64),
    c=st.integers(1, 512),
    oc=st.integers(1, 512),
    k=st.integers(1, 9),
    s=st.integers(1, 3),
    bits=st.sampled_from(["int8", "int16"]),
    fmt=st.sampled_from(["NHWC", "NHCWB16"]),
)
def test_estimates_are_sane_for_any_op(acc, kind, hw, c, oc, k, s, bits, fmt) -> None:
    kw = dict(accelerator=acc, ifm_dtype=bits, ofm_dtype=bits, ifm_format=fmt, ofm_format=fmt)
    if kind == "fully_connected":
        ifm, ofm = (1, 1, 1, c), (1, 1, 1, oc)
        kw.update(weight_bytes=c * oc, scale_bytes=10 * oc)
    elif kind in ("add", "mul"):
        ifm = ofm = (1, hw, hw, c)
        kw.update(ifm2_shape=(1, 1, 1, c))
    else:
        out = -(-hw // s)
        ifm, ofm = (1, hw, hw, c), (1, out, out, oc if kind == "conv2d" else c)
        kw.update(kernel=k, stride=s, padding="SAME")
        if kind != "max_pool" and kind != "avg_pool":
            kw.update(weight_bytes=k * k * c * (oc if kind == "conv2d" else 1), scale_bytes=10 * ofm[3])
    cost = cascader.estimate_op(kind, ifm, ofm, **kw)
    assert cost.npu_cycles > 0 and math.isfinite(cost.total_cycles)
    assert cost.total_cycles >= cost.npu_cycles
    assert cost.write_bytes[next(m for m, b in cost.write_bytes.items() if b)] >= math.prod(ofm) * (1 if bits == "int8" else 2)
    if kind in ("conv2d", "fully_connected"):
        assert cost.macs == math.prod(ofm) * (1 if kind == "fully_connected" else k * k) * ifm[3]


def test_double_buffered_weights_follow_velas_rule() -> None:
    """npu = max(full DMA - slack + last slice, compute + first DMA - slack) (Vela's rule)."""
    base = dict(memory_mode="Shared_Sram", weight_buffer_memory="Sram", weight_bytes=36864, scale_bytes=640)
    single = conv(**base)
    double = conv(**base, weight_first_dma_bytes=18752, weight_last_slice_depth=32)
    compute = conv(memory_mode="Sram_Only", weight_bytes=36864, scale_bytes=640).npu_cycles
    full = single.dma_cycles
    # One slice: the whole DMA, then the compute.
    assert single.npu_cycles >= compute + full - 64
    # Two slices: the second half streams under the compute.
    assert compute < double.npu_cycles < single.npu_cycles
    hidden = conv(**base, weight_first_dma_bytes=18752, weight_last_slice_depth=32, dma_slack_cycles=10**9)
    assert hidden.npu_cycles <= double.npu_cycles
    with pytest.raises(cascader.InvalidArgumentError, match=">= 0"):
        conv(**base, dma_slack_cycles=-1)


def test_buffering_slack_counts_feature_maps_in_their_home_memory():
    """Vela plans weight buffering before it moves feature maps to fast storage: the slack an op
    offers the next op's DMA is its compute with feature maps where they live by default (DRAM
    on U65 Dedicated_Sram), whatever memory they end up in."""
    kw = dict(accelerator="ethos-u65-256", kernel=(1, 1), weight_bytes=320, scale_bytes=160)
    fast = cascader.estimate_op("conv2d", (1, 1, 1, 16), (1, 1, 1, 16), ifm_memory="Sram", ofm_memory="Sram", **kw)
    home = cascader.estimate_op("conv2d", (1, 1, 1, 16), (1, 1, 1, 16), ifm_memory="Dram", ofm_memory="Dram", **kw)
    assert fast.npu_cycles < home.npu_cycles  # DRAM's latency shows in the compute
    assert fast.buffering_slack_cycles == home.buffering_slack_cycles == home.npu_cycles


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_upscaled_ifm_is_fetched_at_its_stored_size(accelerator) -> None:
    """A nearest-neighbour 2x upscale (a 1x1 pool over the upscaled IFM) walks 24 x 24 but
    fetches the stored 12 x 12: a quarter of the IFM bytes, the same OFM, and a first IFM block
    fetched at its stored size too. (Vela's nearest resize on U65 costs 19,114 cycles; reading
    the walked extent made it 33,792.)"""
    walk = (1, 24, 24, 32)
    block = (8, 8, 32)  # one block for both: the upscaled op could also take a larger one
    plain = cascader.estimate_op("avg_pool", walk, walk, kernel=1, accelerator=accelerator, block_config=block)
    upscaled = cascader.estimate_op("avg_pool", walk, walk, kernel=1, accelerator=accelerator, ifm_upscale=2,
                                    block_config=block)
    assert sum(upscaled.read_bytes.values()) == sum(plain.read_bytes.values()) / 4
    assert upscaled.write_bytes == plain.write_bytes
    assert upscaled.npu_cycles < plain.npu_cycles and upscaled.total_cycles <= plain.total_cycles


def test_upscaled_ifm_block_is_sized_in_shram_as_stored() -> None:
    """SHRAM holds an upscaled IFM block at its stored size. Vela runs a 2x2 stride-2
    transposed convolution 12x12x32 -> 24x24x16 on u55-128 with OFM blocks of 5x24x16: walked,
    that IFM block (6x25x32) needs more banks than SHRAM has beside the accumulators; stored
    (3x13x32) it fits."""
    kw = dict(kernel=(2, 2), weight_bytes=2048, scale_bytes=160, accelerator="ethos-u55-128")
    op = cascader.estimate_op("conv2d", (1, 25, 25, 32), (1, 24, 24, 16), ifm_upscale=2, block_config=(5, 24, 16),
                              padding=(0, 0, 0, 0), **kw)
    assert op.block_config.ofm_block == (5, 24, 16)
    with pytest.raises(cascader.InvalidArgumentError, match="fit SHRAM"):
        cascader.estimate_op("conv2d", (1, 25, 25, 32), (1, 24, 24, 16), block_config=(5, 24, 16),
                             padding=(0, 0, 0, 0), **kw)


@pytest.mark.parametrize("kind, bits, accelerator", [("conv2d", "int8", "ethos-u55-128"), ("add", "int16", "ethos-u65-256"),
                                                     ("depthwise_conv2d", "int8", "ethos-u55-64")])
def test_a_cost_is_the_core_records_fields(kind, bits, accelerator) -> None:
    """cost_from_core reads the record in one call (`fields`): each value must be the one its
    attribute gives."""
    from cascader import _core
    from cascader.arch import MEMORIES, arch_config
    from cascader.perf import cost_from_core, npu_op

    extra = dict(ifm2_shape=(1, 12, 10, 24)) if kind == "add" else dict(kernel=3, padding="SAME", weight_bytes=9000)
    op = npu_op(kind, (1, 12, 10, 24), (1, 12, 10, 24), ifm_dtype=bits, ofm_dtype=bits, accelerator=accelerator, **extra)
    r = _core.estimate(op, arch_config(accelerator))
    cost, b = cost_from_core(r, op), r.block_config
    assert (cost.total_cycles, cost.npu_cycles, cost.dma_cycles, cost.macs, cost.buffering_slack_cycles) == (
        r.total_cycles, r.npu_cycles, r.dma_cycles, r.macs, r.buffering_slack_cycles)
    assert (cost.access_cycles, cost.read_bytes, cost.write_bytes) == tuple(
        dict(zip(MEMORIES, v)) for v in (r.access_cycles, r.read_bytes, r.write_bytes))
    assert cost.block_config.ofm_block == (b.ofm_block.height, b.ofm_block.width, b.ofm_block.depth)
    assert cost.block_config.ifm_block == (b.ifm_block.height, b.ifm_block.width, b.ifm_block.depth)
    assert (cost.block_config.part_kernel_first, cost.block_config.accumulator) == (b.part_kernel_first, b.accumulator.name)
    assert cost.described is op
