"""The package's layout rules, checked on its source: which side imports which, no import circles,
and no code outside the prior modules that tests a prior's type."""

from __future__ import annotations

import ast
import re
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


def test_the_readout_registry_reaches_up_to_nothing():
    """GOAT, transport and the task modules register readouts in `companion.readouts`, so it imports
    none of them, nor the task registry (that is `companion.measuring`'s, which imports them all)."""
    graph = _graph()
    assert graph["companion.readouts"] <= {"companion"}, graph["companion.readouts"]
    assert {"companion.goat", "companion.transport", "companion.tasks", "companion.readouts"} <= graph["companion.measuring"]


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


def _is_chapter(module: str) -> bool:
    return re.fullmatch(r"companion\.book\.chapters\.ch\d\d_\w+", module) is not None


def test_the_book_machinery_imports_no_chapter_analysis():
    """book/ has two halves: the chapter analyses (book/chapters/: chNN_*, figures/ and what they
    share) import the machinery (runner, claims, scoreboard, tables, the Sphinx extension…), never the
    other way; `chapter.module_of` finds a chapter's module by name."""
    graph = _graph()
    machinery = [m for m in graph if m.startswith("companion.book") and not m.startswith("companion.book.chapters")]
    assert len(machinery) >= 20
    bad = {m: sorted(d for d in graph[m] if d.startswith("companion.book.chapters.")) for m in machinery}
    assert not {m: d for m, d in bad.items() if d}
    analyses = [m for m in graph if m.startswith("companion.book.chapters.")]
    assert len([m for m in analyses if _is_chapter(m)]) == 11 and len(analyses) >= 30


SITE_USERS = {"companion.book.runner", "companion.book.scoreboard"}  # the commands that write pages


def test_page_building_is_imported_only_by_the_commands_that_write_pages():
    """book/site/ (the Sphinx extension, the scoreboard page, the edition, the PDF…) may import the book's core;
    the chapters never import it, and of the core only the commands that write pages do (companion/book/__init__)."""
    graph = _graph()
    site = {m for m in graph if m.startswith("companion.book.site")}
    assert len(site) >= 10
    users = {m for m, deps in graph.items() if deps & site and m not in site}
    assert users == SITE_USERS, sorted(users)
    assert not [m for m in site for d in graph[m] if d.startswith("companion.book.chapters")]


def test_the_book_imports_the_package_at_module_level_only():
    """Every import of a companion module in book/ stands at the top of its file, so the graph above is
    the whole graph; only kernel, notebook and plotting libraries load inside a function."""
    inside = []
    for path in (PKG / "book").rglob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside += [f"{path.relative_to(PKG)}:{n.lineno}" for n in ast.walk(fn)
                           if isinstance(n, (ast.Import, ast.ImportFrom)) and _imports_companion(n)]
    assert not inside


def _imports_companion(node) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").startswith("companion")
    return any(a.name.startswith("companion") for a in node.names)


def test_chapter_modules_import_no_other_chapter_module():
    graph = _graph()
    chapters = [m for m in graph if _is_chapter(m)]
    assert len(chapters) == 11
    for m in chapters:
        assert not [d for d in graph[m] if _is_chapter(d)], m


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


def _prior_kind_tests(path: Path, root: Path = PKG) -> list[str]:
    """Where `path` asks what kind a prior is instead of asking the prior: `hasattr(<...prior...>, ...)`,
    `isinstance(x, Prior)`, or a comparison (==, !=, in, not in) of a `.kind` or `.positions` with a
    string literal naming a registered prior or position prior ("learned" and "none" name none)."""
    kinds = set(PRIORS) | set(POSITIONS)
    found = []

    def literals(node) -> set[str]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)}

    for node in ast.walk(ast.parse(path.read_text())):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("hasattr", "isinstance", "issubclass") \
                and node.args:
            if node.func.id == "hasattr" and "prior" in ast.unparse(node.args[0]).lower():
                found.append(f"{where} {ast.unparse(node)}")
            elif node.func.id != "hasattr" and len(node.args) > 1 and any(
                    isinstance(n, (ast.Name, ast.Attribute)) and (getattr(n, "id", None) or n.attr) == "Prior"
                    for n in ast.walk(node.args[1])):
                found.append(f"{where} {ast.unparse(node)}")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Attribute) and o.attr in ("kind", "positions") for o in operands) \
                    and set().union(*(literals(o) for o in operands)) & kinds:
                found.append(f"{where} {ast.unparse(node)}")
    return found


def _asks_the_prior_files() -> list[Path]:
    """The files that hold priors at run time and must ask them: the core and the task modules, less
    the prior modules themselves (the registries' modules and `priors.py`) and `config.py`, which
    validates a config's names against the registries."""
    prior_modules = {spec.partition(":")[0] for spec in (*PRIORS.values(), *POSITIONS.values())}
    prior_modules |= {"companion.priors", "companion.goat_chunked", "companion.config"}
    files = [PKG / f"{m}.py" for m in core_modules()] + sorted((PKG / "tasks").glob("*.py"))
    return [p for p in files if _module_name(p) not in prior_modules]


def test_nothing_outside_the_prior_modules_tests_a_prior_kind():
    """The model, the loop, drift and the readouts ask a prior through its protocol (`Prior.mask_logits`,
    `Prior.per_layer`, ...), never by its attributes' presence, its class or its registered name."""
    files = _asks_the_prior_files()
    assert PKG / "model.py" in files and PKG / "drift.py" in files and PKG / "priors.py" not in files
    found = [hit for path in files for hit in _prior_kind_tests(path)]
    assert not found, found


def test_the_prior_kind_check_sees_each_form_it_forbids(tmp_path):
    """The check above can fail: each form it forbids, written in a file, is found."""
    bad = tmp_path / "bad.py"
    bad.write_text('if prior is not None and hasattr(prior, "logits"):\n    pass\n'
                   'per_layer = cfg.positions == "rope"\n'
                   'mask = cfg.prior.kind in ("mask", "goat")\n'
                   'ok = cfg.positions == "learned"\n'
                   'x = isinstance(m, Prior)\n')
    found = sorted(f.split()[0] for f in _prior_kind_tests(bad, tmp_path))
    assert found == ["bad.py:1", "bad.py:3", "bad.py:4", "bad.py:6"], found  # not line 5: "learned" is no prior


def test_every_unhashed_folder_exists_and_every_other_folder_is_tasks():
    folders = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert set(UNHASHED) <= folders and folders - set(UNHASHED) == {"tasks"}


def test_every_registered_prior_answers_the_protocol():
    from companion.priors import Prior, prior_class

    for spec in (*PRIORS.values(), *POSITIONS.values()):
        cls = prior_class(spec)
        assert issubclass(cls, Prior) and hasattr(cls, "from_config"), spec
