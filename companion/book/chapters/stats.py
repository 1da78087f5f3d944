"""Multi-seed summaries: mean, std, Student-t 95% interval, paired method differences, one table format.

For n seeds with values x: mean x̄, std s (ddof = 1), interval x̄ ± t_{0.975, n−1} · s/√n. Paired
differences d_s = a_s − b_s over the seeds both methods have, with the same interval and the paired
t-test p-value. Needs scipy and pandas (imported when called).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.prose import diff_interval, p_text

__all__ = ["Summary", "Paired", "summarize", "paired", "welch", "sign_flip_p", "format_summary", "summary_table",
           "P_COLUMN", "SEEDS_COLUMN", "minus", "difference_table"]


@dataclass(frozen=True)
class Summary:
    """mean, std (ddof = 1), the `level` t interval [lo, hi] and n; std and interval are NaN for n < 2."""

    mean: float
    std: float
    lo: float
    hi: float
    n: int


@dataclass(frozen=True)
class Paired:
    """Mean of a − b over common seeds, its t interval, the paired t-test p-value, and n."""

    mean_diff: float
    lo: float
    hi: float
    p_value: float
    n: int


def _t_interval(x: np.ndarray, level: float) -> tuple[float, float, float, float]:
    from scipy import stats

    n = len(x)
    if n == 0:
        raise ValueError("no values to summarise; pass at least one seed's value.")
    mean = float(x.mean())
    if n < 2:
        return mean, math.nan, math.nan, math.nan
    std = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * std / math.sqrt(n)
    return mean, std, mean - half, mean + half


def summarize(values: Sequence[float], level: float = 0.95) -> Summary:
    """Summary of one metric over seeds: x̄ ± t_{(1+level)/2, n−1} · s/√n."""
    x = np.asarray(values, dtype=float)
    mean, std, lo, hi = _t_interval(x, level)
    return Summary(mean, std, lo, hi, len(x))


def welch(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Summary:
    """The difference of two means over independent runs (different models, so seeds do not pair): mean(a) − mean(b)
    with Welch's interval, ± t_{(1+level)/2, ν} · √(s_a²/n_a + s_b²/n_b), ν by Welch–Satterthwaite; `std` is that
    standard error and `n` the smaller sample."""
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) < 2 or len(y) < 2:
        raise ValueError(f"Welch's interval needs at least two runs on each side, got {len(x)} and {len(y)}.")
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    se = math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1)) if se > 0 else math.inf
    half = float(stats.t.ppf(0.5 + level / 2, dof)) * se
    diff = float(x.mean() - y.mean())
    return Summary(diff, se, diff - half, diff + half, min(len(x), len(y)))


def paired(a: Mapping[int, float], b: Mapping[int, float], level: float = 0.95) -> Paired:
    """Paired difference a − b by seed (only seeds present in both count).

    Args:
        a, b: {seed: value} of two methods.
    """
    from scipy import stats

    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError("the two methods share no seed; paired differences need runs with the same seeds.")
    d = np.array([a[s] - b[s] for s in seeds], dtype=float)
    mean, _, lo, hi = _t_interval(d, level)
    if len(d) < 2:
        p = math.nan
    elif np.all(d == d[0]):  # zero variance: the t statistic is undefined unless the mean is 0
        p = 1.0 if d[0] == 0 else 0.0
    else:
        p = float(stats.ttest_rel([a[s] for s in seeds], [b[s] for s in seeds]).pvalue)
    return Paired(mean, lo, hi, p, len(d))


def sign_flip_p(diffs: Sequence[float]) -> float:
    """Exact one-sided paired permutation (sign-flip) test that the mean of paired differences is > 0.

    Under the null each difference is as likely to have either sign; p is the share of the 2^n sign
    assignments whose mean is at least the observed one (ties count). With n seeds the smallest
    attainable p is 2^−n (every difference positive): 1/32 ≈ 0.031 for 5 seeds, so 5 seeds can pass
    at 0.05 only when every seed gains, 4 seeds never. Exact enumeration; n ≤ 20."""
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    if n == 0 or n > 20:
        raise ValueError(f"sign_flip_p enumerates 2^n sign assignments; needs 1 ≤ n ≤ 20 differences, got {n}.")
    signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)  # every ±1 assignment, row by row
    sums = signs @ np.abs(d)
    return float(np.mean(sums >= d.sum() - 1e-12))


def format_summary(s: Summary, digits: int = 3) -> str:
    """"mean ± std [lo, hi]" rounded to `digits` decimals (just the mean for one seed)."""
    f = f"{{:.{digits}f}}"
    if s.n < 2:
        return f.format(s.mean)
    return f"{f.format(s.mean)} ± {f.format(s.std)} [{f.format(s.lo)}, {f.format(s.hi)}]"


def summary_table(frame, by: str | Sequence[str], metrics: Sequence[str], digits: int = 3, level: float = 0.95):
    """The shared table: one row per group of `by`, one "mean ± std [lo, hi]" column per metric, plus n.

    Args:
        frame: a long pandas DataFrame, one row per run (e.g. `companion.book.chapters.frames.records_frame`).
        by: column(s) naming the group, e.g. "method".
        metrics: columns to summarise over the rows of each group (the seeds).
        digits: decimals shown.
    """
    rows = {}
    for key, group in frame.groupby(by, sort=False):
        row = {m: format_summary(summarize(group[m].dropna(), level), digits) for m in metrics}
        row["n"] = len(group)
        rows[key] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = by if isinstance(by, str) else None
    return out


P_COLUMN, SEEDS_COLUMN = "p (paired t-test)", "Seeds"  # the paired tables' last two columns, in every chapter


def minus(what: str) -> str:
    """The header of a paired-difference column: `minus("default")` → "Minus default (points) [95 % interval]"."""
    return f"Minus {what} (points) [95 % interval]"


def difference_table(pairs: Mapping, header: str, names: Sequence[str], digits: int = 1, level: float = 0.95):
    """The book's one paired-difference table: a row per key of `pairs` ({row key: (a by seed, b by
    seed)}, values in points), a − b paired by seed as "+d [lo, hi]" under `header` (`minus`), the paired
    t-test's p (`P_COLUMN`) and the seeds paired (`SEEDS_COLUMN`). Tuple keys make a MultiIndex named
    `names`; plain keys an index named `names[0]`."""
    rows = {}
    for key, (a, b) in pairs.items():
        d = paired(a, b, level)
        rows[key] = {header: diff_interval(d.mean_diff, d.lo, d.hi, digits), P_COLUMN: p_text(d.p_value),
                     SEEDS_COLUMN: d.n}
    out = pd.DataFrame.from_dict(rows, orient="index")
    if len(names) > 1:
        out.index = pd.MultiIndex.from_tuples(out.index, names=list(names))
    else:
        out.index.name = names[0]
    return out
