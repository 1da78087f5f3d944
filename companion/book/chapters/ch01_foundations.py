"""Chapter 1 (masks and positions): worked examples built on `attend`, the chapter's claim measures
and the numbers its prose cites.

`load` and `decide` have the shape every chapter module shares (`companion.book.chapter`); the
other names in `__all__` build the chapter's tables, figures and claim readings from their parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from companion.attention import attend, visible_keys
from companion.book.chapter import Decision, Findings, Runs
from companion.book.parameters import check_parameters, one_seed
from companion.book.prose import below
from companion.priors import sinusoidal_positions

__all__ = [
    "causal_visibility", "SOURCE_FIG_004", "source_comparison", "matches_source", "random_qkv", "causal_weights",
    "attend_error", "single_query_weights", "Blocking", "blocking_cases", "blocking_weights", "blocking_table", "renormalisation",
    "renormalisation_gap", "Projections", "self_attention", "permutation_gap", "equivariance_trials", "gap_summary",
    "SETTINGS", "encoding_table", "stated_pe2", "claim_measures", "prose_numbers", "TOKENS", "SCORES", "EMPTY_ROW",
    "TRIALS", "TRIAL_SHAPE", "SEEDS", "Inputs", "load", "decide",
]

# The source's table of the causal rule for a three-token sentence (its FIG-004), row by row.
SOURCE_FIG_004 = [["Allowed", "Blocked", "Blocked"],
                  ["Allowed", "Allowed", "Blocked"],
                  ["Allowed", "Allowed", "Allowed"]]


def causal_visibility(tokens: list[str]) -> pd.DataFrame:
    """Table (query rows × key columns) of "Allowed"/"Blocked" under the causal rule j ≤ i."""
    allowed = visible_keys(None, len(tokens), len(tokens), causal=True)
    table = pd.DataFrame(
        [["Allowed" if a else "Blocked" for a in row] for row in allowed.tolist()], index=tokens, columns=tokens
    )
    table.index.name, table.columns.name = "query ↓", "key →"
    return table


def source_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Cell by cell, whether a three-token visibility table agrees with the source's FIG-004."""
    return pd.DataFrame(SOURCE_FIG_004, index=table.index, columns=table.columns) == table


def matches_source(table: pd.DataFrame) -> bool:
    """Whether a three-token visibility table equals the source's FIG-004 cell by cell."""
    return table.to_numpy().tolist() == SOURCE_FIG_004


