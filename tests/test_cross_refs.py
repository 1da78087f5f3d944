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


@pytest.mark.parametrize("name", ["claims.yml", "dashboard.yml"])
def test_the_ledger_and_the_dashboard_name_chapters_by_key_and_the_loaders_number_them(name):
    """A ledger text writes {chapter:06}; what the scoreboard and the chapters read says "Chapter 6", the
    number `_toc.yml` gives that chapter."""
    from companion.book.chapter_refs import TOKEN, chapter_numbers

    text = (ROOT / "book" / name).read_text()
    assert not TYPED.findall(text), f"book/{name} types a chapter number; write {{chapter:NN}} instead"
    numbers = chapter_numbers()
    assert numbers == {f"{n:02d}": n for n in range(1, 12)}
    assert {m.group(1) for m in TOKEN.finditer(text)} <= set(numbers)


def test_chapter_keys_expand_everywhere_and_an_unknown_key_is_named():
    from companion.book.chapter_refs import expand
    from companion.book.claims import load_ledger

    numbers = {"06": 7, "10": 2}  # a book whose chapters moved
    assert expand({"a": ["see {chapter:06}, M-07", 3], "b": "{chapter:10}'s table"}, numbers) == {
        "a": ["see Chapter 7, M-07", 3], "b": "Chapter 2's table"}
    with pytest.raises(ValueError, match=r"\{chapter:04\} names no numbered chapter.*keys: 06, 10"):
        expand("{chapter:04}", numbers)
    why = load_ledger()["S2-20"].requires[1]["says"]
    assert "(Chapter 6, M-07)" in why and "{chapter:" not in why
