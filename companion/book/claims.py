"""The claims ledger: what each source claims, what we measure, and the rule that gives a verdict.

`book/claims.yml` lists every claim the book checks (DESIGN §5). A chapter computes a claim's
measure and calls `record(id, measure)`: the verdict comes from the claim's rule, and the measure is
glued into the executed chapter. The scoreboard (`companion scoreboard`) reads the ledger and the
measures glued in the executed chapters, applies the same rules, and writes `book/scoreboard.md`
and `book/chapters/scoreboard.json`. A claim with no measure is "not run at this scale".

Beyond the rule, an entry may carry:
- `null` and `why` (required with a numeric rule): the value the opposite reading predicts, which
  must not pass (tests/test_claims_nulls.py), and how the thresholds relate to the source's number;
- `requires`: preconditions, `[{id: name, rule: {...}, says: "what it checks"}]`. The chapter passes
  their measures (`record(..., preconditions={name: value})`, `record_all(..., preconditions={claim id:
  {name: value}})`); if one fails its rule the claim is "inconclusive", whatever its measure;
- `reason` instead of `measure`, `profile` and `rule`: the item is "reported, not rebuilt" (out of
  reach here, for that reason); no chapter records it.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import yaml

from companion.book.chapter_refs import expand
from companion.book.display import anchor, load_dashboard, measured_at, number, ours_text, with_quantity
from companion.book.preconditions import failed_note
from companion.book.words import claim_groups, verdict_badge, verdict_words, words_of
from companion.paths import repo_root

__all__ = ["Claim", "ClaimResult", "load_ledger", "verdict", "requirement_threshold", "crossed_lines", "assess", "record", "record_all", "glue_result", "verdict_table",
           "in_words",
           "VERDICTS", "NUMERIC_RULES"]

VERDICTS = ("reproduced", "partly", "not reproduced", "inconclusive", "not run at this scale", "reported, not rebuilt")
INCONCLUSIVE, NOT_RUN, NOT_REBUILT = VERDICTS[3], VERDICTS[4], VERDICTS[5]
DECISIONS = VERDICTS[:3]  # the verdicts that decide a claim
RULE_KINDS = ("holds", "at_most", "at_least", "close", "equals")
NUMERIC_RULES = ("at_most", "at_least", "close", "equals")
LEDGER = Path("book") / "claims.yml"
GLUE_PREFIX = "claim:"
DECIDED_PREFIX = "decided:"  # the glue of a claim's measure at the budget where its preconditions hold
MIME = "application/vnd.companion.claim+json"
_BASE = ("id", "source", "location", "statement", "source_value", "chapter", "section")
_MEASURED = ("measure", "profile", "rule")  # required unless the entry is reported, not rebuilt
_OPTIONAL = ("null", "why", "requires", "decided")
_FIELDS = _BASE + _MEASURED  # kept for readers of the old name
_KNOWN = _BASE + _MEASURED + _OPTIONAL + ("reason",)


@dataclass(frozen=True)
class Claim:
    """One row of the ledger. `rule` is a mapping with a `kind` in RULE_KINDS (see `verdict`); `null`
    the value the opposite reading predicts, `why` how the thresholds follow from the source,
    `requires` the preconditions ({id, rule, says}), `reason` why the item is reported, not rebuilt."""

    id: str
    source: str
    location: str
    statement: str
    source_value: str
    chapter: str
    section: str
    measure: str = ""
    profile: str = ""
    rule: dict | None = field(default=None, hash=False)
    null: Any = field(default=None, hash=False)
    why: str = ""
    requires: tuple = field(default=(), hash=False)
    reason: str = ""
    decided: dict | None = field(default=None, hash=False)  # {budget, measure, section}: see `record_decided`

    @property
    def rebuilt(self) -> bool:
        """False for an item reported, not rebuilt (it has a `reason` and no rule)."""
        return not self.reason


@dataclass(frozen=True)
class ClaimResult:
    """A measured claim: what was measured and the verdict its rule gives."""

    id: str
    measure: Any
    verdict: str
    detail: str = ""
    preconditions: dict = field(default_factory=dict, hash=False)  # {name: measured value}
    failed: list = field(default_factory=list, hash=False)  # names of the preconditions that failed
    decided: bool = False  # measured at the claim's `decided` budget, not at its profile (`record_decided`)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": repr(self), MIME: asdict(self)}

    def __repr__(self):
        failed = f" (precondition failed: {', '.join(self.failed)})" if self.failed else ""
        return f"{self.id}: {format_measure(self.measure)} → {self.verdict}{failed}"


def _check_rule(cid: str, rule: Any) -> None:
    if not isinstance(rule, dict) or rule.get("kind") not in RULE_KINDS:
        raise ValueError(f"claim {cid}: rule must be a mapping with kind in {RULE_KINDS}, got {rule!r}.")
    need = {"at_most": ("threshold",), "at_least": ("threshold",), "close": ("target", "tol"), "equals": ("value",)}
    for key in need.get(rule["kind"], ()):
        if key not in rule:
            raise ValueError(f"claim {cid}: a {rule['kind']!r} rule needs the key {key!r}.")


def _check_entry(cid: str, row: dict) -> dict:
    """Validate one entry beyond its base fields; returns the keyword arguments of its `Claim`."""
    if "reason" in row:
        if not isinstance(row["reason"], str) or not row["reason"].strip():
            raise ValueError(f"claim {cid}: `reason` must say, in words, why the item is reported, not rebuilt.")
        extra = [f for f in _MEASURED + _OPTIONAL if f in row]
        if extra:
            raise ValueError(f"claim {cid}: an entry reported, not rebuilt has a `reason` and no measure; "
                             f"it must not have {extra}.")
        return {"reason": row["reason"].strip()}
    missing = [f for f in _MEASURED if f not in row]
    if missing:
        raise ValueError(f"claim {cid}: misses {missing} (or give a `reason` if it is reported, not rebuilt).")
    _check_rule(cid, row["rule"])
    kw = {"measure": str(row["measure"]), "profile": str(row["profile"]), "rule": row["rule"]}
    if row["rule"]["kind"] in NUMERIC_RULES:
        if "null" not in row or "why" not in row:
            raise ValueError(f"claim {cid}: a {row['rule']['kind']!r} rule needs a `null` (the value the opposite "
                             "reading predicts) and a `why` (how the thresholds follow from the source's number).")
        if row["rule"]["kind"] != "equals" and (isinstance(row["null"], bool) or not isinstance(row["null"], (int, float))):
            raise ValueError(f"claim {cid}: `null` must be a number for a {row['rule']['kind']!r} rule, got {row['null']!r}.")
    elif row.get("null", False) is not False:
        raise ValueError(f"claim {cid}: the null of a `holds` rule is false, got {row['null']!r}.")
    if "why" in row and (not isinstance(row["why"], str) or not row["why"].strip()):
        raise ValueError(f"claim {cid}: `why` must be a sentence.")
    kw |= {"null": row.get("null", False if row["rule"]["kind"] == "holds" else None),
           "why": str(row.get("why", "")).strip()}
    reqs = row.get("requires", [])
    if not isinstance(reqs, list):
        raise ValueError(f"claim {cid}: `requires` must be a list of {{id, rule, says}}.")
    seen: set[str] = set()
    for req in reqs:
        if not isinstance(req, dict) or set(req) != {"id", "rule", "says"}:
            raise ValueError(f"claim {cid}: each precondition needs exactly the keys id, rule and says, got {req!r}.")
        if req["id"] in seen:
            raise ValueError(f"claim {cid}: precondition {req['id']} appears twice.")
        if not isinstance(req["says"], str) or not req["says"].strip():
            raise ValueError(f"claim {cid}: precondition {req['id']} must say what it checks.")
        seen.add(req["id"])
        _check_rule(f"{cid} (precondition {req['id']})", req["rule"])
    kw["requires"] = tuple({"id": str(r["id"]), "rule": r["rule"], "says": r["says"].strip()} for r in reqs)
    if "decided" in row:
        dec = row["decided"]
        if not isinstance(dec, dict) or set(dec) != {"budget", "measure", "section"} or not all(
                isinstance(v, str) and v.strip() for v in dec.values()):
            raise ValueError(f"claim {cid}: `decided` needs exactly the sentences budget (where its preconditions "
                             "hold), measure (what is measured there) and section (the label where it is), "
                             f"got {dec!r}.")
        if not reqs:
            raise ValueError(f"claim {cid}: `decided` is for a claim whose preconditions fail at its profile; "
                             "this one has no `requires`.")
        kw["decided"] = {k: v.strip() for k, v in dec.items()}
    return kw


def load_ledger(path: str | Path | None = None) -> dict[str, Claim]:
    """Read and validate the ledger; raises ValueError naming the bad entry."""
    path = Path(path) if path else repo_root() / LEDGER
    try:
        rows = expand(yaml.safe_load(path.read_text()))  # {chapter:NN} → "Chapter n" (`chapter_refs`)
    except FileNotFoundError:
        raise FileNotFoundError(f"no claims ledger at {path}; it lives in book/claims.yml.") from None
    if not isinstance(rows, list):
        raise ValueError(f"{path}: the ledger must be a YAML list of claims.")
    ledger: dict[str, Claim] = {}
    for n, row in enumerate(rows):
        if isinstance(row, dict) and None in row:  # YAML reads the key `null:` as None; it is the claim's null
            row = {("null" if k is None else k): v for k, v in row.items()}
        missing = [f for f in _BASE if f not in (row or {})]
        extra = sorted(set(row or {}) - set(_KNOWN))
        if missing or extra:
            raise ValueError(f"{path}: entry {n} ({(row or {}).get('id', '?')}) misses {missing} / has unknown {extra}.")
        if row["id"] in ledger:
            raise ValueError(f"{path}: claim id {row['id']} appears twice.")
        try:
            kw = _check_entry(str(row["id"]), row)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        ledger[row["id"]] = Claim(**{f: str(row[f]) for f in _BASE}, **kw)
    return ledger


def verdict(rule: dict, measure: Any) -> str:
    """Apply a rule to a measure.

    Rules: `holds` (measure is True); `at_most`/`at_least` a `threshold`; `close`: |measure − target|
    ≤ tol, and "partly" within `partly_tol` if given; `equals`: measure == value. Every rule may
    carry `partly_threshold` for at_most/at_least. A measure of None means not run.
    """
    if measure is None:
        return "not run at this scale"
    kind = rule["kind"]
    if kind == "holds":
        return "reproduced" if measure is True else "not reproduced"
    if kind == "equals":
        return "reproduced" if measure == rule["value"] else "not reproduced"
    x = float(measure)
    if math.isnan(x):
        return "not reproduced"
    if kind == "close":
        gap = abs(x - float(rule["target"]))
        if gap <= float(rule["tol"]):
            return "reproduced"
        return "partly" if gap <= float(rule.get("partly_tol", -1)) else "not reproduced"
    sign = 1.0 if kind == "at_most" else -1.0
    if sign * x <= sign * float(rule["threshold"]):
        return "reproduced"
    partly = rule.get("partly_threshold")
    if partly is not None and sign * x <= sign * float(partly):
        return "partly"
    return "not reproduced"


def requirement_threshold(claim_id: str, requirement: str) -> float:
    """The threshold of one precondition (`requires` entry `requirement`) of `claim_id`, from the ledger."""
    return float(next(r for r in load_ledger()[claim_id].requires if r["id"] == requirement)["rule"]["threshold"])


def crossed_lines(claim_id: str, lo: float, hi: float, fmt: Callable[[float], str]) -> str:
    """"; the interval crosses the 99 % line" (and "… the 93 % and 99 % lines"): the rule's thresholds of
    `claim_id` that lie inside [lo, hi], formatted by `fmt`; "" when the interval stays on one side of each."""
    rule = load_ledger()[claim_id].rule
    lines = sorted(t for t in (rule.get("partly_threshold"), rule.get("threshold"))
                   if isinstance(t, (int, float)) and lo < t <= hi)
    if not lines:
        return ""
    return f"; the interval crosses the {' and '.join(fmt(t) for t in lines)} line{'s' if len(lines) > 1 else ''}"


def assess(claim: Claim, measure: Any, preconditions: dict[str, Any] | None = None) -> tuple[str, list[str]]:
    """A claim's verdict and the names of its failed preconditions.

    "reported, not rebuilt" for an entry with a `reason`; "not run at this scale" without a measure;
    "inconclusive" when a precondition is missing or fails its rule; otherwise `verdict(rule, measure)`.
    """
    if not claim.rebuilt:
        return NOT_REBUILT, []
    if measure is None:
        return NOT_RUN, []
    values = preconditions or {}
    failed = [r["id"] for r in claim.requires if verdict(r["rule"], values.get(r["id"])) != "reproduced"]
    if failed:
        return INCONCLUSIVE, failed
    return verdict(claim.rule, measure), []


format_measure = number  # the ledger's one number format (companion.book.display)


def _jsonable(m: Any) -> Any:
    if hasattr(m, "item") and getattr(m, "ndim", 1) == 0:
        m = m.item()
    if isinstance(m, (list, tuple)):
        return [_jsonable(x) for x in m]
    if isinstance(m, float) and not math.isnan(m):
        return float(f"{m:.6g}")  # stable across machines to the precision any rule uses
    return m


def _in_kernel() -> bool:
    """Whether this code runs in an IPython shell or kernel (where a glue lands in a notebook)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def record(claim_id: str, measure: Any, *, detail: str = "", preconditions: dict[str, Any] | None = None,
           ledger: dict[str, Claim] | None = None, glue: bool | None = None) -> ClaimResult:
    """Measure a claim inside a chapter: compute its verdict and glue it as `claim:<id>`.

    `preconditions` gives the measure of every precondition the claim `requires`, by name. `glue`:
    None glues only inside an IPython kernel with myst_nb installed (outside one, myst_nb's glue would
    start an IPython shell); False never glues (a chapter's `decide`, which `companion claim` calls)."""
    ledger = ledger if ledger is not None else load_ledger()
    if claim_id not in ledger:
        raise KeyError(f"claim {claim_id} is not in the ledger; add it to book/claims.yml first.")
    claim = ledger[claim_id]
    if not claim.rebuilt:
        raise ValueError(f"claim {claim_id} is reported, not rebuilt ({claim.reason}); a chapter cannot measure it.")
    pre = {k: _jsonable(v) for k, v in (preconditions or {}).items()}
    names = [r["id"] for r in claim.requires]
    if set(pre) != set(names):
        raise ValueError(f"claim {claim_id} requires the preconditions {names}; the chapter passed {sorted(pre)}.")
    m = _jsonable(measure)
    json.dumps([m, pre])  # fail here, not in the scoreboard, if the measure cannot be stored
    v, failed = assess(claim, m, pre)
    result = ClaimResult(claim_id, m, v, detail, pre, failed)
    if glue is False or (glue is None and not _in_kernel()):
        return result
    return glue_result(result, glue=True)


