"""The decisive searches (`companion.experiments.decisive`, `companion decisive`): a rung is the `ci` preset with
more updates and nothing else; a search stops at the first rung whose precondition holds; the committed S2-07
search is recomputed from its JSON files alone, and a sample of it retrained."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from companion.cli import main
from companion.config import config_to_dict
from companion.experiments import get_experiment
from companion.experiments.decisive import SEARCHES, first_holding, fit_share, rung_configs
from companion.host import same_numerics
from companion.replay import compare, replay, this_host
from companion.runs import run_group
from companion.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
DECISIVE = ROOT / "results" / "decisive"
DOC = json.loads((ROOT / "book" / "chapters" / "scoreboard.json").read_text())


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _more_updates_only(cfgs, presets, factor: int) -> None:
    """Each rung config is its method's `ci` preset (seed aside) with `factor` times the updates and the
    evaluations at the same fractions of the run, and nothing else changed."""
    for c in cfgs:
        a, b = _flat(config_to_dict(replace(c, seed=0))), _flat(config_to_dict(presets[c.method]))
        assert {k for k in a if a[k] != b[k]} == {"train.steps", "train.eval_every"}
        assert a["train.steps"] == factor * b["train.steps"] and a["train.eval_every"] == factor * b["train.eval_every"]


def test_a_rung_is_the_ci_preset_with_more_updates_and_nothing_else():
    base = get_experiment("gotu-cyclic3").configs("ci")["mask"]
    for factor in SEARCHES["S2-07"].factors:
        cfgs = rung_configs("S2-07", factor)
        assert [c.seed for c in cfgs] == [0, 1, 2, 3, 4] and {c.method for c in cfgs} == {"mask"}
        a, b = _flat(config_to_dict(replace(cfgs[0], seed=0))), _flat(config_to_dict(base))
        assert {k for k in a if a[k] != b[k]} == {"train.steps", "train.eval_every"}
        assert (a["train.steps"], a["train.eval_every"]) == (250 * factor, 50 * factor)
    with pytest.raises(ValueError, match="not 3"):
        rung_configs("S2-07", 3)
    cfgs = rung_configs("S2-16", 4)
    assert [(c.method, c.seed) for c in cfgs] == [(m, s) for m in ("default", "mask") for s in range(5)]
    _more_updates_only(cfgs, get_experiment("arith-mul").configs("ci"), 4)


def test_the_best_mean_is_over_each_method_s_seeds():
    from types import SimpleNamespace as NS

    from companion.experiments.decisive import best_mean

    recs = [NS(config=NS(method=m), metrics={"test": {"seq_acc": v}})
            for m, v in (("default", 0.02), ("default", 0.04), ("mask", 0.10), ("mask", 0.0))]
    assert best_mean(recs) == pytest.approx(0.05) and SEARCHES["S2-16"].holds(recs)
    assert not SEARCHES["S2-16"].holds(recs[:2]) and best_mean([]) == 0.0


class _Rec:
    def __init__(self, seen: float):
        self.metrics = {"seen": {"acc": seen}, "cube": {"acc": seen}}


def test_a_search_stops_at_the_first_rung_that_holds_and_waits_for_an_unfinished_one():
    steps = {c.train.steps for f in SEARCHES["S2-07"].factors for c in rung_configs("S2-07", f)}
    assert steps == {500, 1000, 2000, 4000}
    fits = {500: 0.5, 1000: 0.995, 2000: 0.999, 4000: 1.0}  # 2x: none fits; 4x: all do
    tried, factor = first_holding("S2-07", lambda c: _Rec(fits[c.train.steps]))
    assert factor == 4 and [r["factor"] for r in tried] == [2, 4] and [r["holds"] for r in tried] == [False, True]
    assert tried[0]["value"] == 0.0 and tried[1]["value"] == 1.0
    tried, factor = first_holding("S2-07", lambda c: _Rec(0.5))  # the null: the mask never fits
    assert factor is None and [r["factor"] for r in tried] == [2, 4, 8, 16]
    tried, factor = first_holding("S2-07", lambda c: None if c.train.steps > 500 else _Rec(0.5))
    assert factor is None and tried[-1] == {"experiment": "gotu-cyclic3", "factor": 4, "steps": 1000, "found": 0,
                                             "total": 5, "value": None, "holds": False}
    assert fit_share([_Rec(0.99), _Rec(0.9899)]) == 0.5 and fit_share([]) == 0.0


def _committed(steps: int) -> list[dict]:
    out = []
    for path in sorted(DECISIVE.glob("*.json")):
        rec = json.loads(path.read_text())
        cfg = rec["config"]
        if (cfg["experiment"], cfg["method"], cfg["train"]["steps"]) == ("gotu-cyclic3", "mask", steps):
            out.append(rec)
    return sorted(out, key=lambda r: r["seed"])


def test_the_committed_s2_07_search_recomputed_from_its_files():
    """From the JSON alone: at 2x the updates 4 of the 5 mask runs fit Cyclic3's seen set (at ci: fewer than half),
    and their mean full-cube accuracy is the value the scoreboard decides S2-07 on, by the claim's rule."""
    runs = _committed(500)
    assert [r["seed"] for r in runs] == [0, 1, 2, 3, 4]
    fit = [r for r in runs if r["metrics"]["seen"]["acc"] >= 0.99]
    assert len(fit) / len(runs) >= 0.5
    measure = sum(r["metrics"]["cube"]["acc"] for r in fit) / len(fit)
    row = next(c for c in DOC["claims"] if c["id"] == "S2-07")
    dec = row["by_profile"]["ci"]["decided"]
    assert dec["ours"] == pytest.approx(round(measure, 4), abs=1e-4)
    expected = "reproduced" if measure >= 0.99 else "partly" if measure >= 0.92 else "not reproduced"
    assert dec["verdict"] == row["verdict"] == expected and row["by_profile"]["ci"]["failed"] == ["mask-fits-seen"]
    assert dec["preconditions"] == {"mask-fits-seen": round(len(fit) / len(runs), 4)}


