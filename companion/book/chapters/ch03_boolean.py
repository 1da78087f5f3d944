"""Chapter 3 (extrapolating Boolean functions): the GOTU runs read back as tables, claims and figures.

`load` and `decide` follow `companion.book.chapter`. The chapter's analyses are modules of their own, each declaring
its claims once (`Measure`): `gotu_masks` (the masks and S2-11), `gotu_table1` (Tables 1 and 4, S2-05 … S2-10),
`function_space` (the default read back against the MDI), `retention` (Figure 5, S2-12) and `symmetry` (M-01 …
M-06); this module holds the budget, the headline table, what learning the mask adds (S2-23) and `decide`, and
re-exports the names the notebook reads. Everything here reads stored runs; nothing trains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.chapters.budget import budget as run_budget
from companion.book.chapters.frames import long_curves
from companion.book.chapters.interpolator import N_BITS, READINGS, references
from companion.book.chapters.function_space import function_space, settle, space_numbers
from companion.book.chapters.gotu_masks import (MASKS, TABLE7_READING, masks_agree, patterns, recovered_monomials,
                                                table7_patterns)
from companion.book.chapters.gotu_table1 import (FIT, GAIN, NAMED, TABLE, cyclic3_decided,
                                                 frame_of, mask_caps, mask_gain_tasks,
                                                 structured_gain_fitted, table1_measures, table_numbers)
from companion.book.chapters.retention import (FIGURE5, PERSISTENCE, SHOWN, figure5_numbers, figure5_panels,
                                               map_summary, persistence, retention, retention_decided)
from companion.book.chapters import step_cap
from companion.book.labels import label, task_title
from companion.book.parameters import check_parameters
from companion.book.prose import mean_sd, num, pct
from companion.book.chapters.stats import difference_table, minus, summary_table
from companion.book.chapters.symmetry import frame_of as symmetry_frame
from companion.book.chapters.symmetry import measured_table as symmetry_table
from companion.book.chapters.symmetry import measures as symmetry_measures
from companion.book.chapters.symmetry import prediction_numbers as symmetry_prediction_numbers
from companion.book.chapters.symmetry import prediction_table as symmetry_prediction_table
from companion.book.chapters.symmetry import predictions as symmetry_predictions
from companion.book.chapters.symmetry import SYMMETRY, measured as symmetry_measured, symmetry_numbers
from companion.experiments import get_experiment
from companion.experiments.chapters import chapter_requests
from companion.experiments.gotu import METHODS
from companion.reading import read_grid
from companion.tasks.boolean import FUNCTIONS, BooleanTask, make_function

__all__ = ["polynomial", "NAMED", "READINGS", "SHOWN", "tasks_table", "references", "reference_table",
           "reference_numbers", "patterns", "recovered_monomials", "budget", "budget_numbers", "load", "table",
           "table1", "table4", "by_task", "ACCURACY", "HEADLINE", "PERSISTENCE", "table1_measures", "table_numbers",
           "headline", "headline_numbers", "accuracy_curves", "figure5_panels", "map_summary", "persistence",
           "figure5_numbers", "FIT", "GAIN", "mask_gain_tasks", "function_space", "settle", "space_numbers",
           "frame_of", "paper_headline", "structured_gain_fitted", "retention", "retention_decided", "learning_gain",
           "learning_numbers", "mask_caps", "TABLE7_READING", "table7_patterns", "SEEDS", "decide", "SYMMETRY_SEEDS",
           "symmetry_predictions", "symmetry_prediction_table", "symmetry_prediction_numbers", "symmetry_table",
           "symmetry_measures", "symmetry_numbers", "budget_table", "masks_agree", "MASKS", "TABLE", "LEARNING",
           "FIGURE5", "SYMMETRY"]

SEEDS = (0, 1, 2, 3, 4)  # the chapter's seeds: what `load` reads when the notebook's `seeds` is None
SYMMETRY_SEEDS = tuple(range(10))  # the symmetry section's seeds, fixed (`companion.experiments.symmetry`)
UNSEEN = {"2parity": "x0 = x1 = −1", "cyclic3": "x0 = x1 = x2 = −1", "maj3": "x0 = x1 = −1",
          "threesym": "x0·x1·x2 = −1"}


def tasks_table() -> pd.DataFrame:
    """Per task: its unseen set, |S|, |U| and the MDI's monomials of degree ≤ 2."""
    rows = []
    for fn in FUNCTIONS:
        task = BooleanTask(fn, n_bits=N_BITS)
        mdi = sorted(make_function(fn, N_BITS).mdi(N_BITS).items(), key=lambda t: len(t[0]))
        rows.append({"Task": task_title(fn), "Unseen set U": UNSEEN[fn], "Seen points |S|": len(task.splits["seen"][0]),
                     "Unseen points |U|": len(task.splits["unseen"][0]),
                     "MDI (monomials of degree ≤ 2 shown)": polynomial([(m, c) for m, c in mdi if len(m) <= 2])})
    return pd.DataFrame(rows).set_index("Task")


