"""Fuzzing the reader: every mutated or truncated file is a valid Model or a ModelError.

Never a crash, a hang, or another exception type. A mutated file that still reads must also
survive the rest of the front end (inspect), the writer and the compiler: `compile` either
gives a binary or raises one of cascader's typed errors with its reason.
"""

from __future__ import annotations

import signal

import numpy as np

import cascader
from cascader import CascaderError, ModelError, load_model, save_model
from cascader import zoo

CASES = 2400
SECONDS_PER_CASE = 10


def _corpus() -> list[tuple[str, bytes]]:
    models = [(name, zoo.get(name)) for name in sorted(zoo.MODELS)] + zoo.single_op_cases()[:8]
    return [(name, save_model(m)) for name, m in models]


def _mutate(data: bytes, rng: np.random.Generator) -> bytes:
    kind = rng.integers(4)
    buf = bytearray(data)
    if kind == 0:  # flip bits in a few random bytes
        for i in rng.integers(0, len(buf), size=rng.integers(1, 9)):
            buf[i] ^= 1 << int(rng.integers(8))
    elif kind == 1:  # truncate
        del buf[int(rng.integers(0, len(buf))) :]
    elif kind == 2:  # overwrite a 32-bit word (offsets, lengths, indices) with a random value
        i = int(rng.integers(0, max(1, len(buf) - 4))) & ~3
        buf[i : i + 4] = rng.integers(0, 2**32, dtype=np.uint64).astype("<u4").tobytes()
    else:  # both: flip bytes in the first 512 (the tables) and truncate
        for i in rng.integers(0, min(512, len(buf)), size=rng.integers(1, 5)):
            buf[i] = int(rng.integers(256))
        del buf[int(rng.integers(len(buf) // 2, len(buf))) :]
    return bytes(buf)


def _timeout(signum, frame):  # pragma: no cover - only on a hang
    raise TimeoutError("a fuzz case ran for over 10 s")


def test_fuzz_reader_never_crashes():
    corpus = _corpus()
    rng = np.random.default_rng(20261122)
    outcomes = {"model": 0, "ModelError": 0, "compiled": 0, "rejected": 0}
    previous = signal.signal(signal.SIGALRM, _timeout)
    try:
        for case in range(CASES):
            name, data = corpus[case % len(corpus)]
            mutated = _mutate(data, rng)
            signal.alarm(SECONDS_PER_CASE)
            try:
                model = load_model(mutated)
            except ModelError:
                outcomes["ModelError"] += 1
                continue
            finally:
                signal.alarm(0)
            outcomes["model"] += 1
            try:
                cascader.inspect(model)
            except ModelError:
                pass
            signal.alarm(SECONDS_PER_CASE)
            try:
                cascader.compile(model)
                outcomes["compiled"] += 1
            except CascaderError as e:
                assert str(e), f"case {case} ({name}): {type(e).__name__} without a reason"
                outcomes["rejected"] += 1
            finally:
                signal.alarm(0)
            try:
                again = load_model(save_model(model))
            except ModelError:
                continue  # e.g. a corrupted enum value the writer refuses to emit
            assert again == model, f"case {case} ({name}): read-write-read changed the model"
    finally:
        signal.signal(signal.SIGALRM, previous)
    # Both outcomes must occur, or the mutations are not exercising the reader.
    assert outcomes["model"] > 100 and outcomes["ModelError"] > 100, outcomes
    assert outcomes["compiled"] > 100 and outcomes["rejected"] > 10, outcomes
