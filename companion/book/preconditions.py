"""A failed precondition in words: what was required, what was measured, and what was needed.

A precondition's `says` (book/claims.yml) states the requirement ("the default model fits the seen
set … (mean seen accuracy ≥ 99 %)"). Printed alone beside an inconclusive verdict it reads as if it
held; here it is always labelled as what was required and set against the measured value and the
value the rule needs, in the same units: "Required: the default model fits the seen set of Cyclic3
within the budget (mean seen accuracy ≥ 99 %). Measured 19.4 %; needed ≥ 99 %."

Units follow the rule: a threshold strictly between 0 and 1 is a share (written in %), a whole
threshold of at least 1 is a count, anything else a plain number. The scoreboard's "why" and each
chapter's verdict table (`companion.book.claims.verdict_table`) use the same words.
"""

from __future__ import annotations

from companion.book.display import _short, number

__all__ = ["value_words", "needed_words", "requirement", "failed_sentence", "failed_note"]


def _kind(rule: dict) -> str:
    """'share', 'count' or 'number': how a precondition's values are written, from its rule."""
    t = rule.get("threshold", rule.get("target", rule.get("value")))
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        return "number"
    if 0 < t < 1:
        return "share"
    return "count" if float(t).is_integer() and t >= 1 else "number"


def _fmt(x, kind: str, *, exact: bool = False) -> str:
    if isinstance(x, bool):
        return "holds" if x else "does not hold"
    if not isinstance(x, (int, float)):
        return number(x)
    if kind == "share":
        return f"{100 * x:.4g} %" if exact else f"{100 * x:.1f} %"
    if kind == "count" and float(x).is_integer():
        return str(int(x))
    return number(float(x))


def value_words(value, rule: dict) -> str:
    """A precondition's measured value in its rule's units ("19.4 %", "0", "3.14"), or "not recorded"."""
    return "not recorded" if value is None else _fmt(value, _kind(rule))


def needed_words(rule: dict) -> str:
    """What a precondition's rule needs, in its units: "≥ 99 %", "≥ 1", "≤ 4", "to hold"."""
    kind, k = _kind(rule), rule["kind"]
    if k == "holds":
        return "to hold"
    if k == "equals":
        return f"= {_fmt(rule['value'], kind, exact=True)}"
    if k == "close":
        return f"within ±{_fmt(rule['tol'], kind, exact=True)} of {_fmt(rule['target'], kind, exact=True)}"
    return f"{'≥' if k == 'at_least' else '≤'} {_fmt(rule['threshold'], kind, exact=True)}"


def requirement(says: str, limit: int = 200) -> str:
    """The requirement's own clause: `says` up to its first "; " or ", so " (the reasons that follow are
    the ledger's, not the reader's first need), at most `limit` characters."""
    text = " ".join(str(says).split())
    for sep in ("; ", ", so "):
        head = text.split(sep)[0]
        if len(head) >= 30:
            text = head
    return _short(text, limit) if len(text) > limit else text


def failed_sentence(failed: dict, rule: dict, profile: str) -> str:
    """The scoreboard's "why" for one failed precondition ({id, says, value})."""
    return (f"Not decided at the {profile} scale. Required: {requirement(failed['says'])}. "
            f"Measured {value_words(failed['value'], rule)}; needed {needed_words(rule)}.")


def failed_note(says: str, value, rule: dict, limit: int = 130) -> str:
    """A chapter table's short note: "measured 19.4 %, needed ≥ 99 %: the default model fits the seen set …"."""
    return f"measured {value_words(value, rule)}, needed {needed_words(rule)}: {requirement(says, limit)}"
