"""Every named experiment and grid the book runs; `companion list` shows them, `companion sweep` runs them.

- An `Experiment` is a family of runs: `build(profile) -> {method: RunConfig}` (seed left at 0).
  Presets per profile: `ci` (CPU minutes) and `paper` (the sources' settings, for a GPU).
- A `Grid` is a named set of cells over experiments: `build(profile) -> {key: Request}`, each cell an
  experiment's methods under overrides (a mask at another contrast, QK normalisation on, a longer
  budget…). A grid's runs keep their experiment and method names, so a run shared by two grids (or
  by a grid and its experiment) is one run in the store.

Each module of this package registers its presets when imported (`load_experiments` imports them
all). Nothing here is hashed into a run's identity: a run's config already holds all a preset decides.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, replace
from typing import Callable, Hashable, NamedTuple, Sequence

from companion.config import PROFILES, RunConfig, apply_overrides
from companion.measuring import check_readouts

__all__ = ["Experiment", "Grid", "Request", "EXPERIMENTS", "GRIDS", "register_experiment", "register_grid",
           "load_experiments", "get_experiment", "get_grid"]


@dataclass(frozen=True)
class Experiment:
    """A named family of runs.

    Attributes:
        name: registry key, used on the command line.
        description: one line for `companion list`.
        build: the presets, `build(profile) -> {method: RunConfig}`; called with a profile in `profiles`.
        profiles: the profiles this experiment defines.
        readings: evaluation-time readings of its runs that need no run of their own
            ({name: what it is}), shown by `companion list`.
    """

    name: str
    description: str
    build: Callable[[str], dict[str, RunConfig]]
    profiles: tuple[str, ...] = PROFILES
    readings: tuple[tuple[str, str], ...] = ()

    def configs(self, profile: str) -> dict[str, RunConfig]:
        """The method → config presets of `profile` (seed 0)."""
        if profile not in self.profiles:
            raise ValueError(
                f"unknown profile {profile!r} for experiment {self.name!r}; valid: {', '.join(self.profiles)}."
            )
        return self.build(profile)

    def methods(self, profile: str = "ci") -> list[str]:
        return list(self.configs(profile))

    def config(self, profile: str, method: str, seed: int, overrides: Sequence[str] = ()) -> RunConfig:
        """The full config of one run, with `overrides` applied."""
        presets = self.configs(profile)
        if method not in presets:
            raise ValueError(
                f"unknown method {method!r} for experiment {self.name!r}; valid: {', '.join(presets)}."
            )
        cfg = apply_overrides(replace(presets[method], seed=seed), overrides)
        check_readouts(cfg.readouts, cfg.task.name)
        return cfg


class Request(NamedTuple):
    """One cell of runs: an experiment's methods (None = all) under overrides."""

    experiment: str
    methods: Sequence[str] | None = None
    overrides: Sequence[str] = ()


@dataclass(frozen=True)
class Grid:
    """A named grid of cells over experiments.

    Attributes:
        name: registry key (shares the namespace of experiments).
        description: one line for `companion list`.
        build: `build(profile) -> {key: Request}`; keys are hashable labels, e.g. (task, placement, contrast).
        profiles: the profiles the grid defines.
    """

    name: str
    description: str
    build: Callable[[str], dict[Hashable, Request]]
    profiles: tuple[str, ...] = PROFILES

    def cells(self, profile: str) -> dict[Hashable, Request]:
        """key → Request of `profile`."""
        if profile not in self.profiles:
            raise ValueError(f"unknown profile {profile!r} for grid {self.name!r}; valid: {', '.join(self.profiles)}.")
        return self.build(profile)


EXPERIMENTS: dict[str, Experiment] = {}
GRIDS: dict[str, Grid] = {}


def register_experiment(exp: Experiment) -> Experiment:
    """Add `exp` to `EXPERIMENTS` (a repeated name is an error)."""
    if exp.name in EXPERIMENTS or exp.name in GRIDS:
        raise ValueError(f"experiment {exp.name!r} is already registered.")
    EXPERIMENTS[exp.name] = exp
    return exp


def register_grid(grid: Grid) -> Grid:
    """Add `grid` to `GRIDS` (a name already used by an experiment or a grid is an error)."""
    if grid.name in EXPERIMENTS or grid.name in GRIDS:
        raise ValueError(f"grid {grid.name!r}: the name is already registered.")
    GRIDS[grid.name] = grid
    return grid


def load_experiments() -> dict[str, Experiment]:
    """Import every module of this package (each registers its presets); returns `EXPERIMENTS`."""
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{m.name}")
    return EXPERIMENTS


def get_experiment(name: str) -> Experiment:
    """`EXPERIMENTS[name]`, or a ValueError listing the valid names."""
    load_experiments()
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; valid: {', '.join(sorted(EXPERIMENTS))}.")
    return EXPERIMENTS[name]


def get_grid(name: str) -> Grid:
    """`GRIDS[name]`, or a ValueError listing the valid names."""
    load_experiments()
    if name not in GRIDS:
        raise ValueError(f"unknown grid {name!r}; valid: {', '.join(sorted(GRIDS))}.")
    return GRIDS[name]
