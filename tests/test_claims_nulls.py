"""Every verdict can fail: each claim's rule rejects its null, the value the opposite reading predicts.

A numeric rule (at_most, at_least, close, equals) must state `null` and `why` in book/claims.yml, and
the null must get "not reproduced" — never "reproduced", and not "partly" either: every null here is
the opposite claim (no gain, mask = default, ratio 1, the MDI's accuracy, …), so a pass band or a
partly band that holds it would let the opposite reading count as evidence. A `holds` rule's null is
false. Where the source states a number, that number must pass its own claim's rule.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from companion.book.claims import NUMERIC_RULES, Claim, assess, load_ledger, verdict

ROOT = Path(__file__).resolve().parents[1]
LEDGER = load_ledger(ROOT / "book" / "claims.yml")
MEASURED = {cid: c for cid, c in LEDGER.items() if c.rebuilt}

# The source's own figure, in the unit of the claim's measure, where the source states one: it must pass.
SOURCE_FIGURES = {
    "S2-04": 4.5e-5,  # σ(−10), the referee's scale of a saturated mask's derivative
    "S2-05": 0.0, "S2-06": 1.0, "S2-07": 0.9998, "S2-08": 1.0, "S2-09": 0.0, "S2-10": 0.0,
    "S2-13": 0.0119, "S2-14": 0.7749 - 0.0119, "S2-15": 0.0339, "S2-16": 0.6949 - 0.0501, "S2-17": 0.2782,
    "S3-09": 1.55, "S3-16": 1.83 / 2.86,
    "C-01": 1.2, "C-02": 2.0, "C-03": 2.0,
}


def null_problems(ledger: dict[str, Claim]) -> list[str]:
    """Every way the ledger lets a verdict pass that should not: a numeric rule without `null` or
    `why`, or a null the rule does not reject outright."""
    problems = []
    for cid, c in ledger.items():
        if not c.rebuilt:
            continue
        if c.rule["kind"] in NUMERIC_RULES and (c.null is None or not c.why):
            problems.append(f"{cid}: a numeric rule needs `null` and `why`")
            continue
        null = False if c.rule["kind"] == "holds" else c.null
        got = verdict(c.rule, null)
        if got != "not reproduced":
            problems.append(f"{cid}: its null {null!r} gets {got!r} under {c.rule}")
    return problems


def test_every_numeric_rule_states_its_null_and_why():
    for cid, c in MEASURED.items():
        if c.rule["kind"] in NUMERIC_RULES:
            assert c.null is not None and c.why, f"{cid} has no null or why"
        else:
            assert c.null is False, f"{cid}: the null of a holds rule is false"


@pytest.mark.parametrize("cid", sorted(MEASURED))
def test_the_null_is_not_reproduced(cid):
    c = MEASURED[cid]
    null = False if c.rule["kind"] == "holds" else c.null
    got = verdict(c.rule, null)
    assert got not in ("reproduced", "partly"), f"{cid}: the opposite reading ({null!r}) would read {got!r}"
    assert got == "not reproduced"
    assert assess(c, null, {r["id"]: _met(r["rule"]) for r in c.requires})[0] == "not reproduced"


def _met(rule: dict) -> float:
    """A value that meets a precondition's rule (its threshold; 1.0 for a rule without one)."""
    return float(rule.get("threshold", 1.0))


@pytest.mark.parametrize("cid", sorted(SOURCE_FIGURES))
def test_the_sources_own_figure_passes(cid):
    assert verdict(MEASURED[cid].rule, SOURCE_FIGURES[cid]) == "reproduced", (
        f"{cid}: the source's own {SOURCE_FIGURES[cid]} does not pass {MEASURED[cid].rule}")


def test_the_check_catches_a_band_that_holds_the_null(tmp_path):
    rows = yaml.safe_load((ROOT / "book" / "claims.yml").read_text())
    assert null_problems(load_ledger(ROOT / "book" / "claims.yml")) == []

    def check(mutate):
        bad = copy.deepcopy(rows)
        mutate({r["id"]: r for r in bad})
        p = tmp_path / "claims.yml"
        p.write_text(yaml.safe_dump(bad, allow_unicode=True))
        return null_problems(load_ledger(p))

    # S3-09's old rule: the partly band (≥ 0) held the null gain of 0
    assert check(lambda r: r["S3-09"].update(rule={"kind": "at_least", "threshold": 0.1, "partly_threshold": 0.0}))
    # a pass band that holds the null outright
    assert check(lambda r: r["S2-15"].update(rule={"kind": "at_most", "threshold": 0.8}))
    # a close rule whose partly tolerance reaches the null
    assert check(lambda r: r["C-03"].update(rule={"kind": "close", "target": 2.0, "tol": 0.15, "partly_tol": 1.0}))


def test_no_why_tells_the_history_of_its_threshold():
    """A rule's reason states the finding's terms (source, null, goal), not how the ledger changed."""
    told = [cid for cid, c in MEASURED.items() if re.search(r"[Tt]ightened|changed from|was (raised|lowered)", c.why)]
    assert not told, told


def test_tightened_thresholds_sit_near_the_source():
    assert MEASURED["S3-09"].rule == {"kind": "at_least", "threshold": 1.0, "partly_threshold": 0.3}
    assert MEASURED["S2-15"].rule == {"kind": "at_most", "threshold": 0.05, "partly_threshold": 0.15}
    assert MEASURED["C-01"].rule == {"kind": "at_most", "threshold": 1.2, "partly_threshold": 1.5}
    # each says why its partly level sits where it does, in terms of the null or the goal
    assert "a partly level at 0 would pass the null" in MEASURED["S3-09"].why
    assert "2.5 times the goal's overhead" in MEASURED["C-01"].why
    # S2-15's pass band: the source's best other (3.39 %) plus a seed spread, at both budgets
    assert "best other 3.39 %" in MEASURED["S2-15"].why and "both budgets" in MEASURED["S2-15"].why
