"""Chapter 3's Tables 1 and 4 (S2-05 … S2-10): what each method's runs reach on the cube, the seen and the unseen
set, which runs fit the seen set, and the claims read from them, with S2-07 decided where the mask fits Cyclic3."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapter import Decision, Measure
from companion.book.chapters import decisive, step_cap
from companion.book.chapters.frames import records_frame
from companion.book.claims import in_words
from companion.book.labels import label, task_title
from companion.book.prose import num, pct

__all__ = ["NAMED", "MASK_CLAIMS", "FIT", "GAIN", "STRUCTURED", "frame_of", "mask_gain_tasks", "structured_gain_fitted",
           "mask_caps", "table1_measures", "TABLE", "table_numbers", "fitted_cube", "cyclic3_decided"]


NAMED = ("2parity", "cyclic3", "maj3")  # the tasks whose rows the paper's Table 1 reports
MASK_CLAIMS = {"2parity": "S2-06", "cyclic3": "S2-07", "maj3": "S2-08"}  # learnable mask, Table 1
FIT = 0.99  # a run fits the seen set at this seen accuracy
GAIN = 0.02  # the mask gains on a task when its mean cube accuracy is this far above the default's
STRUCTURED = ("structured-svd", "structured-opt")


def frame_of(records: dict[str, Sequence]) -> pd.DataFrame:
    """One row per run of {task: [Record]}: a `task` column, then `records_frame`'s, plus "<split>.acc (%)"."""
    frame = pd.concat([records_frame(recs).assign(task=fn) for fn, recs in records.items() if recs], ignore_index=True)
    frame = frame[["task", *frame.columns.drop("task")]]
    for split in ("cube", "unseen", "seen"):
        frame[f"{split}.acc (%)"] = 100 * frame[f"{split}.acc"]
    return frame


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
