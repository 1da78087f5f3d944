"""Chapter 9's figures: perplexity and cross-entropy against context length, GOAT's key prior u(j),
passkey retrieval by length and by the key's depth, and one model's prior per head at the farthest length."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from companion.book.chapters import plots
from companion.book.labels import colour, label

__all__ = ["ppl_length", "position_ce", "key_prior", "passkey", "depth", "head_prior", "resolution"]

_TRAIN = dict(ls=":", color="k", lw=0.8)  # the training length


def _length_axis(ax, lengths: Sequence[int], train_len: int) -> None:
    """A log x axis of context lengths, a labelled tick at each of `lengths`, the training length dotted."""
    ax.axvline(train_len, **_TRAIN)
    ax.set_xscale("log")
    ax.set_xticks(list(lengths), [str(n) for n in lengths])
    ax.minorticks_off()
    ax.tick_params(axis="x", labelrotation=45 if len(lengths) > 5 else 0)


def ppl_length(curves: pd.DataFrame, lengths: Sequence[int], train_len: int, order: Sequence[str]):
    """Test perplexity per character against context length for each reading, each seed thin and the
    mean over seeds bold (`curves` is `ch09_extrapolation.length_curves(lm, "ppl")`); log–log; legend below."""
    fig, ax = plots.panels(height=4.0)
    plots.mean_interval(ax, curves, x="length", y="ppl", interval="seeds", hue_order=list(order), marker="o")
    ax.set(yscale="log", xlabel="context length (characters)", ylabel="test perplexity per character")
    _length_axis(ax, lengths, train_len)
    plots.log_ticks(ax, "y")
    plots.legend_below(fig, ncols=3)
    return fig


def position_ce(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], train_len: int):
    """Smoothed cross-entropy at each position of the window, one line per reading (`curves` is
    `ch09_extrapolation.position_curves`), the training length dotted; log x; legend below."""
    fig, ax = plots.panels(height=3.8)
    for reading, (x, ce) in curves.items():
        ax.plot(x, ce, color=colour(reading), label=label(reading), lw=1.2)
    ax.axvline(train_len, **_TRAIN)
    ax.set(xscale="log", xlabel="position in the window (characters read)", ylabel="cross-entropy (nats)")
    plots.log_ticks(ax, "x")
    plots.legend_below(fig, ncols=3)
    return fig


def key_prior(lines: pd.DataFrame, train_len: int):
    """GOAT's key prior u(j): one panel per reading (rows) and layer (columns), a colour per head (shades of
    viridis in head order when there are more heads than `plots.PALETTE` has colours), the trained prior solid
    and the seeded start dashed (`lines` is `ch09_extrapolation.key_prior_lines`); the training length dotted;
    one legend below."""
    readings, layers = list(dict.fromkeys(lines["reading"])), sorted(lines["layer"].unique())
    heads = list(dict.fromkeys(lines["head"]))
    # more heads than the cycle has colours: shades of viridis, an ordered set the colour check leaves alone
    sequence = len(heads) > len(plots.PALETTE)
    tones = plt.cm.viridis(np.linspace(0, 0.9, len(heads))) if sequence else plots.PALETTE
    fig, axes = plots.panels(len(readings), len(layers), height=2.0 * len(readings) + 1.2, sharex=True,
                             sharey=True, squeeze=False)
    for r, reading in enumerate(readings):
        for c, layer in enumerate(layers):
            ax = axes[r, c]
            panel = lines[(lines["reading"] == reading) & (lines["layer"] == layer)]
            for k, head in enumerate(heads):
                for what, dashes in (("trained", ()), ("seeded start", (4, 2))):
                    one = panel[(panel["head"] == head) & (panel["line"] == what)]
                    if len(one):
                        ax.plot(one["j"], one["u"], color=tones[k], lw=1.1, dashes=dashes,
                                label=head if what == "trained" else None, gid=plots.SEQUENCE if sequence else None)
            ax.axvline(train_len, **_TRAIN)
            ax.set_title(f"{reading}, layer {layer}" if len(layers) < 3 else f"layer {layer}")
            if c == 0:
                ax.set_ylabel(f"{reading}\nu(j) (nats)" if len(layers) >= 3 else "u(j) (nats)")
            if r == len(readings) - 1:
                ax.set_xlabel("key j")
    if (lines["line"] == "seeded start").any():
        axes[0, 0].plot([], [], color="k", lw=1.1, dashes=(4, 2), label="seeded start")
    plots.legend_below(fig, ncols=min(len(heads) + 1, 5))
    return fig


def passkey(curves: pd.DataFrame, lengths: Sequence[int], train_len: int, order: Sequence[str], chance: float = 0.1):
    """Span-token accuracy against context length for each reading, each seed thin and the mean
    over seeds bold (`curves` is `ch09_extrapolation.length_curves(pk, "span_acc")`); chance dashed, the
    training length dotted; log x; legend below."""
    fig, ax = plots.panels(height=4.0)
    plots.mean_interval(ax, curves, x="length", y="span_acc", interval="seeds", hue_order=list(order), marker="o")
    _length_axis(ax, lengths, train_len)
    ax.axhline(chance, ls="--", color="grey", lw=0.8)
    ax.set(ylim=(0, 1.02), xlabel="context length (tokens)", ylabel="span-token accuracy")
    plots.legend_below(fig, ncols=3)
    return fig


def depth(grids: Mapping[str, pd.DataFrame]):
    """Span-token accuracy by key depth (columns) and context length (rows), one annotated panel per
    reading, two per row, on one 0…1 scale with one colour bar (`grids` maps a reading to
    `ch09_extrapolation.depth_panel`)."""
    readings = list(grids)
    rows = -(-len(readings) // 2)
    fig, axes = plots.panels(rows, 2, height=2.6 * rows + 0.6, squeeze=False)
    for ax, reading in zip(axes.flat, readings):
        g = grids[reading]
        image = plots.heatmap(ax, g.to_numpy(), cmap="viridis", vmin=0, vmax=1, colorbar=False, annotate="{:.2f}",
                              xlabels=list(g.columns), ylabels=[str(n) for n in g.index], title=label(reading))
    for ax in axes[:, 0]:
        ax.set_ylabel("context length")
    for ax in axes[-1]:
        ax.set_xlabel("key depth from\n(share of filler)")
    for ax in list(axes.flat)[len(readings):]:
        ax.set_visible(False)
    plots.shared_colorbar(fig, image, axes, label="span-token accuracy")
    return fig


def head_prior(panels: Mapping[str, np.ndarray], *, per_row: int = 4):
    """One model's prior per head at the farthest length (`panels` is `ch09_extrapolation.head_prior`):
    the row-centred log-prior on one symmetric scale for all heads (the largest |K| of any head), then
    the causal prior in log10 from its smallest value to 0 (the readout's floor, −12, where the prior underflows;
    future keys blank, as in the row above), `per_row` heads a row; one colour bar per scale."""
    heads = len(panels["limit"])
    per_row = min(per_row, heads)
    block = -(-heads // per_row)
    fig, axes = plots.panels(2 * block, per_row, height=2.0 * 2 * block + 0.8, squeeze=False)
    where = np.asarray(panels["i"])
    step = max(1, len(where) // 3)
    ticks = [str(int(p)) if k % step == 0 else "" for k, p in enumerate(where)]
    lim = float(np.nanmax(panels["limit"])) or 1.0  # a flat prior (all 0) still gets a scale
    shown = {"centred": panels["centred"], "log_causal": np.where(np.isnan(panels["centred"]), np.nan, panels["log_causal"])}
    low = min(float(np.floor(np.nanmin(shown["log_causal"]))), -1.0) if np.isfinite(shown["log_causal"]).any() else -1.0
    scales = (("centred", dict(cmap="RdBu_r", vmin=-lim, vmax=lim), "row-centred log-prior K (nats)"),
              ("log_causal", dict(cmap="Blues", vmin=low, vmax=0), "causal prior (log10)"))
    for b, (key, scale, name) in enumerate(scales):
        part = axes[b * block:(b + 1) * block]
        for h, ax in enumerate(part.flat):
            if h >= heads:
                ax.set_visible(False)
                continue
            image = plots.heatmap(ax, shown[key][h], colorbar=False, xlabels=ticks, ylabels=ticks,
                                  title=f"head {h}", **scale)
            if h % per_row:
                ax.set_yticklabels([])
            else:
                ax.set_ylabel("query i")
            ax.set_xlabel("key j")
        plots.shared_colorbar(fig, image, part, label=name)
    return fig


def resolution(curves: pd.DataFrame, maps: np.ndarray, order: Sequence[str], chance: float = 10.0):
    """The digits ViT read at larger sizes (`resolution.curves`): test accuracy against the image side, resized
    (left) and on a larger canvas (middle), each seed thin and the mean bold, one line per way of giving
    positions (`order`, labels); right: GOAT's learned first-layer prior at every offset of the training grid,
    averaged over heads and seeds (`maps`, nats), centred on its mean; dashed: chance."""
    fig, axes = plots.mosaic([["resized", "prior"], ["canvas", "prior"]], height=6.0,
                             gridspec_kw={"width_ratios": [1.0, 1.25]})
    readings = list(dict.fromkeys(curves["reading"]))
    for key, reading in zip(("resized", "canvas"), readings):
        ax = axes[key]
        plots.mean_interval(ax, curves[curves.reading == reading], x="side", y="test accuracy (%)", hue="positions",
                            hue_order=list(order), interval="seeds", marker="o")
        ax.axhline(chance, ls="--", color="k", lw=0.8)
        ax.set(xlabel="image side (pixels)" if key == "canvas" else "", ylabel="test accuracy (%)", title=reading,
               ylim=(0, 100))
        sides = sorted(curves["side"].unique())
        ax.set_xticks(sides, [str(v) for v in sides])
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    mean = maps.mean(0)
    centred = mean - mean.mean()
    lim = float(np.abs(centred).max()) or 1.0
    half = mean.shape[0] // 2
    ticks = [str(v) for v in range(-half, half + 1)]
    ax = axes["prior"]
    image = plots.heatmap(ax, centred, xlabels=ticks, ylabels=ticks, cmap="RdBu_r", vmin=-lim, vmax=lim,
                          annotate="{:.1f}", colorbar=False, xlabel="column offset Δx", ylabel="row offset Δy",
                          title="GOAT's learned prior, first layer")
    plots.shared_colorbar(fig, image, ax, label="log-prior, centred (nats)", location="bottom", shrink=0.8)
    plots.legend_below(fig, [axes["resized"]], ncols=2)
    return fig
