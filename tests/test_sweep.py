"""cascader.sweep: a grid of compiles as one table, here or on any concurrent.futures.Executor."""

from __future__ import annotations

import dataclasses
import multiprocessing
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest

import cascader
from cascader import zoo
from cascader.records import Records
from cascader.sweeping import SweepRow, sweep

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
SRAMS = (None, "1KiB")  # ds_cnn_kws needs ~16 KB on the U55: 1 KiB is infeasible there


@pytest.fixture(scope="module")
def kws_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "kws.tflite"
    cascader.save_model(zoo.ds_cnn_kws(), path)
    return path


@pytest.fixture(scope="module")
def models(kws_path):
    # One of each kind of spec: a zoo name, a path, bytes, a Model.
    return ["zoo:fc_autoencoder", kws_path, kws_path.read_bytes(), zoo.fc_autoencoder()]


@pytest.fixture(scope="module")
def serial(models):
    return sweep(models, SRAMS, ACCELERATORS, progress=False)


def _without_times(rows):
    return [dataclasses.replace(r, compile_seconds=0.0) for r in rows]


def test_serial_grid_is_in_grid_order_and_named(serial):
    assert isinstance(serial, Records) and all(isinstance(r, SweepRow) for r in serial)
    names = ["fc_autoencoder", "kws", "model2", "model3"]
    assert [(r.model, r.accelerator, r.sram_budget) for r in serial] == [
        (m, a, s) for m in names for a in ACCELERATORS for s in (None, 1024)]
    assert all(r.compile_seconds > 0 for r in serial)
    # The same network by path and by bytes compiles the same.
    by_path = [r for r in serial if r.model == "kws"]
    by_bytes = [r for r in serial if r.model == "model2"]
    assert _without_times(by_path) == [dataclasses.replace(r, model="kws") for r in _without_times(by_bytes)]


def test_row_matches_a_direct_compile(serial, kws_path):
    row = next(r for r in serial if (r.model, r.accelerator, r.sram_budget) == ("kws", "ethos-u65-256", None))
    compiled = cascader.compile(kws_path, accelerator="ethos-u65-256")
    estimate = compiled.estimate
    estimate = estimate() if callable(estimate) else estimate  # a cached property before the method
    summary = compiled.summary()
    assert row.status == "ok" and row.error is None and row.minimum_sram is None
    assert (row.sram_bytes, row.flash_bytes) == (compiled.sram_bytes, compiled.flash_bytes)
    assert row.cycles == pytest.approx(float(estimate.total_cycles))
    assert (row.npu_operators, row.cpu_operators) == (summary.npu_operators, summary.cpu_operators)
    assert row.npu_operators > 0


def test_infeasible_budget_is_a_row_with_the_minimum(serial, kws_path):
    row = next(r for r in serial if (r.model, r.accelerator, r.sram_budget) == ("kws", "ethos-u55-128", 1024))
    with pytest.raises(cascader.InfeasibleError) as e:
        cascader.compile(kws_path, sram="1KiB", accelerator="ethos-u55-128")
    assert row.status == "infeasible"
    assert row.minimum_sram == e.value.minimum_sram > 1024
    assert row.sram_bytes is None and row.cycles is None and "SRAM" in row.error
    # ... and the minimum it names does compile.
    (fits,) = sweep([kws_path], [row.minimum_sram], progress=False)
    assert fits.status == "ok" and fits.sram_bytes <= row.minimum_sram


def test_failures_are_rows_not_exceptions(kws_path, monkeypatch):
    import cascader.sweeping as sweep_module

    real = sweep_module.compile_model

    def flaky(model, **kwargs):  # an exception that is no CascaderError
        if kwargs["sram"] == 12345 and str(model).endswith("kws.tflite"):
            raise RuntimeError("boom")
        return real(model, **kwargs)

    monkeypatch.setattr(sweep_module, "compile_model", flaky)
    rows = sweep({"missing": kws_path.with_name("missing.tflite"), "unknown": "zoo:no_such_net", "kws": kws_path},
                 [None, 12345], ["ethos-u55-128", "ethos-u99-1"], progress=False)
    assert len(rows) == 12
    status = {(r.model, r.accelerator, r.sram_budget): (r.status, r.error) for r in rows}
    assert status["missing", "ethos-u55-128", None][1].startswith("ModelError:")
    assert "no_such_net" in status["unknown", "ethos-u55-128", None][1]
    assert status["kws", "ethos-u55-128", None] == ("ok", None)
    assert status["kws", "ethos-u55-128", 12345] == ("error", "RuntimeError: boom")
    assert "ethos-u99-1" in status["kws", "ethos-u99-1", None][1]
    assert [r.status for r in rows].count("ok") == 1

