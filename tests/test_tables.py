"""Numbered tables: a notebook output named `tab-…` becomes a table Sphinx numbers, caption first."""

import json
import re
from pathlib import Path

import pytest
from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from companion.book.site import cells, tables


def _document():
    return new_document("test", get_default_settings(Parser))


def _figure(name: str) -> nodes.figure:
    figure = nodes.figure("", ids=[name], names=[name])
    figure += nodes.container("", nodes.raw("", "<table></table>", format="html"), nb_element="mime_bundle")
    figure += nodes.caption("", "What the table shows.")
    return figure


def test_a_tab_output_becomes_a_table_with_its_caption_first_and_its_label_kept():
    doc = _document()
    doc += [_figure("tab-ch3-verdicts"), _figure("fig-ch3-curves")]
    tables.number_tables(None, doc)
    (table,) = list(doc.findall(tables.Table))
    assert table["ids"] == ["tab-ch3-verdicts"] and table["names"] == ["tab-ch3-verdicts"]
    assert "mathjax_process" in table["classes"]  # math in a header is typeset on a page MyST marks ignored
    assert isinstance(table.children[0], nodes.caption) and table.children[0].astext() == "What the table shows."
    assert table.children[1].get("nb_element") == "mime_bundle"
    (figure,) = list(doc.findall(nodes.figure))  # a figure stays a figure
    assert figure["names"] == ["fig-ch3-curves"]


def test_a_numref_finds_the_table_not_the_figure_it_replaced():
    """Sphinx resolves {numref} through the document's ids: they must name the Table, or the reference
    finds a figure that is no longer in the page and has no number ("Any number is not assigned")."""
    doc = _document()
    figure = _figure("tab-ch3-table1")
    doc += figure
    doc.set_id(figure)
    assert doc.ids["tab-ch3-table1"] is figure
    tables.number_tables(None, doc)
    assert isinstance(doc.ids["tab-ch3-table1"], tables.Table)
    assert doc.ids["tab-ch3-table1"].parent is doc


def test_the_verdict_table_cell_gets_its_numbered_caption_and_no_alt_text():
    nb = {"cells": [{"cell_type": "markdown", "id": "t", "metadata": {}, "source": "# Title"},
                    {"cell_type": "code", "id": "v", "metadata": {}, "source": "x = ch.claims(r)\nverdict_table(results)"},
                    {"cell_type": "code", "id": "w", "metadata": {}, "source": "verdict_table(results)\nprint(1)"}]}
    out = cells.plan(nb, "04_arithmetic")
    by_id = {c["id"]: c for c in out["cells"]}
    assert by_id["v"]["metadata"]["mystnb"] == {"figure": {"caption": cells.VERDICT_CAPTION, "name": "tab-ch4-verdicts"}}
    assert "mystnb" not in by_id["w"]["metadata"]  # its last output is not the table
    assert cells.plan(out, "04_arithmetic") == out

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks").glob("*.ipynb"))
CAPTIONED = tuple(p.stem for p in SOURCES)  # every table a page shows is numbered and captioned


def _names(path: Path) -> dict[str, str]:
    return {c["id"]: c["metadata"]["mystnb"]["figure"]["name"] for c in json.loads(path.read_text())["cells"]
            if c["metadata"].get("mystnb", {}).get("figure", {}).get("name", "").startswith(tables.PREFIX)}


def test_table_names_are_unique_and_name_their_chapter():
    names = [(p.stem, n) for p in SOURCES for n in _names(p).values()]
    assert len({n for _, n in names}) == len(names)
    for stem, n in names:
        assert re.fullmatch(rf"tab-ch{int(stem[:2])}-[a-z0-9-]+", n), n


@pytest.mark.parametrize("stem", CAPTIONED)
def test_every_table_of_a_captioned_chapter_is_numbered(stem):
    names = _names(ROOT / "notebooks" / f"{stem}.ipynb")
    executed = json.loads((ROOT / "book" / "chapters" / f"{stem}.ipynb").read_text())
    shown = [c["id"] for c in executed["cells"] for o in c.get("outputs", [])
             if "<table" in "".join(o.get("data", {}).get("text/html", ""))
             and not {"remove-cell", "remove-output"} & set(c["metadata"].get("tags", []))]
    assert shown or stem[:2] not in ("03", "04"), "no table found where the chapter shows several"
    assert not [cid for cid in shown if cid not in names], f"tables without a caption: {set(shown) - set(names)}"
