"""Chapter 9: models trained at one length, read at longer ones (character LM and passkey retrieval).

Everything here reads stored runs and their weights (`ensure_many(..., weights=True)`); nothing trains.
RoPE is read twice: as trained, and with position interpolation ("rope-pi": positions squeezed into
the training range, an evaluation-time switch that changes no weight).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import pandas as pd
import torch

from companion.experiments.extrapolation import METHODS
from companion.goat import GoatPrior
from companion.book.ch08_copy_mixture import load_models
from companion.positions import RotaryEmbedding
from companion.sweep import Request, ensure_many, records_frame
from companion.tasks import make_task

__all__ = ["LABELS", "load_runs", "load_models", "interpolated", "readings", "lm_lengths", "per_position",
           "passkey_lengths", "depth_grid", "sink_profiles", "ratio_summary"]

LABELS = {"goat": "GOAT", "goat-uniform": "GOAT (uniform start)", "rope": "RoPE", "rope-pi": "RoPE + PI", "alibi": "ALiBi", "sinusoidal": "sinusoidal"}


def load_runs(profile: str, seeds: Sequence[int], *, jobs: int | None = None,
              experiments: Sequence[str] = ("charlm", "passkey")) -> dict[str, tuple[dict, pd.DataFrame]]:
    """Runs of every method of each experiment with weights, trained in one worker pool:
    {experiment: ({method: [Record]}, frame)}."""
    blocks = ensure_many([Request(e) for e in experiments], profile, seeds, jobs=jobs, weights=True)
    out = {}
    for experiment, records in zip(experiments, blocks):
        by_method: dict[str, list] = {m: [] for m in METHODS}
        for rec in records:
            by_method[rec.config.method].append(rec)
        out[experiment] = (by_method, records_frame(records))
    return out


@contextmanager
def interpolated(model: torch.nn.Module, train_len: int):
    """Within the block, every RoPE of `model` reads long inputs with position interpolation to `train_len`."""
    ropes = [m for m in model.modules() if isinstance(m, RotaryEmbedding)]
    if not ropes:
        raise ValueError("the model has no rotary embedding; position interpolation applies to RoPE models only.")
    before = [r.interpolate for r in ropes]
    try:
        for r in ropes:
            r.interpolate = train_len
        yield model
    finally:
        for r, b in zip(ropes, before):
            r.interpolate = b


def readings(runs: dict, models: dict) -> Iterator[tuple[str, int, torch.nn.Module, bool]]:
    """(reading, seed, model, interpolate) for every model, RoPE twice (as trained, then "rope-pi")."""
    for method, recs in runs.items():
        for rec, model in zip(recs, models[method]):
            yield method, rec.seed, model, False
            if method == "rope":
                yield "rope-pi", rec.seed, model, True


def _read(model, interpolate: bool, train_len: int, fn):
    if not interpolate:
        return fn(model)
    with interpolated(model, train_len):
        return fn(model)


def lm_lengths(runs: dict, models: dict, lengths: Sequence[int], *, tokens: int | None = None) -> pd.DataFrame:
    """Test cross-entropy of every character LM at every length: columns reading, seed, length, ce, ppl, bpc.
    With `tokens`, every length reads the same first `tokens` characters of the test split (as
    tokens // length windows); otherwise the whole split."""
    task = make_task(next(iter(runs.values()))[0].config.task)
    rows = []
    for reading, seed, model, pi in readings(runs, models):
        for length in lengths:
            limit = None if tokens is None else max(1, tokens // length)
            r = _read(model, pi, task.seq_len, lambda m: task.ce_at(m, length, limit=limit))
            rows.append({"reading": reading, "seed": seed, "length": length, "ce": r["ce"], "ppl": r["ppl"],
                         "bpc": r["bpc"]})
    return pd.DataFrame(rows)


def per_position(task, model, length: int, *, interpolate: bool = False, window: int = 16,
                 tokens: int | None = None) -> np.ndarray:
    """CE per position of the test windows of `length` (the first `tokens` characters, or all),
    smoothed by a moving mean over `window` positions."""
    limit = None if tokens is None else max(1, tokens // length)
    pos = _read(model, interpolate, task.seq_len, lambda m: task.ce_at(m, length, limit=limit)["per_position"]).numpy()
    kernel = np.ones(window) / window
    return np.convolve(pos, kernel, mode="valid")


def passkey_lengths(runs: dict, models: dict, lengths: Sequence[int], *, depth_bins: int = 5):
    """Retrieval of every passkey model at every length.

    Returns (table, grid): table has columns reading, seed, length, span_acc, strict_acc, ce; grid is
    the span-token accuracy by key depth (`depth_bins` equal bins of [0, max_depth]) and length, pooled
    over seeds, with index (reading, length) and one column per bin (Figure 3c at small scale).
    """
    task = make_task(next(iter(runs.values()))[0].config.task)
    rows, cells = [], []
    edges = np.linspace(0, task.max_depth, depth_bins + 1)
    for reading, seed, model, pi in readings(runs, models):
        for length in lengths:
            r = _read(model, pi, task.seq_len, lambda m: task.accuracy_at(m, length))
            rows.append({"reading": reading, "seed": seed, "length": length, "span_acc": r["span_acc"],
                         "strict_acc": r["strict_acc"], "ce": r["ce"]})
            b = np.clip(np.searchsorted(edges, r["depth"].numpy(), side="right") - 1, 0, depth_bins - 1)
            acc = r["correct"].float().mean(1).numpy()
            for k in range(depth_bins):
                cells.append({"reading": reading, "length": length, "bin": k, "hits": acc[b == k].sum(),
                              "n": int((b == k).sum())})
    grid = pd.DataFrame(cells).groupby(["reading", "length", "bin"])[["hits", "n"]].sum()
    grid = (grid["hits"] / grid["n"]).unstack("bin")
    grid.columns = [f"{edges[k]:.2f}–{edges[k + 1]:.2f}" for k in grid.columns]
    return pd.DataFrame(rows), grid


def sink_profiles(model, n: int) -> np.ndarray:
    """u_h(j) of every GOAT layer for keys j = 0 … n − 1, shape (layers, heads, n), recency included."""
    priors = [b.attn.prior for b in model.blocks if isinstance(b.attn.prior, GoatPrior)]
    if not priors:
        raise ValueError("the model has no GOAT prior; sink profiles exist for GOAT models only.")
    with torch.no_grad():
        return np.stack([p.sink(torch.arange(n, device=p.alpha.device)).double().cpu().numpy() for p in priors])


def ratio_summary(table: pd.DataFrame, value: str, train_len: int, far: int) -> pd.DataFrame:
    """Per reading: mean and spread over seeds of `value` at the training length and at `far`, and
    of the per-seed ratio far / train."""
    wide = table.pivot_table(index=["reading", "seed"], columns="length", values=value)
    ratio = wide[far] / wide[train_len]
    out = pd.DataFrame({f"{value} at L": wide[train_len], f"{value} at {far // train_len}L": wide[far],
                        "ratio": ratio}).groupby("reading", sort=False).agg(["mean", "std"])
    return out.reindex([r for r in LABELS if r in out.index])
