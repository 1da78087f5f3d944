"""Chapter 6, what the referees asked: mask placement × contrast, drift, QK normalisation, seeds.

The runs are GOTU runs under overrides, so those Chapter 3 made are shared through the run store; they are the
cells of three grids (`companion.experiments.referee`, keys in `load`). Tables, claim measures, prose numbers and
figure data are read from `placement_frame`, `qk_frame` or the records; nothing here trains. `load` and `decide`
have the shape every chapter module shares (`companion.book.chapter`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from companion import drift
from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.chapters import step_cap
from companion.book.chapters.frames import open_mass, readout, records_frame
from companion.book.chapters.interpolator import mdi
from companion.book.claims import crossed_lines, in_words
from companion.book.chapters.stats import difference_table, minus, paired, sign_flip_p, summarize
from companion.book.labels import label, task_title
from companion.book.missing import gather
from companion.book.parameters import check_parameters
from companion.book.prose import mean_sd, num, pct, signed
from companion.config import TaskConfig
from companion.experiments import get_grid
from companion.experiments.chapters import MOVABLE_TEST_CELLS, SEED_TEST_CELLS, TEN as TEST_SEEDS, chapter_requests
from companion.experiments.referee import CONTRASTS, PLACEMENTS, TASKS, WIDENED
from companion.sweep import ensure_grid, ensure_many
from companion.tasks import make_task

__all__ = ["DRIFT_TITLES", "SEED_TEST_CELLS", "MOVABLE_TEST_CELLS", "TEST_SEEDS", "load", "decide", "placement_frame", "qk_frame", "select", "by_seed", "placements_table", "accuracy_table", "accuracy_runs",
           "baseline_accuracy", "drift_table", "placement_drift", "qk_table", "qk_drift_table", "qk_drift_curves",
           "paired_gain_table", "analysis", "CLAIMS", "prose_numbers", "FIT", "GAIN", "mdi", "mask_matters",
           "separating_drift", "misspecified_drift", "r03_summary", "seed_test",
           "qk_retention", "matched_drift", "MATCH", "SEEDS", "PLACEMENT_NAMES", "ACCURACY_AT", "DRIFT_AT",
           "QK_COLUMNS", "QK_DRIFTS", "MINUS_NO_MASK", "step_cap_measures",
           "movable_table", "step_cap_glue", "free_rows", "free_drift"]

SEEDS = (0, 1, 2, 3, 4)  # the chapter's seeds: what `load` reads when the notebook's `seeds` is None
# R-05 reads its two cells per task at TEST_SEEDS (0-9, the referee's ten) where the chapter has them (`load`)
FIT = 0.99  # a run fits the seen set at this mean seen accuracy
MATCH = 0.05  # a query–key run starts matched to the mask when its CLS open share is within this of the mask's
GAIN = 0.02  # the correct ±10 mask matters on a task when it is this far above no mask in cube accuracy
PLACEMENT_KEY = ("task", "placement", "contrast")
QK_KEY = ("task", "method", "qk_norm")
# Figure titles (matplotlib's mathtext draws the Frobenius norm); tables name it in words.
DRIFT_TITLES = {"mask": r"mask drift $\|\Delta \log\sigma(M)\|_F$", "attention": "attention-pattern drift",
                "qk": "query–key drift ‖ΔA‖/‖A₀‖"}
# The paired comparisons against the model without a mask: (placement, contrast).
PAIRED_CELLS = (("correct", 10.0), ("correct", 1.0), ("misspecified", 10.0), ("falsifier", 10.0), ("widened", 10.0),
                ("all-zero", 0.0))
# The Majority gains the verdict cites: glue suffix → (placement, contrast).
GAINS = {"fals10": ("falsifier", 10.0), "fals1": ("falsifier", 1.0), "mis10": ("misspecified", 10.0), "wid10": ("widened", 10.0),
         "cor1": ("correct", 1.0), "cor2": ("correct", 2.0), "cor10": ("correct", 10.0)}


def _reads_movable(profile: str) -> bool:
    """Whether the chapter reads the `mask-moves` grid at `profile` (it does at `ci`)."""
    return any(any(o.startswith("train.prior_lr=") for o in r.overrides) for r, _ in chapter_requests("06", profile))


def _reads_seed_test(profile: str) -> bool:
    """Whether the chapter reads R-05's ten seeds at `profile` (it does at `ci`)."""
    return any(tuple(seeds) == TEST_SEEDS for _, seeds in chapter_requests("06", profile))


