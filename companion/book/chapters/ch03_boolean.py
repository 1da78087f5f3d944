"""Chapter 3 (extrapolating Boolean functions): the GOTU runs read back as tables, claims and figures.

`load` and `decide` follow `companion.book.chapter`: each claim is declared once, as a `Measure` in a family
(`MASKS`, `TABLE`, `LEARNING`, `FIGURE5`, and `symmetry.SYMMETRY`); a `*_numbers` function gives {glue name: text};
`decide` gathers both. Everything here reads stored runs; nothing trains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import pandas as pd
import torch

from companion.boolean_fourier import cube, evaluate
from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.chapters.budget import budget as run_budget
from companion.book.chapters.frames import long_curves, map_panels, open_mass_frame, readout, records_frame
from companion.book.chapters.interpolator import N_BITS, READINGS, references
from companion.book.chapters import decisive, step_cap
from companion.book.claims import in_words
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
from companion.experiments.decisive import SEARCHES
from companion.masks import support_pattern
from companion.sweep import ensure_grid
from companion.tasks import make_task
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
NAMED = ("2parity", "cyclic3", "maj3")  # the tasks whose rows the paper's Table 1 reports
SHOWN = ("default", "structured-svd", "mask")  # the methods of Figure 5
MASK_CLAIMS = {"2parity": "S2-06", "cyclic3": "S2-07", "maj3": "S2-08"}  # learnable mask, Table 1
FIT = 0.99  # a run fits the seen set at this seen accuracy
GAIN = 0.02  # the mask gains on a task when its mean cube accuracy is this far above the default's
STRUCTURED = ("structured-svd", "structured-opt")
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


def patterns() -> dict[str, torch.Tensor]:
    """Each task's mask pattern (Fourier support, CLS row and column included): bool (16, 16)."""
    return {fn: BooleanTask(fn, n_bits=N_BITS).mask_pattern("support", cls=True) for fn in FUNCTIONS}


def walsh_expansion(values: torch.Tensor, coords: tuple[int, ...]) -> dict[tuple[int, ...], float]:
    """The Fourier expansion of the function with `values` on `cube(len(coords))` (rows in `cube` order),
    monomials named by the labels `coords`, |c| ≤ 1e-12 dropped. The fast Walsh–Hadamard transform gets
    c_S = mean_x f(x) Π_{i∈S} x_i for every S in k·2^k additions (the direct sum costs 4^k)."""
    k = len(coords)
    t = values.to(torch.float64).reshape((2,) * k)  # axis i: coordinate i at −1 (index 0) or +1 (1)
    for axis in range(k):
        lo, hi = t.select(axis, 0), t.select(axis, 1)
        t = torch.stack([lo + hi, lo - hi], dim=axis)  # index 1 along `axis`: −Σ x_i f(x)
    t = t / 2 ** k
    out = {}
    for idx in torch.nonzero(t.abs() > 1e-12).tolist():
        subset = tuple(i for i in range(k) if idx[i])
        out[tuple(coords[i] for i in subset)] = float(t[tuple(idx)]) * (-1) ** len(subset)
    return out


def recovered_monomials(function: str, n: int = N_BITS) -> list[tuple[int, ...]]:
    """The target's non-constant monomials, by degree then label, recovered by `walsh_expansion` from its values
    on the sub-cube of the coordinates it uses: independent of the hand-written expansion's keys."""
    f = make_function(function, n)
    coords = tuple(sorted({i for m in f.expansion for i in m}))
    sub = cube(len(coords), dtype=torch.float64)
    full = torch.zeros(len(sub), n, dtype=torch.float64)
    full[:, list(coords)] = sub
    return sorted((m for m in walsh_expansion(evaluate(f.expansion, full), coords) if m), key=lambda m: (len(m), m))


# The open sets of the source's Table 7 as this book reads them, besides the diagonal (token 0 is CLS, token i + 1
# is bit x_i): CLS → the bits it reads, and the bit pairs open both ways. The sources held here do not print the
# table's entries: this is a hand-written reading of App. E's construction rule (the project's research notes).
TABLE7_READING = {
    "2parity": {"cls": (0, 1), "pairs": ((0, 1),)},
    "cyclic3": {"cls": tuple(range(N_BITS)), "pairs": tuple((i, (i + d) % N_BITS) for i in range(N_BITS) for d in (1, 2))},
    "maj3": {"cls": (0, 1, 2), "pairs": ((0, 1), (0, 2), (1, 2))},
    "threesym": {"cls": (0, 1, 2), "pairs": ((0, 1), (0, 2), (1, 2))},
}


