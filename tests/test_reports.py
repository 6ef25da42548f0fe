"""What a compile reports: summary, per-layer table, plots, run and check."""

import csv
import io
import pickle

import matplotlib
import numpy as np
import pytest

import cascader
from cascader import zoo
from cascader.reference import random_inputs

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def cascaded():
    """MobileNetV2 under a budget that forces a cascade, so the layers show stripes."""
    model = zoo.mobilenet_v2(alpha=0.35, resolution=96)
    return cascader.compile(model, sram="100KiB")


def test_summary_figures_agree_with_the_estimate_and_layout(cascaded):
    s = cascaded.summary()
    est = cascaded.estimate()
    assert s.total_cycles == est.total_cycles and s.macs == est.macs > 0
    assert s.npu_cycles == est.npu_cycles
    assert s.sram_bytes == cascaded.sram_bytes <= s.sram_budget == 100 * 1024
    assert s.cascades >= 1 and s.npu_operations > s.npu_operators - s.cascades
    assert set(s.bytes_per_memory) == set(s.access_cycles) == {"Sram", "OffChipFlash"}
    assert s.clock_hz == 500e6
    assert s.inference_seconds == pytest.approx(s.total_cycles / 500e6)
    assert s.inferences_per_second == pytest.approx(1 / s.inference_seconds)
    text = str(s)
    for needle in ("SRAM used", "flash used", "MACs", "total cycles", "inferences/s", "Sram traffic"):
        assert needle in text
    assert "<table>" in s._repr_html_() and "<table>" in cascaded._repr_html_()
    row = next(csv.DictReader(io.StringIO(s.to_csv())))
    assert int(row["sram_bytes"]) == s.sram_bytes and float(row["OffChipFlash_bytes"]) > 0


def test_layers_cover_every_operation_once(cascaded):
    layers = cascaded.layers
    npu = [r for r in layers if r.target == "NPU"]
    # Stripes fold into their operation: one row per whole-tensor operation.
    assert sum(r.stripes for r in npu) == len(cascaded.schedule.operations)
    assert sum(r.cycles for r in npu) == pytest.approx(cascaded.schedule.total_cycles)
    assert sum(r.macs for r in npu) == sum(op.cost.macs for op in cascaded.schedule.operations)
    assert [r.index for r in layers] == list(range(len(layers)))
    striped = [r for r in npu if r.cascade is not None]
    assert striped and all(r.stripes > 1 for r in striped)
    assert any(r.ofm_buffer.startswith("rolling") for r in striped)
    assert all(r.stripe[0] < 48 for r in striped if r.ofm_buffer.startswith("rolling"))
    # SRAM in use never exceeds the arena, and the peak layer reaches a large part of it.
    assert max(r.sram_live for r in layers) <= cascaded.sram_bytes
    assert max(r.sram_live for r in layers) >= 0.5 * cascaded.sram_bytes
    assert all(r.weight_bytes > 0 for r in npu if r.operators == "CONV_2D")
    df = layers.to_pandas()
    assert list(df.columns) == layers.columns and len(df) == len(layers)
    assert layers.to_csv().count("\n") == len(layers) + 1
    assert "CONV_2D" in layers.table()


def test_cpu_operators_are_layers_with_their_reason():
    model = dict(zoo.single_op_cases())["dw_3x3_multiplier2"]  # depth multiplier 2: the NPU cannot
    compiled = cascader.compile(model)
    (row,) = compiled.layers
    assert row.target == "CPU" and "multiplier" in row.reason and row.cycles is None
    assert compiled.summary().cpu_operators == 1 and compiled.summary().total_cycles == 0


def test_run_and_check(cascaded):
    inputs = random_inputs(cascaded.source, 3)
    assert np.array_equal(cascaded.run(inputs)[0], cascader.reference.run(cascaded.source, inputs)[0])
    result = cascaded.check(seeds=2)
    assert result.bit_exact and result.max_abs_error == 0 and result.seeds == (0, 1)
    assert result.outputs[0].elements == 2 * np.prod(result.outputs[0].shape)
    assert "bit-exact" in str(result)


def test_check_reports_a_wrong_binary():
    """A binary of another model (same input and output shapes) must not pass."""
    a = zoo.mobilenet_v2(alpha=0.35, resolution=96)
    b = zoo.mobilenet_v2(alpha=0.35, resolution=96, seed=1)
    result = cascader.check(a, cascader.compile(b).model, seeds=1)
    assert not result.bit_exact and result.max_abs_error > 0 and result.details


def test_plots_render(cascaded, tmp_path):
    for name, fig in (("memory", cascaded.plot_memory(str(tmp_path / "m.png"))),
                      ("layers", cascaded.plot_layers(str(tmp_path / "l.png"))),
                      ("pareto", cascaded.plot_pareto(str(tmp_path / "p.png"), others=[("Vela", 150_000, 900_000)]))):
        assert (tmp_path / f"{name[0]}.png").stat().st_size > 10_000, name
        assert fig.axes
    matplotlib.pyplot.close("all")


def test_compiled_model_pickles(cascaded):
    cascaded.summary()
    copy = pickle.loads(pickle.dumps(cascaded))
    assert copy.binary == cascaded.binary and copy.summary().total_cycles == cascaded.summary().total_cycles


def test_sized_memory_mode_caps_the_budget():
    model = zoo.mobilenet_v2(alpha=0.35, resolution=96)
    small = cascader.compile(model, accelerator="ethos-u65-256", memory_mode="Dedicated_Sram_2KB")
    assert small.sram_budget == 2048 and small.sram_bytes <= 2048
    with pytest.raises(cascader.InfeasibleError):
        cascader.compile(model, accelerator="ethos-u55-128", memory_mode="Shared_Sram_2KB")
    fits = cascader.compile(model, accelerator="ethos-u65-256", memory_mode="Dedicated_Sram_256KB")
    assert fits.sram_budget == 256 * 1024 and fits.memory_mode == "Dedicated_Sram"
