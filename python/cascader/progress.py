"""Progress bars (tqdm) that appear only when the work turns out to be slow.

A bar stays hidden for its first SHOW_AFTER_SECONDS, so a compile that takes 50 ms prints
nothing and one that takes a minute shows where it is. tqdm itself is imported only then: its
import costs about as much as a small compile. Bars go to stderr, away from reports on stdout.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Iterable, Iterator

SHOW_AFTER_SECONDS = 2.0


class Progress:
    """The part of tqdm's interface callers use; the real bar is made once the delay has passed."""

    def __init__(self, iterable: Iterable | None, total: int | None, desc: str, unit: str, enabled: bool) -> None:
        self._iterable, self.total, self.desc, self.unit, self.enabled = iterable, total, desc, unit, enabled
        self.n = 0
        self._start = time.monotonic()
        self._bar: Any = None

    def _show(self) -> None:
        if self._bar is None and self.enabled and time.monotonic() - self._start >= SHOW_AFTER_SECONDS:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, initial=self.n, desc=self.desc, unit=self.unit, leave=False,
                             file=sys.stderr, dynamic_ncols=True)

    def update(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)
        self.n += n
        self._show()  # a bar made now starts at n

    def set_description(self, desc: str) -> None:
        self.desc = desc
        self._show()
        if self._bar is not None:
            self._bar.set_description(desc)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __iter__(self) -> Iterator:
        for item in self._iterable or ():
            yield item
            self.update()
        self.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress(iterable: Iterable | None = None, *, total: int | None = None, desc: str = "",
             enabled: bool = True, unit: str = "it") -> Progress:
    """A bar over `iterable` (or updated by hand up to `total`), shown only after SHOW_AFTER_SECONDS."""
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)
    return Progress(iterable, total, desc, unit, enabled)
