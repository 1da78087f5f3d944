"""Chapter 8, learning a prior: the copy-mixture models (GOAT, RoPE, ALiBi) and what GOAT's prior learned.

`load` and `decide` have the shape every chapter module shares (`companion.book.chapter`); the
other names in `__all__` build the chapter's tables, figures and claim readings from their parts.

GOAT's first-layer prior is measured at the end of each GOAT run and stored in its record (the
`PRIOR` readout, `companion.goat.prior_readout`: u and κ per head): everything here reads records;
nothing trains and no model is rebuilt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.chapters.budget import MODEL, budget as run_budget
from companion.book.chapters.frames import by_method, long_curves, readout, records_frame, run_summary
from companion.book.labels import label
from companion.book.parameters import check_parameters
from companion.book.chapters.stats import summarize
from companion.book.chapters.entropic import prior_views
from companion.config import RunConfig
from companion.experiments import get_experiment
from companion.experiments.copy_mixture import METHODS
from companion.reading import read_runs
from companion.tasks import make_task

__all__ = ["SEEDS", "PRIOR", "SINK_MARGIN", "WINDOW", "LOCAL", "goat_config", "budget_table", "load", "frame_of", "run_summary",
           "gap_curves", "final_table", "figure1_panels", "head_structure", "structure", "per_seed", "CLAIMS",
           "prose_numbers", "decide"]

SEEDS = (0, 1, 2)  # the chapter's seeds: what `load` reads when the notebook's `seeds` is None
PRIOR = "goat_prior"  # the readout of GOAT's first-layer prior, u and κ per head (`companion.goat`)

SINK_MARGIN = 2.0  # nats by which u(0) must stand above the median u(j) for a head to count as a sink (S3-05)
WINDOW = 8  # κ's peak is sought among the offsets Δ = 0 … WINDOW (S3-06)
LOCAL = "local (peak at Δ = lag − 1)"


# ---------------------------------------------------------------- the task and the runs

def goat_config(profile: str) -> RunConfig:
    """The GOAT run of `copymix` at `profile` (seed 0): every method shares its task, heads and budget."""
    return get_experiment("copymix").configs(profile)["goat"]


def budget_table(cfg: RunConfig, seeds: Sequence[int] | None = None) -> pd.DataFrame:
    """The model and training budget of `cfg` (one column, named after the profile), rows as
    `chapters.budget` names them, with GOAT's frequencies and lanes and the number of seeds (None: `SEEDS`)."""
    rank = cfg.model.prior.goat_rank
    budget = {**run_budget(cfg, MODEL), "GOAT frequencies R": rank, "GOAT lanes (of the head width)": 2 * rank + 1,
              **run_budget(cfg, ("Optimiser", "Learning rate", "Learning-rate schedule", "Batch size", "Updates")),
              "Seeds": len(SEEDS if seeds is None else seeds)}
    return pd.Series(budget, name=cfg.profile).to_frame()


def load(profile: str, seeds: Sequence[int] | None = None, *, store=None) -> Runs:
    """The `copymix` runs (block "copymix": {method: [Record in seed order]}, methods in
    `companion.experiments.copy_mixture.METHODS` order); `seeds` None means `SEEDS`; `store` as in
    `companion.reading.read_runs`."""
    seeds = list(SEEDS if seeds is None else seeds)
    check_parameters(profile, seeds)
    found = read_runs("copymix", profile, seeds, store=store)
    return Runs(profile, seeds, {"copymix": by_method(found, METHODS)})


def frame_of(runs: Mapping[str, Sequence]) -> pd.DataFrame:
    """`records_frame` of every run, methods in order."""
    return records_frame([r for records in runs.values() for r in records])


def gap_curves(runs: Mapping[str, Sequence]) -> pd.DataFrame:
    """The test gap to the Bayes-optimal cross-entropy of every run, long form (method, seed, step, value)."""
    return long_curves([r for records in runs.values() for r in records], "test", "gap")


