"""Ethos-U targets: accelerator configs, system configs and memory modes.

The values live in the C++ core (``src/cascader/arch/``); this module gives them readable
Python shapes. A target for the cost model is the triple (``Accelerator``, ``SystemConfig``,
``MemoryMode``); :func:`arch_config` resolves it.
"""

from __future__ import annotations

import configparser
import enum
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple, Union

from . import _core
from .errors import InvalidArgumentError

MEMORIES = ("Sram", "Dram", "OnChipFlash", "OffChipFlash")


class MemoryMode(enum.Enum):
    """How the constants, arena and fast-cache regions map to the AXI ports.

    ``SRAM_ONLY``: everything in SRAM. ``SHARED_SRAM``: constants on AXI1 (flash), arena and
    cache in SRAM. ``DEDICATED_SRAM``: constants and arena on AXI1 (DRAM), SRAM only as cache.
    """

    SRAM_ONLY = "Sram_Only"
    SHARED_SRAM = "Shared_Sram"
    DEDICATED_SRAM = "Dedicated_Sram"

    @classmethod
    def parse(cls, value: Union["MemoryMode", str]) -> "MemoryMode":
        if isinstance(value, MemoryMode):
            return value
        for m in cls:
            # Vela's Dedicated_Sram_384KB etc. only add a cache size, which the cost model ignores.
            if str(value).lower() == m.value.lower() or str(value).lower().startswith(m.value.lower() + "_"):
                return m
        raise InvalidArgumentError(
            f"unknown memory mode {value!r}; valid: {', '.join(m.value for m in cls)}"
        )

    @staticmethod
    def cache_size(value: Union["MemoryMode", str]) -> Optional[int]:
        """The arena cache size a preset name carries (Vela's ``Dedicated_Sram_384KB``: 393216), else None."""
        m = re.fullmatch(r".*_(\d+)KB", str(getattr(value, "value", value)), flags=re.IGNORECASE)
        return int(m.group(1)) * 1024 if m else None

    @classmethod
    def from_ini(cls, path: Union[str, os.PathLike], name: str) -> Tuple["MemoryMode", Optional[int]]:
        """Section ``[Memory_Mode.<name>]`` of a Vela-style ``.ini`` as (mode, arena_cache_size or None).

        The regions' AXI ports decide the mode: constants, arena and cache all on AXI0 is
        Sram_Only; constants on AXI1 with arena and cache on AXI0 is Shared_Sram; constants
        and arena on AXI1 with the cache on AXI0 is Dedicated_Sram. Other placements are not
        modes the Ethos-U driver layout supports.
        """
        section = name if name.startswith("Memory_Mode.") else f"Memory_Mode.{name}"
        values = _read_section(_read_ini(path), section)
        areas = tuple(values.get(k, "").strip().capitalize() for k in ("const_mem_area", "arena_mem_area", "cache_mem_area"))
        modes = {("Axi0", "Axi0", "Axi0"): cls.SRAM_ONLY, ("Axi1", "Axi0", "Axi0"): cls.SHARED_SRAM,
                 ("Axi1", "Axi1", "Axi0"): cls.DEDICATED_SRAM}
        if areas not in modes:
            raise InvalidArgumentError(
                f"[{section}] in {os.fspath(path)!r}: const/arena/cache areas {'/'.join(areas)} are not a supported "
                f"memory mode (Axi0/Axi0/Axi0 Sram_Only, Axi1/Axi0/Axi0 Shared_Sram, Axi1/Axi1/Axi0 Dedicated_Sram)")
        try:
            size = int(values["arena_cache_size"]) if "arena_cache_size" in values else None
        except ValueError:
            raise InvalidArgumentError(f"[{section}]: arena_cache_size {values['arena_cache_size']!r} is not bytes") from None
        return modes[areas], size

    def __repr__(self) -> str:
        return f"MemoryMode.{self.name}"

    def _core(self) -> "_core.MemoryMode":
        return getattr(_core.MemoryMode, self.value)


def _families() -> Tuple[dict, ...]:
    """The core's target families (one per product: U55, U65, U85), read once."""
    global _FAMILIES
    if _FAMILIES is None:
        _FAMILIES = tuple(_core.target_families())
    return _FAMILIES