def random_qkv(n: int, d: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Queries, keys and values of one head, each (1, 1, n, d) ~ N(0, 1) in float64, drawn in that order."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    return q, k, v


def causal_weights(q: Tensor, k: Tensor, v: Tensor) -> np.ndarray:
    """The (n, n) attention weights `attend` gives one head under the causal rule."""
    _, weights = attend(q, k, v, causal=True, return_weights=True)
    return weights[0, 0].numpy()


def attend_error(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor) -> str:
    """What `attend` says about a boolean mask `allowed`: "ValueError: …", or "no error raised"."""
    try:
        attend(q, k, v, bias=allowed)
    except ValueError as err:
        return f"ValueError: {err}"
    return "no error raised"


def single_query_weights(scores: list[float], blocked: tuple[int, ...] = ()) -> Tensor:
    """Softmax weights of one query over len(scores) keys, computed by `attend` in float64.

    The scores are realised as q·k with q = (1) and k_j = (scores_j), scale 1; blocked keys get a
    False entry in a boolean bias (removed before normalisation).
    """
    n = len(scores)
    q = torch.ones(1, 1, 1, 1, dtype=torch.float64)
    k = torch.tensor(scores, dtype=torch.float64).view(1, 1, n, 1)
    v = torch.eye(n, dtype=torch.float64).view(1, 1, n, n)
    allowed = torch.ones(1, n, dtype=torch.bool)
    allowed[0, list(blocked)] = False
    _, w = attend(q, k, v, bias=allowed, scale=1.0, return_weights=True)
    return w[0, 0, 0]


class Blocking(NamedTuple):
    """One query's weights with its first key open (`open`), scored zero (`zero`) and blocked (`blocked`)."""

    open: Tensor
    zero: Tensor
    blocked: Tensor


def blocking_cases(scores: list[float]) -> Blocking:
    """The three rows of the blocking example for one query with these key scores."""
    return Blocking(single_query_weights(scores), single_query_weights([0.0] + list(scores[1:])),
                    single_query_weights(scores, blocked=(0,)))


def blocking_weights(cases: Blocking, tokens: list[str]) -> dict[str, list[float]]:
    """{case: weights over the keys}, the cases named after the first key, e.g. "grid blocked"."""
    names = ("all open", f"{tokens[0]}'s score set to 0", f"{tokens[0]} blocked")
    return {name: w.tolist() for name, w in zip(names, cases)}


def blocking_table(cases: Blocking, tokens: list[str]) -> pd.DataFrame:
    """The three cases (rows) × keys (columns) of the blocking example."""
    return pd.DataFrame(blocking_weights(cases, tokens), index=tokens).T


def renormalisation(cases: Blocking) -> tuple[Tensor, Tensor]:
    """(surviving weights blocked over open, 1 / (1 − w_b)): blocking the first key rescales the rest."""
    factor = 1.0 / (1.0 - cases.open[0])
    return cases.blocked[1:] / cases.open[1:], factor


def renormalisation_gap(cases: Blocking) -> float:
    """max_j |w'_j / w_j − 1/(1 − w_b)| over the surviving keys: float64 rounding if renormalisation holds."""
    ratios, factor = renormalisation(cases)
    return float((ratios - factor).abs().max())


@dataclass(frozen=True)
class Projections:
    """Query, key and value matrices (d, d) of one attention head, drawn N(0, 1/d)."""

    w_q: Tensor
    w_k: Tensor
    w_v: Tensor

    @classmethod
    def random(cls, d: int, *, generator: torch.Generator, dtype=torch.float64) -> "Projections":
        draw = lambda: torch.randn(d, d, generator=generator, dtype=dtype) / d**0.5  # noqa: E731
        return cls(draw(), draw(), draw())


def self_attention(x: Tensor, proj: Projections, *, causal: bool = False, positions: Tensor | None = None) -> Tensor:
    """One head: (x + positions) projected to q, k, v, then `attend`. x is (n, d); returns (n, d)."""
    h = x if positions is None else x + positions
    q, k, v = (h @ w for w in (proj.w_q, proj.w_k, proj.w_v))
    return attend(q[None, None], k[None, None], v[None, None], causal=causal)[0, 0]


def permutation_gap(
    x: Tensor, perm: Tensor, proj: Projections, *, causal: bool = False, positions: Tensor | None = None
) -> float:
    """max |f(x[perm]) − f(x)[perm]|: zero iff f commutes with this reordering of the tokens.

    Positions stay attached to slots, not tokens: they are added after the reordering.
    """
    moved = self_attention(x[perm], proj, causal=causal, positions=positions)
    expected = self_attention(x, proj, causal=causal, positions=positions)[perm]
    return float((moved - expected).abs().max())


SETTINGS = ("all-visible, no positions", "fixed causal mask", "sinusoidal positions")


def _non_identity_permutation(n: int, generator: torch.Generator) -> Tensor:
    while True:
        perm = torch.randperm(n, generator=generator)
        if not torch.equal(perm, torch.arange(n)):
            return perm


def equivariance_trials(n: int, d: int, trials: int, *, generator: torch.Generator) -> dict[str, list[float]]:
    """Permutation gaps in the three SETTINGS over `trials` random (x, P) pairs, float64.

    One head with fixed random projections; x ~ N(0, 1) of shape (n, d); P a random non-identity
    permutation; positions are the sinusoidal encoding of width d.
    """
    proj = Projections.random(d, generator=generator)
    pe = sinusoidal_positions(n, d, dtype=torch.float64)
    gaps: dict[str, list[float]] = {s: [] for s in SETTINGS}
    for _ in range(trials):
        x = torch.randn(n, d, generator=generator, dtype=torch.float64)
        perm = _non_identity_permutation(n, generator)
        gaps[SETTINGS[0]].append(permutation_gap(x, perm, proj))
        gaps[SETTINGS[1]].append(permutation_gap(x, perm, proj, causal=True))
        gaps[SETTINGS[2]].append(permutation_gap(x, perm, proj, positions=pe))
    return gaps


def gap_summary(gaps: dict[str, list[float]]) -> pd.DataFrame:
    """Largest and smallest gap per setting, as text: rounding-level gaps as a bound (`prose.below`),
    small ones in e-notation, others to 3 places."""
    summary = pd.DataFrame({s: {"largest gap": max(v), "smallest gap": min(v)} for s, v in gaps.items()}).T
    return summary.map(lambda x: below(x) if x < 1e-6 else f"{x:.3f}")


def encoding_table(pe: Tensor, digits: int = 4) -> pd.DataFrame:
    """A sinusoidal encoding as the page shows it: one row per position p, one column per coordinate
    (PE(p, 0) = sin p, PE(p, 1) = cos p in width two), `digits` decimals."""
    values = pe.detach().cpu().numpy()
    frame = pd.DataFrame(values, index=pd.Index(range(len(values)), name="position p"),
                         columns=[f"PE(p, {i})" for i in range(values.shape[1])])
    return frame.map(lambda x: f"{x:.{digits}f}".replace("-", "−"))


def stated_pe2() -> Tensor:
    """The source's sinusoidal encoding in width two: [0, 1] at position 0, [sin 1, cos 1] at position 1."""
    return torch.tensor([[0.0, 1.0], [np.sin(1.0), np.cos(1.0)]], dtype=torch.float64)


def claim_measures(table: pd.DataFrame, cases: Blocking, error: str, gaps: dict[str, list[float]],
                   pe2: Tensor) -> dict[str, object]:
    """The S1-… measures: the causal table against FIG-004, the blocked and zero-scored weights, the
    renormalisation gap, the refusal of an empty row (row 1), the three permutation gaps, and the
    width-two sinusoidal encoding against the stated values."""
    return {
        "S1-01": matches_source(table),
        "S1-02": float(cases.blocked[0]),
        "S1-03": float(cases.zero[0]),
        "S1-04": renormalisation_gap(cases),
        "S1-05": error.startswith("ValueError") and "rows [1]" in error,
        "S1-06": max(gaps[SETTINGS[0]]),
        "S1-07": min(gaps[SETTINGS[1]]),
        "S1-08": min(gaps[SETTINGS[2]]),
        "S1-09": float((pe2 - stated_pe2()).abs().max()),
    }


def prose_numbers(table: pd.DataFrame, cases: Blocking, gaps: dict[str, list[float]], pe2: Tensor) -> dict[str, str]:
    """Every number the chapter's text cites, by glue name, formatted as the text reads it."""
    _, factor = renormalisation(cases)
    return {
        "ch1_n_allowed": str(int((table == "Allowed").to_numpy().sum())),
        "ch1_n_cells": str(table.size),
        "ch1_w_grid_zero": str(round(float(cases.zero[0]), 4)),
        "ch1_w_grid_blocked": str(round(float(cases.blocked[0]), 4)),
        "ch1_w_grid_open_pct": str(round(100 * float(cases.open[0]), 1)),
        "ch1_renorm_factor": str(round(float(factor), 4)),
        "ch1_load_before": str(round(float(cases.open[1]), 4)),
        "ch1_load_after": str(round(float(cases.blocked[1]), 4)),
        "ch1_trials": str(len(gaps[SETTINGS[0]])),
        "ch1_gap_equivariant": below(max(gaps[SETTINGS[0]])),
        "ch1_gap_causal_min": str(round(min(gaps[SETTINGS[1]]), 3)),
        "ch1_gap_positions_min": str(round(min(gaps[SETTINGS[2]]), 3)),
        "ch1_pe1_sin": str(round(float(pe2[1, 0]), 4)),
        "ch1_pe1_cos": str(round(float(pe2[1, 1]), 4)),
    }


# The chapter's examples: the tokens, one query's key scores, a mask whose second row is empty, the
# permutation trials per profile and the (n, d) of their inputs.
TOKENS = ("grid", "load", "rises")
SCORES = (2.0, 1.0, 0.5)
EMPTY_ROW = ((True, False, False), (False, False, False), (True, True, True))
TRIALS = {"ci": 200, "paper": 2000}
TRIAL_SHAPE = (6, 8)
SEEDS = (0,)  # the notebook's `seed`


@dataclass(frozen=True)
class Inputs:
    """What the chapter computes from: its examples (`TOKENS`, `SCORES`, `EMPTY_ROW`), the number of
    permutation trials and the seed of every random draw. A reader asks another question with
    `dataclasses.replace(runs["inputs"], tokens=(...))` and `decide(Runs(profile, seeds, {"inputs": ...}))`."""

    tokens: tuple[str, ...]
    scores: tuple[float, ...]
    empty_row: tuple[tuple[bool, ...], ...]
    trials: int
    seed: int
    trial_shape: tuple[int, int] = TRIAL_SHAPE


def load(profile: str = "ci", seeds=None, *, store=None) -> Runs:
    """The chapter's inputs at `profile` (block "inputs"): nothing is read, so `store` is accepted for the
    common interface and unused. `seeds`: None (seed 0) or one seed."""
    seed = one_seed(seeds, "Chapter 1")
    check_parameters(profile, [seed])
    return Runs(profile, [seed], {"inputs": Inputs(TOKENS, SCORES, EMPTY_ROW, TRIALS[profile], seed)})


def decide(runs: Runs) -> Findings:
    """Every S1-… claim and the numbers the text cites. Parts: `table` (the causal rule), `qkv` (a
    random head), `cases` (one query's weights, open / zero-scored / blocked), `error` (what `attend`
    says of an empty row), `gaps` (the permutation trials), `pe2` (the width-two encoding)."""
    x = runs["inputs"]
    tokens = list(x.tokens)
    table = causal_visibility(tokens)
    q, k, v = random_qkv(len(tokens), 4, x.seed)
    cases = blocking_cases(list(x.scores))
    error = attend_error(q, k, v, torch.tensor(x.empty_row))
    gaps = equivariance_trials(*x.trial_shape, x.trials, generator=torch.Generator().manual_seed(x.seed))
    pe2 = sinusoidal_positions(2, 2, dtype=torch.float64)
    d = Decision()
    d.claims(claim_measures(table, cases, error, gaps, pe2))
    d.glue(prose_numbers(table, cases, gaps, pe2))
    return d.done(tokens=tokens, table=table, qkv=(q, k, v), cases=cases, error=error, gaps=gaps, pe2=pe2)