def polynomial(terms) -> str:
    """A multilinear polynomial as a reader writes it: `[((), -1), ((0,), -1), ((1, 2), 0.5)]` →
    "−1 − x0 + 0.5·x1·x2" (true minus signs, no coefficient 1, no empty monomial)."""
    out = []
    for monomial, c in terms:
        if c == 0:
            continue
        name = "·".join(f"x{i}" for i in monomial)
        size = f"{abs(c):g}"
        body = name if name and size == "1" else f"{size}·{name}" if name else size
        out.append(("− " if c < 0 else "+ ") + body)
    text = " ".join(out) or "0"
    return "−" + text[2:] if text.startswith("− ") else text[2:] if text.startswith("+ ") else text


def reference_table(refs: dict[str, dict[str, dict[str, float]]]) -> pd.DataFrame:
    """Task rows, one column per split (full cube, unseen) and reading, in percent to one decimal."""
    table = pd.DataFrame({f"{_SPLIT[split]}, {r} (%)": {task_title(fn): refs[r][fn][split] for fn in FUNCTIONS}
                          for r in refs for split in ("cube", "unseen")})
    return (100 * table).round(1)


def reference_numbers(refs: dict[str, dict[str, dict[str, float]]]) -> dict[str, str]:
    """ch3_mdi_<task>: the MDI's full-cube accuracy under the "nearest" reading."""
    return {f"ch3_mdi_{fn}": pct(refs["nearest"][fn]["cube"]) for fn in FUNCTIONS}


def budget(profile: str, seeds: Sequence[int]) -> pd.Series:
    """The budget every method and task shares at `profile`: `chapters.budget`'s rows, training points, seeds."""
    cfg = get_experiment("gotu-2parity").configs(profile)["default"]
    rows = ("Model width", "Layers", "Heads", "Head width", "Feed-forward width", "Optimiser", "Learning rate", "Weight decay", "Batch size", "Updates")
    return pd.Series({**run_budget(cfg, rows), "Training points": dict(cfg.task.params).get("n_train") or "all of S",
                      "Seeds": len(seeds)}, name=profile)


def budget_table(b: pd.Series) -> pd.DataFrame:
    """`budget` as the page shows it: one row per item, one column for the profile."""
    return b.to_frame()


_CITED = {"d_model": "Model width", "layers": "Layers", "steps": "Updates", "batch": "Batch size",
          "training_points": "Training points", "lr": "Learning rate"}


def budget_numbers(b: pd.Series) -> dict:
    """ch3_budget_<item> for the items the prose cites (values as they are, e.g. 250 steps, lr 0.003)."""
    return {f"ch3_budget_{name}": b[row] for name, row in _CITED.items()}


