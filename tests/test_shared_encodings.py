"""Operations of the same weights share their encoded streams (`schedule.encoding_key`).

An LSTM unrolled over its time steps reads the same weight tensors at every step: zoo lstm_kws's
393 weighted operations encode 9 weight volumes. The scheduler encodes each volume once per
block and traversal (and each depth slicing of it once: `schedule._sliced_streams`), and the
operations share the streams. A shared stream must be the one the operation's own encoding
makes, byte for byte (its sizes cost the operation and size its buffer; its bytes go into the
binary): the key holds everything the encoder reads, and any difference in it is another key.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascader import zoo
from cascader.allocation import Lean
from cascader.evolve import evolve
from cascader.lowering import lower
from cascader.schedule import _encode, _sliced_streams, encoding_key, slice_steps
from cascader.scheduling import schedule
from cascader.tflite import as_model

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")


def _same_streams(a, b) -> bool:
    return a.size == b.size and a.slices == b.slices and a.data == b.data


@pytest.fixture(scope="module")
def lstm():
    return as_model(zoo.lstm_kws())


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_lstm_time_steps_share_their_streams_as_their_own_encodings(lstm, accelerator):
    part, segments = lower(lstm, accelerator)
    sched = schedule(part, segments, accelerator)
    weighted = [sop for sop in sched.operations if sop.lowered.weights is not None]
    assert len(weighted) == 393
    streams = {id(sop.direct_encoded if sop.depth_step else sop.encoded) for sop in weighted}
    assert len(streams) <= 2 * 9  # 9 volumes, each whole and in depth slices at most
    groups: dict[int, list] = {}
    for sop in weighted:
        groups.setdefault(id(sop.encoded), []).append(sop)
    for group in groups.values():
        # The first and the last operation of each group, encoded alone: the shared streams.
        for sop in (group[0], group[-1]):
            own = _encode(sop.lowered, sop.block, sop.part_kernel_first, accelerator, depth_step=sop.depth_step)
            assert _same_streams(sop.encoded, own)


def test_the_budgeted_fits_share_depth_slices_as_their_own_encodings(lstm):
    accelerator = "ethos-u65-256"
    part, segments = lower(lstm, accelerator)
    sched = schedule(part, segments, accelerator)
    lean = Lean(sched, part.graph)
    for capacity in (4_000, 3_600):
        fitted = lean.fit(budgeted=True, capacity=capacity)
        for sop in fitted.operations:
            if sop.depth_step and sop.lowered.weights is not None:
                own = _encode(sop.lowered, sop.block, sop.part_kernel_first, accelerator, depth_step=sop.depth_step)
                assert _same_streams(sop.encoded, own)


def _weighted_ops(accelerator: str):
    part, segments = lower(as_model(zoo.conv2d((1, 8, 8, 24), 40, kernel=(3, 3), seed=3)), accelerator)
    return [op for seg in segments for op in seg.operations if op.weights is not None]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@settings(max_examples=12, deadline=None)
@given(channel=st.integers(0, 39), field=st.sampled_from(["bias", "scales", "zero_points", "values"]),
       delta=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_a_key_names_every_input_of_the_encoder(accelerator, channel, field, delta, seed):
    op = _weighted_ops(accelerator)[0]
    block, pkf = (4, 4, 16), False
    w = op.weights
    # Equal contents in other arrays (the values in the same memory): the same key, the same streams.
    copied = evolve(op, weights=replace(w, bias=np.array(w.bias, copy=True), scales=np.array(w.scales, copy=True),
                                        zero_points=np.array(w.zero_points, copy=True)))
    assert encoding_key(copied, block, pkf, accelerator) == encoding_key(op, block, pkf, accelerator)
    # One number changed: another key, whatever the field.
    changed = np.array(getattr(w, field), copy=True)
    flat = changed.reshape(-1) if changed.ndim else changed
    at = channel * flat.size // 40 if flat.ndim else None
    if at is None:
        changed = changed + delta
    elif field == "values":
        flat[at] = (int(flat[at]) + delta + 128) % 256 - 128
    else:
        flat[at] += delta
    other = evolve(op, weights=replace(w, **{field: changed}))
    assert encoding_key(other, block, pkf, accelerator) != encoding_key(op, block, pkf, accelerator)
    # Layout choices too.
    keys = {encoding_key(op, b, p, accelerator, step) for b in ((4, 4, 16), (4, 4, 8)) for p in (False, True)
            for step in (0, 16)}
    assert len(keys) == 8
    # Streams shared by key are the operation's own, for every depth slicing.
    shared: dict = {}
    rng = np.random.default_rng(seed)
    for step in rng.permutation(slice_steps(40))[:2]:
        first = _sliced_streams(op, block, pkf, accelerator, int(step), None, shared)
        again = _sliced_streams(copied, block, pkf, accelerator, int(step), None, shared)
        assert again is first
        assert _same_streams(first, _encode(copied, block, pkf, accelerator, depth_step=int(step)))
