"""Chapter 3's figures: the tasks' open patterns, accuracy during training, and Figure 5's attention maps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapters import plots
from companion.book.labels import colour, label, task_title

__all__ = ["masks", "by_seed", "curves", "maps"]

SPLIT_TITLE = {"unseen": "unseen set", "seen": "seen set", "cube": "full cube"}

def masks(patterns: Mapping[str, object], tasks: Sequence[str]):
    """Each task's open pattern over the CLS token and the bit tokens (dark = open), 2 × 2 panels
    and one closed/open legend."""
    fig, axes = plots.panels(2, 2, height=5.6)
    n = len(np.asarray(patterns[tasks[0]]))
    ticks = ["CLS"] + [str(i) for i in range(n - 1)]
    for ax, fn in zip(axes.flat, tasks):
        image = plots.binary_map(ax, patterns[fn], title=task_title(fn))
        ax.set_xticks(range(0, n, 3), ticks[::3])
        ax.set_yticks(range(0, n, 3), ticks[::3])
    for ax in axes.flat[len(tasks):]:
        ax.set_visible(False)
    plots.swatches(fig, image)
    return fig


def by_seed(points: pd.DataFrame, interpolator: Mapping[str, Mapping[str, float]]):
    """Accuracy of every run (`ch03.seed_points`): a row of panels per task, a column per split, a row
    of dots per method (each seed a dot, spread vertically by seed; the mean over seeds a bar); the
    minimum-degree interpolator's accuracy (`interpolator[task][split]`, a fraction) dashed."""
    tasks, splits = list(dict.fromkeys(points.task)), list(dict.fromkeys(points.split))
    methods = list(dict.fromkeys(points.method))
    row = {m: i for i, m in enumerate(methods)}
    seeds = sorted(set(points.seed))
    spread = {s: 0.5 * (i - (len(seeds) - 1) / 2) / max(len(seeds), 1) for i, s in enumerate(seeds)}
    fig, axes = plots.panels(len(tasks), len(splits), height=1.55 * len(tasks) + 0.7, sharex=True, sharey=True,
                             squeeze=False)
    for r, fn in enumerate(tasks):
        for c, split in enumerate(splits):
            ax = axes[r, c]
            if split in interpolator[fn]:
                ax.axvline(100 * interpolator[fn][split], ls="--", color="k", lw=0.8,
                           label="minimum-degree interpolator")
            sub = points[(points.task == fn) & (points.split == split)]
            ax.scatter(sub.accuracy, sub.method.map(row) + sub.seed.map(spread), s=9, alpha=0.6,
                       c=[colour(m) for m in sub.method], linewidths=0)
            means = sub.groupby("method", sort=False).accuracy.mean()
            ax.scatter(means.to_numpy(), [row[m] for m in means.index], marker="|", s=160, linewidths=2,
                       c=[colour(m) for m in means.index])
            ax.set_title(f"{task_title(fn)}, {SPLIT_TITLE[split]}")
    axes[0, 0].set_yticks(range(len(methods)), [label(m) for m in methods])
    axes[0, 0].set(ylim=(len(methods) - 0.5, -0.5), xlim=(-5, 105))
    for ax in axes[-1]:
        ax.set_xlabel("accuracy (%)")
    plots.legend_below(fig, axes=[axes[0, 0]])
    return fig


def curves(curves: Mapping[str, pd.DataFrame], interpolator: Mapping[str, float],
           y: str = "full-cube accuracy (%)"):
    """Accuracy during training per task (2 × 2 panels; each seed thin, the mean bold), the
    minimum-degree interpolator's accuracy dashed; one legend below."""
    tasks = list(curves)
    fig, axes = plots.panels(2, 2, height=5.8, sharey=True, sharex=True)
    for ax, fn in zip(axes.flat, tasks):
        # the reference first, so that the method legend `mean_interval` builds lists it too
        ax.axhline(interpolator[fn], ls="--", color="k", lw=0.8, label="minimum-degree interpolator")
        plots.mean_interval(ax, curves[fn], x="step", y=y, interval="seeds")
        ax.set_title(task_title(fn))
        ax.label_outer()
    for ax in axes.flat[len(tasks):]:
        ax.set_visible(False)
    plots.legend_below(fig, ncols=3)
    return fig


def maps(panels: Sequence[tuple[str, object]], *, columns: int = 4, vmax: float | None = None):
    """Attention maps, one row per method, `columns` per row, on one 0…`vmax` scale
    (`plots.map_grid`; None: the largest weight shown, so that the scale holds every map)."""
    return plots.map_grid(panels, columns=columns, vmax=vmax, panel_height=1.75, extra_height=0.5)
