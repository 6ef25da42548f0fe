"""The cycle model against Vela 5.2's own per-layer estimates, on a fixed CI subset.

The full sweep (64 single-op models x 5 accelerators) is the benchmark
``python -m cascader.bench.calibration``; here a fixed handful of (case, accelerator) pairs
runs Vela and checks each within ±5% (in the single-op sweeps: every tensor in SRAM, and the presets'
memory modes with weights buffered from flash / DRAM), and a few multi-operation lowerings
costed by our estimator on Vela's own binary.
"""

from __future__ import annotations

import shutil

import pytest

from cascader.bench import calibration as cal

pytest.importorskip("ethosu.vela")
pytest.importorskip("cascader.zoo", reason="single-op models come from cascader.zoo")


def test_sweep_covers_the_required_space() -> None:
    cases = cal.sweep()
    assert len(cases) >= 60 and len({c.name for c in cases}) == len(cases)
    kinds = {c.kind for c in cases}
    assert kinds == {"conv2d", "depthwise_conv2d", "max_pool", "avg_pool", "add", "mul", "fully_connected"}
    convs = {(c.kernel[0], c.stride[0]) for c in cases if c.kind == "conv2d"}
    assert {(k, s) for k in (1, 3, 5, 7) for s in (1, 2)} <= convs
    assert {c.kernel[0] for c in cases if c.kind == "depthwise_conv2d"} >= {3, 5}
    assert any(c.ifm2 for c in cases if c.kind == "add") and any(c.ifm2 for c in cases if c.kind == "mul")
    channels = [c.ifm[-1] for c in cases] + [c.out_channels for c in cases if c.out_channels]
    assert min(channels) <= 8 and max(channels) >= 512
    spatial = [c.ifm[1] for c in cases if len(c.ifm) == 4]
    assert min(spatial) == 1 and max(spatial) == 224
    names = {c.name for c in cases}
    assert all(name in names for name, _, _ in cal.CI_SUBSET)


@pytest.mark.skipif(shutil.which("vela") is None, reason="vela command not installed")
@pytest.mark.parametrize("name, accelerator, mode", cal.CI_SUBSET)
def test_within_5_percent_of_vela(name: str, accelerator: str, mode: str) -> None:
    case = next(c for c in cal.sweep() if c.name == name)
    [result] = cal.calibrate([(case, accelerator)], cache_path=None, mode=mode)
    reason = cal.KNOWN_DEVIATIONS.get(name)
    if reason:
        pytest.xfail(f"{name}: {reason}")
    assert abs(result.error) <= cal.WITHIN, (
        f"{name} on {accelerator}: Vela {result.vela:.0f} cycles, ours {result.ours:.0f} ({100 * result.error:+.1f}%)"
    )


# One pair per kind of multi-operation lowering (the benchmark's `networks` sweep runs them all).
NETWORK_CI_SUBSET = (
    ("softmax_int16", "ethos-u55-128"),
    ("exp_int16", "ethos-u65-256"),
    ("mean_hw_8x8x64", "ethos-u55-256"),
    ("squared_difference_16x16x16", "ethos-u65-512"),
    # Vela's block for it fits SHRAM only with the IFM block at its stored size (6 weight
    # fetches instead of Vela's 5 otherwise: +20%).
    ("transpose_conv_2x2_s2_12x12x32_16", "ethos-u55-128"),
    ("transpose_conv_3x3_s2_8x8x16_16", "ethos-u55-256"),
    # Each phase costed over the 23x23 box it spans, as Vela does (-53% otherwise).
    ("resize_bilinear_12x12x32", "ethos-u65-256"),
    # Transpose steps costed by their traffic, as Vela does (+178% / +241% as 1x1 pools).
    ("transpose_hw_16x24x32", "ethos-u55-128"),
    ("transpose_nchw_6x6x65", "ethos-u65-256"),
    # SUB(0, x) read as Vela reads it, the scalar first (+100% reading the tensor on U65-512).
    ("op_neg_int16", "ethos-u65-512"),
    # Each time step's FULLY_CONNECTEDs costed apart (-40% as the stripes of one operation).
    ("lstm_kws_12x10_20", "ethos-u55-256"),
    # The MULs and REDUCE_SUMs of a matrix product costed as Vela's one MatMul (+28.5% apart).
    ("op_batch_matmul_int8", "ethos-u55-256"),
    # A transpose's slack for the next weight DMA with its maps in DRAM, their home (+6.0% in SRAM).
    ("op_sum_int8", "ethos-u65-256"),
    # An int16 table copied from off-chip flash: DMA cycles, not access cycles (+5.7% otherwise).
    ("arg_max_16x16x21", "ethos-u55-256"),
)


