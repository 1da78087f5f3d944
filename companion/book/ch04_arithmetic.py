"""Chapter 4's analysis of the arithmetic runs: Table 8, Figure 2, learning curves, digit accuracies.

Everything here reads stored run records (`companion.sweep.ensure_runs`); nothing trains.

The chapter's runs (every profile, same seeds for every cell):
- Table 8, addition: every method of `companion.experiments.arithmetic.METHODS` at 0.4 %.
- Table 8, multiplication: `MUL_METHODS` at 3 %.
- Figure 2: `FIGURE2_METHODS` at each fraction of `FRACTIONS` (addition; 0.4 % shared with Table 8).
- The budget check: `FIGURE2_METHODS` on addition at 0.4 % with `LONG_BUDGET` times the updates
  (frame column `budget` = "long"; every other run has budget "base").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from companion.experiments import get_experiment
from companion.experiments.arithmetic import METHODS, TABLE8_FRACTION
from companion.book.ch03_boolean import curves as method_curves
from companion.book.stats import paired, paired_table, summarize, summary_table
from companion.sweep import Request, ensure_many, records_frame

__all__ = ["LABELS", "FRACTIONS", "FIGURE2_METHODS", "MUL_METHODS", "LONG_BUDGET", "load_runs", "table8",
           "paired_against", "curves", "steps_to", "summary", "fraction_label"]

LABELS = {"default": "Default", "structured-svd": "Structured (SVD)", "structured-opt": "Structured (Opt)",
          "mimetic": "Mimetic", "mask": "Mask (learnable)", "fixed-mask": "Fixed mask"}
FRACTIONS = {"ci": (0.002, 0.004, 0.01), "paper": (0.002, 0.004, 0.01, 0.03)}
FIGURE2_METHODS = ("default", "mask")
MUL_METHODS = {"ci": ("default", "mask"), "paper": METHODS}
LONG_BUDGET = 2


def fraction_label(f: float) -> str:
    return f"{100 * f:g} %"


def _frame(records, op: str, fraction: float, budget: str) -> pd.DataFrame:
    frame = records_frame(records)
    frame.insert(0, "op", op)
    frame.insert(1, "fraction", fraction)
    frame.insert(2, "budget", budget)
    frame.insert(3, "steps", [r.config.train.steps for r in records])
    return frame


def load_runs(profile: str, seeds: Sequence[int], *, jobs: int | None = None):
    """All runs of the chapter (run when missing): (records {(op, fraction, budget): [Record]}, long
    frame with columns op, fraction, budget, steps, then `records_frame`'s)."""
    add, mul = TABLE8_FRACTION["add"], TABLE8_FRACTION["mul"]
    base = get_experiment("arith-add").config(profile, "default", 0)
    long = [f"train.steps={base.train.steps * LONG_BUDGET}", f"train.eval_every={base.train.eval_every * LONG_BUDGET}"]
    cells = [(("add", add, "base"), Request("arith-add"))]
    cells += [(("add", f, "base"), Request("arith-add", FIGURE2_METHODS, [f"task.fraction={f}"]))
              for f in FRACTIONS[profile] if f != add]
    cells += [(("mul", mul, "base"), Request("arith-mul", MUL_METHODS[profile])),
              (("add", add, "long"), Request("arith-add", FIGURE2_METHODS, long))]
    blocks = ensure_many([r for _, r in cells], profile, seeds, jobs=jobs)
    records = {key: recs for (key, _), recs in zip(cells, blocks)}
    frame = pd.concat([_frame(r, op, f, b) for (op, f, b), r in records.items()], ignore_index=True)
    return records, frame


def _cell(frame: pd.DataFrame, op: str, fraction: float, budget: str = "base") -> pd.DataFrame:
    return frame[(frame.op == op) & (frame.fraction == fraction) & (frame.budget == budget)]


def table8(frame: pd.DataFrame, metrics=("test.seq_acc", "test.digit_acc", "train.seq_acc")) -> pd.DataFrame:
    """Operation × method at Table 8's fractions, in %: "mean ± std [95 % interval]" per metric."""
    rows = []
    for op, f in TABLE8_FRACTION.items():
        sub = _cell(frame, op, f).copy()
        sub["task"] = f"{'addition' if op == 'add' else 'multiplication'} at {fraction_label(f)}"
        rows.append(sub)
    sub = pd.concat(rows)
    sub["method"] = sub["method"].map(LABELS)
    sub[list(metrics)] = 100 * sub[list(metrics)]
    return summary_table(sub, ["task", "method"], list(metrics), digits=1)


def paired_against(frame: pd.DataFrame, op: str, fraction: float, metric: str = "test.seq_acc",
                   baseline: str = "default", budget: str = "base") -> pd.DataFrame:
    """Each method minus `baseline` in percentage points, paired by seed, with interval and p-value."""
    sub = _cell(frame, op, fraction, budget).copy()
    sub[metric] = 100 * sub[metric]
    out = paired_table(sub, "method", "seed", metric, baseline, digits=1)
    out.index = out.index.map(lambda m: LABELS.get(m, m))
    return out


def summary(frame: pd.DataFrame, op: str, fraction: float, method: str, metric: str = "test.seq_acc",
            budget: str = "base"):
    """`companion.book.stats.Summary` of a metric (in %) over seeds for one cell."""
    sub = _cell(frame, op, fraction, budget)
    sub = sub[sub.method == method]
    if sub.empty:
        raise ValueError(f"no runs for {op} at {fraction} with method {method!r}.")
    return summarize(100 * sub[metric].to_numpy())


def paired_gain(frame: pd.DataFrame, op: str, fraction: float, method: str, baseline: str = "default",
                metric: str = "test.seq_acc", budget: str = "base"):
    """`companion.book.stats.Paired` of method − baseline (percentage points), paired by seed."""
    sub = _cell(frame, op, fraction, budget)
    by = {m: dict(zip(g.seed, 100 * g[metric])) for m, g in sub.groupby("method")}
    return paired(by[method], by[baseline])


def curves(records: Sequence, split: str = "test", metric: str = "seq_acc") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{method: (steps, values (seeds, evaluations))}: `companion.book.ch03_boolean.curves` on the test split."""
    return method_curves(records, split, metric)


def steps_to(records: Sequence, threshold: float, split: str = "test", metric: str = "seq_acc") -> pd.DataFrame:
    """Per method: in how many of its runs, and at which evaluated step (median), the metric first
    reaches `threshold`; runs that never reach it within the budget are counted, not imputed."""
    rows = {}
    for m, (steps, vals) in curves(records, split, metric).items():
        first = [int(steps[np.argmax(v >= threshold)]) for v in vals if (v >= threshold).any()]
        rows[LABELS.get(m, m)] = {"runs reaching it": f"{len(first)} of {len(vals)}",
                                  "median step": float(np.median(first)) if first else float("nan")}
    return pd.DataFrame.from_dict(rows, orient="index")
