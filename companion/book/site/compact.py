"""Every claim in one table, the first thing the scoreboard shows: one row per item, in page order.

Columns: the claim (its id, linked to its card, and its statement in one line), what the source says,
ours (the value in the source's units with what it is and the setting it was measured at), the
verdict in its kind's words with the scale and machine it was decided at, and where the book
measures it. Written from the scoreboard's rows (`companion.book.scoreboard`), nothing typed.
"""

from __future__ import annotations

import re

from companion.book.display import _balanced
from companion.book.words import verdict_badge

__all__ = ["compact_table", "chapter_ref", "one_line"]


def _cell(text) -> str:
    return " ".join(str(text).split())


def one_line(text, limit: int) -> str:
    """`text` whole when it fits in `limit` characters, else cut at the last word boundary before it that
    leaves no bracket open, with " …"."""
    text = _cell(text)
    if len(text) <= limit:
        return text
    spots = [i for i in range(limit, limit // 2, -1) if text[i] == " " and _balanced(text[:i])]
    return (text[:spots[0]] if spots else text[:limit]).rstrip(",;:") + " …"


def chapter_ref(row: dict) -> str:
    """A link to where a claim is measured, named by its chapter ("Ch. 3"); "—" when no chapter does."""
    found = re.search(r"(\d+)_", row.get("chapter") or "")
    if row.get("reason") or not row.get("section") or not found:
        return "—"
    return f"{{ref}}`Ch. {int(found.group(1))} <{row['section']}>`"


def _ours(row: dict, profile: str) -> str:
    if row["reason"]:
        return "not rebuilt: " + one_line(row["reason"], 110)
    at = row["by_profile"][profile]
    if at.get("decides"):  # inconclusive at the profile, decided where its preconditions hold
        dec = at["decided"]
        return f'**{_cell(dec["ours_text"])}** <span class="claim-quantity">{one_line(dec["measure"], 110)}</span>'
    if at["ours"] is None:
        return _cell(at["ours_text"])
    what = f' <span class="claim-quantity">{_cell(row["quantity"])}</span>' if row["quantity"] else ""
    return f"**{_cell(at['ours_text'])}**{what}"


def compact_table(rows: list[dict], profile: str) -> list[str]:
    """The table as markdown lines (a MyST list-table; on a phone each row becomes a card)."""
    lines = ["```{list-table}", ":header-rows: 1", ":widths: 36 20 26 12 6", ":class: glance-table compact-table", "",
             "* - Claim", "  - Source", "  - Ours", "  - Verdict", "  - Where"]
    for r in rows:
        at = r["by_profile"][profile]
        where = "" if r["reason"] else f'<br><span class="claim-at">{_cell(at.get("decides") or at["at"])}</span>'
        lines += [f"* - {{ref}}`{r['id']} <{r['anchor']}>` {one_line(r['statement'], 110)}",
                  f"  - {one_line(r['source_value'], 90)}",
                  f"  - {_ours(r, profile)}",
                  f"  - {verdict_badge(at['verdict'], r['words'])}{where}",
                  f"  - {chapter_ref(r)}"]
    return lines + ["```", ""]
