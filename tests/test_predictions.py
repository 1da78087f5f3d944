"""Predictions before records: the committed predictions are well formed, each chapter's were committed
before its first paper-profile record (read from git), and a prediction is scored against what the
records measured."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from companion.book import predictions as pr
from companion.book.claims import load_ledger
from companion.experiments.chapters import CHAPTERS, chapter_key, chapter_runs
from companion.identity import run_id

ROOT = Path(__file__).resolve().parents[1]


def _key(name: str) -> str:
    return next(k for k, (n, _) in CHAPTERS.items() if n == name)


def test_the_committed_predictions_name_real_claims_of_their_chapter():
    found = pr.load_predictions(ROOT)
    assert found, "results/paper/predictions.json predicts nothing"
    ledger = load_ledger(ROOT / "book" / "claims.yml")
    for cid, p in found.items():
        assert cid in ledger, cid
        assert Path(ledger[cid].chapter).name == p.chapter, f"{cid} is decided in {ledger[cid].chapter}, not {p.chapter}"
        assert p.why and p.made


def test_each_chapter_s_predictions_were_committed_before_its_records():
    """The order, from git history: a chapter's predictions come in a commit that precedes the commit adding
    its first paper-profile record (or no record exists yet)."""
    if not (ROOT / ".git").exists():
        pytest.skip("no git history here")
    for name in {p.chapter for p in pr.load_predictions(ROOT).values()}:
        ids = [run_id(c) for c in chapter_runs(chapter_key(_key(name)), "paper")]
        seen = pr.order(name, ids, ROOT)
        assert seen["before"] is not False, f"{name}: predictions {seen['predicted']} after record {seen['first_record']}"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _commit(repo: Path, files: dict[str, str], message: str) -> None:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)


PRED = json.dumps({"chapters": {"08_copy_mixture": {"made": "2026-12-06", "claims": {
    "S3-07": {"verdict": "reproduced", "measure": 0.01, "interval": [0.0, 0.02], "why": "w"}}}}})


@pytest.mark.parametrize("first", ["predictions", "record", "together"])
def test_the_order_is_read_from_history(tmp_path: Path, first: str):
    _git(tmp_path, "init", "-q")
    record = {"results/paper/" + "a" * 64 + ".json": "{}"}
    pred = {pr.PREDICTIONS.as_posix(): PRED}
    if first == "together":
        _commit(tmp_path, pred | record, "both")
    else:
        for files in ((pred, record) if first == "predictions" else (record, pred)):
            _commit(tmp_path, files, "step")
    seen = pr.order("08_copy_mixture", ["a" * 64], tmp_path)
    assert seen["before"] is (first == "predictions")
    assert pr.order("09_extrapolation", ["a" * 64], tmp_path)["before"] is False  # a record with no prediction
    assert pr.order("08_copy_mixture", ["b" * 64], tmp_path)["before"] is True  # predicted, no record yet
    assert "not a prediction in advance" in pr.when("08_copy_mixture", ["a" * 64], "d", tmp_path) or first == "predictions"


def test_a_prediction_is_scored_against_the_measure():
    p = pr.Prediction("S3-07", "08_copy_mixture", "reproduced", 0.012, (0.0, 0.03), "w", "d")
    hit = pr.score(p, 0.02, "reproduced")
    assert hit.verdict_right and hit.inside and hit.miss == 0.0
    miss = pr.score(p, 0.1, "partly")
    assert not miss.verdict_right and not miss.inside and miss.miss == pytest.approx(0.07)
    assert pr.sentence(p, miss).endswith("the verdict wrong, the measure outside its interval by 0.07")
    assert pr.sentence(p).endswith("no record yet")


@pytest.mark.parametrize("entry, message", [
    ({"verdict": "held", "measure": 1, "interval": [0, 1]}, "is not one of"),
    ({"verdict": "reproduced", "measure": 2, "interval": [0, 1]}, "does not hold the measure 2"),
])
def test_a_bad_prediction_is_named(tmp_path: Path, entry: dict, message: str):
    path = tmp_path / pr.PREDICTIONS
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"chapters": {"08_copy_mixture": {"claims": {"S3-07": entry}}}}))
    with pytest.raises(ValueError, match=message) as err:
        pr.load_predictions(tmp_path)
    assert "chapter 08_copy_mixture, claim S3-07" in str(err.value)
    path.write_text("{")
    with pytest.raises(ValueError, match="restore it from git"):
        pr.load_predictions(tmp_path)
