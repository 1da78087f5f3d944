"""Chapter 6's tests of the referees' objection: mask placement × contrast, drift, QK normalisation.

Every run here is a GOTU run (`companion.experiments.gotu`) with overrides, so the runs Chapter 3
already made (the correct mask at ±10, the all-zero mask, the structured initialisations) are shared
through the run store. Nothing here trains by itself; `ensure_runs` does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from companion.book.ch03_boolean import open_mass
from companion.sweep import Request, ensure_many, records_frame

__all__ = ["PLACEMENTS", "CONTRASTS", "QK_CELLS", "mask_overrides", "placement_runs", "qk_norm_runs", "drift_curve",
           "final_drift", "summary_by", "select", "by_seed", "mask_init_norm"]

# The skeptic's placements on 2Parity, and their analogues on 3-bit Majority (support {0, 1, 2}).
PLACEMENTS = {
    "2parity": {"correct": "support", "misspecified": "pair:0-2", "falsifier": "pair:1-2"},
    "maj3": {"correct": "support", "misspecified": "group:0-1-3", "falsifier": "group:3-4-5"},
}
CONTRASTS = (1.0, 2.0, 5.0, 10.0)


def mask_overrides(variant: str, contrast: float) -> list[str]:
    """Overrides turning the GOTU "mask" method into a mask at ±contrast on `variant`'s pattern."""
    return [f"model.prior.variant={variant}", f"model.prior.open_value={contrast}",
            f"model.prior.closed_value={-contrast}"]


def _rows(records, **labels) -> pd.DataFrame:
    frame = records_frame(records)
    for k, v in labels.items():
        frame[k] = v
    frame["mask_drift"] = [final_drift(r, "mask") for r in records]
    frame["attention_drift"] = [final_drift(r, "attention") for r in records]
    return frame


def placement_runs(task: str, profile: str, seeds: Sequence[int], *, jobs: int | None = None):
    """Runs of every placement × contrast, plus the all-zero mask and the default (contrast 0).

    Returns (records by (placement, contrast), long DataFrame with `placement`, `contrast`,
    `mask_drift` and `attention_drift` columns).
    """
    exp = f"gotu-{task}"
    cells = [((placement, c), Request(exp, ["mask"], mask_overrides(variant, c)))
             for placement, variant in PLACEMENTS[task].items() for c in CONTRASTS]
    cells += [((placement, 0.0), Request(exp, [method])) for method, placement in
              (("zero-mask", "all-zero"), ("default", "no mask"))]
    blocks = ensure_many([r for _, r in cells], profile, seeds, jobs=jobs)
    records, frames = {}, []
    for ((placement, c), _), recs in zip(cells, blocks):
        records[(placement, c)] = recs
        frames.append(_rows(recs, placement=placement, contrast=c))
    frame = pd.concat(frames, ignore_index=True)
    frame.insert(0, "task", task)
    return records, frame


QK_CELLS = (("default", False), ("structured-svd", False), ("structured-opt", False),
            ("default", True), ("structured-svd", True))


def qk_norm_runs(task: str, profile: str, seeds: Sequence[int], pattern, *, jobs: int | None = None):
    """The query–key runs: Default and Structured (SVD) without and with QK normalisation, and
    Structured (Opt) without (`QK_CELLS`). Returns (records by (method, qk_norm), DataFrame with
    accuracy, final drifts and the share of CLS attention on the task's open keys at the start and
    at the end, mean over layers)."""
    cells = [((method, norm), Request(f"gotu-{task}", [method], ["model.qk_norm=true"] if norm else []))
             for method, norm in QK_CELLS]
    records, frames = {}, []
    for ((method, norm), _), recs in zip(cells, ensure_many([r for _, r in cells], profile, seeds, jobs=jobs)):
        records[(method, norm)] = recs
        f = _rows(recs, qk_norm=norm)
        f["qk_drift"] = [final_drift(r, "qk") for r in recs]
        f["open_start"] = [np.mean([open_mass(m, pattern, 0) for m in r.drift["maps"]["init"]]) for r in recs]
        f["open_end"] = [np.mean([open_mass(m, pattern, 0) for m in r.drift["maps"]["final"]]) for r in recs]
        frames.append(f)
    frame = pd.concat(frames, ignore_index=True)
    frame.insert(0, "task", task)
    return records, frame


def drift_curve(record, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, drift averaged over layers and heads) of one run; kind is mask, qk or attention."""
    d = record.drift
    layers = sorted(d[kind], key=int)
    if not layers:
        return np.asarray(d["steps"]), np.full(len(d["steps"]), np.nan)
    values = np.mean([np.mean(d[kind][l], axis=1) for l in layers], axis=0)
    return np.asarray(d["steps"]), values


def final_drift(record, kind: str) -> float:
    """The last recorded drift of `kind`, averaged over layers and heads (NaN if not tracked)."""
    return float(drift_curve(record, kind)[1][-1])


def summary_by(frame: pd.DataFrame, by: Sequence[str], value: str) -> pd.DataFrame:
    """Mean, std, and 95% Student-t interval of `value` per group (numbers, for plots)."""
    from companion.book.stats import summarize

    rows = []
    for key, g in frame.groupby(list(by), sort=False):
        s = summarize(g[value].to_numpy())
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "mean": s.mean, "std": s.std,
                     "lo": s.lo, "hi": s.hi, "n": s.n})
    return pd.DataFrame(rows)


def select(frame: pd.DataFrame, task: str, placement: str, contrast: float) -> pd.DataFrame:
    """The runs of one task × placement × contrast (contrast 0 for "no mask" and "all-zero")."""
    return frame[(frame.task == task) & (frame.placement == placement) & (frame.contrast == contrast)]


def by_seed(frame: pd.DataFrame, task: str, placement: str, contrast: float, column: str = "cube.acc") -> dict:
    """{seed: value} of one cell, for paired comparisons."""
    sub = select(frame, task, placement, contrast)
    return dict(zip(sub["seed"], sub[column]))


def mask_init_norm(pattern, contrast: float) -> float:
    """‖log σ(M_0)‖_F of one layer's mask at ±contrast on a bool pattern: the scale for relative drift."""
    import math

    n_open = int(pattern.sum())
    n_closed = pattern.numel() - n_open
    log_sig = lambda m: -math.log1p(math.exp(-m))  # noqa: E731
    return math.sqrt(n_open * log_sig(contrast) ** 2 + n_closed * log_sig(-contrast) ** 2)
