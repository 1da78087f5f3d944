"""The reproduction scoreboard, generated from the ledger and the measures glued in executed chapters.

Writes `book/scoreboard.md` (a page of the book) and `book/chapters/scoreboard.json` (the same
claims for machines). Verdicts are recomputed here from each claim's rule and the preconditions the
chapter recorded, so a page and its chapter cannot disagree. An inconclusive claim says what its
failed precondition required, measured and needed (`companion.book.preconditions`); an item
reported, not rebuilt gives its reason.

The page (`companion.book.site.scoreboard_page`) is a few screens long: the counts, the headline claims,
then one folded group per source with a card per claim. Every claim has the anchor `claim-<id>` that
chapters link to, and links back to the chapter section that measures it. How claims are grouped
(and which groups are the book's own goals), which are headlines, each source's takeaway and the
unit of each measure come from `book/dashboard.yml`; the rules and the verdicts only from
`book/claims.yml`. Each profile gets its own column once it has measured a claim: "ci" from the
executed chapters in `book/chapters/`; "paper" from executed chapters in `book/chapters/paper/` when
that folder exists, else from the committed paper-profile records in `results/paper/` through each
chapter's `claims` function (`companion.book.paper_status`). A claim that a profile did not measure reads
*not run at this scale* there, with how many of its chapter's runs exist at that profile.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from companion.book import reproductions
from companion.book.claims import DECIDED_PREFIX, DECISIONS, GLUE_PREFIX, INCONCLUSIVE, MIME, VERDICTS, assess, load_ledger
from companion.book.display import DASHBOARD, _short, anchor, load_dashboard, measured_at, ours_text, rule_words
from companion.book.paper_status import measures as paper_measures
from companion.book.predictions import load_predictions, score, sentence
from companion.book.preconditions import failed_sentence
from companion.book.words import claim_groups, prefix as _prefix
from companion.book.site.scoreboard_page import ALL_LABEL, HEADLINES_LABEL, page  # noqa: F401  (the labels, for readers)
from companion.paths import repo_root

__all__ = ["collect_measures", "build", "main", "why_line", "profile_dirs", "claim_groups", "PROFILE_DIRS"]

SCHEMA_VERSION = 5
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
    preconditions, notebook}, and under "decided" the same for a `decided:<id>` (its `decided` budget)."""
    found: dict[str, dict] = {}
    decided: dict[str, dict] = {}
    for nb_path in sorted(chapters_dir.glob("*.ipynb")):
        nb = json.loads(nb_path.read_text())
        for cell in nb.get("cells", []):
            for out in cell.get("outputs", []):
                name = out.get("metadata", {}).get("scrapbook", {}).get("name", "")
                if not name.startswith((GLUE_PREFIX, DECIDED_PREFIX)) or _MIME not in out.get("data", {}):
                    continue
                rec = out["data"][_MIME]
                cid = name[len(GLUE_PREFIX):]
                if name.startswith(DECIDED_PREFIX):  # the claim at its `decided` budget (`record_decided`)
                    cid = name[len(DECIDED_PREFIX):]
                    entry = decided.setdefault(cid, {})
                    if entry:
                        raise ValueError(f"claim {cid} is decided twice: in {entry['notebook']} and {nb_path.name}.")
                    entry.update(measure=rec["measure"], detail=rec.get("detail", ""),
                                 preconditions=rec.get("preconditions", {}), notebook=nb_path.name)
                    continue
                if cid in found:
                    raise ValueError(f"claim {cid} is measured twice: in {found[cid]['notebook']} and {nb_path.name}.")
                found[cid] = {"measure": rec["measure"], "detail": rec.get("detail", ""),
                              "preconditions": rec.get("preconditions", {}), "notebook": nb_path.name}
    for cid, entry in decided.items():
        found.setdefault(cid, {})["decided"] = entry
    return found


def why_line(row: dict, units: dict) -> str:
    """One line, in words, of what decided a claim's verdict: the reason an item is not rebuilt, the
    precondition that failed (with its value), or the measure, its scale and the rule."""
    if row["reason"]:
        text = _cell(row["reason"]).rstrip(".")
        return f"{text[0].upper()}{text[1:]}."
    if row["failed"]:
        text = " ".join(failed_sentence(f, f["rule"], row["profile"]) for f in row["failed"])
        dec = row.get("by_profile", {}).get(row["profile"], {}).get("decided")
        if dec is not None and row["by_profile"][row["profile"]].get("decides"):
            text += (f" Decided {_cell(dec['budget']).split(':', 1)[0]} (its budget in the card): "
                     f"{_cell(dec['measure'])}, {dec['ours_text']}; "
                     f"{rule_words(row['rule'], row['id'], units, row.get('words', ''))}.")
        return text
    scale = row["by_profile"][row["profile"]]["at"] if row["profile"] in row.get("by_profile", {}) else f"{row['profile']} scale"
    if row["ours"] is None:
        return f"Measured at the `{row['profile']}` profile only, which has not been run here: {_short(row['measure'])}."
    text = _short(row["measure"])
    return f"{text[0].upper()}{text[1:]} ({scale}); {rule_words(row['rule'], row['id'], units, row.get('words', ''))}."


# ---------------------------------------------------------------- the claims and the page


