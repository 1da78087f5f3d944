"""Chapter 3's function-space reading (S2-05): the default models read back on the unseen set U against the
minimum-degree interpolator, and whether their functions had settled when training stopped."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import pandas as pd
import torch

from companion.boolean_fourier import evaluate
from companion.book.chapters.frames import readout
from companion.book.chapters.gotu_table1 import FIT
from companion.book.prose import num, pct
from companion.tasks import make_task

__all__ = ["settle", "function_space", "space_numbers"]


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
