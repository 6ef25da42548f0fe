"""Progress bars (tqdm) that appear only when the work turns out to be slow.

`delay` keeps a bar hidden for its first seconds, so a compile that takes 50 ms prints nothing
and one that takes a minute shows where it is. Bars go to stderr, away from reports on stdout.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

SHOW_AFTER_SECONDS = 2.0


class _Silent:
    """The part of tqdm's interface callers use, doing nothing (and importing nothing)."""

    def __init__(self, iterable: Iterable | None) -> None:
        self._iterable = iterable

    def __iter__(self):
        return iter(self._iterable or ())

    def __enter__(self) -> "_Silent":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def update(self, n: int = 1) -> None:
        pass

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


def progress(iterable: Iterable | None = None, *, total: int | None = None, desc: str = "",
             enabled: bool = True, unit: str = "it") -> Any:
    """A tqdm bar shown after SHOW_AFTER_SECONDS; a silent stand-in when not `enabled`."""
    if not enabled:
        return _Silent(iterable)
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, delay=SHOW_AFTER_SECONDS, leave=False,
                file=sys.stderr, dynamic_ncols=True)
