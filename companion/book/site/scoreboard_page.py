"""The scoreboard page (`book/scoreboard.md`), written from the scoreboard's rows; a few screens long.

Layout, top to bottom: the counts of every verdict; a folded legend; the headline claims (the same
block the landing page opens with, `companion.book.site.glance`); then one folded group per source, each
claim a card (verdict badge, statement, the source's value beside ours, the reason in words) whose
rule, null, threshold reasoning and preconditions are folded again inside it, as sentences. Every
claim keeps its anchor `claim-<id>` on its card; `book/_static/scoreboard.js` unfolds the group of
the card a link points at. A column per profile appears only for a profile with at least one
measure (until then one line says the paper profile has no record yet).
"""

from __future__ import annotations

from pathlib import Path

from companion.book.claims import VERDICTS
from companion.book.site.compact import compact_table
from companion.book.display import badge, ours_text, rule_words
from companion.book.site.glance import group_badge, headline_block, totals
from companion.book.preconditions import needed_words, requirement, value_words
from companion.book.words import noun, value_label, verdict_badge

__all__ = ["page", "measured_profiles", "HEADLINES_LABEL", "ALL_LABEL"]

HEADLINES_LABEL = "scoreboard-headlines"
ALL_LABEL = "scoreboard-all"  # the compact table of every claim
_MEANING = {
    "reproduced": "our measure passes the claim's rule; the rule's null (what the opposite reading predicts) never passes",
    "partly": "our measure falls between the rule's threshold and its weaker, partly threshold",
    "not reproduced": "the comparison could be made and the measure fails the rule",
    "inconclusive": "a precondition failed, so at this scale the comparison cannot be made, whatever the measure; "
                    "the card says what was measured and what was needed",
    "not run at this scale": "the claim needs a profile that has not been run here",
    "reported, not rebuilt": "no chapter rebuilds the item (data or compute out of reach); the card gives the reason",
}
_KINDS = ("A hypothesis (the referees' or the book's own, a statement no source claims) is "
          f"{verdict_badge('reproduced', 'hypotheses')}, {verdict_badge('partly', 'hypotheses')} or "
          f"{verdict_badge('not reproduced', 'hypotheses')}; a goal the book sets itself is "
          f"{verdict_badge('reproduced', 'goals')} or {verdict_badge('not reproduced', 'goals')}, by the same rules.")


def _cell(text) -> str:
    return " ".join(str(text).split())


def _cap(text: str) -> str:
    text = _cell(text)
    return text[:1].upper() + text[1:]


def measured_profiles(rows: list[dict], profiles: list[str]) -> list[str]:
    """The profiles that measured at least one claim (the first, the book's own, always)."""
    return [p for i, p in enumerate(profiles)
            if i == 0 or any(r["by_profile"][p]["ours"] is not None for r in rows)]


def _counts(rows: list[dict]) -> dict[str, int]:
    return {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}


def counts_line(counts: dict[str, int], words: str = "") -> str:
    """Badges with their counts inside, for the verdicts that occur."""
    return " ".join(verdict_badge(v, words, counts[v]) for v in VERDICTS if counts.get(v))


def _in_full(r: dict, units: dict) -> list[str]:
    """The claim's rule in full, as sentences."""
    out = [f"*Source:* {_cell(r['source'])}, {_cell(r['location'])}."]
    if r["reason"]:
        return out
    out.append(f"*Measure* (`{r['profile']}` profile): {_cell(r['measure']).rstrip('.')}.")
    out.append(f"*Rule:* {rule_words(r['rule'], r['id'], units, r['words'])}.")
    if r["null"] is not None:
        out.append(f"*Null:* the opposite reading predicts {ours_text(r['null'], r['id'], units)}, "
                   "which the rule does not pass.")
    if r["why"]:
        out.append(f"*Why these thresholds:* {_cell(r['why'])}")
    for q in r["requires"]:
        met = "met" if q["id"] not in {f["id"] for f in r["failed"]} else "not met"
        out.append(f"*Requires:* {requirement(q['says'])}; needed {needed_words(q['rule'])}, "
                   f"measured {value_words(q['value'], q['rule'])} ({met}).")
    return out


