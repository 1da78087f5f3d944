"""Chapter 5's figures: digits with their patch grid and the image mask, paired differences against
the default, accuracy during training, ViT attention maps, the language model's mask and perplexity."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from companion.book.chapters import plots
from companion.book.chapters.stats import summarize
from companion.book.labels import colour, label, task_title

__all__ = ["digits", "paired", "curves", "maps", "band", "perplexity"]

def digits(images: Sequence[np.ndarray], classes: Sequence[int], pattern: np.ndarray, *, grid=(1.5, 3.5, 5.5)):
    """The digits (two rows of pictures, their patch grid drawn at `grid`) and, right, the mask over the
    patches with its closed/open legend."""
    half = -(-len(images) // 2)
    layout = [[f"d{i}" for i in range(r * half, (r + 1) * half)] + ["mask"] for r in range(2)]
    fig, axes = plots.mosaic(layout, height=2.9, width_ratios=[1] * half + [2.2])
    for i, (img, y) in enumerate(zip(images, classes)):
        ax = axes[f"d{i}"]
        plots.picture(ax, img, cmap="Greys", vmin=0, vmax=255)
        for t in grid:
            ax.axhline(t, color=plots.PALETTE[0], lw=0.6); ax.axvline(t, color=plots.PALETTE[0], lw=0.6)
        ax.set_title(str(y))
    for i in range(len(images), 2 * half):
        axes[f"d{i}"].set_visible(False)
    image = plots.binary_map(axes["mask"], pattern, title=f"mask ({len(pattern)} × {len(pattern)})")
    axes["mask"].set_xticks([]); axes["mask"].set_yticks([])
    plots.swatches(fig, image)
    return fig


def paired(diffs: pd.DataFrame, order: Sequence[str]):
    """Each method minus the default, seed by seed (dots) and the mean with its 95 % Student-t interval
    (black): the interval of Chapter 5's paired table, `companion.book.chapters.stats.summarize` of the differences;
    the first image set of `diffs` (`ch05_images.paired_frame`)."""
    import seaborn as sns

    diffs = diffs[diffs.dataset == diffs.dataset.iloc[0]]

    fig, ax = plots.panels(height=3.0)
    with plots.fixed_jitter():
        sns.stripplot(data=diffs, y="method", x="difference", order=order, hue="method", hue_order=order,
                      palette={m: colour(m) for m in order}, alpha=0.45, size=4, legend=False, ax=ax)
    means = [summarize(diffs.loc[diffs.method == m, "difference"]) for m in order]
    ax.errorbar([s.mean for s in means], range(len(order)), xerr=[[s.mean - s.lo for s in means], [s.hi - s.mean for s in means]],
                fmt="d", color="k", capsize=3, zorder=3)
    ax.axvline(0, color="k", lw=0.8, ls="--")
    ax.set_yticks(range(len(order)), [label(m) for m in order])
    ax.set(xlabel="test accuracy minus default (points), paired by seed", ylabel="")
    return fig


def curves(data: pd.DataFrame, dataset: str, methods: Sequence[str], y: str = "test accuracy (%)"):
    """Test accuracy during training, mean over seeds with its 95 % interval; legend to the right."""
    fig, ax = plots.panels(height=3.4)
    plots.mean_interval(ax, data, x="step", y=y, interval="ci", hue_order=list(methods))
    ax.set_title(task_title(dataset))
    plots.legend_right(ax)
    return fig


def maps(panels: Sequence[tuple[str, object]], *, columns: int = 3, vmax: float | None = None):
    """Attention maps, `columns` panels per method row, on one 0…`vmax` scale
    (`plots.map_grid`; None: the largest weight shown, so that the scale holds every map)."""
    return plots.map_grid(panels, columns=columns, vmax=vmax, panel_height=2.1, extra_height=0.4)


def band(pattern: np.ndarray, length: int, window: int):
    """The language model's causal local mask, with its closed/open legend."""
    fig, ax = plots.panels(height=3.4, width=4.4)
    image = plots.binary_map(ax, pattern, title=f"causal local mask\n({length} × {length}, W = {window})")
    ax.set(xlabel="key", ylabel="query")
    ax.set_xticks([]); ax.set_yticks([])
    plots.swatches(fig, image)
    return fig


def perplexity(pairs: pd.DataFrame, interval):
    """Left: each seed's test perplexity without and with the mask (joined), means with 95 % intervals;
    right: the relative change per seed and the 95 % interval of its mean (band)."""
    import seaborn as sns

    fig, axes = plots.panels(1, 2, height=3.2, gridspec_kw={"width_ratios": [1.2, 1]})
    long = pairs.melt(id_vars="seed", value_vars=["default", "mask"], var_name="method", value_name="test perplexity")
    sns.lineplot(data=long, x="method", y="test perplexity", units="seed", estimator=None, color=plots.INK,
                 lw=0.8, ax=axes[0])
    sns.pointplot(data=long, x="method", y="test perplexity", hue="method",
                  palette={m: colour(m) for m in ("default", "mask")}, errorbar=("ci", 95), seed=0, legend=False,
                  ax=axes[0])
    axes[0].set_xticks([0, 1], ["Default", "Local mask"])
    axes[0].set_xlabel("")
    with plots.fixed_jitter():
        sns.stripplot(data=pairs.assign(pct=100 * pairs["relative change"]), x="pct", color=colour("mask"), size=5,
                      ax=axes[1])
    axes[1].axvline(0, color="k", lw=0.8, ls="--")
    axes[1].axvspan(100 * interval.lo, 100 * interval.hi, color=colour("mask"), alpha=0.15)
    axes[1].set(xlabel="mask / default − 1 (%) per seed;\nband: 95 % interval", ylabel="")
    return fig
