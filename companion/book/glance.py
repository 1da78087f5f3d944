"""Verdicts first: the block the landing page opens with, and the headline claims the scoreboard shows.

Everything here is written from the scoreboard's data (`book/chapters/scoreboard.json`, its `groups`
from `book/dashboard.yml`): one line per source with the counts of its verdicts as badges and its
takeaway, then the headline claims, held and failed alike, in one table (verdict, claim, the
source's value beside ours); inconclusive headlines and the book's own goals and hypotheses are
listed apart, the first with what was measured against what was needed, the second in their own
words ("goal met", "borne out"), never as a source's claim. Each source's line also carries its
headline claims as badges, so the first screen shows every headline verdict.

A takeaway is the one sentence of prose per source (`takeaway.text` in the dashboard). It names the
verdicts it rests on (`takeaway.rests_on`: {claim id: verdict}); when one of them no longer holds,
the takeaway is left out and `landing` reports it, so a sentence can never outlive its evidence
(the Sphinx extension turns the report into a build warning; `tests/test_glance.py` checks the
committed scoreboard).
"""

from __future__ import annotations

import re

from companion.book.claims import VERDICTS
from companion.book.display import _short
from companion.book.preconditions import failed_note

__all__ = ["verdict_badge", "group_badge", "headline_block", "landing", "stale_takeaways", "OWN_WORDS"]

# The book's own goals are met or not, its hypotheses borne out or not; neither is "reproduced" (the
# colours stay the verdicts'). A group's `own` (companion.book.scoreboard.claim_groups) picks the words.
OWN_WORDS = {
    "goals": {"reproduced": "goal met", "partly": "goal partly met", "not reproduced": "goal not met"},
    "hypotheses": {"reproduced": "borne out", "partly": "partly borne out", "not reproduced": "not borne out"},
}
OWN_VALUE_LABEL = {"goals": "Goal", "hypotheses": "Predicted"}
_HELD_OR_FAILED = ("reproduced", "partly", "not reproduced", "not run at this scale", "reported, not rebuilt")


def _slug(verdict: str) -> str:
    return re.sub(r"[^a-z]+", "-", verdict.lower()).strip("-")


def verdict_badge(verdict: str, own: str = "", count: int | None = None) -> str:
    """A verdict's badge ("goal not met", "borne out" for the book's own), with a count if given."""
    text = OWN_WORDS.get(own, {}).get(verdict, verdict) if own else verdict
    text = text if count is None else f"{count}&nbsp;{text}"
    return f'<span class="verdict-badge verdict-{_slug(verdict)}">{text}</span>'


def value_label(own: str) -> str:
    """What the ledger's `source_value` is for a claim: the source's value, or the book's goal or prediction."""
    return OWN_VALUE_LABEL.get(own, "Source") if own else "Source"


def group_badge(group: dict) -> str:
    """A group's short name, as the scoreboard and the landing page print it."""
    return f'<span class="group-tag">{group.get("short", group["prefix"])}</span>'


def _verdict(row: dict, profile: str) -> str:
    return row["by_profile"].get(profile, {}).get("verdict", row["verdict"])


def _counts(rows: list[dict], profile: str, own: str) -> str:
    seen = [_verdict(r, profile) for r in rows]
    return " ".join(verdict_badge(v, own, seen.count(v)) for v in VERDICTS if v in seen)


def _chip(row: dict, profile: str, own: str) -> str:
    return (f'<span class="verdict-chip">{{ref}}`{row["id"]} <{row["anchor"]}>`&nbsp;'
            f'{verdict_badge(_verdict(row, profile), own)}</span>')


def _claim(row: dict, limit: int = 120) -> str:
    return f"{{ref}}`{row['id']} <{row['anchor']}>` {_short(row['statement'], limit)}"


def _values(row: dict, profile: str, own: str) -> str:
    ours = row["by_profile"].get(profile, {}).get("ours_text", row["ours_text"])
    return f"{value_label(own)}: {' '.join(str(row['source_value']).split())} · ours: {ours}"


def _table(rows: list[dict], profile: str, groups_by: dict, css: str) -> list[str]:
    lines = ["```{list-table}", ":header-rows: 1", ":widths: 18 50 32", f":class: glance-table {css}", "",
             "* - Verdict", "  - Claim", "  - Source and ours"]
    for r in rows:
        own = groups_by.get(r["group"], {}).get("own", "")
        lines += [f"* - {verdict_badge(_verdict(r, profile), own)}", f"  - {_claim(r)}", f"  - {_values(r, profile, own)}"]
    return lines + ["```", ""]


