"""Chapter 6, what the referees asked: mask placement × contrast, drift, QK normalisation, seeds.

The runs are GOTU runs under overrides, so those Chapter 3 made are shared through the run store; they are the
cells of three grids (`companion.experiments.referee`, keys in `load`). The analyses are modules of their own:
`referee_frames` (the runs as frames), `referee_tables` (tables and figure data), `referee_readings` (what the claims
read) and `step_cap`; this module declares R-02 … R-07 (`CLAIMS`), gives the prose its numbers and holds `load` and
`decide` (the shape every chapter module shares, `companion.book.chapter`), re-exporting what the notebook reads.
Nothing here trains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.chapters import step_cap
from companion.book.chapters.interpolator import mdi
from companion.book.chapters.referee_frames import (FIT, GAIN, MATCH, by_seed, free_drift, free_rows,
                                                    mean_accuracy, mean_mask_drift, placement_frame, qk_frame,
                                                    r03_summary, select)
from companion.book.chapters.referee_readings import (mask_matters, matched_drift, misspecified_drift, qk_retention,
                                                      qk_start_excess, seed_test, separating_drift)
from companion.book.chapters.referee_tables import (ACCURACY_AT, DRIFT_AT, DRIFT_TITLES, MINUS_NO_MASK,
                                                    PLACEMENT_NAMES, QK_COLUMNS, QK_DRIFTS, accuracy_runs,
                                                    accuracy_table, baseline_accuracy, drift_table, paired_gain_table,
                                                    placement_drift, placements_table, qk_drift_curves, qk_drift_table,
                                                    qk_table)
from companion.book.claims import crossed_lines, in_words
from companion.book.chapters.stats import paired
from companion.book.labels import task_title
from companion.book.missing import gather
from companion.book.parameters import check_parameters
from companion.book.prose import num, pct, signed
from companion.experiments import get_grid
from companion.experiments.chapters import MOVABLE_TEST_CELLS, SEED_TEST_CELLS, TEN as TEST_SEEDS, chapter_requests
from companion.experiments.referee import CONTRASTS, PLACEMENTS, TASKS
from companion.reading import read_grid, read_many

__all__ = ["DRIFT_TITLES", "SEED_TEST_CELLS", "MOVABLE_TEST_CELLS", "TEST_SEEDS", "load", "decide", "placement_frame", "qk_frame", "select", "by_seed", "placements_table", "accuracy_table", "accuracy_runs",
           "baseline_accuracy", "drift_table", "placement_drift", "qk_table", "qk_drift_table", "qk_drift_curves",
           "paired_gain_table", "analysis", "CLAIMS", "prose_numbers", "FIT", "GAIN", "mdi", "mask_matters",
           "separating_drift", "misspecified_drift", "r03_summary", "seed_test",
           "qk_retention", "matched_drift", "MATCH", "SEEDS", "PLACEMENT_NAMES", "ACCURACY_AT", "DRIFT_AT",
           "QK_COLUMNS", "QK_DRIFTS", "MINUS_NO_MASK", "step_cap_measures",
           "movable_table", "step_cap_glue", "free_rows", "free_drift"]

SEEDS = (0, 1, 2, 3, 4)  # the chapter's seeds: what `load` reads when the notebook's `seeds` is None
# The Majority gains the verdict cites: glue suffix → (placement, contrast).
GAINS = {"fals10": ("falsifier", 10.0), "fals1": ("falsifier", 1.0), "mis10": ("misspecified", 10.0), "wid10": ("widened", 10.0),
         "cor1": ("correct", 1.0), "cor2": ("correct", 2.0), "cor10": ("correct", 10.0)}


def _reads_movable(profile: str) -> bool:
    """Whether the chapter reads the `mask-moves` grid at `profile` (it does at `ci`)."""
    return any(any(o.startswith("train.prior_lr=") for o in r.overrides) for r, _ in chapter_requests("06", profile))


def _reads_seed_test(profile: str) -> bool:
    """Whether the chapter reads R-05's ten seeds at `profile` (it does at `ci`)."""
    return any(tuple(seeds) == TEST_SEEDS for _, seeds in chapter_requests("06", profile))


