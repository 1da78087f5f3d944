"""Figure helpers shared by the chapters: one style, small functions that draw onto given axes.

Colours and labels come from `companion.book.labels` (a method has one colour in every chapter);
`mean_interval` is the one way a chapter draws a quantity's mean over seeds with its interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from companion.book.labels import colour, label

__all__ = ["use_style", "heatmap", "grouped_bars", "mean_interval", "PALETTE"]

# The cycle for things that are not methods (placements, layers, lengths…).
PALETTE = ("#1b6ca8", "#e07b39", "#3a9e6f", "#b5485d", "#7d5ba6", "#8c8c8c")


def use_style() -> None:
    """The book's figure and table style (call once per chapter): tables show whole cells."""
    import pandas as pd

    pd.set_option("display.max_colwidth", None)
    plt.rcParams.update({
        "figure.dpi": 110, "savefig.dpi": 110, "figure.figsize": (6.4, 3.6),
        "axes.spines.top": False, "axes.spines.right": False, "axes.grid": False,
        "axes.prop_cycle": plt.cycler(color=PALETTE), "font.size": 10, "axes.titlesize": 10,
        "legend.frameon": False,
    })


def heatmap(ax, values, *, xlabels=None, ylabels=None, cmap="Blues", vmin=None, vmax=None,
            annotate: str | None = None, title: str = "", xlabel: str = "", ylabel: str = "", colorbar=True):
    """Matrix as an image, rows top to bottom; `annotate` is a format like "{:.2f}" for cell text."""
    values = np.asarray(values, dtype=float)
    im = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if xlabels is not None:
        ax.set_xticks(range(len(xlabels)), xlabels)
    if ylabels is not None:
        ax.set_yticks(range(len(ylabels)), ylabels)
    if annotate:
        hi = np.nanmax(values) if vmax is None else vmax
        lo = np.nanmin(values) if vmin is None else vmin
        for (r, c), v in np.ndenumerate(values):
            dark = (v - lo) > 0.6 * (hi - lo) if hi > lo else False
            ax.text(c, r, annotate.format(v), ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return im


def grouped_bars(ax, groups: dict[str, list[float]], labels: list[str], *, ylabel: str = "", title: str = "",
                 annotate: str = "{:.3f}"):
    """One cluster of bars per label, one bar per group (dict order), values written on top."""
    n = len(groups)
    width = 0.8 / n
    x = np.arange(len(labels))
    for g, (name, vals) in enumerate(groups.items()):
        bars = ax.bar(x + (g - (n - 1) / 2) * width, vals, width, label=name, color=PALETTE[g % len(PALETTE)])
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), annotate.format(v), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, labels)
    ax.set(ylabel=ylabel, title=title)
    ax.legend()


def mean_interval(ax, data, *, x: str, y: str, hue: str = "method", interval: str = "ci",
                  hue_order: Sequence[str] | None = None, labels: dict | None = None, **kwargs):
    """Mean of `y` over seeds against `x`, one line per `hue` value, with a band: `interval` "ci"
    (95 % bootstrap interval of the mean, fixed seed), "range" (min to max) or "sd".

    `data` is long form (one row per seed and x: `companion.book.frames.long_curves`). Method names
    get the book's colours and labels; `labels` overrides a hue value's legend text.
    """
    import seaborn as sns

    errorbar = {"ci": ("ci", 95), "range": ("pi", 100), "sd": "sd"}[interval]
    order = list(hue_order) if hue_order is not None else list(dict.fromkeys(data[hue]))
    palette = {h: colour(h) if hue == "method" else PALETTE[i % len(PALETTE)] for i, h in enumerate(order)}
    sns.lineplot(data=data, x=x, y=y, hue=hue, hue_order=order, palette=palette, errorbar=errorbar,
                 seed=0, ax=ax, **kwargs)
    names = {h: (labels or {}).get(h, label(h) if hue == "method" else str(h)) for h in order}
    handles, texts = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, [names.get(t, t) for t in texts])
    return ax
