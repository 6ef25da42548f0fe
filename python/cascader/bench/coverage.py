"""Operator coverage against Vela 5.2: which operators stay on the CPU, and are both bit-exact.

    python -m cascader.bench.coverage [--models DIR] [--accelerators a,b] [--only SUBSTR]
                                      [--operators-only | --models-only]

First, one row per operator of Vela's list for the accelerator's family (Ethos-U55/U65 or U85,
`cascader.vela.supported_operators`) and per activation type its reference kernel takes
(`cascader.operator_zoo`; an operator without a case there is listed as such): where cascader
runs it (NPU, or CPU and why) and where Vela does, and whether each binary is bit-exact against
the reference interpreter on two seeds (with the mismatch where one is not). A row with Vela on
the NPU and cascader on the CPU is flagged "BEHIND".

Then, per model (the zoo networks and operator cases, then every `.tflite` in `--models` /
`$CASCADER_MODELS`) and per accelerator: the operators cascader's compiled model leaves to the
CPU, the operators Vela's output leaves to the CPU (every operator of its main subgraph that
is not an `ethos-u` custom operator), and the operator types where the two differ (+: only
cascader keeps it on the CPU; -: only Vela does). Whether each of our binaries is bit-exact is
the compile benchmark's job (`python -m cascader.bench.compile`).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .. import zoo
from ..arch import Accelerator
from ..compiler import compile as compile_model
from ..errors import CascaderError
from ..operator_zoo import OPERATOR_DTYPES, U85_OPERATOR_DTYPES, operator_model
from ..tflite import load_model, save_model
from ..vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela, supported_operators
from .compile import ZOO_NETWORKS, model_parser, model_paths
from .simulate import validate

SEEDS = (0, 1)

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")


def cpu_operators(model) -> Counter:
    """Opcodes of the main subgraph's operators that are not NPU calls."""
    return Counter(op.opcode for op in model.main.operators if not (op.opcode == "CUSTOM" and op.custom_code == "ethos-u"))


def _difference(ours: Counter, vela: Counter) -> str:
    more, fewer = ours - vela, vela - ours
    return " ".join([f"+{k}x{n}" for k, n in sorted(more.items())] + [f"-{k}x{n}" for k, n in sorted(fewer.items())])


@dataclass
class OperatorRow:
    """One operator and activation type on one accelerator: where each compiler runs it, and
    whether each binary matches the reference (None: not checked, with `note` saying why)."""

    operator: str
    dtype: str
    ours: str  # "NPU", or "CPU: reason"
    vela: str  # "NPU" or "CPU"
    ours_exact: bool | None = None
    vela_exact: bool | None = None
    note: str = ""

    @property
    def behind(self) -> bool:
        return self.vela == "NPU" and self.ours != "NPU"


def _exact(path: Path, binary) -> tuple[bool | None, str]:
    try:
        v = validate(path, binary, SEEDS)
    except CascaderError as e:
        return None, f"not checked: {str(e).splitlines()[0][:90]}"
    if v.bit_exact:
        return True, ""
    return v.bit_exact, f"{v.mismatched} of {v.elements} off, by up to {v.max_abs_diff}"


def operator_row(operator: str, dtype: str, accelerator: str, work: Path) -> OperatorRow:
    """Compile `operator_model(operator, dtype)` with cascader and with Vela and check both."""
    path = work / f"{operator}_{dtype}.tflite"
    save_model(operator_model(operator, dtype), path)
    compiled = compile_model(path, accelerator=accelerator)
    cpu = [i for i, op in enumerate(compiled.source.main.operators) if op.opcode == operator
           and not compiled.partition.verdicts[i].npu]
    ours = "NPU" if not cpu else f"CPU: {compiled.partition.verdicts[cpu[0]].reason}"
    row = OperatorRow(operator, dtype, ours, "?")
    row.ours_exact, ours_note = _exact(path, compiled.model)
    try:
        vela_path = compile_with_vela(path, VelaConfig(accelerator, "Performance", UNLIMITED_SRAM)).path
    except CascaderError as e:
        row.note = f"Vela failed: {str(e).splitlines()[-1][:80]}"
        return row
    row.vela = "CPU" if cpu_operators(load_model(vela_path))[operator] else "NPU"
    row.vela_exact, vela_note = _exact(path, vela_path)
    row.note = "; ".join(f"{who}: {n}" for who, n in (("ours", ours_note), ("Vela", vela_note)) if n)
    return row