def load(profile: str, seeds: Sequence[int] | None = None, *, jobs: int | None = None, store=None,
         train: bool = True) -> Runs:
    """Four blocks of {key: [Record per seed]}: "referee" by (task, placement, contrast; "all-zero" and "no mask"
    at 0), "qk-norm" by (task, method, qk_norm), "mask-moves" by (task, placement, "own lr" | "model lr"; {} except
    at `ci`), and at `TEST_SEEDS` ({} except at `ci`) "seeds", the cells of "referee" R-05 and M-09 read
    (`SEED_TEST_CELLS`), and "seeds-own", M-09's cells of "mask-moves" (`MOVABLE_TEST_CELLS`). Missing runs are
    counted over all of them (`gather`)."""
    seeds = list(SEEDS if seeds is None else seeds)
    check_parameters(profile, seeds, jobs)

    def grid(name: str):
        return lambda: ensure_grid(name, profile, seeds, store=store, jobs=jobs, train=train)

    def tested():  # R-05 and M-09 at the referee's ten seeds (`ci` only): one block per grid
        if not _reads_seed_test(profile):
            return {}, {}
        keys = (*SEED_TEST_CELLS, *MOVABLE_TEST_CELLS)
        cells = get_grid("referee").cells(profile) | get_grid("mask-moves").cells(profile)
        found = dict(zip(keys, ensure_many([cells[k] for k in keys], profile, TEST_SEEDS, store=store, jobs=jobs,
                                           train=train)))
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

@lru_cache(maxsize=None)
def free_rows(pattern) -> np.ndarray:
    """The queries a ±10 mask of the bool `pattern` leaves free to move: the rows with two or more open
    keys. A row with one open key puts all but about 10^−4 of its attention on it whatever the scores,
    so its drift is near 0 by construction (13 of the 16 rows of 2Parity's mask, 12 of Majority's)."""
    return np.asarray(pattern, dtype=bool).sum(-1) >= 2


def free_drift(record, rows: np.ndarray) -> float:
    """‖(A_final − A_init)[rows]‖_F of the record's mean attention maps (probe batch and heads averaged,
    `drift["maps"]`), mean over layers; NaN when the record keeps no maps."""
    maps = record.drift.get("maps") or {}
    if not maps.get("init"):
        return math.nan
    return float(np.mean([np.linalg.norm((np.asarray(f) - np.asarray(i))[rows])
                          for f, i in zip(maps["final"], maps["init"])]))


@lru_cache(maxsize=None)
def _pattern(task: TaskConfig, variant: str):
    """The (CLS-including) bool mask pattern `variant` of a Boolean task."""
    return make_task(task).mask_pattern(variant, cls=True)


def _frame(cells: Mapping[tuple, Sequence], key: Sequence[str]) -> pd.DataFrame:
    """`records_frame` of every cell, the cell key as columns, and the final mask and attention drifts."""
    frames = []
    for cell, records in cells.items():
        f = records_frame(records)
        for name, value in zip(key, cell):
            f[name] = value
        f["mask_drift"] = [drift.final(r.drift, "mask") for r in records]
        f["attention_drift"] = [drift.final(r.drift, "attention") for r in records]
        free = [free_rows(_pattern(r.config.task, "support")) for r in records]
        f["free_drift"] = [free_drift(r, rows) for r, rows in zip(records, free)]
        f["free_rows"] = [int(rows.sum()) for rows in free]
        f["n_rows"] = [len(rows) for rows in free]
        frames.append(f)
    frame = pd.concat(frames, ignore_index=True)
    return frame[[*key, *(c for c in frame.columns if c not in key)]]


def placement_frame(runs: Mapping[tuple[str, str, float], Sequence]) -> pd.DataFrame:
    """One row per run of the `referee` grid: task, placement, contrast, the final metrics, `mask_drift`,
    `attention_drift` and `mask_norm` (‖log σ(M_0)‖_F of one layer's initial mask; NaN at contrast 0)."""
    frame = _frame(runs, PLACEMENT_KEY)
    frame["mask_norm"] = [
        drift.mask_scale(_pattern(r.config.task, r.config.model.prior.variant), c) if c > 0 else math.nan
        for (_, _, c), records in runs.items() for r in records]
    return frame