def table7_patterns(n: int = N_BITS) -> dict[str, torch.Tensor]:
    """`TABLE7_READING`'s masks, bool (n + 1, n + 1), written out entry by entry independently of the mask builder."""
    out = {}
    for fn, spec in TABLE7_READING.items():
        m = torch.eye(n + 1, dtype=torch.bool)
        m[0, [i + 1 for i in spec["cls"]]] = True
        for i, j in spec["pairs"]:
            m[i + 1, j + 1] = m[j + 1, i + 1] = True
        out[fn] = m
    return out


def masks_agree(masks: dict[str, torch.Tensor]) -> bool:
    """Whether every mask equals both the pattern rebuilt from the monomials recovered from the target's values
    and `table7_patterns` (this book's reading of the source's Table 7): S2-11's measure."""
    rebuilt = {fn: support_pattern(recovered_monomials(fn), N_BITS, cls=True) for fn in masks}
    reading = table7_patterns()
    return all(torch.equal(rebuilt[fn], masks[fn]) and torch.equal(reading[fn], masks[fn]) for fn in masks)


MASKS = (Measure("S2-11", masks_agree),)


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


def load(profile: str, seeds: Sequence[int] | None = None, *, jobs: int | None = None, store=None,
         train: bool = True, symmetry_seeds: Sequence[int] | None = None) -> Runs:
    """Every run the chapter reads (run when missing; `store`, `train` as in `ensure_grid`), as {task: [Record]}
    in two blocks: "gotu" (every task × method × seed) and "symmetry" (the `symmetry` grid at `symmetry_seeds`;
    {} at any profile but `ci`, the only one its Block in `companion.experiments.chapters` names). `seeds` None
    means `SEEDS`, `symmetry_seeds` None `SYMMETRY_SEEDS`."""
    seeds = list(SEEDS if seeds is None else seeds)
    check_parameters(profile, seeds, jobs)
    if symmetry_seeds is not None:
        check_parameters(profile, symmetry_seeds, jobs)
    gotu = ensure_grid("gotu", profile, seeds, store=store, jobs=jobs, train=train)
    symmetry = {}
    if any(r.experiment.startswith("symmetry-") for r, _ in chapter_requests("03", profile)):
        symmetry = ensure_grid("symmetry", profile, SYMMETRY_SEEDS if symmetry_seeds is None else symmetry_seeds,
                               store=store, jobs=jobs, train=train)
    return Runs(profile, seeds, {"gotu": gotu, "symmetry": symmetry})


def frame_of(records: dict[str, Sequence]) -> pd.DataFrame:
    """One row per run of {task: [Record]}: a `task` column, then `records_frame`'s, plus "<split>.acc (%)"."""
    frame = pd.concat([records_frame(recs).assign(task=fn) for fn, recs in records.items() if recs], ignore_index=True)
    frame = frame[["task", *frame.columns.drop("task")]]
    for split in ("cube", "unseen", "seen"):
        frame[f"{split}.acc (%)"] = 100 * frame[f"{split}.acc"]
    return frame


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


def mask_gain_tasks(frame: pd.DataFrame, fit: float = FIT, gain: float = GAIN) -> list[str]:
    """The tasks where the mask gains, chosen by rule before any claim reads them: the default fits S (mean seen
    accuracy ≥ `fit`) and the mask's mean full-cube accuracy is at least `gain` above the default's."""
    means = frame.groupby(["task", "method"])[["cube.acc", "seen.acc"]].mean()
    return [fn for fn in dict.fromkeys(frame["task"])
            if means.loc[(fn, "default"), "seen.acc"] >= fit
            and means.loc[(fn, "mask"), "cube.acc"] - means.loc[(fn, "default"), "cube.acc"] >= gain]


