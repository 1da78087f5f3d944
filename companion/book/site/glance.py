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


from companion.book.claims import VERDICTS
from companion.book.display import _short
from companion.book.preconditions import failed_note
from companion.book.words import noun, value_label, verdict_badge

__all__ = ["verdict_badge", "group_badge", "headline_block", "landing", "stale_takeaways", "totals"]

_HELD_OR_FAILED = ("reproduced", "partly", "not reproduced", "not run at this scale", "reported, not rebuilt")


def group_badge(group: dict) -> str:
    """A group's short name, as the scoreboard and the landing page print it."""
    return f'<span class="group-tag">{group.get("short", group["prefix"])}</span>'


def _verdict(row: dict, profile: str) -> str:
    return row["by_profile"].get(profile, {}).get("verdict", row["verdict"])


def _counts(rows: list[dict], profile: str, words: str) -> str:
    seen = [_verdict(r, profile) for r in rows]
    return " ".join(verdict_badge(v, words, seen.count(v)) for v in VERDICTS if v in seen)


def _chip(row: dict, profile: str) -> str:
    return (f'<span class="verdict-chip">{{ref}}`{row["id"]} <{row["anchor"]}>`&nbsp;'
            f'{verdict_badge(_verdict(row, profile), row["words"])}</span>')


def _members(rows: list[dict], groups: list[dict]) -> list[dict]:
    prefixes = {g["prefix"] for g in groups}
    return [r for r in rows if r["group"] in prefixes]


def theirs_line(rows: list[dict], groups: list[dict], profile: str) -> str:
    """"The sources' 61 claims (S1, S2, S3): <badges>": every claim a source made, counted once."""
    theirs = [g for g in groups if not g["own"] and g["words"] == "claims" and _members(rows, [g])]
    rs = _members(rows, theirs)
    return (f"**The sources' {len(rs)} claims** ({', '.join(g['short'] for g in theirs)}): "
            f"{_counts(rs, profile, 'claims')}") if rs else ""


def own_line(rows: list[dict], groups: list[dict], profile: str, heads: set | frozenset = frozenset()) -> str:
    """"The book's own 12, set by the book: 9 hypotheses <badges>; 3 goals <badges>", each kind linked to
    its group on the scoreboard, with the headline ones as chips."""
    own = [g for g in groups if g["own"] and _members(rows, [g])]
    if not own:
        return ""
    parts = [f"{{ref}}`{noun(g['words'], len(rs))} <scoreboard-{g['prefix'].lower()}>` {_counts(rs, profile, g['words'])}"
             for g in own for rs in [_members(rows, [g])]]
    chips = [_chip(r, profile) for r in _members(rows, own) if r["id"] in heads]
    return (f"**The book's own {len(_members(rows, own))}**, set by the book, not claimed by a source: {'; '.join(parts)}"
            + (f". Headline: {' '.join(chips)}" if chips else ""))


def totals(rows: list[dict], groups: list[dict], profile: str) -> list[str]:
    """The counts that mean one thing each, as markdown list lines: the sources' claims together; each group
    of hypotheses a source posed without claiming them (the referees'); the book's own hypotheses and
    goals, each in its own words. Every item is counted once, reported ones included."""
    lines = [theirs_line(rows, groups, profile)]
    for g in groups:
        rs = _members(rows, [g])
        if rs and not g["own"] and g["words"] != "claims":
            lines.append(f"**{g['title']}** ({noun(g['words'], len(rs))}, not claims of the paper): "
                         f"{_counts(rs, profile, g['words'])}")
    lines.append(own_line(rows, groups, profile))
    return [f"- {line}" for line in lines if line]


def _claim(row: dict, limit: int = 120) -> str:
    return f"{{ref}}`{row['id']} <{row['anchor']}>` {_short(row['statement'], limit)}"


def _values(row: dict, profile: str) -> str:
    at = row["by_profile"].get(profile, {})
    ours = at.get("ours_text", row["ours_text"])
    what = f" ({row['quantity']}; {at['at']})" if row.get("quantity") and at.get("ours") is not None else ""
    return f"{value_label(row['words'], row['own'])}: {' '.join(str(row['source_value']).split())} · ours: {ours}{what}"


def _table(rows: list[dict], profile: str, groups_by: dict, css: str) -> list[str]:
    lines = ["```{list-table}", ":header-rows: 1", ":widths: 18 50 32", f":class: glance-table {css}", "",
             "* - Verdict", "  - Claim", "  - Source and ours"]
    for r in rows:
        lines += [f"* - {verdict_badge(_verdict(r, profile), r['words'])}", f"  - {_claim(r)}", f"  - {_values(r, profile)}"]
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
    heads = set(doc.get("headlines", []))
    lines = [f"**Verdicts at the `{profile}` profile.** {theirs_line(rows, groups, profile)}. Source by source, with "
             "the headline claims (every item is on the {ref}`scoreboard <scoreboard>`):", ""]
    for g in groups:
        if g["own"]:
            continue
        members = [r for r in rows if r["group"] == g["prefix"]]
        if not members:
            continue
        take = (g.get("takeaway") or {}).get("text", "")
        text = f" {' '.join(take.split())}" if take and g["prefix"] not in stale else ""
        chips = [_chip(r, profile) for r in members if r["id"] in heads]
        lines.append(f"- {group_badge(g)} **{{ref}}`{g['title']} <scoreboard-{g['prefix'].lower()}>`** "
                     f"({noun(g['words'], len(members))}): {_counts(members, profile, g['words'])}<br>"
                     + (f"{text.strip()} " if text else "") + (f"Headline: {' '.join(chips)}" if chips else ""))
    lines.append(f"- {own_line(rows, groups, profile, heads)}")
    lines += ["", "**Headline claims**, held and failed alike:", ""]
    lines += headline_block(rows, doc.get("headlines", []), groups, profile=profile)
    return "\n".join(lines).rstrip() + "\n", problems
