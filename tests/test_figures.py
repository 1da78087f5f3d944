"""One figure system: every figure in a chapter source is numbered, captioned and described, and a
method's colour comes only from `companion.book.labels`."""

import json
import re
from pathlib import Path

import pytest

from companion.book import labels

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks").glob("*.ipynb"))
HEX = re.compile(r"#[0-9a-fA-F]{6}\b|color=[\"']C\d[\"']")


def _figure_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code" and "plt.show()" in "".join(c["source"])]


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_every_figure_has_a_numbered_caption_and_alt_text(path):
    nb = json.loads(path.read_text())
    for cell in _figure_cells(nb):
        meta = cell["metadata"].get("mystnb", {})
        fig = meta.get("figure", {})
        head = "".join(cell["source"])[:80]
        assert fig.get("caption", "").strip(), f"{path.name}: a figure without a caption: {head}"
        assert re.fullmatch(r"fig-ch\d+-[a-z0-9-]+", fig.get("name", "")), f"{path.name}: name it fig-chN-…: {head}"
        assert meta.get("image", {}).get("alt", "").strip(), f"{path.name}: no alt text (run tools/tag_cells.py)"
        assert "/" not in meta["image"]["alt"].split()[0], "alt text must describe the figure, not its file"


def test_figure_names_are_unique_across_the_book():
    names = [c["metadata"]["mystnb"]["figure"]["name"] for p in SOURCES for c in _figure_cells(json.loads(p.read_text()))
             if "figure" in c["metadata"].get("mystnb", {})]
    assert len(names) == len(set(names))


def test_no_chapter_picks_its_own_colours():
    modules = sorted((ROOT / "companion" / "book").glob("ch*.py"))
    for path in modules:
        assert not HEX.search(path.read_text()), f"{path.name} sets a colour; use labels.colour"
    for path in SOURCES:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                assert not HEX.search("".join(cell["source"])), f"{path.name} sets a colour; use labels.colour"


def test_a_method_keeps_one_colour_and_its_variants_share_it():
    methods = list(labels.METHODS)
    assert len({labels.colour(m) for m in methods}) == len(methods), "two methods share a colour"
    assert labels.colour("goat-lanes") == labels.colour("goat")
    assert labels.colour("mask-sdpa") == labels.colour("mask")
    assert labels.colour("alibi-sdpa") == labels.colour("alibi")
    assert all(m in labels.MARKERS for m in methods)
