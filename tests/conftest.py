"""Shared fixtures. Real-world models come from $CASCADER_MODELS (never from the repo)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def compile_on_npu(tmp_path: Path, model, accelerator: str, operations: int | None = None, name: str = "model"):
    """`model` saved under `tmp_path` and compiled for `accelerator`, asserted wholly on the NPU
    (the CPU operators' reasons in the message) and, when given, in `operations` NPU operations.
    Returns (path, compiled)."""
    import cascader

    path = tmp_path / f"{name}.tflite"
    cascader.save_model(model, path)
    compiled = cascader.compile(path, accelerator=accelerator)
    summary = compiled.summary()
    assert summary.cpu_operators == 0, [(o.opcode, o.reason) for o in cascader.inspect(path).operators]
    if operations is not None:
        assert summary.npu_operations == operations
    return path, compiled


def compile_exact(tmp_path: Path, model, accelerator: str, operations: int | None = None):
    """`compile_on_npu`, then the binary bit-exact against the reference interpreter on seeds
    0 and 1. Returns the compiled model."""
    from cascader.bench.simulate import validate

    path, compiled = compile_on_npu(tmp_path, model, accelerator, operations)
    result = validate(path, compiled.model, (0, 1))
    assert result.bit_exact, result.details
    return compiled


def cycles_against_vela(model, accelerator: str) -> tuple[float, float]:
    """The estimator's cycles of our binary of `model` and of Vela 5.2's (its default system for
    `accelerator`), the same yardstick for both; skips where Vela is not installed."""
    pytest.importorskip("ethosu.vela")
    import cascader
    from cascader import vela

    ours = cascader.compile(model, accelerator=accelerator).estimate().total_cycles
    return ours, vela.compile(model, accelerator).estimate().total_cycles


def shared_models_dir() -> Path | None:
    folder = os.environ.get("CASCADER_MODELS")
    return Path(folder) if folder and Path(folder).is_dir() else None


def shared_model_paths() -> list[Path]:
    """Every shared .tflite benchmark model (not vela_reference/), or [] without the folder."""
    folder = shared_models_dir()
    return sorted(folder.glob("*.tflite")) if folder else []


def shared_manifest() -> dict[str, dict]:
    folder = shared_models_dir()
    if folder is None or not (folder / "manifest.json").exists():
        return {}
    return {entry["file"]: entry for entry in json.loads((folder / "manifest.json").read_text())}


def shared_params(paths: list[Path]) -> list:
    """pytest params with readable ids; a single skipped param when there is no shared folder."""
    if not paths:
        return [pytest.param(None, marks=pytest.mark.skip(reason="CASCADER_MODELS is not set"))]
    return [pytest.param(p, id=p.stem) for p in paths]
