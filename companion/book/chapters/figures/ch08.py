"""Chapter 8's figures: the gap to the Bayes-optimal loss during training, and GOAT's learned prior per
head (the paper's Figure 1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapters import plots

__all__ = ["gap", "figure1"]


def gap(curves: pd.DataFrame, order: Sequence[str]):
    """Test cross-entropy minus the Bayes value against the update, each seed thin and the mean over
    seeds bold (`curves` is `ch08_copy_mixture.gap_curves`, long form); log y; legend to the right."""
    fig, ax = plots.panels(height=3.4)
    plots.mean_interval(ax, curves, x="step", y="value", interval="seeds", hue_order=list(order))
    ax.set(yscale="log", xlabel="update", ylabel="cross-entropy − Bayes (nats)")
    plots.log_ticks(ax, "y")
    plots.legend_right(ax)
    return fig


def figure1(panels: Mapping[str, np.ndarray], lag: int):
    """One row per head: (a) the sink term u(j), (b) the relative term κ(Δ) with Δ = lag − 1 dotted,
    (c) the row-centred log-prior on one symmetric scale for all heads (the largest |K| of any head) and
    (d) the causal prior on 0…1; a colour bar under each heat-map column, one per scale (`panels` is
    `ch08_copy_mixture.figure1_panels`)."""
    heads = len(panels["limit"])
    # the colour bars get a row of their own (a bar placed under a column subset squeezes the left margin)
    fig, grid = plots.panels(heads + 1, 4, height=1.55 * heads + 1.3, squeeze=False,
                             gridspec_kw={"height_ratios": [1] * heads + [0.07]})
    axes, bars = grid[:heads], grid[heads]
    lim = float(np.nanmax(panels["limit"])) or 1.0  # a flat prior (all 0) still gets a scale
    for h, (a, b, c, d) in enumerate(axes):
        a.plot(panels["sink"][h], color=plots.PALETTE[0])
        b.plot(panels["kappa"][h], color=plots.PALETTE[1])
        b.axvline(lag - 1, ls=":", color="k", lw=0.8)
        a.set_ylabel(f"head {h}")
        centred = plots.heatmap(c, panels["centred"][h], cmap="RdBu_r", vmin=-lim, vmax=lim, colorbar=False)
        causal = plots.heatmap(d, panels["causal"][h], cmap="Blues", vmin=0, vmax=1, colorbar=False)
        for ax in (c, d):
            ax.set_yticks([])
            if h < heads - 1:
                ax.set_xticks([])
        if h < heads - 1:
            a.tick_params(labelbottom=False); b.tick_params(labelbottom=False)
    for ax, title in zip(axes[0], ("(a) u(j)", "(b) κ(Δ)", "(c) row-centred K", "(d) causal prior")):
        ax.set_title(title)
    for ax, xlabel in zip(axes[-1], ("key j", "Δ = i − j", "key j (rows: query i)", "key j (rows: query i)")):
        ax.set_xlabel(xlabel)
    bars[0].set_visible(False); bars[1].set_visible(False)
    fig.colorbar(centred, cax=bars[2], orientation="horizontal", label="K (nats)")
    fig.colorbar(causal, cax=bars[3], orientation="horizontal", label="prior weight")
    return fig
