"""The lowering's shape: the core reads a rule table, and no rule imports the core back.

Counted on the source, imports inside functions and under TYPE_CHECKING included: Python does
not see those loops, the reader does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import cascader.frontend
from cascader.frontend.lowering_rules import LOWERING_RULES
from cascader.frontend.operator_view import ALIAS_OPS

FRONTEND = Path(cascader.frontend.__file__).parent


def _frontend_imports() -> dict[str, set[str]]:
    """module -> the frontend modules it imports (relative imports, at any depth of the file)."""
    modules = {p.stem for p in FRONTEND.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in FRONTEND.glob("*.py"):
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [node.module] if node.module else [a.name for a in node.names]
                edges |= {n.split(".")[0] for n in names if n.split(".")[0] in modules}
        graph[path.stem] = edges - {path.stem}
    return graph


def test_no_import_circle_in_the_frontend():
    graph = _frontend_imports()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError(" -> ".join(path[path.index(module):] + [module]))
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, path + [module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_no_frontend_module_imports_the_core():
    """Rules reach the core through `LoweringContext`; the core reaches them through the table."""
    graph = _frontend_imports()
    assert {m for m, imports in graph.items() if "lower" in imports} == set()
    assert "lowering_rules" in graph["lower"]
    # No rule named in the core but the slice views it plans before the walk (`lower_movement`).
    assert {m for m in graph["lower"] if m.startswith("lower_")} <= {"lower_movement"}


def test_aliases_have_no_rule():
    """RESHAPE, SQUEEZE and EXPAND_DIMS are resolved by the core: a rule for one would never run."""
    assert not set(LOWERING_RULES) & ALIAS_OPS
