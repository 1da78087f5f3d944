"""The chapters' prose refers to chapters and tables by reference, never by a typed number, and every table is
numbered: a markdown table sits in a {table} directive with a name, a table a cell prints has a caption and a
name (mystnb figure metadata), so that a chapter moved in the table of contents renumbers every mention."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks").glob("*.ipynb"))
TYPED = re.compile(r"\bChapters? \d")


def _markdown(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def _outside_directives(text: str) -> list[str]:
    """The lines of `text` outside every ::: or ``` block."""
    out, depth = [], 0
    for line in text.splitlines():
        if line.startswith(":::{") or line.startswith("```{"):
            depth += 1
        elif line.strip() in (":::", "```") and depth:
            depth -= 1
        elif not depth:
            out.append(line)
    return out


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_no_chapter_number_is_typed_in_prose(path):
    typed = [m.group(0) for text in _markdown(path) for m in TYPED.finditer(text)]
    assert not typed, f"{path.name} types {typed}; write {{ref}}`chN` (or a section's label) instead"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_every_markdown_table_is_numbered(path):
    loose = [line for text in _markdown(path) for line in _outside_directives(text) if line.startswith("|")]
    assert not loose, f"{path.name} has a table outside a {{table}} directive: {loose[0]!r}"
    for text in _markdown(path):
        for block in re.findall(r":::\{table\}[^\n]*\n((?::[a-z-]+:[^\n]*\n)*)", text):
            assert ":name: tab-" in block, f"{path.name}: a {{table}} directive without a :name: tab-… label"


def test_the_checks_fail_where_they_should():
    assert TYPED.search("the GOAT models of Chapters 7–9 train") and not TYPED.search("{ref}`ch7`")
    text = "Intro\n\n:::{table} Caption\n:name: tab-x\n\n| a |\n|---|\n:::\n\n| loose |"
    assert _outside_directives(text) == ["Intro", "", "", "| loose |"]
