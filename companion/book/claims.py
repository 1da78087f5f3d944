"""The claims ledger: what each source claims, what we measure, and the rule that gives a verdict.

`book/claims.yml` lists every claim the book checks (DESIGN §5). A chapter computes a claim's
measure and calls `record(id, measure)`: the verdict comes from the claim's rule, and the measure is
glued into the executed chapter. The scoreboard (`companion scoreboard`) reads the ledger and the
measures glued in the executed chapters, applies the same rules, and writes `book/scoreboard.md`
and `book/chapters/scoreboard.json`. A claim with no measure is "not run at this scale".
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from companion.paths import repo_root

__all__ = ["Claim", "ClaimResult", "load_ledger", "verdict", "record", "record_all", "verdict_table", "VERDICTS"]

VERDICTS = ("reproduced", "partly", "not reproduced", "not run at this scale")
RULE_KINDS = ("holds", "at_most", "at_least", "close", "equals")
LEDGER = Path("book") / "claims.yml"
GLUE_PREFIX = "claim:"
MIME = "application/vnd.companion.claim+json"
_FIELDS = ("id", "source", "location", "statement", "source_value", "measure", "profile", "rule", "chapter", "section")


@dataclass(frozen=True)
class Claim:
    """One row of the ledger. `rule` is a mapping with a `kind` in RULE_KINDS (see `verdict`)."""

    id: str
    source: str
    location: str
    statement: str
    source_value: str
    measure: str
    profile: str
    rule: dict = field(hash=False)
    chapter: str
    section: str


@dataclass(frozen=True)
class ClaimResult:
    """A measured claim: what was measured and the verdict its rule gives."""

    id: str
    measure: Any
    verdict: str
    detail: str = ""

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": repr(self), MIME: asdict(self)}

    def __repr__(self):
        return f"{self.id}: {format_measure(self.measure)} → {self.verdict}"


def _check_rule(cid: str, rule: Any) -> None:
    if not isinstance(rule, dict) or rule.get("kind") not in RULE_KINDS:
        raise ValueError(f"claim {cid}: rule must be a mapping with kind in {RULE_KINDS}, got {rule!r}.")
    need = {"at_most": ("threshold",), "at_least": ("threshold",), "close": ("target", "tol"), "equals": ("value",)}
    for key in need.get(rule["kind"], ()):
        if key not in rule:
            raise ValueError(f"claim {cid}: a {rule['kind']!r} rule needs the key {key!r}.")


def load_ledger(path: str | Path | None = None) -> dict[str, Claim]:
    """Read and validate the ledger; raises ValueError naming the bad entry."""
    path = Path(path) if path else repo_root() / LEDGER
    try:
        rows = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no claims ledger at {path}; it lives in book/claims.yml.") from None
    if not isinstance(rows, list):
        raise ValueError(f"{path}: the ledger must be a YAML list of claims.")
    ledger: dict[str, Claim] = {}
    for n, row in enumerate(rows):
        missing = [f for f in _FIELDS if f not in (row or {})]
        extra = sorted(set(row or {}) - set(_FIELDS))
        if missing or extra:
            raise ValueError(f"{path}: entry {n} ({(row or {}).get('id', '?')}) misses {missing} / has unknown {extra}.")
        if row["id"] in ledger:
            raise ValueError(f"{path}: claim id {row['id']} appears twice.")
        _check_rule(row["id"], row["rule"])
        ledger[row["id"]] = Claim(**{f: (str(row[f]) if f != "rule" else row[f]) for f in _FIELDS})
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


def format_measure(m: Any) -> str:
    if isinstance(m, bool) or m is None:
        return str(m)
    if isinstance(m, float):
        return f"{m:.3g}" if m != 0 and (abs(m) < 1e-3 or abs(m) >= 1e4) else f"{m:.4g}"
    if isinstance(m, (list, tuple)):
        return "[" + ", ".join(format_measure(x) for x in m) + "]"
    return str(m)


def _jsonable(m: Any) -> Any:
    if hasattr(m, "item") and getattr(m, "ndim", 1) == 0:
        m = m.item()
    if isinstance(m, (list, tuple)):
        return [_jsonable(x) for x in m]
    if isinstance(m, float) and not math.isnan(m):
        return float(f"{m:.6g}")  # stable across machines to the precision any rule uses
    return m


def record(claim_id: str, measure: Any, *, detail: str = "", ledger: dict[str, Claim] | None = None) -> ClaimResult:
    """Measure a claim inside a chapter: compute its verdict and glue it as `claim:<id>`."""
    ledger = ledger if ledger is not None else load_ledger()
    if claim_id not in ledger:
        raise KeyError(f"claim {claim_id} is not in the ledger; add it to book/claims.yml first.")
    m = _jsonable(measure)
    json.dumps(m)  # fail here, not in the scoreboard, if the measure cannot be stored
    result = ClaimResult(claim_id, m, verdict(ledger[claim_id].rule, m), detail)
    try:
        from myst_nb import glue
    except ImportError:  # outside a book environment the verdict is still returned
        return result
    glue(GLUE_PREFIX + claim_id, result, display=False)
    return result


def record_all(measures: dict[str, Any], *, details: dict[str, str] | None = None,
               ledger: dict[str, Claim] | None = None) -> list[ClaimResult]:
    """`record` every {claim id: measure} a chapter module computed; returns the results in order."""
    ledger = ledger if ledger is not None else load_ledger()
    return [record(cid, m, detail=(details or {}).get(cid, ""), ledger=ledger) for cid, m in measures.items()]


def verdict_table(results: list[ClaimResult], ledger: dict[str, Claim] | None = None):
    """The table a chapter ends with: claim, source value, our measure, verdict."""
    import pandas as pd

    ledger = ledger if ledger is not None else load_ledger()
    rows = []
    for r in results:
        c = ledger[r.id]
        rows.append({"claim": r.id, "statement": c.statement, "source": f"{c.source} {c.location}",
                     "source value": c.source_value, "ours": format_measure(r.measure), "verdict": r.verdict})
    return pd.DataFrame(rows).set_index("claim")
