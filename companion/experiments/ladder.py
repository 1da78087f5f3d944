"""The scale ladder: the headline training claims re-run on rungs from the `ci` model toward the
sources' settings, as far as one CPU core allows.

Each family is one chapter's runs behind two claims, on the methods their measures read:
- `gotu` (S2-06, S2-08; Chapter 3): default and mask on 2Parity and 3-bit Majority, seeds 0-4;
- `arith` (S2-13, S2-14; Chapter 4): default and mask on addition at 0.4 % of the pairs, seeds 0-4;
- `passkey` (S3-13, S3-14; Chapter 9): GOAT, RoPE (also read with position interpolation) and
  sinusoidal positions, seeds 0-1.

A rung is a set of overrides on the family's `ci` presets, so a rung's runs are ordinary runs of the
chapter's experiments (`companion sweep … --set …` makes the same ones) and the rung `ci` is the
chapter's own records. Rungs grow one axis at a time, so a verdict that moves can be put down to
data, updates, width or depth: `data` trains on the whole seen set for four times the updates,
`width` doubles the width (so four times the parameters), `depth` then doubles the layers and the
updates. `gotu-schedule` is GOTU's own optimiser on the `ci` model: batch 256, the task's learning
rate (1e-5) and epochs (20 on 2Parity, 30 on Majority) over the whole seen set, which is what the
step cap of Chapter 6 says leaves a learnable ±10 mask where it started.

Records go to `results/ladder` (`companion.paths.ladder_root`) (never retrained by CI: they are checked by reading); `companion
ladder` makes the missing ones, cheapest rung first, a whole group at a time, so a killed run resumes
where it stopped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from companion.config import RunConfig
from companion.experiments import Request, get_experiment
from companion.experiments.gotu import PAPER_SCHEDULE, SEEN

__all__ = ["Rung", "Family", "FAMILIES", "ladder_requests", "rung_configs", "paper_configs", "rung_order"]


@dataclass(frozen=True)
class Rung:
    """One step of the ladder: `name`, a line saying what grows, and the overrides per experiment."""

    name: str
    what: str
    overrides: Callable[[str], tuple[str, ...]]


@dataclass(frozen=True)
class Family:
    """The runs behind `claims`: `methods` of each of `experiments` with `seeds`, on `rungs` in order."""

    name: str
    chapter: str
    claims: tuple[str, ...]
    experiments: tuple[str, ...]
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    rungs: tuple[Rung, ...]

    def rung(self, name: str) -> Rung:
        for r in self.rungs:
            if r.name == name:
                return r
        raise ValueError(f"family {self.name!r} has no rung {name!r}; valid: {', '.join(r.name for r in self.rungs)}.")


def _fixed(*overrides: str) -> Callable[[str], tuple[str, ...]]:
    return lambda experiment: tuple(overrides)


def _gotu_schedule(experiment: str) -> tuple[str, ...]:
    function = experiment.removeprefix("gotu-")
    lr, epochs = PAPER_SCHEDULE[function]
    per_epoch = math.ceil(SEEN[function] / 256)
    return ("task.n_train=0", "train.batch_size=256", f"train.lr={lr:g}", f"train.epochs={epochs}",
            "train.steps=0", f"train.eval_every={per_epoch * 5}")


CI = Rung("ci", "the chapter's own runs", _fixed())

GOTU_DATA = ("task.n_train=0", "train.steps=1000", "train.eval_every=200")
GOTU = Family("gotu", "03", ("S2-06", "S2-08"), ("gotu-2parity", "gotu-maj3"), ("default", "mask"), (0, 1, 2, 3, 4), (
    CI,
    Rung("data", "the whole seen set (24,576 points), 1,000 updates", _fixed(*GOTU_DATA)),
    Rung("width", "and width 64 (FF 128): four times the parameters", _fixed(*GOTU_DATA, "model.d_model=64",
                                                                            "model.d_ff=128")),
    Rung("depth", "and 4 layers, batch 128, 2,000 updates", _fixed(
        "task.n_train=0", "model.d_model=64", "model.d_ff=128", "model.n_layers=4", "train.batch_size=128",
        "train.steps=2000", "train.eval_every=400")),
    Rung("gotu-schedule", "GOTU's optimiser on the ci model: batch 256, lr 1e-5, 20 or 30 epochs of the seen set",
         _gotu_schedule),
))

ARITH_STEPS = ("train.steps=1000", "train.eval_every=200")
ARITH = Family("arith", "04", ("S2-13", "S2-14"), ("arith-add",), ("default", "mask"), (0, 1, 2, 3, 4), (
    CI,
    Rung("data", "four times the updates (1,000)", _fixed(*ARITH_STEPS)),
    Rung("width", "and width 128 (FF 256): four times the parameters", _fixed(*ARITH_STEPS, "model.d_model=128",
                                                                             "model.d_ff=256")),
    Rung("depth", "and 4 layers, 2,000 updates", _fixed("train.steps=2000", "train.eval_every=400",
                                                        "model.d_model=128", "model.d_ff=256", "model.n_layers=4")),
))

PASSKEY_STEPS = ("train.steps=2000", "train.eval_every=250")
PASSKEY = Family("passkey", "09", ("S3-13", "S3-14"), ("passkey",), ("goat", "rope", "sinusoidal"), (0, 1), (
    CI,
    Rung("data", "four times the updates (2,000)", _fixed(*PASSKEY_STEPS)),
    Rung("width", "and width 128 (heads of 32, FF 256)", _fixed(*PASSKEY_STEPS, "model.d_model=128",
                                                                "model.d_head=32", "model.d_ff=256")),
    Rung("depth", "and 4 layers", _fixed(*PASSKEY_STEPS, "model.d_model=128", "model.d_head=32", "model.d_ff=256",
                                         "model.n_layers=4")),
))

FAMILIES: dict[str, Family] = {f.name: f for f in (GOTU, ARITH, PASSKEY)}

# The order `companion ladder` makes the rungs in: every family's cheaper rungs before any dearer one,
# so that an interrupted ladder has whole rungs to show.
ORDER = (("gotu", "data"), ("arith", "data"), ("passkey", "data"), ("gotu", "width"), ("gotu", "gotu-schedule"),
         ("arith", "width"), ("passkey", "width"), ("gotu", "depth"), ("arith", "depth"), ("passkey", "depth"))


def ladder_requests(family: str, rung: str) -> list[Request]:
    """The requests of one rung of one family (one per experiment)."""
    fam = FAMILIES[family] if family in FAMILIES else None
    if fam is None:
        raise ValueError(f"unknown ladder family {family!r}; valid: {', '.join(FAMILIES)}.")
    r = fam.rung(rung)
    return [Request(e, fam.methods, r.overrides(e)) for e in fam.experiments]


def rung_configs(family: str, rung: str) -> list[RunConfig]:
    """Every config of one rung of one family: experiments × methods × the family's seeds, in that order."""
    seeds = FAMILIES[family].seeds if family in FAMILIES else ()
    return [get_experiment(q.experiment).config("ci", m, s, q.overrides)
            for q in ladder_requests(family, rung) for m in q.methods for s in seeds]


def paper_configs(family: str) -> list[RunConfig]:
    """The family's runs at the sources' settings (the `paper` profile, made on a GPU by `companion
    paper`): the same experiments, methods and seeds, no override. The ladder's figures draw them as
    the paper point once every one has a committed record."""
    fam = FAMILIES[family]
    return [get_experiment(e).config("paper", m, s, ()) for e in fam.experiments for m in fam.methods for s in fam.seeds]


def rung_order() -> list[tuple[Family, Rung]]:
    """(family, rung) of every rung above `ci`, in the order they are made."""
    return [(FAMILIES[f], FAMILIES[f].rung(r)) for f, r in ORDER]


assert {(f.name, r.name) for f in FAMILIES.values() for r in f.rungs if r is not CI} == set(ORDER)
