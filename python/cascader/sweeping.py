"""`cascader.sweep`: compile every model x accelerator x SRAM budget and collect one table.

The executor is injected rather than built in: a design-space exploration that outgrows one
machine runs on whatever engine already schedules work there. Anything with the
`concurrent.futures.Executor` interface will do: a `ProcessPoolExecutor` on a workstation,
`dask.distributed.Client.get_executor()` or Ray's executor on a cluster. So each job is a
module-level function of plain, picklable values (model bytes or a path or `zoo:` name, never a
core object), and returns a small dataclass row.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Executor, Future, as_completed
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping, Union

from .arch import Accelerator, MemoryMode, SystemConfig
from .cli import _ZOO_PREFIX, _stem, resolve_model
from .sizes import parse_size
from .tflite import ModelLike
from .compiler import compile as compile_model
from .errors import InfeasibleError, InvalidArgumentError
from .progress import progress as progress_bar
from .records import Records
from .tflite import Model, save_model

Size = Union[int, str, None]
Models = Union[ModelLike, Iterable[ModelLike], Mapping[str, ModelLike]]


@dataclass
class SweepRow:
    """One compile of a sweep. `status` is "ok", "infeasible" (the budget is below
    `minimum_sram`) or "error" (`error` names the exception); the figures are None unless ok."""

    model: str
    accelerator: str
    sram_budget: int | None
    status: str
    sram_bytes: int | None = None
    flash_bytes: int | None = None
    cycles: float | None = None  # the binary's estimated total cycles per inference
    npu_operators: int | None = None
    cpu_operators: int | None = None
    minimum_sram: int | None = None
    compile_seconds: float = 0.0
    error: str | None = None


@lru_cache(maxsize=8)
def _zoo_binary(spec: str) -> bytes:
    # A zoo network takes longer to build than to compile: a worker builds each once and reuses
    # it for every budget and accelerator. Bytes, not the Model, so no compile sees another's.
    return save_model(resolve_model(spec)[0])


def compile_job(name: str, model: Union[bytes, str], accelerator: str, sram_budget: int | None,
                options: dict) -> SweepRow:
    """The unit of work of a sweep: one compile as a row. Never raises, so one bad job (or one
    unreadable model) costs one row, not the sweep."""
    start = time.perf_counter()
    row = SweepRow(name, accelerator, sram_budget, "ok")
    try:
        source = _zoo_binary(model) if isinstance(model, str) and model.startswith(_ZOO_PREFIX) else model
        summary = compile_model(source, sram=sram_budget, accelerator=accelerator, **options).summary()
        row.sram_bytes, row.flash_bytes, row.cycles = summary.sram_bytes, summary.flash_bytes, summary.total_cycles
        row.npu_operators, row.cpu_operators = summary.npu_operators, summary.cpu_operators
    except InfeasibleError as e:
        row.status, row.minimum_sram, row.error = "infeasible", e.minimum_sram, str(e)
    except Exception as e:  # noqa: BLE001 - a sweep records every failure as a row
        row.status, row.error = "error", f"{type(e).__name__}: {e}"
    row.compile_seconds = time.perf_counter() - start
    return row


def _listed(value: Any) -> list:
    # A lone "zoo:resnet8", "256KiB" or "ethos-u55-128" is one value, not the characters of one.
    single = value is None or isinstance(value, (str, bytes, bytearray, int, os.PathLike, Model, Accelerator))
    return [value] if single else list(value)


def _named_models(models: Models) -> list[tuple[str, Union[bytes, str]]]:
    """(row name, what a job loads) per model: paths and zoo names stay strings (cheap to ship;
    the worker opens them), bytes stay bytes, a Model becomes its bytes."""
    items = models.items() if isinstance(models, Mapping) else ((None, m) for m in _listed(models))
    out = []
    for i, (name, spec) in enumerate(items):
        if isinstance(spec, Model):
            payload: Union[bytes, str] = save_model(spec)
        elif isinstance(spec, (bytes, bytearray)):
            payload = bytes(spec)
        elif isinstance(spec, (str, os.PathLike)):
            payload = os.fspath(spec)
        else:
            raise InvalidArgumentError(
                f"a model must be a path, 'zoo:<name>', bytes or a cascader.Model, not {type(spec).__name__}")
        if name is None:
            name = f"model{i}" if isinstance(payload, bytes) else _stem(payload)
        out.append((str(name), payload))
    return out


def sweep(
    models: Models,
    srams: Union[Size, Iterable[Size]] = (None,),
    accelerators: Union[str, Accelerator, Iterable[Union[str, Accelerator]]] = ("ethos-u55-128",),
    executor: Executor | None = None,
    *,
    system: Union[str, SystemConfig, None] = None,
    memory_mode: Union[str, MemoryMode, None] = None,
    optimise: str = "performance",
    progress: bool = True,
) -> Records:
    """Compile every model for every accelerator under every SRAM budget; one `SweepRow` each.

    Parameters
    ----------
    models
        Paths, "zoo:<name>" strings, `.tflite` bytes or :class:`cascader.Model` objects, or a
        dict of row name -> one of those. Rows name a model by its file stem, zoo name or dict
        key (``model<i>`` for bytes and Models). Paths are opened by the workers: on a cluster
        without a shared filesystem, pass the bytes.
    srams
        SRAM budgets: bytes, sizes such as "256KiB", or None (unlimited).
    accelerators
        Accelerator names, e.g. "ethos-u55-128", "ethos-u65-256". Each of `models`, `srams`
        and `accelerators` may also be a single value.
    executor
        Any `concurrent.futures.Executor` (a process pool, `dask.distributed.Client.get_executor()`,
        Ray's); None compiles here, one job after another.
    system, memory_mode, optimise
        As :func:`cascader.compile`, for every job.
    progress
        A progress bar on stderr once a sweep of more than one job has run 2 s.

    Returns
    -------
    Records
        In grid order (models, then accelerators, then budgets) whatever order jobs finish in.
        A failed compile is a row with status "infeasible" or "error", never an exception.
    """
    budgets = [parse_size(s) for s in _listed(srams)]
    # Names, not Accelerators: those hold core objects, which do not pickle.
    accelerators = [a.name if isinstance(a, Accelerator) else a for a in _listed(accelerators)]
    options = {"system": system, "memory_mode": memory_mode, "optimise": optimise}
    jobs = [(name, payload, acc, budget, options)
            for name, payload in _named_models(models) for acc in accelerators for budget in budgets]
    with progress_bar(total=len(jobs), desc="sweep", unit="compile", enabled=progress and len(jobs) > 1) as bar:
        if executor is None:
            rows = []
            for job in jobs:
                rows.append(compile_job(*job))
                bar.update()
            return Records(rows)
        futures = [executor.submit(compile_job, *job) for job in jobs]
        try:
            for _ in as_completed(futures):
                bar.update()
        except BaseException:  # e.g. Ctrl-C: do not leave the engine running the rest
            for f in futures:
                f.cancel()
            raise
        return Records(_result(f, job) for f, job in zip(futures, jobs))


def _result(future: Future, job: tuple) -> SweepRow:
    # The job itself never raises; this is the worker dying under it (e.g. a crashed process
    # breaks the whole pool), which still must not lose the other rows.
    try:
        return future.result()
    except Exception as e:  # noqa: BLE001
        name, _, accelerator, budget, _ = job
        return SweepRow(name, accelerator, budget, "error", error=f"{type(e).__name__}: {e}")