def structured_gain_fitted(frame: pd.DataFrame, tasks: Sequence[str], fit: float = FIT) -> dict:
    """S2-09 on the runs that can answer it: per task of `tasks`, each structured query–key method's runs that
    fit the seen set minus the default of the same seed, in full-cube accuracy. Returns {"gain": the largest mean
    paired gain over (task, method) with a fitted run (NaN if none), "fitted": {(task, method): (fitted, runs)}}."""
    gains, fitted = [], {}
    for fn in tasks:
        sub = frame[frame.task == fn]
        default = dict(zip(sub[sub.method == "default"].seed, sub[sub.method == "default"]["cube.acc"]))
        for m in STRUCTURED:
            runs = sub[sub.method == m]
            ok = runs[(runs["seen.acc"] >= fit) & runs.seed.isin(list(default))]
            fitted[(fn, m)] = (len(ok), len(runs))
            if len(ok):
                gains.append(float(np.mean([a - default[s] for s, a in zip(ok.seed, ok["cube.acc"])])))
    return {"gain": max(gains, default=float("nan")), "fitted": fitted}


@lru_cache(maxsize=None)
def _unseen_scale(task_cfg) -> float:
    """RMS(f* − MDI) on the task's unseen set U: the unit of `function_space`'s distance."""
    task = make_task(task_cfg)
    x, y = task.splits["unseen"]
    mdi = evaluate(task.fn.mdi(task.n_bits), (2.0 * x - 1).to(torch.float32))
    return float((y - mdi).pow(2).mean().sqrt())


def settle(record) -> float:
    """How much a run's error on U still moves at the end: |RMSE_U(T) − RMSE_U(T')| over its last two evaluations
    T' < T (the last fifth of the budget at `ci`), in `function_space`'s unit. By the triangle inequality it is at
    most how far the function on U moved then: a run still on its way somewhere moves by more than it."""
    mse = record.curves["eval"]["unseen"]["mse"]
    return abs(float(np.sqrt(mse[-1])) - float(np.sqrt(mse[-2]))) / _unseen_scale(record.config.task)


def function_space(records: dict[str, Sequence], method: str = "default", fit: float = FIT) -> pd.DataFrame:
    """Every run of `method` against the MDI on U at its end (`mdi_distance` readout,
    `companion.tasks.boolean.mdi_readout`), on the tasks where its runs fit the seen set on average (mean seen
    accuracy ≥ `fit`; elsewhere there is no interpolator to compare with): columns task, seed, seen (accuracy),
    distance, agree, mean_pred / mean_mdi (mean prediction / the MDI's mean value on U) and settle (`settle`)."""
    rows = []
    for fn, recs in records.items():
        runs = [r for r in recs if r.config.method == method]
        if not runs or np.mean([r.metrics["seen"]["acc"] for r in runs]) < fit:
            continue
        for rec in runs:
            rows.append({"task": fn, "seed": rec.seed, "seen": rec.metrics["seen"]["acc"],
                         **readout(rec, "mdi_distance"), "settle": settle(rec)})
    return pd.DataFrame(rows, columns=["task", "seed", "seen", "distance", "agree", "mean_pred", "mean_mdi", "settle"])


def space_numbers(space: pd.DataFrame) -> dict[str, str]:
    """Per task: ch3_space_<task> (the default's mean distance from the MDI on U, 0 = MDI, 1 = target),
    ch3_settle_<task> (mean `settle`, same unit), ch3_agree_<task> (mean share of U where it rounds like the MDI),
    ch3_pred_<task> and ch3_mdi_value_<task> (mean prediction and the MDI's mean value on U)."""
    means = space.groupby("task")[["distance", "agree", "mean_pred", "mean_mdi", "settle"]].mean()
    return ({f"ch3_space_{fn}": num(means.loc[fn, "distance"]) for fn in means.index}
            | {f"ch3_settle_{fn}": num(means.loc[fn, "settle"], 3) for fn in means.index}
            | {f"ch3_agree_{fn}": pct(means.loc[fn, "agree"]) for fn in means.index}
            | {f"ch3_pred_{fn}": num(means.loc[fn, "mean_pred"], 1) for fn in means.index}
            | {f"ch3_mdi_value_{fn}": num(means.loc[fn, "mean_mdi"], 1) for fn in means.index})


def mask_caps(records: Mapping[str, Sequence]) -> dict[str, float]:
    """{method: Adam's step cap of its mask} for the all-zero and the learnable mask (`step_cap.cap_precondition`:
    the sum of the mask's learning rates over the updates, smallest over runs): `mask-can-move` of S2-10, S2-23."""
    return step_cap.method_caps(records, ("zero-mask", "mask"))