def record_decided(claim_id: str, measure: Any, *, preconditions: dict[str, Any], detail: str = "",
                   ledger: dict[str, Claim] | None = None, glue: bool | None = None) -> ClaimResult:
    """Measure a claim at its `decided` budget, the smallest setting where the preconditions its profile
    fails hold (the ledger's `decided`: budget, measure, section), by the claim's own rule and
    preconditions; glued as `decided:<id>` (`glue` as in `record`). The scoreboard shows it beside the
    profile's verdict and, where that verdict is inconclusive, decides the claim by it."""
    ledger = ledger if ledger is not None else load_ledger()
    claim = ledger.get(claim_id)
    if claim is None or claim.decided is None:
        raise KeyError(f"claim {claim_id} has no `decided` entry in the ledger (budget, measure, section); "
                       "add one to book/claims.yml before measuring it at another budget.")
    result = record(claim_id, measure, detail=detail, preconditions=preconditions, ledger=ledger, glue=False)
    result = replace(result, decided=True)
    return result if glue is False else glue_result(result, glue=glue)


def glue_result(result: ClaimResult, *, glue: bool | None = None) -> ClaimResult:
    """Glue a decided claim as `claim:<id>`, or `decided:<id>` for a measure at its `decided` budget (`glue`
    as in `record`: None glues only inside a kernel)."""
    if glue is False or (glue is None and not _in_kernel()):
        return result
    try:
        from myst_nb import glue as myst_glue
    except ImportError:  # outside a book environment the verdict is still returned
        return result
    myst_glue((DECIDED_PREFIX if result.decided else GLUE_PREFIX) + result.id, result, display=False)
    return result


