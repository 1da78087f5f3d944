"""The scale ladder: its rungs change only what they say, its `ci` rung is the chapters' own runs, its
measures are the chapters' measures, and a rung with a record missing is left out, never filled in."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from companion.book.chapters import ladder
from companion.book.claims import load_ledger
from companion.cli import main
from companion.config import RunConfig
from companion.experiments.chapters import chapter_runs
from companion.experiments.gotu import PAPER_SCHEDULE
from companion.experiments.ladder import FAMILIES, ORDER, rung_configs, rung_order
from companion.identity import run_id
from companion.store import Record, RunStore
from companion.tasks import make_task
from companion.train import total_steps

ROOT = Path(__file__).resolve().parents[1]


def _by_key(cfgs):
    return {(c.experiment, c.method, c.seed): c for c in cfgs}


def test_the_ci_rung_is_the_chapters_own_runs():
    for fam in FAMILIES.values():
        ours = {run_id(c) for c in rung_configs(fam.name, "ci")}
        assert ours <= {run_id(c) for c in chapter_runs(fam.chapter, "ci")}, fam.name
        assert len(ours) == len(fam.experiments) * len(fam.methods) * len(fam.seeds)


def test_every_rung_changes_only_what_it_names():
    """Each rung against `ci`: the same runs (experiment, method, seed), differing in exactly the fields
    its overrides set; the methods' priors (the mask, GOAT) are untouched."""
    for fam, rung in rung_order():
        base, up = _by_key(rung_configs(fam.name, "ci")), _by_key(rung_configs(fam.name, rung.name))
        assert base.keys() == up.keys()
        for key, cfg in up.items():
            named = {o.split("=")[0] for o in rung.overrides(key[0])}
            b = base[key]
            fields = {f"{part}.{k}": (v, getattr(getattr(b, part), k)) for part in ("model", "train")
                      for k, v in vars(getattr(cfg, part)).items()}
            fields |= {f"task.{k}": (v, b.task.kwargs.get(k)) for k, v in cfg.task.kwargs.items()}
            assert named <= fields.keys()
            changed = {k for k, (new, old) in fields.items() if new != old}
            assert changed <= named and changed, (fam.name, rung.name, changed - named)
            assert cfg.model.prior == b.model.prior


def test_the_gotu_schedule_rung_is_gotus_optimiser_and_updates():
    for cfg in rung_configs("gotu", "gotu-schedule"):
        lr, epochs = PAPER_SCHEDULE[cfg.experiment.removeprefix("gotu-")]
        task = make_task(cfg.task)
        assert (cfg.train.lr, cfg.train.batch_size, cfg.train.epochs) == (lr, 256, epochs)
        assert task.n_train == {"gotu-2parity": 24576, "gotu-maj3": 24576}[cfg.experiment]
        assert total_steps(task, cfg.train) == epochs * math.ceil(24576 / 256)


def test_the_order_makes_every_rung_once_and_no_dearer_rung_of_a_family_first():
    assert len(ORDER) == len(set(ORDER)) == sum(len(f.rungs) - 1 for f in FAMILIES.values())
    for fam in FAMILIES.values():
        made = [r for f, r in ORDER if f == fam.name]
        flops = [sum(ladder.train_flops(c) for c in rung_configs(fam.name, r)) for r in made
                 if r != "gotu-schedule"]
        assert flops == sorted(flops), fam.name


def test_train_flops_is_six_n_d():
    cfg = rung_configs("gotu", "ci")[0]
    m = cfg.model  # 2 layers of width 32, 4 heads of 8, FF 64; 16 tokens (15 bits and CLS); 250 × 64
    n = 2 * (4 * 32 * 32 + 2 * 32 * 64)
    assert ladder.train_flops(cfg) == 6 * n * 250 * 64 * 16
    wider = replace(cfg, model=replace(m, d_model=64, d_ff=128))
    assert ladder.train_flops(wider) == 4 * ladder.train_flops(cfg)


def test_a_rung_with_a_missing_record_is_left_out(tmp_path):
    empty = RunStore(tmp_path)
    fam = FAMILIES["arith"]
    assert ladder.rung_records(fam, fam.rung("data"), store=empty) is None
    frame = ladder.ladder_frame(["arith"], store=empty)
    assert ladder.missing(frame) == ["arith/data", "arith/width", "arith/depth"]
    assert set(ladder.made(frame).rung) == {"ci"}
    numbers = ladder.ladder_numbers(frame, "ch4")
    assert numbers["ch4_ladder_made"] == "1" and numbers["ch4_ladder_rungs"] == "4"
    assert numbers["ch4_ladder_S214_moves"] == f"S2-14 has only its ci rung so far ({numbers['ch4_ladder_S214_ci_verdict']} there)"