def test_network_cases_build() -> None:
    cases = cal.network_cases()
    assert {name for name, _ in NETWORK_CI_SUBSET} <= set(cases)
    assert any("transpose" in name for name in cases) and any("resize" in name for name in cases)


@pytest.mark.skipif(shutil.which("vela") is None, reason="vela command not installed")
@pytest.mark.parametrize("name, accelerator", NETWORK_CI_SUBSET)
def test_network_within_5_percent_of_vela(name: str, accelerator: str) -> None:
    [result] = cal.calibrate_networks([name], [accelerator])
    assert abs(result.error) <= cal.WITHIN, (
        f"{name} on {accelerator}: Vela {result.vela:.0f} cycles, ours on Vela's binary {result.ours:.0f} "
        f"({100 * result.error:+.1f}%)"
    )


def _estimated_vela_operations(case: str) -> list:
    import tempfile
    from pathlib import Path

    from cascader import save_model
    from cascader.vela import VelaConfig, compile_with_vela
    from cascader.sim import estimate

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{case}.tflite"
        save_model(cal.network_cases()[case](), path)
        return estimate(compile_with_vela(path, VelaConfig("ethos-u55-128")).path).operations


@pytest.mark.skipif(shutil.which("vela") is None, reason="vela command not installed")
def test_bilinear_phases_are_costed_apart() -> None:
    """Vela's RESIZE_BILINEAR writes four phases with four depthwise commands over dense
    maps of their own depth; they look like depth slices (same weights region, OFM size and
    kernel) but Vela costs each on its own, and so must the estimator."""
    phases = [o for o in _estimated_vela_operations("resize_bilinear_12x12x32") if o.kind == "depthwise_conv2d"]
    assert len(phases) == 4 and all(o.merged == () and o.ofm_shape == (1, 12, 12, 32) for o in phases)
    # Each is costed as Vela does, over the 23x23 box its pixels span (4 * 23 * 23 * 32 MACs).
    assert all(o.macs == 4 * 23 * 23 * 32 for o in phases)


@pytest.mark.skipif(shutil.which("vela") is None, reason="vela command not installed")
def test_mirror_pad_copies_are_costed_apart() -> None:
    """MIRROR_PAD's edge copies (whole 16-channel pixels; the top and bottom rows alike) are
    five operations in Vela's accounting, not one run of pieces as a transpose's one-channel
    copies are."""
    ops = _estimated_vela_operations("mirror_pad_16x16x16")
    assert len(ops) == 5 and all(o.merged == () for o in ops)


@pytest.mark.skipif(shutil.which("vela") is None, reason="vela command not installed")
def test_time_steps_are_costed_apart() -> None:
    """An LSTM's time steps reuse each gate's weight streams, as the stripes of a cascaded
    operation do, but each step reads the state the step before wrote (or the next column of
    the sequence): Vela costs every step's FULLY_CONNECTEDs on their own, and so must the
    estimator."""
    fcs = [o for o in _estimated_vela_operations("lstm_kws_12x10_20") if o.kind == "fully_connected"]
    gates = [o for o in fcs if o.ofm_shape == (1, 1, 1, 20)]  # the classifier's is 12 wide
    assert len(gates) == 12 * 8 and all(o.merged == () for o in fcs)