def final_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Final test cross-entropy, gap to Bayes and accuracy per method: "mean ± std" over seeds."""
    final = frame.assign(method=frame["method"].map(label)).groupby("method", sort=False)
    out = final[["test.ce", "test.gap", "test.acc"]].agg(lambda v: f"{v.mean():.3f} ± {v.std():.3f}")
    return out.rename(columns=FINAL_COLUMNS)


FINAL_COLUMNS = {"test.ce": "test cross-entropy (nats)", "test.gap": "above Bayes-optimal (nats)",
                 "test.acc": "next-token accuracy"}


# ---------------------------------------------------------------- Figure 1 and the heads

def figure1_panels(record) -> dict[str, np.ndarray]:
    """`companion.book.chapters.entropic.prior_views` of a GOAT run's first-layer prior (its `PRIOR` readout)
    over the model's positions, plus "limit" (h,): the largest |row-centred K| of each head (a
    symmetric colour range)."""
    prior = readout(record, PRIOR)
    panels = prior_views(prior["sink"], prior["kappa"])
    return {**panels, "limit": np.nanmax(np.abs(panels["centred"]), axis=(1, 2))}


def head_structure(prior: dict, *, lag: int, window: int = WINDOW) -> pd.DataFrame:
    """Per head of a GOAT prior (a `PRIOR` readout: "sink" u_h(j), "kappa" κ_h(Δ)): sink strength
    u(0) − median_j>0 u(j), the offset in 0…window where κ peaks, κ's peak height above its median
    over that window, and whether the peak sits at Δ = lag − 1 (the local copy's key). Index "head"."""
    sink, kappa = np.asarray(prior["sink"], dtype=float), np.asarray(prior["kappa"], dtype=float)
    out = []
    for h in range(len(sink)):
        u, k = sink[h], kappa[h][: window + 1]
        out.append({"head": h, "sink strength": float(u[0] - np.median(u[1:])),
                    "κ peak at Δ": int(np.argmax(k)), "κ peak height": float(k.max() - np.median(k)),
                    LOCAL: bool(np.argmax(k) == lag - 1)})
    return pd.DataFrame(out).set_index("head")


def structure(records: Sequence, *, lag: int) -> pd.DataFrame:
    """`head_structure` of every GOAT record's `PRIOR` readout, index (seed, head)."""
    return pd.concat({r.seed: head_structure(readout(r, PRIOR), lag=lag) for r in records}, names=["seed"])


def per_seed(heads: pd.DataFrame) -> pd.DataFrame:
    """Per seed: the largest sink strength of its heads ("sink") and whether some head is local ("local")."""
    return heads.groupby("seed").agg(sink=("sink strength", "max"), local=(LOCAL, "any"))


# ---------------------------------------------------------------- verdicts and prose

def _counts(heads: pd.DataFrame) -> tuple[int, int, int]:
    """(seeds with a sink head, seeds with a local head, seeds)."""
    s = per_seed(heads)
    return int((s["sink"] >= SINK_MARGIN).sum()), int(s["local"].sum()), len(s)


def _gap(a: dict):
    return summarize(a["frame"][a["frame"].method == "goat"]["test.gap"].to_numpy())


# Over {"frame": `frame_of`, "heads": `structure`}. S3-07: GOAT's mean test gap to the Bayes-optimal cross-entropy (4
# decimals; its spread over seeds beside it); S3-05 and S3-06: the share of seeds with a sink head (u(0) ≥
# `SINK_MARGIN` nats above the median u; the largest per seed beside it) and with a local head (κ peaking at
# Δ = lag − 1), 3 decimals.
CLAIMS = (
    Measure("S3-07", lambda a: round(_gap(a).mean, 4), detail=lambda a: f"±{_gap(a).std:.4f} over {_gap(a).n} seeds"),
    Measure("S3-05", lambda a: round(_counts(a["heads"])[0] / _counts(a["heads"])[2], 3),
            detail=lambda a: "largest u(0) − median u per seed: " + ", ".join(f"{v:.1f}" for v in per_seed(a["heads"])["sink"])),
    Measure("S3-06", lambda a: round(_counts(a["heads"])[1] / _counts(a["heads"])[2], 3)),
)


def prose_numbers(task, cfg: RunConfig, frame: pd.DataFrame, heads: pd.DataFrame) -> dict[str, object]:
    """Every number the chapter's text cites, by glue name (`task`: the copy-mixture task of `cfg`)."""
    sink, local, n = _counts(heads)
    out = {"ch8_bayes": f"{task.bayes_ce():.3f}", "ch8_uniform": f"{task.uniform_ce:.3f}",
           "ch8_steps": cfg.train.steps, "ch8_heads": cfg.model.n_heads, "ch8_d_head": cfg.model.head_dim}
    out |= {f"ch8_gap_{m}": f"{g['test.gap'].mean():.3f}" for m, g in frame.groupby("method", sort=False)}
    out |= {"ch8_sink_seeds": f"{sink} of {n}", "ch8_local_seeds": f"{local} of {n}",
            "ch8_sink_max": f"{per_seed(heads)['sink'].max():.1f}"}
    return out


def decide(runs: Runs) -> Findings:
    """Every claim of the chapter and the numbers its prose cites, from the `copymix` runs; parts:
    `cfg` and `task` (GOAT's run and its task), `frame` (every run), `heads` (what each head became)."""
    cfg = goat_config(runs.profile)
    task = make_task(cfg.task)
    frame = frame_of(runs["copymix"])
    heads = structure(runs["copymix"]["goat"], lag=task.lag)
    d = Decision()
    d.measure(CLAIMS, {"frame": frame, "heads": heads})
    d.glue(prose_numbers(task, cfg, frame, heads))
    return d.done(cfg=cfg, task=task, frame=frame, heads=heads)
