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
        record_decided("S2-09", 0.0, preconditions=FREE, glue=False)


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
    assert out.get("decides", False) == (out["verdict"] != "inconclusive" and ci_pre == STUCK)  # who decided it
    return out["verdict"], out["decided"]["verdict"]


def test_the_scoreboard_decides_only_an_inconclusive_claim_and_only_by_a_decision():
    assert _verdicts(STUCK, 0.0) == ("reproduced", "reproduced")  # inconclusive at ci, decided where it moves
    assert _verdicts(STUCK, 0.125) == ("not reproduced", "not reproduced")  # the null decides it against
    assert _verdicts(STUCK, 0.0, STUCK) == ("inconclusive", "inconclusive")  # still cannot move: still undecided
    assert _verdicts(FREE, 0.125) == ("reproduced", "not reproduced")  # a decided profile keeps its own verdict
    assert _verdicts(FREE, 0.0) == ("reproduced", "reproduced")  # both agree: still the profile's, not "decided"


def test_a_decided_measure_the_ledger_does_not_give_is_an_error():
    measures = {"S2-09": {"measure": 0.0, "preconditions": {},
                          "decided": {"measure": 0.0, "preconditions": {}, "detail": ""}}}
    with pytest.raises(ValueError, match="does not give it"):
        _assess_all({"S2-09": LEDGER["S2-09"]}, measures)


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
    # S2-16's search may end without a budget where a method learns multiplication (tests/test_decisive.py)
    assert {"S2-07", "S2-10", "S2-23", "S2-24", "S2-28"} <= decided <= {cid for cid, c in LEDGER.items() if c.decided}


# ---------------------------------------------------------------- the decided measures, recomputed from JSON

def _ci_json() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((ROOT / "results" / "ci").glob("*.json"))]


CI_JSON = _ci_json()


def _by_seed(experiment: str, method: str, overrides: tuple[str, ...] = (), metric=("cube", "acc")) -> dict[int, float]:
    """{seed: metric} of the committed ci records whose config is the experiment's preset with `overrides`
    (matched on the whole config but the seed; only the preset is taken from the package)."""
    from companion.config import apply_overrides, config_to_dict
    from companion.experiments import get_experiment

    want = {k: v for k, v in json.loads(json.dumps(config_to_dict(apply_overrides(
        get_experiment(experiment).configs("ci")[method], list(overrides))))).items() if k != "seed"}
    out = {}
    for rec in CI_JSON:
        if {k: v for k, v in rec["config"].items() if k != "seed"} == want:
            out[rec["seed"]] = rec["metrics"][metric[0]][metric[1]]
    return out


def _decided(cid: str) -> dict:
    return next(c for c in DOC["claims"] if c["id"] == cid)["by_profile"]["ci"]["decided"]


def test_s2_10_and_s2_23_recomputed_from_the_mask_moves_records():
    own = ("train.prior_lr=0.1",)
    zero, learn = [], []
    for task in ("2parity", "maj3"):
        exp = f"gotu-{task}"
        default = {s: v for s, v in _by_seed(exp, "default").items() if s < 5}  # R-05 adds seeds 5-9 of no mask
        z = _by_seed(exp, "zero-mask", own)
        assert sorted(z) == sorted(default) == [0, 1, 2, 3, 4]
        zero.append(sum(z.values()) / 5 - sum(default.values()) / 5)
        correct, fixed = _by_seed(exp, "mask", own), _by_seed(exp, "fixed-mask")
        assert sorted(correct) == sorted(fixed) == [0, 1, 2, 3, 4]
        if sum(correct.values()) / 5 - sum(default.values()) / 5 >= 0.02:  # where the mask matters
            learn.append(sum(correct[s] - fixed[s] for s in range(5)) / 5)
    assert _decided("S2-10")["ours"] == pytest.approx(round(max(zero), 4), abs=1e-4)
    assert learn and _decided("S2-23")["ours"] == pytest.approx(round(max(learn), 4), abs=1e-4)


def test_s2_24_and_s2_28_recomputed_from_their_own_rate_records():
    mask = _by_seed("arith-add", "mask", ("train.prior_lr=0.2",), ("test", "seq_acc"))
    fixed = _by_seed("arith-add", "fixed-mask", (), ("test", "seq_acc"))
    assert sorted(mask) == sorted(fixed) == [0, 1, 2, 3, 4]
    assert _decided("S2-24")["ours"] == pytest.approx(round(sum(mask[s] - fixed[s] for s in range(5)) / 5, 4),
                                                      abs=1e-4)
    own = _by_seed("vit-digits", "mask", ("train.prior_lr=0.17",), ("test", "acc"))
    fixed = _by_seed("vit-digits", "fixed-mask", (), ("test", "acc"))
    assert sorted(own) == sorted(fixed) == [0, 1, 2, 3, 4, 5]
    d = [fixed[s] - own[s] for s in range(6)]
    m = sum(d) / 6
    sd = (sum((x - m) ** 2 for x in d) / 5) ** 0.5
    half = 2.5706 * sd / 6 ** 0.5  # Student's t, 5 degrees of freedom, 97.5 %
    assert _decided("S2-28")["ours"] == pytest.approx(round(max(abs(m - half), abs(m + half)), 4), abs=1e-4)
