"""Chapter 3's symmetry section: its measures recomputed independently from the committed records
(the JSON files read directly, plain Python arithmetic) equal what the chapter module records, and the
section reads exactly the runs it says (four tasks × three methods × seeds 0–9)."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean, stdev

import pytest

from companion.book.chapter import measures, preconditions
from companion.book.chapters import ch03_boolean as ch
from companion.book.chapters.symmetry import measured as symmetry_measured

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("2parity-moved", "2parity", "maj3", "threesym")
METHODS = ("default", "mask", "sym-mask")


@pytest.fixture(scope="module")
def sym_frame():
    """The section's frame from the committed records, as the chapter builds it (`load`'s "symmetry" block)."""
    return ch.symmetry_frame(ch.load("ci")["symmetry"])


@pytest.fixture(scope="module")
def raw() -> dict:
    """{(task, method): {seed: metrics}} of every committed record of the symmetry experiments."""
    out: dict = {}
    for path in (ROOT / "results" / "ci").glob("*.json"):
        rec = json.loads(path.read_text())
        cfg = rec["config"]
        if cfg["experiment"].startswith("symmetry-"):
            task = dict(cfg["task"]["params"])["function"]
            assert cfg["experiment"] == f"symmetry-{task}"
            out.setdefault((task, cfg["method"]), {})[cfg["seed"]] = rec["metrics"]
    return out


def test_every_task_method_and_seed_is_committed(raw):
    assert set(raw) == {(t, m) for t in TASKS for m in METHODS}
    assert all(sorted(v) == list(range(10)) for v in raw.values())


def _acc(raw, task, method, split):
    return mean(m[split]["acc"] for m in raw[(task, method)].values())


def _lower(raw, task, method, split):
    """The lower end of the 95 % t interval of the mean over seeds, from the textbook formula."""
    from scipy import stats

    values = [m[split]["acc"] for m in raw[(task, method)].values()]
    n = len(values)
    return mean(values) - stats.t.ppf(0.975, n - 1) * stdev(values) / n ** 0.5


def _gain(raw, task, split):
    a, b = raw[(task, "mask")], raw[(task, "default")]
    return mean(a[s][split]["acc"] - b[s][split]["acc"] for s in a)


def test_the_recorded_measures_match_an_independent_recomputation(raw, sym_frame):
    ms = ch.symmetry_measures(sym_frame)
    expected = {"M-01": _gain(raw, "2parity-moved", "unseen"), "M-02": _acc(raw, "2parity-moved", "sym-mask", "unseen"),
                "M-03": _acc(raw, "2parity", "sym-mask", "cube"), "M-04": _lower(raw, "maj3", "mask", "cube"),
                "M-05": _acc(raw, "maj3", "sym-mask", "cube"), "M-06": _gain(raw, "threesym", "cube")}
    got = measures(ch.SYMMETRY, ms)
    assert set(got) == set(expected)
    for cid, value in expected.items():
        assert got[cid] == pytest.approx(value, abs=5e-5), cid  # the ledger's measures carry 4 decimals
    pre = preconditions(ch.SYMMETRY, ms)
    assert pre["M-01"]["default-fits-seen"] == pytest.approx(_acc(raw, "2parity-moved", "default", "seen"), abs=5e-5)
    assert pre["M-02"]["symmetric-fits-seen"] == pytest.approx(_acc(raw, "2parity-moved", "sym-mask", "seen"), abs=5e-5)
    assert pre["M-06"]["mask-fits-seen"] == pytest.approx(_acc(raw, "threesym", "mask", "seen"), abs=5e-5)


def test_the_table_shows_mean_spread_and_ten_seeds(raw, sym_frame):
    table = ch.symmetry_table(sym_frame)
    assert len(table) == 12 and (table["Seeds"] == 10).all()
    values = [100 * m["unseen"]["acc"] for m in raw[("2parity-moved", "mask")].values()]
    row = table.loc[("2Parity, U moved", "Mask (learnable)")]
    assert row["Unseen (%)"].startswith(f"{mean(values):.1f}")
    assert row["Unseen min–max"] == f"{min(values):.1f}–{max(values):.1f}"


def test_at_another_profile_the_section_measures_nothing(monkeypatch):
    asked = []
    monkeypatch.setattr(ch, "read_grid", lambda name, profile, seeds, **kw: asked.append(name) or {})
    records = ch.load("paper")["symmetry"]
    ms = ch.symmetry_measures(ch.symmetry_frame(records))
    assert asked == ["gotu"]  # the symmetry grid is not asked for at `paper`
    assert records == {} and not symmetry_measured(ms)
