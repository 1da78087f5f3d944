"""Chapter 4's Table 8 and what its claims read: each method's accuracy at a fraction and a budget, the gains over the
default paired by seed, and the rule of the claims decided at both budgets (held at the stated and the longer one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from companion.book.chapters.stats import Paired, Summary, difference_table, minus, paired, summarize
from companion.book.claims import load_ledger
from companion.book.labels import label, task_title
from companion.book.prose import diff_interval, mean_sd, num, pct, signed
from companion.experiments.arithmetic import FRACTIONS, TABLE8_FRACTION

__all__ = ["fraction_label", "OTHERS", "STRUCTURED", "cell", "TABLE8", "cell_name", "table8", "paired_against",
           "MINUS_DEFAULT", "paired_table8", "summary", "paired_gain", "best_other", "mean_margins", "seed_gains", "held_low",
           "interval_text", "held_at_both", "partly_line", "long_default", "points_text", "interval_points",
           "signed_points", "percent"]


def fraction_label(f: float) -> str:
    """A training fraction as the text reads it: 0.004 → "0.4 %"."""
    return f"{100 * f:g} %"


OTHERS = ("structured-svd", "structured-opt", "mimetic")  # the other initialisations of S2-15
STRUCTURED = ("structured-svd", "structured-opt")


def cell(frame: pd.DataFrame, op: str, fraction: float, budget: str = "base") -> pd.DataFrame:
    return frame[(frame.op == op) & (frame.fraction == fraction) & (frame.budget == budget)]


# Table 8's measures as the page heads them.
TABLE8 = {"test.seq_acc": "Test sequence accuracy (%)", "test.digit_acc": "Test digit accuracy (%)",
          "train.seq_acc": "Training sequence accuracy (%)"}


def cell_name(op: str, fraction: float) -> str:
    return f"{task_title(op).capitalize()} at {fraction_label(fraction)}"


def table8(frame: pd.DataFrame, metrics: Sequence[str] = tuple(TABLE8)) -> pd.DataFrame:
    """The paper's Table 8 for the page: rows (operation at its fraction, method), one column per measure
    (`TABLE8`, in %: mean ± standard deviation over seeds, one decimal) and the number of seeds."""
    rows = {}
    for op, f in TABLE8_FRACTION.items():
        sub = cell(frame, op, f)
        for m, runs in sub.groupby("method", sort=False):
            rows[(cell_name(op, f), label(m))] = {TABLE8[k]: mean_sd(100 * runs[k]) for k in metrics} | {"Seeds": len(runs)}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=["Task", "Method"])
    return out


def paired_against(frame: pd.DataFrame, op: str, fraction: float, metric: str = "test.seq_acc",
                   baseline: str = "default", budget: str = "base") -> pd.DataFrame:
    """Each method minus `baseline` in percentage points, paired by seed (`stats.difference_table`,
    column `MINUS_DEFAULT`); rows labelled."""
    sub = cell(frame, op, fraction, budget)
    by = {m: dict(zip(g.seed, 100 * g[metric])) for m, g in sub.groupby("method", sort=False)}
    if baseline not in by:
        raise ValueError(f"baseline {baseline!r} is not among the methods {list(by)}.")
    return difference_table({label(m): (v, by[baseline]) for m, v in by.items() if m != baseline}, MINUS_DEFAULT,
                            ["Method"])


MINUS_DEFAULT = minus("default")


def paired_table8(frame: pd.DataFrame) -> pd.DataFrame:
    """`paired_against` the default at both of Table 8's cells, one block per operation."""
    return pd.concat({cell_name(op, f): paired_against(frame, op, f) for op, f in TABLE8_FRACTION.items()},
                     names=["Task"])


def summary(frame: pd.DataFrame, op: str, fraction: float, method: str, metric: str = "test.seq_acc",
            budget: str = "base") -> Summary:
    """`companion.book.chapters.stats.Summary` of a metric (in %) over seeds for one cell."""
    sub = cell(frame, op, fraction, budget)
    sub = sub[sub.method == method]
    if sub.empty:
        raise ValueError(f"no runs for {op} at {fraction} with method {method!r}.")
    return summarize(100 * sub[metric].to_numpy())


