"""Fuzzing the binary front door from Python: mutated payloads and flash images of compiled
models through `cascader.estimate` and `cascader.simulate`. Every case is a result or a
BinaryError naming the problem; nothing else (tests/test_sanitizers.py runs the same kind of
mutations through the core under AddressSanitizer and UBSan)."""

from __future__ import annotations

import numpy as np

import cascader
from cascader import BinaryError, zoo
from cascader.reference import random_inputs
from cascader.sim.binary import npu_calls

CASES = 1200


def _target(model, accelerator):
    compiled = cascader.compile(model, accelerator=accelerator)
    sg = compiled.model.subgraphs[0]
    op = sg.operators[npu_calls(compiled.model)[0].index]
    payload, flash = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
    return compiled.model, payload, flash, payload.data.copy(), flash.data.copy(), random_inputs(compiled.source, 0)


def test_mutated_binaries_are_results_or_binary_errors():
    targets = [_target(zoo.ds_cnn_kws(), "ethos-u55-128"), _target(zoo.get("fc_autoencoder"), "ethos-u65-512")]
    rng = np.random.default_rng(20261124)
    outcomes = {"ok": 0, "BinaryError": 0}
    for case in range(CASES):
        model, payload, flash, payload_bytes, flash_bytes, inputs = targets[case % len(targets)]
        words, image = payload_bytes.view("<u4").copy(), flash_bytes.copy()
        kind = rng.integers(4)
        if kind == 0:  # broken weight and scale streams
            idx = rng.integers(0, image.size, size=rng.integers(1, 8))
            image[idx] = rng.integers(0, 256, size=idx.size)
        elif kind == 1:  # random words: opcodes, addresses, lengths, region numbers
            idx = rng.integers(0, words.size, size=rng.integers(1, 4))
            words[idx] = rng.integers(0, 2**32, size=idx.size, dtype=np.uint64).astype("<u4")
        elif kind == 2:  # one flipped bit
            i = rng.integers(words.size)
            words[i] ^= np.uint32(1) << np.uint32(rng.integers(32))
        else:  # a truncated stream
            words = words[: rng.integers(1, words.size)]
        payload.data, flash.data = words.view(np.uint8).copy(), image
        for run in (lambda: cascader.estimate(model), lambda: cascader.simulate(model, inputs)):
            try:
                run()
                outcomes["ok"] += 1
            except BinaryError as e:
                assert str(e), f"case {case}: a BinaryError without a message"
                outcomes["BinaryError"] += 1
        payload.data, flash.data = payload_bytes.copy(), flash_bytes.copy()
    assert outcomes["ok"] > 100 and outcomes["BinaryError"] > 500, outcomes