def _mark(exact: bool | None) -> str:
    return {True: "exact", False: "OFF", None: "-"}[exact]


def operator_table(accelerator: str, only: str = "") -> list[OperatorRow]:
    """Print and return the operator rows of `accelerator` (operators containing `only`)."""
    rows = []
    print(f"{'operator':<30} {'type':<6} {'cascader':<9} {'Vela':<5} {'ours':<6} {'Vela':<6} note")
    with tempfile.TemporaryDirectory(prefix="cascader-coverage-") as work:
        u85 = Accelerator.is_u85(accelerator)
        # The U85's own operators (comparisons, DIV, GATHER...) have cases of their own.
        cases = {**OPERATOR_DTYPES, **U85_OPERATOR_DTYPES} if u85 else OPERATOR_DTYPES
        for operator in supported_operators("u85" if u85 else "u55"):
            if only not in operator:
                continue
            dtypes = cases.get(operator)
            if dtypes is None:
                print(f"{operator:<30} {'-':<6} no operator case (see its zoo model)")
                continue
            for dtype in dtypes:
                try:
                    row = operator_row(operator, dtype, accelerator, Path(work))
                except CascaderError as e:
                    row = OperatorRow(operator, dtype, "error", "?", note=str(e).splitlines()[0][:100])
                rows.append(row)
                where = "NPU" if row.ours == "NPU" else "CPU"
                reason = "" if row.ours == "NPU" else f"[{row.ours[5:]}] "
                print(f"{operator:<30} {dtype:<6} {where:<9} {row.vela:<5} {_mark(row.ours_exact):<6} "
                      f"{_mark(row.vela_exact):<6} {'BEHIND ' if row.behind else ''}{reason}{row.note}", flush=True)
    behind = [f"{r.operator}/{r.dtype}" for r in rows if r.behind]
    print(f"\n{accelerator}: {len(rows)} rows; cascader on the NPU in {sum(r.ours == 'NPU' for r in rows)}, "
          f"Vela in {sum(r.vela == 'NPU' for r in rows)}; Vela on the NPU and cascader not: "
          f"{len(behind)} {behind}; cascader not bit-exact: "
          f"{[f'{r.operator}/{r.dtype}' for r in rows if r.ours_exact is False]}\n")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = model_parser(__doc__, ACCELERATORS)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--operators-only", action="store_true", help="the operator table only")
    which.add_argument("--models-only", action="store_true", help="the per-model table only")
    args = parser.parse_args(argv)
    if not args.models_only:
        for acc in args.accelerators.split(","):
            operator_table(acc, args.only)
        if args.operators_only:
            return 0
    zoo_models = [(n, zoo.get(n)) for n in ZOO_NETWORKS] + zoo.activation_op_cases()
    paths = model_paths(args.models, args.only, zoo_models)
    header = f"{'model':<40} {'accelerator':<14} {'ours':>5} {'vela':>5}  difference"
    print(header)
    print("-" * len(header))
    at_most, total = 0, 0
    for path in paths:
        for acc in args.accelerators.split(","):
            try:
                ours = cpu_operators(compile_model(path, accelerator=acc).model)
                vela = cpu_operators(load_model(compile_with_vela(path, VelaConfig(acc, "Performance", UNLIMITED_SRAM)).path))
            except CascaderError as e:
                print(f"{path.stem[:40]:<40} {acc:<14} error: {e}")
                continue
            n, m = sum(ours.values()), sum(vela.values())
            total += 1
            at_most += n <= m
            print(f"{path.stem[:40]:<40} {acc:<14} {n:>5} {m:>5}  {_difference(ours, vela)}", flush=True)
    print()
    print(f"CPU operators at most Vela's: {at_most}/{total}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
