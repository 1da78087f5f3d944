"""Boolean functions on the cube {±1}^n as Fourier expansions, and the minimum-degree interpolator.

A function is a mapping monomial → coefficient, f(x) = Σ_S c_S Π_{i∈S} x_i (monomials as tuples of
coordinates). Generalisation on the unseen (GOTU, Abbe et al. 2023) trains on a seen set S of the
cube and tests on the rest U; Transformers trained there tend to land on the *minimum-degree
interpolator* (MDI): the function that agrees with f on S and has the smallest Fourier weight on the
highest degree, then the next, and so on (lexicographic degree profile).

`min_degree_interpolator` computes it as f + h with h vanishing on S. The search for h is restricted
to the coordinates C that define U plus those of every monomial of f that touches them: a correction
that used any other coordinate could only add weight at a higher degree than it removes (a test checks
the restriction against the unrestricted problem on a small cube).

With `symmetric` (a set O of coordinates) the search is over interpolators that are symmetric in O
(unchanged by every permutation of O's coordinates): the lowest-degree interpolant a model exactly
symmetric over O could land on (Chapter 3, "Why the mask helps Majority and not 2Parity"). The seen
set may admit none (its values differ on two points that a permutation of O exchanges); then there is
no such interpolator, and None is returned.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["Expansion", "cube", "evaluate", "fourier_coefficients", "min_degree_interpolator", "degree_profile"]

Expansion = dict[tuple[int, ...], float]


def cube(n: int, dtype=torch.float32) -> Tensor:
    """All 2^n points of {±1}^n, shape (2^n, n), in lexicographic order of (−1, +1) per coordinate."""
    return torch.tensor(list(itertools.product((-1.0, 1.0), repeat=n)), dtype=dtype)


def evaluate(f: Expansion, x: Tensor) -> Tensor:
    """f(x) for points x (N, n)."""
    out = torch.zeros(x.shape[0], dtype=x.dtype)
    for mono, c in f.items():
        out = out + c * (x[:, list(mono)].prod(dim=1) if mono else torch.ones_like(out))
    return out


def fourier_coefficients(values: Tensor, coords: tuple[int, ...]) -> Expansion:
    """Expansion of a function given by its values on cube(len(coords)) (rows in `cube` order).

    Coefficient of monomial S = mean over the cube of f(x) Π_{i∈S} x_i; returned on the original
    coordinate labels `coords`, zero coefficients dropped.
    """
    k = len(coords)
    z = cube(k, dtype=values.dtype)
    out: Expansion = {}
    for r in range(k + 1):
        for sub in itertools.combinations(range(k), r):
            chi = z[:, list(sub)].prod(dim=1) if sub else torch.ones(len(z), dtype=values.dtype)
            c = float((values * chi).mean())
            if abs(c) > 1e-12:
                out[tuple(coords[i] for i in sub)] = c
    return out


def degree_profile(f: Expansion, n: int) -> list[float]:
    """Fourier weight Σ_{|S|=d} c_S² for d = 0..n."""
    prof = [0.0] * (n + 1)
    for mono, c in f.items():
        prof[len(mono)] += c * c
    return prof


def _subsets(k: int) -> list[tuple[int, ...]]:
    return [s for r in range(k + 1) for s in itertools.combinations(range(k), r)]


def _transposition(subsets: list[tuple[int, ...]], a: int, b: int) -> list[int]:
    """Index of the image of each subset when coordinates a and b (local) are exchanged."""
    where = {s: i for i, s in enumerate(subsets)}
    swap = {a: b, b: a}
    return [where[tuple(sorted(swap.get(i, i) for i in s))] for s in subsets]


def min_degree_interpolator(
    f: Expansion, unseen: Callable[[Tensor], Tensor], n: int, *, frozen: tuple[int, ...], restrict: bool = True,
    symmetric: tuple[int, ...] = (),
) -> Expansion | None:
    """The MDI of f from the seen set {x : not unseen(x)}.

    Args:
        f: the target's expansion.
        unseen: predicate on points (N, n) → bool (N,), depending only on the `frozen` coordinates.
        n: dimension of the cube.
        frozen: the coordinates that define the unseen set.
        restrict: search corrections over the coordinates C described in the module docstring (True)
            or over all n coordinates (False; exponential, for checking on small cubes).
        symmetric: coordinates O the interpolator must be symmetric in (module docstring); empty: none.
            Returns None when no interpolator of the seen set is symmetric in O.
    """
    if restrict:
        anchor = set(frozen) | set(symmetric)
        touched = anchor.union(*(set(m) for m in f if set(m) & anchor))
        coords = tuple(sorted(touched))
    else:
        coords = tuple(range(n))
    k = len(coords)
    z = cube(k, dtype=torch.float64)
    full = torch.zeros(len(z), n, dtype=torch.float64)  # embed sub-cube points to test the predicate
    full[:, list(coords)] = z
    u_points = unseen(full).nonzero().flatten().tolist()
    subsets = _subsets(k)
    chi = torch.stack([z[:, list(s)].prod(dim=1) if s else torch.ones(len(z), dtype=torch.float64) for s in subsets], 1)
    # Column u of H: Fourier coefficients (over C) of the indicator of unseen point u.
    H = chi[u_points].T / len(z)
    label = {tuple(coords[i] for i in s): row for row, s in enumerate(subsets)}
    F = torch.zeros(len(subsets), dtype=torch.float64)
    f = {tuple(sorted(m)): c for m, c in f.items()}
    for mono, c in f.items():
        if mono in label:
            F[label[mono]] += c
        elif not restrict:
            raise ValueError(f"monomial {mono} outside the cube of dimension {n}.")
    c0 = torch.zeros(H.shape[1], dtype=torch.float64)
    basis = torch.eye(H.shape[1], dtype=torch.float64)
    if symmetric:
        # symmetry in O: the coefficient of S equals that of its image under each transposition (o_0 o_j)
        local = [coords.index(c) for c in symmetric]
        perms = [_transposition(subsets, local[0], j) for j in local[1:]]
        A = torch.cat([H[p] - H for p in perms])
        b = torch.cat([F - F[p] for p in perms])
        c0 = torch.linalg.lstsq(A, b[:, None]).solution[:, 0]
        if float((A @ c0 - b).abs().max()) > 1e-9:
            return None
        _, s, vh = torch.linalg.svd(A, full_matrices=True)
        rank = int((s > 1e-10 * max(1.0, float(s.max()) if s.numel() else 1.0)).sum())
        basis = vh[rank:].T
    for d in range(k, -1, -1):
        rows = [i for i, s in enumerate(subsets) if len(s) == d]
        A = H[rows] @ basis
        if basis.shape[1] == 0:
            break
        y = torch.linalg.lstsq(A, -(F[rows] + H[rows] @ c0)).solution
        c0 = c0 + basis @ y
        # keep the freedom that does not change degree d: the null space of A
        _, s, vh = torch.linalg.svd(A, full_matrices=True)
        rank = int((s > 1e-10 * max(1.0, float(s.max()) if s.numel() else 1.0)).sum())
        basis = basis @ vh[rank:].T
    coef = F + H @ c0
    out: Expansion = {mono: c for mono, c in f.items() if mono not in label}
    for mono, row in label.items():
        if abs(float(coef[row])) > 1e-9:
            out[mono] = round(float(coef[row]), 9)
    return out