def test_the_ci_rung_reads_the_chapters_measures():
    """At `ci` the ladder's measures equal the chapters' own: Chapter 3's mask accuracy over fitted runs,
    Chapter 4's base-budget default and paired gain, Chapter 9's passkey claims."""
    from companion.book.chapters import ch03_boolean, ch04_arithmetic, ch09_extrapolation

    frame = ladder.made(ladder.ladder_frame(store=RunStore(ROOT / "nowhere")))
    ci = frame[frame.rung == "ci"].set_index("claim").measure
    f3 = ch03_boolean.frame_of(ch03_boolean.load("ci")["gotu"])
    for fn, cid in (("2parity", "S2-06"), ("maj3", "S2-08")):
        runs = f3[(f3.task == fn) & (f3.method == "mask")]
        fitted = runs[runs["seen.acc"] >= ch03_boolean.FIT]
        assert ci[cid] == round(float((fitted if len(fitted) else runs)["cube.acc"].mean()), 4)
    f4 = ch04_arithmetic.decide(ch04_arithmetic.load("ci"))["frame"]
    assert ci["S2-13"] == pytest.approx(ch04_arithmetic.summary(f4, "add", 0.004, "default").mean / 100, abs=1e-4)
    assert ci["S2-14"] == pytest.approx(ch04_arithmetic.paired_gain(f4, "add", 0.004, "mask").mean_diff / 100, abs=1e-4)
    assert {cid: ci[cid] for cid in ("S3-13", "S3-14")} == {
        r.id: r.measure for r in ch09_extrapolation.decide(ch09_extrapolation.load("ci")).results
        if r.id in ("S3-13", "S3-14")}


def _frame(verdicts: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame([{"family": "gotu", "claim": "S2-06", "rung": r, "verdict": v} for r, v in verdicts.items()])


def test_verdict_moves_names_the_rungs_where_the_verdict_changes():
    assert ladder.verdict_moves(_frame({"ci": "partly", "data": "partly", "width": "partly"}), "S2-06") == \
        "S2-06 stays partly on every rung made above ci (2 of them)"
    assert ladder.verdict_moves(_frame({"ci": "partly", "data": "partly", "width": "reproduced"}), "S2-06") == \
        "S2-06 is partly on the ci rung and changes on 1 of the 2 rungs above it (width: reproduced)"


def test_a_rung_is_decided_by_the_ledgers_rule_preconditions_included():
    """A rung whose mask runs mostly miss the seen set is inconclusive, whatever its accuracy."""
    ledger = load_ledger()
    from companion.book.claims import assess

    assert assess(ledger["S2-06"], 1.0, {"mask-fits-seen": 0.4}) == ("inconclusive", ["mask-fits-seen"])
    assert assess(ledger["S2-06"], 1.0, {"mask-fits-seen": 0.6}) == ("reproduced", [])


def test_the_cli_counts_and_refuses_an_unknown_family(tmp_path, capsys):
    assert main(["ladder", "--status", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("runs stored") == len(ORDER) and "gotu/data" in out and "0 of 20 runs stored" in out
    assert main(["ladder", "--only", "gotu,nonsense"]) == 2
    assert "unknown family 'nonsense'" in capsys.readouterr().err


def test_every_committed_ladder_record_belongs_to_a_rung():
    """results/ladder holds runs of the ladder only, each a valid record of its config."""
    ids = {run_id(c) for fam, rung in rung_order() for c in rung_configs(fam.name, rung.name)}
    for path in sorted((ROOT / "results" / "ladder").glob("*.json")):
        record = Record.from_dict(json.loads(path.read_text()))
        assert record.run_id in ids and path.stem == record.run_id
        assert isinstance(record.config, RunConfig)


def test_the_paper_point_is_the_families_runs_at_the_paper_profile_and_absent_until_made(tmp_path):
    from companion.experiments.ladder import paper_configs

    for fam in FAMILIES.values():
        cfgs = paper_configs(fam.name)
        assert {run_id(c) for c in cfgs} <= {run_id(c) for c in chapter_runs(fam.chapter, "paper", fam.seeds)}
        assert len(cfgs) == len(fam.experiments) * len(fam.methods) * len(fam.seeds)
    frame = ladder.ladder_frame(["arith"], paper_store=RunStore(tmp_path))
    assert "paper" not in set(frame.rung) and "arith/paper" not in ladder.missing(frame)


def test_the_figure_draws_a_paper_point_as_a_star_off_the_ladder_line():
    import matplotlib

    matplotlib.use("Agg")
    from companion.book.chapters.figures.ladder import ladder as draw

    rows = pd.DataFrame([{"claim": "S2-14", "rung": r, "flops": f, "measure": m} for r, f, m in
                         (("ci", 1e12, 0.66), ("data", 4e12, 0.0), ("paper", 1e15, 0.7))])
    fig = draw(rows, ["S2-14"])
    lines = {tuple(line.get_xdata()): line.get_marker() for line in fig.axes[0].get_lines() if len(line.get_xdata()) and line.get_marker() != "None"}
    assert lines == {(1e12, 4e12): "o", (1e15,): "*"}
