"""cascader against Vela 5.2 in one run: both compilers, the same models, a grid of accelerators and SRAM budgets.

    python -m cascader.bench [--models DIR] [--only SUBSTR] [--accelerators a,b]
                             [--budgets unlimited,vela-size,0.7x-vela-size,vela-perf,256KiB] [--no-process]
                             [--output-dir bench-results]

The models are the zoo networks, then every `.tflite` in `--models` / `$CASCADER_MODELS`. A budget
is `unlimited`, `vela-size` (the SRAM Vela's `--optimise Size` uses with its default arena),
`vela-perf` (the SRAM Vela's `--optimise Performance` uses unlimited: with it, ours is held to
the SRAM of Vela's unlimited row, trades none of it for cycles, and is compared with that row),
`<f>x-vela-size` or `<f>x-vela-perf` (those times f) or a size (bytes, `256KiB`, `1.5MiB`).
Otherwise both compilers get the same budget: ours as `sram=`, Vela (`--optimise Performance`)
as `--arena-cache-size`.

Per row: our status (ok, infeasible with the least SRAM that compiles, error), the SRAM, flash
and cycles (our estimator) of both binaries, Vela's own printed cycles, bit-exactness of both
binaries (the simulator against the reference interpreter, 2 seeds), whether Vela failed or used
more SRAM than it was given (Vela 5.2 exceeds `--arena-cache-size` silently), the compile wall
time (ours in process; our `cascader compile` process and Vela's process, both run fresh) and
the ratios ours/Vela. Prints a markdown table and a summary; writes `versus.md`, `versus.csv`
and `versus.png` to `--output-dir`.
"""

from __future__ import annotations

import math
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..compiler import compile as compile_model
from ..sizes import parse_size
from ..errors import CascaderError, InfeasibleError, InvalidArgumentError
from ..records import Records
from ..sim import estimate
from ..tflite import load_model
from ..vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela
from ..vela import executable as vela_executable
from .compile import _flash_of, _timed_process, model_parser, model_paths
from .simulate import validate

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
BUDGETS = ("unlimited", "vela-size", "0.7x-vela-size")
SEEDS = (0, 1)
_VELA = re.compile(r"(?:([0-9]*\.?[0-9]+)x-)?vela-(size|perf)")


@dataclass
class VersusRow:
    """One model, accelerator and budget; sizes in bytes, times in seconds."""

    model: str
    accelerator: str
    budget: str  # the budget as given: unlimited, vela-size, 0.7x-vela-size, vela-perf, 256KiB
    budget_bytes: int | None = None  # None: unlimited
    # ours
    status: str = ""  # ok, infeasible, over-budget, error
    minimum_sram: int | None = None  # when infeasible: the least SRAM that compiles
    sram: int | None = None
    flash: int | None = None
    cycles: float | None = None  # our binary on our estimator (NPU work only)
    cpu_ops: int | None = None  # operators left to the CPU (their time is in no cycle count)
    bit_exact: bool | None = None
    max_abs_diff: int | None = None
    compile_s: float | None = None  # in process, best of up to 3
    process_s: float | None = None  # a fresh `cascader compile` process
    # Vela (--optimise Performance, --arena-cache-size = the budget)
    vela_status: str = ""  # ok, failed
    vela_sram: int | None = None
    vela_over_budget: bool | None = None  # Vela used more SRAM than the budget it was given
    vela_flash: int | None = None
    vela_cycles: float | None = None  # Vela's binary on our estimator
    vela_cpu_ops: int | None = None
    vela_printed_cycles: float | None = None  # Vela's own figure (cycles_total of its summary CSV)
    vela_bit_exact: bool | None = None
    vela_max_abs_diff: int | None = None
    vela_s: float | None = None  # a fresh Vela process
    # ratios
    cycles_ratio: float | None = None  # ours / Vela, both on our estimator
    sram_ratio: float | None = None  # ours / Vela
    speedup: float | None = None  # Vela's process time / ours
    note: str = ""

    def add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _total_cycles(compiled) -> float:
    e = compiled.estimate  # a method now; a cached property in older trees
    e = e() if callable(e) else e
    return e.total_cycles


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"[:120]


