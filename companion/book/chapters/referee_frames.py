"""Chapter 6's runs as frames: one row per run of the placement and query-key grids, with what each run reads (accuracies,
mask drift, drift of the rows a mask leaves free), and the selections the tables and claims take from them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import pandas as pd

from companion import drift
from companion.book.chapters.frames import open_mass, records_frame
from companion.book.chapters.stats import summarize
from companion.book.labels import label, task_title
from companion.config import TaskConfig
from companion.tasks import make_task

__all__ = ["FIT", "MATCH", "GAIN", "PLACEMENT_KEY", "QK_KEY", "free_rows", "free_drift", "mask_pattern_of",
           "placement_frame", "qk_frame", "select", "by_seed", "mean_accuracy", "r03_summary", "mean_mask_drift",
           "summary_by", "titled"]


# R-05 reads its two cells per task at TEST_SEEDS (0-9, the referee's ten) where the chapter has them (`load`)
FIT = 0.99  # a run fits the seen set at this mean seen accuracy
MATCH = 0.05  # a query–key run starts matched to the mask when its CLS open share is within this of the mask's
GAIN = 0.02  # the correct ±10 mask matters on a task when it is this far above no mask in cube accuracy
PLACEMENT_KEY = ("task", "placement", "contrast")
QK_KEY = ("task", "method", "qk_norm")


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
def mask_pattern_of(task: TaskConfig, variant: str):
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
        free = [free_rows(mask_pattern_of(r.config.task, "support")) for r in records]
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
        drift.mask_scale(mask_pattern_of(r.config.task, r.config.model.prior.variant), c) if c > 0 else math.nan
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
        frame[column] = [np.mean([open_mass(m, mask_pattern_of(r.config.task, "support"), 0) for m in r.drift["maps"][maps]])
                         for r in records]
    frame["open_chance"] = [float(mask_pattern_of(r.config.task, "support")[0].float().mean()) for r in records]
    return frame


def select(frame: pd.DataFrame, task: str, placement: str, contrast: float) -> pd.DataFrame:
    """The runs of one task × placement × contrast (contrast 0 for "no mask" and "all-zero")."""
    return frame[(frame.task == task) & (frame.placement == placement) & (frame.contrast == contrast)]


def by_seed(frame: pd.DataFrame, task: str, placement: str, contrast: float, column: str = "cube.acc") -> dict:
    """{seed: value} of one cell, for paired comparisons."""
    sub = select(frame, task, placement, contrast)
    return dict(zip(sub["seed"], sub[column]))


def mean_accuracy(frame: pd.DataFrame, task: str, placement: str, contrast: float) -> float:
    """Mean full-cube accuracy of one cell, in [0, 1]."""
    return float(select(frame, task, placement, contrast)["cube.acc"].mean())


def r03_summary(frame: pd.DataFrame):
    """R-03's full-cube accuracy of the correct ±1 mask on Majority over seeds (`stats.Summary`, fractions)."""
    return summarize(select(frame, "maj3", "correct", 1.0)["cube.acc"].to_numpy())


def mean_mask_drift(frame: pd.DataFrame, task: str, placement: str, contrast: float) -> float:
    """Mean final mask drift of one cell."""
    return summarize(select(frame, task, placement, contrast)["mask_drift"].to_numpy()).mean


def summary_by(frame: pd.DataFrame, by: Sequence[str], value: str) -> pd.DataFrame:
    """Mean, 95 % Student-t interval and n of `value` per group (first-appearance order)."""
    rows = []
    for key, g in frame.groupby(list(by), sort=False):
        s = summarize(g[value].to_numpy())
        rows.append({**dict(zip(by, key)), "mean": s.mean, "lo": s.lo, "hi": s.hi, "n": s.n})
    return pd.DataFrame(rows)


def titled(table: pd.DataFrame) -> pd.DataFrame:
    """Task names of the first index level (and method names of a `method` level) as the reader's."""
    table = table.rename(index=task_title, level=0)
    if "method" in table.index.names:
        table = table.rename(index=label, level="method")
    return table