def table1_measures(frame: pd.DataFrame, refs: dict[str, dict[str, float]], fit: float = FIT,
                    space: pd.DataFrame | None = None, caps: Mapping[str, float] | None = None) -> dict:
    """The quantities behind the Table 1 and 4 claims; `refs` is one reading's {task: MDI accuracies}. Keys:
    `means` (task × method mean accuracies), `fits` (task → default fits S), `unfit` (tasks where it does not),
    `mdi_gap` (largest |default − MDI| cube accuracy over NAMED tasks where the default fits S), `structured_gain`
    / `zero_gain` (largest mean gain over default of a structured QK init / the all-zero mask, all tasks),
    `svd_fit` (Structured (SVD) runs that fit S, all its runs), `mask_fit` ({NAMED task: (mask runs that fit S,
    all its runs, their mean cube accuracy, over all runs when none fits)}: S2-06–S2-08), `gain_tasks`
    (`mask_gain_tasks`), `fitted` (`structured_gain_fitted` on them: S2-09), `caps` (`mask_caps`, or {}); with
    `space` (the default's `function_space`; else NaN) `mdi_distance` and `settle`, the largest mean distance from
    the MDI on U / `settle` over the NAMED tasks where the default fits S (S2-05's measure / convergence check)."""
    means = frame.groupby(["task", "method"])[["cube.acc", "unseen.acc", "seen.acc"]].mean()
    tasks = list(dict.fromkeys(frame["task"]))
    fits = {fn: bool(means.loc[(fn, "default"), "seen.acc"] >= fit) for fn in tasks}
    gaps = [abs(means.loc[(fn, "default"), "cube.acc"] - refs[fn]["cube"]) for fn in NAMED if fn in tasks and fits[fn]]

    def gain(method: str, fn: str) -> float:
        return means.loc[(fn, method), "cube.acc"] - means.loc[(fn, "default"), "cube.acc"]

    svd = frame[frame.method == "structured-svd"]
    mask_fit = {}
    for fn in NAMED:
        runs = frame[(frame.task == fn) & (frame.method == "mask")]
        fitted = runs[runs["seen.acc"] >= fit]
        mask_fit[fn] = (len(fitted), len(runs), float((fitted if len(fitted) else runs)["cube.acc"].mean()))
    gain_tasks = mask_gain_tasks(frame, fit)
    distance = settled = float("nan")
    if space is not None:
        fitted_named = [fn for fn in NAMED if fn in tasks and fits[fn]]
        on_u = space.groupby("task")[["distance", "settle"]].mean()
        named = [fn for fn in fitted_named if fn in on_u.index]
        distance = max((float(on_u.loc[fn, "distance"]) for fn in named), default=float("nan"))
        settled = max((float(on_u.loc[fn, "settle"]) for fn in named), default=float("nan"))
    return {
        "gain_tasks": gain_tasks, "fitted": structured_gain_fitted(frame, gain_tasks, fit), "mdi_distance": distance,
        "settle": settled,
        "means": means, "fits": fits, "mdi_gap": max(gaps, default=float("nan")),
        "unfit": [fn for fn in tasks if not fits[fn]],
        "structured_gain": max(gain(m, fn) for fn in tasks for m in ("structured-svd", "structured-opt")),
        "zero_gain": max(gain("zero-mask", fn) for fn in tasks),
        "svd_fit": (int((svd["seen.acc"] >= fit).sum()), len(svd)), "caps": dict(caps or {}), "mask_fit": mask_fit,
    }


def _fitted_phrase(tm: dict) -> str:
    fitted = ", ".join(f"{label(m)} {k} of {n}" for (_, m), (k, n) in tm["fitted"]["fitted"].items())
    return f"tasks where the mask gains: {', '.join(map(task_title, tm['gain_tasks'])) or 'none'}; runs that fit: {fitted or 'none'}"


def _default_seen(tm: dict) -> float:
    """The highest mean seen accuracy of the default over the named tasks (S2-05's `default-fits-seen`)."""
    means = tm["means"]
    return max((round(float(means.loc[(fn, "default"), "seen.acc"]), 4) for fn in NAMED
                if (fn, "default") in means.index), default=0.0)


