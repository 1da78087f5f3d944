"""Query-key initialisations, applied in place to a model's attention layers: the `QK_INITS` registry.

- "default": the projections keep the init they were built with (PyTorch's Linear distribution).
- "mimetic" (Trockman & Kolter, ICML 2023, arXiv 2305.09828): per head W_q W_kᵀ ≈ α·Z + β·I.
Later issues add "structured-svd" and "structured-opt" (Zheng, Li & Lucey 2024) as more entries.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

__all__ = ["QK_INITS", "apply_qk_init_", "init_default_", "init_mimetic_", "mimetic_target"]


def init_default_(attn: nn.Module, *, generator: torch.Generator) -> None:
    """Leave the query/key projections as built."""


def mimetic_target(d: int, *, alpha: float, beta: float, generator: torch.Generator) -> Tensor:
    """A = α·Z + β·I with Z_ab ~ N(0, 1/d), shape (d, d)."""
    z = torch.randn(d, d, generator=generator, dtype=torch.float64) / d**0.5
    return alpha * z + beta * torch.eye(d, dtype=torch.float64)


@torch.no_grad()
def init_mimetic_(
    attn: nn.Module, *, generator: torch.Generator, alpha: float = 0.7, beta: float = 0.7
) -> None:
    """Mimetic query-key init: each head's bilinear form W_Q W_Kᵀ is the best rank-r fit of α·Z + β·I.

    For every head h an independent A_h = α·Z_h + β·I (d × d, Z ~ N(0, 1/d)) is factorised by SVD,
    A = U S Vᵀ, L = U √S, R = √S Vᵀ, and the head's r = d_head query rows are L[:, :r]ᵀ and key rows
    R[:r, :], so that W_Q^(h) W_K^(h)ᵀ = L[:, :r] R[:r, :] (= A exactly when r ≥ d). With
    `q = x W_qᵀ` (torch Linear), the score is q_i·k_j = x_iᵀ W_q[h]ᵀ W_k[h] x_j, so W_Q^(h) = W_q[h]ᵀ.

    Args:
        attn: a module with `q_proj`, `k_proj` (Linear d_model → n_heads·d_head) and `n_heads`.
        generator: draws Z.
        alpha, beta: the ViT defaults of the paper (0.7, 0.7).
    """
    wq, wk = attn.q_proj.weight, attn.k_proj.weight  # (h·r, d)
    h, d = attn.n_heads, wq.shape[1]
    r = wq.shape[0] // h
    k = min(r, d)
    for head in range(h):
        u, s, vt = torch.linalg.svd(mimetic_target(d, alpha=alpha, beta=beta, generator=generator))
        root = s[:k].sqrt()
        q_rows = torch.zeros(r, d, dtype=torch.float64)
        k_rows = torch.zeros(r, d, dtype=torch.float64)
        q_rows[:k] = (u[:, :k] * root).T
        k_rows[:k] = root[:, None] * vt[:k]
        wq[head * r : (head + 1) * r] = q_rows.to(wq)
        wk[head * r : (head + 1) * r] = k_rows.to(wk)


QK_INITS: dict[str, Callable[..., None]] = {"default": init_default_, "mimetic": init_mimetic_}


def apply_qk_init_(model: nn.Module, name: str, *, generator: torch.Generator) -> nn.Module:
    """Apply `QK_INITS[name]` to every attention layer of `model` (modules named `*.attn`)."""
    if name not in QK_INITS:
        raise ValueError(f"unknown qk_init {name!r}; choose one of {sorted(QK_INITS)}.")
    for mod_name, module in model.named_modules():
        if mod_name.endswith("attn") and hasattr(module, "q_proj"):
            QK_INITS[name](module, generator=generator)
    return model
