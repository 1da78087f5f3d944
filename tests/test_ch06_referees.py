"""Chapter 6's module: per-run readings, frames, tables, claim measures and prose numbers on synthetic
records of both grids (exact values), and the frames of real tiny runs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from companion.book.claims import in_words
import torch

from companion import drift
from companion.readouts import jsonable, log_mask

from companion.book.chapter import details, measures, preconditions
from companion.book.chapters import ch06_referees as ch
from companion.book.chapters import referee_frames as frames06
from companion.book.chapters import step_cap
from companion.config import TaskConfig, TrainConfig
from companion.experiments import get_experiment, get_grid
from companion.experiments.referee import PLACEMENTS, WIDENED, mask_overrides, movable_cells, placement_cells, qk_norm_cells
from companion.priors import LearnableMask
from companion.tasks.boolean import BooleanTask

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "06_what_the_referees_asked.ipynb"
SEEDS = (0, 1, 2)
N_BITS = 6  # a 7 × 7 mask with the CLS token; Majority's falsifier opens bits 3-5
UNIFORM = [[1 / 7] * 7 for _ in range(7)]
ON_CLS = [[1.0] + [0.0] * 6 for _ in range(7)]  # every query on key 0 (the CLS token, open in every pattern)
HALF_CLS = [[0.5] + [0.5 / 6] * 6 for _ in range(7)]  # Structured (SVD)'s start: half on key 0, the rest spread
# The correct ±10 mask's end: the CLS row (free: it reads itself and the task's bits) moves 0.1 from key 0 to
# key 1, and the last bit's row (pinned: it reads only itself) moves 0.3, which the free-row drift must not see.
MASK_END = ([[1 / 7 + 0.1, 1 / 7 - 0.1] + [1 / 7] * 5] + [[1 / 7] * 7 for _ in range(5)]
            + [[1 / 7] * 5 + [1 / 7 + 0.3, 1 / 7 - 0.3]])
# R-07 on the free rows (2Parity: CLS, x0, x1; Majority: CLS, x0, x1, x2): the SVD model goes from ON_CLS to
# UNIFORM, √(6/7) per row; the mask moves only its CLS row, by √0.02.
SVD_FREE = (math.sqrt(3 * 6 / 7) + math.sqrt(4 * 6 / 7)) / 2
MASK_FREE = math.sqrt(0.02)

# Per-seed full-cube accuracy and final mask drift of the placement cells; any other cell: 0.75 and 0.2.
ACC = {("maj3", "falsifier", 10.0): (0.5, 0.5, 0.5), ("maj3", "widened", 10.0): (1.0, 1.0, 0.875),
       ("maj3", "correct", 1.0): (0.9, 0.95, 1.0),
       ("maj3", "correct", 10.0): (1.0, 1.0, 1.0), ("maj3", "no mask", 0.0): (0.9, 0.85, 0.95)}
MASK_DRIFT = {("2parity", "misspecified", 10.0): (0.4, 0.5, 0.6), ("maj3", "correct", 1.0): (0.3, 0.3, 0.3),
              ("maj3", "correct", 10.0): (0.1, 0.1, 0.1)}
SEEN = {("maj3", "falsifier", 10.0): 2 / 3}  # the falsifier at ±10 breaks training; every other run fits S
# QK cells: (final qk drift, final attention drift) by (method, qk_norm); 2Parity's SVD forms move less.
QK_DRIFT = {("default", False): (0.9, 0.5), ("structured-svd", False): (0.7, 3.5),
            ("structured-opt", False): (0.8, 0.7), ("default", True): (0.6, 1.1), ("structured-svd", True): (0.75, 1.2)}


def _drift(kind_values: dict[str, float | None], maps_final=UNIFORM, maps_init=UNIFORM, step: float = 0.02) -> dict:
    """Two steps, two layers, two heads: drift 0 at step 0 and `value` at the end (None: not tracked);
    with a mask, its largest entry move `step` at the end."""
    out = {"steps": [0, 10], "maps": {"init": [maps_init, maps_init], "final": [maps_final, maps_final]}}
    for kind, v in kind_values.items():
        out[kind] = {} if v is None else {layer: [[0.0, 0.0], [v, v]] for layer in ("0", "1")}
    if kind_values.get("mask") is not None:
        out["mask_step"] = {layer: [[0.0, 0.0], [step, step / 2]] for layer in ("0", "1")}
    return out


TRAIN = TrainConfig(lr=3e-3, steps=10)  # the step cap of a synthetic run: 10 · 3e-3 = 0.03 (own rate 0.1: 1.0)
KIND = {"mask": ("mask", True), "zero-mask": ("mask", True), "fixed-mask": ("mask", False)}


def _record(task: str, method: str, seed: int, acc: float, drift: dict, variant: str = "support", seen: float = 1.0,
            train: TrainConfig = TRAIN, tag: object = ""):
    kind, trainable = KIND.get(method, ("none", True))
    cfg = SimpleNamespace(experiment=f"gotu-{task}", profile="ci", method=method, seed=seed, train=train,
                          task=TaskConfig.of("boolean", function=task, n_bits=N_BITS),
                          model=SimpleNamespace(prior=SimpleNamespace(variant=variant, kind=kind, trainable=trainable)))
    return SimpleNamespace(config=cfg, seed=seed, run_id=f"{task}-{method}-{seed}-{variant}-{tag}", wall_time=1.0,
                           metrics={"cube": {"acc": acc}, "seen": {"acc": seen}}, drift=drift)


@pytest.fixture(scope="module")
def runs():
    out = {}
    for (task, placement, c), request in placement_cells("ci").items():
        variant = {**PLACEMENTS[task], "widened": WIDENED[task]}.get(placement, "support")
        accs, drifts = ACC.get((task, placement, c), (0.75,) * 3), MASK_DRIFT.get((task, placement, c), (0.2,) * 3)
        out[(task, placement, c)] = [
            _record(task, request.methods[0], s, a, _drift({"mask": d if request.methods[0] != "default" else None, "attention": 0.4, "qk": None},
                                                           MASK_END if (placement, c) == ("correct", 10.0) else UNIFORM),
                    variant, seen=SEEN.get((task, placement, c), 1.0), tag=c) for s, a, d in zip(SEEDS, accs, drifts)]
    return out


@pytest.fixture(scope="module")
def qk_runs():
    out = {}
    for (task, method, norm) in qk_norm_cells("ci"):
        qk, attention = QK_DRIFT[(method, norm)]
        if (method, norm) == ("structured-svd", False):
            qk += -0.1 if task == "2parity" else 0.1
        final = ON_CLS if (method, norm) == ("structured-svd", True) else UNIFORM
        start = {("structured-svd", True): HALF_CLS, ("structured-svd", False): ON_CLS}.get((method, norm), UNIFORM)
        out[(task, method, norm)] = [_record(task, method, s, 0.8, _drift({"mask": None, "attention": attention,
                                                                            "qk": qk}, final, start)) for s in SEEDS]
    return out


# The `mask-moves` cells: cube accuracy per seed; the misspecified mask with its own rate moves its
# separating entries from ∓10 to ∓10 ± 5 (the log σ readout), its largest entry move 0.5 (cap 25).
MOVABLE_ACC = {("maj3", "correct"): (1.0, 1.0, 1.0), ("maj3", "misspecified"): (0.9, 0.9, 0.95),
               ("maj3", "fixed"): (1.0, 1.0, 1.0), ("maj3", "no mask"): (0.9, 0.85, 0.95),
               ("maj3", "all-zero"): (0.9, 0.9, 0.9), ("2parity", "correct"): (0.8, 0.75, 0.75)}
OWN = TrainConfig(lr=3e-3, steps=10, prior_lr=2.5)  # a cap of 25, past the 20 a ±10 entry must cross


@pytest.fixture(scope="module")
def movable():
    out = {}
    for (task, placement, rate), request in movable_cells("ci").items():
        variant = PLACEMENTS[task].get(placement, "support")
        accs = MOVABLE_ACC.get((task, placement), (0.75,) * 3)
        own = rate == "own lr"
        recs = [_record(task, request.methods[0], s, a, _drift({"mask": 0.3 if request.methods[0] != "default" else None,
                                                                  "attention": 0.4, "qk": None}, step=0.5 if own else 0.0),
                        variant, train=OWN if own else TRAIN, tag=rate) for s, a in zip(SEEDS, accs)]
        if placement == "misspecified":
            wrong = frames06.mask_pattern_of(recs[0].config.task, variant)
            right = frames06.mask_pattern_of(recs[0].config.task, "support")
            logits = torch.where(wrong, 10.0, -10.0) + torch.where(right & ~wrong, 5.0, 0.0)
            value = jsonable(log_mask(SimpleNamespace(state_dict=lambda l=logits[None]: {"blocks.0.attn.prior.logits": l}),
                                      None, ""))
            recs = [SimpleNamespace(**{**vars(r), "readouts": {"log_mask": value}}) for r in recs]
        out[(task, placement, rate)] = recs
    return out


@pytest.fixture(scope="module")
def frame(runs):
    return ch.placement_frame(runs)


@pytest.fixture(scope="module")
def qk(qk_runs):
    return ch.qk_frame(qk_runs)


# ---------------------------------------------------------------- per-run readings

def test_correct_mask_at_ten_is_exactly_chapter_3s_mask_run():
    exp = get_experiment("gotu-2parity")
    shared = exp.config("ci", "mask", 3, mask_overrides("support", 10.0))
    assert shared == exp.config("ci", "mask", 3)  # same config, so the same stored run
    moved = exp.config("ci", "mask", 3, mask_overrides("pair:0-2", 2.0))
    assert (moved.model.prior.variant, moved.model.prior.open_value, moved.model.prior.closed_value) == ("pair:0-2", 2.0, -2.0)


def test_select_and_by_seed():
    frame = pd.DataFrame({"task": ["maj3"] * 4, "placement": ["correct", "correct", "no mask", "correct"],
                          "contrast": [10.0, 10.0, 0.0, 1.0], "seed": [0, 1, 0, 0], "cube.acc": [1.0, 0.9, 0.8, 0.7]})
    assert len(ch.select(frame, "maj3", "correct", 10.0)) == 2
    assert ch.by_seed(frame, "maj3", "correct", 10.0) == {0: 1.0, 1: 0.9}


def test_load_reads_the_three_grids_from_the_store_at_the_seeds_given():
    runs = ch.load("ci", [1, 0])  # the committed store
    assert (runs.profile, runs.seeds, list(runs.blocks)) == ("ci", (1, 0), ["referee", "qk-norm", "mask-moves",
                                                                              "seeds", "seeds-own"])
    for block in ("referee", "qk-norm", "mask-moves"):
        assert list(runs[block]) == list(get_grid(block).cells("ci"))
        assert all(sorted(r.seed for r in records) == [0, 1] for records in runs[block].values())
    # R-05's and M-09's cells at the referee's ten seeds, whatever the chapter's
    assert list(runs["seeds"]) == list(ch.SEED_TEST_CELLS) and list(runs["seeds-own"]) == list(ch.MOVABLE_TEST_CELLS)
    assert all(sorted(r.seed for r in records) == list(range(10))
               for block in ("seeds", "seeds-own") for records in runs[block].values())


# ---------------------------------------------------------------- frames

def test_placement_frame_one_row_per_run_with_the_initial_mask_norm(frame):
    assert len(frame) == 30 * len(SEEDS) and list(frame.columns[:3]) == ["task", "placement", "contrast"]
    mis = ch.select(frame, "2parity", "misspecified", 2.0)
    assert mis["method"].tolist() == ["mask"] * 3 and mis["mask_drift"].tolist() == pytest.approx([0.2] * 3)
    pattern = BooleanTask("2parity", n_bits=N_BITS).mask_pattern("pair:0-2", cls=True)
    bias = LearnableMask.from_pattern(pattern, open_value=2.0, closed_value=-2.0)(7).double()
    assert mis["mask_norm"].tolist() == pytest.approx([float(bias.detach().norm())] * 3, rel=1e-6)
    baseline = ch.select(frame, "maj3", "no mask", 0.0)
    assert baseline["method"].tolist() == ["default"] * 3
    assert baseline["mask_norm"].isna().all() and baseline["mask_drift"].isna().all()


def test_qk_frame_reads_the_cls_attention_on_the_support(qk):
    assert len(qk) == 10 * len(SEEDS) and list(qk.columns[:3]) == ["task", "method", "qk_norm"]
    start = qk[qk.method != "structured-svd"].groupby("task")["open_start"].unique()
    # uniform maps: CLS's share on the open keys = open keys of row 0 / 7 (3 for 2Parity, 4 for Majority)
    assert start["2parity"].tolist() == pytest.approx([3 / 7]) and start["maj3"].tolist() == pytest.approx([4 / 7])
    chance = qk.groupby("task")["open_chance"].unique()
    assert chance["2parity"].tolist() == pytest.approx([3 / 7]) and chance["maj3"].tolist() == pytest.approx([4 / 7])
    svd_start = qk[(qk.method == "structured-svd") & qk.qk_norm].groupby("task")["open_start"].mean()
    assert svd_start.to_dict() == pytest.approx({"2parity": 0.5 + 2 * 0.5 / 6, "maj3": 0.5 + 3 * 0.5 / 6})
    svd_norm = qk[(qk.method == "structured-svd") & qk.qk_norm]
    assert svd_norm["open_end"].tolist() == pytest.approx([1.0] * 6)
    assert qk[qk.method == "default"]["qk_drift"].tolist() == pytest.approx([0.9] * 3 + [0.6] * 3 + [0.9] * 3 + [0.6] * 3)


# ---------------------------------------------------------------- claims and prose

# R-06 by hand: Structured (SVD) with QK norm starts at 2/3 (2Parity) and 3/4 (Majority) of CLS
# attention on the open keys, ends at 1; chance is 3/7 and 4/7: (4/7 + 3/7)/2 over (2/3 − 3/7 + 3/4 − 4/7)/2
R06 = (4 / 7 + 3 / 7) / ((2 / 3 - 3 / 7) + (3 / 4 - 4 / 7))


def test_claim_measures_exact(frame, qk):
    norm = drift.mask_scale(BooleanTask("2parity", n_bits=N_BITS).mask_pattern("pair:0-2", cls=True), 10.0)
    assert norm == pytest.approx(math.sqrt(11 * math.log1p(math.exp(-10)) ** 2 + 38 * (10 + math.log1p(math.exp(-10))) ** 2))
    assert ch.mask_matters(frame) == ["maj3"]  # +10 points on Majority; 2Parity's correct mask = no mask
    assert measures(ch.CLAIMS, ch.analysis(frame, qk)) == {
        "R-02": 0.0833,  # the widened falsifier: |(1 + 1 + 0.875) / 3 − 0.875|
        "R-03": 0.8258,  # the lower end of (0.9, 0.95, 1.0)'s interval: 0.95 − t(2) · 0.05/√3
        "R-04": 3.0,  # 0.3 / 0.1
        "R-05": 0.125,  # paired (1, 1, 1) − (0.9, 0.85, 0.95): every seed gains, 1/2³
        "R-06": round(R06, 4),  # 2.4, against the control's 0
        "R-07": round(SVD_FREE / MASK_FREE, 2),  # matched at the start; free rows only (12.22, not 3.5 / 0.4)
    }
    # the control starts on the pattern (share 1) and ends uniform: retention 0
    assert round(R06, 4) == 2.4 and ch.qk_retention(qk, False) == pytest.approx(0.0, abs=1e-6)
    assert "R-01" not in measures(ch.CLAIMS, ch.analysis(frame, qk))  # decided where the mask can move (step cap)
    assert preconditions(ch.CLAIMS, ch.analysis(frame, qk)) == {
        "R-02": {"falsifier-fits": 1.0}, "R-05": {"mask-matters": 1, "test-can-pass": 0},
        "R-06": {"prior-at-start": round(((2 / 3 - 3 / 7) + (3 / 4 - 4 / 7)) / 2, 4)},
        "R-07": {"matched-pairs": 6}}


def test_r02_passes_on_a_collapse_and_is_inconclusive_when_the_widened_falsifier_cannot_fit(frame, qk):
    """R-02's rule at both ends: a widened falsifier at the MDI's level is a collapse (reproduced); one
    that does not fit the seen set decides nothing (inconclusive), whatever its accuracy."""
    from companion.book.claims import assess, load_ledger

    claim = load_ledger()["R-02"]
    wid = (frame.task == "maj3") & (frame.placement == "widened")
    collapsed = frame.assign(**{"cube.acc": frame["cube.acc"].where(~wid, 0.875)})
    assert measures(ch.CLAIMS, ch.analysis(collapsed, qk))["R-02"] == 0.0
    assert assess(claim, 0.0, preconditions(ch.CLAIMS, ch.analysis(collapsed, qk))["R-02"]) == ("reproduced", [])
    unfit = frame.assign(**{"seen.acc": frame["seen.acc"].where(~wid, 0.9)})
    pre = preconditions(ch.CLAIMS, ch.analysis(unfit, qk))["R-02"]
    assert pre == {"falsifier-fits": 0.9}
    assert assess(claim, measures(ch.CLAIMS, ch.analysis(unfit, qk))["R-02"], pre) == ("inconclusive", ["falsifier-fits"])
    assert assess(claim, 0.125, {"falsifier-fits": 1.0})[0] == "not reproduced"  # the null fails the rule


def test_matched_drift_keeps_only_runs_that_start_on_the_pattern(frame, qk):
    md = ch.matched_drift(frame, qk)
    rows = md.pop("rows")
    assert rows == {"2parity": (3, 7), "maj3": (4, 7)}
    assert md == pytest.approx({"ratio": SVD_FREE / MASK_FREE, "pairs": 6, "svd": SVD_FREE, "mask": MASK_FREE,
                                "svd_all": 3.5, "mask_all": 0.4})
    unmatched = qk.assign(open_start=0.5)
    none = ch.matched_drift(frame, unmatched)
    assert none["pairs"] == 0 and none["ratio"] != none["ratio"]  # NaN: nothing to compare


def test_claim_details_and_verdicts(frame, qk):
    from companion.book.claims import load_ledger, record_all

    assert details(ch.CLAIMS, ch.analysis(frame, qk)) == {"R-03": "mean 95.0 % over 3 seeds, 95 % interval [82.6 %, 107.4 %]; the interval crosses the "
                               "93 % and 99 % lines",
                       "R-02": "widened falsifier ±10 on Majority 95.8 % (MDI 87.5 %); the shape-only falsifier "
                               "fits 66.7 % of the seen set",
                       "R-05": "3-bit Majority: 3 of 3 seeds gain, p = 0.125, 95% interval [-2.4, 22.4] points",
                       "R-06": "retention with QK norm 2.40, without (control) 0.00",
                       "R-07": "free rows: Structured (SVD) 1.73 vs mask 0.14 over 6 pairs matched at the start; "
                               "every row: 3.50 vs 0.40"}
    got = {r.id: (r.verdict, r.failed) for r in record_all(
        measures(ch.CLAIMS, ch.analysis(frame, qk)), preconditions=preconditions(ch.CLAIMS, ch.analysis(frame, qk)), ledger=load_ledger())}
    # three seeds cannot reach p ≤ 0.05 (1/8 at best); the widened falsifier fits S and keeps most of the gain
    assert got["R-05"] == ("inconclusive", ["test-can-pass"]) and got["R-02"] == ("not reproduced", [])
    assert got["R-06"] == ("reproduced", []) and got["R-07"] == ("reproduced", [])


def test_separating_drift_counts_only_the_entries_that_differ():
    wrong = torch.tensor([[True, True, False], [True, True, False], [False, False, True]])
    right = torch.tensor([[True, False, True], [True, True, False], [False, False, True]])
    init = torch.where(wrong, 10.0, -10.0)
    ls = lambda m: torch.nn.functional.logsigmoid(m.double())  # noqa: E731  (as the readout stores it)
    assert ch.separating_drift(init, ls(init), wrong, right) == 0.0
    assert ch.separating_drift(init, ls(torch.where(right, 10.0, -10.0)), wrong, right) == pytest.approx(1.0)
    # of the two separating entries, (0, 2) moves from M = −10 to 0 and (0, 1) stays
    span = math.log(1 / (1 + math.exp(-10))) - math.log(1 / (1 + math.exp(10)))
    half = init.clone()
    half[0, 2] = 0.0
    moved = (math.log(0.5) - math.log(1 / (1 + math.exp(10)))) / span
    assert ch.separating_drift(init, ls(half), wrong, right) == pytest.approx(moved / 2)
    # moving away from the right pattern counts negative
    away = init.clone()
    away[0, 2] = -20.0
    assert ch.separating_drift(init, ls(away), wrong, right) < 0


def test_misspecified_drift_reads_the_final_masks(runs):
    pattern = BooleanTask("2parity", n_bits=N_BITS).mask_pattern("pair:0-2", cls=True)
    right = BooleanTask("2parity", n_bits=N_BITS).mask_pattern("support", cls=True)
    final = torch.where(pattern, 10.0, -10.0)
    final[right & ~pattern] = 0.0  # every entry the right mask opens moves from −10 to 0
    # the readout the runs store: log σ(M) of each layer's mask, averaged over heads (here two equal heads)
    model = SimpleNamespace(state_dict=lambda: {"blocks.0.attn.prior.logits": final[None].repeat(2, 1, 1),
                                                "blocks.0.attn.other": torch.zeros(1)})
    value = jsonable(log_mask(model, None, ""))
    assert list(value) == ["blocks.0.attn.prior.logits"]
    cell = [SimpleNamespace(**{**vars(r), "readouts": {"log_mask": value}}) for r in runs[("2parity", "misspecified", 10.0)]]
    runs = {**runs, ("2parity", "misspecified", 10.0): cell}
    sep = (pattern != right)
    n_up, n_down = int((right & ~pattern).sum()), int((pattern & ~right).sum())
    moved = (math.log(0.5) + math.log1p(math.exp(10))) / (math.log1p(math.exp(10)) - math.log1p(math.exp(-10)))
    assert int(sep.sum()) == n_up + n_down
    assert ch.misspecified_drift(runs, "2parity") == pytest.approx(moved * n_up / (n_up + n_down))
    bare = {**runs, ("2parity", "misspecified", 10.0): [SimpleNamespace(**{**vars(r), "readouts": {}}) for r in cell]}
    with pytest.raises(ValueError, match="has no readout 'log_mask'"):
        ch.misspecified_drift(bare, "2parity")


def test_prose_numbers_exact(frame, qk):
    results = [SimpleNamespace(id=f"R-0{i}", verdict="reproduced" if i % 2 else "partly") for i in range(1, 8)]
    p = ch.prose_numbers(frame, qk, results, {"2parity": 0.01, "maj3": 0.03}, {"2parity": 0.02, "maj3": 0.0})
    assert {k: p[k] for k in ("ch6_sep10_2parity", "ch6_sep10_maj3", "ch6_sep1_2parity", "ch6_sep1_maj3",
                              "ch6_matters", "ch6_r05_p", "ch6_r05_gains", "ch6_r05_pmin", "ch6_r05_interval",
                              "ch6_fals10_seen", "ch6_ret_norm", "ch6_ret_plain")} == {
        "ch6_sep10_2parity": "1.00 %", "ch6_sep10_maj3": "3.00 %", "ch6_sep1_2parity": "2.00 %",
        "ch6_sep1_maj3": "0.00 %", "ch6_matters": "3-bit Majority", "ch6_r05_p": "0.125",
        "ch6_r05_gains": "3 of 3", "ch6_r05_pmin": "0.125", "ch6_r05_interval": "[-2.4, 22.4]",
        "ch6_fals10_seen": "66.7 %", "ch6_ret_norm": "2.40", "ch6_ret_plain": "0.00"}
    assert (p["ch6_match_ratio"], p["ch6_match_pairs"], p["ch6_match_svd"], p["ch6_match_mask"]) == ("12.2", "6", "1.73", "0.14")
    assert (p["ch6_match_svd_all"], p["ch6_match_mask_all"], p["ch6_match_ratio_all"]) == ("3.50", "0.40", "8.8")
    assert p["ch6_free_rows"] == "3 of 7 on 2Parity; 4 of 7 on 3-bit Majority"
    assert {k: p[k] for k in ("ch6_acc_maj3_falsifier_10", "ch6_acc_maj3_correct_1", "ch6_acc_maj3_default",
                              "ch6_acc_2parity_misspecified_5", "ch6_acc_2parity_default")} == {
        "ch6_acc_maj3_falsifier_10": "50.0 %", "ch6_acc_maj3_correct_1": "95.0 %", "ch6_acc_maj3_default": "90.0 %",
        "ch6_acc_2parity_misspecified_5": "75.0 %", "ch6_acc_2parity_default": "75.0 %"}
    assert (p["ch6_drift_mis10"], p["ch6_drift_mis10_rel"], p["ch6_drift_maj_correct10"], p["ch6_drift_maj_correct1"]) \
        == ("0.50", "0.81 %", "0.10", "0.30")
    # Structured (SVD) pooled over both tasks: CLS on the pattern at the end 1.0 with QK norm, (3/7 + 4/7)/2 without
    assert (p["ch6_svd_norm_end"], p["ch6_svd_plain_end"]) == ("1.00", "0.50")
    assert (p["ch6_svd_qk_drift"], p["ch6_default_qk_drift"]) == ("0.70", "0.90")
    assert (p["ch6_svd_attn_drift"], p["ch6_default_attn_drift"], p["ch6_svd_norm_attn_drift"]) == ("3.50", "0.50", "1.20")
    assert p["ch6_n_seeds"] == "3" and p["ch6_r04"] == "3"
    assert (p["ch6_R01"], p["ch6_R02"]) == ("borne out", "partly borne out")  # the referees' hypotheses, in their words
    assert {k: p[f"ch6_gain_{k}"] for k in ("cor10", "cor2", "cor1", "fals10", "fals1", "mis10")} == {
        "cor10": "+10.0", "cor2": "−15.0", "cor1": "+5.0", "fals10": "−40.0", "fals1": "−15.0", "mis10": "−15.0"}


def test_prose_numbers_cover_every_glue_the_text_cites(frame, qk):
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    cited = {name for c in cells if c["cell_type"] == "markdown"
             for name in re.findall(r"\{glue:text\}`([^`]+)`", "".join(c["source"]))}
    results = [SimpleNamespace(id=f"R-0{i}", verdict="reproduced") for i in range(1, 8)]
    drifts = {"2parity": 0.01, "maj3": 0.03}
    # the closing section glues its own status line from companion.book.paper_status, not from prose_numbers
    own = {"ch6_paper_status"}
    code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert all(f'"{name}"' in code for name in own)
    glued = set(ch.prose_numbers(frame, qk, results, drifts, drifts)) | set(ch.step_cap_glue(None)) | set(ch.decided_numbers([]))
    assert cited and cited - own <= glued


# ---------------------------------------------------------------- tables and figure data

def test_accuracy_and_drift_tables(frame):
    acc = ch.accuracy_table(frame)
    assert list(acc.columns) == ["0 (none)", "±1", "±2", "±5", "±10"] and acc.columns.name == ch.ACCURACY_AT
    assert acc.index.names == ["Task", "Placement"]
    assert acc.loc[("3-bit Majority", "Correct"), "±1"] == "95.0 ± 5.0"  # seeds at 90, 95, 100 %
    assert acc.loc[("3-bit Majority", "Correct"), "±10"] == "100.0 ± 0.0"
    assert acc.loc[("3-bit Majority", "No mask (default)"), "0 (none)"] == "90.0 ± 5.0"
    assert acc.loc[("2Parity", "No mask (default)"), "±1"] == "—"
    drift = ch.drift_table(frame)
    assert set(drift.index.get_level_values("Placement")) == {"Correct", "Misspecified", "Falsifier"}
    assert drift.loc[("2Parity", "Misspecified"), "±10"] == 0.5 and drift.loc[("3-bit Majority", "Correct"), "±1"] == 0.3
    assert ch.placements_table().loc["Falsifier", "3-bit Majority"] == "bits 3, 4 and 5"
    assert ch.placements_table().loc["Correct", "2Parity"] == "the task's own pattern"


def test_paired_gain_table(frame):
    table = ch.paired_gain_table(frame)
    assert list(table.columns) == [ch.MINUS_NO_MASK, "p (paired t-test)", "Seeds"]
    assert table.loc[("3-bit Majority", "Correct ±10")].tolist() == ["+10.0 [−2.4, 22.4]", "0.074", 3]
    assert table.loc[("3-bit Majority", "Falsifier ±10")].tolist() == ["−40.0 [−52.4, −27.6]", "0.0052", 3]
    # identical values: zero difference, p = 1 by the zero-variance rule
    assert table.loc[("2Parity", "All-zero mask")].tolist() == ["0.0 [0.0, 0.0]", "1.0", 3]


def test_qk_tables_use_the_readers_names(qk):
    table = ch.qk_table(qk)
    assert table.index.names == ["Task", "Method", "QK norm"] and list(table.columns) == list(ch.QK_COLUMNS.values())
    assert table.loc[("3-bit Majority", "Structured (SVD)", "on")].tolist() == [80.0, 0.75, 1.0, 0.75]  # SVD starts with half on CLS
    assert table.loc[("2Parity", "Structured (SVD)", "off"), ch.QK_COLUMNS["qk_drift"]] == 0.6
    drift = ch.qk_drift_table(qk)
    assert drift.loc[("3-bit Majority", "Default", "off"), "Attention-pattern drift"] == "0.50 ± 0.00"
    assert drift.loc[("3-bit Majority", "Default", "off"), ch.QK_DRIFTS["qk_drift"]].endswith("± 0.00")


def test_figure_data(frame, runs, qk_runs):
    acc = ch.accuracy_runs(frame, "maj3")
    assert set(acc.placement) == {"correct", "misspecified", "falsifier"} and len(acc) == 3 * 4 * len(SEEDS)
    assert acc[(acc.placement == "correct") & (acc.contrast == 1.0)]["acc"].tolist() == pytest.approx([90, 95, 100])
    assert ch.baseline_accuracy(frame, "maj3") == pytest.approx({"no mask": 90.0, "all-zero": 75.0})
    curves = ch.placement_drift(runs, "maj3", "mask")
    assert list(curves["contrast"].cat.categories) == ["±10", "±1"] and len(curves) == 3 * 2 * len(SEEDS) * 2
    last = curves[curves.step == 10].groupby(["placement", "contrast"], observed=True)["drift"].mean()
    assert last[("correct", "±1")] == pytest.approx(0.3) and last[("falsifier", "±10")] == pytest.approx(0.2)
    qk_curves = ch.qk_drift_curves(qk_runs, "2parity", "qk")
    assert list(qk_curves["QK"].cat.categories) == ["none", "QK norm"] and set(qk_curves.method) == {
        "default", "structured-svd", "structured-opt"}
    end = qk_curves[qk_curves.step == 10].groupby(["method", "QK"], observed=True)["drift"].mean()
    assert end[("structured-svd", "none")] == pytest.approx(0.6) and end[("default", "QK norm")] == pytest.approx(0.6)


# ---------------------------------------------------------------- real runs

TINY = ["task.n_bits=6", "task.n_train=32", "task.eval_points=0", "train.steps=4", "train.eval_every=2",
        "train.batch_size=16", "model.d_model=16", "model.d_ff=16", "model.n_heads=2"]


def test_frames_of_real_tiny_runs():
    from companion.runs import run

    exp = get_experiment("gotu-maj3")
    mask = [run(exp.config("ci", "mask", 0, [*mask_overrides("group:3-4-5", 2.0), *TINY]))]
    svd = [run(exp.config("ci", "structured-svd", 0, ["model.qk_norm=true", *TINY]))]
    frame = ch.placement_frame({("maj3", "falsifier", 2.0): mask})
    pattern = BooleanTask("maj3", n_bits=6).mask_pattern("group:3-4-5", cls=True)
    assert frame["mask_norm"].iloc[0] == pytest.approx(drift.mask_scale(pattern, 2.0))
    assert frame["mask_drift"].iloc[0] > 0 and frame["attention_drift"].iloc[0] > 0
    qk = ch.qk_frame({("maj3", "structured-svd", True): svd})
    assert 0.0 < qk["open_start"].iloc[0] <= 1.0 and 0.0 < qk["open_end"].iloc[0] <= 1.0
    assert qk["qk_drift"].iloc[0] > 0


def test_sign_flip_p_is_the_exact_permutation_tail():
    from companion.book.chapters.stats import sign_flip_p

    assert sign_flip_p([0.1] * 5) == 1 / 32  # every seed gains: the smallest p five seeds allow
    assert sign_flip_p([0.1, 0.2, 0.3, 0.4, -0.05]) == 2 / 32  # one small loss: also flipping it ties or beats
    assert sign_flip_p([0.1] * 4) == 1 / 16  # four seeds never reach 0.05
    assert sign_flip_p([1.0, -1.0]) == 3 / 4 and sign_flip_p([0.0, 0.0]) == 1.0
    with pytest.raises(ValueError, match="1 ≤ n ≤ 20"):
        sign_flip_p([])


# ---------------------------------------------------------------- decide(): what `companion claim` prints

def _with_log_mask(runs):
    """The runs with the `log_mask` readout on the misspecified cells at ±10 and ±1 (the contrasts the
    chapter reads the final masks at): the initial mask, unmoved."""
    out = dict(runs)
    for task in ("2parity", "maj3"):
        for c in (10.0, 1.0):
            recs = runs[(task, "misspecified", c)]
            wrong = frames06.mask_pattern_of(recs[0].config.task, recs[0].config.model.prior.variant)
            logits = torch.where(wrong, c, -c)[None]
            model = SimpleNamespace(state_dict=lambda logits=logits: {"blocks.0.attn.prior.logits": logits})
            value = jsonable(log_mask(model, None, ""))
            out[(task, "misspecified", c)] = [SimpleNamespace(**{**vars(r), "readouts": {"log_mask": value}}) for r in recs]
    return out


def test_claims_reads_the_three_grids_and_decides_every_claim_as_the_notebook_does(runs, qk_runs, movable, monkeypatch):
    from companion.book.chapter import claims
    from companion.book.claims import load_ledger

    grids = {"referee": _with_log_mask(runs), "qk-norm": qk_runs, "mask-moves": movable}
    monkeypatch.setattr(ch, "read_grid", lambda name, profile, seeds, **kw: grids[name])
    asked = []

    def read_many(requests, profile, seeds, **kw):  # R-05's and M-09's cells at their seeds: the grids' records
        asked.append(list(seeds))
        return [grids["referee"][k] for k in ch.SEED_TEST_CELLS] + [movable[k] for k in ch.MOVABLE_TEST_CELLS]

    monkeypatch.setattr(ch, "read_many", read_many)
    results = claims(ch, "ci", list(SEEDS), store="st")
    assert asked == [list(range(10))]
    ledger = load_ledger()
    assert sorted(r.id for r in results) == sorted(
        c for c, v in ledger.items() if v.chapter.endswith("06_what_the_referees_asked") and v.rebuilt)
    # the notebook's claim cell on the same records
    frame, qk = ch.placement_frame(grids["referee"]), ch.qk_frame(qk_runs)
    tested = ch.placement_frame({k: grids["referee"][k] for k in ch.SEED_TEST_CELLS})
    ten, ten_own = ({k: grids["referee"][k] for k in ch.SEED_TEST_CELLS},
                    {k: movable[k] for k in ch.MOVABLE_TEST_CELLS})
    cap, a = ch.step_cap_measures(grids["referee"], movable, ten, ten_own), ch.analysis(frame, qk, tested)
    parts = {f.__name__: f(step_cap.CLAIMS[:1], cap) | f(ch.CLAIMS, a) | f(step_cap.CLAIMS[1:], cap)
             for f in (measures, preconditions, details)}
    assert [r.id for r in results] == list(parts["measures"]) and list(parts["measures"])[:2] == ["R-01", "R-02"]
    assert {r.id: r.measure for r in results} == pytest.approx(parts["measures"], nan_ok=True)
    assert {r.id: r.preconditions for r in results if r.preconditions} == parts["preconditions"]
    assert {r.id: r.detail for r in results if r.detail} == parts["details"]


def test_decide_glues_every_number_once_and_keeps_the_step_cap_names_without_the_movable_runs(runs, qk_runs, movable):
    from companion.book.chapter import Runs

    grids = {"referee": _with_log_mask(runs), "qk-norm": qk_runs}
    full = ch.decide(Runs("ci", SEEDS, {**grids, "mask-moves": movable}))
    bare = ch.decide(Runs("paper", SEEDS, {**grids, "mask-moves": {}}))
    assert [r.id for r in full.results][:2] == ["R-01", "R-02"] and {"M-07", "M-08", "M-09"} <= {r.id for r in full.results}
    assert [r.id for r in bare.results] == ["R-02", "R-03", "R-04", "R-05", "R-06", "R-07"] and bare["cap"] is None
    assert set(bare.numbers) == set(full.numbers)  # the same glue names at both, "—" where the runs are not
    assert (bare.numbers["ch6_R01"], bare.numbers["ch6_cap_ratio"]) == ("—", "—")
    assert full.numbers["ch6_R01"] == in_words(next(r for r in full.results if r.id == "R-01"))
    assert full.numbers["ch6_R01"] in ("borne out", "partly borne out", "not borne out")
    # the misspecified masks' final masks at ±10 and at ±1 (unmoved in `_with_log_mask`: 0 up to rounding)
    assert [full.numbers[k].lstrip("−") for k in ("ch6_sep10_maj3", "ch6_sep1_2parity")] == ["0.00 %", "0.00 %"]
    assert len(full["frame"]) == 30 * len(SEEDS) and len(full["qk"]) == 10 * len(SEEDS)


# ---------------------------------------------------------------- where the mask can move (step cap)

def test_step_cap_measures_exact(runs, movable):
    """The synthetic runs: every learnable mask moves 0.02 of a 0.03 cap at the model's rate, 0.5 of a
    25 cap at its own; the misspecified mask with its own rate moves its entries that the correct mask
    opens from −10 to −5, and none of those it closes."""
    cap = ch.step_cap_measures(_with_log_mask(runs), movable)
    claims = measures(step_cap.CLAIMS, cap)
    pattern = BooleanTask("maj3", n_bits=N_BITS).mask_pattern("group:0-1-3", cls=True)
    right = BooleanTask("maj3", n_bits=N_BITS).mask_pattern("support", cls=True)
    up, down = int((right & ~pattern).sum()), int((pattern & ~right).sum())
    span = math.log1p(math.exp(10)) - math.log1p(math.exp(-10))
    sep = (math.log1p(math.exp(10)) - math.log1p(math.exp(5))) / span * up / (up + down)
    # 14 learnable referee cells (3 placements × 4 contrasts, the widened falsifier, the all-zero mask) and
    # 3 own-rate cells per task
    assert claims["M-07"] == round(0.02 / 0.03, 2) and cap["n_runs"] == 2 * 14 * 3 + 2 * 3 * 3
    assert claims["R-01"] == pytest.approx(round(sep, 4), abs=1e-4)  # the larger of the two tasks (same shapes)
    # the correct mask with its own rate minus the fixed one: Majority 0, 2Parity (0.8, 0.75, 0.75) − 0.75
    assert claims["M-08"] == round(0.05 / 3, 4)
    # the misspecified mask with its own rate (0.9, 0.9, 0.95) over the same mask at the model's (0.75 each),
    # paired by seed: gains 0.15, 0.15, 0.2; M-09 reads the upper end of their 95 % t interval (t = 4.303, 2 df)
    gains = np.array([0.15, 0.15, 0.2])
    upper = gains.mean() + 4.302652729911275 * gains.std(ddof=1) / 3 ** 0.5
    assert claims["M-09"] == pytest.approx(round(upper, 4), abs=1e-4) and cap["matters"] == ["maj3"]
    assert cap["recover"]["maj3"].mean_diff == pytest.approx(gains.mean()) and cap["recover"]["maj3"].n == 3
    assert preconditions(step_cap.CLAIMS, cap) == {
        "M-08": {"mask-can-move": 25.0}, "M-09": {"mask-can-move": 25.0, "mask-matters": 1},
        "R-01": {"mask-can-move": 25.0, "mask-matters": 1}}
    assert cap["model_cap"] == pytest.approx(0.03)


def test_r01_is_inconclusive_where_the_mask_cannot_move_and_decided_where_it_can(runs, movable):
    """At the model's rate (cap 0.03) the skeptic's test could only pass; with the mask's own rate it is
    decided, here against the skeptic, as the synthetic mask moves a quarter of the way."""
    from companion.book.claims import load_ledger, record_all

    ledger = load_ledger()
    cap = ch.step_cap_measures(_with_log_mask(runs), movable)
    claims, pre = measures(step_cap.CLAIMS, cap), preconditions(step_cap.CLAIMS, cap)
    got = {r.id: r.verdict for r in record_all(claims, preconditions=pre, ledger=ledger)}
    assert got["R-01"] == "not reproduced" and got["M-07"] == "reproduced"
    stuck = {k: {**v, "mask-can-move": cap["model_cap"]} for k, v in pre.items()}
    got = {r.id: (r.verdict, r.failed) for r in record_all(claims, preconditions=stuck, ledger=ledger)}
    assert got["R-01"] == ("inconclusive", ["mask-can-move"]) and got["M-08"] == ("inconclusive", ["mask-can-move"])


def test_step_cap_glue_keeps_its_names_at_a_profile_without_the_runs(runs, movable):
    cap = ch.step_cap_measures(_with_log_mask(runs), movable)
    full, empty = ch.step_cap_glue(cap), ch.step_cap_glue(None)
    assert set(empty) == set(full) | {"ch6_R01", "ch6_M07", "ch6_M08", "ch6_M09"}
    assert full["ch6_cap_model"] == "0.03" and full["ch6_cap_own"] == "25.00" and full["ch6_cap_rate"] == "0.1"
    assert full["ch6_cap_over"] == "0" and full["ch6_cap_fit_own_maj3"] == "3 of 3"
    assert full["ch6_cap_r01_max"] == "0.15 %" and empty["ch6_cap_ratio"] == "—"
    assert empty["ch6_cap_paper"] == full["ch6_cap_paper"] == "0.02 to 0.18"


def test_load_reads_the_movable_grid_at_ci_only(monkeypatch):
    calls = []
    monkeypatch.setattr(ch, "read_grid", lambda name, profile, seeds, **kw: calls.append((name, profile)) or {"x": 1})
    assert ch.load("ci", [0])["mask-moves"] == {"x": 1} and ch.load("paper", [0])["mask-moves"] == {}
    assert [c for c in calls if c[0] == "mask-moves"] == [("mask-moves", "ci")]
    assert list(ch.movable_table({}).iloc[:, 0]) == ["The masks with a learning rate of their own are run at the ci profile only."]


def test_free_rows_are_the_queries_a_hard_mask_does_not_pin():
    """2Parity's mask opens CLS → {itself, x0, x1} and x0 ↔ x1; every other bit reads only itself, so 3 of
    its 16 rows can move under a ±10 mask, and 4 of Majority's (CLS, x0, x1, x2)."""
    parity = frames06.mask_pattern_of(TaskConfig.of("boolean", function="2parity", n_bits=15), "support")
    majority = frames06.mask_pattern_of(TaskConfig.of("boolean", function="maj3", n_bits=15), "support")
    assert np.flatnonzero(ch.free_rows(parity)).tolist() == [0, 1, 2]
    assert np.flatnonzero(ch.free_rows(majority)).tolist() == [0, 1, 2, 3]
    # a pinned row's move is invisible to the free-row drift, a free row's is not
    record = SimpleNamespace(drift={"maps": {"init": [UNIFORM], "final": [MASK_END]}})
    rows = ch.free_rows(frames06.mask_pattern_of(TaskConfig.of("boolean", function="2parity", n_bits=N_BITS), "support"))
    assert ch.free_drift(record, rows) == pytest.approx(MASK_FREE)
    assert ch.free_drift(SimpleNamespace(drift={"maps": {}}), rows) != ch.free_drift(SimpleNamespace(drift={"maps": {}}), rows)


