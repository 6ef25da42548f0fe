"""Compile with Arm Vela, for comparison.

Vela (PyPI ``ethos-u-vela``) is Arm's production compiler for the Ethos-U NPUs and the
benchmark cascader is measured against; cascader's benchmarks and tests pin Vela 5.2.0 (the
``test`` extra: ``pip install 'cascader[test]'``). This module runs Vela's command line on a
model the way the benchmarks do and returns where its binary is and what Vela reports:

>>> import cascader, cascader.vela
>>> model = cascader.zoo.ds_cnn_kws()
>>> vela = cascader.vela.compile(model, "ethos-u55-128", optimise="Size")   # doctest: +SKIP
>>> vela.sram_bytes, vela.flash_bytes, vela.estimate().total_cycles          # doctest: +SKIP

Vela's own cycle figure (``VelaBinary.cycles``) comes from Vela's performance model. To compare
a Vela binary with a cascader one, cost both with the same yardstick: ``VelaBinary.estimate()``
and ``CompiledModel.estimate()`` run the same cycle model over both binaries.

Compiles are cached on disk, keyed by the model's bytes and the options (:func:`cache_dir`):
the benchmarks compile the same models again and again, and Vela takes 0.2-0.9 s a model.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Union

from .errors import CascaderError, InvalidArgumentError
from .sim import Estimate, npu_calls
from .sim import estimate as estimate_binary
from .sizes import parse_size
from .tflite import Model, load_model, save_model

if TYPE_CHECKING:
    from .arch import Accelerator, MemoryMode, SystemConfig

__all__ = [
    "UNLIMITED_SRAM",
    "VelaBinary",
    "VelaConfig",
    "VelaNotInstalled",
    "cache_dir",
    "compile",
    "compile_with_vela",
    "executable",
    "supported_operators",
]

#: An arena cache size far above any shared model's working set: Vela's Performance strategy
#: with this target keeps every buffer it wants ("unlimited SRAM" in the benchmarks).
UNLIMITED_SRAM = 64 * 1024 * 1024

# Vela's own configuration file of presets; Vela resolves this name inside its package.
_VELA_INI = "Arm/vela.ini"
# Vela's defaults per accelerator family (what it warns it uses when given neither). Given a
# configuration file, Vela wants both a system and a memory mode: the one not named is this.
_VELA_DEFAULTS = {
    "ethos-u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u65": ("Ethos_U65_Client_Server", "Dedicated_Sram_384KB"),
    "ethos-u85": ("Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB"),
}
_OPTIMISE = ("Size", "Performance")


class VelaNotInstalled(CascaderError):
    """The ``vela`` command is not installed: ``pip install ethos-u-vela==5.2.0``."""


@dataclass(frozen=True)
class VelaConfig:
    """One Vela compile configuration: the options of Vela's command line.

    Parameters
    ----------
    accelerator
        Vela's ``--accelerator-config``, e.g. ``"ethos-u55-128"``.
    optimise
        ``"Performance"`` or ``"Size"`` (Vela's ``--optimise``).
    arena_cache_size
        Vela's ``--arena-cache-size`` in bytes. None: the memory mode's (384 KiB in the U65's and
        U85's default Dedicated_Sram_384KB; 4 GiB, no limit in effect, in Shared_Sram). With
        Performance it is the SRAM target; it is not a cap (Vela lays out more when its schedule
        needs more).
    system_config, memory_mode
        Sections of Vela's own ``Arm/vela.ini`` (``--system-config``, ``--memory-mode``), e.g.
        ``"Ethos_U55_High_End_Embedded"`` and ``"Shared_Sram"``. None: Vela's defaults for the
        accelerator (U55: High_End_Embedded / Shared_Sram; U65: Client_Server /
        Dedicated_Sram_384KB; U85: SYS_DRAM_Mid / Dedicated_Sram_384KB).
    """

    accelerator: str = "ethos-u55-128"
    optimise: str = "Performance"
    arena_cache_size: int | None = None
    system_config: str | None = None
    memory_mode: str | None = None

    @property
    def label(self) -> str:
        """A short name for tables, e.g. ``ethos-u55-128/Performance/arena=256K``."""
        arena = "" if self.arena_cache_size is None else f"/arena={self.arena_cache_size // 1024}K"
        system = "".join(f"/{s}" for s in (self.system_config, self.memory_mode) if s)
        return f"{self.accelerator}/{self.optimise}{arena}{system}"

    def args(self) -> list[str]:
        """Vela's command-line options for this configuration (the model and output folder apart)."""
        a = ["--accelerator-config", self.accelerator, "--optimise", self.optimise]
        if self.arena_cache_size is not None:
            a += ["--arena-cache-size", str(self.arena_cache_size)]
        if self.system_config is not None or self.memory_mode is not None:
            system, mode = _VELA_DEFAULTS.get(self.accelerator[:9], (None, None))
            system, mode = self.system_config or system, self.memory_mode or mode
            a += ["--config", _VELA_INI]
            a += [] if system is None else ["--system-config", system]
            a += [] if mode is None else ["--memory-mode", mode]
        return a

    def cache_key(self) -> str:
        """The text the cache keys this configuration by.

        The three original fields keep the key they had when they were the whole class, so the
        compiles cached before system and memory mode were options stay valid.
        """
        key = (f"VelaConfig(accelerator={self.accelerator!r}, optimise={self.optimise!r}, "
               f"arena_cache_size={self.arena_cache_size!r})")
        if self.system_config is not None or self.memory_mode is not None:
            key += f"[system_config={self.system_config!r}, memory_mode={self.memory_mode!r}]"
        return key


@dataclass
class VelaBinary:
    """What a Vela compile gave: its binary and Vela's own figures.

    Attributes
    ----------
    path
        The ``*_vela.tflite`` Vela wrote (in the cache; copy it to keep it).
    cycles
        Vela's own cycle figure (``cycles_total`` of its summary CSV), from Vela's performance
        model. For a comparison with a cascader binary use :meth:`estimate` instead, the cycle
        model cascader's binaries are measured with.
    sram_bytes
        The SRAM Vela's layout takes (its ``sram_memory_used``).
    seconds
        Wall time of Vela's process when this call ran it; None when the result came from the
        cache.
    config
        The options Vela ran with.
    """

    path: Path
    cycles: float | None
    sram_bytes: int | None
    seconds: float | None = None
    config: VelaConfig | None = None

    @cached_property
    def model(self) -> Model:
        """The binary, read (a TFLite model with ``ethos-u`` custom operators)."""
        return load_model(self.path)

    @cached_property
    def flash_bytes(self) -> int:
        """Bytes of the read-only tensor the ``ethos-u`` operators address (weights, scales, LUTs,
        constants), as ``CompiledModel.flash_bytes`` counts a cascader binary's; the command
        streams are not counted, in either. Read from the binary, so it holds in every memory
        mode (Vela's summary counts the arena in the same DRAM in Dedicated_Sram)."""
        calls = npu_calls(self.model)
        return len(calls[0].flash) if calls else 0

    def estimate(self, stripes: str = "merged") -> Estimate:
        """The binary's cycles on cascader's cycle model (:func:`cascader.estimate`), on the
        system and memory mode Vela compiled for: the yardstick a cascader binary is measured on."""
        config = self.config or VelaConfig()
        return estimate_binary(self.model, system=config.system_config, memory_mode=config.memory_mode, stripes=stripes)

    def __repr__(self) -> str:
        cycles = "-" if self.cycles is None else f"{self.cycles:,.0f}"
        sram = "-" if self.sram_bytes is None else f"{self.sram_bytes:,}"
        label = self.config.label if self.config else "?"
        return f"VelaBinary({label}: SRAM {sram} B, Vela's cycles {cycles}, {self.path.name})"


def cache_dir() -> Path:
    """The folder Vela's compiles are cached in (created when missing).

    ``$CASCADER_VELA_CACHE``, else ``cascader-vela-cache`` in the system's temporary folder.
    Delete it to compile everything again (after upgrading Vela, say).
    """
    d = Path(os.environ.get("CASCADER_VELA_CACHE", Path(tempfile.gettempdir()) / "cascader-vela-cache"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def executable() -> str:
    """The path of the ``vela`` command: on ``PATH``, else beside this Python (a virtual
    environment that is not activated).

    Raises
    ------
    VelaNotInstalled
        When neither exists.
    """
    exe = shutil.which("vela") or str(Path(sys.executable).with_name("vela"))
    if not Path(exe).exists():
        raise VelaNotInstalled("Vela is not installed: no `vela` command on PATH or beside "
                               f"{sys.executable}. Install it with `pip install ethos-u-vela==5.2.0` "
                               "(or `pip install 'cascader[test]'`)")
    return exe


# The summary tables of Vela's supported-operators report, by the target family they head.
_REPORT_TABLES = {"u55": "Ethos-U55 and Ethos-U65 TFLite Summary Table", "u85": "Ethos-U85 TFLite Summary Table"}


def supported_operators(family: str = "u55") -> list[str]:
    """The TFLite operators Vela's ``--supported-ops-report`` lists for a target family:
    "u55" (the Ethos-U55 and U65 table) or "u85". Each may still go to the CPU where a
    constraint of the report's fails; the list is the scope Vela claims.

    Raises
    ------
    VelaNotInstalled
        When Vela is not installed.
    InvalidArgumentError
        For another family.
    """
    if family not in _REPORT_TABLES:
        raise InvalidArgumentError(f"no Vela operator table for {family!r}; families: {', '.join(_REPORT_TABLES)}")
    with tempfile.TemporaryDirectory(prefix="cascader-vela-report-") as work:
        subprocess.run([executable(), "--supported-ops-report"], cwd=work, check=True, capture_output=True)
        lines = (Path(work) / "SUPPORTED_OPS.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip("# ").startswith(_REPORT_TABLES[family]))
    operators = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] not in ("Operator", "---"):
            operators.append(cells[0])
    return operators


def compile_with_vela(model_path: str | os.PathLike, config: VelaConfig) -> VelaBinary:
    """Compile a ``.tflite`` file with Vela, cached by the model's bytes and `config`.

    The form the benchmarks use; :func:`compile` takes a model in any form and the options
    one by one.

    Raises
    ------
    VelaNotInstalled
        When the compile is not cached and Vela is not installed.
    CascaderError
        When Vela fails, with Vela's last lines of output.
    """
    data = Path(model_path).read_bytes()
    key = hashlib.sha256(data + config.cache_key().encode()).hexdigest()[:16]
    out_dir = cache_dir() / key
    stem = Path(model_path).stem
    target = out_dir / f"{stem}_vela.tflite"
    summaries = lambda: glob.glob(str(out_dir / f"{stem}_summary_*.csv"))  # noqa: E731
    # Vela writes the summary last: an entry without one is an interrupted compile.
    seconds = None
    if not (target.exists() and summaries()):
        out_dir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        proc = subprocess.run(
            [executable(), str(model_path), "--output-dir", str(out_dir), *config.args()],
            capture_output=True,
            text=True,
            cwd=out_dir,
        )
        seconds = time.perf_counter() - start
        if proc.returncode != 0 or not target.exists():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
            raise CascaderError(f"Vela failed on {stem} ({config.label}): {tail}")
    cycles = sram = None
    for summary in summaries():
        with open(summary, newline="") as f:
            row = next(csv.DictReader(f))
        cycles = float(row["cycles_total"])
        # KiB as Vela prints them: its byte count / 1024, so the product is whole bytes.
        sram = round(float(row["sram_memory_used"]) * 1024)
    return VelaBinary(target, cycles, sram, seconds, config)


ModelSource = Union[str, os.PathLike, bytes, Model]


def compile(
    model: ModelSource,
    accelerator: Union[str, "Accelerator"] = "ethos-u55-128",
    *,
    optimise: str = "Performance",
    sram: int | str | None = None,
    system: Union[str, "SystemConfig", None] = None,
    memory_mode: Union[str, "MemoryMode", None] = None,
) -> VelaBinary:
    """Compile a model with Vela, for comparison with cascader's compile of it.

    Parameters
    ----------
    model
        A ``.tflite`` path, its bytes, or a :class:`cascader.Model` (e.g. from
        :mod:`cascader.zoo`); the last two are written to the cache first, since Vela reads a file.
    accelerator
        Vela's accelerator configuration, e.g. ``"ethos-u55-128"``, ``"ethos-u65-256"``,
        ``"ethos-u85-256"``.
    optimise
        ``"Performance"`` (Vela's default) or ``"Size"``.
    sram
        Vela's ``--arena-cache-size``: bytes or a size such as ``"256KiB"``. None: the memory
        mode's (no limit in effect in the U55's default Shared_Sram, 384 KiB in the U65's
        default Dedicated_Sram_384KB); :data:`UNLIMITED_SRAM` lifts the U65's. With Performance
        it is a target, not a cap: Vela lays out more when its schedule needs more, so read
        :attr:`VelaBinary.sram_bytes`.
    system, memory_mode
        Sections of Vela's ``Arm/vela.ini``, e.g. ``"Ethos_U55_High_End_Embedded"`` and
        ``"Shared_Sram"``; a :class:`cascader.SystemConfig` preset or a
        :class:`cascader.MemoryMode` stands for its name. None: Vela's defaults for the
        accelerator, which are also cascader's. Naming one, Vela takes its default for the other.

    Returns
    -------
    VelaBinary

    Raises
    ------
    VelaNotInstalled
        When Vela is not installed (and the compile is not cached).
    CascaderError
        When Vela fails; the message ends with Vela's last lines of output.
    InvalidArgumentError
        For an `optimise` other than Size or Performance, or an `sram` that is not a size.
    """
    matches = [o for o in _OPTIMISE if o.lower() == str(optimise).lower()]
    if not matches:
        raise InvalidArgumentError(f"optimise must be 'Size' or 'Performance', got {optimise!r}")
    config = VelaConfig(
        accelerator=str(getattr(accelerator, "name", accelerator)).lower(),
        optimise=matches[0],
        arena_cache_size=parse_size(sram),
        system_config=None if system is None else str(getattr(system, "name", system)),
        memory_mode=None if memory_mode is None else str(getattr(memory_mode, "value", memory_mode)),
    )
    if isinstance(model, (str, os.PathLike)):
        return compile_with_vela(model, config)
    data = save_model(model) if isinstance(model, Model) else bytes(model)
    # Vela reads a file: the model's bytes go into the cache under their own hash, so the
    # same model keeps one path and the compile cache keyed by its bytes finds it again.
    path = cache_dir() / "models" / hashlib.sha256(data).hexdigest()[:16] / "model.tflite"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(data)
        partial.replace(path)  # atomic: a concurrent compile never reads half a model
    return compile_with_vela(path, config)