def test_malformed_arguments_fail_before_any_compile():
    with pytest.raises(cascader.InvalidArgumentError, match="lots"):
        sweep(["zoo:fc_autoencoder"], ["lots"], progress=False)
    with pytest.raises(cascader.InvalidArgumentError, match="int"):
        sweep([42], progress=False)


def test_single_values_and_accelerator_objects(kws_path):
    rows = sweep(kws_path, "64KiB", cascader.Accelerator("ethos-u55-64"), progress=False)
    assert [(r.model, r.accelerator, r.sram_budget, r.status) for r in rows] == [("kws", "ethos-u55-64", 65536, "ok")]


@pytest.mark.parametrize("make_executor", [
    pytest.param(lambda: ThreadPoolExecutor(2), id="threads"),
    pytest.param(lambda: ProcessPoolExecutor(2), id="processes"),  # the platform's start method (Linux: fork)
    # spawn, the default on macOS and Windows: the workers import cascader afresh.
    pytest.param(lambda: ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")), id="spawn"),
])
def test_executor_gives_the_serial_rows(models, serial, make_executor):
    with make_executor() as executor:
        rows = sweep(models, SRAMS, ACCELERATORS, executor, progress=False)
    assert isinstance(rows, Records)
    assert _without_times(rows) == _without_times(serial)


def test_dask_cluster_gives_the_serial_rows(models, serial):
    distributed = pytest.importorskip("distributed")
    # Worker processes, so the jobs and rows really cross a pickle; ":0": no fixed dashboard port.
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as client:
            rows = sweep(models, SRAMS, ACCELERATORS, client.get_executor(), progress=False)
    assert _without_times(rows) == _without_times(serial)


class _DyingExecutor(Executor):
    """Runs jobs inline, but the worker of the second job dies (as a crashed process breaks a pool)."""

    def __init__(self):
        self.jobs = 0

    def submit(self, fn, *args, **kwargs):
        self.jobs += 1
        future = Future()
        if self.jobs == 2:
            future.set_exception(BrokenProcessPool("a child process terminated abruptly"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def test_a_dead_worker_costs_its_row_only():
    rows = sweep(["zoo:fc_autoencoder"], [None, 4096, 8192], executor=_DyingExecutor(), progress=False)
    assert [r.status for r in rows] == ["ok", "error", "ok"]
    assert rows[1].sram_budget == 4096 and rows[1].error.startswith("BrokenProcessPool:")


def test_progress_bar_only_when_asked(capsys, monkeypatch):
    import cascader.progress

    monkeypatch.setattr(cascader.progress, "SHOW_AFTER_SECONDS", 0.0)  # as if the sweep were slow
    sweep(["zoo:fc_autoencoder"], [None, 4096], progress=False)
    assert capsys.readouterr() == ("", "")
    sweep(["zoo:fc_autoencoder"], [None, 4096])
    out, err = capsys.readouterr()
    assert out == "" and "sweep:" in err and "compile/s" in err


def test_csv_and_pandas(serial, tmp_path):
    text = serial.to_csv(tmp_path / "sweep.csv")
    lines = text.splitlines()
    assert lines[0].split(",")[:4] == ["model", "accelerator", "sram_budget", "status"]
    assert len(lines) == 1 + len(serial) and (tmp_path / "sweep.csv").read_text() == text
    pd = pytest.importorskip("pandas")
    df = serial.to_pandas()
    assert isinstance(df, pd.DataFrame) and len(df) == len(serial)
    assert list(df.columns) == [f.name for f in dataclasses.fields(SweepRow)]
    assert set(df.status) == {"ok", "infeasible"}
    assert "kws" in serial.table()
