"""The cycle estimator of Ethos-U binaries (`cascader.estimate`), against Vela's own figures.

Vela prints the total cycles of each compile (its summary CSV); the estimator costs Vela's
binary, decoded, on the shared cycle model. On the zoo networks the two totals must agree
within ±5% on ethos-u55-128 (High_End_Embedded, Shared_Sram) and ethos-u65-256
(Client_Server, Dedicated_Sram), Vela's default systems, at --optimise Performance and Size.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import cascader
from cascader import BinaryError, CascaderError, load_model, save_model, zoo
from cascader.sim import npu_calls
from conftest import shared_model_paths, shared_params

pytest.importorskip("ethosu.vela")

from cascader.vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela  # noqa: E402

WITHIN = 0.05
# A wider tolerance per model, with its reason. None now: the transformer block was +8.7% on
# U65-256 (U55-128 +3.3%) while the estimator costed Vela's BATCH_MATMUL (a MUL and a REDUCE_SUM
# of int32 products per column of y) command by command, its transposes' slack for the next
# weight DMA with their maps in SRAM (Vela's scheduler counts them in DRAM, their home) and its
# softmax's SUBs from a constant reading the tensor; as Vela costs them it is +0.08% (U55-128
# exact).
WITHIN_MODEL: dict[str, float] = {}
ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
MODELS = os.environ.get("CASCADER_MODELS")


@pytest.fixture(scope="module")
def zoo_paths(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("zoo")
    paths = {}
    for name in zoo.MODELS:
        p = d / f"zoo_{name}.tflite"
        p.write_bytes(save_model(zoo.get(name)))
        paths[name] = p
    return paths


@pytest.fixture(scope="module")
def kws_u55(zoo_paths):
    return compile_with_vela(zoo_paths["ds_cnn_kws"], VelaConfig("ethos-u55-128", "Performance", UNLIMITED_SRAM))


CONFIGS = [VelaConfig(a, "Performance", UNLIMITED_SRAM) for a in ACCELERATORS] + [
    VelaConfig(a, "Size") for a in ACCELERATORS  # cascaded stripes, weights sliced and buffered
]


# (model, accelerator) pairs known to be beyond 5%, each checked to still be open. None now:
# Vela's unrolled LSTM on U65-256 was 6.6% below (589,990 vs 631,604 cycles) while the estimator
# took the 49 time steps of its input projection (one weight stream) for the stripes of one
# cascaded operation; costed step by step, as Vela does, it is 631,637.
KNOWN_GAPS: set[tuple[str, str]] = set()


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.label)
@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_zoo_total_within_5_percent_of_vela(zoo_paths, name, config):
    accelerator = config.accelerator
    out = compile_with_vela(zoo_paths[name], config)
    est = cascader.estimate(out.path)
    assert est.accelerator == accelerator  # read from the payload's config
    error = (est.total_cycles - out.cycles) / out.cycles
    if (name, accelerator) in KNOWN_GAPS:
        assert abs(error) > WITHIN, f"{name} on {accelerator} is within {WITHIN:.0%} now: drop it from KNOWN_GAPS"
        pytest.xfail(f"{name} on {accelerator}: ours {est.total_cycles:,.0f} vs Vela {out.cycles:,.0f} (KNOWN_GAPS)")
    assert abs(error) <= WITHIN_MODEL.get(name, WITHIN), \
        f"{name} on {accelerator}: ours {est.total_cycles:,.0f} vs Vela {out.cycles:,.0f}"


ACTIVATION_CASES = zoo.activation_op_cases()


@pytest.mark.parametrize("config", CONFIGS[:1] + CONFIGS[3:], ids=lambda c: c.label)
@pytest.mark.parametrize("name,model", ACTIVATION_CASES, ids=[n for n, _ in ACTIVATION_CASES])
def test_activation_ops_within_5_percent_of_vela(name, model, config, tmp_path):
    """LRELU, the built-in TANH/SIGMOID, 8- and 16-bit LUT operations (a 2 KiB table costs its
    DMA into the SHRAM at 1 byte/cycle in Vela's model)."""
    path = tmp_path / f"zoo_{name}.tflite"
    path.write_bytes(save_model(model))
    out = compile_with_vela(path, config)
    est = cascader.estimate(out.path)
    error = (est.total_cycles - out.cycles) / out.cycles
    assert abs(error) <= WITHIN, f"{name} on {config.label}: ours {est.total_cycles:,.0f} vs Vela {out.cycles:,.0f}"


# The shared models Vela compiles in a few seconds; the benchmark (`python -m
# cascader.bench.simulate --estimate-only`) runs all of them. hello_world on U65 is the case
# that needs Vela's buffering slack (its reference-schedule cycles, not elapsed time): its
# weight DMAs each wait on a 500-cycle DRAM latency.
SMALL_SHARED = [p for p in shared_model_paths() if p.stat().st_size < 400_000]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("path", shared_params(SMALL_SHARED))
def test_shared_model_total_within_5_percent_of_vela(path, accelerator):
    out = compile_with_vela(path, VelaConfig(accelerator, "Performance", UNLIMITED_SRAM))
    est = cascader.estimate(out.path)
    error = (est.total_cycles - out.cycles) / out.cycles
    assert abs(error) <= WITHIN, f"{path.stem} on {accelerator}: ours {est.total_cycles:,.0f} vs Vela {out.cycles:,.0f}"


def test_every_operation_and_dma_is_costed_once(kws_u55):
    est = cascader.estimate(kws_u55.path)
    decoded = cascader.sim.decode(kws_u55.path)
    assert len(decoded) == len(est.call_cycles) == 1
    ops = decoded[0].operations
    compute = [i for i, o in enumerate(ops) if o["kind"] != "dma"]
    dmas = [i for i, o in enumerate(ops) if o["kind"] == "dma"]
    rows = [o for o in est.operations if o.kind != "dma"]
    assert sorted(i for o in rows for i in (o.operation, *o.merged)) == compute
    folded = [d for o in est.operations for d in o.dmas]
    assert len(folded) == len(set(folded)) and set(folded) <= set(dmas)
    # Weight DMAs are folded into the convolutions that read the buffers they fill.
    assert any(o.dmas for o in rows if o.kind in ("conv2d", "depthwise_conv2d"))
    assert est.total_cycles == pytest.approx(sum(o.cycles for o in est.operations))
    assert est.total_cycles == pytest.approx(sum(est.call_cycles.values()))
    # The block config is the binary's, as decoded.
    for o in rows:
        assert o.block_from_binary
        assert o.block == tuple(ops[o.operation]["block"])
    # Shared_Sram: feature maps in SRAM, weights read from flash.
    assert est.memory_mode == "Shared_Sram"
    assert est.bytes_per_memory["Sram"] > 0 and est.bytes_per_memory["OffChipFlash"] > 0
    assert "<table>" in est._repr_html_()


def test_target_arguments(kws_u55):
    default = cascader.estimate(kws_u55.path)
    explicit = cascader.estimate(load_model(kws_u55.path), system="Ethos_U55_High_End_Embedded",
                                 memory_mode="Shared_Sram", accelerator="ethos-u55-128")
    assert explicit.total_cycles == default.total_cycles
    # Flash at a sixteenth of the core clock instead of an eighth: weight DMAs get slower.
    slow = cascader.estimate(kws_u55.path.read_bytes(), system="Ethos_U55_Deep_Embedded")
    assert slow.total_cycles > default.total_cycles
    # Everything in SRAM: no flash traffic at all.
    sram = cascader.estimate(kws_u55.path, memory_mode="Sram_Only")
    assert set(sram.bytes_per_memory) == {"Sram"}
    with pytest.raises(CascaderError, match="unknown memory mode"):
        cascader.estimate(kws_u55.path, memory_mode="Nowhere")


def test_total_cycles_without_rows(kws_u55):
    """The totals-only path (compile compares candidate binaries by it) adds up what the full
    estimate does, for Vela's binary and a cascaded one of ours, on another target too."""
    from cascader.sim.estimator import total_cycles

    ours = cascader.compile(zoo.get("mobilenet_v2"), accelerator="ethos-u65-256", sram=100_000)
    for binary, target in ((kws_u55.path, {}), (kws_u55.path, dict(system="Ethos_U55_Deep_Embedded")),
                           (ours.model, {})):
        assert total_cycles(binary, **target) == cascader.estimate(binary, **target).total_cycles
    payload = npu_calls(load_model(kws_u55.path))[0].payload
    arch = cascader.arch.arch_config("ethos-u55-128")
    bare = cascader._core.estimate_driver_payload(payload, arch, operations=False)
    assert bare["operations"] == [] and bare["total_cycles"] == cascader.estimate(kws_u55.path).total_cycles
    with pytest.raises(BinaryError, match="no `ethos-u` operator"):
        total_cycles(zoo.get("resnet8"))


def test_not_a_binary_raises_binary_error(tmp_path):
    with pytest.raises(BinaryError, match="no `ethos-u` operator"):
        cascader.estimate(zoo.get("resnet8"))
    with pytest.raises(CascaderError):
        cascader.estimate(b"\x00" * 64)


def _with_payload(path: Path, payload: bytes):
    model = load_model(path)
    call = npu_calls(model)[0]
    sg = model.subgraphs[0]
    cmd = sg.operators[call.index].inputs[0]
    sg.tensors[cmd].data = np.frombuffer(payload, dtype=np.uint8).copy()
    return model


def test_truncated_payload_raises_binary_error(kws_u55):
    payload = npu_calls(load_model(kws_u55.path))[0].payload
    for cut in (4, 8, len(payload) // 2, len(payload) - 4):
        with pytest.raises(BinaryError):
            cascader.estimate(_with_payload(kws_u55.path, payload[:cut]))


def test_mutated_payloads_never_crash(kws_u55):
    """500 payloads with random words changed: an estimate or a CascaderError, nothing else."""
    payload = np.frombuffer(npu_calls(load_model(kws_u55.path))[0].payload, dtype="<u4")
    model = load_model(kws_u55.path)
    call = npu_calls(model)[0]
    tensor = model.subgraphs[0].tensors[model.subgraphs[0].operators[call.index].inputs[0]]
    rng = np.random.default_rng(0)
    ok = failed = 0
    for _ in range(500):
        words = payload.copy()
        idx = rng.integers(0, words.size, size=rng.integers(1, 4))
        words[idx] = rng.integers(0, 2**32, size=idx.size, dtype=np.uint64).astype("<u4") if rng.random() < 0.5 \
            else words[idx] ^ (np.uint32(1) << rng.integers(0, 32, size=idx.size).astype(np.uint32))
        tensor.data = words.view(np.uint8).copy()
        try:
            est = cascader.estimate(model)
            assert np.isfinite(est.total_cycles) and est.total_cycles >= 0
            ok += 1
        except CascaderError:
            failed += 1
    assert ok and failed  # both outcomes occur: the mutations reach decoding and costing


@pytest.mark.skipif(not MODELS, reason="CASCADER_MODELS is not set")
def test_vela_reference_person_detect():
    """Vela 3.11's binary of tflm_person_detect (as TFLM ships it, for ethos-u55-256): its total
    is close to what Vela 5.2 prints for its own compile of the same model on the same target
    (a different Vela version schedules differently, hence ±10%, not ±5%)."""
    models = Path(MODELS)
    fixed = models / "vela_reference" / "person_detect_vela.tflite"
    if not fixed.exists():
        pytest.skip(f"{fixed} is missing")
    est = cascader.estimate(fixed)
    assert est.accelerator == "ethos-u55-256"  # from the payload's config word
    assert len(est.operations) > 20 and all(o.cycles > 0 for o in est.operations if o.kind != "dma")
    vela = compile_with_vela(models / "tflm_person_detect.tflite", VelaConfig(est.accelerator, "Performance"))
    assert abs(est.total_cycles - vela.cycles) / vela.cycles < 0.10, (est.total_cycles, vela.cycles)


@pytest.mark.parametrize("name", ["mobilenet_v1", "mobilenet_v2"])
def test_velas_one_row_depthwise_stripes_are_not_depth_slices(zoo_paths, name):
    """Vela's Size schedule of MobileNet on U55-128 stripes a cascaded depthwise one OFM row at
    a time, each row reading its weights in flash: rows one brick apart look like depth slices,
    but Vela buffers every depth slice's weights, so these are not merged into one operation
    twice as deep. Costed as run, the total is Vela's own to 0.01% (the merge put it 1.4% over:
    MobileNetV1 373,836 against Vela's 368,652)."""
    out = compile_with_vela(zoo_paths[name], VelaConfig("ethos-u55-128", "Size"))
    assert cascader.estimate(out.path).total_cycles == pytest.approx(out.cycles, rel=1e-4)
