"""Exact symmetry of a model over a set of positions: a shared position embedding and a mask
averaged over the permutations of those positions.

A Transformer without positional information is permutation-equivariant (Chapter 1). Learned
positions and a mask break that; both are restored on a chosen set O of positions when

- every position of O reads one and the same position embedding (`tied_index`), and
- the mask's logits M enter the scores through their projection onto the matrices that the
  permutations of O leave unchanged (`symmetrise`): each orbit of entries under those permutations
  gets its mean, written once and read by every entry of the orbit, so that the bias is invariant
  to the last bit, not merely up to rounding.

With both, permuting the tokens at O permutes the encoder's positions and leaves a CLS read-out (at a
position outside O) unchanged (tests/test_symmetry.py). Position 0 is CLS when the model has one.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["check_orbit", "tied_index", "symmetrise"]


def check_orbit(positions: tuple[int, ...], n: int) -> None:
    """ValueError unless `positions` are at least two distinct positions in [0, n)."""
    if len(positions) < 2 or len(set(positions)) != len(positions) or not all(0 <= p < n for p in positions):
        raise ValueError(f"a symmetric set needs at least two distinct positions in [0, {n - 1}], got {positions}.")


def tied_index(n: int, positions: tuple[int, ...]) -> list[int]:
    """Which position embedding each of n positions reads: its own, or the first of `positions` for
    every position in `positions`."""
    check_orbit(positions, n)
    first = min(positions)
    return [first if p in positions else p for p in range(n)]


def symmetrise(m: Tensor, positions: tuple[int, ...]) -> Tensor:
    """The projection of m (..., n, n) onto the matrices invariant under every permutation of
    `positions` applied to rows and columns together.

    With O the positions and r, r' outside O: entries (r, r') are kept; (o, o) get the mean of O's
    diagonal; (o, o') with o ≠ o' the mean of O's off-diagonal block; (o, r) the mean over O of column r
    of O's rows; (r, o) the mean over O of row r of O's columns. Differentiable (gradients reach every
    entry averaged)."""
    n = m.shape[-1]
    check_orbit(positions, n)
    idx = list(positions)
    k = len(idx)
    inside = torch.zeros(n, dtype=torch.bool, device=m.device)
    inside[idx] = True
    eye = torch.eye(n, dtype=torch.bool, device=m.device)
    block = m[..., idx, :][..., :, idx]  # (..., k, k)
    diag = torch.diagonal(block, dim1=-2, dim2=-1)
    diag_mean = diag.mean(-1)[..., None, None]
    off_mean = ((block.sum((-2, -1)) - diag.sum(-1)) / (k * (k - 1)))[..., None, None]
    row_mean = m[..., idx, :].mean(-2)[..., None, :]  # (o, r): mean over o of m[o, r]
    col_mean = m[..., :, idx].mean(-1)[..., :, None]  # (r, o): mean over o of m[r, o]
    rows, cols = inside[:, None], inside[None, :]
    out = torch.where(rows & ~cols, row_mean, m)
    out = torch.where(~rows & cols, col_mean, out)
    out = torch.where(rows & cols & eye, diag_mean, out)
    return torch.where(rows & cols & ~eye, off_mean, out)
