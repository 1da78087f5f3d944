"""Chapter 4's figures: the arithmetic masks, Figure 2 (accuracy against training fraction), accuracy
during training, and the accuracy of each answer digit of multiplication."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from companion.book.chapters import plots
from companion.book.labels import colour, label, task_title

__all__ = ["masks", "figure2", "curves", "digits"]


def masks(panels: Mapping[str, tuple[np.ndarray, list[str]]]):
    """Each operation's mask (query × key, dark = open) with its positions named, side by side, and
    one closed/open legend: `panels` is {op: ch04.mask_panel(op)}."""
    fig, axes = plots.panels(1, len(panels), height=3.9, squeeze=False)
    for ax, (op, (pattern, names)) in zip(axes.flat, panels.items()):
        image = plots.binary_map(ax, pattern, title=task_title(op))
        ax.set_xticks(range(len(names)), names); ax.set_yticks(range(len(names)), names)
        ax.set(xlabel="key", ylabel="query")
        ax.tick_params(axis="x", labelrotation=90)
    plots.swatches(fig, image, where="outside lower center")
    return fig


def figure2(points: pd.DataFrame, seeds: pd.DataFrame, ticks: tuple[list[int], list[str]]):
    """Mean test sequence accuracy with its 95 % interval per method at each training fraction
    (`ch04.figure2_data`), the seeds as small dots (`ch04.figure2_seeds`); legend to the right."""
    fig, ax = plots.panels(height=3.8)
    for m, p in points.groupby("method", sort=False):
        ax.errorbar(p.x, p["mean"], yerr=[p.below, p.above], fmt="o-", capsize=3, color=colour(m), label=label(m))
    ax.scatter(seeds.x, seeds.value, s=8, c=seeds.method.map(colour), alpha=0.5)
    ax.set_xticks(*ticks)
    ax.set(xlabel="training fraction", ylabel="test sequence accuracy (%)", ylim=(-5, 105))
    plots.legend_right(ax)
    return fig


def curves(data: pd.DataFrame, *, dashes: Mapping[str, object] | None = None, height: float = 3.6):
    """Test sequence accuracy during training (long form from `frames.long_curves`, scale 100), mean
    over seeds bold over each seed's thin line; `dashes` per method; legend to the right."""
    fig, ax = plots.panels(height=height)
    style = dict(style="method", dashes=dict(dashes)) if dashes else {}
    plots.mean_interval(ax, data, x="step", y="value", interval="seeds", **style)
    ax.set(xlabel="update", ylabel="test sequence accuracy (%)")
    plots.legend_right(ax)
    return fig


def digits(data: pd.DataFrame):
    """Accuracy of each answer digit (`ch04.digit_frame`), mean bar per method, black whiskers over seeds (seaborn's
    dark grey ones read as the default's bars); legend below."""
    import seaborn as sns

    fig, ax = plots.panels(height=3.6)
    methods = list(dict.fromkeys(data.method))
    sns.barplot(data, x="digit", y="value", hue=data.method.map(label), hue_order=[label(m) for m in methods],
                palette=[colour(m) for m in methods], errorbar=("pi", 100), capsize=0.2, err_kws={"linewidth": 1, "color": "k"}, ax=ax)
    ax.set(xlabel="answer digit ($c_0$ = units)", ylabel="digit accuracy (%)", ylim=(0, 105))
    plots.legend_below(fig, ncols=3)
    return fig
