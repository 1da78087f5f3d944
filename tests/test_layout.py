"""The package's layout rules, checked on its source: which side imports which, no import circles,
and no code outside the prior modules that tests a prior's type."""

from __future__ import annotations

import ast
from pathlib import Path

import companion
from companion.identity import UNHASHED, core_modules
from companion.priors import POSITIONS, PRIORS

PKG = Path(companion.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every companion module `path` imports, at any depth of the file (function-level imports too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("companion")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("companion"):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts}
    return {name: {m for m in _imports(path) if m in files and m != name} for name, path in files.items()}


def test_the_core_imports_no_book_cost_or_cli_module():
    graph = _graph()
    core = [f"companion.{m}" if m != "__init__" else "companion" for m in core_modules()]
    core += [m for m in graph if m.startswith("companion.tasks")]
    bad = {m: sorted(d for d in graph[m] if d.startswith(("companion.book", "companion.cost", "companion.cli")))
           for m in core}
    assert not {m: d for m, d in bad.items() if d}


def test_no_import_circles():
    """Module-level imports of the package form no cycle (a lazy import inside a function is allowed
    only where it breaks none either: this test counts those too)."""
    graph = _graph()
    # a package's __init__ is a parent of its modules, not a dependency cycle through them
    edges = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert not cycles, cycles


def test_chapter_modules_import_no_other_chapter_module():
    graph = _graph()
    chapters = [m for m in graph if m.startswith("companion.book.ch")]
    assert len(chapters) >= 9
    for m in chapters:
        assert not [d for d in graph[m] if d.startswith("companion.book.ch")], m


def test_no_isinstance_on_a_prior_type_outside_the_prior_modules():
    prior_classes = {spec.partition(":")[2] for spec in (*PRIORS.values(), *POSITIONS.values())}
    allowed = {spec.partition(":")[0] for spec in (*PRIORS.values(), *POSITIONS.values())}
    found = []
    for path in PKG.rglob("*.py"):
        if _module_name(path) in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("isinstance", "issubclass"):
                names = {n.id if isinstance(n, ast.Name) else getattr(n, "attr", None)
                         for n in ast.walk(node.args[1])}
                if names & prior_classes:
                    found.append(f"{path.relative_to(PKG)}:{node.lineno}")
    assert not found, found


def test_every_unhashed_folder_exists_and_every_other_folder_is_tasks():
    folders = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert set(UNHASHED) <= folders and folders - set(UNHASHED) == {"tasks"}


def test_every_registered_prior_answers_the_protocol():
    from companion.priors import Prior, prior_class

    for spec in (*PRIORS.values(), *POSITIONS.values()):
        cls = prior_class(spec)
        assert issubclass(cls, Prior) and hasattr(cls, "from_config"), spec
