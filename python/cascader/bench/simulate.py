"""Vela-validation of the simulator, and its benchmark table.

For each model: compile with Vela (`vela` CLI of the test extra) on a configuration, simulate
Vela's binary with `cascader.sim.simulate` on random input sets, and compare with the
reference interpreter (BUILTIN_REF kernels) on the original model. Run as

    python -m cascader.bench.simulate [--models DIR] [--quick]

which prints, per model and configuration: bit-exact yes/no (with the first differing
output and the largest difference), Vela's printed cycles, the estimator's cycles for Vela's
binary (`cascader.estimate`, on Vela's default system for the accelerator, as Vela's figure)
with its error against Vela's, and the simulation time.
"""

from __future__ import annotations

import argparse
import collections
import glob
import hashlib
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..checking import check
from ..errors import CascaderError
from ..sim import estimate
from ..tflite import Model, load_model
# Vela's compiles are the public helper's (cascader.vela), shared with the other benchmarks.
from ..vela import UNLIMITED_SRAM, VelaConfig, cache_dir, compile_with_vela
from ..vela import executable as vela_executable


# The Ethos-U85 rows: Vela's default U85 system (Ethos_U85_SYS_DRAM_Mid, Dedicated_Sram_384KB).
# A binary using a U85 mechanism the simulator does not run is "not simulated", with the
# mechanism named (tests/test_u85_mechanisms.py lists those it runs).
U85_ROWS = ("ethos-u85-256",)


def standard_configs(accelerator: str) -> list[VelaConfig]:
    """Performance with unlimited SRAM, and Size (the tight arena is derived per model)."""
    return [
        VelaConfig(accelerator, "Performance", UNLIMITED_SRAM),
        VelaConfig(accelerator, "Size"),
    ]


def vela_cascades(model_path: str | os.PathLike, config: VelaConfig) -> int:
    """How many cascades Vela's schedule has for `config`: the cascade ids its
    `--verbose-schedule` report assigns to two operations or more. Run once per model and
    options, its report cached beside the compiles."""
    data = Path(model_path).read_bytes()
    key = hashlib.sha256(data + config.cache_key().encode() + b"schedule").hexdigest()[:16]
    out_dir = cache_dir() / key
    report = out_dir / "schedule.txt"
    if not report.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([vela_executable(), str(model_path), "--output-dir", str(out_dir), "--verbose-schedule",
                               *config.args()], capture_output=True, text=True, cwd=out_dir)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
            raise CascaderError(f"Vela failed on {Path(model_path).stem} ({config.label}): {tail}")
        report.write_text(proc.stdout)
    ids = collections.Counter(re.findall(r"Assigned Cascade = (\d+)", report.read_text()))
    return sum(1 for cascade, ops in ids.items() if cascade != "0" and ops > 1)


@dataclass
class Validation:
    model: str
    config: str
    bit_exact: bool | None  # None when Vela or the simulator failed
    max_abs_diff: int = 0
    mismatched: int = 0
    elements: int = 0
    vela_cycles: float | None = None
    est_cycles: float | None = None  # cascader.estimate on the same binary
    sim_seconds: float = 0.0  # best over the input sets (the machine is shared; best is stablest)
    error: str = ""
    details: list[str] = field(default_factory=list)


def validate(
    model_path: str | os.PathLike,
    binary: str | os.PathLike | bytes | Model,
    seeds: tuple[int, ...] = (0, 1, 2),
    *,
    config_label: str = "",
    vela_cycles: float | None = None,
) -> Validation:
    """Simulate `binary` and compare with the reference interpreter on the original model."""
    result = Validation(Path(model_path).stem, config_label, None, vela_cycles=vela_cycles)
    binary_model = binary if isinstance(binary, Model) else load_model(binary)
    checked = check(model_path, binary_model, seeds)
    result.bit_exact = checked.bit_exact if checked.checked or checked.mismatched else None
    if not checked.checked:
        result.error = f"could not check: {checked.reason}"[:160]
    result.sim_seconds = checked.sim_seconds
    result.details = checked.details
    result.elements = sum(o.elements for o in checked.outputs)
    result.mismatched = sum(o.mismatched for o in checked.outputs)
    result.max_abs_diff = int(min(checked.max_abs_error, 2**31))
    try:
        result.est_cycles = estimate(binary_model).total_cycles
    except CascaderError as e:
        result.details.append(f"estimate: {type(e).__name__}: {e}"[:120])
    return result