def test_chapter_3s_s2_10_and_s2_23_are_decided_where_the_mask_can_move(runs, qk_runs, movable):
    """The synthetic own-rate runs: the all-zero mask (0.9 each) over no mask (0.9, 0.85, 0.95) on Majority gains
    0, on 2Parity 0 (0.75 each); the correct mask over the fixed one where it matters (Majority only) 0. Both
    claims decided by their own rules and preconditions, glued with their names; at a profile without the
    runs nothing is decided and the glue reads "—"."""
    from companion.book.chapter import Runs

    cap = ch.step_cap_measures(_with_log_mask(runs), movable)
    parts = step_cap.decided_claims(cap)
    assert parts["measures"] == {"S2-10": 0.0, "S2-23": 0.0}
    assert parts["preconditions"] == {"S2-10": {"mask-can-move": 25.0},
                                      "S2-23": {"mask-can-move": 25.0, "mask-gains": 1}}
    grids = {"referee": _with_log_mask(runs), "qk-norm": qk_runs}
    full = ch.decide(Runs("ci", SEEDS, {**grids, "mask-moves": movable}))
    assert [(r.id, r.verdict, r.decided) for r in full.decided] == [("S2-10", "reproduced", True),
                                                                     ("S2-23", "reproduced", True)]
    assert not any(r.decided for r in full.results) and {"S2-10", "S2-23"}.isdisjoint(r.id for r in full.results)
    assert full.numbers["ch6_S210_decided"] == "0.0 points, reproduced"
    bare = ch.decide(Runs("paper", SEEDS, {**grids, "mask-moves": {}}))
    assert bare.decided == () and bare.numbers["ch6_S223_decided"] == "—"
    # where the mask gains nowhere, S2-23 stays inconclusive by its mask-gains precondition
    none = step_cap.decided_claims({**cap, "matters": []})
    from companion.book.claims import record_decided

    r = record_decided("S2-23", none["measures"]["S2-23"], preconditions=none["preconditions"]["S2-23"], glue=False)
    assert (r.verdict, r.failed) == ("inconclusive", ["mask-gains"])