def record_all(measures: dict[str, Any], *, details: dict[str, str] | None = None,
               preconditions: dict[str, dict[str, Any]] | None = None,
               ledger: dict[str, Claim] | None = None, glue: bool | None = None) -> list[ClaimResult]:
    """`record` every {claim id: measure} a chapter module computed, with the {claim id: {precondition:
    value}} of those that have preconditions; returns the results in order (`glue` as in `record`)."""
    ledger = ledger if ledger is not None else load_ledger()
    stray = sorted(set(preconditions or {}) - set(measures))
    if stray:
        raise ValueError(f"preconditions given for claims that are not recorded here: {stray}.")
    return [record(cid, m, detail=(details or {}).get(cid, ""), preconditions=(preconditions or {}).get(cid),
                   ledger=ledger, glue=glue) for cid, m in measures.items()]


def in_words(result: ClaimResult) -> str:
    """A measured claim's verdict in the words of its kind, as the prose says it: "reproduced" for a
    source's claim, "not borne out" for a hypothesis, "goal met" for a goal (`companion.book.words`)."""
    dash = load_dashboard()
    return verdict_words(result.verdict, words_of(result.id, claim_groups(dash["sources"], [result.id])))


SCOREBOARD_HREF = "../scoreboard.html"  # from a chapter page (book/chapters/*.html) to the scoreboard


