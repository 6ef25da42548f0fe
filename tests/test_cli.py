"""The `cascader` command: Vela's option names, the reports it writes, simulate and estimate."""

import csv
from pathlib import Path

import pytest

import cascader
from cascader import zoo
from cascader.cli import main

INI = """
[System_Config.My_Board]
core_clock=250e6
axi0_port=Sram
axi1_port=OffChipFlash
Sram_clock_scale=1.0
Sram_burst_length=32
Sram_read_latency=32
Sram_write_latency=32
OffChipFlash_clock_scale=0.25
OffChipFlash_burst_length=128
OffChipFlash_read_latency=64
OffChipFlash_write_latency=64

[Memory_Mode.Small_Shared]
const_mem_area=Axi1
arena_mem_area=Axi0
cache_mem_area=Axi0
arena_cache_size=70000

[Memory_Mode.Odd]
const_mem_area=Axi0
arena_mem_area=Axi1
cache_mem_area=Axi1
"""


@pytest.fixture()
def kws(tmp_path):
    path = tmp_path / "kws.tflite"
    cascader.save_model(zoo.ds_cnn_kws(), path)
    return path


def test_demo_writes_binary_and_reports(tmp_path, capsys):
    assert main(["compile", "--demo", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Network summary for mobilenet_v2" in out and "total cycles" in out
    assert (tmp_path / "mobilenet_v2_cascader.tflite").read_bytes() == cascader.compile(zoo.get("mobilenet_v2")).binary
    (summary,) = csv.DictReader(open(tmp_path / "mobilenet_v2_summary.csv"))
    assert int(summary["sram_bytes"]) > 0 and summary["accelerator"] == "ethos-u55-128"
    layers = list(csv.DictReader(open(tmp_path / "mobilenet_v2_layers.csv")))
    assert len(layers) >= 60 and layers[0]["target"] == "NPU" and int(layers[0]["macs"]) > 0


def test_vela_option_names_and_config_file(tmp_path, kws, capsys):
    ini = tmp_path / "board.ini"
    ini.write_text(INI)
    argv = ["compile", str(kws), "--accelerator-config", "ethos-u55-64", "--config", str(ini), "--system-config",
            "My_Board", "--memory-mode", "Small_Shared", "--output-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "My_Board (250 MHz)" in out and "budget 70,000 B" in out
    (summary,) = csv.DictReader(open(tmp_path / "kws_summary.csv"))
    assert summary["accelerator"] == "ethos-u55-64" and int(summary["sram_bytes"]) <= 70_000
    # --arena-cache-size is the same hard budget as --sram (and the smaller of it and the mode's wins).
    assert main(["compile", str(kws), "--arena-cache-size", "1024", "--output-dir", str(tmp_path)]) == 2
    assert "at least" in capsys.readouterr().err
    assert main(["compile", str(kws), "--config", str(ini), "--memory-mode", "Odd", "--output-dir", str(tmp_path)]) == 2
    assert "not a supported memory mode" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the two budget options exclude each other, as in Vela
        main(["compile", str(kws), "--sram", "1", "--arena-cache-size", "1"])


def test_compile_needs_exactly_one_model(capsys):
    assert main(["compile"]) == 2
    assert main(["compile", "zoo:resnet8", "--demo"]) == 2
    assert "--demo" in capsys.readouterr().err


def test_simulate_and_check_against(tmp_path, kws, capsys):
    assert main(["compile", str(kws), "--output-dir", str(tmp_path)]) == 0
    binary = str(tmp_path / "kws_cascader.tflite")
    capsys.readouterr()
    assert main(["simulate", binary, "--check-against", str(kws), "--seeds", "1"]) == 0
    assert "bit-exact" in capsys.readouterr().out
    other = tmp_path / "other.tflite"
    cascader.save_model(zoo.ds_cnn_kws(seed=3), other)
    assert main(["simulate", binary, "--check-against", str(other), "--seeds", "1"]) == 1
    assert main(["simulate", binary, "--save", str(tmp_path / "out.npz")]) == 0
    assert "output 0: int8" in capsys.readouterr().out and (tmp_path / "out.npz").exists()


def test_estimate_prints_the_binary_cycles(tmp_path, kws, capsys):
    assert main(["compile", str(kws), "--output-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["estimate", str(tmp_path / "kws_cascader.tflite")]) == 0
    out = capsys.readouterr().out
    total = cascader.estimate(tmp_path / "kws_cascader.tflite").total_cycles
    assert f"{total:,.0f} cycles" in out and "conv2d" in out
    assert main(["estimate", str(kws)]) == 2  # not compiled: no ethos-u operator
    assert "compile it" in capsys.readouterr().err


def test_bench_subcommand_is_the_benchmark(capsys):
    with pytest.raises(SystemExit) as done:
        main(["bench", "--help"])
    assert done.value.code == 0
    assert "usage: cascader bench" in capsys.readouterr().out


def test_output_dir_that_cannot_be_made_is_a_one_line_error(tmp_path, kws, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    unwritable = [a_file / "out"] + ([Path("/proc")] if Path("/proc/self").exists() else [])  # /proc takes no files
    for out in unwritable:
        assert main(["compile", str(kws), "--output-dir", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"cascader: error: --output-dir {out}: cannot write there") and err.count("\n") == 1


def test_budget_error_names_the_option(kws, capsys):
    """The library says "Pass sram=N"; the command line says which option to pass."""
    with pytest.raises(cascader.InfeasibleError) as infeasible:
        cascader.compile(kws, sram=1024)
    least = infeasible.value.minimum_sram
    for option in ("--sram", "--arena-cache-size"):
        assert main(["compile", str(kws), option, "1024"]) == 2
        err = capsys.readouterr().err
        assert f"{option} {least} or more" in err and "sram=" not in err


def test_sizes_in_scientific_notation(tmp_path, kws, capsys):
    for option in ("--sram", "--arena-cache-size"):
        assert main(["compile", str(kws), option, "1e6", "--output-dir", str(tmp_path)]) == 0
        assert "budget 1,000,000 B" in capsys.readouterr().out


def test_ethos_u85_with_vela_option_names(tmp_path, kws, capsys):
    """compile, simulate, estimate and inspect on the Ethos-U85, with Vela's option names and
    its U85 presets (Vela's default U85 system and a sized Dedicated_Sram)."""
    argv = ["compile", str(kws), "--accelerator-config", "ethos-u85-256", "--system-config", "Ethos_U85_SYS_DRAM_Mid",
            "--memory-mode", "Dedicated_Sram_384KB", "--optimise", "Size", "--arena-cache-size", "8KiB",
            "--output-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ethos-u85-256" in out and "Ethos_U85_SYS_DRAM_Mid" in out and "budget 8,192 B" in out
    (summary,) = csv.DictReader(open(tmp_path / "kws_summary.csv"))
    assert (summary["accelerator"], summary["system"], summary["memory_mode"]) == (
        "ethos-u85-256", "Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram")
    assert 0 < int(summary["sram_bytes"]) <= 8192
    binary = str(tmp_path / "kws_cascader.tflite")
    assert main(["simulate", binary, "--check-against", str(kws), "--seeds", "2"]) == 0
    assert "bit-exact" in capsys.readouterr().out
    assert main(["estimate", binary, "--system-config", "Ethos_U85_SYS_DRAM_High"]) == 0
    out = capsys.readouterr().out
    assert "ethos-u85-256, Ethos_U85_SYS_DRAM_High, Dedicated_Sram" in out
    total = cascader.estimate(binary, system="Ethos_U85_SYS_DRAM_High").total_cycles
    assert f"{total:,.0f} cycles" in out
    # inspect on the binary names the compiled NPU call and the accelerator it was compiled for
    assert main(["inspect", binary]) == 0
    (call,) = [line for line in capsys.readouterr().out.splitlines() if "already compiled" in line]
    assert call.split()[1] == "ethos-u" and call.endswith("operations for ethos-u85-256 (`cascader estimate` / `simulate` read it)")


def test_inspect_takes_the_accelerator(capsys, tmp_path, monkeypatch):
    """An operator whose U85 operations the emitter refuses (made to refuse a MUL here: it
    emits every operation the lowering makes today): inspect with the U85 says so, as the U85
    compile leaves it, and with the U55 it is on the NPU."""
    from test_u85_compile import _leaky_relu_int16, refuse_mul

    refuse_mul(monkeypatch)
    model = _leaky_relu_int16(-0.25)  # three operations, one of them a MUL
    path = tmp_path / "leaky16.tflite"
    cascader.save_model(model, path)
    assert main(["inspect", str(path), "--accelerator-config", "ethos-u85-256"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path} on ethos-u85-256")
    (line,) = [line for line in out.splitlines() if " LEAKY_RELU " in line]
    assert " CPU " in line and "Ethos-U85" in line
    assert cascader.compile(model, accelerator="ethos-u85-256").summary().cpu_operators == 1
    assert main(["inspect", str(path), "--accelerator", "ethos-u55-128"]) == 0
    assert all(" NPU " in line for line in capsys.readouterr().out.splitlines() if " LEAKY_RELU " in line)
    assert main(["inspect", str(path), "--accelerator", "ethos-u99-1"]) == 2
    assert "unknown accelerator" in capsys.readouterr().err
