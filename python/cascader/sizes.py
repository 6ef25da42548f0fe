"""Sizes in bytes from what users write: 262144, "256KiB", "1.5MiB", "300kB", "1e6"."""

from __future__ import annotations

import re
from typing import Union

from .errors import InvalidArgumentError

_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1000, "KIB": 1024, "M": 1 << 20, "MB": 1000**2, "MIB": 1 << 20}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*")


def parse_size(value: Union[int, str, None]) -> int | None:
    """Bytes from an int or a string such as "256KiB", "1.5MiB", "300kB" or "1e6" (None:
    unlimited)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidArgumentError(f"sram must be bytes or a size such as '256KiB', not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise InvalidArgumentError(f"sram must not be negative, got {value}")
        return value
    m = _SIZE.fullmatch(str(value))
    unit = m.group(2).upper() if m else None
    if m is None or unit not in _UNITS:
        raise InvalidArgumentError(f"sram {value!r} is not a size; write bytes or e.g. '256KiB', '1.5MiB', '1e6'")
    return int(float(m.group(1)) * _UNITS[unit])