def qk_frame(qk_runs: Mapping[tuple[str, str, bool], Sequence]) -> pd.DataFrame:
    """One row per run of the `qk-norm` grid: task, method, qk_norm, the final metrics and drifts (`mask_drift`,
    `attention_drift`, `qk_drift`), the CLS attention share on the task's support keys at the start and end
    (`open_start`, `open_end`, mean over layers) and under uniform attention (`open_chance`)."""
    frame = _frame(qk_runs, QK_KEY)
    records = [r for recs in qk_runs.values() for r in recs]
    frame["qk_drift"] = [drift.final(r.drift, "qk") for r in records]
    for column, maps in (("open_start", "init"), ("open_end", "final")):
        frame[column] = [np.mean([open_mass(m, _pattern(r.config.task, "support"), 0) for m in r.drift["maps"][maps]])
                         for r in records]
    frame["open_chance"] = [float(_pattern(r.config.task, "support")[0].float().mean()) for r in records]
    return frame


def select(frame: pd.DataFrame, task: str, placement: str, contrast: float) -> pd.DataFrame:
    """The runs of one task × placement × contrast (contrast 0 for "no mask" and "all-zero")."""
    return frame[(frame.task == task) & (frame.placement == placement) & (frame.contrast == contrast)]


def by_seed(frame: pd.DataFrame, task: str, placement: str, contrast: float, column: str = "cube.acc") -> dict:
    """{seed: value} of one cell, for paired comparisons."""
    sub = select(frame, task, placement, contrast)
    return dict(zip(sub["seed"], sub[column]))


def _accuracy(frame: pd.DataFrame, task: str, placement: str, contrast: float) -> float:
    """Mean full-cube accuracy of one cell, in [0, 1]."""
    return float(select(frame, task, placement, contrast)["cube.acc"].mean())


def r03_summary(frame: pd.DataFrame):
    """R-03's full-cube accuracy of the correct ±1 mask on Majority over seeds (`stats.Summary`, fractions)."""
    return summarize(select(frame, "maj3", "correct", 1.0)["cube.acc"].to_numpy())


def _mask_drift(frame: pd.DataFrame, task: str, placement: str, contrast: float) -> float:
    """Mean final mask drift of one cell."""
    return summarize(select(frame, task, placement, contrast)["mask_drift"].to_numpy()).mean


def _summary_by(frame: pd.DataFrame, by: Sequence[str], value: str) -> pd.DataFrame:
    """Mean, 95 % Student-t interval and n of `value` per group (first-appearance order)."""
    rows = []
    for key, g in frame.groupby(list(by), sort=False):
        s = summarize(g[value].to_numpy())
        rows.append({**dict(zip(by, key)), "mean": s.mean, "lo": s.lo, "hi": s.hi, "n": s.n})
    return pd.DataFrame(rows)


def _titled(table: pd.DataFrame) -> pd.DataFrame:
    """Task names of the first index level (and method names of a `method` level) as the reader's."""
    table = table.rename(index=task_title, level=0)
    if "method" in table.index.names:
        table = table.rename(index=label, level="method")
    return table


# ---------------------------------------------------------------- tables

# How the tables name a placement, a mask variant and a contrast.
PLACEMENT_NAMES = {"correct": "Correct", "misspecified": "Misspecified", "falsifier": "Falsifier",
                   "widened": "Widened falsifier", "all-zero": "All-zero mask", "no mask": "No mask (default)"}
ACCURACY_AT = "Full-cube accuracy (%) at contrast ±c"
DRIFT_AT = "Final mask drift ‖Δ log σ(M)‖ (Frobenius norm) at contrast ±c"
QK_COLUMNS = {"acc": "Full-cube accuracy (%)", "open_start": "CLS attention on open keys, start",
              "open_end": "CLS attention on open keys, end", "qk_drift": "Query–key drift ‖ΔA‖/‖A₀‖"}
