"""A decisive search as a chapter reads it (`companion.experiments.decisive`): the rungs tried, the first where
the claim's precondition holds, and the claim's measure there, for `Decision.decided_claims`. Nothing here
trains: the records are `companion decisive`'s, committed in `results/decisive`; where they are missing the
chapter says so and the claim keeps its `ci` verdict.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from companion.experiments.decisive import SEARCHES, failed_early, first_holding, rung_configs
from companion.paths import decisive_root
from companion.store import RunStore

__all__ = ["rungs", "rung_records", "decided", "needed_factor", "search_words", "failed_early"]


def _store(store: RunStore | None) -> RunStore:
    return store if store is not None else RunStore(decisive_root(), read_only=True)


def rungs(claim: str, store: RunStore | None = None) -> tuple[list[dict], int | None, list]:
    """(the rungs tried, the factor of the first that holds or None, its records, [] when none holds)."""
    tried, factor = first_holding(claim, _store(store).load)
    records = rung_records(claim, factor, tried[-1]["experiment"], store) if factor is not None else []
    return tried, factor, records


def rung_records(claim: str, factor: int, experiment: str | None = None, store: RunStore | None = None) -> list:
    """The stored records of one rung of `claim`'s search (`rung_configs`' order; None where one is missing)."""
    store = _store(store)
    return [store.load(c) for c in rung_configs(claim, factor, experiment)]


def decided(claim: str, measure: Callable[[Sequence], float], store: RunStore | None = None) -> dict | None:
    """{"measures", "preconditions", "details"} of `claim` at the first rung where its precondition holds
    (`measure(records)` the claim's measure there, 4 digits), and under "tried" the rungs; None when no rung
    holds or the search's records are missing."""
    tried, factor, records = rungs(claim, store)
    if factor is None:
        return None
    search = SEARCHES[claim]
    row = tried[-1]
    return {"measures": {claim: round(measure(records), 4)},
            "preconditions": {claim: {search.precondition: round(row["value"], 4)}},
            "details": {claim: f"{_rung_words(search, row)} ({row['steps']:,}), the first of "
                               f"{_listed(search, _all_rows(search), suffix=False)} where {search.precondition} holds"},
            "tried": tried}


def _rung_words(search, row: dict) -> str:
    """"4× the updates", or "passkey-lm at 1× its updates" for a rung of another experiment than the search's."""
    if row["experiment"] == search.experiment:
        return f"{row['factor']}× the updates"
    return f"{row['experiment']} at {row['factor']}× its updates"


def _listed(search, rows: list[dict], suffix: bool) -> str:
    """"2×, 4×" (with `suffix`: "2×, 4× the updates"), then any rungs of other experiments in words."""
    own = ", ".join(f"{r['factor']}×" for r in rows if r["experiment"] == search.experiment)
    own += " the updates" if own and suffix else ""
    return ", ".join([own] * bool(own) + [_rung_words(search, r) for r in rows if r["experiment"] != search.experiment])


def _all_rows(search) -> list[dict]:
    return [{"experiment": e, "factor": f} for e, f in search.rungs]


def needed_factor(claim: str, threshold: float, store: RunStore | None = None, experiment: str | None = None
                  ) -> float | None:
    """Where a search that found nothing would hold by the trend of its rungs: the multiple of the `ci` updates at
    which a power law through its rungs' precondition values on `experiment` (None: the search's own; least
    squares of log value on log factor) reaches `threshold`; None while a rung's records are missing, with fewer
    than two rungs, a value that is not positive, or no growth. A rung that failed early (`failed_early`) is left
    out: its value is the smallest over the runs it has, not over all of them."""
    tried, _, _ = rungs(claim, store)
    experiment = SEARCHES[claim].experiment if experiment is None else experiment
    done = [(r["factor"], r["value"]) for r in tried if r["experiment"] == experiment and not failed_early(r)]
    if len(done) < 2 or any(v is None or v <= 0 for _, v in done):
        return None
    x, y = np.log([f for f, _ in done]), np.log([v for _, v in done])
    slope, intercept = np.polyfit(x, y, 1)
    return float(np.exp((np.log(threshold) - intercept) / slope)) if slope > 0 else None


def search_words(claim: str, store: RunStore | None = None) -> str:
    """The search in a phrase: "2× the updates (500 updates), the first budget tried" (or "after 2×, 4×"), or
    that no budget tried meets the precondition, or that the search's records are missing."""
    search = SEARCHES[claim]
    tried, factor, _ = rungs(claim, store)
    done = [r for r in tried if r["value"] is not None]
    if factor is not None:
        before = _listed(search, done[:-1], suffix=tried[-1]["experiment"] != search.experiment)
        where = "the first budget tried" if not before else f"after {before}"
        return f"{_rung_words(search, tried[-1])} ({tried[-1]['steps']:,} updates), {where}"
    if len(done) == len(search.rungs):
        return f"no budget tried ({_listed(search, done, suffix=True)}) meets it"
    return "the search's records are not committed (`companion decisive`)"