def _mask_fit(fn: str) -> Measure:
    """S2-06–S2-08 on task `fn`: the mask's cube accuracy over its runs that fit the seen set; `mask-fits-seen`."""
    def share(tm):
        k, n, _ = tm["mask_fit"][fn]
        return round(k / n, 4) if n else None
    return Measure(MASK_CLAIMS[fn], lambda tm: round(tm["mask_fit"][fn][2], 4), {"mask-fits-seen": share},
                   lambda tm: "{} of {} mask runs fit the seen set".format(*tm["mask_fit"][fn][:2]))


# Tables 1 and 4, over `table1_measures`: S2-05 (the default's distance from the MDI in function space), S2-06–S2-08
# (the mask's cube accuracy on the named tasks, over its runs that fit S), S2-09 (structured gain over default on
# the tasks where the mask gains, fitted runs only), S2-10 (the all-zero mask's gain); 4 decimals.
TABLE = (
    Measure("S2-05", lambda tm: round(tm["mdi_distance"], 4),
            {"default-fits-seen": _default_seen, "default-settled": lambda tm: round(tm.get("settle", float("nan")), 4)},
            lambda tm: f"accuracy gap to the MDI {100 * tm['mdi_gap']:.1f} points; not fitted: {tm['unfit'] or 'none'}"),
    *(_mask_fit(fn) for fn in MASK_CLAIMS),
    Measure("S2-09", lambda tm: round(tm["fitted"]["gain"], 4),
            {"mask-gains": lambda tm: len(tm["gain_tasks"]),
             "structured-fits": lambda tm: sum(k for k, _ in tm["fitted"]["fitted"].values())}, _fitted_phrase),
    Measure("S2-10", lambda tm: round(tm["zero_gain"], 4), {"mask-can-move": lambda tm: tm["caps"].get("zero-mask")}),
)


def table_numbers(tm: dict, results: Sequence) -> dict[str, str]:
    """The Table 1 and Table 4 prose: MDI gap, unfitted tasks, default and mask accuracies per named
    task with the verdict of its claim (from the recorded `results`), structured and all-zero gains."""
    means = tm["means"]
    verdicts = {r.id: r.verdict for r in results}
    out = {"ch3_mdi_gap": num(100 * tm["mdi_gap"], 1),
           "ch3_default_unfit": ", ".join(task_title(fn) for fn in tm["unfit"]) or "none",
           "ch3_threesym_default": pct(means.loc[("threesym", "default"), "cube.acc"])}
    for fn, cid in MASK_CLAIMS.items():
        out[f"ch3_mask_{fn}"] = pct(means.loc[(fn, "mask"), "cube.acc"])
        out[f"ch3_default_{fn}"] = pct(means.loc[(fn, "default"), "cube.acc"])
        out[f"ch3_verdict_{fn}"] = verdicts[cid]
    out["ch3_structured_gain"] = num(100 * tm["structured_gain"], 1)
    out["ch3_structured_gain_fitted"] = num(100 * tm["fitted"]["gain"], 1)
    out["ch3_gain_tasks"] = ", ".join(task_title(fn) for fn in tm["gain_tasks"]) or "none"
    out["ch3_verdict_S2-05"], out["ch3_verdict_S2-09"] = verdicts["S2-05"], verdicts["S2-09"]
    out["ch3_default_seen_cyclic3"] = pct(means.loc[("cyclic3", "default"), "seen.acc"])
    out["ch3_svd_fit"] = "{} of {}".format(*tm["svd_fit"])
    out |= {f"ch3_mask_fit_{fn}": "{} of {}".format(*tm["mask_fit"][fn][:2]) for fn in MASK_CLAIMS}
    out["ch3_zero_gain"] = num(100 * tm["zero_gain"], 1)
    return out


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


def figure5_panels(records: Sequence, seed: int, methods: Sequence[str] = SHOWN) -> list[tuple[str, list]]:
    """Figure 5's panels (`frames.map_panels`), a row per method: first and last layer's map, at start and end."""
    return map_panels(records, seed, methods, (("init", 0), ("final", 0), ("init", -1), ("final", -1)))


def map_summary(records: dict[str, Sequence], masks: dict[str, torch.Tensor], methods: Sequence[str] = SHOWN,
                row: int | None = 0) -> pd.DataFrame:
    """Share of attention on the mask's open keys (of query `row`, 0 = CLS; every query averaged when
    None), one row per task × method × seed × layer: columns init and final."""
    return open_mass_frame(records, masks, methods, key="task", row=row)


