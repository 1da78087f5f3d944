"""Sink mass against content signal (GOAT's Figure 2c) as the records hold it: the `sink_curve` readout of each run's
last layer (`companion.transport.sink_reading`) as frames, the share of sink mass each run sheds from its lowest to
its highest position-matched ω bin, and the head that puts the most attention on key 0. Chapter 7 reads these on
copy-mixture, the char-LM control and the sink control of its decisive search (`sink_search`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapters.frames import readout
from companion.book.labels import label
from companion.transport import matched_bins

__all__ = ["SINK_CURVE", "matched_curve", "sink_curve", "sink_curves", "mean_curve", "shed", "shed_share", "sink_heads",
           "pooled_shed", "drops", "edge"]

SINK_CURVE = "sink_curve"  # the readout of Figure 2c on the last layer (`companion.transport`)


def matched_curve(omega: np.ndarray, p0: np.ndarray, bins: int = 8) -> pd.DataFrame:
    """`companion.transport.matched_bins` (as the `SINK_CURVE` readout stores it) as a frame, index "bin": `omega`,
    `p0` are (sequences, positions); at each position the sequences are cut into `bins` equal-count bins by rank of
    ω, and each bin's mean ω and mean p0 are averaged over positions."""
    om, p = matched_bins(omega, p0, bins)
    return pd.DataFrame({"bin": range(bins), "omega": om, "p0": p}).set_index("bin")


def sink_curve(records: Sequence) -> pd.DataFrame:
    """Figure 2c per run (`SINK_CURVE` readout, last layer): head-mean ω against head-mean attention on key 0 (the
    sink mass), in position-matched bins. Index (run, bin), run 0, 1, … in the order of `records`."""
    frames = []
    for r, record in enumerate(records):
        s = readout(record, SINK_CURVE)
        frames.append(pd.DataFrame({"bin": range(len(s["p0"])), "omega": s["omega"], "p0": s["p0"], "run": r}))
    return pd.concat(frames).set_index(["run", "bin"])


def sink_curves(runs: Mapping[str, Sequence]) -> dict[str, pd.DataFrame]:
    """{method: `sink_curve` of its runs}."""
    return {m: sink_curve(records) for m, records in runs.items()}


def mean_curve(curve: pd.DataFrame) -> pd.DataFrame:
    """A `sink_curve` averaged over runs, bin by bin."""
    return curve.groupby("bin").mean()


def shed(curve: pd.DataFrame) -> pd.Series:
    """Per run of a `sink_curve`: sink mass in the lowest-ω bin minus that in the highest."""
    p0 = curve["p0"].unstack("bin")
    return p0.iloc[:, 0] - p0.iloc[:, -1]


def shed_share(curve: pd.DataFrame) -> pd.Series:
    """Per run: `shed` / p0(lowest bin), 1 when ≈ 1 → ≈ 0 as in the source, whatever share of heads sinks."""
    return shed(curve) / curve["p0"].unstack("bin").iloc[:, 0]


def sink_heads(runs: Mapping[str, Sequence]) -> pd.DataFrame:
    """Per method and run, the head with the most attention on key 0 ("head"; "mean p0" over queries ≥ 1) and its p0
    in its own lowest and highest position-matched ω bin. Index (model label, run)."""
    out = []
    for m, records in runs.items():
        for r, record in enumerate(records):
            s = readout(record, SINK_CURVE)
            share = np.asarray(s["head_mean_p0"])
            h = int(share.argmax())
            out.append({"model": label(m), "run": r, "head": h, "mean p0": float(share[h]),
                        "p0, lowest ω bin": float(s["head_p0"][h][0]),
                        "p0, highest ω bin": float(s["head_p0"][h][-1])})
    return pd.DataFrame(out).set_index(["model", "run"])


def pooled_shed(records: Sequence) -> float:
    """The chapter's former measure, the readout's "pooled_drop" (every (head, query) pooled, cut at ω quantiles
    without matching positions; key-0 attention in the lowest bin minus the highest), averaged over runs."""
    return float(np.mean([readout(r, SINK_CURVE)["pooled_drop"] for r in records]))


def drops(curves: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """Per method, the mean over runs of `shed_share`."""
    return {m: float(shed_share(c).mean()) for m, c in curves.items()}


def edge(drops: Mapping[str, float]) -> float:
    """GOAT's share shed minus the larger share of the other methods."""
    return drops["goat"] - max(v for m, v in drops.items() if m != "goat")
