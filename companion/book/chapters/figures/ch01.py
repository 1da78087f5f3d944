"""Chapter 1's figures: the causal rule and its weights, blocking against a zero score, the
permutation gap, and the sinusoidal encoding."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from companion.book.chapters import plots
from companion.book.prose import ROUNDOFF

__all__ = ["causal", "blocking", "equivariance", "encoding"]


def causal(tokens: Sequence[str], allowed, weights):
    """Left: the causal rule (1 = visible); right: the attention weights under it; one 0–1 colour bar."""
    fig, axes = plots.panels(1, 2, height=3.0)
    kw = dict(xlabels=list(tokens), ylabels=list(tokens), vmin=0, vmax=1, xlabel="key", ylabel="query", colorbar=False)
    plots.heatmap(axes[0], np.asarray(allowed, dtype=float), annotate="{:.0f}", title="visible (1) or blocked (0)", **kw)
    image = plots.heatmap(axes[1], weights, annotate="{:.2f}", title="attention weights", **kw)
    plots.shared_colorbar(fig, image, axes, label="visibility · weight")
    return fig


def blocking(weights: dict[str, list[float]], tokens: Sequence[str]):
    """One query's weights over the keys in each case (bars), the cases' legend to the right."""
    fig, ax = plots.panels(height=3.0)
    plots.grouped_bars(ax, weights, list(tokens), ylabel="weight", title=f"query: {tokens[-1]}")
    ax.set_ylim(0, 0.8)
    return fig


def equivariance(gaps: dict[str, Sequence[float]], floor: float = ROUNDOFF):
    """The permutation gap per setting, log axis; gaps under float64's rounding floor (exact zeros
    included) drawn at `floor`, the same on every processor, and the floor marked."""
    fig, ax = plots.panels(height=2.8)
    settings = list(gaps)
    ax.boxplot([np.maximum(gaps[s], floor) for s in settings], orientation="horizontal", widths=0.5)
    ax.axvline(floor, color="0.6", lw=0.8, ls=":")
    ax.set_yticks(range(1, len(settings) + 1), settings)
    ax.set_xscale("log")
    ax.set_xlabel(r"$\max |f(PX) - P f(X)|$ (dotted: float64 rounding, gaps below it drawn on it)")
    plots.log_ticks(ax, "x")
    return fig


def encoding(pe):
    """The sinusoidal encoding, positions down and coordinates across, with its −1…1 colour bar."""
    fig, ax = plots.panels(height=3.6)
    plots.heatmap(ax, pe, cmap="RdBu_r", vmin=-1, vmax=1, xlabel="coordinate", ylabel="position $p$",
                  title=r"$\mathrm{PE}_{p,\cdot}$")
    return fig