def persistence(maps: pd.DataFrame) -> pd.DataFrame:
    """Task rows; (at the start | at the end) × method columns: the share of the CLS token's attention
    on the open keys, averaged over seeds and layers, two decimals."""
    table = maps.groupby(["task", "method"])[["init", "final"]].mean().unstack("method")
    table = table.rename(index=task_title).rename(columns=label, level="method").round(2)
    table = table.rename(columns=PERSISTENCE, level=0)
    table.index.name, table.columns.names = "Task", [None, None]
    return table


PERSISTENCE = {"init": "Open share at the start", "final": "Open share at the end"}


def _open_share(maps: pd.DataFrame, method: str, when: str) -> float:
    return float(maps[maps.method == method][when].mean())


def _keep(maps: pd.DataFrame) -> float:
    """The open share at the end, mask minus Structured (SVD), over tasks, seeds and layers."""
    return _open_share(maps, "mask", "final") - _open_share(maps, "structured-svd", "final")


def _chance(masks: dict[str, torch.Tensor], row: int = 0) -> dict[str, float]:
    """The open share of uniform attention on query `row`: its open keys over all keys, per task."""
    return {fn: float(m[row].float().mean()) for fn, m in masks.items()}


def retention(maps: pd.DataFrame, frame: pd.DataFrame, masks: dict[str, torch.Tensor], tasks: Sequence[str],
              fit: float = FIT) -> dict:
    """How much of its initial pattern each method keeps (S2-12): mean(final − chance) / mean(init − chance)
    over runs and layers, chance being uniform attention's open share; 1 keeps the pattern, 0 washes back to
    uniform. On `tasks` (where the mask gains) less those whose CLS row is all open (uniform attention already
    scores 1.0 there), runs that fit the seen set only. Returns {"mask", "structured-svd": retention (NaN
    without runs), "runs": {method: runs used}, "tasks": the tasks used}."""
    chance = _chance(masks)
    used = [fn for fn in tasks if chance[fn] < 1.0]
    seen = frame.set_index(["task", "method", "seed"])["seen.acc"]
    out: dict = {"runs": {}, "tasks": used}
    for m in ("mask", "structured-svd"):
        rows = maps[(maps.method == m) & maps.task.isin(used)]
        rows = rows[np.array([seen.get((t, m, s), 0.0) >= fit for t, s in zip(rows.task, rows.seed)], dtype=bool)]
        base = rows.task.map(chance)
        start, end = float((rows["init"] - base).mean()), float((rows["final"] - base).mean())
        out[m] = end / start if len(rows) and start > 0 else float("nan")
        out["runs"][m] = len(rows[["task", "seed"]].drop_duplicates())
    return out


# Figure 5, over `retention`: S2-12, the mask's retention minus Structured (SVD)'s, 4 decimals; the tasks left (mask
# gains, CLS row not all open) and the fitted Structured (SVD) runs on them.
FIGURE5 = (Measure("S2-12", lambda ret: round(ret["mask"] - ret["structured-svd"], 4),
                   {"mask-gains": lambda ret: len(ret["tasks"]),
                    "structured-fits": lambda ret: int(ret["runs"]["structured-svd"])}),)


def figure5_numbers(maps: pd.DataFrame, seed: int, ret: dict | None = None, results: Sequence = ()) -> dict:
    """Figure 5 prose: the seed shown, Structured (SVD)'s open share at start and end, the mask's at the end and
    their difference; with `ret` (`retention`) each retention and its tasks and runs; S2-12's verdict."""
    out = {}
    if ret is not None:
        out = {"ch3_ret_mask": num(ret["mask"]), "ch3_ret_svd": num(ret["structured-svd"]),
               "ch3_ret_tasks": ", ".join(map(task_title, ret["tasks"])) or "none",
               "ch3_ret_svd_runs": str(ret["runs"]["structured-svd"])}
    out |= {f"ch3_verdict_{r.id}": r.verdict for r in results if r.id == "S2-12"}
    return out | {"ch3_fig5_seed": seed, "ch3_keep": num(_keep(maps)),
            "ch3_svd_start": num(_open_share(maps, "structured-svd", "init")),
            "ch3_svd_end": num(_open_share(maps, "structured-svd", "final")),
            "ch3_mask_end": num(_open_share(maps, "mask", "final"))}