def _assess_all(ledger, measures: dict[str, dict]) -> dict[str, dict]:
    out = {}
    for cid, c in ledger.items():
        m = measures.get(cid, {})
        measure, pre = m.get("measure"), m.get("preconditions", {})
        v, failed = assess(c, measure, pre)
        reqs = {r["id"]: r for r in c.requires}
        out[cid] = {"ours": measure, "verdict": v, "detail": m.get("detail", ""),
                    "preconditions": pre,
                    "failed": [{"id": f, "says": reqs[f]["says"], "rule": reqs[f]["rule"], "value": pre.get(f)}
                               for f in failed]}
        dec = m.get("decided")
        if dec is not None and c.decided is not None:
            dv, dfailed = assess(c, dec["measure"], dec["preconditions"])
            out[cid]["decided"] = {**c.decided, "ours": dec["measure"], "verdict": dv, "detail": dec["detail"],
                                   "preconditions": dec["preconditions"], "failed": dfailed}
            if v == INCONCLUSIVE and dv in DECISIONS:  # decided where its preconditions hold
                out[cid]["verdict"] = dv
                out[cid]["decides"] = True
        elif dec is not None:
            raise ValueError(f"claim {cid} is measured at a `decided` budget the ledger does not give it.")
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

        found, coverage = paper_measures(root)
        by_profile["paper"] = _assess_all(ledger, found)
    shown = next(iter(by_profile))
    headlines = [h for h in dash["headlines"] if h in ledger]
    groups = claim_groups(dash["sources"], list(ledger))
    own = {g["prefix"]: g["own"] for g in groups}
    words = {g["prefix"]: g["words"] for g in groups}
    predictions = load_predictions(root)
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
            "headline": cid in headlines, "anchor": anchor(cid), "group": _prefix(cid),
            "own": own.get(_prefix(cid), ""), "words": words.get(_prefix(cid), "claims"),
        }
        row["quantity"] = "" if c.reason else str(dash["quantities"].get(cid, ""))
        # a value from trained runs, which a profile's scale can change; an exact or float64 check, a
        # committed benchmark or a reported claim has one value at every profile
        row["scaled"] = bool(c.rebuilt and cid not in dash.get("measured_at", {}))
        row["ours_text"] = ours_text(row["ours"], cid, dash["units"], row["detail"])
        row["by_profile"] = {p: {"ours": a[cid]["ours"], "verdict": a[cid]["verdict"],
                                 "ours_text": _ours_at(a[cid], cid, dash["units"], p, c, coverage),
                                 "failed": [f["id"] for f in a[cid]["failed"]], "at": measured_at(cid, p, dash)}
                             | _decided_at(a[cid], cid, p, dash["units"])
                             for p, a in by_profile.items()}
        row["reason_line"] = why_line(row, dash["units"])
        row["prediction"] = _predicted(predictions.get(cid), row["by_profile"].get("paper", {}),
                                       lambda x, cid=cid: ours_text(x, cid, dash["units"]))
        rows.append(row)
    counts = Counter(r["verdict"] for r in rows)
    doc = {"schema_version": SCHEMA_VERSION, "profiles": list(by_profile),
           "counts": {v: counts.get(v, 0) for v in VERDICTS},
           "counts_by_source": {g["prefix"]: _counts([r for r in rows if r["group"] == g["prefix"]])
                                for g in groups},
           "groups": groups, "headlines": headlines, "claims": rows}
    text = page(rows, groups, headlines, list(by_profile), dash["units"])
    return text, json.dumps(doc, indent=1, sort_keys=False) + "\n"


def _decided_at(assessed: dict, cid: str, profile: str, units: dict) -> dict:
    """A claim's measure at its `decided` budget, as the scoreboard shows it ({} without one): under "decided",
    its value in words, verdict, budget and section; and, where it decides the claim (the profile's own verdict
    inconclusive), under "decides" the label "inconclusive at ci; decided where …" that the compact table shows
    with that value in place of the profile's."""
    dec = assessed.get("decided")
    if dec is None:
        return {}
    shown = {"ours": dec["ours"], "ours_text": ours_text(dec["ours"], cid, units, dec["detail"]),
             "verdict": dec["verdict"], "budget": dec["budget"], "section": dec["section"],
             "measure": dec["measure"], "failed": list(dec["failed"]), "preconditions": dict(dec["preconditions"])}
    out = {"decided": shown}
    if assessed.get("decides"):
        where = dec["budget"].split(":", 1)[0]
        out["decides"] = f"inconclusive at {profile}; decided {where}"
    return out


def _predicted(prediction, paper: dict, fmt) -> str:
    """The claim's paper-profile prediction in words (its units), scored once the paper profile measured it
    ("" if none)."""
    if prediction is None:
        return ""
    measured = paper.get("ours") is not None and not isinstance(paper.get("ours"), (bool, list, str))
    return sentence(prediction, score(prediction, paper["ours"], paper["verdict"]) if measured else None, fmt)


def _ours_at(assessed: dict, cid: str, units: dict, profile: str, claim, coverage: dict) -> str:
    """Our measure at `profile`; where the paper profile has no measure, why: how many of the chapter's
    runs exist (read from records), or that the chapter trains nothing and was not executed there."""
    text = ours_text(assessed["ours"], cid, units, assessed["detail"])
    if profile != "paper" or assessed["ours"] is not None or not claim.rebuilt:
        return text
    cov = coverage.get(Path(claim.chapter or "").name)
    return f"— ({cov.found} of {cov.total} runs)" if cov is not None else "— (not executed at this profile)"




def _counts(rows: list[dict]) -> dict[str, int]:
    c = Counter(r["verdict"] for r in rows)
    return {v: c.get(v, 0) for v in VERDICTS}


def _cell(text: str) -> str:
    return " ".join(str(text).split())


def main(args) -> int:
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
