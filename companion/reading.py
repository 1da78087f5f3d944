"""Reading runs: the records of planned configs from a store, never training one.

This is a chapter's way to its records: it asks `companion.experiments` for the configs (so their run
ids) of an experiment, several requests or a grid, and the store for those records, and names what
is missing in one `MissingRuns` with the command that makes it. Training lives behind the commands
that train (`companion sweep`, `reproduce`, `paper`, `chapters`; `companion.sweep` in Python), which
call this module's `stored_record` to see what a store already holds.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Callable, Hashable, Iterable, Sequence

from companion.config import RunConfig
from companion.experiments import Request, get_grid
from companion.experiments.plan import plan
from companion.runs import Record
from companion.store import RunStore

__all__ = ["MissingRuns", "stored_record", "read_configs", "read_runs", "read_many", "read_grid", "by_request",
           "DEVICES"]

# Where a run may have been made. A record is read back from any of them (committed `paper` records
# were made on a GPU); a run to be trained is the exact config (its device is part of its identity:
# another device rounds otherwise).
DEVICES = ("cpu", "cuda", "mps")


class MissingRuns(RuntimeError):
    """Runs asked for are not in the store: `found` of `total` exist; `missing` are their configs."""

    def __init__(self, message: str, found: int, total: int, missing: list[RunConfig]):
        super().__init__(message)
        self.found, self.total, self.missing = found, total, missing

    def _render_traceback_(self) -> list[str]:  # IPython (a chapter's cell): the one line, not the frames
        return [f"{type(self).__name__}: {self}"]


def stored_record(store: RunStore, cfg: RunConfig, any_device: bool = False) -> Record | None:
    """The stored record of `cfg`, or None; with `any_device`, the record of the same config made on
    any of `DEVICES` (the config's own device first)."""
    record = store.load(cfg)
    if record is not None or not any_device:
        return record
    for device in DEVICES:
        if device != cfg.device:
            record = store.load(replace(cfg, device=device))
            if record is not None:
                return record
    return None


def _how_to_make(missing: Sequence[RunConfig]) -> str:
    """What makes `missing`: at `paper` the GPU command, else the chapter runner's and the sweep's."""
    if missing[0].profile == "paper":
        return "make them with `companion paper CHAPTER` on a GPU (`companion paper --status` says which)"
    experiments = sorted({c.experiment for c in missing})
    return (f"train them with `companion chapters NN --runs-only` (every run chapter NN reads) or `companion sweep "
            f"EXPERIMENT --profile {missing[0].profile} --seeds ...` (here: {', '.join(experiments[:4])}"
            f"{' …' if len(experiments) > 4 else ''})")


def read_configs(cfgs: Sequence[RunConfig], store: RunStore) -> list[Record]:
    """The record of every config (made on any of `DEVICES`), in order; raises `MissingRuns` naming what
    is absent and how to make it. Nothing is trained or written."""
    records = [stored_record(store, c, any_device=True) for c in cfgs]
    missing = [c for c, r in zip(cfgs, records) if r is None]
    if missing:
        found = len(cfgs) - len(missing)
        names = sorted({f"{c.experiment}/{c.method}" for c in missing})
        raise MissingRuns(f"{len(missing)} of {len(cfgs)} runs are not in {store.root} ({found} found; missing: "
                          f"{', '.join(names[:6])}{' …' if len(names) > 6 else ''}); {_how_to_make(missing)}.",
                          found, len(cfgs), missing)
    return records


def _store(store: RunStore | str | os.PathLike | None, profile: str) -> RunStore:
    return store if isinstance(store, RunStore) else RunStore(store, profile=profile, read_only=True)


def by_request(requests: Sequence[Request], profile: str, seeds: Iterable[int],
               fetch: Callable[[list[RunConfig]], list[Record]]) -> list[list[Record]]:
    """Plan every request's configs at `seeds`, `fetch` all of them at once (one record per config, in
    order: read here, trained by `companion.sweep.ensure_many`) and hand each request its own records."""
    seeds = list(seeds)
    blocks = [plan(r.experiment, profile, seeds, r.methods, r.overrides) for r in requests]
    records = fetch([c for b in blocks for c in b])
    out, start = [], 0
    for b in blocks:
        out.append(records[start:start + len(b)])
        start += len(b)
    return out


def read_runs(experiment: str, profile: str = "ci", seeds: Iterable[int] = range(5),
              methods: Sequence[str] | None = None, store: RunStore | str | os.PathLike | None = None, *,
              overrides: Sequence[str] = ()) -> list[Record]:
    """Records of `experiment` for methods × seeds (method-major), as `companion.sweep.ensure_runs` would
    return them, read from `store` (a `RunStore` or its folder, opened read-only; default the profile's
    committed records). Raises `MissingRuns` when some are not stored, ValueError for unknown names."""
    return read_configs(plan(experiment, profile, seeds, methods, overrides), _store(store, profile))


def read_many(requests: Sequence[Request], profile: str = "ci", seeds: Iterable[int] = range(5),
              store: RunStore | str | os.PathLike | None = None) -> list[list[Record]]:
    """`read_runs` for several requests at once: one record list per request; one `MissingRuns` counts
    over all of them."""
    store = _store(store, profile)
    return by_request(requests, profile, seeds, lambda cfgs: read_configs(cfgs, store))


def read_grid(grid: str, profile: str = "ci", seeds: Iterable[int] = range(5),
              store: RunStore | str | os.PathLike | None = None) -> dict[Hashable, list[Record]]:
    """Records of every cell of the named grid (`companion.experiments.GRIDS`): {cell key: [Record,
    method-major]}."""
    cells = get_grid(grid).cells(profile)
    return dict(zip(cells, read_many(list(cells.values()), profile, seeds, store)))