QK_DRIFTS = {"qk_drift": "Query–key drift ‖ΔA‖/‖A₀‖", "attention_drift": "Attention-pattern drift"}
MINUS_NO_MASK = minus("no mask")


def _variant_words(variant: str) -> str:
    """A mask variant as the reader says it: "support" → "the task's own pattern", "pair:0-2" → "bits 0 and 2"."""
    if variant == "support":
        return "the task's own pattern"
    bits = variant.partition(":")[2].split("-")
    return f"bits {', '.join(bits[:-1])} and {bits[-1]}"


def _contrast(c: float) -> str:
    return f"±{c:g}" if c else "0 (none)"


def _readable(table: pd.DataFrame) -> pd.DataFrame:
    """Index levels of the page: tasks titled, methods labelled, placements named, QK norm on/off."""
    table = _titled(table)
    names = {"task": "Task", "placement": "Placement", "method": "Method", "qk_norm": "QK norm"}
    if "placement" in table.index.names:
        table = table.rename(index=PLACEMENT_NAMES, level="placement")
    if "qk_norm" in table.index.names:
        table.index = table.index.set_levels(
            [{True: "on", False: "off"}.get(v, v) for v in table.index.levels[table.index.names.index("qk_norm")]],
            level="qk_norm")
    table.index.names = [names.get(n, n) for n in table.index.names]
    return table


def placements_table() -> pd.DataFrame:
    """Which keys each placement's mask opens (rows) on each task (columns), in words."""
    table = pd.DataFrame({t: {**PLACEMENTS[t], "widened": WIDENED[t]} for t in PLACEMENTS})
    table = table.map(_variant_words).rename(columns=task_title, index=PLACEMENT_NAMES)
    table.index.name = "Placement"
    return table


def accuracy_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Full-cube accuracy (%) per task × placement (rows) and contrast (columns "0 (none)", "±1"…):
    mean ± standard deviation over seeds, one decimal; "—" where a placement has no run."""
    cells = {}
    for (task, placement, contrast), g in frame.groupby(list(PLACEMENT_KEY), sort=False):
        cells[(task, placement, contrast)] = mean_sd(100 * g["cube.acc"])
    table = pd.Series(cells).unstack(level=2)
    table = table[sorted(table.columns)].rename(columns=_contrast).fillna("—")
    table.index.names, table.columns.name = ["task", "placement"], ACCURACY_AT
    return _readable(table)


def drift_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean final mask drift (two decimals) per task × placement (rows) and contrast (columns), placed masks only."""
    placed = frame[frame.placement.isin(["correct", "misspecified", "falsifier"])]
    moved = _summary_by(placed, PLACEMENT_KEY, "mask_drift")
    table = moved.pivot(index=["task", "placement"], columns="contrast", values="mean").round(2)
    table = table.rename(columns=_contrast)
    table.columns.name = DRIFT_AT
    return _readable(table)


def qk_table(qk: pd.DataFrame) -> pd.DataFrame:
    """Means over seeds per task × method × QK norm (on/off), columns `QK_COLUMNS`: accuracy in % to one decimal,
    the rest to two."""
    table = qk.assign(acc=100 * qk["cube.acc"]).groupby(list(QK_KEY))[list(QK_COLUMNS)].mean()
    table = table.round({"acc": 1, "open_start": 2, "open_end": 2, "qk_drift": 2}).rename(columns=QK_COLUMNS)
    return _readable(table)


def qk_drift_table(qk: pd.DataFrame) -> pd.DataFrame:
    """Final query–key and attention-pattern drifts per task × method × QK norm: mean ± standard
    deviation over seeds, two decimals; columns `QK_DRIFTS`."""
    rows = {key: {QK_DRIFTS[c]: mean_sd(g[c], 2) for c in QK_DRIFTS}
            for key, g in qk.groupby(list(QK_KEY), sort=True)}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index = pd.MultiIndex.from_tuples(table.index, names=list(QK_KEY))
    return _readable(table)