def headline_block(rows: list[dict], headlines: list[str], groups: list[dict], *, profile: str) -> list[str]:
    """The headline claims as markdown lines: the sources' held and failed ones in one table, then the
    inconclusive ones and the book's own goals apart."""
    by_id = {r["id"]: r for r in rows}
    groups_by = {g["prefix"]: g for g in groups}
    heads = [by_id[h] for h in headlines if h in by_id]
    own = [r for r in heads if groups_by.get(r["group"], {}).get("own")]
    theirs = [r for r in heads if r not in own]
    inconclusive = [r for r in theirs if _verdict(r, profile) == "inconclusive"]
    decided = sorted((r for r in theirs if r not in inconclusive),
                     key=lambda r: (_HELD_OR_FAILED.index(_verdict(r, profile)), heads.index(r)))
    lines = _table(decided, profile, groups_by, "glance-decided") if decided else []
    if inconclusive:
        lines += ["**Inconclusive at this scale**: a precondition of the comparison failed, so these are neither held "
                  "nor failed.", ""]
        for r in inconclusive:
            reqs = {q["id"]: q for q in r["requires"]}
            shown = profile == next(iter(r["by_profile"]))  # the book's own profile: its measured preconditions
            notes = [failed_note(reqs[f]["says"], reqs[f]["value"], reqs[f]["rule"], 100) if shown and f in reqs else f
                     for f in r["by_profile"].get(profile, {}).get("failed", [])]
            lines.append(f"- {verdict_badge('inconclusive')} {_claim(r)} Precondition {'; '.join(notes)}.")
        lines.append("")
    if own:
        lines += ["**This book's own goals and hypotheses**, set by the book, not claimed by a source:", ""]
        lines += _table(own, profile, groups_by, "glance-goals")
    return lines


def stale_takeaways(rows: list[dict], groups: list[dict], profile: str) -> dict[str, list[str]]:
    """{group prefix: ["S2-06 is now partly, the takeaway says not reproduced", …]} for every takeaway
    whose evidence moved (or names a claim that is gone)."""
    by_id = {r["id"]: r for r in rows}
    out: dict[str, list[str]] = {}
    for g in groups:
        take = g.get("takeaway") or {}
        for cid, expected in (take.get("rests_on") or {}).items():
            now = _verdict(by_id[cid], profile) if cid in by_id else "not in the ledger"
            if now != expected:
                out.setdefault(g["prefix"], []).append(f"{cid} is {now}, the takeaway says {expected}")
    return out


def landing(doc: dict, profile: str | None = None) -> tuple[str, list[str]]:
    """The landing page's verdicts-first block (markdown) and the problems found (stale takeaways)."""
    rows, groups = doc.get("claims", []), doc.get("groups", [])
    if not rows:
        return "The scoreboard has not been generated yet (`companion scoreboard`).", []
    profile = profile or doc.get("profiles", ["ci"])[0]
    stale = stale_takeaways(rows, groups, profile)
    problems = [f"book/dashboard.yml: the takeaway of {p} no longer matches the scoreboard ({'; '.join(w)}); "
                "rewrite it or its rests_on" for p, w in stale.items()]
    lines = [f"**Verdicts at the `{profile}` profile**, source by source, with the headline claims (every claim "
             "is on the {ref}`scoreboard <scoreboard>`):", ""]
    heads = set(doc.get("headlines", []))
    for g in sorted(groups, key=lambda g: bool(g.get("own"))):
        members = [r for r in rows if r["group"] == g["prefix"]]
        if not members:
            continue
        own = g.get("own", "")
        take = (g.get("takeaway") or {}).get("text", "")
        text = f" {' '.join(take.split())}" if take and g["prefix"] not in stale else ""
        chips = [_chip(r, profile, own) for r in members if r["id"] in heads]
        kind = {"goals": "goals", "hypotheses": "hypotheses"}.get(own, "claims")
        lines.append(f"- {group_badge(g)} **{{ref}}`{g['title']} <scoreboard-{g['prefix'].lower()}>`** "
                     f"({len(members)} {kind}): {_counts(members, profile, own)}<br>"
                     + (f"{text.strip()} " if text else "") + (f"Headline: {' '.join(chips)}" if chips else ""))
    lines += ["", "**Headline claims**, held and failed alike:", ""]
    lines += headline_block(rows, doc.get("headlines", []), groups, profile=profile)
    return "\n".join(lines).rstrip() + "\n", problems
