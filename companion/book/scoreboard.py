"""The reproduction scoreboard, generated from the ledger and the measures glued in executed chapters.

Writes `book/scoreboard.md` (a page of the book) and `book/chapters/scoreboard.json` (the same
claims for machines). Verdicts are recomputed here from each claim's rule and the preconditions the
chapter recorded, so a page and its chapter cannot disagree. An inconclusive claim names the
precondition that failed; an item reported, not rebuilt gives its reason.

The page is a dashboard: counts per source and verdict, the headline claims first, then one table
per source with a coloured verdict badge, our measure in the source's units (with its interval when
the chapter recorded one) and a one-line reason in words; every claim has the anchor `claim-<id>`
that chapters link to, and links back to the chapter section that measures it. How claims are
grouped, which are headlines and the unit of each measure come from `book/dashboard.yml`; the rules
and the verdicts only from `book/claims.yml`. Each profile gets its own column: "ci" from the
executed chapters in `book/chapters/`; "paper" from executed chapters in `book/chapters/paper/` when
that folder exists, else from the committed paper-profile records in `results/paper/` through each
chapter's `claims` function (`companion.book.paper`). A claim that a profile did not measure reads
*not run at this scale* there, with how many of its chapter's runs exist at that profile.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from companion.book.claims import GLUE_PREFIX, MIME, VERDICTS, assess, format_measure, load_ledger
from companion.book.display import DASHBOARD, _short, anchor, badge, load_dashboard, ours_text, rule_words
from companion.paths import repo_root

__all__ = ["collect_measures", "build", "main", "why_line", "profile_dirs", "PROFILE_DIRS"]

SCHEMA_VERSION = 3
NOT_REBUILT_LABEL = "scoreboard-not-rebuilt"  # the page's own section for items no chapter rebuilds
HEADLINES_LABEL = "scoreboard-headlines"
PAGE = Path("book") / "scoreboard.md"
JSON = Path("book") / "chapters" / "scoreboard.json"
# Where the executed chapters of each profile live; the first is the one the book shows.
PROFILE_DIRS = {"ci": Path("book") / "chapters", "paper": Path("book") / "chapters" / "paper"}
_MIME = "application/papermill.record/" + MIME
_SHORT = {"reproduced": "reproduced", "partly": "partly", "not reproduced": "not reproduced",
          "inconclusive": "inconclusive", "not run at this scale": "not run", "reported, not rebuilt": "reported"}


def profile_dirs(root: Path) -> dict[str, Path]:
    """{profile: its executed chapters} for the profiles that have been run here (ci always)."""
    out = {}
    for i, (profile, rel) in enumerate(PROFILE_DIRS.items()):
        if i == 0 or any((root / rel).glob("*.ipynb")):
            out[profile] = root / rel
    return out


def collect_measures(chapters_dir: Path) -> dict[str, dict]:
    """Every `claim:<id>` glued in the executed notebooks of `chapters_dir`: id → {measure, detail,
    preconditions, notebook}."""
    found: dict[str, dict] = {}
    for nb_path in sorted(chapters_dir.glob("*.ipynb")):
        nb = json.loads(nb_path.read_text())
        for cell in nb.get("cells", []):
            for out in cell.get("outputs", []):
                name = out.get("metadata", {}).get("scrapbook", {}).get("name", "")
                if not name.startswith(GLUE_PREFIX) or _MIME not in out.get("data", {}):
                    continue
                rec = out["data"][_MIME]
                cid = name[len(GLUE_PREFIX):]
                if cid in found:
                    raise ValueError(f"claim {cid} is measured twice: in {found[cid]['notebook']} and {nb_path.name}.")
                found[cid] = {"measure": rec["measure"], "detail": rec.get("detail", ""),
                              "preconditions": rec.get("preconditions", {}), "notebook": nb_path.name}
    return found


def _pre_value(v) -> str:
    if v is None:
        return "not recorded"
    if isinstance(v, bool):
        return "holds" if v else "does not hold"
    if isinstance(v, (int, float)) and 0 <= v <= 1:
        return f"{100 * v:.1f} %"
    return format_measure(v)


def why_line(row: dict, units: dict) -> str:
    """One line, in words, of what decided a claim's verdict: the reason an item is not rebuilt, the
    precondition that failed (with its value), or the measure, its scale and the rule."""
    if row["reason"]:
        text = _cell(row["reason"]).rstrip(".")
        return f"{text[0].upper()}{text[1:]}."
    if row["failed"]:
        return " ".join(f"Precondition not met at the {row['profile']} scale: {_short(f['says'], 170)} "
                        f"(measured {_pre_value(f['value'])})." for f in row["failed"])
    scale = f"{row['profile']} scale"
    if row["ours"] is None:
        return f"Measured at the `{row['profile']}` profile only, which has not been run here: {_short(row['measure'])}."
    text = _short(row["measure"])
    return f"{text[0].upper()}{text[1:]} ({scale}); {rule_words(row['rule'], row['id'], units)}."


# ---------------------------------------------------------------- the claims and the page


def _assess_all(ledger, measures: dict[str, dict]) -> dict[str, dict]:
    out = {}
    for cid, c in ledger.items():
        m = measures.get(cid, {})
        measure, pre = m.get("measure"), m.get("preconditions", {})
        v, failed = assess(c, measure, pre)
        says = {r["id"]: r["says"] for r in c.requires}
        out[cid] = {"ours": measure, "verdict": v, "detail": m.get("detail", ""),
                    "preconditions": pre,
                    "failed": [{"id": f, "says": says[f], "value": pre.get(f)} for f in failed]}
    return out


def build(root: Path | None = None) -> tuple[str, str]:
    """The scoreboard as (markdown page, JSON text)."""
    root = root or repo_root()
    ledger = load_ledger(root / "book" / "claims.yml")
    dash_path = root / DASHBOARD
    dash = load_dashboard(dash_path if dash_path.is_file() else repo_root() / DASHBOARD)
    by_profile = {}
    for profile, folder in profile_dirs(root).items():
        measures = collect_measures(folder)
        unknown = sorted(set(measures) - set(ledger))
        if unknown:
            raise ValueError(f"executed chapters measure claims that are not in the ledger: {unknown}.")
        measured_unbuilt = sorted(cid for cid in measures if not ledger[cid].rebuilt)
        if measured_unbuilt:
            raise ValueError(f"executed chapters measure items the ledger reports as not rebuilt: {measured_unbuilt}.")
        by_profile[profile] = _assess_all(ledger, measures)
    coverage = {}
    if "paper" not in by_profile:
        from companion.book.paper import measures as paper_measures

        found, coverage = paper_measures(root)
        by_profile["paper"] = _assess_all(ledger, found)
    shown = next(iter(by_profile))
    headlines = [h for h in dash["headlines"] if h in ledger]
    rows = []
    for cid, c in ledger.items():
        r = by_profile[shown][cid]
        row = {
            "id": cid, "source": c.source, "location": c.location, "statement": c.statement,
            "source_value": c.source_value, "measure": c.measure, "ours": r["ours"], "profile": c.profile,
            "rule": c.rule, "null": c.null, "why": c.why, "verdict": r["verdict"], "chapter": c.chapter,
            "section": c.section, "detail": r["detail"],
            "requires": [{**q, "value": r["preconditions"].get(q["id"])} for q in c.requires],
            "failed": r["failed"], "reason": c.reason,
            "headline": cid in headlines, "anchor": anchor(cid), "group": _group(cid, dash["sources"]),
        }
        row["ours_text"] = ours_text(row["ours"], cid, dash["units"], row["detail"])
        row["reason_line"] = why_line(row, dash["units"])
        row["by_profile"] = {p: {"ours": a[cid]["ours"], "verdict": a[cid]["verdict"],
                                 "ours_text": _ours_at(a[cid], cid, dash["units"], p, c, coverage),
                                 "failed": [f["id"] for f in a[cid]["failed"]]}
                             for p, a in by_profile.items()}
        rows.append(row)
    counts = Counter(r["verdict"] for r in rows)
    doc = {"schema_version": SCHEMA_VERSION, "profiles": list(by_profile),
           "counts": {v: counts.get(v, 0) for v in VERDICTS},
           "counts_by_source": {g["prefix"]: _counts([r for r in rows if r["group"] == g["prefix"]])
                                for g in dash["sources"]},
           "headlines": headlines, "claims": rows}
    return _page(rows, counts, dash, headlines, list(by_profile)), json.dumps(doc, indent=1, sort_keys=False) + "\n"


def _ours_at(assessed: dict, cid: str, units: dict, profile: str, claim, coverage: dict) -> str:
    """Our measure at `profile`; where the paper profile has no measure, why: how many of the chapter's
    runs exist (read from records), or that the chapter trains nothing and was not executed there."""
    text = ours_text(assessed["ours"], cid, units, assessed["detail"])
    if profile != "paper" or assessed["ours"] is not None or not claim.rebuilt:
        return text
    cov = coverage.get(Path(claim.chapter or "").name)
    return f"— ({cov.found} of {cov.total} runs)" if cov is not None else "— (not executed at this profile)"


def _group(cid: str, sources: list[dict]) -> str:
    prefix = cid.split("-")[0]
    return prefix if any(g["prefix"] == prefix for g in sources) else "other"


def _counts(rows: list[dict]) -> dict[str, int]:
    c = Counter(r["verdict"] for r in rows)
    return {v: c.get(v, 0) for v in VERDICTS}


def _cell(text: str) -> str:
    return " ".join(str(text).split())


def _claim_table(rows: list[dict], profiles: list[str], *, anchors: bool, headline: bool = False) -> list[str]:
    """A list-table of claims. With `anchors`, each row carries its claim's label."""
    cols = ["Claim", "What the source says (its value)"] + [f"Ours ({p})" for p in profiles] + ["Verdict", "Why"]
    widths = [7, 36] + [13] * len(profiles) + [12, 32]
    lines = ["```{list-table}", ":header-rows: 1", f":widths: {' '.join(map(str, widths))}",
             ":class: scoreboard-table" + (" scoreboard-headlines" if headline else ""), ""]
    lines.append("* - " + "\n  - ".join(cols))
    for r in rows:
        if anchors:
            first = f"({r['anchor']})=\n\n    **{r['id']}**"
        else:
            first = f"{{ref}}`{r['id']} <{r['anchor']}>`"
        back = f"{{ref}}`{r['section']}`"
        ours = [_cell(r["by_profile"][p]["ours_text"]) for p in profiles]
        verdicts = " ".join(badge(r["by_profile"][p]["verdict"]) + (f" ({p})" if len(profiles) > 1 else "")
                            for p in profiles)
        cells = [first, f"{_cell(r['statement'])} ({back})<br>*Source:* {_cell(r['source_value'])}", *ours, verdicts,
                 _cell(r["reason_line"])]
        lines.append("* - " + "\n  - ".join(cells))
    return lines + ["```", ""]


