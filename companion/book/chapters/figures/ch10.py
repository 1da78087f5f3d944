"""Chapter 10's figures: time and peak memory of one attention call against sequence length."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapters import plots
from companion.book.labels import colour, label

__all__ = ["time", "memory"]


def _length_axes(ax, lengths: Sequence[int], **kwargs) -> None:
    """Log–log axes against sequence length: a labelled tick per measured length, labelled decades."""
    ax.set(xscale="log", yscale="log", xlabel="sequence length L", **kwargs)
    ax.set_xticks(list(lengths), [str(n) for n in lengths])
    ax.minorticks_off()
    plots.log_ticks(ax, "y")


def time(curves: Mapping[str, Mapping[str, pd.DataFrame]], lengths: Sequence[int], device: str = "CPU"):
    """Median time per call (bars: half the interquartile range) for each variant, one panel per mode
    (`curves` is {mode: ch10_cost.variant_curves(df, mode)}); log–log; one legend below."""
    fig, axes = plots.panels(1, len(curves), height=3.9, sharey=True, squeeze=False)
    for ax, (mode, variants) in zip(axes.flat, curves.items()):
        for variant, v in variants.items():
            ax.errorbar(v.L, v.time_ms, yerr=v.iqr_ms / 2, marker="o", ms=3, color=colour(variant), label=label(variant))
        _length_axes(ax, lengths, title=f"{mode} ({device})")
        ax.tick_params(axis="x", labelrotation=45)
    axes.flat[0].set_ylabel("median time per call (ms)")
    plots.legend_below(fig, ncols=2)
    return fig


def memory(mem: pd.DataFrame, reference: np.ndarray, lengths: Sequence[int], device: str = "CPU"):
    """Peak memory of one call (forward + backward) per variant (`ch10_cost.wide` rows) with a curve
    ∝ L² (`reference`, dotted); log–log; legend below."""
    fig, ax = plots.panels(height=4.4)
    for variant, row in mem.iterrows():
        ax.plot(mem.columns, row, marker="o", ms=3, color=colour(variant), label=label(variant))
    ax.plot(mem.columns, reference, ls=":", color="k", lw=0.8, label="∝ L²")
    _length_axes(ax, lengths, ylabel="peak memory of one call (MiB)", title=f"forward + backward ({device})")
    ax.tick_params(axis="x", labelrotation=45)
    plots.legend_below(fig, ncols=2)
    return fig
