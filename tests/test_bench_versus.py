"""`python -m cascader.bench` (cascader.bench.versus): both compilers on one tiny zoo model."""

from __future__ import annotations

import csv

import pytest

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ethosu.vela")

import cascader  # noqa: E402
from cascader.bench import versus  # noqa: E402


def test_versus_one_zoo_model(tmp_path, capsys):
    out = tmp_path / "results"
    argv = ["--models", "", "--only", "fc_autoencoder", "--accelerators", "ethos-u55-128",
            "--budgets", "unlimited,0.7x-vela-size", "--no-process", "--output-dir", str(out)]
    assert versus.main(argv) == 0
    printed = capsys.readouterr().out

    with open(out / "versus.csv", newline="") as f:
        rows = {r["budget"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"unlimited", "0.7x-vela-size"}
    free, tight = rows["unlimited"], rows["0.7x-vela-size"]
    assert free["model"] == "zoo_fc_autoencoder" and free["accelerator"] == "ethos-u55-128"
    assert free["budget_bytes"] == ""
    assert free["status"] == "ok" and free["bit_exact"] == "True"
    assert int(free["sram"]) > 0 and int(free["flash"]) > 0 and float(free["cycles"]) > 0
    assert free["vela_status"] == "ok" and int(free["vela_sram"]) > 0 and int(free["vela_flash"]) > 0
    assert float(free["vela_cycles"]) > 0 and float(free["vela_printed_cycles"]) > 0
    assert free["vela_bit_exact"] in ("True", "False")  # Vela's FC rounding is a known deviation
    assert free["vela_over_budget"] == ""  # no budget, nothing to exceed
    assert 0.5 < float(free["cycles_ratio"]) < 2 and 0 < float(free["sram_ratio"]) < 4
    assert free["process_s"] == "" and free["vela_s"] == ""  # --no-process
    # 0.7x of Vela's Size SRAM is below anything that compiles: ours says so with a minimum,
    # Vela takes the budget and silently uses more.
    assert int(tight["budget_bytes"]) > 0
    assert tight["status"] == "infeasible" and int(tight["minimum_sram"]) > int(tight["budget_bytes"])
    assert tight["vela_status"] == "ok" and tight["vela_over_budget"] == "True"
    assert int(tight["vela_sram"]) > int(tight["budget_bytes"])

    md = (out / "versus.md").read_text()
    assert "| model | accelerator |" in md and md.count("| zoo_fc_autoencoder |") == 2
    assert "Bit-exact" in md and "Vela exceeded the SRAM budget it was given in 1/1" in md
    assert "| model | accelerator |" in printed and "Cycles ours/Vela" in printed
    assert (out / "versus.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_budget_names():
    assert versus.parse_budgets("unlimited, vela-size,0.5x-vela-size,256KiB") == [
        "unlimited", "vela-size", "0.5x-vela-size", "256KiB"]
    assert versus.budget_bytes("0.5x-vela-size", lambda: 1000) == 500
    assert versus.budget_bytes("256KiB", lambda: pytest.fail("not needed")) == 256 * 1024
    assert versus.budget_bytes("unlimited", lambda: pytest.fail("not needed")) is None
    assert versus.parse_budgets("vela-perf,1.5x-vela-perf") == ["vela-perf", "1.5x-vela-perf"]
    assert versus.budget_bytes("vela-perf", lambda: pytest.fail("not needed"), lambda: 3000) == 3000
    assert versus.budget_bytes("0.5x-vela-perf", lambda: pytest.fail("not needed"), lambda: 3000) == 1500
    with pytest.raises(cascader.InvalidArgumentError):
        versus.budget_bytes("vela-perf", lambda: 1000)
    with pytest.raises(ValueError):
        versus.parse_budgets("lots")
    with pytest.raises(SystemExit):
        versus.main(["--budgets", "lots", "--models", ""])


def test_summary_where_no_row_has_the_same_cpu_operators():
    """Every row leaving other operators to the CPU than Vela's (or Vela over every budget):
    the summary leaves those geometric means out rather than dividing by no rows."""
    row = versus.VersusRow("m", "ethos-u85-256", "1KiB", budget_bytes=1024, status="ok", vela_status="ok",
                           cycles=2.0, vela_cycles=1.0, cycles_ratio=2.0, cpu_ops=1, vela_cpu_ops=0,
                           vela_sram=2048, vela_over_budget=True)
    text = versus.summarize([row])
    assert "geometric mean 2.000 over 1 rows" in text
    assert "same CPU operators" not in text and "where Vela kept its budget" not in text