def parse_budgets(text: str) -> list[str]:
    """The budget names of `--budgets`, checked (raises ValueError on an unknown one)."""
    budgets = [b.strip() for b in text.split(",") if b.strip()]
    for b in budgets:
        if b != "unlimited" and not _VELA.fullmatch(b):
            try:
                parse_size(b)
            except CascaderError as e:
                raise ValueError(f"budget {b!r}: unlimited, vela-size, vela-perf, <f>x-vela-size, <f>x-vela-perf or a "
                                 "size such as 256KiB") from e
    return budgets


def _vela_sram(path: Path, config: VelaConfig) -> int:
    out = compile_with_vela(path, config)
    if not out.sram_bytes:
        raise CascaderError(f"Vela's {config.optimise} summary has no SRAM figure")
    return math.ceil(out.sram_bytes)


def vela_size_sram(path: Path, accelerator: str) -> int:
    """The SRAM Vela's `--optimise Size` uses (its default arena), in bytes: the `vela-size` budget."""
    return _vela_sram(path, VelaConfig(accelerator, "Size"))


def vela_performance_sram(path: Path, accelerator: str) -> int:
    """The SRAM Vela's `--optimise Performance` uses unlimited (the `unlimited` row's), in
    bytes: the `vela-perf` budget."""
    return _vela_sram(path, VelaConfig(accelerator, "Performance", UNLIMITED_SRAM))


def budget_bytes(budget: str, vela_size: Callable[[], int],
                 vela_performance: Callable[[], int] | None = None) -> int | None:
    """Bytes of one budget name (None: unlimited); `vela_size` and `vela_performance` are
    called only when needed."""
    if budget == "unlimited":
        return None
    m = _VELA.fullmatch(budget)
    if m:
        if m.group(2) == "perf" and vela_performance is None:
            raise InvalidArgumentError(f"budget {budget}: no Vela Performance SRAM to scale")
        sram = vela_size() if m.group(2) == "size" else vela_performance()
        return sram if m.group(1) is None else int(float(m.group(1)) * sram)
    return parse_size(budget)


def _once(figure: Callable[[], int]) -> Callable[[], int]:
    """`figure`, called at most once: its value, or its CascaderError, is kept for every later
    call (a Vela compile per model and accelerator, not per budget)."""
    kept: list = []

    def once() -> int:
        if not kept:
            try:
                kept.append(figure())
            except CascaderError as e:  # a failure too, once
                kept.append(e)
        if isinstance(kept[0], CascaderError):
            raise kept[0]
        return kept[0]

    return once


def _ours(row: VersusRow, path: Path, seeds: tuple[int, ...]) -> None:
    best = math.inf
    for _ in range(3):  # the machine is shared: the best of three is the stablest figure (one if slow)
        start = time.perf_counter()
        try:
            compiled = compile_model(path, sram=row.budget_bytes, accelerator=row.accelerator)
        except InfeasibleError as e:
            row.status, row.minimum_sram = "infeasible", e.minimum_sram
            row.compile_s = time.perf_counter() - start
            return
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        if elapsed > 1.0:
            break
    row.compile_s = best
    row.sram, row.flash = compiled.sram_bytes, _flash_of(compiled.model)
    row.status = "ok" if row.budget_bytes is None or row.sram <= row.budget_bytes else "over-budget"
    row.cycles = _total_cycles(compiled)
    row.cpu_ops = compiled.summary().cpu_operators
    v = validate(path, compiled.model, seeds, config_label=row.accelerator)
    row.bit_exact, row.max_abs_diff = v.bit_exact, v.max_abs_diff
    if not v.bit_exact:
        row.add_note("ours: " + "; ".join(v.details[:1])[:80])


def _vela(row: VersusRow, path: Path, config: VelaConfig, seeds: tuple[int, ...], process: bool) -> None:
    try:
        out = compile_with_vela(path, config)
    except CascaderError as e:
        row.vela_status = "failed"
        row.add_note("Vela: " + str(e).strip().splitlines()[-1][:100])
        return
    row.vela_status = "ok"
    row.vela_printed_cycles = out.cycles
    row.vela_sram = None if out.sram_bytes is None else math.ceil(out.sram_bytes)
    if row.budget_bytes is not None and row.vela_sram is not None:
        row.vela_over_budget = row.vela_sram > row.budget_bytes
    if process:
        # A fresh process: the cached compile's own run when this call made it, else another run.
        if out.seconds is not None:
            row.vela_s = out.seconds
        else:
            with tempfile.TemporaryDirectory() as tmp:
                row.vela_s = _timed_process([vela_executable(), str(path), "--output-dir", tmp, *config.args()], tmp)
    binary = load_model(out.path)
    row.vela_flash = _flash_of(binary)
    row.vela_cycles = estimate(binary).total_cycles
    row.vela_cpu_ops = sum(op.name != "ethos-u" for op in binary.main.operators)
    v = validate(path, binary, seeds, config_label=config.label)
    row.vela_bit_exact, row.vela_max_abs_diff = v.bit_exact, v.max_abs_diff
    if not v.bit_exact:
        row.add_note("Vela: " + "; ".join(v.details[:1])[:80])