def verdict_table(results: list[ClaimResult], ledger: dict[str, Claim] | None = None):
    """The table a chapter ends with: claim (linked to its row on the scoreboard), what the source says,
    the source's value, ours in the source's units, and the verdict as a badge; an inconclusive verdict says
    which precondition failed in words, measured against needed. "Ours" says what the value is and where
    it was measured; a verdict is said in its kind's words (a hypothesis is borne out, a goal met). A
    pandas Styler: its HTML carries the links and badges; `.data` is the plain frame."""
    ledger = ledger if ledger is not None else load_ledger()
    dash = load_dashboard()
    units, groups = dash["units"], claim_groups(dash["sources"], list(ledger))
    rows = []
    for r in results:
        c = ledger[r.id]
        link = f'<a href="{SCOREBOARD_HREF}#{anchor(r.id).lower()}" title="this claim on the scoreboard">{r.id}</a>'
        reqs = {q["id"]: q for q in c.requires}
        notes = [failed_note(reqs[f]["says"], r.preconditions.get(f), reqs[f]["rule"]) for f in r.failed if f in reqs]
        failed = f" — precondition {'; '.join(notes)}" if notes else ""
        rows.append({"Claim": link, "What the source says": html.escape(c.statement),
                     "Source": html.escape(f"{c.source} {c.location}"), "Source value": html.escape(c.source_value),
                     "Ours": html.escape(with_quantity(ours_text(r.measure, r.id, units, r.detail), r.id, dash)
                                         + f" · {measured_at(r.id, c.profile, dash)}"),
                     "Verdict": verdict_badge(r.verdict, words_of(r.id, groups)) + html.escape(failed)})
    frame = pd.DataFrame(rows)
    return (frame.style.hide(axis="index")
            .set_uuid("verdicts").set_table_attributes('class="dataframe verdict-table"'))
