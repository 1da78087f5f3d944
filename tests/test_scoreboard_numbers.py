"""Each number the scoreboard shows as "Ours" is the number its chapter shows: read from the committed
scoreboard (book/chapters/scoreboard.json) and the committed executed chapters."""

import html
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOARD = ROOT / "book" / "chapters" / "scoreboard.json"


def _claims():
    return [c for c in json.loads(BOARD.read_text())["claims"] if c.get("chapter") and c["ours_text"] not in ("—", "")]


def _shown(chapter: str) -> str:
    """Everything a reader sees of an executed chapter's outputs, HTML entities and tags undone."""
    nb = json.loads((ROOT / "book" / f"{chapter}.ipynb").read_text())
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            for mime in ("text/html", "text/markdown", "text/plain"):
                if mime in data:
                    parts.append("".join(data[mime]) if isinstance(data[mime], list) else data[mime])
    return html.unescape(re.sub(r"<[^>]+>", "", "\n".join(parts)))


@pytest.mark.parametrize("claim", _claims(), ids=lambda c: c["id"])
def test_the_scoreboard_s_number_is_the_chapter_s(claim):
    assert claim["ours_text"] in _shown(claim["chapter"]), (
        f"{claim['id']}: the scoreboard shows {claim['ours_text']!r}, which {claim['chapter']} does not show; "
        "re-execute the chapter and regenerate the scoreboard (companion chapters)")

