"""cascader.vela: Vela compiles for comparison, through the public helper the notebooks and
the benchmarks share."""

from __future__ import annotations

import csv
import sys

import pytest

import cascader
import cascader.bench.simulate
from cascader import vela, zoo
from cascader.errors import CascaderError, InvalidArgumentError


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache of this module's own: the first compile of each configuration runs Vela."""
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("vela-cache")
        mp.setenv("CASCADER_VELA_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def model():
    return zoo.ds_cnn_kws()


def _summary(binary: vela.VelaBinary) -> dict[str, str]:
    """Vela's summary CSV beside its binary: the figures it printed."""
    (path,) = binary.path.parent.glob("*_summary_*.csv")
    with open(path, newline="") as f:
        return next(csv.DictReader(f))


def test_compile_a_zoo_model(cache, model):
    pytest.importorskip("ethosu.vela")
    size = vela.compile(model, "ethos-u55-128", optimise="Size")
    assert size.path.is_file() and size.path.name.endswith("_vela.tflite") and cache in size.path.parents
    assert size.config == vela.VelaConfig("ethos-u55-128", "Size")
    assert size.seconds is not None and size.seconds > 0  # Vela ran
    row = _summary(size)
    assert isinstance(size.sram_bytes, int) and size.sram_bytes == float(row["sram_memory_used"]) * 1024 > 0
    assert size.cycles == float(row["cycles_total"]) > 0
    # Flash is read from the binary; in Shared_Sram it is what Vela reports for its flash.
    assert size.flash_bytes == float(row["off_chip_flash_memory_used"]) * 1024 > 0
    assert [op.opcode for op in cascader.inspect(size.model).operators] == ["ethos-u"]
    # The same yardstick as a cascader binary's: within the estimator's calibration of Vela's own.
    assert abs(size.estimate().total_cycles - size.cycles) / size.cycles < 0.10
    assert "Size" in repr(size) and f"{size.sram_bytes:,}" in repr(size)

    again = vela.compile(model, "ethos-u55-128", optimise="size")  # case as a user may write it
    assert again.seconds is None and again.path == size.path and again.sram_bytes == size.sram_bytes

    # A file gives the same compile as the model it holds, under the file's name.
    path = cache / "kws.tflite"
    cascader.save_model(model, path)
    from_file = vela.compile(path, cascader.Accelerator("ethos-u55-128"), optimise="Size")
    assert from_file.path.name == "kws_vela.tflite"
    assert (from_file.sram_bytes, from_file.cycles) == (size.sram_bytes, size.cycles)


def test_options_reach_vela(cache, model):
    pytest.importorskip("ethosu.vela")
    default = vela.compile(model, "ethos-u55-128")
    assert default.config == vela.VelaConfig("ethos-u55-128", "Performance")
    # Vela's defaults for the U55, named: the same compile, under a configuration of its own.
    named = vela.compile(model, "ethos-u55-128", system=cascader.SystemConfig.preset("Ethos_U55_High_End_Embedded"),
                         memory_mode=cascader.MemoryMode.SHARED_SRAM, sram="1MiB")
    assert named.config == vela.VelaConfig("ethos-u55-128", "Performance", 1 << 20, "Ethos_U55_High_End_Embedded",
                                           "Shared_Sram")
    assert ["--config", "Arm/vela.ini", "--system-config", "Ethos_U55_High_End_Embedded",
            "--memory-mode", "Shared_Sram"] == named.config.args()[-6:]
    assert named.path.parent != default.path.parent
    row = _summary(named)
    assert (row["system_config"], row["memory_mode"], float(row["arena_cache_size"]) * 1024) == \
        ("Ethos_U55_High_End_Embedded", "Shared_Sram", 1 << 20)  # the CSV's sizes are KiB
    assert (named.sram_bytes, named.cycles) == (default.sram_bytes, default.cycles)
    # A memory mode alone: Vela wants a system beside it, and gets its default one.
    sram_only = vela.compile(model, "ethos-u55-128", memory_mode="Sram_Only")
    row = _summary(sram_only)
    assert (row["system_config"], row["memory_mode"]) == ("Ethos_U55_High_End_Embedded", "Sram_Only")
    assert str(sram_only.estimate().memory_mode) == "Sram_Only"  # costed where Vela compiled for


def test_vela_failing_says_so(cache, model):
    pytest.importorskip("ethosu.vela")
    with pytest.raises(CascaderError, match=r"Vela failed on model \(ethos-u55-7/Performance\)"):
        vela.compile(model, "ethos-u55-7")


def test_bad_arguments_are_refused_before_vela_runs(model):
    with pytest.raises(InvalidArgumentError, match="optimise must be 'Size' or 'Performance'"):
        vela.compile(model, optimise="Speed")
    with pytest.raises(InvalidArgumentError, match="not a size"):
        vela.compile(model, sram="lots")


def test_without_vela_the_error_says_how_to_install_it(model, tmp_path, monkeypatch):
    # No `vela` on PATH nor beside the interpreter, and nothing cached to fall back on.
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("CASCADER_VELA_CACHE", str(tmp_path / "cache"))
    with pytest.raises(vela.VelaNotInstalled, match=r"Vela is not installed.*pip install ethos-u-vela==5\.2\.0") as e:
        vela.compile(model)
    assert isinstance(e.value, CascaderError)  # what the benchmarks catch around Vela
    assert e.value.__cause__ is None and e.value.__context__ is None  # one error, no chained traceback
    assert not list((tmp_path / "cache").glob("*/*_vela.tflite"))


def test_one_copy_the_benchmarks_share():
    import cascader.bench.versus

    for bench in (cascader.bench.simulate, cascader.bench.versus):
        assert bench.compile_with_vela is vela.compile_with_vela and bench.VelaConfig is vela.VelaConfig
    # The cache keys of the benchmarks' configurations are the ones they had before system and
    # memory mode became options: their cached compiles stay valid.
    assert vela.VelaConfig("ethos-u55-128", "Performance", vela.UNLIMITED_SRAM).cache_key() == \
        "VelaConfig(accelerator='ethos-u55-128', optimise='Performance', arena_cache_size=67108864)"
    assert vela.VelaConfig("ethos-u65-256", "Size").cache_key() == \
        "VelaConfig(accelerator='ethos-u65-256', optimise='Size', arena_cache_size=None)"


def test_public_names_are_documented():
    for module in (vela, cascader.graph):
        for name in module.__all__:
            assert getattr(module, name).__doc__, f"{module.__name__}.{name}"
