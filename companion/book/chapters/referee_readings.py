"""What Chapter 6's claims read from its frames: where the correct mask matters, how far a misspecified mask separates,
the seed test, and how much of its start a query-key initialisation keeps with and without normalisation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from companion.book.chapters.frames import readout
from companion.book.chapters.referee_frames import (FIT, GAIN, MATCH, by_seed, mask_pattern_of, mean_accuracy,
                                                    select)
from companion.book.chapters.stats import paired, sign_flip_p
from companion.experiments.referee import TASKS

__all__ = ["mask_matters", "separating_drift", "misspecified_drift", "seed_test", "qk_retention", "matched_drift",
           "qk_start_excess"]


def mask_matters(frame: pd.DataFrame, fit: float = FIT, gain: float = GAIN) -> list[str]:
    """The tasks on which the correct mask matters, chosen by rule: the model without a mask fits the
    seen set and the correct ±10 mask's mean cube accuracy is at least `gain` above it."""
    out = []
    for task in TASKS:
        none = select(frame, task, "no mask", 0.0)
        if none["seen.acc"].mean() >= fit and mean_accuracy(frame, task, "correct", 10.0) - none["cube.acc"].mean() >= gain:
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
    wrong = mask_pattern_of(records[0].config.task, records[0].config.model.prior.variant)
    right = mask_pattern_of(records[0].config.task, "support")
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


def qk_start_excess(qk: pd.DataFrame, fit: float = FIT) -> float:
    rows = qk[(qk.method == "structured-svd") & qk.qk_norm & (qk["seen.acc"] >= fit)]
    return float((rows.open_start - rows.open_chance).mean()) if len(rows) else 0.0
