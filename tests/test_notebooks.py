"""The notebooks in notebooks/ run end to end (as CI runs them), each within two minutes, and
every cell that draws leaves a rendered picture."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")  # the "python3" kernel the notebooks run in

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
BUDGET_SECONDS = 120  # per notebook, as CI runs it on two shared cores
CELL_TIMEOUT_SECONDS = 90
DRAWS = re.compile(r"\bplot_\w+\(|plt\.subplots\(")  # the cells that must leave a picture


@pytest.mark.parametrize("name", ["quickstart", "pareto", "research"])
def test_notebook_runs(name, tmp_path):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), \
        "commit notebooks without outputs"
    start = time.perf_counter()
    # cwd is a temporary directory: whatever a notebook saves stays out of the repository.
    nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_SECONDS, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    seconds = time.perf_counter() - start
    print(f"{name}.ipynb ran in {seconds:.1f} s")
    assert seconds < BUDGET_SECONDS, f"{name} took {seconds:.0f} s (budget {BUDGET_SECONDS} s)"
    drawing = [c for c in code if DRAWS.search(c.source)]
    assert drawing, f"{name} draws nothing"
    for cell in drawing:
        assert any("image/png" in o.get("data", {}) for o in cell.outputs), f"no picture from: {cell.source[:60]}"