_FAMILIES: Optional[Tuple[dict, ...]] = None
# Accelerator name -> its family: the cycle model asks an accelerator's product for every
# operation it costs, and a scan of the families was a tenth of that.
_FAMILY_OF: Dict[str, dict] = {}


class Accelerator:
    """One Ethos-U accelerator configuration, e.g. ``Accelerator("ethos-u55-128")``.

    Every size of the Ethos-U55, U65 and U85 is known, and cascader compiles for each (on the
    U85, operations its emitter does not express yet run on the CPU, each with the reason).
    """

    def __init__(self, name: Union[str, "Accelerator"]) -> None:
        if isinstance(name, Accelerator):
            name = name.name
        self._config = _core.accelerator_config(str(name).lower())

    @staticmethod
    def names(compile_targets: bool = False) -> Tuple[str, ...]:
        """The accelerator names cascader knows; with `compile_targets`, those it compiles for."""
        return tuple(n for f in _families() if f["compiles"] or not compile_targets for n in f["accelerators"])

    @property
    def _family(self) -> dict:
        name = self.name
        family = _FAMILY_OF.get(name)
        if family is None:
            family = _FAMILY_OF[name] = next(f for f in _families() if name in f["accelerators"])
        return family

    @property
    def product(self) -> str:
        """``"ethos-u55"``, ``"ethos-u65"`` or ``"ethos-u85"``."""
        return self._family["name"]

    @staticmethod
    def is_u85(name: Union[str, "Accelerator", None]) -> bool:
        """Whether `name` is an Ethos-U85 (None, no target: False): the rules and emitters that
        use its own mechanisms (operand scaling, OFM transposes, resize) ask this."""
        return name is not None and Accelerator(name).product == "ethos-u85"

    @property
    def compiles(self) -> bool:
        """Whether cascader compiles for this accelerator (every U55, U65 and U85 size; on the
        U85, the operations its emitter does not express yet run on the CPU)."""
        return bool(self._family["compiles"])

    @property
    def default_system(self) -> str:
        """The system config Vela takes for this accelerator when given none."""
        return self._family["default_system"]

    @property
    def default_memory_mode(self) -> "MemoryMode":
        """The memory mode Vela takes for this accelerator when given none."""
        return MemoryMode.parse(self._family["default_memory_mode"])

    def require_compiles(self) -> None:
        """Raise InvalidArgumentError when cascader cannot compile for this accelerator."""
        if not self.compiles:
            raise InvalidArgumentError(
                f"cascader does not compile for {self.name} yet: it decodes Vela's {self.product} binaries "
                f"(cascader.sim.decode); compile targets are {', '.join(self.names(compile_targets=True))}")

    name = property(lambda self: self._config.name)
    macs_per_cycle = property(lambda self: self._config.macs_per_cycle, doc="MACs per cycle per core")
    cores = property(lambda self: self._config.cores)
    shram_banks = property(lambda self: self._config.shram_banks)
    shram_bank_bytes = property(lambda self: self._config.shram_bank_bytes)
    shram_reserved_output_banks = property(lambda self: self._config.shram_reserved_output_banks)
    shram_reserved_end_banks = property(lambda self: self._config.shram_reserved_end_banks)
    shram_granules = property(lambda self: tuple(self._config.shram_granules))
    output_cycles_per_element = property(lambda self: tuple(self._config.output_cycles_per_element))
    activation_cycles_per_element = property(lambda self: tuple(self._config.activation_cycles_per_element))
    axi_data_width_bits = property(lambda self: 8 * self._config.axi_bytes_per_cycle)
    max_outstanding_dma = property(lambda self: self._config.max_outstanding_dma)
    max_outstanding_kernels = property(lambda self: self._config.max_outstanding_kernels)
    weight_decoders = property(lambda self: self._config.weight_decoders,
                               doc="Weight streams a convolution reads (Ethos-U85; 1 elsewhere)")

    @property
    def ofm_ublocks(self) -> Tuple[Tuple[int, int, int], ...]:
        """The OFM micro-blocks the MAC array can take (Ethos-U85; empty elsewhere)."""
        return tuple((b.height, b.width, b.depth) for b in self._config.ofm_ublocks)

    @property
    def internal_ram(self) -> Dict[str, int]:
        """The Ethos-U85's internal RAM bytes (IFM buffer, accumulators, output, chaining buffer)."""
        r = self._config.internal_ram
        return {"ifm": r.ifm_bytes, "acc": r.acc_bytes, "ob": r.ob_bytes, "cb": r.cb_bytes}

    @property
    def ofm_ublock(self) -> Tuple[int, int, int]:
        """OFM micro-block (height, width, depth)."""
        b = self._config.ofm_ublock
        return (b.height, b.width, b.depth)

    @property
    def ifm_ublock(self) -> Tuple[int, int, int]:
        """IFM micro-block (height, width, depth)."""
        b = self._config.ifm_ublock
        return (b.height, b.width, b.depth)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Accelerator) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        memory = (f"SHRAM {self.shram_banks} x {self.shram_bank_bytes} B" if self.shram_banks
                  else f"{self.weight_decoders} weight decoder(s), IFM RAM {self.internal_ram['ifm']} B")
        return (
            f"Accelerator({self.name!r}: {self.macs_per_cycle} MACs/cycle x {self.cores} core(s), "
            f"OFM ublock {self.ofm_ublock}, {memory}, AXI {self.axi_data_width_bits} bit)"
        )