def load(profile: str, seeds: Sequence[int] | None = None, *, store=None) -> Runs:
    """Four blocks of {key: [Record per seed]}: "referee" by (task, placement, contrast; "all-zero" and "no mask"
    at 0), "qk-norm" by (task, method, qk_norm), "mask-moves" by (task, placement, "own lr" | "model lr"; {} except
    at `ci`), and at `TEST_SEEDS` ({} except at `ci`) "seeds", the cells of "referee" R-05 and M-09 read
    (`SEED_TEST_CELLS`), and "seeds-own", M-09's cells of "mask-moves" (`MOVABLE_TEST_CELLS`). Missing runs are
    counted over all of them (`gather`)."""
    seeds = list(SEEDS if seeds is None else seeds)
    check_parameters(profile, seeds)

    def grid(name: str):
        return lambda: read_grid(name, profile, seeds, store=store)

    def tested():  # R-05 and M-09 at the referee's ten seeds (`ci` only): one block per grid
        if not _reads_seed_test(profile):
            return {}, {}
        keys = (*SEED_TEST_CELLS, *MOVABLE_TEST_CELLS)
        cells = get_grid("referee").cells(profile) | get_grid("mask-moves").cells(profile)
        found = dict(zip(keys, read_many([cells[k] for k in keys], profile, TEST_SEEDS, store=store)))
        return {k: found[k] for k in SEED_TEST_CELLS}, {k: found[k] for k in MOVABLE_TEST_CELLS}

    referee, qk, movable, (ten, ten_own) = gather(grid("referee"), grid("qk-norm"),
                                                  grid("mask-moves") if _reads_movable(profile) else dict, tested)
    return Runs(profile, seeds, {"referee": referee, "qk-norm": qk, "mask-moves": movable, "seeds": ten,
                                 "seeds-own": ten_own})


def step_cap_measures(runs: Mapping, movable: Mapping, ten: Mapping | None = None, ten_own: Mapping | None = None) -> dict:
    """`step_cap.measures`: the step ratio of every learnable-mask run of both grids, the misspecified mask's accuracy
    and separating drift at the model's learning rate (`runs`) and at its own (`movable`), and the model's cap; M-09's
    gain of the misspecified mask at its own rate over the model's, paired by seed, on the ten-seed blocks `ten`
    and `ten_own` where given (`load`), else on `runs` and `movable`."""
    model_lr = ten if ten else runs
    own_lr = ten_own if ten_own else movable
    recover = {t: paired({r.seed: r.metrics["cube"]["acc"] for r in own_lr[(t, "misspecified", "own lr")]},
                         {r.seed: r.metrics["cube"]["acc"] for r in model_lr[(t, "misspecified", 10.0)]}) for t in TASKS}
    seen, ratios = set(), []
    for r in step_cap.learnable([r for rs in (*runs.values(), *movable.values()) for r in rs]):
        if r.run_id not in seen:
            seen.add(r.run_id)
            ratios.append(step_cap.step_ratio(r))
    own = {(t, "misspecified", 10.0): movable[(t, "misspecified", "own lr")] for t in TASKS}
    return step_cap.measures(
        step_cap.movable_frame(movable), ratios, recover,
        {t: misspecified_drift(own, t) for t in TASKS}, {t: misspecified_drift(runs, t) for t in TASKS},
        runs[("2parity", "correct", 10.0)][0],
        {t: (sum(r.metrics["seen"]["acc"] >= FIT for r in runs[(t, "misspecified", 10.0)]),
             len(runs[(t, "misspecified", 10.0)])) for t in TASKS})


def movable_table(movable: Mapping) -> pd.DataFrame:
    """`step_cap.movable_table` of the `mask-moves` runs; one line saying so at a profile without them."""
    if not movable:
        return pd.DataFrame({"": ["The masks with a learning rate of their own are run at the ci profile only."]})
    return step_cap.movable_table(step_cap.movable_frame(movable))


def step_cap_glue(cap: dict | None) -> dict[str, str]:
    """The step-cap section's glued numbers (`step_cap.step_cap_numbers`, the sources' caps); with `cap` None (no
    `mask-moves` runs) the same names, and the verdicts of R-01 and M-07 … M-09 that `prose_numbers` lacks, read "—"."""
    out = step_cap.paper_cap_numbers(step_cap.paper_caps())
    if cap is not None:
        return out | step_cap.step_cap_numbers(cap)
    template = step_cap.step_cap_numbers(step_cap.placeholder_measures())
    return out | {k: "—" for k in template} | {f"ch6_{c}": "—" for c in ("M07", "M08", "M09", "R01")}


