"""The notebooks in notebooks/ run end to end (as CI runs them), each within two minutes, and
every cell that draws leaves a rendered picture.

They are committed with their outputs, so that they read on GitHub. The test checks that the
committed outputs are one whole run (every code cell in order, no errors, a picture from every
cell that draws), then clears them and runs the notebook again. It never compares the two runs:
cycle counts move with the compiler, and pictures with matplotlib's version.

After changing a notebook, or what it shows, execute it in place and commit the result:

    python tests/test_notebooks.py quickstart pareto research
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")  # the "python3" kernel the notebooks run in

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NAMES = ["quickstart", "pareto", "research"]
# Committed with their outputs (the others may be too: their outputs are then checked alike).
WITH_OUTPUTS = {"quickstart", "pareto", "research"}
BUDGET_SECONDS = 120  # per notebook, as CI runs it on two shared cores
CELL_TIMEOUT_SECONDS = 90
DRAWS = re.compile(r"\bplot_\w+\(|plt\.subplots\(")  # the cells that must leave a picture


def execute(nb, cwd: Path) -> float:
    """Run `nb` in place from a fresh kernel in `cwd`; return the seconds it took.

    Cells keep no timing metadata, so that executing a notebook again changes only what it shows.
    """
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    start = time.perf_counter()
    nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_SECONDS, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(cwd)}}).execute()
    seconds = time.perf_counter() - start
    # The kernel sends printed text in batches as time passes: a cell printing while it works
    # leaves one stream output or several, by chance. One per run of them keeps the file stable.
    for cell in nb.cells:
        if cell.cell_type == "code":
            merged = []
            for out in cell.outputs:
                if merged and out.output_type == "stream" == merged[-1].output_type and out.name == merged[-1].name:
                    merged[-1].text += out.text
                else:
                    merged.append(out)
            cell.outputs = merged
    return seconds


def _pictures_missing(code_cells) -> list[str]:
    return [c.source[:60] for c in code_cells
            if DRAWS.search(c.source) and not any("image/png" in o.get("data", {}) for o in c.outputs)]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs(name, tmp_path):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if name in WITH_OUTPUTS or any(c.get("outputs") for c in code):
        assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), \
            f"{name}: commit the outputs of one run, top to bottom (python tests/test_notebooks.py {name})"
        errors = [o.get("ename") for c in code for o in c.outputs if o.output_type == "error"]
        assert not errors, f"{name} is committed with errors: {errors}"
        assert not _pictures_missing(code), f"{name} is committed without its pictures: {_pictures_missing(code)}"
    # cwd is a temporary directory: whatever a notebook saves stays out of the repository.
    seconds = execute(nb, tmp_path)
    print(f"{name}.ipynb ran in {seconds:.1f} s")
    assert seconds < BUDGET_SECONDS, f"{name} took {seconds:.0f} s (budget {BUDGET_SECONDS} s)"
    assert any(DRAWS.search(c.source) for c in code), f"{name} draws nothing"
    assert not _pictures_missing(code), f"no picture from: {_pictures_missing(code)}"


# The notebooks that show the public API only: what a user may copy from them is supported.
PUBLIC_ONLY = ["quickstart", "pareto", "research"]
PUBLIC_MODULES = ("graph", "vela", "zoo")  # public submodules; their public names are their __all__


@pytest.mark.parametrize("name", PUBLIC_ONLY)
def test_notebook_uses_the_public_api_only(name):
    import importlib

    import cascader

    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    used = re.findall(r"\bcascader((?:\.\w+)+)", source)  # cascader.a.b as ".a.b"
    for names in re.findall(r"^\s*from cascader(\.\w+)? import ([\w, ]+)", source, flags=re.M):
        used += [f"{names[0]}.{n.strip()}" for n in names[1].split(",")]
    assert used, f"{name} uses nothing from cascader"
    for dotted in used:
        first, *rest = dotted.strip(".").split(".")
        assert first in cascader.__all__ or first in PUBLIC_MODULES, f"{name}: cascader.{first} is not public"
        if first in PUBLIC_MODULES and rest:
            module = importlib.import_module(f"cascader.{first}")
            assert rest[0] in module.__all__, f"{name}: cascader.{first}.{rest[0]} is not public"
    assert "_core" not in source


if __name__ == "__main__":  # execute notebooks in place, in their own folder, for committing
    for name in sys.argv[1:] or sorted(WITH_OUTPUTS):
        path = NOTEBOOKS / f"{name}.ipynb"
        notebook = nbformat.read(path, as_version=4)
        took = execute(notebook, NOTEBOOKS)
        nbformat.write(notebook, path)
        print(f"{path}: executed in {took:.1f} s")
