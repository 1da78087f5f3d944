"""One vocabulary per kind of item the book decides, used by every badge, count, table and strip.

A source's claim is *reproduced* or not; a hypothesis (the referees' or the book's own: a statement no
source made, whose test the book runs) is *borne out* or not; a goal the book sets itself is *met* or
not. The verdicts underneath are the ledger's six (`companion.book.claims.VERDICTS`) and keep their
colours; only the words change, so "not reproduced" is never said of a statement its source did not
make. A group of the scoreboard names its kind in `book/dashboard.yml` (`words`, else its `own`).
"""

from __future__ import annotations

import re

__all__ = ["KINDS", "verdict_words", "verdict_badge", "noun", "value_label", "claim_groups", "words_of", "prefix"]

KINDS = ("claims", "hypotheses", "goals")
_WORDS = {
    "hypotheses": {"reproduced": "borne out", "partly": "partly borne out", "not reproduced": "not borne out"},
    "goals": {"reproduced": "goal met", "partly": "goal partly met", "not reproduced": "goal not met"},
}
_NOUNS = {"claims": ("claim", "claims"), "hypotheses": ("hypothesis", "hypotheses"), "goals": ("goal", "goals")}


def _kind(words: str) -> str:
    kind = words or "claims"
    if kind not in KINDS:
        raise ValueError(f"unknown kind of claim {words!r}; book/dashboard.yml's `words` is one of {', '.join(KINDS)}")
    return kind


def verdict_words(verdict: str, words: str = "") -> str:
    """A verdict in the words of its kind: ("not reproduced", "goals") → "goal not met"."""
    return _WORDS.get(_kind(words), {}).get(verdict, verdict)


def _slug(verdict: str) -> str:
    return re.sub(r"[^a-z]+", "-", verdict.lower()).strip("-")


def verdict_badge(verdict: str, words: str = "", count: int | None = None) -> str:
    """A verdict's badge in the words of its kind (the colour is the verdict's), with a count if given."""
    text = verdict_words(verdict, words)
    text = text if count is None else f"{count}&nbsp;{text}"
    return f'<span class="verdict-badge verdict-{_slug(verdict)}">{text}</span>'


def noun(words: str, count: int) -> str:
    """"1 claim", "8 hypotheses", "3 goals"."""
    one, many = _NOUNS[_kind(words)]
    return f"{count} {one if count == 1 else many}"


def value_label(words: str = "", own: str = "") -> str:
    """What the ledger's `source_value` is: the goal the book set, the book's own prediction, or what a
    source says (a source's claim, or what the referees' dossier says of a hypothesis it poses)."""
    kind = _kind(words)
    return "Goal" if kind == "goals" else "Predicted" if own and kind == "hypotheses" else "Source"


_SOURCE_PREFIX = re.compile(r"S\d+|R")  # the sources' claims (S1, S2, …) and their referees'; others are the book's


def prefix(cid: str) -> str:
    """A claim id's group: "S2-06" → "S2"."""
    return cid.split("-")[0]


def claim_groups(sources: list[dict], ids: list[str]) -> list[dict]:
    """The scoreboard's groups: those of book/dashboard.yml in its order, then one per claim-id prefix
    it does not list. `own` says whether a group is the book's own rather than a source's: "goals" or
    "hypotheses" (`own: true` reads "hypotheses"), "" for a source; a group that does not say is the
    book's own hypotheses unless its prefix names a source (S1, S2, …) or the referees (R). `words` is
    the kind its verdicts are said in: the group's `words` (the referees' statements are hypotheses
    they pose, not claims of the paper), else its `own`, else claims."""
    def own_of(pre: str, value) -> str:
        if value is None:
            value = not _SOURCE_PREFIX.fullmatch(pre)
        return "hypotheses" if value is True else (value or "")

    def group(pre: str, g: dict) -> dict:
        own = own_of(pre, g.get("own"))
        return {"prefix": pre, "short": g.get("short", pre), "note": g.get("note", ""), "own": own,
                "words": _kind(g.get("words") or own), **({"takeaway": g["takeaway"]} if g.get("takeaway") else {}),
                "title": g.get("title") or f"{pre} claims" + (" of this book" if own else "")}

    out = [group(g["prefix"], g) for g in sources]
    listed = {g["prefix"] for g in out}
    for pre in dict.fromkeys(prefix(cid) for cid in ids):
        if pre not in listed:
            out.append(group(pre, {}))
            listed.add(pre)
    return out


def words_of(cid: str, groups: list[dict]) -> str:
    """The kind a claim's verdict is said in, from its group (claims when no group names its prefix)."""
    return next((g["words"] for g in groups if g["prefix"] == prefix(cid)), "claims")
