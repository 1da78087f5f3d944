"""Decisive budgets: for a claim left inconclusive at `ci` by a precondition the `ci` budget cannot meet, the
smallest larger budget at which that precondition holds, found by a measured search.

A search names the claim, the runs its measure reads (experiment, methods, seeds), the budgets to try in
order (multiples of the `ci` updates, so a rung's runs are ordinary runs of the chapter's experiment:
`companion sweep … --set train.steps=…` makes the same ones) and the precondition that stops it. `companion
decisive` trains the rungs in order into `results/decisive` and stops at the first where the precondition
holds (resumable: a finished group is its records, and a later call skips it); the chapter reads the rungs
tried and decides the claim on the first that holds, by the claim's own rule (`record_decided`). Where no
rung holds, the claim stays inconclusive and the chapter says which budgets were tried.

- S2-07 (Cyclic3 extrapolates with the mask): at `ci` fewer than half of the mask's runs fit Cyclic3's seen
  set (seen accuracy ≥ 99 %), so its extrapolation cannot be read on runs that learned the task. The search
  multiplies the updates (2, 4, 8, 16 times the `ci` 250, evaluations at the same fifths).
- S2-12 (the mask keeps its pattern, Structured (SVD) loses it): at `ci` only two of Structured (SVD)'s five runs
  fit the seen set on 3-bit Majority (the one task where the mask gains, Chapter 3's rule), too few for a
  difference in retention to be the method's. The search multiplies the updates of the mask and Structured
  (SVD) there (2, 4, 8, 16 times the `ci` 250) until three of its runs fit.
- S2-16 (multiplication from 3 % of the pairs): at `ci` no method learns it (best mean test sequence accuracy
  below 5 %), so a gain of the mask over the default cannot be read. The search multiplies the updates of
  the default and the mask (2, 4, 8, 16 times the `ci` 200; then 32, 64 and 128, added when the power law
  through the first four rungs, `companion.book.chapters.decisive.needed_factor`, put 5 % at about 68 times).
- S3-04 and S3-22 (GOAT sheds its sink as the content signal grows): at `ci` the character model's GOAT grows
  no sink (no head puts half its attention on key 0), so there is nothing to shed. S3-04's search multiplies the
  updates of GOAT's character models (4 and 16 times the `ci` 400; seeds 0-2, one group) until every seed has
  such a head; none grew one, so it goes on to another setting (`then`): the sink control `passkey-lm`
  (`companion.experiments.sink_control`, a task whose queries mostly have nothing to read) at 1, 4 and 16 times
  its own `ci` 500 updates, seeds 0-11 (`SINK_SEEDS`), then 32 times (added after 16 times, where 8 of the 12
  seeds had a sink and a power law through the weakest seeds put half at about 38 times). A sink in every
  seed is a smallest over seeds, so a rung fails as soon as one seed has none (`falls`), and `companion decisive`
  trains a rung's groups of seeds weakest-first at the rung before, one at a time. S3-22's search tries the sink
  control's rungs with the same GOAT runs and trains RoPE and ALiBi, which it compares (`compare`), only at the rung
  where GOAT's sink holds.

A search tries `factors` of its own experiment first, then each (experiment, factor) of `then`: a rung is an
(experiment, factor) pair, and `rung_configs` takes both (the experiment defaults to the search's own).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from companion.config import RunConfig, apply_overrides
from companion.experiments import get_experiment
from companion.runs import group_configs

__all__ = ["Search", "SEARCHES", "SINK_SEEDS", "FIT", "rung_configs", "rung_overrides", "fit_share", "fitted", "sink_share",
           "best_mean", "first_holding", "failed_early", "weakest_first"]

FIT = 0.99  # a run fits the seen set at this seen accuracy (Chapter 3's FIT)


def fit_share(records: Sequence) -> float:
    """The share of `records` whose seen accuracy is at least `FIT`."""
    return sum(r.metrics["seen"]["acc"] >= FIT for r in records) / len(records) if records else 0.0


@dataclass(frozen=True)
class Search:
    """`claim`'s search: `methods` of `experiment` with `seeds`, at each of `factors` times the `ci` updates in
    order, then at each (experiment, factor) of `then` (other settings, the same methods, `then_seeds`), until the
    precondition holds: `value(records of that rung) >= threshold`. `precondition` names the ledger's `requires`
    entry, whose threshold `threshold` is (tests/test_decisive.py holds the two equal; the engine does not read
    the book's ledger)."""

    claim: str
    experiment: str
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    factors: tuple[int, ...]
    precondition: str
    threshold: float
    value: Callable[[Sequence], float]  # the precondition's measured value on a rung (what the ledger's rule reads)
    then: tuple[tuple[str, int], ...] = ()
    then_seeds: tuple[int, ...] = ()  # the seeds of the `then` rungs (empty: `seeds`)
    compare: tuple[str, ...] = ()  # methods the claim compares and the precondition does not read: trained only
    #                                at the rung where the precondition holds
    falls: bool = False  # the precondition's value is a smallest over runs, so it can only fall as runs are added: a
    #                      rung whose stored runs already fall below the threshold fails without the rest of them

    def seeds_of(self, experiment: str) -> tuple[int, ...]:
        """The seeds a rung of `experiment` trains: `seeds` on the search's own, `then_seeds` (if any) on the others."""
        return self.seeds if experiment == self.experiment or not self.then_seeds else self.then_seeds

    @property
    def rungs(self) -> tuple[tuple[str, int], ...]:
        """Every rung in the order tried, as (experiment, factor)."""
        return tuple((self.experiment, f) for f in self.factors) + self.then

    def holds(self, records: Sequence) -> bool:
        """Whether the precondition holds on one rung's records."""
        return self.value(records) >= self.threshold


def fitted(records: Sequence, method: str) -> int:
    """How many of `method`'s runs among `records` fit the seen set (seen accuracy ≥ `FIT`)."""
    return sum(r.config.method == method and r.metrics["seen"]["acc"] >= FIT for r in records)


def sink_share(records: Sequence) -> float:
    """The smallest over `records` of the largest mean attention any head of the last layer puts on key 0
    (the "sink_curve" readout's "head_mean_p0", `companion.transport.sink_reading`)."""
    return min((max(r.readouts["sink_curve"]["head_mean_p0"]) for r in records), default=0.0)


def best_mean(records: Sequence, metric: str = "seq_acc") -> float:
    """The highest mean test `metric` of any method among `records` (mean over each method's seeds)."""
    by: dict[str, list[float]] = {}
    for r in records:
        by.setdefault(r.config.method, []).append(r.metrics["test"][metric])
    return max((sum(v) / len(v) for v in by.values()), default=0.0)


# The sink control's seeds: twelve, four groups of three (its recipe stacks three), because the share a GOAT model
# sheds varies widely from seed to seed (three seeds at 4x the updates: +0.04, +0.66, -0.06).
SINK_SEEDS = tuple(range(12))

SEARCHES: dict[str, Search] = {
    "S2-07": Search("S2-07", "gotu-cyclic3", ("mask",), (0, 1, 2, 3, 4), (2, 4, 8, 16), "mask-fits-seen", 0.5,
                    value=fit_share),
    "S2-12": Search("S2-12", "gotu-maj3", ("mask", "structured-svd"), (0, 1, 2, 3, 4), (2, 4, 8, 16),
                    "structured-fits", 3, value=lambda recs: fitted(recs, "structured-svd")),
    "S2-16": Search("S2-16", "arith-mul", ("default", "mask"), (0, 1, 2, 3, 4), (2, 4, 8, 16, 32, 64, 128),
                    "a-method-learns", 0.05,
                    value=best_mean),
    "S3-04": Search("S3-04", "charlm", ("goat",), (0, 1, 2), (4, 16), "goat-has-sink", 0.5, value=sink_share,
                    then=(("passkey-lm", 1), ("passkey-lm", 4), ("passkey-lm", 16), ("passkey-lm", 32)),
                    then_seeds=SINK_SEEDS, falls=True),
    "S3-22": Search("S3-22", "passkey-lm", ("goat",), SINK_SEEDS, (1, 4, 16, 32), "goat-has-sink", 0.5,
                    value=sink_share, compare=("rope", "alibi"), falls=True),
}


def rung_overrides(cfg: RunConfig, factor: int) -> tuple[str, ...]:
    """The overrides of a rung: `factor` times the updates, evaluations at the same fractions of the run."""
    return (f"train.steps={cfg.train.steps * factor}", f"train.eval_every={cfg.train.eval_every * factor}")


def rung_configs(claim: str, factor: int, experiment: str | None = None, *, compare: bool = True) -> list[RunConfig]:
    """Every config of one rung of `claim`'s search (each method and seed, then each `compare` method's unless
    `compare` is False), in whole groups: `factor` times the `ci` updates of `experiment` (None: the search's own)."""
    search = SEARCHES[claim]
    experiment = search.experiment if experiment is None else experiment
    if (experiment, factor) not in search.rungs:
        tried = ", ".join(f"{e} {f}×" for e, f in search.rungs)
        raise ValueError(f"{claim}'s search tries {tried} the ci updates, not {factor}× of {experiment}.")
    presets = get_experiment(experiment).configs("ci")
    out = []
    for m in search.methods + (search.compare if compare else ()):
        base = apply_overrides(presets[m], list(rung_overrides(presets[m], factor)))
        out += [replace(base, seed=s) for s in search.seeds_of(experiment)]
    return out


def first_holding(claim: str, load: Callable[[RunConfig], object | None]) -> tuple[list[dict], int | None]:
    """The rungs tried, in order, as {experiment, factor, steps, found, total, value, holds}, up to the first
    whose precondition holds (its factor second, its experiment in its row; None when none does or a rung is
    incomplete). A rung's precondition reads the search's `methods`; where it holds, the rung also needs its
    `compare` methods (counted in found and total; the factor is None until they are there). A search whose
    precondition `falls` has failed a rung as soon as the runs stored there fall below the threshold: that row's
    value is theirs, found < total, and the search goes on to the next rung. `load(cfg)` gives a stored record
    or None."""
    search, tried = SEARCHES[claim], []
    for experiment, factor in search.rungs:
        full = rung_configs(claim, factor, experiment)
        cfgs = [c for c in full if c.method in search.methods]
        found = [r for r in (load(c) for c in cfgs) if r is not None]
        failed = search.falls and 0 < len(found) < len(cfgs) and not search.holds(found)
        row = {"experiment": experiment, "factor": factor, "steps": cfgs[0].train.steps, "found": len(found),
               "total": len(cfgs), "value": search.value(found) if len(found) == len(cfgs) or failed else None,
               "holds": False}
        tried.append(row)
        if failed:
            continue
        if len(found) < len(cfgs):
            return tried, None
        if search.holds(found):
            stored = len(found) + sum(load(c) is not None for c in full if c.method not in search.methods)
            row.update(holds=True, found=stored, total=len(full))
            return tried, factor if stored == len(full) else None
    return tried, None


def failed_early(row: dict) -> bool:
    """Whether a rung of `first_holding` failed before all its runs were made (a precondition that `falls`)."""
    return row["value"] is not None and row["found"] < row["total"]


def weakest_first(claim: str, tried: list[dict], cfgs: Sequence[RunConfig],
                  load: Callable[[RunConfig], object | None]) -> list[RunConfig]:
    """The next group to train of a rung of a search whose precondition `falls` (`tried[-1]`, `cfgs` its configs):
    of the groups with missing runs (a group is the block of `stack` seeds that train together,
    `companion.runs.group_configs`), the one holding the seed weakest at the rung before on the same experiment (the
    precondition's value on that seed's run alone; seeds not there count last). Where one seed fails the
    precondition the whole rung has failed, so the rung's other groups are not trained."""
    missing = [c for c in cfgs if load(c) is None]
    before = [r for r in tried[:-1] if r["experiment"] == tried[-1]["experiment"]]
    value: dict[tuple[str, int], float] = {}
    if before:
        search = SEARCHES[claim]
        for c in rung_configs(claim, before[-1]["factor"], before[-1]["experiment"], compare=False):
            record = load(c)
            if record is not None:
                value[(c.method, c.seed)] = search.value([record])
    groups: dict[tuple[str, int], list[RunConfig]] = {}
    for c in missing:
        groups.setdefault((c.method, group_configs(c)[0].seed), []).append(c)
    order = sorted(groups.values(), key=lambda g: min(value.get((c.method, c.seed), float("inf")) for c in g))
    return order[0] if order else []
