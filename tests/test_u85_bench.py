"""The benchmark entry points on the Ethos-U85: each runs on one small zoo model for
ethos-u85-256 against Vela 5.2 with its default U85 system (Ethos_U85_SYS_DRAM_Mid,
Dedicated_Sram_384KB)."""

from __future__ import annotations

import csv

import pytest

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ethosu.vela")

from cascader import zoo  # noqa: E402
from cascader.bench import cascade, compile as bench_compile, coverage, plan, versus  # noqa: E402
from cascader.vela import VelaConfig, compile as vela_compile  # noqa: E402

MODEL = ["--models", "", "--only", "fc_autoencoder"]
U85 = "ethos-u85-256"


def _line(out: str, start: str) -> str:
    """The last line that starts so (bench.compile prints each row, then the whole table)."""
    return [line for line in out.splitlines() if line.startswith(start)][-1]


def test_vela_u85_defaults_are_vela_ini_presets():
    """Naming Vela's default U85 system and memory mode passes them from Arm/vela.ini, and gives
    the binary Vela's defaults give."""
    config = VelaConfig(U85, memory_mode="Dedicated_Sram_384KB")
    assert config.args()[-4:] == ["--system-config", "Ethos_U85_SYS_DRAM_Mid", "--memory-mode", "Dedicated_Sram_384KB"]
    model = zoo.get("fc_autoencoder")
    named = vela_compile(model, U85, system="Ethos_U85_SYS_DRAM_Mid", memory_mode="Dedicated_Sram_384KB")
    default = vela_compile(model, U85)
    assert named.path.read_bytes() == default.path.read_bytes()
    e = default.estimate()
    assert (e.accelerator, e.system, e.memory_mode) == (U85, "Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram")


def test_versus(tmp_path, capsys):
    out = tmp_path / "results"
    assert versus.main([*MODEL, "--accelerators", U85, "--budgets", "unlimited,vela-perf", "--no-process",
                        "--output-dir", str(out)]) == 0
    capsys.readouterr()
    with open(out / "versus.csv", newline="") as f:
        free, held = csv.DictReader(f)
    for row in free, held:
        assert (row["model"], row["accelerator"], row["status"], row["vela_status"]) == (
            "zoo_fc_autoencoder", U85, "ok", "ok")
        assert row["bit_exact"] == "True" and row["cpu_ops"] == row["vela_cpu_ops"] == "0"
        assert 0.5 < float(row["cycles_ratio"]) <= 1.02 and int(row["vela_sram"]) > 0
    # Unlimited, ours buffers weights in SRAM for cycles; held to the SRAM of Vela's unlimited
    # compile (vela-perf), it stays within it, against that same Vela binary.
    assert int(held["budget_bytes"]) == int(free["vela_sram"]) and int(held["sram"]) <= int(held["budget_bytes"])
    assert (held["vela_sram"], held["vela_cycles"]) == (free["vela_sram"], free["vela_cycles"])


def test_compile(capsys):
    assert bench_compile.main([*MODEL, "--accelerators", U85, "--no-process"]) == 0
    out = capsys.readouterr().out
    fields = _line(out, "zoo_fc_autoencoder").split()
    assert fields[1:3] == [U85, "yes"] and 0.5 < float(fields[5]) <= 1.02
    assert "1/1 bit-exact" in out


def test_plan(capsys):
    assert plan.main([*MODEL, "--accelerator", U85]) == 0
    out = capsys.readouterr().out
    assert "Size:" in _line(out, "zoo_fc_autoencoder")
    assert "at most 0.7, or 1.1x a floor above 0.7 of Vela's, on 1/1" in out


def test_cascade(capsys):
    assert cascade.main([*MODEL, "--accelerators", U85]) == 0
    cells = _line(capsys.readouterr().out, "zoo_fc_autoencoder").split(" | ")
    assert cells[0].split()[1:3] == [U85, "unlimited:"]
    for label, cell in zip(("unlimited", "vela-size", "0.7x", "least"), cells):
        assert label in cell and ("fits exact" in cell or "infeasible (min" in cell), cell
    assert "least" in cells[3] and "fits exact" in cells[3]
    assert cells[4] == "1K: fits (DRAM)"  # Dedicated_Sram: every feature map may live in DRAM


def test_coverage(capsys):
    assert coverage.main([*MODEL, "--accelerators", U85, "--models-only"]) == 0
    fields = _line(capsys.readouterr().out, "zoo_fc_autoencoder").split()
    assert fields[1:4] == [U85, "0", "0"]
    # The operator table lists Vela's Ethos-U85 operators (SELECT is not on its U55/U65 list),
    # with the U85's own operator cases: on the NPU and bit-exact.
    rows = coverage.operator_table(U85, only="SELECT")
    assert "no operator case" not in capsys.readouterr().out
    assert sorted((r.operator, r.dtype) for r in rows) == [(op, t) for op in ("SELECT", "SELECT_V2")
                                                           for t in ("int16", "int32", "int8")]
    assert all(r.ours == "NPU" and r.ours_exact for r in rows), rows
