"""Accelerator, system-config and memory-mode descriptions, and the block-config search."""

from __future__ import annotations

import os
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader import _core
from cascader.arch import arch_config

ACCELERATORS = ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256", "ethos-u65-512"]
PRESETS = [
    "Ethos_U55_Deep_Embedded",
    "Ethos_U55_High_End_Embedded",
    "Ethos_U65_Embedded",
    "Ethos_U65_Mid_End",
    "Ethos_U65_High_End",
    "Ethos_U65_Client_Server",
]


@pytest.mark.parametrize("name", ACCELERATORS)
def test_accelerator_fields_are_consistent(name: str) -> None:
    acc = cascader.Accelerator(name)
    h, w, d = acc.ofm_ublock
    # MACs per cycle = micro-block H x W x 8-deep dot product x output channels.
    assert acc.macs_per_cycle == h * w * 8 * d
    assert acc.cores == (2 if name == "ethos-u65-512" else 1)
    assert acc.axi_data_width_bits == (128 if "u65" in name else 64)
    assert acc.shram_reserved_end_banks == (2 if acc.shram_banks > 16 else 0)
    assert len(acc.output_cycles_per_element) == 8 and len(acc.activation_cycles_per_element) == 3
    assert name in repr(acc) and "MACs/cycle" in repr(acc)


def test_accelerator_rejects_unknown_name() -> None:
    with pytest.raises(cascader.InvalidArgumentError, match="ethos-u55-128"):
        cascader.Accelerator("ethos-u99")
    u85 = {"ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048"}
    assert set(cascader.Accelerator.names(compile_targets=True)) == set(ACCELERATORS) | u85


@pytest.mark.parametrize("name", PRESETS)
def test_presets_match_velas_ini(name: str) -> None:
    """The presets equal what Vela's own vela.ini says (read with our .ini reader)."""
    vela = pytest.importorskip("ethosu.vela")
    ini = os.path.join(os.path.dirname(vela.__file__), "..", "config_files", "Arm", "vela.ini")
    ours = cascader.SystemConfig.preset(name)
    theirs = cascader.SystemConfig.from_ini(ini, name)
    assert ours.core_clock == theirs.core_clock
    assert (ours.axi0, ours.axi1) == (theirs.axi0, theirs.axi1)
    for mem in (ours.axi0, ours.axi1):
        assert ours.memories[mem] == theirs.memories[mem], mem
    assert name in repr(ours) and "MHz" in repr(ours)


def test_from_ini_inherit_and_errors(tmp_path) -> None:
    ini = tmp_path / "my.ini"
    ini.write_text(textwrap.dedent("""
        [System_Config.Base]
        core_clock=400e6
        axi0_port=Sram
        axi1_port=Dram
        Sram_clock_scale=1.0
        Sram_burst_length=32
        Sram_read_latency=16
        Sram_write_latency=16
        Dram_clock_scale=0.5
        Dram_burst_length=64
        Dram_read_latency=300
        Dram_write_latency=200
        [System_Config.Mine]
        inherit=System_Config.Base
        Dram_read_latency=100
    """))
    cfg = cascader.SystemConfig.from_ini(ini, "Mine")
    assert cfg.core_clock == 400e6 and cfg.axi1 == "Dram"
    assert cfg.memories["Dram"].read_latency == 100 and cfg.memories["Dram"].burst_length == 64
    # Usable as a target.
    cost = cascader.estimate_op("add", (1, 8, 8, 16), (1, 8, 8, 16), ifm2_shape=(1, 8, 8, 16),
                                accelerator="ethos-u65-256", system=cfg, memory_mode="Dedicated_Sram")
    assert cost.access_cycles["Dram"] > 0
    with pytest.raises(cascader.InvalidArgumentError, match="not found"):
        cascader.SystemConfig.from_ini(ini, "Nope")
    with pytest.raises(cascader.InvalidArgumentError, match="cannot read"):
        cascader.SystemConfig.from_ini(tmp_path / "missing.ini", "Mine")
    (tmp_path / "loop.ini").write_text("[System_Config.A]\ninherit=System_Config.A\n")
    with pytest.raises(cascader.InvalidArgumentError, match="inherits from itself"):
        cascader.SystemConfig.from_ini(tmp_path / "loop.ini", "A")
    (tmp_path / "bad.ini").write_text("[System_Config.B]\ncore_clock=fast\n")
    with pytest.raises(cascader.InvalidArgumentError, match="System_Config.B"):
        cascader.SystemConfig.from_ini(tmp_path / "bad.ini", "B")


