"""A run's model and training budget as every chapter's budget table states it: one vocabulary of rows.

`budget(cfg, rows)` reads the named rows from a `RunConfig`; a chapter adds the rows only it has (the
training points of a Boolean task, GOAT's frequencies, the image set) and the number of seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

from companion.config import RunConfig

__all__ = ["ROWS", "MODEL", "TRAINING", "budget"]

ROWS = ("Architecture", "Layers", "Model width", "Heads", "Head width", "Feed-forward width", "Optimiser",
        "Learning rate", "Weight decay", "Learning-rate schedule", "Batch size", "Updates")
MODEL = ("Layers", "Model width", "Heads", "Head width")  # the rows every chapter's model has
TRAINING = ("Optimiser", "Learning rate", "Batch size", "Updates")  # and its training


def budget(cfg: RunConfig, rows: Sequence[str] = ROWS) -> dict[str, object]:
    """{row: value} of `cfg` for each of `rows` (names from `ROWS`, in the order given); "Updates" is the
    number of updates, or "N epochs" for a budget stated in epochs."""
    m, t = cfg.model, cfg.train
    every = {"Architecture": m.arch, "Layers": m.n_layers, "Model width": m.d_model, "Heads": m.n_heads,
             "Head width": m.head_dim, "Feed-forward width": m.d_ff, "Optimiser": t.optimizer, "Learning rate": t.lr,
             "Weight decay": t.weight_decay, "Learning-rate schedule": t.schedule, "Batch size": t.batch_size,
             "Updates": t.steps or f"{t.epochs} epochs"}
    unknown = [r for r in rows if r not in every]
    if unknown:
        raise ValueError(f"unknown budget rows {unknown}; the rows are {list(ROWS)}.")
    return {r: every[r] for r in rows}