def _our_process(row: VersusRow, path: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sram = [] if row.budget_bytes is None else ["--sram", str(row.budget_bytes)]
        row.process_s = _timed_process([sys.executable, "-m", "cascader.cli", "compile", str(path),
                                        "--accelerator", row.accelerator, *sram, "--output-dir", tmp], tmp)


def run_row(path: Path, accelerator: str, budget: str, vela_size: Callable[[], int] | None = None,
            seeds: tuple[int, ...] = SEEDS, process: bool = True,
            vela_performance: Callable[[], int] | None = None) -> VersusRow:
    """Both compilers on one model, accelerator and budget. `vela_size` and `vela_performance`
    give the `vela-size` and `vela-perf` bytes (default: Vela's compiles of the model, cached)."""
    row = VersusRow(path.stem, accelerator, budget)
    try:
        row.budget_bytes = budget_bytes(budget, vela_size or (lambda: vela_size_sram(path, accelerator)),
                                        vela_performance or (lambda: vela_performance_sram(path, accelerator)))
    except CascaderError as e:
        row.status = row.vela_status = "error"
        row.add_note(f"budget {budget}: {_error(e)}")
        return row
    try:
        _ours(row, path, seeds)
    except Exception as e:  # noqa: BLE001 - one model's failure is a row, not the end of the run
        row.status = row.status if row.status in ("ok", "over-budget") else "error"
        row.add_note(f"ours: {_error(e)}")
    # At `vela-perf` Vela's opponent is the unlimited compile whose SRAM is our budget, not a
    # recompile with that arena: Vela 5.2 given its own unlimited SRAM as an arena may schedule
    # differently (ad01 on the U85-256: 8,736 B of 13,360 B, another binary).
    unlimited = row.budget_bytes is None or budget == "vela-perf"
    config = VelaConfig(accelerator, "Performance", UNLIMITED_SRAM if unlimited else row.budget_bytes)
    try:
        _vela(row, path, config, seeds, process)
    except Exception as e:  # noqa: BLE001
        row.add_note(f"Vela: {_error(e)}")
    if process and row.status in ("ok", "over-budget"):
        try:
            _our_process(row, path)
        except Exception as e:  # noqa: BLE001
            row.add_note(f"process: {_error(e)}")
    row.cycles_ratio = _ratio(row.cycles, row.vela_cycles)
    row.sram_ratio = _ratio(row.sram, row.vela_sram)
    row.speedup = _ratio(row.vela_s, row.process_s)
    return row


# -- reports --------------------------------------------------------------------------------


def _kib(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v / 1024:,.1f}" if v >= 10 * 1024 else f"{v / 1024:.2f}"


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _yes(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "NO")


def _ours_cell(r: VersusRow) -> str:
    if r.status == "infeasible":
        return f"infeasible (min {_kib(r.minimum_sram)} KiB)"
    return r.status


def _vela_sram_cell(r: VersusRow) -> str:
    if r.vela_status == "failed":
        return "failed"
    return _kib(r.vela_sram) + (" OVER" if r.vela_over_budget else "")


COLUMNS: list[tuple[str, Callable[[VersusRow], str]]] = [
    ("model", lambda r: r.model),
    ("accelerator", lambda r: r.accelerator),
    ("budget (KiB)", lambda r: f"{r.budget} ({_kib(r.budget_bytes)})" if "vela-" in r.budget and r.budget_bytes
     else r.budget),
    ("ours", _ours_cell),
    ("SRAM KiB", lambda r: _kib(r.sram)),
    ("Vela SRAM KiB", _vela_sram_cell),
    ("SRAM ratio", lambda r: _num(r.sram_ratio, ".2f")),
    ("cycles", lambda r: _num(r.cycles, ",.0f")),
    ("Vela cycles", lambda r: _num(r.vela_cycles, ",.0f")),
    ("Vela printed", lambda r: _num(r.vela_printed_cycles, ",.0f")),
    ("cycles ratio", lambda r: _num(r.cycles_ratio, ".3f")),
    ("CPU ops ours/Vela", lambda r: f"{_num(r.cpu_ops, 'd')}/{_num(r.vela_cpu_ops, 'd')}"),
    ("flash KiB", lambda r: _kib(r.flash)),
    ("Vela flash KiB", lambda r: _kib(r.vela_flash)),
    ("exact ours/Vela", lambda r: f"{_yes(r.bit_exact)}/{_yes(r.vela_bit_exact)}"),
    ("compile s", lambda r: _num(r.compile_s, ".2f")),
    ("process s", lambda r: _num(r.process_s, ".2f")),
    ("Vela s", lambda r: _num(r.vela_s, ".2f")),
    ("speed-up", lambda r: _num(r.speedup, ".1f")),
    ("note", lambda r: r.note.replace("|", "/")),
]


def markdown_table(rows: list[VersusRow]) -> str:
    """The rows as a GitHub markdown table (sizes in KiB; ratios ours/Vela, speed-up Vela/ours)."""
    numeric = {"SRAM KiB", "SRAM ratio", "cycles", "Vela cycles", "Vela printed", "cycles ratio", "flash KiB",
               "Vela flash KiB", "compile s", "process s", "Vela s", "speed-up"}
    lines = ["| " + " | ".join(h for h, _ in COLUMNS) + " |",
             "|" + "|".join("---:" if h in numeric else "---" for h, _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(r) for _, cell in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def _geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def summarize(rows: list[VersusRow]) -> str:
    """The summary paragraph: bit-exact counts, geometric-mean ratios, speed-up, Vela's overruns."""
    out = []
    ours_ok = [r for r in rows if r.status in ("ok", "over-budget")]
    infeasible = [r for r in rows if r.status == "infeasible"]
    vela_ok = [r for r in rows if r.vela_status == "ok"]
    vela_failed = [r for r in rows if r.vela_status == "failed"]
    out.append(f"{len(rows)} rows ({len({r.model for r in rows})} models x {len({r.accelerator for r in rows})} "
               f"accelerators x {len({r.budget for r in rows})} budgets). Ours: {len(ours_ok)} compiled, "
               f"{len(infeasible)} infeasible, {sum(r.status == 'error' for r in rows)} errors, "
               f"{sum(r.status == 'over-budget' for r in rows)} over budget. "
               f"Vela: {len(vela_ok)} compiled, {len(vela_failed)} failed.")
    out.append(f"Bit-exact (simulator vs reference interpreter, {len(SEEDS)} seeds): ours "
               f"{sum(bool(r.bit_exact) for r in ours_ok)}/{len(ours_ok)}, Vela "
               f"{sum(bool(r.vela_bit_exact) for r in vela_ok)}/{len(vela_ok)}.")
    budgeted = [r for r in vela_ok if r.vela_over_budget is not None]
    over = [r for r in budgeted if r.vela_over_budget]
    if budgeted:
        per_acc = ", ".join(f"{acc} {sum(r.vela_over_budget for r in budgeted if r.accelerator == acc)}/"
                            f"{sum(r.accelerator == acc for r in budgeted)}"
                            for acc in dict.fromkeys(r.accelerator for r in budgeted))
        text = f"Vela exceeded the SRAM budget it was given in {len(over)}/{len(budgeted)} budgeted rows ({per_acc})"
        if over:
            worst = max(over, key=lambda r: r.vela_sram - r.budget_bytes)
            used = statistics.median(r.vela_sram / r.budget_bytes for r in over if r.budget_bytes)
            text += (f", using a median {used:.2f}x the budget (largest overrun: {worst.model}, {worst.accelerator}, "
                     f"{worst.budget}: asked {_kib(worst.budget_bytes)} KiB, used {_kib(worst.vela_sram)} KiB)")
            refused = sum(r.status == "infeasible" for r in over)
            if refused:
                text += f"; in {refused} of those rows ours refused the budget as infeasible, naming its minimum"
        if not any(r.status == "over-budget" for r in rows):
            text += "; ours kept every budget it compiled under"
        out.append(text + ".")
    both = [r for r in rows if r.cycles_ratio]
    if both:
        parts = [f"geometric mean {_geomean([r.cycles_ratio for r in both]):.3f} over {len(both)} rows"]
        for budget in dict.fromkeys(r.budget for r in both):
            sub = [r.cycles_ratio for r in both if r.budget == budget]
            parts.append(f"{budget} {_geomean(sub):.3f}")
        fair = [r.cycles_ratio for r in both if not r.vela_over_budget]
        # Cycles count NPU work only: where the two leave different operators to the CPU the
        # ratio is not like for like (deeplabv3: Vela runs ops on the NPU that ours leaves).
        alike = [r.cycles_ratio for r in both if r.cpu_ops == r.vela_cpu_ops]
        worst = max(both, key=lambda r: r.cycles_ratio)
        out.append("Cycles ours/Vela (both binaries on our estimator): " + ", ".join(parts)
                   + (f"; where Vela kept its budget {_geomean(fair):.3f} ({len(fair)} rows)" if fair else "")
                   + (f"; with the same CPU operators {_geomean(alike):.3f} ({len(alike)} rows)" if alike else "")
                   + f"; {sum(r.cycles_ratio <= 1.0 for r in both)}/{len(both)} no slower, worst "
                   f"{worst.cycles_ratio:.3f} ({worst.model}, {worst.accelerator}, {worst.budget}).")
    sram = [r for r in rows if r.sram_ratio]
    if sram:
        out.append(f"SRAM ours/Vela: geometric mean {_geomean([r.sram_ratio for r in sram]):.3f}; ours <= Vela's in "
                   f"{sum(r.sram_ratio <= 1.0 for r in sram)}/{len(sram)}.")
    flash = [r.flash / r.vela_flash for r in rows if r.flash and r.vela_flash]
    if flash:
        out.append(f"Flash ours/Vela: geometric mean {_geomean(flash):.3f}.")
    printed = [r.vela_cycles / r.vela_printed_cycles for r in vela_ok if r.vela_cycles and r.vela_printed_cycles]
    if printed:
        out.append(f"Our estimator on Vela's binaries / Vela's printed cycles: geometric mean {_geomean(printed):.3f}, "
                   f"{sum(abs(p - 1) <= 0.05 for p in printed)}/{len(printed)} within 5%.")
    speed = [r.speedup for r in rows if r.speedup]
    if speed:
        out.append(f"Compile wall time, Vela process / our `cascader compile` process: geometric mean "
                   f"{_geomean(speed):.1f}x, median {statistics.median(speed):.1f}x, min {min(speed):.1f}x "
                   f"({len(speed)} rows).")
    inproc = [r.vela_s / r.compile_s for r in rows if r.vela_s and r.compile_s and r.status in ("ok", "over-budget")]
    if inproc:
        out.append(f"Vela process / our in-process compile: geometric mean {_geomean(inproc):.1f}x.")
    return "\n".join(out)


def plot(rows: list[VersusRow], path: str | Path) -> None:
    """Ours/Vela ratios of cycles (top) and SRAM (bottom) per model on a log axis, one line from 1
    per budget, one column per accelerator. Left of 1 ours is better. A hollow dot: Vela used more
    SRAM than the budget; 'inf.': no compile of ours fits the budget; a red '!': a binary that is
    not bit-exact."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    models = list(dict.fromkeys(r.model for r in rows))
    accs = list(dict.fromkeys(r.accelerator for r in rows))
    budgets = list(dict.fromkeys(r.budget for r in rows))
    index = {(r.model, r.accelerator, r.budget): r for r in rows}
    height = max(2.5, 0.22 * len(models) * max(1, len(budgets)) ** 0.5 + 1.2)
    fig, axes = plt.subplots(2, len(accs), figsize=(6.5 * len(accs), 2 * height), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    step = 0.8 / max(1, len(budgets))
    for col, acc in enumerate(accs):
        for panel, (field, label) in enumerate([("cycles_ratio", "cycles ours / Vela (both on our estimator)"),
                                                ("sram_ratio", "SRAM ours / Vela")]):
            ax = axes[panel][col]
            values = [v for r in rows if r.accelerator == acc and (v := getattr(r, field))]
            span = max([2.0] + [max(v, 1 / v) * 1.15 for v in values])
            for k, budget in enumerate(budgets):
                colour = colours[k % len(colours)]
                for i, model in enumerate(models):
                    r = index.get((model, acc, budget))
                    if r is None:
                        continue
                    y = i + (k - (len(budgets) - 1) / 2) * step
                    v = getattr(r, field)
                    if r.status == "infeasible":
                        ax.text(1 / span, y, " inf.", va="center", fontsize=6, color=colour)
                    if not v:
                        continue
                    ax.hlines(y, 1.0, v, color=colour, linewidth=1.5)
                    ax.scatter([v], [y], s=18, zorder=3, color=colour, edgecolors=colour,
                               facecolors="none" if r.vela_over_budget else colour)
                    if r.bit_exact is False or r.vela_bit_exact is False:
                        ax.text(v, y, " !", va="center", fontsize=7, color="red", fontweight="bold")
                ax.scatter([], [], s=18, color=colour, label=budget)
            ax.axvline(1.0, color="black", linewidth=0.8)
            ax.set_xscale("log")
            ax.set_xlim(1 / span, span)
            ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_yticks(range(len(models)))
            ax.set_yticklabels([m[:32] for m in models], fontsize=7)
            ax.set_ylim(len(models) - 0.5, -0.5)
            ax.set_xlabel(label + "   (< 1: ours better)", fontsize=8)
            ax.set_title(acc, fontsize=9)
            ax.grid(axis="x", which="major", alpha=0.3)
            for i in range(1, len(models)):
                ax.axhline(i - 0.5, color="grey", linewidth=0.3, alpha=0.5)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(budgets) + 1, fontsize=8,
               title="budget (hollow dot: Vela used more SRAM than it was given)", title_fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / (2 * height)))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None, prog: str = "python -m cascader.bench") -> int:
    parser = model_parser(__doc__, ACCELERATORS)
    parser.prog = prog
    parser.add_argument("--budgets", default=",".join(BUDGETS),
                        help="comma-separated: unlimited, vela-size, vela-perf, <f>x-vela-size, <f>x-vela-perf, or sizes such as 256KiB "
                             f"(default {','.join(BUDGETS)})")
    parser.add_argument("--no-process", action="store_true",
                        help="skip the process wall-time columns (our `cascader compile` and Vela, run fresh)")
    parser.add_argument("--output-dir", default="bench-results", help="where versus.md/.csv/.png go (default: bench-results)")
    args = parser.parse_args(argv)
    try:
        budgets = parse_budgets(args.budgets)
    except ValueError as e:
        parser.error(str(e))
    accelerators = [a.strip() for a in args.accelerators.split(",") if a.strip()]
    paths = model_paths(args.models, args.only)
    if not paths or not budgets or not accelerators:
        parser.error("nothing to run: no models match (check --only / --models), or no budgets/accelerators")
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    from tqdm import tqdm

    start = time.perf_counter()
    rows: Records = Records()
    with tqdm(total=len(paths) * len(accelerators) * len(budgets), disable=not sys.stderr.isatty(),
              file=sys.stderr, unit="row", dynamic_ncols=True) as bar:
        for path in paths:
            for acc in accelerators:
                vela_size = _once(lambda path=path, acc=acc: vela_size_sram(path, acc))
                vela_performance = _once(lambda path=path, acc=acc: vela_performance_sram(path, acc))
                for budget in budgets:
                    bar.set_description(f"{path.stem[:24]} {acc} {budget}")
                    rows.append(run_row(path, acc, budget, vela_size, process=not args.no_process,
                                        vela_performance=vela_performance))
                    bar.update()
    elapsed = time.perf_counter() - start

    rows.to_csv(out_dir / "versus.csv")  # first: the rows are the run's costly part
    table, summary = markdown_table(rows), summarize(rows)
    summary += f"\nWall time of the benchmark: {elapsed / 60:.1f} min."
    (out_dir / "versus.md").write_text(f"# cascader vs Vela\n\n{table}\n\n{summary}\n")
    try:
        plot(rows, out_dir / "versus.png")
        pictures = f", {out_dir / 'versus.png'}"
    except ImportError:
        pictures = " (no plot: pip install matplotlib)"
    print(table)
    print()
    print(summary)
    print(f"\nwrote {out_dir / 'versus.md'}, {out_dir / 'versus.csv'}{pictures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
