"""Summary: the headline figures of a compile, the ones Vela prints after its own."""

from __future__ import annotations

import csv
import html
import io
import os
from dataclasses import asdict, dataclass, field
from typing import Any


def _kib(n: float) -> str:
    return f"{n:,.0f} B ({n / 1024:,.1f} KiB)"


@dataclass(frozen=True)
class Summary:
    """What a compile costs: memory, operators, traffic, cycles and time per inference.

    Cycles are the binary's, on the shared cycle model (`cascader.estimate`), the same
    yardstick Vela's binaries are measured on; `access_cycles` are per memory, summed over the
    operations (each operation takes the max of its NPU cycles and these).
    """

    accelerator: str
    system: str | None
    memory_mode: str | None
    clock_hz: float
    sram_bytes: int
    sram_budget: int | None
    dram_bytes: int  # the off-chip scratch arena (Dedicated_Sram), else 0
    flash_bytes: int  # weights, scales, LUTs and constants the command streams read
    npu_operators: int  # TFLite operators compiled into `ethos-u` operators
    cpu_operators: int
    npu_operations: int  # NPU operations in the command streams (stripes count one each)
    cascades: int
    macs: int
    npu_cycles: int
    total_cycles: float
    compile_seconds: float
    bytes_per_memory: dict[str, float] = field(default_factory=dict)  # read + written per inference
    access_cycles: dict[str, float] = field(default_factory=dict)

    @property
    def inference_seconds(self) -> float:
        return self.total_cycles / self.clock_hz if self.clock_hz else 0.0

    @property
    def inferences_per_second(self) -> float:
        return 1.0 / self.inference_seconds if self.inference_seconds else float("inf")

    def _lines(self) -> list[tuple[str, str]]:
        budget = "unlimited" if self.sram_budget is None else _kib(self.sram_budget)
        operators = self.npu_operators + self.cpu_operators
        cpu_share = 100.0 * self.cpu_operators / operators if operators else 0.0
        rows = [
            ("accelerator", self.accelerator),
            ("system", f"{self.system} ({self.clock_hz / 1e6:g} MHz)"),
            ("memory mode", str(self.memory_mode)),
            ("SRAM used", f"{_kib(self.sram_bytes)}, budget {budget}"),
            ("DRAM used", _kib(self.dram_bytes)),
            ("flash used", _kib(self.flash_bytes)),
            ("NPU operators", f"{self.npu_operators} as {self.npu_operations} NPU operations, "
                              f"{self.cascades} cascade{'s' * (self.cascades != 1)}"),
            ("CPU operators", f"{self.cpu_operators} ({cpu_share:.1f}%)"),
            ("MACs", f"{self.macs:,}"),
        ]
        for m, b in self.bytes_per_memory.items():
            rows.append((f"{m} traffic", f"{b / 1024:,.1f} KiB per inference, "
                                         f"{self.access_cycles.get(m, 0.0):,.0f} access cycles"))
        rows += [
            ("NPU cycles", f"{self.npu_cycles:,}"),
            ("total cycles", f"{self.total_cycles:,.0f}"),
            ("inference time", f"{self.inference_seconds * 1e3:,.3f} ms, "
                               f"{self.inferences_per_second:,.1f} inferences/s" if self.total_cycles
             else "nothing runs on the NPU"),
            ("compile time", f"{self.compile_seconds * 1e3:,.1f} ms"),
        ]
        return rows

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self._lines()) + 2
        return "\n".join(f"{k:<{width}}{v}" for k, v in self._lines())

    __repr__ = __str__  # the table, also where a console prints the value

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                       f"{html.escape(v)}</td></tr>" for k, v in self._lines())
        return f"<table>{rows}</table>"

    def as_dict(self) -> dict[str, Any]:
        """Flat fields (per-memory figures as `<memory>_bytes` / `<memory>_access_cycles`), for CSV."""
        d = asdict(self)
        for m, b in d.pop("bytes_per_memory").items():
            d[f"{m}_bytes"] = b
        for m, c in d.pop("access_cycles").items():
            d[f"{m}_access_cycles"] = c
        d["inference_seconds"] = self.inference_seconds
        d["inferences_per_second"] = self.inferences_per_second
        return d

    def to_csv(self, path: str | os.PathLike | None = None) -> str:
        """One header row and one value row; written to `path` when given."""
        d = self.as_dict()
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(d.keys())
        writer.writerow("" if v is None else v for v in d.values())
        if path is not None:
            with open(path, "w", newline="") as f:
                f.write(out.getvalue())
        return out.getvalue()
