"""Worked examples of Chapter 1 (masks and positions), built on `attend`.

- `causal_visibility`: the row-by-row causal rule as an Allowed/Blocked table.
- `single_query_weights`: one query's weights over a few keys, with chosen keys blocked.
- `Projections` / `self_attention`: one head of self-attention with fixed random projections.
- `permutation_gap`: max |f(P x) − P f(x)|, the failure of permutation equivariance.
- `equivariance_trials`: that gap over random inputs and permutations, in three settings.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from companion.attention import attend, visible_keys

__all__ = ["causal_visibility", "single_query_weights", "Projections", "self_attention", "permutation_gap", "equivariance_trials", "SETTINGS"]


def causal_visibility(tokens: list[str]):
    """Table (query rows × key columns) of "Allowed"/"Blocked" under the causal rule j ≤ i."""
    import pandas as pd

    allowed = visible_keys(None, len(tokens), len(tokens), causal=True)
    table = pd.DataFrame(
        [["Allowed" if a else "Blocked" for a in row] for row in allowed.tolist()], index=tokens, columns=tokens
    )
    table.index.name, table.columns.name = "query ↓", "key →"
    return table


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
    from companion.priors import sinusoidal_positions

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