def paired_gain_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mask minus the model without a mask in full-cube accuracy (points), paired by seed
    (`stats.difference_table`, column `MINUS_NO_MASK`), for the cells of `PAIRED_CELLS` on each task."""
    pct_frame = frame.assign(**{"cube.acc": 100 * frame["cube.acc"]})
    pairs = {(task_title(task), f"{PLACEMENT_NAMES[p]} ±{c:g}" if c else PLACEMENT_NAMES[p]):
             (by_seed(pct_frame, task, p, c), by_seed(pct_frame, task, "no mask", 0.0))
             for task in TASKS for p, c in PAIRED_CELLS}
    return difference_table(pairs, MINUS_NO_MASK, ["Task", "Mask"])


# ---------------------------------------------------------------- figure data

def accuracy_runs(frame: pd.DataFrame, task: str) -> pd.DataFrame:
    """The placed masks' runs of one task for `plots.mean_interval`: placement, contrast, seed, `acc` (cube, %)."""
    rows = frame[(frame.task == task) & (frame.contrast > 0) & frame.placement.isin(list(PLACEMENTS[task]))]
    return rows[["placement", "contrast", "seed"]].assign(acc=100 * rows["cube.acc"].to_numpy())


def baseline_accuracy(frame: pd.DataFrame, task: str) -> dict[str, float]:
    """Mean full-cube accuracy (%) of the model without a mask and of the all-zero mask on one task."""
    return {p: 100 * _accuracy(frame, task, p, 0.0) for p in ("no mask", "all-zero")}


def _drift_rows(records: Sequence, kind: str, **columns) -> list[dict]:
    """One row per (record, step) of its `kind` drift curve, with `columns` added."""
    rows = []
    for r in records:
        steps, values = drift.curve(r.drift, kind)
        rows += [{**columns, "seed": r.seed, "step": s, "drift": v} for s, v in zip(steps.tolist(), values.tolist())]
    return rows


def placement_drift(runs: Mapping[tuple[str, str, float], Sequence], task: str, kind: str,
                    contrasts: Sequence[float] = (10.0, 1.0)) -> pd.DataFrame:
    """Drift curves of the placed masks on one task at `contrasts`, long form: placement, contrast
    (text "±c", in `contrasts` order), seed, step, drift (`kind`: mask or attention)."""
    rows = [row for placement in PLACEMENTS[task] for c in contrasts
            for row in _drift_rows(runs[(task, placement, c)], kind, placement=placement, contrast=f"±{c:g}")]
    frame = pd.DataFrame(rows)
    frame["contrast"] = pd.Categorical(frame["contrast"], [f"±{c:g}" for c in contrasts])
    return frame


def qk_drift_curves(qk_runs: Mapping[tuple[str, str, bool], Sequence], task: str, kind: str) -> pd.DataFrame:
    """Drift curves of the `qk-norm` runs on one task, long form: method, QK (normalisation "none" or
    "QK norm"), seed, step, drift (`kind`: qk or attention)."""
    rows = [row for (t, method, norm), records in qk_runs.items() if t == task
            for row in _drift_rows(records, kind, method=method, QK="QK norm" if norm else "none")]
    frame = pd.DataFrame(rows)
    frame["QK"] = pd.Categorical(frame["QK"], ["none", "QK norm"])
    return frame


# ---------------------------------------------------------------- claim readings

def mask_matters(frame: pd.DataFrame, fit: float = FIT, gain: float = GAIN) -> list[str]:
    """The tasks on which the correct mask matters, chosen by rule: the model without a mask fits the
    seen set and the correct ±10 mask's mean cube accuracy is at least `gain` above it."""
    out = []
    for task in TASKS:
        none = select(frame, task, "no mask", 0.0)
        if none["seen.acc"].mean() >= fit and _accuracy(frame, task, "correct", 10.0) - none["cube.acc"].mean() >= gain:
            out.append(task)
    return out


def separating_drift(logits_init, log_mask_final, wrong, right) -> float:
    """How far a mask moved from the `wrong` pattern towards the `right` one, as a fraction: 0 frozen, 1 all the way.

    `logits_init` is the initial M (equal across heads), `log_mask_final` the trained log σ(M) (a head mean, as the
    `log_mask` readout stores it, or any (…, n, n) stack). Per entry open in one pattern and closed in the other,
    Δ log σ(M) signed towards `right`, over |log σ(c) − log σ(−c)| at the initial contrast c; mean over entries
    (and heads). Unlike ‖Δ log σ(M)‖_F / ‖log σ(M_0)‖_F, the closed entries' mass cannot hide a few nats of movement."""
    m0 = torch.as_tensor(logits_init, dtype=torch.float64)
    lt = torch.as_tensor(log_mask_final, dtype=torch.float64)
    wrong, right = torch.as_tensor(wrong, dtype=torch.bool), torch.as_tensor(right, dtype=torch.bool)
    sep = wrong != right
    c = float(m0.abs().max())
    span = float(F.logsigmoid(torch.tensor(c)) - F.logsigmoid(torch.tensor(-c)))
    step = (lt - F.logsigmoid(m0)) * torch.where(right, 1.0, -1.0)
    return float(step[..., sep].mean()) / span


