"""Chapter 3's analysis of the GOTU runs: tables over seeds, the interpolator reference, attention maps.

Everything here reads stored run records (`companion.sweep.ensure_runs`); nothing trains.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from companion.experiments.gotu import METHODS
from companion.book.stats import paired_table, summary_table
from companion.sweep import Request, ensure_many, records_frame
from companion.boolean_fourier import cube, evaluate, fourier_coefficients
from companion.tasks.boolean import FUNCTIONS, BooleanTask, make_function

__all__ = ["load_runs", "reference", "table", "paired_against", "open_mass", "map_summary", "curves",
           "recovered_monomials", "table1_measures", "TITLES", "LABELS", "NAMED"]

NAMED = ("2parity", "cyclic3", "maj3")  # the tasks whose rows the paper's Table 1 reports
TITLES = {"2parity": "2Parity", "cyclic3": "Cyclic3", "maj3": "3-bit Majority", "threesym": "3-symmetric (f1)"}
LABELS = {"default": "Default", "structured-svd": "Structured (SVD)", "structured-opt": "Structured (Opt)",
          "mask": "Mask (learnable)", "fixed-mask": "Fixed mask", "zero-mask": "All-zero mask"}


def load_runs(profile: str, seeds: Sequence[int], functions: Sequence[str] = FUNCTIONS, *, jobs: int | None = None):
    """Records of every task × method × seed (run when missing) and their long DataFrame (+ `task`)."""
    records, frames = {}, []
    blocks = ensure_many([Request(f"gotu-{fn}") for fn in functions], profile, seeds, jobs=jobs)
    for fn, recs in zip(functions, blocks):
        records[fn] = recs
        frame = records_frame(recs)
        frame.insert(0, "task", fn)
        frames.append(frame)
    import pandas as pd

    return records, pd.concat(frames, ignore_index=True)


def reference(functions: Sequence[str] = FUNCTIONS, metric: str = "nearest") -> dict[str, dict[str, float]]:
    """Accuracy of each task's minimum-degree interpolator: {task: {"cube", "unseen", "seen"}}."""
    return {fn: BooleanTask(fn, metric=metric).reference() for fn in functions}


def table(frame, metrics: Sequence[str], *, methods: Sequence[str] = METHODS, digits: int = 3):
    """Task × method rows, "mean ± std [95% interval]" per metric (the shared table format)."""
    sub = frame[frame["method"].isin(methods)].copy()
    sub["method"] = sub["method"].map(LABELS)
    sub["task"] = sub["task"].map(TITLES)
    return summary_table(sub, ["task", "method"], metrics, digits=digits)


def paired_against(frame, metric: str, baseline: str = "default", digits: int = 3):
    """Per task, each method minus `baseline` paired by seed, with its 95% interval and p-value."""
    import pandas as pd

    parts = []
    for fn, sub in frame.groupby("task", sort=False):
        t = paired_table(sub, "method", "seed", metric, baseline, digits=digits)
        t.insert(0, "task", TITLES[fn])
        parts.append(t)
    out = pd.concat(parts)
    out.index = out.index.map(lambda m: LABELS.get(m, m))
    return out


def recovered_monomials(function: str, n: int = 15) -> list[tuple[int, ...]]:
    """The target's non-constant monomials recovered from its values by a Fourier transform.

    Independent of the hand-written expansion's keys: the values on the sub-cube of the coordinates
    the target uses are transformed back to coefficients, and the non-zero ones are returned.
    """
    f = make_function(function, n)
    coords = tuple(sorted({i for m in f.expansion for i in m}))
    sub = cube(len(coords), dtype=torch.float64)
    full = torch.zeros(len(sub), n, dtype=torch.float64)
    full[:, list(coords)] = sub
    return [m for m in fourier_coefficients(evaluate(f.expansion, full), coords) if m]


def open_mass(attention: Sequence[Sequence[float]], pattern: torch.Tensor, row: int | None = None) -> float:
    """Share of attention on the pattern's open entries: one row (e.g. CLS = 0) or averaged over rows."""
    a = torch.tensor(attention, dtype=torch.float64)
    on = (a * pattern).sum(-1)
    return float(on[row] if row is not None else on.mean())


def map_summary(records: dict, pattern_of: dict, methods: Sequence[str], row: int | None = 0) -> "object":
    """Mean share of attention on open entries, per task × method × layer, at initialisation and at the end."""
    import pandas as pd

    rows = []
    for fn, recs in records.items():
        pattern = pattern_of[fn]
        for rec in recs:
            if rec.config.method not in methods:
                continue
            maps = rec.drift["maps"]
            for layer in range(len(maps["init"])):
                rows.append({"task": fn, "method": rec.config.method, "seed": rec.seed, "layer": layer,
                             "init": open_mass(maps["init"][layer], pattern, row),
                             "final": open_mass(maps["final"][layer], pattern, row)})
    return pd.DataFrame(rows)


def curves(records: Sequence, split: str = "cube", metric: str = "acc") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{method: (steps, values of shape (seeds, steps))} of an evaluation curve."""
    out: dict[str, list] = {}
    steps: dict[str, list] = {}
    for rec in records:
        m = rec.config.method
        steps[m] = rec.curves["steps"]
        out.setdefault(m, []).append(rec.curves["eval"][split][metric])
    return {m: (np.asarray(steps[m]), np.asarray(v)) for m, v in out.items()}


def table1_measures(frame, refs: dict[str, dict[str, float]], fit: float = 0.99) -> dict:
    """The quantities behind the Table 1 and Table 4 claims, from the per-run frame.

    Returns a dict with: `means` (task × method mean accuracies), `fits` (task → default fits S),
    `mdi_gap` (largest |default − MDI| cube accuracy over NAMED tasks where the default fits S),
    `unfit` (tasks where it does not), `structured_gain` and `zero_gain` (largest mean gain over
    default of a structured QK init / of the all-zero mask, over all tasks), and `svd_fit`
    ((runs of Structured (SVD) that fit S, all its runs)).
    """
    means = frame.groupby(["task", "method"])[["cube.acc", "unseen.acc", "seen.acc"]].mean()
    tasks = list(dict.fromkeys(frame["task"]))
    fits = {fn: bool(means.loc[(fn, "default"), "seen.acc"] >= fit) for fn in tasks}
    gaps = [abs(means.loc[(fn, "default"), "cube.acc"] - refs[fn]["cube"]) for fn in NAMED if fn in tasks and fits[fn]]
    gain = lambda m, fn: means.loc[(fn, m), "cube.acc"] - means.loc[(fn, "default"), "cube.acc"]  # noqa: E731
    svd = frame[frame.method == "structured-svd"]
    return {
        "means": means, "fits": fits, "mdi_gap": max(gaps, default=float("nan")),
        "unfit": [fn for fn in tasks if not fits[fn]],
        "structured_gain": max(gain(m, fn) for fn in tasks for m in ("structured-svd", "structured-opt")),
        "zero_gain": max(gain("zero-mask", fn) for fn in tasks),
        "svd_fit": (int((svd["seen.acc"] >= fit).sum()), len(svd)),
    }