def load(profile: str, seeds: Sequence[int] | None = None, *, store=None,
         symmetry_seeds: Sequence[int] | None = None) -> Runs:
    """Every run the chapter reads (`store` as in `companion.reading.read_grid`), as {task: [Record]}
    in two blocks: "gotu" (every task × method × seed) and "symmetry" (the `symmetry` grid at `symmetry_seeds`;
    {} at any profile but `ci`, the only one its Block in `companion.experiments.chapters` names). `seeds` None
    means `SEEDS`, `symmetry_seeds` None `SYMMETRY_SEEDS`."""
    seeds = list(SEEDS if seeds is None else seeds)
    check_parameters(profile, seeds)
    if symmetry_seeds is not None:
        check_parameters(profile, symmetry_seeds)
    gotu = read_grid("gotu", profile, seeds, store=store)
    symmetry = {}
    if any(r.experiment.startswith("symmetry-") for r, _ in chapter_requests("03", profile)):
        symmetry = read_grid("symmetry", profile, SYMMETRY_SEEDS if symmetry_seeds is None else symmetry_seeds,
                             store=store)
    return Runs(profile, seeds, {"gotu": gotu, "symmetry": symmetry})


def paper_headline(records: Sequence) -> pd.DataFrame | None:
    """The mask's `headline` from the paper-profile records that exist (a GPU window makes default and mask on
    2Parity, Cyclic3 and Majority first), on tasks with both (None if none): shown beside the chapter's own
    before the whole grid is there."""
    by_task: dict[str, list] = {}
    for rec in records:
        by_task.setdefault(rec.config.experiment.removeprefix("gotu-"), []).append(rec)
    both = {fn: recs for fn, recs in by_task.items() if {"default", "mask"} <= {r.config.method for r in recs}}
    if not both:
        return None
    return headline(frame_of(both), methods=("mask",))


def table(frame: pd.DataFrame, metrics: Sequence[str], *, methods: Sequence[str] = METHODS,
          digits: int = 3) -> pd.DataFrame:
    """Task × method rows, "mean ± std [95% interval]" per metric (the shared table format)."""
    sub = frame[frame["method"].isin(methods)].copy()
    sub["method"] = sub["method"].map(label)
    sub["task"] = sub["task"].map(task_title)
    return summary_table(sub, ["task", "method"], metrics, digits=digits)


_SPLIT = {"cube": "Full cube", "unseen": "Unseen", "seen": "Seen"}
# The accuracies the chapter's tables show, as their rows are headed.
ACCURACY = {split: f"{name} accuracy (%)" for split, name in _SPLIT.items()}
MDI_ROW = "MDI (reference)"


def by_task(frame: pd.DataFrame, splits: Sequence[str], methods: Sequence[str] = METHODS,
            refs: dict[str, dict[str, float]] | None = None, digits: int = 1) -> pd.DataFrame:
    """One block of rows per split (headed as in `ACCURACY`), one row per method label and, with `refs` ({task:
    {split: accuracy}}), the MDI's in the cube and unseen blocks; one column per task title, `FUNCTIONS` order.
    Cells: mean ± standard deviation over seeds in %, `digits` decimals; "—" where a method has no run."""
    tasks = [fn for fn in FUNCTIONS if fn in set(frame["task"])]
    rows = {}
    for split in splits:
        for m in methods:
            runs = frame[frame.method == m]
            rows[(ACCURACY[split], label(m))] = {
                task_title(fn): mean_sd(100 * runs[runs.task == fn][f"{split}.acc"], digits) for fn in tasks}
        if refs is not None and split in ("cube", "unseen"):
            rows[(ACCURACY[split], MDI_ROW)] = {task_title(fn): num(100 * refs[fn][split], digits) for fn in tasks}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=["Accuracy", "Method"])
    return out


def table1(frame: pd.DataFrame, refs: dict[str, dict[str, dict[str, float]]]) -> pd.DataFrame:
    """The paper's Table 1, headline block: each method's full-cube accuracy (%) per task, plus the MDI's row
    ("nearest" reading). Its unseen and seen accuracies are drawn run by run (`seed_points`, `fig-ch3-table1`)."""
    return by_task(frame, ("cube",), refs=refs["nearest"]).droplevel("Accuracy")


def seed_points(frame: pd.DataFrame, splits: Sequence[str] = ("unseen", "seen")) -> pd.DataFrame:
    """One row per run and split, for the figure that replaces the paper's long Table 1 grid: task,
    method, seed, split and accuracy (%), in `FUNCTIONS` and `METHODS` order."""
    tasks = [fn for fn in FUNCTIONS if fn in set(frame["task"])]
    parts = [pd.DataFrame({"task": runs["task"], "method": runs["method"], "seed": runs["seed"], "split": split,
                           "accuracy": 100 * runs[f"{split}.acc"].astype(float)})
             for split in splits for fn in tasks for m in METHODS
             if len(runs := frame[(frame.task == fn) & (frame.method == m)])]
    return pd.concat(parts, ignore_index=True)