def _counts_line(counts: dict[str, int]) -> str:
    return " ".join(f"{badge(v)}&nbsp;{counts[v]}" for v in VERDICTS if counts.get(v))


def _page(rows: list[dict], counts: Counter, dash: dict, headlines: list[str], profiles: list[str]) -> str:
    by_id = {r["id"]: r for r in rows}
    lines = [
        # the claim tables need the page's width: no "Contents" sidebar here (the "At a glance" table
        # links to every group instead)
        "---",
        "html_theme.sidebar_secondary.remove: true",
        "---",
        "",
        "(scoreboard)=",
        "# Reproduction scoreboard",
        "",
        "Every claim the book checks: what its source says, what the executed chapters measured, and the",
        "verdict that the claim's rule in `book/claims.yml` gives. Each claim links to the section of the",
        "chapter that measures it, and each chapter's verdict table links back here. This page is generated",
        "by `companion scoreboard` from the ledger and the executed chapters; the same claims are in",
        "`book/chapters/scoreboard.json`.",
        "",
        "```{list-table} What the verdicts mean",
        ":header-rows: 1",
        ":widths: 20 80",
        ":class: scoreboard-legend",
        "",
        "* - Verdict",
        "  - Meaning",
        f"* - {badge('reproduced')}",
        "  - our measure passes the claim's rule; the rule's null (what the opposite reading predicts) never passes",
        f"* - {badge('partly')}",
        "  - our measure falls between the rule's threshold and its weaker, partly threshold",
        f"* - {badge('not reproduced')}",
        "  - the comparison could be made and the measure fails the rule",
        f"* - {badge('inconclusive')}",
        "  - a precondition failed (at this scale the comparison cannot be made), whatever the measure; the why names it",
        f"* - {badge('not run at this scale')}",
        "  - the claim needs a profile that has not been run here",
        f"* - {badge('reported, not rebuilt')}",
        "  - no chapter rebuilds the item (data or compute out of reach); the why gives the reason",
        "```",
        "",
        "## At a glance",
        "",
        f"All {len(rows)} claims: {_counts_line(counts)}.",
        "",
        "| Verdict | " + " | ".join(f"{{ref}}`{g.get('short', g['title'])} <scoreboard-{g['prefix'].lower()}>`"
                                   for g in dash["sources"]) + " | All |",
        "|---|" + "---:|" * (len(dash["sources"]) + 1),
    ]
    by_group = {g["prefix"]: _counts([r for r in rows if r["group"] == g["prefix"]]) for g in dash["sources"]}
    for v in VERDICTS:
        lines.append(f"| {badge(v)} | " + " | ".join(str(by_group[g["prefix"]][v]) if by_group[g["prefix"]][v] else "—"
                                                  for g in dash["sources"]) + f" | {counts.get(v, 0)} |")
    lines.append("| **claims** | " + " | ".join(str(sum(by_group[g["prefix"]].values())) for g in dash["sources"])
                 + f" | {len(rows)} |")
    lines += ["", "Columns: " + "; ".join(f"{g.get('short', g['prefix'])} — {g['title']}"
                                          for g in dash["sources"]) + "."]
    lines += ["", f"({HEADLINES_LABEL})=", "## Headline claims", "",
              "The central claim of each source and the book's largest non-reproductions, with the reason for",
              "each verdict.", ""]
    lines += _claim_table([by_id[h] for h in headlines], profiles, anchors=False, headline=True)
    for g in dash["sources"]:
        members = [r for r in rows if r["group"] == g["prefix"] and not r["reason"]]
        members.sort(key=lambda r: (not r["headline"], list(by_id).index(r["id"])))
        lines += [f"(scoreboard-{g['prefix'].lower()})=", f"## {g['title']}", "",
                  f"{g['note'][0].upper()}{g['note'][1:]}. "
                  f"{_counts_line(_counts([r for r in rows if r['group'] == g['prefix']]))}", ""]
        lines += _claim_table(members, profiles, anchors=True) if members else ["No claim is rebuilt here.", ""]
    unbuilt = [r for r in rows if r["reason"]]
    if unbuilt:
        lines += [f"({NOT_REBUILT_LABEL})=", "## Reported, not rebuilt", "",
                  "Items of the sources that no chapter rebuilds, with the value the source reports and why it is",
                  "out of reach here.", ""]
        lines += _claim_table(unbuilt, profiles[:1], anchors=True)
    lines += ["## Measures and rules in full", "",
              "For each rebuilt claim: the source and its location, the profile it is measured at, the measure,",
              "the rule as the ledger writes it, the rule's null, how the thresholds follow from the source, and",
              "the preconditions with their measured values.", ""]
    for r in rows:
        if r["reason"]:
            continue
        text = (f"- {{ref}}`{r['id']} <{r['anchor']}>` ({_cell(r['source'])}, {_cell(r['location'])}; profile "
                f"`{r['profile']}`): {_cell(r['measure'])}; rule `{_rule_text(r['rule'])}`; null `{_value(r['null'])}`.")
        if r["why"]:
            text += f" {_cell(r['why'])}"
        for q in r["requires"]:
            text += f" Requires {q['id']}: {_cell(q['says'])} (rule `{_rule_text(q['rule'])}`; {_measured(q['value'])})."
        lines.append(text)
    return "\n".join(lines) + "\n"


def _value(v) -> str:
    return "—" if v is None else format_measure(v)


def _measured(v) -> str:
    return "not recorded" if v is None else f"measured {format_measure(v)}"


def _rule_text(rule: dict | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (rule or {}).items())


def main(args) -> int:
    from companion.book import reproductions

    root = repo_root()
    page, js = build(root)
    targets = {root / PAGE: page, root / JSON: js, root / reproductions.PAGE: reproductions.build_page(root)}
    if getattr(args, "check", False):
        stale = [str(p.relative_to(root)) for p, text in targets.items() if not p.is_file() or p.read_text() != text]
        if stale:
            print(f"generated pages are stale: {', '.join(stale)}; run `companion scoreboard` and commit.", file=sys.stderr)
            return 1
        print("scoreboard is current")
        return 0
    for p, text in targets.items():
        p.write_text(text)
    print(f"wrote {', '.join(str(p.relative_to(root)) for p in targets)}")
    return 0


def add_commands(sub) -> None:
    """Register `companion scoreboard` on the command line."""
    p = sub.add_parser("scoreboard", help="regenerate the scoreboard page and JSON from the ledger and the executed chapters")
    p.add_argument("--check", action="store_true", help="only check that the committed scoreboard is current")
    p.set_defaults(func=main)
