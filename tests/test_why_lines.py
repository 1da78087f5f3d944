"""A claim's one-line "why" on the scoreboard is cut at a clause boundary, never inside a bracket: no
line leaves a parenthesis open ("(bits 0–5 (ci scale)" was one)."""

import re
from pathlib import Path

from companion.book.display import _balanced, _short

ROOT = Path(__file__).resolve().parents[1]


def test_a_description_is_never_cut_inside_a_parenthesis():
    text = ("|mean full-cube accuracy on 3-bit Majority (bits 0–5: the three the target uses and three it "
            "does not) − the MDI's 0.875|")
    assert _short(text) == text  # the colon inside the parenthesis is not a clause boundary
    assert _short("a measure of the relative change, paired by seed (fraction); reproduced below 1 %") == \
        "a measure of the relative change, paired by seed (fraction)"
    long = "the largest gap over every task and seed " * 3 + "(in points, at the stated budget: ours) and more"
    assert _balanced(_short(long)) and _short(long).endswith("…")
    assert not _balanced("(bits 0–5 (ci scale)") and _balanced("f(x) [a (b)]")


def test_no_why_line_on_the_scoreboard_leaves_a_bracket_open():
    lines = [line for line in (ROOT / "book" / "scoreboard.md").read_text().splitlines() if line.startswith("*Why:*")]
    assert len(lines) >= 60
    cut = [line for line in lines if not _balanced(re.sub(r"`[^`]*`", "", line))]
    assert not cut, cut[:3]