@dataclass
class MemorySpec:
    """Timing of one memory: clock relative to the core, burst bytes, latencies in core cycles,
    AXI ports, and the transactions it keeps outstanding (reads, writes)."""

    clock_scale: float = 1.0
    burst_length: int = 1
    read_latency: int = 0
    write_latency: int = 0
    ports_used: int = 1
    max_reads: int = 1
    max_writes: int = 1


@dataclass
class SystemConfig:
    """Core clock and the memories behind the two AXI ports.

    Build one from a preset (:meth:`preset`), a Vela ``.ini`` (:meth:`from_ini`) or by hand.
    """

    name: str
    core_clock: float
    axi0: str = "Sram"
    axi1: str = "OffChipFlash"
    memories: Dict[str, MemorySpec] = field(default_factory=dict)

    @staticmethod
    def preset_names() -> Tuple[str, ...]:
        return tuple(_core.system_config_preset_names())

    @classmethod
    def preset(cls, name: str) -> "SystemConfig":
        """One of the presets Vela's vela.ini ships (e.g. ``"Ethos_U55_High_End_Embedded"``,
        ``"Ethos_U85_SYS_DRAM_Mid"``)."""
        c = _core.system_config_preset(name)
        mems = {
            m: MemorySpec(s.clock_scale, s.burst_length, s.read_latency, s.write_latency, s.ports_used,
                          s.max_reads, s.max_writes)
            for m, s in zip(MEMORIES, c.memories)
        }
        return cls(c.name, c.core_clock, c.axi0.name, c.axi1.name, mems)

    @classmethod
    def from_ini(cls, path: Union[str, os.PathLike], name: str) -> "SystemConfig":
        """Read section ``[System_Config.<name>]`` of a Vela-style ``.ini`` (``inherit=`` honoured)."""
        section = name if name.startswith("System_Config.") else f"System_Config.{name}"
        values = _read_section(_read_ini(path), section)
        short = section[len("System_Config."):]
        try:
            axi0 = values.get("axi0_port", "Sram")
            axi1 = values.get("axi1_port", "OffChipFlash")
            for port in (axi0, axi1):
                if port not in MEMORIES:
                    raise InvalidArgumentError(f"{section}: unknown memory {port!r}; valid: {', '.join(MEMORIES)}")
            mems = {}
            for m in (axi0, axi1):
                mems[m] = MemorySpec(
                    clock_scale=float(values.get(f"{m}_clock_scale", 1.0)),
                    burst_length=int(values.get(f"{m}_burst_length", 1)),
                    read_latency=int(values.get(f"{m}_read_latency", 0)),
                    write_latency=int(values.get(f"{m}_write_latency", 0)),
                    ports_used=max(1, int(values.get(f"{m}_ports_used", 1))),
                    max_reads=int(values.get(f"{m}_max_reads", 1)),
                    max_writes=int(values.get(f"{m}_max_writes", 1)),
                )
            return cls(short, float(values.get("core_clock", 1.0)), axi0, axi1, mems)
        except ValueError as e:
            raise InvalidArgumentError(f"{section} in {os.fspath(path)!r}: {e}") from None

    def _core(self) -> "_core.SystemConfig":
        c = _core.SystemConfig()
        c.name = self.name
        c.core_clock = float(self.core_clock)
        try:
            c.axi0 = getattr(_core.MemoryArea, self.axi0)
            c.axi1 = getattr(_core.MemoryArea, self.axi1)
        except AttributeError:
            raise InvalidArgumentError(f"AXI ports must name one of {', '.join(MEMORIES)}") from None
        specs = []
        for m in MEMORIES:
            s = self.memories.get(m, MemorySpec())
            cs = _core.MemorySpec()
            cs.clock_scale, cs.burst_length = float(s.clock_scale), int(s.burst_length)
            cs.read_latency, cs.write_latency, cs.ports_used = int(s.read_latency), int(s.write_latency), int(s.ports_used)
            cs.max_reads, cs.max_writes = int(s.max_reads), int(s.max_writes)
            specs.append(cs)
        c.memories = specs
        return c

    def __repr__(self) -> str:
        mems = ", ".join(
            f"{m}(x{self.memories[m].clock_scale:g}, burst {self.memories[m].burst_length}, "
            f"lat {self.memories[m].read_latency}/{self.memories[m].write_latency})"
            for m in (self.axi0, self.axi1)
            if m in self.memories
        )
        return f"SystemConfig({self.name!r}: {self.core_clock / 1e6:g} MHz, AXI0={self.axi0}, AXI1={self.axi1}; {mems})"


