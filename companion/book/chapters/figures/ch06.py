"""Chapter 6's figures: accuracy against mask contrast per placement, drift of the mask and of the
attention pattern, and the drift of the query–key forms with and without QK normalisation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from companion.book.chapters import plots
from companion.book.labels import task_title

__all__ = ["contrast", "drift", "qk_drift"]

_BASELINE = {"no mask": "no mask (default)", "all-zero": "all-zero mask"}


def contrast(runs: Mapping[str, pd.DataFrame], baselines: Mapping[str, Mapping[str, float]], contrasts: Sequence[float]):
    """Per task (panel): full-cube accuracy against mask contrast for each placement (mean, 95 % bars;
    `ch06.accuracy_runs`), with the model without a mask (solid grey) and the all-zero mask (dashed
    grey; `ch06.baseline_accuracy`); log contrast axis labelled ±c; one legend below."""
    tasks = list(runs)
    fig, axes = plots.panels(1, len(tasks), height=3.7, sharey=True, squeeze=False)
    for ax, task in zip(axes.flat, tasks):
        for (placement, acc), ls in zip(baselines[task].items(), ("-", "--")):
            ax.axhline(acc, color="grey", ls=ls, lw=1, label=_BASELINE.get(placement, placement))
        plots.mean_interval(ax, runs[task], x="contrast", y="acc", hue="placement", err_style="bars", marker="o",
                            err_kws={"capsize": 3})
        ax.set(xscale="log", title=task_title(task), xlabel="mask contrast", ylabel="full-cube accuracy (%)")
        ax.set_xticks(list(contrasts), [f"±{c:g}" for c in contrasts])
        ax.minorticks_off()
        ax.label_outer()
    plots.legend_below(fig, ncols=3)
    return fig


def drift(curves: Mapping[str, pd.DataFrame], titles: Mapping[str, str]):
    """Drift of the mask and of the attention pattern (`ch06.placement_drift` per kind), one panel each,
    placements by colour and contrasts by line style; the mask panel on a symlog axis; legend below."""
    fig, axes = plots.panels(1, len(curves), height=3.6, squeeze=False)
    for ax, (kind, data) in zip(axes.flat, curves.items()):
        plots.mean_interval(ax, data, x="step", y="drift", hue="placement", style="contrast", interval="seeds")
        ax.set(xlabel="step", ylabel="", title=titles[kind])
        if kind == "mask":
            ax.set_yscale("symlog", linthresh=1e-3)
            ax.set_ylim(bottom=0)
    plots.legend_below(fig, ncols=4)
    return fig


def qk_drift(curves: Mapping[tuple[str, str], pd.DataFrame], titles: Mapping[str, str]):
    """Drift of the query–key forms and of the attention pattern (`ch06.qk_drift_curves`), one row per
    task and one column per kind, methods by colour, QK normalisation by line style; legend below."""
    tasks = list(dict.fromkeys(task for task, _ in curves))
    kinds = list(dict.fromkeys(kind for _, kind in curves))
    fig, axes = plots.panels(len(tasks), len(kinds), height=2.7 * len(tasks) + 0.6, squeeze=False, sharex=True)
    for row, task in zip(axes, tasks):
        for ax, kind in zip(row, kinds):
            plots.mean_interval(ax, curves[(task, kind)], x="step", y="drift", style="QK", interval="seeds")
            ax.set(xlabel="step", ylabel="", title=f"{task_title(task)}: {titles[kind]}")
            ax.label_outer()
    plots.legend_below(fig, ncols=4)
    return fig