DECIDED_HERE = ("S2-10", "S2-23")  # Chapter 3's claims this chapter decides where the mask can move


def decided_numbers(decided: Sequence) -> dict[str, str]:
    """"ch6_S210_decided" …: each decided claim's measure in points and its verdict in words; "—" for a claim
    not decided here (a profile without the `mask-moves` runs)."""
    found = {r.id: f"{signed(100 * r.measure)} points, {in_words(r)}" for r in decided}
    return {f"ch6_{cid.replace('-', '')}_decided": found.get(cid, "—") for cid in DECIDED_HERE}


# ---------------------------------------------------------------- per-run readings


# ---------------------------------------------------------------- tables


# ---------------------------------------------------------------- figure data


# ---------------------------------------------------------------- claim readings


# ---------------------------------------------------------------- claims and prose

def _svd_open_end(qk: pd.DataFrame, norm: bool) -> float:
    """Mean final CLS attention on the open keys of Structured (SVD), with or without QK norm, over both tasks."""
    return float(qk[(qk.method == "structured-svd") & (qk.qk_norm == norm)]["open_end"].mean())


def _relative_misspecified_drift(frame: pd.DataFrame) -> float:
    """Mean final drift of the misspecified ±10 mask on 2Parity over the norm of its initial mask."""
    cell = select(frame, "2parity", "misspecified", 10.0)
    return mean_mask_drift(frame, "2parity", "misspecified", 10.0) / float(cell["mask_norm"].iloc[0])


def analysis(frame: pd.DataFrame, qk: pd.DataFrame, tested: pd.DataFrame | None = None) -> dict:
    """What R-02 … R-07 read: the placement `frame`, the `qk` frame and `tested`, R-05's ten-seed frame (`frame`
    where None)."""
    return {"frame": frame, "qk": qk, "tested": frame if tested is None else tested}


def _r03(a: dict):
    return r03_summary(a["frame"])


def _r03_detail(a: dict) -> str:
    r03 = _r03(a)
    return (f"mean {pct(r03.mean)} over {r03.n} seeds, 95 % interval [{pct(r03.lo)}, {pct(r03.hi)}]"
            + crossed_lines("R-03", r03.lo, r03.hi, lambda t: pct(t, 0)))


def _r04(a: dict) -> float:
    f = a["frame"]
    return round(mean_mask_drift(f, "maj3", "correct", 1.0) / max(mean_mask_drift(f, "maj3", "correct", 10.0), 1e-12), 1)


def _r02_detail(a: dict) -> str:
    f = a["frame"]
    return (f"widened falsifier ±10 on Majority {100 * mean_accuracy(f, 'maj3', 'widened', 10.0):.1f} % "
            f"(MDI {100 * mdi('maj3'):.1f} %); the shape-only falsifier fits "
            f"{100 * float(select(f, 'maj3', 'falsifier', 10.0)['seen.acc'].mean()):.1f} % of the seen set")


def _r05_detail(a: dict) -> str:
    t = a["tested"]
    return "; ".join(f"{task_title(task)}: {s['gains']} of {s['n']} seeds gain, p = {s['p']:.3f}, "
                     f"95% interval [{100 * s['lo']:.1f}, {100 * s['hi']:.1f}] points"
                     for task in mask_matters(t) for s in [seed_test(t, task)]) or "no task where the mask matters"


