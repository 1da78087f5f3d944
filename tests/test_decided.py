"""A claim decided where its preconditions hold (the ledger's `decided`, `record_decided`): the ledger checks
the entry, the chapter measures it by the claim's own rule and preconditions, and the scoreboard decides an
inconclusive claim by it, says so, and leaves every other verdict as its profile gives it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from companion.book.claims import load_ledger, record_decided
from companion.book.scoreboard import _assess_all

ROOT = Path(__file__).resolve().parents[1]
LEDGER = load_ledger(ROOT / "book" / "claims.yml")
DOC = json.loads((ROOT / "book" / "chapters" / "scoreboard.json").read_text())
STUCK, FREE = {"mask-can-move": 0.75}, {"mask-can-move": 25.0}


def _ledger(tmp_path, **changes):
    rows = yaml.safe_load((ROOT / "book" / "claims.yml").read_text())
    row = next(r for r in rows if r["id"] == "S2-10")
    row.update(changes)
    path = tmp_path / "claims.yml"
    path.write_text(yaml.safe_dump(rows, allow_unicode=True))
    return path


@pytest.mark.parametrize("bad", [{"budget": "x", "measure": "y"}, {"budget": "x", "measure": "y", "section": ""},
                                 "a sentence"])
def test_a_decided_entry_needs_its_budget_measure_and_section(tmp_path, bad):
    with pytest.raises(ValueError, match="`decided` needs exactly"):
        load_ledger(_ledger(tmp_path, decided=bad))


def test_a_claim_without_preconditions_cannot_be_decided_elsewhere(tmp_path):
    with pytest.raises(ValueError, match="has no `requires`"):
        load_ledger(_ledger(tmp_path, requires=[]))


def test_a_claim_without_a_decided_entry_is_refused():
    with pytest.raises(KeyError, match="no `decided` entry"):
        record_decided("S2-16", 0.0, preconditions=FREE, glue=False)


def test_the_decided_measure_obeys_the_claim_s_rule_its_null_and_its_preconditions():
    """S2-10 at most 2 points (partly 5): 0.017 passes, the null (12.5 points) fails, and where the mask still
    cannot move the result stays inconclusive."""
    assert record_decided("S2-10", 0.0168, preconditions=FREE, glue=False).verdict == "reproduced"
    assert record_decided("S2-10", 0.04, preconditions=FREE, glue=False).verdict == "partly"
    assert record_decided("S2-10", LEDGER["S2-10"].null, preconditions=FREE, glue=False).verdict == "not reproduced"
    r = record_decided("S2-10", 0.0, preconditions=STUCK, glue=False)
    assert (r.verdict, r.failed, r.decided) == ("inconclusive", ["mask-can-move"], True)
    with pytest.raises(ValueError, match="requires the preconditions"):
        record_decided("S2-23", 0.0, preconditions=FREE, glue=False)  # S2-23 also needs mask-gains


def _verdicts(ci_pre, decided_measure, decided_pre=FREE):
    measures = {"S2-10": {"measure": 0.0, "preconditions": ci_pre,
                          "decided": {"measure": decided_measure, "preconditions": decided_pre, "detail": ""}}}
    out = _assess_all({"S2-10": LEDGER["S2-10"]}, measures)["S2-10"]
    return out["verdict"], out["decided"]["verdict"]


def test_the_scoreboard_decides_only_an_inconclusive_claim_and_only_by_a_decision():
    assert _verdicts(STUCK, 0.0) == ("reproduced", "reproduced")  # inconclusive at ci, decided where it moves
    assert _verdicts(STUCK, 0.125) == ("not reproduced", "not reproduced")  # the null decides it against
    assert _verdicts(STUCK, 0.0, STUCK) == ("inconclusive", "inconclusive")  # still cannot move: still undecided
    assert _verdicts(FREE, 0.125) == ("reproduced", "not reproduced")  # a decided profile keeps its own verdict


def test_a_decided_measure_the_ledger_does_not_give_is_an_error():
    measures = {"S2-16": {"measure": 0.0, "preconditions": {},
                          "decided": {"measure": 0.0, "preconditions": {}, "detail": ""}}}
    with pytest.raises(ValueError, match="does not give it"):
        _assess_all({"S2-16": LEDGER["S2-16"]}, measures)


def test_the_committed_scoreboard_decides_the_claims_the_ledger_gives_a_budget():
    rows = {c["id"]: c for c in DOC["claims"]}
    for cid in ("S2-10", "S2-23"):
        at = rows[cid]["by_profile"]["ci"]
        assert at["failed"] == ["mask-can-move"] and at["at"] == "ci scale, CPU"
        assert at["decided"]["section"] == "ch6-step-cap" and at["decided"]["failed"] == []
        assert rows[cid]["verdict"] == at["decided"]["verdict"] != "inconclusive"
        assert at["decides"] == "inconclusive at ci; decided where the mask can move"
        assert "Decided where the mask can move" in rows[cid]["reason_line"]
    decided = {c["id"] for c in DOC["claims"] if c["by_profile"]["ci"].get("decides")}
    assert decided == {"S2-07", "S2-10", "S2-23", "S2-24", "S2-28"} == {cid for cid, c in LEDGER.items() if c.decided}