@pytest.mark.skipif(shutil.which("vela") is None, reason="vela command not installed")
def test_matmul_is_one_operation() -> None:
    """Vela runs BATCH_MATMUL (8x16 by 16x12) as a MUL and a REDUCE_SUM per column of y and
    costs them as one MatMul; the estimator gives them one row, the product's."""
    ops = _estimated_vela_operations("op_batch_matmul_int8")
    [matmul] = [o for o in ops if o.kind == "matmul"]
    assert matmul.ofm_shape == (1, 1, 8, 12) and len(matmul.merged) == 2 * 12 - 1
    assert matmul.macs == 8 * 16 * 12
    assert not any(o.kind in ("mul", "reduce_sum") for o in ops)


def _transpose_model(shape, perm):
    import numpy as np

    from cascader.tflite.builder import ModelBuilder, quantization

    q = quantization(0.05, 3)
    b = ModelBuilder()
    x = b.add_input("x", shape, "int8", q)
    y = b.add_tensor("y", tuple(shape[i] for i in perm), "int8", q)
    b.add_operator("TRANSPOSE", [x, b.add_constant("perm", np.asarray(perm, np.int32))], [y], {}, version=2)
    b.mark_output(y)
    return b.build()


@pytest.mark.skipif(shutil.which("vela") is None, reason="vela command not installed")
@pytest.mark.parametrize("shape, perm, accelerator, vela_rows", [
    # Vela 5.2's per-layer Op cycles (--verbose-performance), one row per step of its decomposition.
    ((1, 16, 24, 32), (0, 2, 1, 3), "ethos-u55-128", [4608]),  # one strided copy: H and W swap
    ((1, 8, 8, 4), (0, 2, 1, 3), "ethos-u55-64", [256]),       # narrow pixels: 8-byte bursts
    ((1, 8, 8, 16), (0, 1, 3, 2), "ethos-u55-256", [384]),     # 8 one-channel pieces: W and C swap
    ((1, 8, 8, 8), (0, 3, 1, 2), "ethos-u55-128", [128, 128]),  # H and C, then W and C: two runs
    ((1, 6, 6, 65), (0, 3, 1, 2), "ethos-u65-256", [1280, 3370]),
])
def test_transpose_steps_cost_as_vela_costs_them(tmp_path, shape, perm, accelerator, vela_rows) -> None:
    """Vela costs each step of a transpose by its memory traffic alone (the slower of reading
    the input and writing the permuted output, burst-scaled with the blocks its search picks for
    the unpermuted shape), whatever commands carry it out. The estimator recognises the steps
    in Vela's commands by their strides; two steps whose pieces look alike (8x8x8, 0312) stay
    two runs."""
    from cascader import save_model
    from cascader.vela import VelaConfig, compile_with_vela
    from cascader.sim import estimate

    path = tmp_path / "transpose.tflite"
    save_model(_transpose_model(shape, perm), path)
    ops = estimate(compile_with_vela(path, VelaConfig(accelerator)).path).operations
    assert [round(o.cycles) for o in ops] == vela_rows


@pytest.mark.skipif(shutil.which("vela") is None, reason="vela command not installed")
@pytest.mark.parametrize("shape, perm, accelerator", [
    ((1, 6, 6, 65), (0, 3, 1, 2), "ethos-u55-128"),
    ((1, 16, 4, 24), (0, 2, 3, 1), "ethos-u65-256"),
    ((1, 5, 6, 9), (0, 3, 2, 1), "ethos-u55-256"),
    ((1, 3, 32, 24), (0, 2, 3, 1), "ethos-u65-256"),  # NCHW -> NHWC: planes only where scratch is to be least
])
def test_our_transposes_are_vela_steps(tmp_path, shape, perm, accelerator) -> None:
    """Our lowering moves the channels in Vela's steps, command for command, so the estimator
    costs our binary's transpose as it costs Vela's (as Vela costs it)."""
    from cascader import compile, save_model
    from cascader.vela import VelaConfig, compile_with_vela
    from cascader.sim import estimate

    path = tmp_path / "transpose.tflite"
    save_model(_transpose_model(shape, perm), path)
    ours = compile(path, accelerator=accelerator).estimate()
    vela = estimate(compile_with_vela(path, VelaConfig(accelerator)).path)
    assert [round(o.cycles) for o in ours.operations] == [round(o.cycles) for o in vela.operations]
