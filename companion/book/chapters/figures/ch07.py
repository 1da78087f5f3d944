"""Chapter 7's figures: the sink mass against the content signal ω (Figure 2c), on the copy-mixture task and on
the character-LM control; and on the sink control of the decisive search, where GOAT grows a sink."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from companion.book.chapters import plots
from companion.book.labels import colour, label

__all__ = ["sink", "sink_control"]


def sink(curves: Mapping[str, pd.DataFrame], control: Mapping[str, pd.DataFrame]):
    """Sink mass (head-mean attention on key 0) against ω, one panel per task, one line per method: the
    mean over runs of each bin (`curves` and `control` are `ch07_transport.sink_curves`, index (run, bin),
    columns omega and p0); log ω axis; one legend below."""
    fig, axes = plots.panels(1, 2, height=3.5, sharey=True)
    for ax, shown, title in ((axes[0], curves, "copy-mixture"), (axes[1], control, "char-LM control")):
        for method, curve in shown.items():
            mean = curve.groupby("bin").mean()
            ax.plot(mean["omega"], mean["p0"], "o-", ms=3, color=colour(method), label=label(method))
        ax.set(xscale="log", title=title, xlabel="content signal ω\n(head mean, position-matched bins)")
        plots.log_ticks(ax, "x")
    axes[0].set_ylabel("sink mass\n(head-mean attention on key 0)")
    plots.legend_below(fig)
    return fig


def sink_control(curves: Mapping[str, pd.DataFrame], factor: int):
    """As `sink`, on the sink control alone (passkey sequences read as a language model) at `factor` times its `ci`
    updates: the mean over runs of each bin, one line per method, with each run's line faint behind it."""
    fig, ax = plots.panels(1, 1, height=3.2)
    for method, curve in curves.items():
        for _, run in curve.groupby("run"):
            ax.plot(run["omega"], run["p0"], "-", lw=0.6, alpha=0.35, color=colour(method))
        mean = curve.groupby("bin").mean()
        ax.plot(mean["omega"], mean["p0"], "o-", ms=3, color=colour(method), label=label(method))
    ax.set(xscale="log", ylim=(0, 1), title=f"sink control (passkey read as a language model), {factor}× its updates",
           xlabel="content signal ω (head mean, position-matched bins)", ylabel="sink mass\n(head-mean attention on key 0)")
    plots.log_ticks(ax, "x")
    plots.legend_below(fig)
    return fig
