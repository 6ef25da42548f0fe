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


def test_estimate_repr_is_a_summary_not_a_dump(cascaded):
    """repr(r.estimate()) used to be the dataclass dump of every operation (tens of kB)."""
    est = cascaded.estimate()
    text = repr(est)
    for needle in (est.accelerator, est.system, est.memory_mode, f"{est.total_cycles:,.0f} cycles",
                   f"{est.npu_cycles:,} NPU cycles", f"{est.macs:,} MACs", f"{len(est.operations)} operations"):
        assert needle in text
    assert len(text.splitlines()) <= 8 and "access_cycles" not in text
    costliest = max(est.operations, key=lambda o: o.cycles)
    assert f"{costliest.cycles:,.0f} cycles" in text.splitlines()[3]
    # One operation is one line (a list of them prints one per operation, not 14 fields each).
    assert "\n" not in repr(costliest) and "access_cycles" not in repr(costliest)
    assert f"<p>{est.accelerator}" in est._repr_html_()
    nothing = cascader.compile(dict(zoo.single_op_cases())["dw_3x3_multiplier2"]).estimate()  # all on the CPU
    assert "0 operations" in repr(nothing)


def test_integer_columns_with_gaps_are_nullable_integers(cascaded):
    """pandas makes [None, 3] floats (NaN, 3.0); a layer's cascade is an integer or none."""
    pd = pytest.importorskip("pandas")
    layers = cascaded.layers
    df = layers.to_pandas()
    assert str(df["cascade"].dtype) == "Int64"
    assert [None if pd.isna(v) else v for v in df["cascade"]] == [r.cascade for r in layers]
    assert str(df["cycles"].dtype) == "float64" and str(df["macs"].dtype) == "int64"
    # Decided by the values, so any report gets it; a column of None only, by its annotation.
    from dataclasses import dataclass

    from cascader.records import Records

    @dataclass
    class Row:
        count: int | None
        label: str | None
        flag: bool | None
        anything: object

    big = 2**60 + 1  # exact only as an integer: a float column would round it
    df = Records([Row(None, None, True, big), Row(3, None, None, None)]).to_pandas()
    assert str(df["count"].dtype) == str(df["anything"].dtype) == "Int64" and df["anything"][0] == big
    assert str(df["label"].dtype) == str(df["flag"].dtype) == "object"
    assert str(Records([Row(None, "a", None, None)]).to_pandas()["count"].dtype) == "Int64"


def test_plot_memory_labels_only_what_fits_and_keeps_the_legend_off_the_data(tmp_path):
    """The zoo MobileNetV2 under a budget: dozens of buffers, most too small for their name."""
    compiled = cascader.compile(zoo.mobilenet_v2(), sram="64KiB")
    fig = compiled.plot_memory(str(tmp_path / "memory.png"))
    (ax,) = fig.axes
    fig.canvas.draw()  # measure on screen: the texts keep the renderer of the save, at its dpi
    assert 0 < len(ax.texts) < len(compiled.layout.buffers)
    centres = {(p.get_x() + p.get_width() / 2, p.get_y() + p.get_height() / 2): p for p in ax.patches}
    extents = []
    for label in ax.texts:
        room = centres[label.get_position()].get_window_extent()  # its own buffer's rectangle
        extent = label.get_window_extent()
        assert room.x0 <= extent.x0 and extent.x1 <= room.x1 and room.y0 <= extent.y0 and extent.y1 <= room.y1
        assert not any(extent.overlaps(other) for other in extents), label.get_text()
        extents.append(extent)
    assert not ax.get_legend().get_window_extent().overlaps(ax.get_window_extent())
    matplotlib.pyplot.close(fig)
