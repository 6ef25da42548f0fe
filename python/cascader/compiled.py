"""CompiledModel: the result of `cascader.compile`, with the figures a user asks of a compile."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from .errors import InvalidArgumentError
from .summary import Summary
from .tflite import Model, save_model

if TYPE_CHECKING:
    from .checking import CheckResult
    from .frontend.partition import Partition
    from .memory import MemoryLayout
    from .planner import Frontier
    from .records import Records
    from .schedule import NpuSchedule
    from .sim.estimator import Estimate


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
    # Makes this model's compiled frontier on this target (`compiler.plan`, bound to it): the
    # result does not import the compile policy that made it.
    frontier: Callable[..., "Frontier"] | None = field(default=None, repr=False)
    _binary: bytes | None = field(default=None, repr=False)
    _estimate: "Estimate | None" = field(default=None, repr=False)

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
        """The SRAM-versus-cycles frontier of this model on this target, every point a binary
        (`cascader.plan`), this one included: it lies on the frontier unless another binary
        beats it on both SRAM and cycles."""
        if self.frontier is None:
            raise InvalidArgumentError("this CompiledModel was not made by cascader.compile: it has no frontier")
        return self.frontier(including=(self,))

    def estimate(self, stripes: str = "merged") -> "Estimate":
        """The binary costed by the shared cycle model (the same estimator that costs Vela's);
        `stripes` as in :func:`cascader.estimate`: "merged" (the headline: a cascaded operation
        costed once, as Vela's binaries are) or "as_run" (every stripe on its own)."""
        from .frontend.partition import NPU
        from .sim.estimator import Estimate, check_stripes, estimate

        check_stripes(stripes)
        if not any(s.target == NPU for s in self.partition.segments):
            # Every operator runs on the CPU, or none is left: the output is the source model,
            # with no NPU call to cost (the estimator refuses such a model as not compiled).
            return Estimate(self.accelerator, self.system, self.memory_mode, [], {}, 0.0)
        if stripes != "merged":
            return estimate(self.model, system=self.system, memory_mode=self.memory_mode,
                            accelerator=self.accelerator, stripes=stripes)
        if self._estimate is None:
            self._estimate = estimate(self.model, system=self.system, memory_mode=self.memory_mode,
                                      accelerator=self.accelerator)
        return self._estimate

    def summary(self) -> Summary:
        """The headline figures (Vela's): memory used, operators, traffic, cycles and time per inference."""
        from .arch import arch_config
        from .frontend.partition import NPU
        from .memory import MemoryConfig

        npu_ops = sum(len(s.operators) for s in self.partition.segments if s.target == NPU)
        est = self.estimate() if self.schedule.operations else None
        config = MemoryConfig.for_target(self.accelerator, self.system, self.memory_mode)
        return Summary(
            accelerator=self.accelerator, system=getattr(self.system, "name", self.system), memory_mode=self.memory_mode,
            clock_hz=float(arch_config(self.accelerator, self.system, self.memory_mode).system.core_clock),
            sram_bytes=self.sram_bytes, sram_budget=self.sram_budget,
            dram_bytes=0 if config.shared_sram else self.layout.sizes.get("scratch", 0), flash_bytes=self.flash_bytes,
            # Removed operators (`Partition.removed`) run nowhere: not on the CPU either.
            npu_operators=npu_ops,
            cpu_operators=len(self.partition.graph.operators) - npu_ops - len(self.partition.removed),
            npu_operations=len(self.schedule.operations),
            cascades=len({op.cascade for op in self.schedule.operations if op.cascade is not None}),
            macs=est.macs if est else 0, npu_cycles=est.npu_cycles if est else 0,
            total_cycles=float(est.total_cycles) if est else 0.0, compile_seconds=self.compile_seconds,
            bytes_per_memory=est.bytes_per_memory if est else {}, access_cycles=est.access_cycles if est else {},
        )

    @cached_property
    def layers(self) -> "Records":
        """Per operation in execution order (`cascader.layers.Layer`): operator, NPU or CPU with
        the reason, cascade, stripe shape, buffer modes, block config, cycles, MACs, weight bytes
        and the SRAM in use. `.to_pandas()`, `.to_csv()` and `.table()` view it."""
        from .layers import layers

        return layers(self.schedule, self.partition, self.layout)

    def run(self, inputs: Sequence[np.ndarray] | np.ndarray) -> list[np.ndarray]:
        """One inference of the binary on the bit-exact simulator; the outputs in order."""
        from .sim import simulate

        return simulate(self.model, inputs)

    def check(self, seeds: int | Sequence[int] = 2, steps: int | None = None) -> "CheckResult":
        """The binary on the simulator against the reference interpreter on the source model,
        on random inputs per seed (`steps` inferences each, state carried: see `cascader.check`);
        per-output max error (0 everywhere: `bit_exact`), or why it could not check."""
        from .checking import check

        return check(self.source, self.model, seeds, steps=steps)

    def plot_pareto(self, path: str | None = None, others=()) -> Any:
        """The SRAM-versus-cycles frontier of compiled binaries (`pareto`) with this compile
        starred, all on the estimator (the yardstick Vela's binaries are measured on; `others`:
        more labelled (name, SRAM, cycles) points, e.g. Vela's)."""
        from .plot import plot_pareto

        return plot_pareto(self.pareto, (self.sram_bytes, self.estimate().total_cycles), others, path)

    def plot_memory(self, path: str | None = None) -> Any:
        """The memory timeline of the real layout: every buffer's address over the schedule."""
        from .plot import plot_memory

        return plot_memory(self.layout, path, title=self.accelerator)

    def plot_layers(self, path: str | None = None) -> Any:
        """Cycles and SRAM in use per layer."""
        from .plot import plot_layers

        return plot_layers(self.layers, path)

    def _repr_html_(self) -> str:
        return self.summary()._repr_html_()

    def __repr__(self) -> str:
        return (f"CompiledModel({self.accelerator}, SRAM {self.sram_bytes:,} B, flash {self.flash_bytes:,} B, "
                f"{len(self.schedule.operations)} NPU operations)")

    def __getstate__(self) -> dict[str, Any]:  # the cached planner frontier holds core objects
        state = dict(self.__dict__)
        state.pop("pareto", None)
        return state
