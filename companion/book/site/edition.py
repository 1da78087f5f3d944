"""The book at the `paper` profile, built from the committed records: an edition, never a training run.

`companion chapters --profile paper` (and `make book PROFILE=paper`) makes it in minutes on any
machine, into `_build/editions/paper/`, beside the `ci` book (`book/chapters/` is never touched):

- the book's pages are copied (`_config.yml`, `_toc.yml`, `book/` without the executed `ci` chapters, and
  what a page includes from outside `book/`, the changelog);
- a chapter that trains nothing (1, 2, 10), or whose paper-profile runs are all in `results/paper/`,
  is executed with papermill at `profile="paper"`: it reads records and trains nothing;
- a chapter with runs missing at that scale gets a page of its own: its title, the counts
  (`companion.book.paper_status.coverage`: "12 of 120 paper-profile runs"), its claims marked "not run at
  this scale", how to make the missing runs, and the outline of its sections, so that the edition's
  links and the table of contents stay whole;
- `jupyter-book build _build/editions/paper` then builds it (the Makefile does).

As GPU windows and clusters add records, chapters move from the second kind to the first by
themselves: the edition always shows whatever the committed records hold.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

from companion.book.claims import load_ledger
from companion.book.paper_status import PAPER_DIR, available, coverage, provenance
from companion.experiments.chapters import chapter_key
from companion.paths import repo_root

__all__ = ["EDITIONS_DIR", "edition_root", "prepare", "not_run_notebook", "build_edition"]

EDITIONS_DIR = Path("_build") / "editions"
_LABEL = re.compile(r"^\(([^)\s]+)\)=\s*$")
_HEADING = re.compile(r"^(#{1,3}) (.+)$")


def edition_root(root: Path, profile: str) -> Path:
    return root / EDITIONS_DIR / profile


def prepare(root: Path, profile: str) -> Path:
    """Copy the book's pages into the edition's folder (its executed chapters left out) and name the
    edition in its title; returns the folder."""
    dest = edition_root(root, profile)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("*.ipynb", "*.tmp")
    shutil.copytree(root / "book", dest / "book", ignore=ignore)
    shutil.copy(root / "_toc.yml", dest / "_toc.yml")
    for included in _included_from_outside(root):  # CHANGELOG.md, which book/changelog.md includes from the root
        (dest / included).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / included, dest / included)
    config = (root / "_config.yml").read_text()
    title = re.search(r'^title: "(.*)"$', config, re.M)
    if title:
        config = config.replace(title.group(0), f'title: "{title.group(1)} ({profile} edition)"', 1)
    (dest / "_config.yml").write_text(config)
    return dest


_INCLUDE = re.compile(r"^```\{include\}\s+(\S+)\s*$", re.M)


def _included_from_outside(root: Path) -> list[Path]:
    """The files a page of book/ includes (MyST's include directive) from outside book/ but inside the checkout,
    relative to the checkout: an edition copies only book/, so it must copy these beside it."""
    book, out = (root / "book").resolve(), set()
    for page in sorted(book.rglob("*.md")):
        for target in _INCLUDE.findall(page.read_text()):
            path = (page.parent / target).resolve()
            if not path.is_relative_to(book) and path.is_relative_to(root.resolve()) and path.is_file():
                out.add(path.relative_to(root.resolve()))
    return sorted(out)


def _outline(source: dict) -> tuple[list[str], list[tuple[str | None, str, str]]]:
    """(the title cell's label and heading lines, [(label, hashes, heading)] of every later section)."""
    title: list[str] = []
    sections: list[tuple[str | None, str, str]] = []
    for i, cell in enumerate(c for c in source["cells"] if c["cell_type"] == "markdown"):
        label = None
        for line in "".join(cell["source"]).splitlines():
            m_label, m_head = _LABEL.match(line), _HEADING.match(line)
            if m_label:
                label = m_label.group(1)
            elif m_head:
                if not title and len(m_head.group(1)) == 1:
                    title = ([f"({label})="] if label else []) + [line]
                else:
                    sections.append((label, m_head.group(1), m_head.group(2)))
                label = None
            elif line.strip():
                label = None
    return title, sections


def not_run_notebook(root: Path, name: str, profile: str) -> dict:
    """The page of a chapter whose runs at `profile` are not all stored (module docstring)."""
    source = json.loads((root / "notebooks" / f"{name}.ipynb").read_text())
    key = chapter_key(name)
    cov = coverage(key, root)
    made = provenance(available(key, root))
    title, sections = _outline(source)
    claims = [c for c in load_ledger(root / "book" / "claims.yml").values() if c.chapter == f"chapters/{name}"]
    rows = "\n".join(f"| {c.id} | {c.statement.strip().splitlines()[0]} | not run at this scale |" for c in claims)
    intro = [
        *title, "",
        ":::{admonition} Not run at this scale",
        ":class: warning",
        f"This chapter reads {cov.total} runs at the `{profile}` profile; {cov.found} of them are in "
        f"`{PAPER_DIR.as_posix()}/`{f' ({made})' if made else ''}, so its figures and verdicts are not drawn in "
        "this edition. The `ci` book shows them at its own scale.",
        "",
        f"The missing runs are made on a GPU by `companion paper {key}` (a window at a time, resumable), or "
        f"on a Slurm cluster by `companion sweep … --profile {profile} --executor slurm`; once their records "
        "are committed, this edition executes the chapter from them.",
        ":::",
    ]
    table = ["## Its claims at this scale", "", "| claim | statement | verdict |", "|---|---|---|", rows] if claims else []
    outline = []
    for label, hashes, heading in sections:
        outline += ([f"({label})="] if label else []) + [f"{hashes} {heading}", "", "Not run at this scale.", ""]
    cells = [{"cell_type": "markdown", "id": f"not-run-{i}", "metadata": {}, "source": "\n".join(part)}
             for i, part in enumerate((intro, table, outline)) if part]
    return {"cells": cells, "metadata": {**source.get("metadata", {}),
                                         "companion": {"profile": profile, "not_run": [cov.found, cov.total]}},
            "nbformat": source.get("nbformat", 4), "nbformat_minor": source.get("nbformat_minor", 5)}


def build_edition(names: list[str], profile: str, root: Path | None = None, *, execute_into) -> int:
    """Make the edition's chapters (module docstring); returns an exit code. Trains nothing.
    `execute_into(root, name, out_dir, parameters)` executes one chapter (`companion.book.runner`'s)."""
    root = root or repo_root()
    dest = prepare(root, profile)
    chapters = dest / "book" / "chapters"
    status = 0
    start = time.perf_counter()
    print(f"the {profile} edition, from the committed records in results/{profile}/ (nothing trains), into "
          f"{dest.relative_to(root)}:")
    for name in names:
        cov = coverage(chapter_key(name), root)
        if cov.total and not cov.complete:
            (chapters / f"{name}.ipynb").write_text(json.dumps(not_run_notebook(root, name, profile), indent=1,
                                                               ensure_ascii=False) + "\n")
            print(f"  {name:<40} not run at this scale: {cov.words()} stored")
            continue
        try:
            took = execute_into(root, name, chapters, {"profile": profile})
        except Exception as err:  # noqa: BLE001  (report every chapter, then fail)
            print(f"  {name:<40} failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                  file=sys.stderr)
            status = 1
            continue
        print(f"  {name:<40} executed ({'from its records' if cov.total else 'it trains nothing'}) in {took:.1f} s")
    print(f"total {time.perf_counter() - start:.1f} s; build it with `jupyter-book build {dest.relative_to(root)}`")
    return status