def paired_gain(frame: pd.DataFrame, op: str, fraction: float, method: str, baseline: str = "default",
                metric: str = "test.seq_acc", budget: str = "base") -> Paired:
    """`companion.book.chapters.stats.Paired` of method − baseline (percentage points), paired by seed."""
    sub = cell(frame, op, fraction, budget)
    by = {m: dict(zip(g.seed, 100 * g[metric])) for m, g in sub.groupby("method")}
    return paired(by[method], by[baseline])


def best_other(frame: pd.DataFrame, budget: str = "base") -> tuple[str, float]:
    """(method, mean test accuracy in %) of the best other initialisation on addition at 0.4 % at `budget`."""
    others = {m: summary(frame, "add", TABLE8_FRACTION["add"], m, budget=budget).mean for m in OTHERS}
    best = max(others, key=others.get)
    return best, others[best]


def mean_margins(frame: pd.DataFrame, profile: str, budget: str = "base") -> dict[float, float]:
    """{fraction: mask − default mean test accuracy (points)} over Figure 2's fractions at `budget`."""
    return {f: summary(frame, "add", f, "mask", budget=budget).mean - summary(frame, "add", f, "default", budget=budget).mean
            for f in FRACTIONS[profile]}


def seed_gains(frame: pd.DataFrame, profile: str) -> dict[tuple[float, str], Paired]:
    """{(fraction, budget): mask − default in test sequence accuracy (points, paired by seed)} on addition at
    every fraction of Figure 2 and both budgets: what S2-14 (at 0.4 %) and S2-18 (every fraction) decide on.
    `frame`: the chapter's `runs_frame` (its seeds)."""
    return {(f, b): paired_gain(frame, "add", f, "mask", budget=b) for f in FRACTIONS[profile] for b in ("base", "long")}


def held_low(gains: Mapping[tuple[float, str], Paired], fractions: Sequence[float], partly: float) -> float:
    """The smallest over `fractions` of `held_at_both` of the lower ends of the gains' 95 % intervals (as a
    fraction): a gain passes a line only where its interval over seeds clears it at both budgets."""
    return min(held_at_both(gains[f, "base"].lo / 100, gains[f, "long"].lo / 100, partly) for f in fractions)


def interval_text(g: Paired) -> str:
    return diff_interval(g.mean_diff, g.lo, g.hi)


def held_at_both(base: float, long: float, partly: float, *, larger: bool = True) -> float:
    """A quantity decided at the stated budget and at `LONG_BUDGET` times the updates: min(base, max(long,
    partly)) for an at_least rule (`larger`, e.g. a gain), max(base, min(long, partly)) for an at_most rule (e.g.
    the default's accuracy). It passes the threshold only when both budgets do; when only the stated one passes
    (the gap closes with more training: speed, not learnability), it lands on the rule's `partly` level, never
    below it; when the stated budget fails, it is the stated budget's value."""
    return min(base, max(long, partly)) if larger else max(base, min(long, partly))


def partly_line(claim_id: str) -> float:
    return float(load_ledger()[claim_id].rule["partly_threshold"])


def long_default(frame: pd.DataFrame) -> float:
    return summary(frame, "add", TABLE8_FRACTION["add"], "default", budget="long").mean


def points_text(g: Paired) -> str:
    """A paired gain as the scoreboard and verdict table write it: "+66.1 points, 95 % interval [48.2, 84.0]"."""
    return f"{signed_points(g.mean_diff)}, 95 % interval [{num(g.lo, 1)}, {num(g.hi, 1)}]"


def interval_points(g: Paired) -> str:
    """A paired gain's interval alone: "95 % interval [−1.2, 0.8] points" (a true minus)."""
    return f"95 % interval [{num(g.lo, 1)}, {num(g.hi, 1)}] points"


def signed_points(x: float) -> str:
    """A difference in points with its sign and a true minus: "+6.2 points", "−0.5 points"."""
    return f"{signed(x, 1)} points"


def percent(x: float) -> str:
    """An accuracy already in percent as the page writes it: "90.4 %"."""
    return pct(x / 100)
