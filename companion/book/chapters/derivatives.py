"""Theorem 1 and Corollary 1 of the mask-initialisation paper (arXiv 2608.00418) in closed form, float64. For one query
with content scores a_j and mask entries m_j, p = softmax(a + log σ(m)):
    ∂p_i/∂m_j = p_i (δ_ij − p_j) σ(−m_j),         |∂p_i/∂m_j| ≤ σ(−m_j)/4 ≤ 1/4      (Thm 1, Cor 1)
and for content scores a_j = q·k_j / √d the query and key derivatives
    ∂p_i/∂q   = p_i (k_i − Σ_j p_j k_j) / √d,     ‖∂p_i/∂q‖ ≤ 2 p_i max_j ‖k_j‖ / √d
    ∂p_i/∂k_j = p_i (δ_ij − p_j) q / √d,           ‖∂p_i/∂k_j‖ ≤ ‖q‖ / (4√d)
Each is checked against autograd and central finite differences here, in the tests and in Chapter 2."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from companion.book.prose import DIFFERENCES, ROUNDOFF, below

__all__ = ["ROUNDING", "mask_probs", "dp_dm", "dp_dq", "dp_dk", "autograd_jacobian", "central_difference",
           "theorem1_gaps", "qk_gaps", "gap_texts", "within_rounding", "corollary1_worst_ratio"]


# A closed-form derivative that differs from autograd or finite differences by less than this is
# taken to agree up to rounding (finite differences at ε = 1e-6 are accurate to about 1e-10).
ROUNDING = 1e-8


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


def theorem1_gaps(draws: int, generator: torch.Generator) -> dict[str, float]:
    """Largest |closed form − autograd| and |closed form − central differences| of ∂p/∂m over `draws`
    draws of five scores a ~ N(0, 1) and five mask entries m ~ N(0, 3²), drawn from `generator`."""
    gaps = {"autograd": 0.0, "finite differences": 0.0}
    for _ in range(draws):
        a = torch.randn(5, generator=generator, dtype=torch.float64)
        m = 3 * torch.randn(5, generator=generator, dtype=torch.float64)
        closed = dp_dm(a, m)
        fn = lambda x: mask_probs(a, x)  # noqa: E731
        gaps["autograd"] = max(gaps["autograd"], float((closed - autograd_jacobian(fn, m)).abs().max()))
        gaps["finite differences"] = max(gaps["finite differences"],
                                         float((closed - central_difference(fn, m)).abs().max()))
    return gaps


def qk_gaps(generator: torch.Generator, *, n: int = 6, d: int = 8) -> dict[str, float]:
    """The query and key closed forms against autograd (and the key's against finite differences) for
    one query (d,) and n keys (n, d) ~ N(0, 1), drawn from `generator` in that order."""
    q = torch.randn(d, generator=generator, dtype=torch.float64)
    k = torch.randn(n, d, generator=generator, dtype=torch.float64)
    probs_q = lambda x: torch.softmax(k @ x / math.sqrt(d), dim=-1)  # noqa: E731
    probs_k = lambda x: torch.softmax(x @ q / math.sqrt(d), dim=-1)  # noqa: E731
    return {"∂p/∂q vs autograd": float((dp_dq(q, k) - autograd_jacobian(probs_q, q)).abs().max()),
            "∂p/∂k vs autograd": float((dp_dk(q, k) - autograd_jacobian(probs_k, k)).abs().max()),
            "∂p/∂k vs finite differences": float((dp_dk(q, k) - central_difference(probs_k, k)).abs().max())}


def gap_texts(gaps: dict[str, float]) -> dict[str, str]:
    """Each gap as the page writes it: against autograd under float64's rounding floor, against finite
    differences under theirs, as a bound (`prose.below`), so the page is the same on every processor."""
    return {name: below(v, DIFFERENCES if "finite differences" in name else ROUNDOFF) for name, v in gaps.items()}


def within_rounding(gaps: dict[str, float]) -> dict[str, bool]:
    """Whether each gap is below ROUNDING."""
    return {name: v < ROUNDING for name, v in gaps.items()}


def corollary1_worst_ratio(draws: int, generator: torch.Generator) -> float:
    """Largest |∂p_i/∂m_j| / (σ(−m_j)/4) over `draws` draws of five scores a ~ N(0, 5²) and five mask
    entries m ~ N(0, 3²): at most 1 if Corollary 1 holds."""
    worst = 0.0
    for _ in range(draws):
        a = 5 * torch.randn(5, generator=generator, dtype=torch.float64)
        m = 3 * torch.randn(5, generator=generator, dtype=torch.float64)
        worst = max(worst, float((dp_dm(a, m).abs() / (torch.sigmoid(-m) / 4)).max()))
    return worst