def table4(frame: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 4: default, all-zero, fixed and learnable mask; full-cube and unseen accuracy (%)."""
    return by_task(frame, ("cube", "unseen"), ("default", "zero-mask", "fixed-mask", "mask"))


HEADLINE = minus("default")


def headline(frame: pd.DataFrame, methods: Sequence[str] = ("structured-svd", "structured-opt", "mask")) -> pd.DataFrame:
    """The mask and the two structured initialisations minus default in full-cube accuracy, paired
    by seed (`stats.difference_table`): rows (task, method) as titled and labelled."""
    pairs = {}
    for fn in FUNCTIONS:
        sub = frame[frame.task == fn]
        cube = {m: dict(zip(g.seed, 100 * g["cube.acc"])) for m, g in sub.groupby("method")}
        pairs |= {(task_title(fn), label(m)): (cube[m], cube["default"]) for m in methods if len(sub)}
    return difference_table(pairs, HEADLINE, ["Task", "Method"])


def headline_numbers(hl: pd.DataFrame) -> dict[str, str]:
    """ch3_hl_<task>: mask minus default, "+diff [lo, hi]" in points, per task."""
    return {f"ch3_hl_{fn}": hl.loc[(task_title(fn), label("mask")), HEADLINE] for fn in FUNCTIONS
            if (task_title(fn), label("mask")) in hl.index}


def learning_gain(frame: pd.DataFrame, gain: float = GAIN) -> dict:
    """What learning the mask adds over the same mask fixed (Table 5's question): per task where the mask's mean
    cube accuracy is ≥ `gain` above the default's (fit or not: the question is learnable against fixed), the
    mean paired learnable − fixed difference in cube accuracy. Returns {"tasks", "by_task": {task: difference},
    "gain": the largest (NaN if none)}."""
    means = frame.groupby(["task", "method"])["cube.acc"].mean()
    tasks = [fn for fn in dict.fromkeys(frame["task"]) if means.loc[(fn, "mask")] - means.loc[(fn, "default")] >= gain]
    by_task = {}
    for fn in tasks:
        sub = frame[frame.task == fn]
        fixed = dict(zip(sub[sub.method == "fixed-mask"].seed, sub[sub.method == "fixed-mask"]["cube.acc"]))
        learn = sub[(sub.method == "mask") & sub.seed.isin(list(fixed))]
        by_task[fn] = float(np.mean([a - fixed[s] for s, a in zip(learn.seed, learn["cube.acc"])]))
    return {"tasks": tasks, "by_task": by_task, "gain": max(by_task.values(), default=float("nan"))}


# What learning the mask adds (over `learning_gain` with the step caps as "caps"): S2-23, the largest mean gain of
# the learnable mask over the fixed one, 4 decimals; how many tasks it gains on; how far Adam lets its entries move.
LEARNING = (Measure("S2-23", lambda lg: round(lg["gain"], 4),
                    {"mask-gains": lambda lg: len(lg["tasks"]), "mask-can-move": lambda lg: lg["caps"].get("mask")}),)


def learning_numbers(lg: dict, results: Sequence = (), caps: Mapping[str, float] | None = None) -> dict[str, str]:
    """ch3_learn_tasks, ch3_learn_by_task ("task +x.x" per task: learnable − fixed, points),
    ch3_verdict_S2-23 and ch3_verdict_S2-10 (from `results`) and, with `caps` (`mask_caps`), ch3_cap."""
    out = {"ch3_learn_tasks": ", ".join(map(task_title, lg["tasks"])) or "none",
           "ch3_learn_by_task": ", ".join(f"{task_title(fn)} {100 * v:+.1f}" for fn, v in lg["by_task"].items()) or "—"}
    out |= step_cap.cap_glue("3", caps) if caps else {}
    return out | {f"ch3_verdict_{r.id}": r.verdict for r in results if r.id in ("S2-23", "S2-10")}


def accuracy_curves(records: Sequence) -> pd.DataFrame:
    """Full-cube accuracy (percent) during training, long form: method, seed, step, "full-cube accuracy (%)"."""
    return long_curves(records, "cube", "acc", scale=100).rename(columns={"value": "full-cube accuracy (%)"})


def decide(runs: Runs) -> Findings:
    """Every claim of the chapter in its verdict table's order (masks S2-11; Tables 1 and 4, S2-05 … S2-10;
    learning the mask, S2-23; Figure 5, S2-12; symmetry, M-01 … M-06) and the numbers its prose cites; parts
    as built below (`frame`: every `gotu` run, `sym_frame`: every `symmetry` run)."""
    records = runs["gotu"]
    d = Decision()
    masks = patterns()
    refs = references()
    found = d.measure(MASKS, masks)
    d.glue(reference_numbers(refs) | {"ch3_verdict_S2-11": found[-1].verdict})
    b = budget(runs.profile, runs.seeds)
    d.glue(budget_numbers(b))
    frame = frame_of(records)
    space = function_space(records)  # the default models, read back, against the MDI on U
    caps = mask_caps(records)  # how far Adam lets the masks move (Chapter 6)
    tm = table1_measures(frame, refs["nearest"], space=space, caps=caps)
    d.measure(TABLE, tm)
    d.glue(table_numbers(tm, d.results) | space_numbers(space))
    d.glue(cyclic3_decided(d, runs.profile))  # S2-07 where the mask fits Cyclic3 (a decisive search)
    hl = headline(frame)
    d.glue(headline_numbers(hl))
    lg = learning_gain(frame)  # Table 5's question: what does learning the mask add over fixing it?
    d.measure(LEARNING, lg | {"caps": caps})
    d.glue(learning_numbers(lg, d.results, caps))
    maps = map_summary(records, masks)
    ret = retention(maps, frame, masks, tm["gain_tasks"])
    d.measure(FIGURE5, ret)
    d.glue(figure5_numbers(maps, runs.seeds[0], ret, d.results))
    d.glue(retention_decided(d, runs.profile, masks, tm["gain_tasks"]))  # S2-12 where Structured (SVD) fits
    preds = symmetry_predictions()  # closed forms: no run is read
    d.glue(symmetry_prediction_numbers(preds))
    sym_frame = symmetry_frame(runs["symmetry"])
    sym = symmetry_measures(sym_frame)
    if symmetry_measured(sym):
        d.measure(SYMMETRY, sym)
    d.glue(symmetry_numbers(sym, d.results))
    return d.done(refs=refs, patterns=masks, budget=b, frame=frame, space=space, caps=caps, tm=tm, headline=hl,
                  lg=lg, maps=maps, ret=ret, preds=preds, sym_frame=sym_frame, sym=sym)


def older_paper(frame: pd.DataFrame | None) -> tuple[pd.DataFrame | None, dict]:
    """The older single-seed paper-profile runs (`companion.book.paper_status.older_runs`) as the page shows
    them (task, method, cube / seen / unseen accuracy in %, unseen MSE, wall time) and the numbers its
    prose cites: ch3_older_<method>_cube and ch3_older_unseen (the range over the 2Parity runs)."""
    if frame is None:
        return None, {}
    table = pd.DataFrame({
        "task": frame["experiment"].str.removeprefix("gotu-").map(task_title), "method": frame["method"].map(label),
        "seed": frame["seed"], **{f"{s} accuracy (%)": (100 * frame[f"{s}.acc"]).round(1) for s in ("cube", "seen", "unseen")},
        "unseen MSE": frame["unseen.mse"].round(2), "wall time (s)": frame["wall time (s)"]})
    parity = frame[frame["experiment"] == "gotu-2parity"]

    def span(values) -> str:
        lo, hi = float(min(values)), float(max(values))
        return pct(lo) if lo == hi else f"{pct(lo)} to {pct(hi)}"

    numbers = {f"ch3_older_{m}_cube": span(g["cube.acc"]) for m, g in parity.groupby("method")}
    numbers["ch3_older_unseen"] = span(parity["unseen.acc"])
    return table, numbers
