"""Planning runs: the configs of an experiment's methods × seeds, or of a grid's cells, with a limit on
how many one command may ask for. Pure: nothing here touches a store or trains (`companion.sweep`
runs what is planned; `companion.experiments.chapters` plans what each chapter reads)."""

from __future__ import annotations

import os
from typing import Iterable, Sequence

from companion.config import RunConfig
from companion.experiments import get_experiment, get_grid

__all__ = ["MAX_RUNS", "max_runs", "check_count", "plan", "plan_grid"]

# The most runs one command may plan (seeds, or seeds × methods × cells): far above every chapter (120
# runs) and every paper-profile grid, far below what a typo makes (`--seeds 0-99999999999` once tried to
# allocate 22 GB). `$COMPANION_MAX_RUNS` raises it for a sweep that really is that large.
MAX_RUNS = 10_000


def max_runs() -> int:
    """`$COMPANION_MAX_RUNS` if set (an integer >= 1), else `MAX_RUNS`."""
    text = os.environ.get("COMPANION_MAX_RUNS")
    if text is None:
        return MAX_RUNS
    try:
        value = int(text)
        if value < 1:
            raise ValueError
    except ValueError:
        raise ValueError(f"COMPANION_MAX_RUNS={text!r} is not an integer >= 1; unset it or give one.") from None
    return value


def check_count(count: int, what: str) -> None:
    limit = max_runs()
    if count > limit:
        raise ValueError(f"{what} make {count:,} runs, more than the {limit:,} one command may plan (a typo?). "
                         f"If you mean it, raise the limit: COMPANION_MAX_RUNS={count}.")


def plan(experiment: str, profile: str, seeds: Iterable[int], methods: Sequence[str] | None = None,
         overrides: Sequence[str] = ()) -> list[RunConfig]:
    """The configs of methods × seeds (method-major), overrides applied; validates every name."""
    exp = get_experiment(experiment)
    names = list(methods) if methods else exp.methods(profile)
    seeds = list(seeds)
    check_count(len(names) * len(seeds), f"{len(names)} methods × {len(seeds):,} seeds of {experiment}")
    return [exp.config(profile, m, s, overrides) for m in names for s in seeds]


def plan_grid(grid: str, profile: str, seeds: Iterable[int], overrides: Sequence[str] = ()) -> list[RunConfig]:
    """The configs of every cell of `grid` (cell order, then method-major), `overrides` applied after
    each cell's own; a config shared by two cells appears twice (it runs once)."""
    seeds = list(seeds)
    cells = get_grid(grid).cells(profile).values()
    check_count(sum(len(r.methods or get_experiment(r.experiment).methods(profile)) for r in cells) * len(seeds),
                 f"the {len(cells)} cells of {grid} × {len(seeds):,} seeds")
    return [c for r in cells for c in plan(r.experiment, profile, seeds, r.methods, (*r.overrides, *overrides))]