def misspecified_drift(runs: Mapping[tuple[str, str, float], Sequence], task: str, contrast: float = 10.0) -> float:
    """`separating_drift` of the misspecified ±`contrast` mask on `task`, mean over layers and seeds, from the
    records' `log_mask` readouts."""
    records = runs[(task, "misspecified", contrast)]
    wrong = _pattern(records[0].config.task, records[0].config.model.prior.variant)
    right = _pattern(records[0].config.task, "support")
    init = np.where(np.asarray(wrong), contrast, -contrast)  # M_0, the same for every head
    values = [separating_drift(init, final, wrong, right)
              for rec in records for final in readout(rec, "log_mask").values()]
    if not values:
        raise ValueError(f"the misspecified {task} runs hold no learnable mask in their `log_mask` readout.")
    return float(np.mean(values))


def seed_test(frame: pd.DataFrame, task: str) -> dict:
    """The correct ±10 mask minus no mask in cube accuracy on `task`, paired by seed: the 95 % t
    interval, the exact one-sided sign-flip p (`sign_flip_p`), the seeds and how many gain."""
    a, b = by_seed(frame, task, "correct", 10.0), by_seed(frame, task, "no mask", 0.0)
    seeds = sorted(set(a) & set(b))
    diffs = [a[s] - b[s] for s in seeds]
    g = paired(a, b)
    return {"lo": g.lo, "hi": g.hi, "mean": g.mean_diff, "p": sign_flip_p(diffs), "n": len(seeds),
            "gains": sum(d > 0 for d in diffs)}


def qk_retention(qk: pd.DataFrame, norm: bool, method: str = "structured-svd", fit: float = FIT) -> float:
    """How much of its starting pattern `method` keeps with QK norm `norm`: mean(open_end − open_chance) /
    mean(open_start − open_chance) over the runs of both tasks that fit the seen set. 1 keeps it, 0 washes back to
    uniform, above 1 sharpens it."""
    rows = qk[(qk.method == method) & (qk.qk_norm == norm) & (qk["seen.acc"] >= fit)]
    start = float((rows.open_start - rows.open_chance).mean())
    return float((rows.open_end - rows.open_chance).mean()) / start if len(rows) and start > 0 else float("nan")


def matched_drift(frame: pd.DataFrame, qk: pd.DataFrame, tol: float = MATCH) -> dict:
    """`free_drift` of a query–key prior against a mask prior started from the same pattern (`free_rows`: counting
    the rows the mask pins would make it look still by construction).

    Pairs each Structured (SVD) run without QK norm with the correct ±10 mask run of the same task and seed; a pair
    counts when the SVD run's CLS open share at the start is within `tol` of the mask's, ≈ 1 (a ±10 mask leaves a few
    10^−4 off its open keys: 1.000 in Chapter 3's maps). Drifts are free-row drifts unless marked "_all".
    Returns {"ratio": SVD mean over mask mean (NaN without a pair), "pairs": how many, "svd", "mask": the two means,
    "svd_all", "mask_all": the means over every row (the record's attention drift), "rows": {task: free rows of n}}."""
    mask = frame[(frame.placement == "correct") & (frame.contrast == 10.0)]
    svd = qk[(qk.method == "structured-svd") & ~qk.qk_norm.astype(bool)]
    pairs = svd.merge(mask, on=["task", "seed"], suffixes=("_svd", "_mask"))
    pairs = pairs[pairs.open_start >= 1.0 - tol]
    a, b = pairs["free_drift_svd"].mean(), pairs["free_drift_mask"].mean()
    nan = float("nan")
    rows = {t: (int(g["free_rows_mask"].iloc[0]), int(g["n_rows_mask"].iloc[0])) for t, g in pairs.groupby("task")}
    return {"ratio": float(a / b) if len(pairs) and b > 0 else nan, "pairs": len(pairs),
            "svd": float(a) if len(pairs) else nan, "mask": float(b) if len(pairs) else nan,
            "svd_all": float(pairs["attention_drift_svd"].mean()) if len(pairs) else nan,
            "mask_all": float(pairs["attention_drift_mask"].mean()) if len(pairs) else nan, "rows": rows}


