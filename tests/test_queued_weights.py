"""Weight encodings queued for the core's background threads (`emit.weights.queue_weights`,
common/pending.hpp): the scheduler starts every operation's encoding and takes each when it
schedules the operation. A queued encoding is the same bytes as one made on the spot, whether
a background thread made it or the taking thread did; it is taken once; its errors reach the
taker as typed exceptions; and one dropped untaken is dropped (or waited for while it runs)."""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.emit.weights import encode_weights, queue_weights


def _volume(seed: int, shape=(64, 3, 3, 24)):
    rng = np.random.default_rng(seed)
    weights = rng.integers(-128, 128, size=shape, dtype=np.int8)
    n = shape[0]
    return weights, (rng.integers(-3, 3, n), rng.integers(-5000, 5000, n), rng.integers(1 << 29, 1 << 30, n),
                     np.full(n, 36))


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-512"])
def test_queued_encodings_are_the_encodings(accelerator):
    options = dict(depthwise=False, part_kernel_first=True, ofm_block_depth=16, accelerator=accelerator)
    volumes = [_volume(seed) for seed in range(12)]
    queued = [queue_weights(w, *channels, **options) for w, channels in volumes]
    # Taken last first: the first are made by the background threads, the last mostly here.
    taken = [q.take() for q in reversed(queued)][::-1]
    for (w, channels), got in zip(volumes, taken):
        want = encode_weights(w, *channels, **options)
        assert got.data == want.data and got.slices == want.slices and got.size == want.size


def test_a_queued_encoding_is_taken_once():
    w, channels = _volume(1)
    q = queue_weights(w, *channels, depthwise=False, part_kernel_first=False, ofm_block_depth=16)
    q.take()
    with pytest.raises(cascader.InvalidArgumentError, match="taken already"):
        q.take()


def test_a_queued_encodings_error_is_raised_by_take():
    w, (zero_points, *rest) = _volume(2)
    w[5, 0, 0, 0] = 127
    zero_points[5] = -200  # 127 - (-200) is outside -255..255
    q = queue_weights(w, zero_points, *rest, depthwise=False, part_kernel_first=False, ofm_block_depth=16)
    with pytest.raises(cascader.InvalidArgumentError, match="OFM channel 5"):
        q.take()


def test_dropped_encodings_leave_the_queue_working():
    volumes = [_volume(seed, (256, 3, 3, 64)) for seed in range(6)]
    for w, channels in volumes:  # dropped at once: most never start, a running one is waited for
        queue_weights(w, *channels, depthwise=False, part_kernel_first=False, ofm_block_depth=16).drop()
    w, channels = volumes[0]
    options = dict(depthwise=False, part_kernel_first=False, ofm_block_depth=16)
    assert queue_weights(w, *channels, **options).take().data == encode_weights(w, *channels, **options).data
