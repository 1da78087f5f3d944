"""Sweeps: seeds × methods of an experiment (or every cell of a grid), running only what the store lacks.

`ensure_runs`, `ensure_many` and `ensure_grid` are what the commands that train call (`companion
sweep`, `chapters`, `reproduce`): they load every stored run and run the missing ones through an
executor (`companion.executors`), so a rerun with the same code and settings costs seconds and a
killed sweep resumes where it stopped. Chapters read through `companion.reading`, which never trains. `companion sweep` and
`companion list` (`companion.cli.runs`) are the same functions on the command line. Planning (`plan`,
`plan_grid`, the run-count limit) lives in `companion.experiments.plan` and is re-exported here.
"""

from __future__ import annotations

import os
from typing import Hashable, Iterable, Sequence

from companion.config import RunConfig
from companion.executors import make_executor
from companion.experiments import Request, get_grid
from companion.experiments.plan import MAX_RUNS, check_count, max_runs, plan, plan_grid
from companion.identity import run_id
from companion.reading import by_request
from companion.runs import Record
from companion.store import RunStore

__all__ = ["parse_seeds", "plan", "plan_grid", "max_runs", "MAX_RUNS", "run_missing", "ensure_runs", "ensure_many", "ensure_grid"]

def parse_seeds(text: str) -> list[int]:
    """"0-4" → [0, 1, 2, 3, 4]; "0,2,5" and "0-2,7" work too; duplicates are dropped, order kept."""
    ranges = []
    try:
        for part in text.split(","):
            lo, dash, hi = part.strip().partition("-")
            a = int(lo)
            b = int(hi) if dash else a
            if a < 0 or b < a:
                raise ValueError
            ranges.append((a, b))
    except ValueError:
        raise ValueError(
            f"malformed seeds {text!r}: use a range like 0-4, a list like 0,1,2, or both (0-2,7)."
        ) from None
    check_count(sum(b - a + 1 for a, b in ranges), f"seeds {text!r}")  # counted before any list is made
    return list(dict.fromkeys(s for a, b in ranges for s in range(a, b + 1)))


def run_missing(cfgs: list[RunConfig], store: RunStore, executor: str, progress: bool,
                options: dict, weights: bool = False) -> tuple[list[Record], int]:
    """Run the configs the store lacks (each distinct run once) and return (a record per config, how
    many ran). Before any run starts, the store must be writable (else StoreError, nothing trained),
    and the temporary files of killed writes are removed (`RunStore.remove_stale_temporaries`).
    Raises RuntimeError listing the runs that failed; the others are stored. (To read without
    training: `companion.reading`.)"""
    missing, seen = [], set()
    for cfg in cfgs:
        rid = run_id(cfg)
        if rid not in seen and (store.load(cfg) is None or (weights and not store.has_weights(rid))):
            missing.append(cfg)
        seen.add(rid)
    failures = []
    if missing:
        store.check_writable()
        store.remove_stale_temporaries()
        failures = make_executor(executor, **options).execute(missing, store, progress=progress)
    records = [store.load(c) for c in cfgs]
    if weights and not failures:
        failures = [f"{c.experiment}/{c.method}/seed {c.seed}: its record was computed on another host, so its "
                    "weights cannot be remade here; train it into another store (--store)"
                    for c, r in zip(cfgs, records) if r is not None and not store.has_weights(r.run_id)]
    if failures or any(r is None for r in records):
        lines = failures or [f"{c.method}/seed {c.seed}: no record written"
                             for c, r in zip(cfgs, records) if r is None]
        raise RuntimeError(f"{len(lines)} run(s) failed:\n  " + "\n  ".join(lines))
    return records, len(missing)


def ensure_runs(experiment: str, profile: str = "ci", seeds: Iterable[int] = range(5),
                methods: Sequence[str] | None = None, store: RunStore | str | os.PathLike | None = None,
                jobs: int | None = None, *, overrides: Sequence[str] = (), executor: str = "local",
                progress: bool = False, weights: bool = False,
                **executor_options) -> list[Record]:
    """Records of `experiment` for methods × seeds: loaded when stored, run (in parallel) when missing.

    Args:
        experiment, profile: names in `companion.experiments.EXPERIMENTS`.
        seeds: run seeds. methods: default all methods of the profile.
        store: a `RunStore` or its folder; default the profile's records ($COMPANION_RUNS, else the
            repository's folder of committed records for the profile, which the chapters read).
        jobs: local worker processes (default os.cpu_count()).
        overrides: "key=value" strings applied to every config (changing them changes the run ids).
        executor: "local" or "slurm"; `executor_options` go to its constructor (e.g. cluster="local").
        progress: show a tqdm bar over runs.
        weights: also require each run's trained weights (`RunStore.load_model`); a stored record
            without them is rerun (same config and code: the same record).

    Returns:
        One `Record` per (method, seed), method-major.

    Raises:
        ValueError: unknown experiment, profile or method, or a bad override.
        companion.store.StoreError: runs are missing and the store cannot be written (nothing was trained).
        RuntimeError: some runs failed (the others are stored).
    """
    store = store if isinstance(store, RunStore) else RunStore(store, profile=profile)
    if executor == "local":
        executor_options.setdefault("jobs", jobs)
    records, _ = run_missing(plan(experiment, profile, seeds, methods, overrides), store, executor, progress,
                             executor_options, weights)
    return records


def ensure_many(requests: Sequence[Request], profile: str = "ci", seeds: Iterable[int] = range(5),
                store: RunStore | str | os.PathLike | None = None, jobs: int | None = None, *,
                executor: str = "local", progress: bool = False, weights: bool = False,
                **executor_options) -> list[list[Record]]:
    """`ensure_runs` for several requests at once: one executor runs every missing config of all of
    them (one worker pool, no idle workers between blocks); returns one record list per request.
    A config that appears in several requests runs once."""
    store = store if isinstance(store, RunStore) else RunStore(store, profile=profile)
    if executor == "local":
        executor_options.setdefault("jobs", jobs)
    return by_request(requests, profile, seeds,
                      lambda cfgs: run_missing(cfgs, store, executor, progress, executor_options, weights)[0])


def ensure_grid(grid: str, profile: str = "ci", seeds: Iterable[int] = range(5),
                store: RunStore | str | os.PathLike | None = None, jobs: int | None = None, *,
                executor: str = "local", progress: bool = False, weights: bool = False,
                **executor_options) -> dict[Hashable, list[Record]]:
    """Records of every cell of the named grid (`companion.experiments.GRIDS`), run when missing in one
    executor: {cell key: [Record, method-major]}."""
    cells = get_grid(grid).cells(profile)
    blocks = ensure_many(list(cells.values()), profile, seeds, store, jobs, executor=executor,
                         progress=progress, weights=weights, **executor_options)
    return dict(zip(cells, blocks))