def _qk_start_excess(qk: pd.DataFrame, fit: float = FIT) -> float:
    rows = qk[(qk.method == "structured-svd") & qk.qk_norm & (qk["seen.acc"] >= fit)]
    return float((rows.open_start - rows.open_chance).mean()) if len(rows) else 0.0


# ---------------------------------------------------------------- claims and prose

def _svd_open_end(qk: pd.DataFrame, norm: bool) -> float:
    """Mean final CLS attention on the open keys of Structured (SVD), with or without QK norm, over both tasks."""
    return float(qk[(qk.method == "structured-svd") & (qk.qk_norm == norm)]["open_end"].mean())


def _relative_misspecified_drift(frame: pd.DataFrame) -> float:
    """Mean final drift of the misspecified ±10 mask on 2Parity over the norm of its initial mask."""
    cell = select(frame, "2parity", "misspecified", 10.0)
    return _mask_drift(frame, "2parity", "misspecified", 10.0) / float(cell["mask_norm"].iloc[0])


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
    return round(_mask_drift(f, "maj3", "correct", 1.0) / max(_mask_drift(f, "maj3", "correct", 10.0), 1e-12), 1)


def _r02_detail(a: dict) -> str:
    f = a["frame"]
    return (f"widened falsifier ±10 on Majority {100 * _accuracy(f, 'maj3', 'widened', 10.0):.1f} % "
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
    Measure("R-02", lambda a: round(abs(_accuracy(a["frame"], "maj3", "widened", 10.0) - mdi("maj3")), 4),
            {"falsifier-fits": lambda a: round(float(select(a["frame"], "maj3", "widened", 10.0)["seen.acc"].mean()), 4)},
            _r02_detail),
    Measure("R-03", lambda a: round(_r03(a).lo, 4), detail=_r03_detail),
    Measure("R-04", _r04),
    Measure("R-05", lambda a: round(max((seed_test(a["tested"], t)["p"] for t in mask_matters(a["tested"])), default=1.0), 4),
            {"mask-matters": lambda a: len(mask_matters(a["tested"])),
             "test-can-pass": lambda a: int(2.0 ** -a["tested"]["seed"].nunique() <= 0.05)}, _r05_detail),
    Measure("R-06", lambda a: round(qk_retention(a["qk"], True) - qk_retention(a["qk"], False), 4),
            {"prior-at-start": lambda a: round(_qk_start_excess(a["qk"]), 4)},
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
    out["ch6_acc_maj3_widened_10"] = pct(_accuracy(frame, "maj3", "widened", 10.0))
    out["ch6_acc_2parity_widened_10"] = pct(_accuracy(frame, "2parity", "widened", 10.0))
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
    out = {f"ch6_acc_{t}_{p}_{c:g}": pct(_accuracy(frame, t, p, c)) for t in TASKS for p in PLACEMENTS[t]
           for c in CONTRASTS}
    out.update({f"ch6_acc_{t}_default": pct(_accuracy(frame, t, "no mask", 0.0)) for t in TASKS})
    out["ch6_drift_mis10"] = num(_mask_drift(frame, "2parity", "misspecified", 10.0))
    out["ch6_drift_mis10_rel"] = pct(_relative_misspecified_drift(frame), 2)
    out["ch6_drift_maj_correct10"] = num(_mask_drift(frame, "maj3", "correct", 10.0))
    out["ch6_drift_maj_correct1"] = num(_mask_drift(frame, "maj3", "correct", 1.0))
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
    default = _accuracy(frame, "maj3", "no mask", 0.0)
    out.update({f"ch6_gain_{k}": signed(100 * (_accuracy(frame, "maj3", p, c) - default)) for k, (p, c) in GAINS.items()})
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