# R-02 … R-07 over `analysis` (thresholds in book/claims.yml; R-01 is decided in `step_cap`). R-02: |mean cube accuracy
# of the widened falsifier ±10 on Majority − the MDI's| (4 digits). R-03: the lower end of the 95 % interval of the
# correct ±1 mask's cube accuracy on Majority over seeds (`r03_summary`, 4 digits). R-04: mean final mask drift of
# the correct Majority mask at ±1 over ±10 (1 digit). R-05: the largest exact one-sided sign-flip p of correct ±10 −
# no mask over the tasks where the mask matters (4 digits; 1.0 without one), on the ten-seed frame. R-06:
# `qk_retention` of Structured (SVD) with QK norm minus without (4 digits). R-07: `matched_drift`'s ratio (2 digits).
CLAIMS = (
    Measure("R-02", lambda a: round(abs(mean_accuracy(a["frame"], "maj3", "widened", 10.0) - mdi("maj3")), 4),
            {"falsifier-fits": lambda a: round(float(select(a["frame"], "maj3", "widened", 10.0)["seen.acc"].mean()), 4)},
            _r02_detail),
    Measure("R-03", lambda a: round(_r03(a).lo, 4), detail=_r03_detail),
    Measure("R-04", _r04),
    Measure("R-05", lambda a: round(max((seed_test(a["tested"], t)["p"] for t in mask_matters(a["tested"])), default=1.0), 4),
            {"mask-matters": lambda a: len(mask_matters(a["tested"])),
             "test-can-pass": lambda a: int(2.0 ** -a["tested"]["seed"].nunique() <= 0.05)}, _r05_detail),
    Measure("R-06", lambda a: round(qk_retention(a["qk"], True) - qk_retention(a["qk"], False), 4),
            {"prior-at-start": lambda a: round(qk_start_excess(a["qk"]), 4)},
            lambda a: f"retention with QK norm {num(qk_retention(a['qk'], True))}, without (control) "
                      f"{num(qk_retention(a['qk'], False))}"),
    Measure("R-07", lambda a: round(matched_drift(a["frame"], a["qk"])["ratio"], 2),
            {"matched-pairs": lambda a: matched_drift(a["frame"], a["qk"])["pairs"]},
            lambda a: "free rows: Structured (SVD) {svd:.2f} vs mask {mask:.2f} over {pairs} pairs matched at the start; "
                      "every row: {svd_all:.2f} vs {mask_all:.2f}".format(**matched_drift(a["frame"], a["qk"]))),
)


def prose_numbers(frame: pd.DataFrame, qk: pd.DataFrame, results: Sequence,
                  drifts: Mapping[str, float] | None = None, soft: Mapping[str, float] | None = None,
                  tested: pd.DataFrame | None = None) -> dict[str, str]:
    """Every number the text cites, formatted, by glue name: `results`' verdicts as ch6_R01 …; `drifts` and `soft`
    (`misspecified_drift` per task at ±10 and ±1) as ch6_sep10_<task>, ch6_sep1_<task>; R-05's test on `tested`
    (the ten-seed frame) where given, else on `frame`."""
    tested = frame if tested is None else tested
    out = _prose_numbers(frame, qk, results)
    out |= {f"ch6_sep10_{t}": pct(v, 2) for t, v in (drifts or {}).items()}
    out |= {f"ch6_sep1_{t}": pct(v, 2) for t, v in (soft or {}).items()}
    matters = mask_matters(tested)
    out["ch6_matters"] = ", ".join(task_title(t) for t in matters) or "none"
    tests = [seed_test(tested, t) for t in matters]
    if tests:
        worst = max(tests, key=lambda t: t["p"])
        out |= {"ch6_r05_p": f"{worst['p']:.3f}", "ch6_r05_gains": f"{worst['gains']} of {worst['n']}",
                "ch6_r05_n": str(worst["n"]),
                "ch6_r05_pmin": f"{2.0 ** -worst['n']:.3f}",
                "ch6_r05_interval": f"[{100 * worst['lo']:.1f}, {100 * worst['hi']:.1f}]"}
    r03 = r03_summary(frame)
    out["ch6_r03_interval"] = f"{pct(r03.mean)} [{pct(r03.lo)}, {pct(r03.hi)}] over {r03.n} seeds"
    out["ch6_fals10_seen"] = pct(float(select(frame, "maj3", "falsifier", 10.0)["seen.acc"].mean()))
    out["ch6_wid10_seen"] = pct(float(select(frame, "maj3", "widened", 10.0)["seen.acc"].mean()))
    out["ch6_acc_maj3_widened_10"] = pct(mean_accuracy(frame, "maj3", "widened", 10.0))
    out["ch6_acc_2parity_widened_10"] = pct(mean_accuracy(frame, "2parity", "widened", 10.0))
    out["ch6_wid10_perfect"] = "{} of {}".format(int((select(frame, "maj3", "widened", 10.0)["cube.acc"] >= 0.999).sum()),
                                                len(select(frame, "maj3", "widened", 10.0)))
    out["ch6_ret_norm"] = num(qk_retention(qk, True))
    out["ch6_ret_plain"] = num(qk_retention(qk, False))
    md = matched_drift(frame, qk)
    out |= {"ch6_match_ratio": num(md["ratio"], 1), "ch6_match_pairs": str(md["pairs"]),
            "ch6_match_svd": num(md["svd"]), "ch6_match_mask": num(md["mask"]),
            "ch6_match_svd_all": num(md["svd_all"]), "ch6_match_mask_all": num(md["mask_all"]),
            "ch6_match_ratio_all": num(md["svd_all"] / md["mask_all"], 1) if md["pairs"] else "—",
            "ch6_free_rows": "; ".join(f"{k} of {n} on {task_title(t)}" for t, (k, n) in md["rows"].items()) or "none"}
    return out


