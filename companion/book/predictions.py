"""Predictions of paper-profile verdicts, committed before the records that decide them, and their scores.

`results/paper/predictions.json` holds, per chapter, what the book expects its claims to read at the
sources' scale: a verdict, a measure and an interval around it, and what the expectation rests on (the
scale ladder's trend where a rung covers the task, else the `ci` runs and the direction of the change).
A prediction is worth something only if it was written before the records existed: `order` reads the
git history and says, per chapter, whether the predictions were committed before its first record.
Once a chapter's records are complete, `score` sets each prediction against the measure: the verdict
right or wrong, the measure inside its interval or not, and by how much it missed.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from companion.book.claims import VERDICTS
from companion.paths import repo_root

__all__ = ["PREDICTIONS", "Prediction", "Score", "load_predictions", "score", "order", "sentence", "when"]

PREDICTIONS = Path("results") / "paper" / "predictions.json"


@dataclass(frozen=True)
class Prediction:
    """What the book expects claim `claim` of `chapter` to read at `paper`."""

    claim: str
    chapter: str
    verdict: str
    measure: float
    interval: tuple[float, float]
    why: str
    made: str


@dataclass(frozen=True)
class Score:
    """A prediction set against what the records measured."""

    prediction: Prediction
    measure: float
    verdict: str

    @property
    def verdict_right(self) -> bool:
        return self.verdict == self.prediction.verdict

    @property
    def inside(self) -> bool:
        lo, hi = self.prediction.interval
        return lo <= self.measure <= hi

    @property
    def miss(self) -> float:
        """How far the measure fell outside the predicted interval (0 inside it)."""
        lo, hi = self.prediction.interval
        return max(lo - self.measure, self.measure - hi, 0.0)


def _problem(path: Path, where: str, what: str) -> ValueError:
    return ValueError(f"{path}: {where}: {what}; fix the entry (see companion/book/predictions.py)")


def load_predictions(root: Path | None = None) -> dict[str, Prediction]:
    """{claim id: Prediction} from the committed file ({} when there is none); a ValueError naming the entry
    for a verdict that is not a verdict, an interval that does not hold its measure, or a claim twice."""
    path = (root or repo_root()) / PREDICTIONS
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); it is committed, so restore it from git") from None
    out: dict[str, Prediction] = {}
    for chapter, entry in (doc.get("chapters") or {}).items():
        for cid, p in (entry.get("claims") or {}).items():
            where = f"chapter {chapter}, claim {cid}"
            if p.get("verdict") not in VERDICTS[:3]:
                raise _problem(path, where, f"verdict {p.get('verdict')!r} is not one of {VERDICTS[:3]}")
            lo, hi = (float(x) for x in p.get("interval", (None, None)))
            if not lo <= float(p["measure"]) <= hi:
                raise _problem(path, where, f"the interval [{lo:g}, {hi:g}] does not hold the measure {p['measure']}")
            if cid in out:
                raise _problem(path, where, f"claim {cid} is predicted twice")
            out[cid] = Prediction(cid, chapter, p["verdict"], float(p["measure"]), (lo, hi), str(p.get("why", "")),
                                  str(entry.get("made", "")))
    return out


def score(prediction: Prediction, measure, verdict: str) -> Score:
    return Score(prediction, float(measure), verdict)


def _git(root: Path, *args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""


def order(chapter: str, record_ids: list[str], root: Path | None = None) -> dict:
    """From git: when the predictions of `chapter` and its first record were committed ({predicted, first_record}:
    commit hashes or None) and whether the predictions came first (`before`: True, False, or None when the
    history cannot say)."""
    root = root or repo_root()
    first_pred = None
    for commit in _git(root, "log", "--reverse", "--format=%H", "--", PREDICTIONS.as_posix()).split():
        text = _git(root, "show", f"{commit}:{PREDICTIONS.as_posix()}")
        try:
            if chapter in (json.loads(text).get("chapters") or {}):
                first_pred = commit
                break
        except json.JSONDecodeError:
            continue
    paths = [(PREDICTIONS.parent / f"{rid}.json").as_posix() for rid in record_ids]
    added = _git(root, "log", "--reverse", "--diff-filter=A", "--format=%H", "--", *paths).split() if paths else []
    first_record = added[0] if added else None
    if first_pred is None:
        return {"predicted": None, "first_record": first_record, "before": False if first_record else None}
    if first_record is None:
        return {"predicted": first_pred, "first_record": None, "before": True}
    ancestor = subprocess.run(["git", "-C", str(root), "merge-base", "--is-ancestor", first_pred, first_record],
                              capture_output=True).returncode == 0
    return {"predicted": first_pred, "first_record": first_record, "before": ancestor and first_pred != first_record}


def sentence(p: Prediction, result: Score | None = None, fmt=lambda x: f"{x:g}") -> str:
    """One line for a reader, values written by `fmt` (the claim's units): "predicted reproduced, 100.0 %
    (interval [66.7 %, 100.0 %]); measured …: the verdict right, the measure inside its interval"."""
    lo, hi = p.interval
    text = f"predicted {p.verdict}, {fmt(p.measure)} (interval [{fmt(lo)}, {fmt(hi)}])"
    if result is None:
        return text + "; no record yet"
    where = "inside its interval" if result.inside else f"outside its interval by {fmt(result.miss)}"
    return (f"{text}; measured {fmt(result.measure)}, {result.verdict}: the verdict "
            f"{'right' if result.verdict_right else 'wrong'}, the measure {where}")


def when(chapter: str, record_ids: list[str], made: str, root: Path | None = None) -> str:
    """When the predictions of `chapter` were written, as the history shows it: "before any of its records
    was committed", "after its first record was committed (not a prediction in advance)", or only the date
    where no history can be read."""
    seen = order(chapter, record_ids, root)
    if seen["before"] is True:
        return f"written on {made}, committed before any of its records"
    if seen["before"] is False and seen["predicted"]:
        return f"written on {made}, committed after its first record (not a prediction in advance)"
    return f"written on {made}"