def _card(r: dict, profiles: list[str], units: dict) -> list[str]:
    profiles = profiles if r.get("scaled", True) else profiles[:1]  # a check has one value at every scale
    verdicts = " ".join(verdict_badge(r["by_profile"][p]["verdict"], r["words"])
                        + (f"&nbsp;({r['by_profile'][p]['decides']})" if r["by_profile"][p].get("decides")
                           else f"&nbsp;({p})" if len(profiles) > 1 else "")
                        for p in profiles)
    head = f"**{r['id']}** {verdicts}"
    if r["section"] and not r["reason"]:
        head += f" · {{ref}}`where it is measured <{r['section']}>`"
    values = [f"*{value_label(r['words'], r['own'])}:* {_cell(r['source_value'])}"]
    if not r["reason"]:
        values += [f"*Ours ({r['by_profile'][p]['at']}):* {_cell(r['by_profile'][p]['ours_text'])}"
                   + (f" ({_cell(r['quantity'])})" if r["quantity"] and r["by_profile"][p]["ours"] is not None else "")
                   for p in profiles]
    for p in profiles:
        dec = r["by_profile"][p].get("decided")
        if dec is not None:
            values.append(f"*Ours, decided {_cell(dec['budget'])}:* {_cell(dec['ours_text'])}, "
                          f"{verdict_badge(dec['verdict'], r['words'])} ({_cell(dec['measure'])}; "
                          f"{{ref}}`where <{dec['section']}>`)")
    lines = [f"({r['anchor']})=", f"::::{{container}} claim-card verdict-edge-{_slug(r['verdict'])}", head, "",
             _cap(r["statement"]), "", " · ".join(values), "", f"*Why:* {_cell(r['reason_line'])}", ""]
    if r.get("prediction"):
        lines += [f"*At paper scale, written before its records:* {_cell(r['prediction'])}.", ""]
    lines += [":::{dropdown} The rule in full", ":class-container: claim-rule", ""]
    for sentence in _in_full(r, units):
        lines += [sentence, ""]
    return lines + [":::", "::::", ""]


def _other_profile_line(rows: list[dict], profile: str) -> str:
    """What a second profile's verdicts cover: how many claims it measured, in which chapters, and what the
    cards show for the rest."""
    scaled = [r for r in rows if r.get("scaled")]
    measured = [r for r in scaled if r["by_profile"][profile]["ours"] is not None]
    chapters = sorted({r["chapter"] for r in measured if r.get("chapter")})
    where = ", ".join(f"{{doc}}`Chapter {int(Path(c).name.split('_')[0])} <{c}>`" for c in chapters)
    where = f", from {where}" if where else ""
    return (f"Each card whose value comes from trained runs ({len(scaled)} claims) also gives its `{profile}`-profile "
            f"verdict: {len(measured)} have one{where}; the others say how many of their chapter's runs are committed "
            "at that profile. Exact and float64 checks, benchmarks and reported claims have one value at every scale.")


def _slug(verdict: str) -> str:
    return "-".join("".join(ch if ch.isalpha() else " " for ch in verdict.lower()).split())


def _group(title: str, label: str, members: list[dict], profiles: list[str], units: dict, note: str = "",
           words: str = "") -> list[str]:
    lines = [f"({label})=", f":::::{{dropdown}} {title} ({noun(words, len(members))}) {counts_line(_counts(members), words)}",
             ":class-container: scoreboard-group", ""]
    if note:
        lines += [_cap(note).rstrip(".") + ".", ""]
    for r in members:
        lines += _card(r, profiles, units)
    return lines + [":::::", ""]


def page(rows: list[dict], groups: list[dict], headlines: list[str], profiles: list[str], units: dict) -> str:
    """The markdown of the scoreboard page."""
    shown = measured_profiles(rows, profiles)
    missing = [p for p in profiles if p not in shown]
    lines = ["---", "html_theme.sidebar_secondary.remove: true", "---", "", "(scoreboard)=", "# Reproduction scoreboard", "",
             "Every claim the book checks, one row each, at the profile the book shows; a row's id opens its card "
             "below, with the rule in full.", ""]
    lines += [":::{dropdown} What the verdicts mean", ":class-container: scoreboard-legend", ""]
    for v in VERDICTS:
        lines += [f"- {badge(v)} {_MEANING[v]}"]
    lines += ["", _KINDS, "", ":::", "", f"({ALL_LABEL})="]
    lines += compact_table(rows, shown[0])
    lines += [f"({HEADLINES_LABEL})=", "## The counts and the headline claims", ""]
    lines += totals(rows, groups, shown[0]) + [""]
    if missing:
        lines += [f"Measured at the `{shown[0]}` profile. No claim has a {', '.join(f'`{p}`' for p in missing)}-profile "
                  "value yet (a claim needs every run its comparison reads at that profile; each chapter counts the "
                  "runs committed), so no column is shown for it.", ""]
    for p in shown[1:]:
        lines += [_other_profile_line(rows, p), ""]
    lines += ["The central claim of each source and the book's largest non-reproductions:", ""]
    lines += headline_block(rows, headlines, groups, profile=shown[0])
    lines += ["## Every claim, by source", ""]
    for g in groups:
        members = [r for r in rows if r["group"] == g["prefix"]]
        if not members:
            continue
        members.sort(key=lambda r: (bool(r["reason"]), not r["headline"], rows.index(r)))
        title = f"{group_badge(g)} {g['title']}"
        lines += _group(title, f"scoreboard-{g['prefix'].lower()}", members, shown, units, g.get("note", ""), g["words"])
    lines += ["The page is generated by `companion scoreboard` from the ledger (`book/claims.yml`) and the executed "
              "chapters; the same claims are in `book/chapters/scoreboard.json`.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
