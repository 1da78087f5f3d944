"""Chapter 4's Figure 2, when each method first reaches a level, and the per-digit accuracy of multiplication: tables and
figure data over the runs' frame."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from companion.book.chapters.arith_table8 import cell, fraction_label, interval_text, paired_gain, summary
from companion.book.chapters.frames import curves
from companion.book.chapters.stats import minus
from companion.book.labels import label
from companion.experiments.arithmetic import FIGURE2_METHODS, FRACTIONS, TABLE8_FRACTION

__all__ = ["REACH", "OFFSET", "DIGITS", "figure2_data", "figure2_seeds", "fraction_ticks", "figure2_table", "steps_to",
           "FIRST_STEP", "reached", "budget_gap_table", "MASK_GAP", "updates_of", "mul_frame", "digit_frame",
           "digit_table"]


REACH = 0.5  # the test sequence accuracy whose first crossing "When each method gets there" counts
OFFSET = 0.12  # horizontal spacing of Figure 2's methods around each fraction
DIGITS = 6  # answer digits of 3×3-digit multiplication


def figure2_data(frame: pd.DataFrame, profile: str) -> pd.DataFrame:
    """Figure 2's points per method of `FIGURE2_METHODS` and fraction: x (fraction index, methods side by side),
    mean test sequence accuracy (%), and how far the 95 % interval reaches below and above it (the error bar)."""
    rows = []
    for k, m in enumerate(FIGURE2_METHODS):
        for i, f in enumerate(FRACTIONS[profile]):
            s = summary(frame, "add", f, m)
            rows.append({"method": m, "fraction": f, "x": i + (k - 0.5) * OFFSET, "mean": s.mean,
                         "below": s.mean - s.lo, "above": s.hi - s.mean})
    return pd.DataFrame(rows)


def figure2_seeds(frame: pd.DataFrame, profile: str) -> pd.DataFrame:
    """Figure 2's seeds: method, fraction, seed, x (as in `figure2_data`) and the test sequence accuracy (%)."""
    rows = []
    for k, m in enumerate(FIGURE2_METHODS):
        for i, f in enumerate(FRACTIONS[profile]):
            sub = cell(frame, "add", f)
            sub = sub[sub.method == m]
            rows += [{"method": m, "fraction": f, "seed": s, "x": i + (k - 0.5) * OFFSET, "value": 100 * v}
                     for s, v in zip(sub.seed, sub["test.seq_acc"])]
    return pd.DataFrame(rows)


def fraction_ticks(profile: str) -> tuple[list[int], list[str]]:
    """Figure 2's x ticks: positions and "fraction (pairs)" labels."""
    fractions = FRACTIONS[profile]
    return list(range(len(fractions))), [f"{fraction_label(f)}\n({round(f * 1e6):,} pairs)" for f in fractions]


def figure2_table(frame: pd.DataFrame, profile: str) -> pd.DataFrame:
    """Mean test sequence accuracy (%, one decimal) of Figure 2's methods (rows) at each training
    fraction (columns, headed by the fraction)."""
    table = pd.DataFrame({fraction_label(f): {label(m): f"{summary(frame, 'add', f, m).mean:.1f}"
                                              for m in FIGURE2_METHODS} for f in FRACTIONS[profile]})
    table.index.name, table.columns.name = "Method", "Test sequence accuracy (%) at training fraction"
    return table


def steps_to(records: Sequence, threshold: float = REACH, split: str = "test", metric: str = "seq_acc") -> pd.DataFrame:
    """Per method: in how many of its runs, and at which evaluated step (median), the metric first
    reaches `threshold`; runs that never reach it within the budget are counted, not imputed."""
    rows = {}
    for m, (steps, vals) in curves(records, split, metric).items():
        first = [int(steps[np.argmax(v >= threshold)]) for v in vals if (v >= threshold).any()]
        rows[label(m)] = {reached(threshold): f"{len(first)} of {len(vals)}",
                          FIRST_STEP: float(np.median(first)) if first else float("nan")}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "Method"
    return out


FIRST_STEP = "Median update of the first reach"


def reached(threshold: float = REACH) -> str:
    """The header of `steps_to`'s count: "Runs reaching 50 %"."""
    return f"Runs reaching {100 * threshold:g} %"


def budget_gap_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Addition at 0.4 %, base and long budget (rows "N updates"): mean test sequence accuracy (%) of
    Figure 2's methods and the paired mask − default gap with its 95 % interval."""
    add = TABLE8_FRACTION["add"]
    rows = {}
    for b in ("base", "long"):
        row = {f"{label(m)} (%)": f"{summary(frame, 'add', add, m, budget=b).mean:.1f}" for m in FIGURE2_METHODS}
        row[MASK_GAP] = interval_text(paired_gain(frame, "add", add, "mask", budget=b))
        rows[f"{updates_of(frame, b)} updates"] = row
    out = pd.DataFrame(rows).T
    out.index.name = "Budget"
    return out


MASK_GAP = "Mask " + minus("default").lower()  # "Mask minus default (points) [95 % interval]"


def updates_of(frame: pd.DataFrame, budget: str) -> int:
    return int(frame[(frame.budget == budget) & (frame.op == "add")]["steps"].iloc[0])


def mul_frame(frame: pd.DataFrame) -> pd.DataFrame:
    return cell(frame, "mul", TABLE8_FRACTION["mul"])


def digit_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Multiplication at 3 %, long form: method, seed, digit ("c0" … "c5", least significant first) and
    its final test accuracy under teacher forcing (%)."""
    sub = mul_frame(frame)
    return pd.DataFrame([{"method": m, "seed": s, "digit": f"c{d}", "value": 100 * v}
                         for d in range(DIGITS)
                         for m, s, v in zip(sub.method, sub.seed, sub[f"test.digit{d}_acc"])])


def digit_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean per-digit test accuracy (%, one decimal) on multiplication at 3 %: method × c0 … c5
    (methods labelled, in the order of their names)."""
    cols = [f"test.digit{s}_acc" for s in range(DIGITS)]
    digits = (100 * mul_frame(frame).groupby("method")[cols].mean()).round(1)
    digits.columns = [f"c{s}" for s in range(DIGITS)]
    digits = digits.rename(index=label)
    digits.index.name, digits.columns.name = "Method", "Accuracy (%) of answer digit"
    return digits