def validate_with_vela(model_path: str | os.PathLike, config: VelaConfig, seeds=(0, 1, 2)) -> Validation:
    name = Path(model_path).stem
    try:
        out = compile_with_vela(model_path, config)
    except CascaderError as e:
        return Validation(name, config.label, None, error=str(e).splitlines()[-1][:120])
    try:
        return validate(model_path, out.path, seeds, config_label=config.label, vela_cycles=out.cycles)
    except CascaderError as e:
        return Validation(name, config.label, None, vela_cycles=out.cycles, error=f"{type(e).__name__}: {e}"[:160])


def estimate_with_vela(model_path: str | os.PathLike, config: VelaConfig) -> Validation:
    """Compile with Vela and estimate its binary, without simulating (bit_exact stays None)."""
    name = Path(model_path).stem
    try:
        out = compile_with_vela(model_path, config)
    except CascaderError as e:
        return Validation(name, config.label, None, error=str(e).splitlines()[-1][:120])
    row = Validation(name, config.label, None, vela_cycles=out.cycles)
    try:
        row.est_cycles = estimate(out.path).total_cycles
    except CascaderError as e:
        row.error = f"estimate: {type(e).__name__}: {e}"[:160]
    return row


def tight_config(model_path: str | os.PathLike, accelerator: str) -> VelaConfig | None:
    """A tight arena: the SRAM Vela's Size-optimised compile uses, rounded up to 1 KiB."""
    try:
        size = compile_with_vela(model_path, VelaConfig(accelerator, "Size"))
    except CascaderError:
        return None
    if size.sram_bytes is None:
        return None
    arena = int(-(-size.sram_bytes // 1024) * 1024)
    return VelaConfig(accelerator, "Performance", max(arena, 1024))


def estimate_error(r: Validation) -> float | None:
    """(estimate - Vela) / Vela, or None when either figure is missing."""
    if not r.vela_cycles or r.est_cycles is None:
        return None
    return (r.est_cycles - r.vela_cycles) / r.vela_cycles


def format_table(rows: list[Validation]) -> str:
    head = (f"{'model':40} {'config':38} {'bit-exact':9} {'max|d|':>6} {'vela cycles':>12} {'est cycles':>12} "
            f"{'err':>7} {'sim s':>7}  note")
    lines = [head, "-" * len(head)]
    for r in rows:
        exact = "-" if r.bit_exact is None else ("yes" if r.bit_exact else "NO")
        cyc = "-" if r.vela_cycles is None else f"{r.vela_cycles:,.0f}"
        est = "-" if r.est_cycles is None else f"{r.est_cycles:,.0f}"
        err = estimate_error(r)
        err_s = "-" if err is None else f"{100 * err:+.1f}%"
        note = r.error or ("; ".join(r.details[:1]))
        lines.append(
            f"{r.model[:40]:40} {r.config[:38]:38} {exact:9} {r.max_abs_diff:>6} {cyc:>12} {est:>12} {err_s:>7} "
            f"{r.sim_seconds:>7.3f}  {note}"
        )
    return "\n".join(lines)


# The speed comparison of the Ethos-U85 paths with the Ethos-U55 ones (#42): Vela's binaries
# of one MobileNetV2 at 224x224 (alpha 1.0) for each accelerator.
SPEED_ACCELERATORS = ("ethos-u55-128", "ethos-u85-256")


def speed_table(repeats: int = 5) -> str:
    """Best-of-`repeats` wall time of simulating (one random input) and of estimating Vela's
    binary of MobileNetV2-224 for each of SPEED_ACCELERATORS, as a printable table."""
    import time

    import numpy as np

    from .. import zoo
    from ..sim import simulate
    from ..vela import compile as vela_compile

    model = zoo.mobilenet_v2(alpha=1.0, resolution=224)
    shape = tuple(model.subgraphs[0].tensors[model.subgraphs[0].inputs[0]].shape)
    x = np.random.default_rng(0).integers(-128, 128, size=shape, dtype=np.int8)
    lines = [f"{'MobileNetV2-224 (Vela 5.2 binary)':36} {'simulate ms':>12} {'estimate ms':>12}"]
    for acc in SPEED_ACCELERATORS:
        binary = vela_compile(model, acc).model
        sim_s, est_s = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            simulate(binary, [x])
            sim_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            estimate(binary)
            est_s.append(time.perf_counter() - start)
        lines.append(f"{acc:36} {1000 * min(sim_s):>12.1f} {1000 * min(est_s):>12.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=os.environ.get("CASCADER_MODELS", ""), help="folder of .tflite models")
    parser.add_argument("--quick", action="store_true", help="ethos-u55-128 Performance only, one seed")
    parser.add_argument("--only", default="", help="substring filter on model names")
    parser.add_argument("--estimate-only", action="store_true",
                        help="no simulation: Vela's cycles against the estimator's, at Performance")
    parser.add_argument("--accelerators", default="ethos-u55-128,ethos-u65-256",
                        help="comma-separated, for --estimate-only")
    parser.add_argument("--speed", action="store_true",
                        help="only the speed table: simulation and estimation of MobileNetV2-224, U55 against U85")
    args = parser.parse_args(argv)
    if args.speed:
        print(speed_table())
        return 0
    if not args.models:
        parser.error("give --models or set CASCADER_MODELS")
    paths = sorted(p for p in glob.glob(os.path.join(args.models, "*.tflite")) if args.only in Path(p).stem)
    rows: list[Validation] = []
    fixed = Path(args.models) / "vela_reference" / "person_detect_vela.tflite"
    if fixed.exists() and "person" in (args.only or "person"):
        row = validate(Path(args.models) / "tflm_person_detect.tflite", fixed, config_label="vela_reference (3.11)")
        rows.append(row)
        print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    seeds = (0,) if args.quick else (0, 1, 2)
    for path in paths:
        if args.estimate_only:
            for acc in args.accelerators.split(","):
                rows.append(estimate_with_vela(path, VelaConfig(acc, "Performance", UNLIMITED_SRAM)))
                print(format_table(rows[-1:]).splitlines()[-1], flush=True)
            continue
        accelerators = ["ethos-u55-128"] if args.quick else ["ethos-u55-128", "ethos-u65-256"]
        for acc in accelerators:
            configs = [VelaConfig(acc, "Performance", UNLIMITED_SRAM)]
            if not args.quick:
                configs.append(VelaConfig(acc, "Size"))
                tight = tight_config(path, acc)
                if tight is not None:
                    configs.append(tight)
            for config in configs:
                rows.append(validate_with_vela(path, config, seeds))
                print(format_table(rows[-1:]).splitlines()[-1], flush=True)
        if not args.quick:  # the dual-core configuration, and the Ethos-U85, at one setting each
            for acc in ("ethos-u65-512", *U85_ROWS):
                rows.append(validate_with_vela(path, VelaConfig(acc, "Performance", UNLIMITED_SRAM), seeds))
                print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(format_table(rows))
    exact = sum(1 for r in rows if r.bit_exact)
    print(f"\n{exact}/{len(rows)} bit-exact; {sum(1 for r in rows if r.bit_exact is None)} not simulated")
    errors = [e for e in map(estimate_error, rows) if e is not None]
    if errors:
        within = sum(abs(e) <= 0.05 for e in errors)
        worst = max(errors, key=abs)
        print(f"estimator vs Vela's printed cycles: {within}/{len(errors)} within ±5%, worst {100 * worst:+.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
