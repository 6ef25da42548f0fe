"""Random networks (`cascader.random_networks`) through the whole compiler: on random targets,
without a budget, at a random one and at 1 byte, every binary fits its budget and is
bit-exact, and every budget below the minimum names one that compiles. Found so far: inner
stripes of a SAME average pool that summed instead of averaging, ADD/SUB rescales outside the
reference's range, dead operators inside a cascade, pools of one window, squeeze-and-excite
gates kept in a cascade's rolling buffer, strided one-channel 1x1 pools the estimator took for
copies, cascades across two adjacent NPU segments, a LOGISTIC table entry a rounding off the
reference, PADs of slices read in place, and 16x8 FULLY_CONNECTEDs rescaled with the
convolutions' reduced multiplier. `python -m cascader.bench.fuzz` runs more seeds."""

from __future__ import annotations

import pytest

from cascader.random_networks import random_network

pytest.importorskip("ai_edge_litert")
from cascader.bench.fuzz import check_network  # noqa: E402

NETWORKS = 40


def test_random_networks_compile_within_budget_and_bit_exact():
    checks = [check_network(seed) for seed in range(NETWORKS)]
    failures = [f"seed {c.seed} ({c.target}; {c.layers}): {f}" for c in checks for f in c.failures]
    assert not failures, "\n".join(failures)
    # The draws reach what they are for: budgets below the minimum, and most binaries judged.
    assert sum(c.infeasible for c in checks) >= NETWORKS // 2
    assert sum(c.exact for c in checks) >= 2 * NETWORKS


# 16x8 networks 0..24 (seed 4's SUB was one off before int16 ADD/SUB were made exact).
INT16_SEEDS = range(25)


def test_int16_random_networks_compile_within_budget_and_bit_exact():
    checks = [check_network(seed, "int16") for seed in INT16_SEEDS]
    failures = [f"seed {c.seed} ({c.target}; {c.layers}): {f}" for c in checks for f in c.failures]
    assert not failures, "\n".join(failures)
    assert sum(c.exact for c in checks) >= 2 * len(INT16_SEEDS)


def test_uint8_random_networks_compile_within_budget_and_bit_exact():
    checks = [check_network(seed, "uint8") for seed in range(20)]
    failures = [f"seed {c.seed} ({c.target}; {c.layers}): {f}" for c in checks for f in c.failures]
    assert not failures, "\n".join(failures)
    assert sum(c.exact for c in checks) >= 40


def test_uint8_networks_are_what_a_uint8_converter_writes():
    """Maps uint8; weights uint8 per tensor with a zero point; each bias at input x weight scale."""
    import numpy as np

    for seed in range(10):
        sg = random_network(seed, "uint8").model.main
        assert all(t.dtype != "int8" for t in sg.tensors)
        for op in sg.operators:
            if op.opcode not in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
                continue
            x, w, b = (sg.tensors[i] for i in op.inputs[:3])
            assert w.dtype == "uint8" and w.quantization.scale.size == 1
            assert np.isclose(b.quantization.scale[0], x.quantization.scale[0] * w.quantization.scale[0], rtol=1e-6)


def test_a_seed_always_gives_the_same_network():
    from cascader import save_model

    assert save_model(random_network(7).model) == save_model(random_network(7).model)
    assert random_network(7).layers != random_network(8).layers
