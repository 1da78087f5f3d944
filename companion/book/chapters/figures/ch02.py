"""Chapter 2's figures: derivative sizes against query and key norms, and the saturation of the mask."""

from __future__ import annotations

from collections.abc import Sequence

from companion.book.chapters import plots

__all__ = ["norms", "saturation"]

_SYMBOL = {"mask": "m", "query": "q", "key": "k"}


def norms(scales: Sequence[float], sweep: dict):
    """Largest derivative with respect to the mask, the query and the keys (solid) and their bounds
    (dashed) against the query and key norm, log–log; the legend below."""
    fig, ax = plots.panels(height=3.6)
    for name, colour in zip(_SYMBOL, plots.PALETTE):
        ax.plot(scales, sweep[name], "o-", color=colour, label=f"∂p/∂{_SYMBOL[name]}")
        ax.plot(scales, sweep[f"bound_{name}"], "--", color=colour, alpha=0.6, label=f"bound on ∂p/∂{_SYMBOL[name]}")
    ax.set(xscale="log", yscale="log", xlabel="query and key norm $c$", ylabel="largest derivative")
    plots.log_ticks(ax)
    plots.legend_below(fig, ncols=3)
    return fig


def saturation(contrasts: Sequence[float], sat):
    """The mask derivative over open and closed entries and the weight on closed keys against the
    mask contrast, log y; the legend below."""
    fig, ax = plots.panels(height=3.4)
    ax.plot(contrasts, sat["grad_open"], "o-", label="max |∂p/∂m|, open entries")
    ax.plot(contrasts, sat["grad_closed"], "s-", label="max |∂p/∂m|, closed entries")
    ax.plot(contrasts, sat["closed_mass"], "^--", color=plots.PALETTE[5], label="weight on closed keys")
    ax.set(yscale="log", xlabel="mask contrast $c$ (open $+c$, closed $-c$)", ylabel="size")
    plots.log_ticks(ax, "y")
    plots.legend_below(fig, ncols=2)
    return fig
