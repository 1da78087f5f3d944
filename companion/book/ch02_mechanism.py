"""Theorem 1 and Corollary 1 of the mask-initialisation paper (arXiv 2608.00418), in closed form.

For one query with content scores a_j and mask entries m_j, p = softmax(a + log σ(m)):

    ∂p_i/∂m_j = p_i (δ_ij − p_j) σ(−m_j),         |∂p_i/∂m_j| ≤ σ(−m_j)/4 ≤ 1/4      (Thm 1, Cor 1)

and for content scores a_j = q·k_j / √d the query and key derivatives

    ∂p_i/∂q   = p_i (k_i − Σ_j p_j k_j) / √d,     ‖∂p_i/∂q‖ ≤ 2 p_i max_j ‖k_j‖ / √d
    ∂p_i/∂k_j = p_i (δ_ij − p_j) q / √d,           ‖∂p_i/∂k_j‖ ≤ ‖q‖ / (4√d)

scale with the key and query norms. Everything here is float64 and checked against autograd and
central finite differences in the tests and in Chapter 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "mask_probs", "dp_dm", "dp_dq", "dp_dk", "autograd_jacobian", "central_difference",
    "norm_sweep", "contrast_sweep",
]


def mask_probs(a: Tensor, m: Tensor) -> Tensor:
    """p = softmax(a + log σ(m)) over the last axis."""
    return torch.softmax(a + F.logsigmoid(m), dim=-1)


def dp_dm(a: Tensor, m: Tensor) -> Tensor:
    """Theorem 1: J[i, j] = ∂p_i/∂m_j = p_i (δ_ij − p_j) σ(−m_j); a, m of shape (n,)."""
    p = mask_probs(a, m)
    return (torch.diag(p) - p[:, None] * p[None, :]) * torch.sigmoid(-m)[None, :]


def dp_dq(q: Tensor, k: Tensor) -> Tensor:
    """J[i] = ∂p_i/∂q = p_i (k_i − Σ_j p_j k_j)/√d for q (d,), k (n, d); shape (n, d)."""
    d = q.shape[-1]
    p = torch.softmax(k @ q / math.sqrt(d), dim=-1)
    return p[:, None] * (k - p @ k) / math.sqrt(d)


def dp_dk(q: Tensor, k: Tensor) -> Tensor:
    """J[i, j] = ∂p_i/∂k_j = p_i (δ_ij − p_j) q/√d; shape (n, n, d)."""
    d = q.shape[-1]
    p = torch.softmax(k @ q / math.sqrt(d), dim=-1)
    return (torch.diag(p) - p[:, None] * p[None, :])[..., None] * q / math.sqrt(d)


def autograd_jacobian(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """∂fn(x)/∂x by autograd, shape fn(x).shape + x.shape."""
    return torch.autograd.functional.jacobian(fn, x)


def central_difference(fn: Callable[[Tensor], Tensor], x: Tensor, eps: float = 1e-6) -> Tensor:
    """(fn(x + εe) − fn(x − εe)) / 2ε for every coordinate e of x; same layout as autograd."""
    flat = x.reshape(-1)
    cols = []
    for idx in range(flat.numel()):
        e = torch.zeros_like(flat)
        e[idx] = eps
        cols.append((fn((flat + e).view_as(x)) - fn((flat - e).view_as(x))) / (2 * eps))
    out = torch.stack(cols, dim=-1)
    return out.reshape(*out.shape[:-1], *x.shape)


def norm_sweep(scales: list[float], *, n: int, d: int, draws: int, m: float, generator: torch.Generator) -> dict:
    """Derivative sizes as the query and key norms grow.

    For each scale c, draws `draws` queries and key sets whose rows are random directions of norm c,
    and records the largest entry of |∂p/∂m| (mask held at m everywhere), of ‖∂p_i/∂q‖ and of
    ‖∂p_i/∂k_j‖, averaged over draws, with the Corollary 1 bound σ(−m)/4 and the QK bounds
    2 max_i p_i max_j‖k_j‖/√d and ‖q‖/(4√d).
    """
    rows = []
    mm = torch.full((n,), m, dtype=torch.float64)
    for c in scales:
        acc = {"dm": 0.0, "dq": 0.0, "dk": 0.0, "bound_q": 0.0}
        for _ in range(draws):
            q = F.normalize(torch.randn(d, generator=generator, dtype=torch.float64), dim=0) * c
            k = F.normalize(torch.randn(n, d, generator=generator, dtype=torch.float64), dim=1) * c
            a = k @ q / math.sqrt(d)
            acc["dm"] += float(dp_dm(a, mm).abs().max())
            acc["dq"] += float(dp_dq(q, k).norm(dim=-1).max())
            acc["dk"] += float(dp_dk(q, k).norm(dim=-1).max())
            p = torch.softmax(a, dim=-1)
            acc["bound_q"] += float(2 * p.max() * c / math.sqrt(d))
        rows.append({
            "scale": c, "mask": acc["dm"] / draws, "query": acc["dq"] / draws, "key": acc["dk"] / draws,
            "bound_mask": 0.25 / (1 + math.exp(m)), "bound_query": acc["bound_q"] / draws,
            "bound_key": c / (4 * math.sqrt(d)),
        })
    return {k: [r[k] for r in rows] for k in rows[0]}


def contrast_sweep(contrasts: list[float], *, a: Tensor, open_: Tensor) -> dict:
    """Mask-gradient sizes for an open/closed mask at ±c, for content scores a (n,) and a bool pattern.

    Returns, per contrast c: the closed entries' total weight, the largest |∂p_i/∂m_j| over open
    keys j and over closed keys j (i ranging over all keys), and σ(−c), the factor of an open entry.
    """
    rows = []
    for c in contrasts:
        m = torch.where(open_, torch.tensor(c, dtype=torch.float64), torch.tensor(-c, dtype=torch.float64))
        p = mask_probs(a, m)
        jac = dp_dm(a, m).abs()
        rows.append({
            "contrast": c, "closed_mass": float(p[~open_].sum()),
            "grad_open": float(jac[:, open_].max()), "grad_closed": float(jac[:, ~open_].max()),
            "sigma_open": 1 / (1 + math.exp(c)),
        })
    return {k: [r[k] for r in rows] for k in rows[0]}
