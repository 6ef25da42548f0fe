"""`shared_pool`: the process's threads for core work that releases the GIL (weight encoding and
writing), kept from one call to the next; `capped_workers`: this thread's core work on fewer
threads while background threads (the pool's, the core's job queue) keep the cores busy.

A pool made per call starts its threads per call, and each start waits until the new thread
runs: on a 2-core host busy with other work that wait was 5-15 ms of a 55 ms MobileNetV2-224
plan (its weight encoders' two threads), several times the threads' own start-up. Kept, the
threads wait on the pool's queue between calls and cost nothing.

A forked child gets a new pool: the parent's threads do not exist there.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from . import _core

_pools: dict[int, ThreadPoolExecutor] = {}  # by worker count
_lock = threading.Lock()


def shared_pool(workers: int | None = None) -> ThreadPoolExecutor:
    """The pool of `workers` threads (default: `_core.core_count()`, the cores a compile may
    use), made on first use. Callers must not shut it down; a task must not wait on another
    task of the same pool (the pool may have no idle thread for it)."""
    workers = workers or _core.core_count()
    with _lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cascader")
        return pool


@contextmanager
def capped_workers(workers: int) -> Iterator[None]:
    """The core's parallel work called from this thread within the block runs on at most
    `workers` threads (the calling one among them): where background threads keep every core
    busy, a call spread over more threads waits for helpers that wait for a core (the
    scheduler's depth-sliced encodings while the core's job queue, common/pending.hpp, encodes
    the other operations)."""
    previous = _core.set_worker_cap(workers)
    try:
        yield
    finally:
        _core.set_worker_cap(previous)


def _forget_pools() -> None:
    global _lock
    _pools.clear()  # the threads were the parent's; the executors are left to the collector
    _lock = threading.Lock()  # another thread may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)
