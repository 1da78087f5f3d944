"""Chapter 6's tables and figure data: placements, accuracy and drift by placement and contrast, the query-key runs with and
without normalisation, the paired gains over no mask, and the curves its figures draw."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from companion import drift
from companion.book.chapters.referee_frames import (PLACEMENT_KEY, QK_KEY, by_seed, mean_accuracy, summary_by,
                                                    titled)
from companion.book.chapters.stats import difference_table, minus
from companion.book.labels import task_title
from companion.book.prose import mean_sd
from companion.experiments.referee import PLACEMENTS, TASKS, WIDENED

__all__ = ["DRIFT_TITLES", "PAIRED_CELLS", "PLACEMENT_NAMES", "ACCURACY_AT", "DRIFT_AT", "QK_COLUMNS", "QK_DRIFTS",
           "MINUS_NO_MASK", "placements_table", "accuracy_table", "drift_table", "qk_table", "qk_drift_table",
           "paired_gain_table", "accuracy_runs", "baseline_accuracy", "placement_drift", "qk_drift_curves"]


# Figure titles (matplotlib's mathtext draws the Frobenius norm); tables name it in words.
DRIFT_TITLES = {"mask": r"mask drift $\|\Delta \log\sigma(M)\|_F$", "attention": "attention-pattern drift",
                "qk": "query–key drift ‖ΔA‖/‖A₀‖"}


# The paired comparisons against the model without a mask: (placement, contrast).
PAIRED_CELLS = (("correct", 10.0), ("correct", 1.0), ("misspecified", 10.0), ("falsifier", 10.0), ("widened", 10.0),
                ("all-zero", 0.0))


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
    table = titled(table)
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
    moved = summary_by(placed, PLACEMENT_KEY, "mask_drift")
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


def accuracy_runs(frame: pd.DataFrame, task: str) -> pd.DataFrame:
    """The placed masks' runs of one task for `plots.mean_interval`: placement, contrast, seed, `acc` (cube, %)."""
    rows = frame[(frame.task == task) & (frame.contrast > 0) & frame.placement.isin(list(PLACEMENTS[task]))]
    return rows[["placement", "contrast", "seed"]].assign(acc=100 * rows["cube.acc"].to_numpy())


def baseline_accuracy(frame: pd.DataFrame, task: str) -> dict[str, float]:
    """Mean full-cube accuracy (%) of the model without a mask and of the all-zero mask on one task."""
    return {p: 100 * mean_accuracy(frame, task, p, 0.0) for p in ("no mask", "all-zero")}


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
