"""Chapter 5's Tables 3 and 5 and what their claims read: each start's accuracy per image set, the mask's lead over the
best other start paired by seed, fixed against learnable, and whether the two tables print the same runs alike."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from companion.book.chapters.stats import Paired, difference_table, minus, paired, summary_table
from companion.book.labels import label, task_title
from companion.experiments.images import METHODS

__all__ = ["TABLE3", "TABLE5", "OTHERS", "IMPULSE_OTHERS", "MARGIN", "mean_table", "table3", "HEADERS", "for_page",
           "table5", "paired_vs_default", "paired_frame", "seed_values", "table3_measures", "fixed_vs_learnable",
           "reading", "inconsistency"]


TABLE3 = ("default", "mimetic", "structured-svd", "impulse", "mask", "impulse-mask")  # the starts Table 3 compares


TABLE5 = ("default", "zero-mask", "fixed-mask", "mask")  # the mask ablations of Table 5


OTHERS = ("default", "mimetic", "structured-svd")  # what the mask must beat in Table 3 (S2-27)


IMPULSE_OTHERS = ("default", "mimetic", "impulse")  # and in the source's own list, with the impulse start (S2-19)


MARGIN = 0.01  # the equivalence margin (fraction) of "no difference": one point of accuracy, 1 % of perplexity


def mean_table(frame: pd.DataFrame, methods: Sequence[str], metrics: Sequence[str], digits: int) -> pd.DataFrame:
    sub = frame[frame["method"].isin(methods)].copy()
    sub["method"] = pd.Categorical(sub["method"], categories=list(methods), ordered=True)
    sub = sub.sort_values(["dataset", "method"], kind="stable")
    sub["method"] = sub["method"].astype(str).map(label)
    sub["dataset"] = sub["dataset"].map(task_title)
    return summary_table(sub, ["dataset", "method"], metrics, digits=digits)


def table3(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 3 per image set: test (and training) top-1 accuracy (%) of `TABLE3`, seed mean ± std [95 % interval]."""
    return mean_table(frame, TABLE3, ["test.acc (%)", "train.acc (%)"], 1)


HEADERS = {"test.acc (%)": "Test accuracy (%)", "train.acc (%)": "Training accuracy (%)", "n": "Seeds",
           "test.ppl": "Test perplexity", "test.bpc": "Test bits per character", "dataset": "Image set",
           "method": "Method"}


def for_page(table: pd.DataFrame) -> pd.DataFrame:
    """Table 3, 5 or 6 as the page shows it: the metric names of the records become readers' headers."""
    out = table.rename(columns=HEADERS)
    out.index = out.index.set_names([HEADERS.get(n, n) for n in out.index.names])
    return out


def table5(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 5: default, all-zero mask, fixed mask and learnable mask, test top-1 accuracy (%)."""
    return mean_table(frame, TABLE5, ["test.acc (%)"], 1)


def paired_vs_default(frame: pd.DataFrame, metric: str = "test.acc (%)") -> pd.DataFrame:
    """Each method minus the default, paired by seed, per image set (`stats.difference_table`)."""
    pairs = {}
    for ds, sub in frame.groupby("dataset", sort=False):
        by = {m: dict(zip(g.seed, g[metric])) for m, g in sub.groupby("method", sort=False)}
        pairs |= {(task_title(ds), label(m)): (v, by["default"]) for m, v in by.items() if m != "default"}
    return difference_table(pairs, minus("default"), ["Image set", "Method"], digits=2)


def paired_frame(frame: pd.DataFrame, metric: str = "test.acc (%)") -> pd.DataFrame:
    """Long form of each method minus the default, seed by seed (dataset, method, seed, difference)."""
    rows = []
    for ds, sub in frame.groupby("dataset", sort=False):
        base = dict(zip(sub[sub.method == "default"]["seed"], sub[sub.method == "default"][metric]))
        for _, r in sub[sub.method != "default"].iterrows():
            if r["seed"] in base:
                rows.append({"dataset": ds, "method": r["method"], "seed": r["seed"],
                             "difference": r[metric] - base[r["seed"]]})
    return pd.DataFrame(rows)


def seed_values(frame: pd.DataFrame, dataset: str, method: str, column: str = "test.acc") -> dict[int, float]:
    sub = frame[(frame.dataset == dataset) & (frame.method == method)]
    return dict(zip(sub["seed"], sub[column]))


def table3_measures(frame: pd.DataFrame) -> dict[str, dict]:
    """Per image set: mean test accuracy per method (`means`), the best of `OTHERS` (`best_other`), and paired by seed
    (`Paired`, fractions) the mask minus it (`lead`); the same against the best of `IMPULSE_OTHERS` (`best_impulse`,
    `impulse_lead`); the per-head impulse mask minus the shared mask (`per_head`) and the all-zero mask minus the
    default (`zero`)."""
    out = {}
    for ds in dict.fromkeys(frame["dataset"]):
        means = {m: float(np.mean(list(seed_values(frame, ds, m).values()))) for m in METHODS}
        best = max(OTHERS, key=means.__getitem__)
        best_impulse = max(IMPULSE_OTHERS, key=means.__getitem__)
        mask = seed_values(frame, ds, "mask")
        out[ds] = {"means": means, "best_other": best, "lead": paired(mask, seed_values(frame, ds, best)),
                   "best_impulse": best_impulse, "impulse_lead": paired(mask, seed_values(frame, ds, best_impulse)),
                   "per_head": paired(seed_values(frame, ds, "impulse-mask"), mask),
                   "zero": paired(seed_values(frame, ds, "zero-mask"), seed_values(frame, ds, "default"))}
    return out


def fixed_vs_learnable(frame: pd.DataFrame) -> dict[str, Paired]:
    """Per image set: fixed mask minus learnable mask in test accuracy (fraction), paired by seed."""
    return {ds: paired(seed_values(frame, ds, "fixed-mask"), seed_values(frame, ds, "mask"))
            for ds in dict.fromkeys(frame["dataset"])}


def reading(p: Paired, margin: float = MARGIN, *, higher_is_better: bool = True) -> str:
    """What a paired interval says about "a − b": "improvement" (wholly on the good side of 0), "harm"
    (wholly on the bad side), "no difference" (wholly within ±margin) or "undecided"."""
    lo, hi = (p.lo, p.hi) if higher_is_better else (-p.hi, -p.lo)
    if lo > 0:
        return "improvement"
    if hi < 0:
        return "harm"
    if -margin <= lo and hi <= margin:
        return "no difference"
    return "undecided"


def inconsistency(t3: pd.DataFrame, t5: pd.DataFrame, frame: pd.DataFrame) -> dict[str, float]:
    """The referee's Table 3 vs Table 5 check: "gap", the largest gap (points) between the mask's rows in the two;
    "spread" and "spread_max", the smallest and largest seed std (points) of its accuracy over image sets."""
    mask = label("mask")
    gaps = [abs(float(t3.loc[(ds, mask), "test.acc (%)"].split()[0]) - float(t5.loc[(ds, mask), "test.acc (%)"].split()[0]))
            for ds in t3.index.get_level_values(0).unique()]
    spread = frame[frame.method == "mask"].groupby("dataset")["test.acc (%)"].std(ddof=1)
    return {"gap": max(gaps), "spread": float(spread.min()), "spread_max": float(spread.max())}