def _prose_numbers(frame: pd.DataFrame, qk: pd.DataFrame, results: Sequence) -> dict[str, str]:
    out = {f"ch6_acc_{t}_{p}_{c:g}": pct(mean_accuracy(frame, t, p, c)) for t in TASKS for p in PLACEMENTS[t]
           for c in CONTRASTS}
    out.update({f"ch6_acc_{t}_default": pct(mean_accuracy(frame, t, "no mask", 0.0)) for t in TASKS})
    out["ch6_drift_mis10"] = num(mean_mask_drift(frame, "2parity", "misspecified", 10.0))
    out["ch6_drift_mis10_rel"] = pct(_relative_misspecified_drift(frame), 2)
    out["ch6_drift_maj_correct10"] = num(mean_mask_drift(frame, "maj3", "correct", 10.0))
    out["ch6_drift_maj_correct1"] = num(mean_mask_drift(frame, "maj3", "correct", 1.0))
    out["ch6_svd_norm_end"] = num(_svd_open_end(qk, True))
    out["ch6_svd_plain_end"] = num(_svd_open_end(qk, False))
    means = qk.groupby(["method", "qk_norm"])[["qk_drift", "attention_drift"]].mean()
    out["ch6_svd_qk_drift"] = num(means.loc[("structured-svd", False), "qk_drift"])
    out["ch6_default_qk_drift"] = num(means.loc[("default", False), "qk_drift"])
    out["ch6_svd_attn_drift"] = num(means.loc[("structured-svd", False), "attention_drift"])
    out["ch6_default_attn_drift"] = num(means.loc[("default", False), "attention_drift"])
    out["ch6_svd_norm_attn_drift"] = num(means.loc[("structured-svd", True), "attention_drift"])
    out["ch6_n_seeds"] = str(frame["seed"].nunique())
    out.update({f"ch6_{r.id.replace('-', '')}": in_words(r) for r in results})
    default = mean_accuracy(frame, "maj3", "no mask", 0.0)
    out.update({f"ch6_gain_{k}": signed(100 * (mean_accuracy(frame, "maj3", p, c) - default)) for k, (p, c) in GAINS.items()})
    out["ch6_r04"] = f"{_r04(analysis(frame, qk)):g}"
    return out


def decide(runs: Runs) -> Findings:
    """The chapter's claims (R-01 and M-07 … M-09 from `step_cap.CLAIMS` on `cap`, around `CLAIMS`) and cited numbers; parts: `frame` (`placement_frame`), `qk` (`qk_frame`),
    `cap` (`step_cap_measures`, None without the `mask-moves` runs)."""
    referee, movable = runs["referee"], runs["mask-moves"]
    frame, qk = placement_frame(referee), qk_frame(runs["qk-norm"])
    tested = placement_frame(runs.blocks["seeds"]) if runs.blocks.get("seeds") else None  # R-05 at ten seeds
    cap = step_cap_measures(referee, movable, runs.blocks.get("seeds"), runs.blocks.get("seeds-own")) if movable else None
    drifts = {task: misspecified_drift(referee, task) for task in TASKS}  # the final masks, from the records
    soft = {task: misspecified_drift(referee, task, 1.0) for task in TASKS}
    d = Decision()
    own = (step_cap.CLAIMS[:1], step_cap.CLAIMS[1:]) if cap is not None else ((), ())  # R-01 first, M-07 … M-09 last
    results = d.measure(own[0], cap) + d.measure(CLAIMS, analysis(frame, qk, tested)) + d.measure(own[1], cap)
    decided = d.decided_claims(**step_cap.decided_claims(cap)) if cap is not None else []
    d.glue(decided_numbers(decided))  # Chapter 3's S2-10 and S2-23, decided where the mask can move
    d.glue(prose_numbers(frame, qk, results, drifts, soft, tested))
    d.glue(step_cap_glue(cap))
    return d.done(frame=frame, qk=qk, cap=cap)