def test_a_sample_of_the_s2_07_search_retrained():
    """The 2x rung's group retrained: to the bit on a host like the one that made it; elsewhere its first 20
    updates replayed within the replay tolerance (`companion.replay`)."""
    cfgs = rung_configs("S2-07", 2)
    store = RunStore(DECISIVE, read_only=True)
    committed = [store.load(c) for c in cfgs]
    assert all(r is not None for r in committed)
    host = this_host()
    if same_numerics(committed[0].host, host):
        strip = lambda r: ({k: v for k, v in r.curves.items() if k != "wall_time"}, r.metrics, r.drift)  # noqa: E731
        for old, new in zip(committed, run_group(cfgs)):
            assert strip(new) == strip(old), new.run_id
    else:  # 500 updates on other kernels may move a seen accuracy across 99 % (seed 0 fits at 99.03 %): replay only
        for old, losses in zip(committed, replay(cfgs, 20)):
            assert compare(old, losses, host).ok


def test_the_command_prints_what_each_search_tried(capsys):
    assert main(["decisive", "--status", "--only", "S2-07"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["S2-07/2x (500 updates): 5 of 5 runs; mask-fits-seen 0.80 (holds)"]
    assert main(["decisive", "--status", "--only", "S9-99"]) != 0
    assert "unknown search 'S9-99'" in capsys.readouterr().err


def _mul(steps: int) -> list[dict]:
    out = []
    for path in sorted(DECISIVE.glob("*.json")):
        rec = json.loads(path.read_text())
        cfg = rec["config"]
        if cfg["experiment"] == "arith-mul" and cfg["train"]["steps"] == steps:
            out.append(rec)
    return out


def test_the_committed_s2_16_search_recomputed_from_its_files():
    """From the JSON alone, rung by rung (200 · 2, 4, 8, 16 updates): the best method's mean test sequence accuracy,
    the first rung where it reaches 5 % (S2-16's a-method-learns), and what the scoreboard does with it: decide S2-16
    there by the mask's mean paired gain, or leave it inconclusive when no complete rung reaches 5 %."""
    row = next(c for c in DOC["claims"] if c["id"] == "S2-16")
    for factor in SEARCHES["S2-16"].factors:
        runs = _mul(200 * factor)
        if len(runs) < 10:
            assert row["verdict"] == "inconclusive" and "decided" not in row["by_profile"]["ci"]
            return
        by = {m: {r["seed"]: r["metrics"]["test"]["seq_acc"] for r in runs if r["config"]["method"] == m}
              for m in ("default", "mask")}
        assert sorted(by["default"]) == sorted(by["mask"]) == [0, 1, 2, 3, 4]
        best = max(sum(v.values()) / 5 for v in by.values())
        if best >= 0.05:
            gain = sum(by["mask"][s] - by["default"][s] for s in range(5)) / 5
            dec = row["by_profile"]["ci"]["decided"]
            assert dec["ours"] == pytest.approx(round(gain, 4), abs=1e-4)
            assert dec["preconditions"] == {"a-method-learns": round(best, 4)}
            assert row["verdict"] == dec["verdict"] != "inconclusive"
            return
    assert row["verdict"] == "inconclusive" and "decided" not in row["by_profile"]["ci"]
    assert row["by_profile"]["ci"]["failed"] == ["a-method-learns"]


def test_the_s2_12_search_trains_the_mask_and_structured_svd_on_majority_with_more_updates_only():
    cfgs = rung_configs("S2-12", 2)
    assert [(c.method, c.seed) for c in cfgs] == [(m, s) for m in ("mask", "structured-svd") for s in range(5)]
    _more_updates_only(cfgs, get_experiment("gotu-maj3").configs("ci"), 2)
    assert cfgs[0].train.steps == 500
    # the precondition counts Structured (SVD)'s fitted runs only: three of them, at 99 % of the seen set or more
    from types import SimpleNamespace as NS
    recs = [NS(config=NS(method=m), metrics={"seen": {"acc": a}})
            for m, a in (("mask", 1.0), ("mask", 1.0), ("mask", 1.0), ("structured-svd", 0.99), ("structured-svd", 1.0),
                         ("structured-svd", 0.9899))]
    assert SEARCHES["S2-12"].value(recs) == 2 and not SEARCHES["S2-12"].holds(recs)
    assert SEARCHES["S2-12"].holds(recs + [NS(config=NS(method="structured-svd"), metrics={"seen": {"acc": 1.0}})])


def test_the_committed_s2_12_search_recomputed_from_its_files():
    """From the JSON alone: at 2x the updates (500) Structured (SVD) fits Majority's seen set in at least three runs,
    and the retention of the CLS row's open share, (final − chance) / (init − chance) pooled over layers and fitted
    runs, mask minus Structured (SVD), is the value the scoreboard decides S2-12 on, by the claim's rule."""
    import numpy as np

    from companion.tasks.boolean import BooleanTask

    row = next(c for c in DOC["claims"] if c["id"] == "S2-12")
    runs = []
    for path in sorted(DECISIVE.glob("*.json")):
        rec = json.loads(path.read_text())
        cfg = rec["config"]
        if cfg["experiment"] == "gotu-maj3" and cfg["train"]["steps"] == 500:
            runs.append(rec)
    assert sorted((r["config"]["method"], r["seed"]) for r in runs) == [(m, s) for m in ("mask", "structured-svd")
                                                                        for s in range(5)]
    fit = [r for r in runs if r["metrics"]["seen"]["acc"] >= 0.99]
    n_svd = sum(r["config"]["method"] == "structured-svd" for r in fit)
    assert n_svd >= 3
    pattern = BooleanTask("maj3", n_bits=15).mask_pattern("support", cls=True).numpy()[0]
    chance = pattern.mean()

    def kept(method: str) -> float:
        shares = {w: [float(np.asarray(m)[0][pattern].sum()) - chance for r in fit if r["config"]["method"] == method
                      for m in r["drift"]["maps"][w]] for w in ("init", "final")}
        return np.mean(shares["final"]) / np.mean(shares["init"])

    measure = kept("mask") - kept("structured-svd")
    dec = row["by_profile"]["ci"]["decided"]
    assert dec["ours"] == pytest.approx(round(measure, 4), abs=1e-4)
    assert dec["preconditions"] == {"structured-fits": n_svd, "mask-gains": 1}
    expected = "reproduced" if measure >= 0.5 else "partly" if measure >= 0.2 else "not reproduced"
    assert row["verdict"] == dec["verdict"] == expected and row["by_profile"]["ci"]["failed"] == ["structured-fits"]


def test_the_budget_a_search_would_need_is_where_the_power_law_through_its_rungs_reaches_the_line():
    from types import SimpleNamespace as NS

    from companion.book.chapters.decisive import needed_factor

    def store(acc_at):  # every run of a rung scores acc_at(updates); None: the rung's records are missing
        return NS(load=lambda c: None if acc_at(c.train.steps) is None
                  else NS(config=c, metrics={"test": {"seq_acc": acc_at(c.train.steps)}}))

    grow = store(lambda s: 1e-4 * (s / 400) ** 2)  # 0.01 % at 2x, quadrupling per doubling: 0.64 % at 16x
    assert needed_factor("S2-16", 0.05, grow) == pytest.approx(2 * 500 ** 0.5)  # 0.01 % · (f/2)² = 5 % at f = 44.7
    assert needed_factor("S2-16", 0.05, store(lambda s: 1e-4 * s / 400 if s < 1600 else None)) is None  # 8x missing
    assert needed_factor("S2-16", 0.05, store(lambda s: 0.01)) is None  # flat: no budget would do
    assert needed_factor("S2-16", 0.05, store(lambda s: 0.0)) is None  # nothing learnt: no trend to follow


@pytest.mark.parametrize("claim", sorted(SEARCHES))
def test_each_search_stops_where_the_ledgers_precondition_holds(claim):
    """The engine's stopping threshold is the ledger's (the engine does not read book/claims.yml, so the two are
    held equal here), and the rule is the ledger's kind: at least the threshold."""
    from companion.book.claims import load_ledger, requirement_threshold

    search = SEARCHES[claim]
    rule = next(r for r in load_ledger()[claim].requires if r["id"] == search.precondition)["rule"]
    assert rule["kind"] == "at_least"
    assert search.threshold == requirement_threshold(claim, search.precondition)
    at, below = (replace(search, value=lambda recs, v=v: v) for v in (search.threshold, search.threshold - 1e-9))
    assert at.holds([]) and not below.holds([])


def test_the_sink_searches_go_from_more_char_lm_updates_to_the_sink_control():
    """S3-04 tries GOAT's character models at 4x and 16x (seeds 0-2), then the sink control (`passkey-lm`) at 1x, 4x,
    16x and 32x its updates (seeds 0-11); S3-22 trains GOAT, RoPE and ALiBi on the sink control only. A sink-control
    rung is the control's `ci` preset with more updates and nothing else, and that preset is Chapter 9's passkey with
    every next token scored."""
    s4, s22 = SEARCHES["S3-04"], SEARCHES["S3-22"]
    assert s4.rungs == (("charlm", 4), ("charlm", 16), *(("passkey-lm", f) for f in (1, 4, 16, 32)))
    assert s22.rungs == tuple(("passkey-lm", f) for f in (1, 4, 16, 32)) and s4.falls and s22.falls
    control = get_experiment("passkey-lm").configs("ci")
    for factor in (1, 4, 16, 32):
        goat = rung_configs("S3-04", factor, "passkey-lm")
        assert [(c.method, c.seed) for c in goat] == [("goat", s) for s in range(12)]  # twelve seeds: whole groups of 3
        both = rung_configs("S3-22", factor)
        assert [(c.method, c.seed) for c in both] == [(m, s) for m in ("goat", "rope", "alibi") for s in range(12)]
        assert both[:12] == goat  # one set of GOAT groups serves both searches
        if factor > 1:
            _more_updates_only(both, control, factor)
        else:
            assert [replace(c, seed=0) for c in both[::12]] == [control[m] for m in ("goat", "rope", "alibi")]
    assert [c.seed for c in rung_configs("S3-04", 4)] == [0, 1, 2]  # the char-LM's rungs keep their seeds
    passkey = get_experiment("passkey").configs("ci")
    for m, c in control.items():
        a, b = _flat(config_to_dict(c)), _flat(config_to_dict(passkey[m]))
        assert {k for k in set(a) | set(b) if a.get(k) != b.get(k)} == {"experiment", "task.params", "readouts", "stack"}
        assert c.task.kwargs == passkey[m].task.kwargs | {"loss": "all"} and c.readouts == ("sink_curve",)
    with pytest.raises(ValueError, match="not 1× of charlm"):
        rung_configs("S3-04", 1)


def test_s3_22_trains_rope_and_alibi_only_where_goat_s_sink_holds():
    """S3-22's precondition reads GOAT's runs (shared with S3-04's sink-control rungs); RoPE and ALiBi, which the
    claim compares, are needed only at the rung where it holds, and the search waits for them there."""
    from types import SimpleNamespace as NS

    sink = {500: 0.3, 2000: 0.6, 8000: 0.9, 16000: 0.9}  # every GOAT seed's largest head mean: holds from 4x on

    def store(compared: bool):
        def load(c):
            if c.method != "goat" and not compared:
                return None
            return NS(config=c, readouts={"sink_curve": {"head_mean_p0": [0.01, sink[c.train.steps]]}})
        return load

    tried, factor = first_holding("S3-22", store(compared=False))  # GOAT alone: 1x fails, 4x holds, waits there
    assert factor is None and [(r["factor"], r["holds"], r["found"], r["total"]) for r in tried] == \
        [(1, False, 12, 12), (4, True, 12, 36)]
    tried, factor = first_holding("S3-22", store(compared=True))
    assert factor == 4 and tried[-1]["found"] == tried[-1]["total"] == 36 and tried[-1]["value"] == 0.6
    assert [c.method for c in rung_configs("S3-22", 4, compare=False)] == ["goat"] * 12
    # the null: GOAT's weakest seed has no sink anywhere, so no rung holds and RoPE and ALiBi are never asked for
    sink.update({2000: 0.49, 8000: 0.49, 16000: 0.49})
    tried, factor = first_holding("S3-22", store(compared=False))
    assert factor is None and [r["total"] for r in tried] == [12] * 4 and not any(r["holds"] for r in tried)


def test_a_sink_rung_fails_at_its_first_seed_without_one_and_trains_the_weakest_seeds_first():
    """A sink in every seed is a smallest over seeds: a 32x rung with three of its twelve seeds stored fails as soon
    as one of them has none (its value theirs, the search ends there), and waits for the rest while all three have
    one (the null). `weakest_first` trains first the group (three seeds that train together) holding the seed weakest
    at 16x."""
    from types import SimpleNamespace as NS
    from companion.experiments.decisive import weakest_first

    at16 = {s: 0.1 + 0.05 * s for s in range(12)}  # seed 0 weakest

    def store(at32: dict[int, float]):
        def load(c):
            v = {8000: at16, 16000: at32}.get(c.train.steps, {s: 0.1 for s in range(12)}).get(c.seed)
            if c.method != "goat" or v is None:
                return None
            return NS(config=c, readouts={"sink_curve": {"head_mean_p0": [0.01, v]}})
        return load

    tried, factor = first_holding("S3-04", store({0: 0.3, 1: 0.7, 2: 0.8}))
    assert factor is None and (tried[-1]["factor"], tried[-1]["found"], tried[-1]["total"]) == (32, 3, 12)
    assert tried[-1]["value"] == 0.3 and not tried[-1]["holds"]
    tried, factor = first_holding("S3-04", store({0: 0.6, 1: 0.7, 2: 0.8}))  # the null: no seed fails yet
    assert factor is None and tried[-1]["factor"] == 32 and tried[-1]["value"] is None
    cfgs = rung_configs("S3-04", 32, "passkey-lm", compare=False)
    assert [c.seed for c in weakest_first("S3-04", tried, cfgs, store({}))] == [0, 1, 2]
    at16.update({s: 0.9 - 0.05 * s for s in range(12)})  # the other order: seed 11 weakest
    assert [c.seed for c in weakest_first("S3-04", tried, cfgs, store({}))] == [9, 10, 11]
    assert [c.seed for c in weakest_first("S3-04", tried, cfgs, store({9: 0.6, 10: 0.6, 11: 0.6}))] == [6, 7, 8]
    at16.update({4: 0.01})  # a group's weakest seed decides its turn
    assert [c.seed for c in weakest_first("S3-04", tried, cfgs, store({}))] == [3, 4, 5]


def _sink_control(steps: int) -> dict[str, dict[int, dict]]:
    """The committed sink-control records of `steps` updates, {method: {seed: record JSON}}."""
    out: dict[str, dict[int, dict]] = {}
    for path in sorted(DECISIVE.glob("*.json")):
        rec = json.loads(path.read_text())
        cfg = rec["config"]
        if cfg["experiment"] == "passkey-lm" and cfg["train"]["steps"] == steps:
            out.setdefault(cfg["method"], {})[rec["seed"]] = rec
    return out


def test_the_committed_sink_searches_recomputed_from_their_files():
    """From the JSON alone, rung by rung on the sink control (500 · 1, 4, 16 updates, seeds 0-11): the first rung
    where every GOAT seed has a last-layer head with half its attention on key 0 (goat-has-sink, the smallest over
    seeds of the largest head mean), and there each run's share of head-mean sink mass shed from the lowest to the
    highest position-matched ω bin: S3-04 is GOAT's mean share, S3-22 GOAT's minus the larger of RoPE's and ALiBi's
    (once they are there); both as the scoreboard has them, by the ledger's thresholds. A claim no complete rung
    decides stays inconclusive."""
    rows = {c["id"]: c for c in DOC["claims"] if c["id"] in ("S3-04", "S3-22")}
    lines = {"S3-04": (0.5, 0.15), "S3-22": (0.25, 0.1)}
    decided: dict[str, tuple[float, float]] = {}
    for factor in (1, 4, 16, 32):
        runs = _sink_control(500 * factor)
        sink = min((max(r["readouts"]["sink_curve"]["head_mean_p0"]) for r in runs.get("goat", {}).values()),
                   default=None)
        if sorted(runs.get("goat", {})) != list(range(12)):
            if sink is not None and sink < 0.5:
                assert set(runs) == {"goat"}
                continue  # a seed without a sink: the rung has failed before its other seeds were made
            break  # an incomplete rung: the search has not decided
        if sink < 0.5:
            assert set(runs) == {"goat"}  # RoPE and ALiBi are trained only where GOAT's sink holds
            continue
        share = {m: sum((p[0] - p[-1]) / p[0] for p in (r["readouts"]["sink_curve"]["p0"] for r in rs.values())) / 12
                 for m, rs in runs.items() if sorted(rs) == list(range(12))}
        decided["S3-04"] = (share["goat"], sink)
        if {"rope", "alibi"} <= set(share):
            decided["S3-22"] = (share["goat"] - max(share["rope"], share["alibi"]), sink)
        break
    for claim, row in rows.items():
        if claim not in decided:
            assert row["verdict"] == "inconclusive" and "decided" not in row["by_profile"]["ci"]
            continue
        measure, sink = decided[claim]
        dec = row["by_profile"]["ci"]["decided"]
        assert dec["ours"] == pytest.approx(round(measure, 3), abs=1e-3)
        assert dec["preconditions"] == {"goat-has-sink": round(sink, 3)}
        full, part = lines[claim]
        expected = "reproduced" if measure >= full else "partly" if measure >= part else "not reproduced"
        assert row["verdict"] == dec["verdict"] == expected


def test_the_sink_controls_seed_turnover_recomputed_from_their_files(monkeypatch):
    """Chapter 7's sentence on how the seeds moved between the sink control's last two rungs (4× and 16×), against
    the JSON: how many seeds crossed the 0.5 line upwards and which lost the sink they had. The null (seeds that
    rise together) gives the other sentence: nobody lost one, and the trend is not called into doubt."""
    from companion.book.chapters import sink_search

    def heads(steps):
        return {s: max(r["readouts"]["sink_curve"]["head_mean_p0"]) for s, r in _sink_control(steps)["goat"].items()}

    a, b = heads(2000), heads(8000)
    grew = sum(a[s] < 0.5 <= b[s] for s in a)
    lost = sorted((b[s] - a[s], a[s], b[s]) for s in a if b[s] < 0.5 <= a[s])
    rows = [{"experiment": "passkey-lm", "factor": f, "value": 0.1, "found": 12, "total": 12} for f in (1, 4, 16)]
    said = sink_search._turnover(rows)
    assert f"from 4× to 16× {grew} " in said
    if lost:
        assert f"{len(lost)} lost" in said and f"({lost[0][1]:.2f} → {lost[0][2]:.2f}" in said
        assert "no promise of a budget" in said
    # the null: every seed's head rises with the updates, so none is lost
    class Rec:
        def __init__(self, seed, p):
            self.config = type("C", (), {"seed": seed, "method": "goat"})()
            self.readouts = {"sink_curve": {"head_mean_p0": [p]}}

    rising = {4: [Rec(s, 0.1 + 0.02 * s) for s in range(12)], 16: [Rec(s, 0.6 + 0.02 * s) for s in range(12)]}
    monkeypatch.setattr(sink_search.decisive, "rung_records", lambda claim, f, e=None, store=None: rising[f])
    assert sink_search._turnover(rows) == "; from 4× to 16× 12 seeds grew a sink and none lost one"
    assert sink_search._turnover(rows[:1]) == ""


def test_the_chapter_says_what_a_rung_that_failed_early_found(monkeypatch):
    """A rung with 4 of its 12 seeds, one below the line: the sentence counts the seeds there, those with a sink and
    names the weakest with its share; a complete rung (the null) gives nothing to say."""
    from types import SimpleNamespace as NS
    from companion.book.chapters import sink_search

    heads = [(10, 0.3), (3, 0.6), (8, 0.2), (1, 0.7)]
    monkeypatch.setattr(sink_search.decisive, "rung_records", lambda *a, **k: [
        NS(config=NS(seed=s, method="goat"), readouts={"sink_curve": {"head_mean_p0": [0.01, v]}}) for s, v in heads]
        + [None] * 8)
    row = {"experiment": "passkey-lm", "factor": 32, "steps": 16000, "found": 4, "total": 12, "value": 0.2}
    said = sink_search._early([row])
    assert said == ("; at 32× (16,000 updates) the 4 seeds of the groups weakest at the rung before were trained "
                    "first, 2 of them have a sink, and seed 8 gives key 0 only 0.20, so that rung fails without its "
                    "other 8")
    assert sink_search._early([dict(row, found=12)]) == "" == sink_search._early([dict(row, value=None)])