def test_memory_modes_map_regions() -> None:
    C, A, F = _core.Region.Constants, _core.Region.Arena, _core.Region.FastCache
    a = arch_config("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    assert (a.region_memory(C).name, a.region_memory(A).name, a.region_memory(F).name) == ("OffChipFlash", "Sram", "Sram")
    a = arch_config("ethos-u55-128", "Ethos_U55_High_End_Embedded", cascader.MemoryMode.SRAM_ONLY)
    assert a.region_memory(C).name == "Sram"
    a = arch_config("ethos-u65-256", "Ethos_U65_Mid_End", "Dedicated_Sram_384KB")
    assert (a.region_memory(C).name, a.region_memory(A).name, a.region_memory(F).name) == ("Dram", "Dram", "Sram")
    # Bandwidth: AXI width x clock scale.
    assert a.bandwidth(_core.MemoryArea.Dram) == pytest.approx(16 * 0.46875)
    # An arena in flash is not a valid target.
    with pytest.raises(cascader.InvalidArgumentError, match="arena"):
        arch_config("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Dedicated_Sram")
    with pytest.raises(cascader.InvalidArgumentError, match="memory mode"):
        cascader.MemoryMode.parse("Everything_In_Flash")
    assert repr(cascader.MemoryMode.SHARED_SRAM) == "MemoryMode.SHARED_SRAM"


def test_user_system_config_is_validated() -> None:
    cfg = cascader.SystemConfig.preset("Ethos_U55_Deep_Embedded")
    cfg.memories["OffChipFlash"].clock_scale = 0
    with pytest.raises(cascader.InvalidArgumentError, match="clock_scale"):
        arch_config("ethos-u55-64", cfg, "Shared_Sram")


# -- block configs ---------------------------------------------------------------------------

def _query(kind, ifm, ofm, k=1, s=1, acc="ethos-u55-128", **kw):
    op = cascader.perf.npu_op(kind, ifm, ofm, kernel=k, stride=s, padding="SAME", accelerator=acc, **kw)
    return cascader.Accelerator(acc)._config, _core.block_query(op)


def _check_layout(acc, cfg) -> None:
    L = cfg.layout
    h, w, d = cfg.ofm_block.height, cfg.ofm_block.width, cfg.ofm_block.depth
    uh, uw, ud = acc.ofm_ublock.height, acc.ofm_ublock.width, acc.ofm_ublock.depth
    assert h % uh == 0 and w % uw == 0 and d % ud == 0
    assert 0 < h <= 32 and 0 < w <= 64 and 0 < d <= 128
    assert L.ifm_start == acc.shram_reserved_output_banks <= L.ifm_end <= L.acc_start <= L.lut_start <= acc.shram_banks


@settings(max_examples=40, deadline=None)
@given(
    acc=st.sampled_from(ACCELERATORS),
    kind=st.sampled_from(["conv2d", "depthwise_conv2d", "max_pool", "add"]),
    hw=st.integers(1, 40),
    c=st.integers(1, 300),
    oc=st.integers(1, 300),
    k=st.sampled_from([1, 2, 3, 5, 7, 9]),
    s=st.sampled_from([1, 2]),
)
def test_every_enumerated_block_config_fits(acc, kind, hw, c, oc, k, s) -> None:
    out = -(-hw // s)
    if kind == "add":
        k, s, out = 1, 1, hw
    ofm_c = oc if kind == "conv2d" else c
    kw = {"ifm2_shape": (1, hw, hw, c)} if kind == "add" else {}
    a, q = _query(kind, (1, hw, hw, c), (1, out, out, ofm_c), k, s, acc, **kw)
    configs = _core.enumerate_block_configs(a, q)
    assert configs, "some block config always fits int8"
    for cfg in configs:
        _check_layout(a, cfg)
        # The IFM block covers what the OFM block needs (up to the 8x8 sub-kernel).
        assert cfg.ifm_block.height >= (cfg.ofm_block.height - 1) * s + min(k, 8)
    chosen = _core.choose_block_config(a, q)
    assert any(cfg.ofm_block == chosen.ofm_block for cfg in configs)


def test_block_config_choice_matches_vela_on_known_cases() -> None:
    """Blocks Vela 5.2 chose (read from its --enable-debug-db output) for three ops."""
    for acc, kind, ifm, ofm, k, s, expect in [
        ("ethos-u55-128", "conv2d", (1, 14, 14, 256), (1, 14, 14, 256), 3, 1, ((8, 8, 16), (10, 10, 32))),
        ("ethos-u55-128", "conv2d", (1, 56, 56, 64), (1, 56, 56, 64), 3, 1, ((8, 8, 16), (10, 10, 32))),
        ("ethos-u55-128", "max_pool", (1, 28, 28, 128), (1, 14, 14, 128), 2, 2, ((9, 6, 16), (18, 12, 16))),
    ]:
        a, q = _query(kind, ifm, ofm, k, s, acc)
        cfg = _core.choose_block_config(a, q)
        got = ((cfg.ofm_block.height, cfg.ofm_block.width, cfg.ofm_block.depth),
               (cfg.ifm_block.height, cfg.ifm_block.width, cfg.ifm_block.depth))
        assert got == expect, (kind, ifm)


def test_try_block_config_rejects_illegal_blocks() -> None:
    a, q = _query("conv2d", (1, 16, 16, 32), (1, 16, 16, 32), 3)
    assert _core.try_block_config(a, q, _core.BlockShape(2, 4, 16)) is not None
    assert _core.try_block_config(a, q, _core.BlockShape(2, 3, 16)) is None  # width not a micro-block multiple
    assert _core.try_block_config(a, q, _core.BlockShape(64, 2, 16)) is None  # above the maximum height
    assert _core.try_block_config(a, q, _core.BlockShape(32, 64, 128)) is None  # does not fit SHRAM
    assert cascader.block_configs("conv2d", (1, 16, 16, 32), (1, 16, 16, 32), kernel=3, padding="SAME")


def test_lut_reserves_banks_on_small_shram() -> None:
    # U55-64 has 16 banks and no reserved top banks: a LUT takes SHRAM from the IFM/accumulators.
    a, q = _query("conv2d", (1, 16, 16, 64), (1, 16, 16, 64), 3, acc="ethos-u55-64")
    a2, q2 = _query("conv2d", (1, 16, 16, 64), (1, 16, 16, 64), 3, acc="ethos-u55-64", activation="SIGMOID",
                    lut_bytes=2048)
    plain = _core.enumerate_block_configs(a, q)
    lut = _core.enumerate_block_configs(a2, q2)
    assert len(lut) < len(plain)
    assert all(c.layout.lut_start == a.shram_banks - 2 for c in lut)


def test_dedicated_sram_on_a_system_without_dram_names_the_modes_that_work():
    """Ethos_U65_Embedded has flash on AXI1, where Dedicated_Sram (the U65's default mode) puts
    the arena: the error names the system and the modes to use instead."""
    with pytest.raises(cascader.InvalidArgumentError, match="Ethos_U65_Embedded.*Shared_Sram or Sram_Only"):
        arch_config("ethos-u65-256", "Ethos_U65_Embedded", "Dedicated_Sram")
    arch_config("ethos-u65-256", "Ethos_U65_Embedded", "Shared_Sram")
