"""The scale ladder's figure: one panel per claim, the claim's measure on every rung made against the
rung's training compute, with the ledger's lines (reproduced, partly, the null) drawn across, and the
paper point (the same runs at the sources' settings) as a star once its records exist."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from companion.book.chapters import plots
from companion.book.claims import load_ledger

__all__ = ["ladder"]

LADDER_COLOUR = plots.PALETTE[0]
ASIDE_COLOUR = plots.PALETTE[4]
PAPER_COLOUR = plots.PALETTE[2]
ASIDES = ("gotu-schedule", "paper")  # drawn beside the ladder's line, not on it
# What each panel's measure is (the ledger's measure, a fraction), for its title.
TITLES = {"S2-06": "mask's cube accuracy, 2Parity", "S2-08": "mask's cube accuracy, Majority",
          "S2-13": "default's sequence accuracy", "S2-14": "mask − default, sequence accuracy",
          "S3-13": "GOAT − best baseline, span accuracy", "S3-14": "GOAT's worst depth bin at 8L"}
LINES = (("threshold", "rule: reproduced", "-", "#3a9e6f"), ("partly_threshold", "rule: partly", "--", "#e0a030"))


def _panel(ax, rows: pd.DataFrame, claim) -> None:
    main = rows[~rows.rung.isin(ASIDES)]
    aside, paper = rows[rows.rung == "gotu-schedule"], rows[rows.rung == "paper"]
    ax.plot(main.flops, main.measure, "o-", color=LADDER_COLOUR, label="ladder (ci first)")
    if len(aside):
        ax.plot(aside.flops, aside.measure, "s", color=ASIDE_COLOUR, markersize=7, label="GOTU's optimiser")
    if len(paper):
        ax.plot(paper.flops, paper.measure, "*", color=PAPER_COLOUR, markersize=12, label="paper profile (GPU)")
    for r in rows.itertuples():
        below = r.rung == "gotu-schedule"  # the aside sits beside the ladder's last rungs: label it underneath
        ax.annotate(r.rung, (r.flops, r.measure), textcoords="offset points", xytext=(-20, -14) if below else (4, 5),
                    fontsize=9)
    for key, text, style, colour in LINES:
        if key in claim.rule:
            ax.axhline(float(claim.rule[key]), linestyle=style, color=colour, linewidth=1, label=text)
    if claim.null is not None:
        ax.axhline(float(claim.null), linestyle=":", color="#8c8c8c", linewidth=1.2, label="null")
    levels = [*rows.measure, *(float(claim.rule[k]) for k, *_ in LINES if k in claim.rule)]
    levels += [float(claim.null)] if claim.null is not None else []
    pad = 0.08 * max(max(levels) - min(levels), 0.05)
    ax.set_ylim(min(levels) - pad, max(levels) + 2 * pad)
    ax.set_xscale("log")
    ax.margins(x=0.25)
    plots.log_ticks(ax, "x")
    ax.set(title=f"{claim.id}\n{TITLES.get(claim.id, 'measure')}", xlabel="training compute per run (FLOPs)",
           ylabel="measure (fraction)")


def ladder(frame: pd.DataFrame, claims: Sequence[str]):
    """One panel per claim of `claims` from `companion.book.chapters.ladder.ladder_frame` (rungs made only);
    a legend below."""
    ledger = load_ledger()
    fig, axes = plots.panels(1, len(claims), height=3.6, squeeze=False)
    for ax, cid in zip(axes.flat, claims):
        _panel(ax, frame[frame.claim == cid], ledger[cid])
    plots.legend_below(fig)
    return fig