def _read_ini(path: Union[str, os.PathLike]) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    try:
        if not parser.read(os.fspath(path)):
            raise InvalidArgumentError(f"cannot read config file {os.fspath(path)!r}")
    except configparser.Error as e:
        raise InvalidArgumentError(f"config file {os.fspath(path)!r} is not a valid .ini: {e}") from None
    return parser


def ini_sections(path: Union[str, os.PathLike]) -> Tuple[str, ...]:
    """The section names of a Vela-style ``.ini`` (``System_Config.X``, ``Memory_Mode.Y``)."""
    return tuple(_read_ini(path).sections())


def _read_section(parser: configparser.ConfigParser, section: str, seen: Optional[set] = None) -> Dict[str, str]:
    """Options of `section`, with those of its ``inherit=`` chain underneath (Vela's rule)."""
    seen = seen or set()
    if not parser.has_section(section):
        raise InvalidArgumentError(f"section [{section}] not found; sections: {', '.join(parser.sections())}")
    if section in seen:
        raise InvalidArgumentError(f"[{section}] inherits from itself")
    seen.add(section)
    values: Dict[str, str] = {}
    if parser.has_option(section, "inherit"):
        values.update(_read_section(parser, parser.get(section, "inherit"), seen))
    values.update({k: v for k, v in parser.items(section) if k != "inherit"})
    # configparser lower-cases keys; Vela's keys are Mixed_Case.
    return {_vela_case(k): v for k, v in values.items()}


def _vela_case(key: str) -> str:
    for m in MEMORIES:
        if key.startswith(m.lower() + "_"):
            return m + key[len(m):]
    return key


# Vela's defaults for the U55 (False) and the U65 (True), keyed by AcceleratorConfig.is_u65.
DEFAULT_SYSTEM = {u65: Accelerator(n).default_system for u65, n in ((False, "ethos-u55-128"), (True, "ethos-u65-256"))}
DEFAULT_MODE = {u65: Accelerator(n).default_memory_mode for u65, n in ((False, "ethos-u55-128"), (True, "ethos-u65-256"))}


def arch_config(
    accelerator: Union[str, Accelerator] = "ethos-u55-128",
    system: Union[str, SystemConfig, None] = None,
    memory_mode: Union[str, MemoryMode, None] = None,
) -> "_core.ArchConfig":
    """Resolve a target. Defaults follow Vela: U55 on High_End_Embedded / Shared_Sram, U65 on
    Client_Server / Dedicated_Sram, U85 on SYS_DRAM_Mid / Dedicated_Sram."""
    acc = Accelerator(accelerator)
    if system is None:
        system = acc.default_system
    if isinstance(system, str):
        system = SystemConfig.preset(system)
    mode = acc.default_memory_mode if memory_mode is None else MemoryMode.parse(memory_mode)
    return _core.ArchConfig(acc._config, system._core(), mode._core())