def fitted_cube(records: Sequence, fit: float = FIT) -> float:
    """S2-06 … S2-08's measure on a list of mask runs: their mean full-cube accuracy over the runs that fit the
    seen set (seen accuracy ≥ `fit`), or over all of them when none does."""
    fitted = [r for r in records if r.metrics["seen"]["acc"] >= fit] or list(records)
    return float(np.mean([r.metrics["cube"]["acc"] for r in fitted]))


def cyclic3_decided(d: Decision, profile: str) -> dict[str, str]:
    """S2-07 decided at the first budget of its search (`companion.book.chapters.decisive`) where at least half
    the mask's runs fit Cyclic3's seen set, at `ci` (the search grows the `ci` model's updates); the glue
    "ch3_S207_search" (where it held) and "ch3_S207_decided" (the measure and verdict), "—" at other profiles
    or without the search's records."""
    found = decisive.decided("S2-07", fitted_cube) if profile == "ci" else None
    if found is None:
        return {"ch3_S207_search": decisive.search_words("S2-07") if profile == "ci" else "—", "ch3_S207_decided": "—"}
    r = d.decided_claims(found["measures"], preconditions=found["preconditions"], details=found["details"])[0]
    share = found["preconditions"]["S2-07"]["mask-fits-seen"]
    return {"ch3_S207_search": f"{decisive.search_words('S2-07')}, where {pct(share, 0)} of the mask's runs fit",
            "ch3_S207_decided": f"{pct(r.measure)}, {in_words(r)}"}


def retention_decided(d: Decision, profile: str, masks: dict[str, torch.Tensor], tasks: Sequence[str]) -> dict[str, str]:
    """S2-12 decided at the first budget of its search (`companion.book.chapters.decisive`) where three of
    Structured (SVD)'s runs fit the seen set of the task the search trains (3-bit Majority), at `ci`, when that task
    is the one `tasks` (the `ci` gain tasks) leave; the glue "ch3_S212_search", the search's outcome as a clause:
    where it held, the retentions there and the verdict, or what was tried ("—" at other profiles)."""
    if profile != "ci":
        return {"ch3_S212_search": "—"}
    fn = SEARCHES["S2-12"].experiment.removeprefix("gotu-")
    if [t for t in tasks if _chance(masks)[t] < 1.0] != [fn]:
        return {"ch3_S212_search": f"is not read: it trains {task_title(fn)}, not the tasks the rule leaves here"}

    def kept(records) -> dict:  # `retention` on the search's task
        by_task = {fn: list(records)}
        return retention(map_summary(by_task, masks), frame_of(by_task), masks, [fn])

    def measure(records) -> float:
        ret = kept(records)
        return ret["mask"] - ret["structured-svd"]

    found = decisive.decided("S2-12", measure)
    if found is None:
        return {"ch3_S212_search": decisive.search_words("S2-12") + ", so S2-12 stays inconclusive"}
    found["preconditions"]["S2-12"]["mask-gains"] = 1  # the task, chosen by the rule at `ci`
    _, _, records = decisive.rungs("S2-12")
    rets = kept(records)
    fit = [r for r in records if r.metrics["seen"]["acc"] >= FIT]
    loo = [measure([r for r in records if r is not out]) for out in fit]  # each fitted run left out in turn
    detail = f"{found['details']['S2-12']}; leaving out any one fitted run, {num(min(loo))} to {num(max(loo))}"
    r = d.decided_claims(found["measures"], preconditions=found["preconditions"], details={"S2-12": detail})[0]
    fits = found["preconditions"]["S2-12"]["structured-fits"]
    return {"ch3_S212_search": f"finds it at {decisive.search_words('S2-12')}, where {fits} of Structured (SVD)'s "
                               f"runs fit; there the mask keeps {num(rets['mask'])} of its pattern and Structured (SVD) "
                               f"{num(rets['structured-svd'])}, a difference of {num(r.measure)}, and S2-12, decided "
                               f"at that budget, is {in_words(r)}. With only {fits} fitting runs the difference is "
                               f"fragile: leaving out any one fitted run moves it from {num(min(loo))} to "
                               f"{num(max(loo))}"}


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
