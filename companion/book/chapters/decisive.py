"""A decisive search as a chapter reads it (`companion.experiments.decisive`): the rungs tried, the first where
the claim's precondition holds, and the claim's measure there, for `Decision.decided_claims`. Nothing here
trains: the records are `companion decisive`'s, committed in `results/decisive`; where they are missing the
chapter says so and the claim keeps its `ci` verdict.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from companion.experiments.decisive import SEARCHES, first_holding, rung_configs
from companion.paths import decisive_root
from companion.store import RunStore

__all__ = ["rungs", "decided", "needed_factor", "search_words"]


def rungs(claim: str, store: RunStore | None = None) -> tuple[list[dict], int | None, list]:
    """(the rungs tried, the factor of the first that holds or None, its records, [] when none holds)."""
    store = store if store is not None else RunStore(decisive_root(), read_only=True)
    tried, factor = first_holding(claim, store.load)
    records = [store.load(c) for c in rung_configs(claim, factor)] if factor is not None else []
    return tried, factor, records


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
            "details": {claim: f"{factor}× the updates ({row['steps']:,}), the first of "
                               f"{', '.join(f'{f}×' for f in search.factors)} where {search.precondition} holds"},
            "tried": tried}


def needed_factor(claim: str, threshold: float, store: RunStore | None = None) -> float | None:
    """Where a search that found nothing would hold by the trend of its rungs: the multiple of the `ci` updates at
    which a power law through its rungs' precondition values (least squares of log value on log factor) reaches
    `threshold`; None while a rung's records are missing, with fewer than two rungs, a value that is not
    positive, or no growth."""
    tried, _, _ = rungs(claim, store)
    done = [(r["factor"], r["value"]) for r in tried]
    if len(done) < 2 or any(v is None or v <= 0 for _, v in done):
        return None
    x, y = np.log([f for f, _ in done]), np.log([v for _, v in done])
    slope, intercept = np.polyfit(x, y, 1)
    return float(np.exp((np.log(threshold) - intercept) / slope)) if slope > 0 else None


def search_words(claim: str, store: RunStore | None = None) -> str:
    """The search in a phrase: "2× the updates (500 updates), the first budget tried" (or "after 2×, 4×"), or
    that no budget tried meets the precondition, or that the search's records are missing."""
    tried, factor, _ = rungs(claim, store)
    done = [r for r in tried if r["value"] is not None]
    if factor is not None:
        before = [f"{r['factor']}×" for r in done[:-1]]
        where = "the first budget tried" if not before else f"after {', '.join(before)}"
        return f"{factor}× the updates ({tried[-1]['steps']:,} updates), {where}"
    if len(done) == len(SEARCHES[claim].factors):
        factors = ", ".join(f"{r['factor']}×" for r in done)
        return f"no budget tried ({factors} the updates) meets it"
    return "the search's records are not committed (`companion decisive`)"
