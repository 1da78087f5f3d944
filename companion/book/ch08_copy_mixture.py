"""Chapters 7 and 8: the copy-mixture models (GOAT, RoPE, ALiBi) and what their priors learned.

Everything here reads stored runs and their weights (`ensure_many(..., weights=True)`); nothing trains.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from companion.experiments.copy_mixture import METHODS
from companion.book.ch03_boolean import curves as method_curves
from companion.store import RunStore
from companion.sweep import Request, ensure_many, records_frame
from companion.tasks import make_task
from companion.book.transport import attention_internals, prior_panels, sink_vs_signal

__all__ = ["LABELS", "load_runs", "load_models", "probe", "head_structure", "sink_curve", "curves"]

LABELS = {"goat": "GOAT", "rope": "RoPE", "alibi": "ALiBi"}


def load_runs(profile: str, seeds: Sequence[int], *, jobs: int | None = None):
    """Copy-mixture runs of every method with their weights: ({method: [Record]}, frame)."""
    [records] = ensure_many([Request("copymix")], profile, seeds, jobs=jobs, weights=True)
    by_method: dict[str, list] = {m: [] for m in METHODS}
    for rec in records:
        by_method[rec.config.method].append(rec)
    return by_method, records_frame(records)


def load_models(records: Sequence) -> list:
    """The trained models of `records`, in order (float32, eval mode, CPU)."""
    store = RunStore()
    return [store.load_model(r) for r in records]


def probe(record, n: int = 64) -> torch.Tensor:
    """The first n test inputs of the run's task (the same for every run of the experiment)."""
    task = make_task(record.config.task)
    return task.sequences["test"][:n, :-1]


def head_structure(model, *, lag: int, window: int = 8) -> pd.DataFrame:
    """Per head of the first layer's GOAT prior: sink strength u(0) − median_j>0 u(j), the offset in
    0…window where κ peaks, and κ's peak height above its median over that window."""
    prior = model.blocks[0].attn.prior
    n = model.n_positions
    panels = prior_panels(prior, n)
    rows = []
    for h in range(prior.n_heads):
        u, kappa = panels["sink"][h], panels["kappa"][h][: window + 1]
        rows.append({"head": h, "sink strength": float(u[0] - np.median(u[1:])),
                     "κ peak at Δ": int(np.argmax(kappa)), "κ peak height": float(kappa.max() - np.median(kappa)),
                     "local (peak at Δ = lag − 1)": bool(np.argmax(kappa) == lag - 1)})
    return pd.DataFrame(rows).set_index("head")


def sink_curve(models: Sequence, x: torch.Tensor, *, bins: int = 8, layer: int = -1) -> pd.DataFrame:
    """Attention on key 0 against the content signal ω (Figure 2c), pooled over models (seeds),
    heads and queries of `layer`: ω is cut at its quantiles; per bin the mean ω, mean and quartiles
    of p0, and the count."""
    omega, p0 = [], []
    for model in models:
        lay = layer % len(model.blocks)
        d = sink_vs_signal(attention_internals(model, x, lay))
        omega.append(d["omega"])
        p0.append(d["p0"])
    omega, p0 = np.concatenate(omega), np.concatenate(p0)
    edges = np.quantile(omega, np.linspace(0, 1, bins + 1))
    idx = np.clip(np.searchsorted(edges, omega, side="right") - 1, 0, bins - 1)
    rows = []
    for b in range(bins):
        sel = idx == b
        rows.append({"bin": b, "omega": float(omega[sel].mean()), "p0": float(p0[sel].mean()),
                     "p0_q1": float(np.quantile(p0[sel], 0.25)), "p0_q3": float(np.quantile(p0[sel], 0.75)),
                     "n": int(sel.sum())})
    return pd.DataFrame(rows).set_index("bin")


def curves(records: Sequence, metric: str = "gap") -> tuple[np.ndarray, np.ndarray]:
    """(steps, values (runs, evaluations)) of a test metric of one method's copy-mixture runs."""
    [(steps, values)] = method_curves(records, "test", metric).values()
    return steps, values
