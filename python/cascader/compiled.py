"""CompiledModel: the result of `cascader.compile`, with the figures a user asks of a compile."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .tflite import Model, save_model

if TYPE_CHECKING:
    from .frontend.partition import Partition
    from .memory import MemoryLayout
    from .planner import Frontier
    from .schedule import NpuSchedule
    from .sim.estimator import Estimate


@dataclass(frozen=True)
class Summary:
    """The headline figures of a compile (the ones Vela prints)."""

    accelerator: str
    system: str | None
    memory_mode: str | None
    sram_bytes: int
    sram_budget: int | None
    flash_bytes: int
    total_cycles: float
    npu_operators: int
    cpu_operators: int
    npu_operations: int
    compile_seconds: float

    def __str__(self) -> str:
        budget = "unlimited" if self.sram_budget is None else f"{self.sram_budget:,} B"
        return "\n".join([
            f"accelerator      {self.accelerator} ({self.system}, {self.memory_mode})",
            f"SRAM used        {self.sram_bytes:,} B (budget {budget})",
            f"flash            {self.flash_bytes:,} B",
            f"cycles           {self.total_cycles:,.0f}",
            f"operators        {self.npu_operators} on the NPU ({self.npu_operations} NPU operations), "
            f"{self.cpu_operators} on the CPU",
            f"compile time     {self.compile_seconds * 1000:.1f} ms",
        ])


@dataclass
class CompiledModel:
    """An Ethos-U binary and how it was made.

    ``model`` is the output `.tflite` as a :class:`cascader.Model` (`binary` its bytes); the
    other fields are the intermediate values of the compile, for inspection.
    """

    model: Model
    source: Model
    partition: "Partition"
    schedule: "NpuSchedule"
    layout: "MemoryLayout"
    sram_budget: int | None
    sram_bytes: int
    flash_bytes: int
    accelerator: str
    system: str | None
    memory_mode: str | None
    operations: list[list[dict]]  # per ethos-u operator, the emitted records (cascader.sim.decode's format)
    compile_seconds: float
    _binary: bytes | None = field(default=None, repr=False)

    @property
    def binary(self) -> bytes:
        """The `.tflite` bytes (TFLM's `ethos-u` kernel runs them)."""
        if self._binary is None:
            self._binary = save_model(self.model)
        return self._binary

    def save(self, path: str | os.PathLike) -> None:
        with open(path, "wb") as f:
            f.write(self.binary)

    @cached_property
    def pareto(self) -> "Frontier":
        """The SRAM-versus-cycles frontier of the planner's proposals for this model and target
        (each point laid out by the exact allocator); a budgeted compile takes one of them."""
        from .planner import plan

        return plan(self.source, accelerator=self.accelerator, system=self.system, memory_mode=self.memory_mode)

    @cached_property
    def estimate(self) -> "Estimate":
        """The binary costed by the shared cycle model (the same estimator that costs Vela's)."""
        from .sim.estimator import estimate

        return estimate(self.model, system=self.system, memory_mode=self.memory_mode, accelerator=self.accelerator)

    def summary(self) -> Summary:
        from .frontend.partition import NPU

        npu_ops = sum(len(s.operators) for s in self.partition.segments if s.target == NPU)
        return Summary(
            accelerator=self.accelerator, system=self.system, memory_mode=self.memory_mode,
            sram_bytes=self.sram_bytes, sram_budget=self.sram_budget, flash_bytes=self.flash_bytes,
            total_cycles=float(self.estimate.total_cycles) if self.schedule.operations else 0.0, npu_operators=npu_ops,
            cpu_operators=len(self.partition.graph.operators) - npu_ops,
            npu_operations=len(self.schedule.operations), compile_seconds=self.compile_seconds,
        )

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{html.escape(line[:17].strip())}</td><td>{html.escape(line[17:])}</td></tr>"
                       for line in str(self.summary()).splitlines())
        return f"<table>{rows}</table>"

    def __repr__(self) -> str:
        return (f"CompiledModel({self.accelerator}, SRAM {self.sram_bytes:,} B, flash {self.flash_bytes:,} B, "
                f"{len(self.schedule.operations)} NPU operations)")

    def __getstate__(self) -> dict[str, Any]:  # the cached estimate holds core objects
        state = dict(self.__dict__)
        state.pop("estimate", None)
        return state
