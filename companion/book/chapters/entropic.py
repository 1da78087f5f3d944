"""Attention as entropic optimal transport with a prior (GOAT, arXiv 2601.15380, §2–§5), in numbers.

- `solve_entropic(s, log_prior, tau)`: the minimiser of −⟨p, s⟩ + τ·KL(p ‖ π) over the simplex,
  found by mirror descent (exponentiated gradient) without using the closed form; Proposition 2.2
  (uniform π: softmax(s/τ)) and Proposition 3.1 (any π: softmax(s/τ + log π)) are checked against it.
- `objective`: the transport objective, to confirm that a solution is optimal among simplex points.
- `prior_panels(prior, n)`: the four views of a learned GOAT prior in Figure 1; `prior_views(sink,
  kappa)`: the same views from a record's `goat_prior` readout (u and κ per head, no model).

What is measured on a trained model (its attention internals, Theorem 5.1, the sink against the
content signal) lives in the core, `companion.transport`, and reaches the book through readouts.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from companion.goat import GoatPrior

__all__ = ["objective", "solve_entropic", "prior_panels", "prior_views"]


def objective(p: Tensor, s: Tensor, log_prior: Tensor, tau: float) -> Tensor:
    """−⟨p, s⟩ + τ·KL(p ‖ π) along the last axis (0·log 0 = 0); π = exp(log_prior) normalised."""
    log_pi = log_prior - torch.logsumexp(log_prior, -1, keepdim=True)
    kl = torch.where(p > 0, p * (p.log() - log_pi), torch.zeros_like(p)).sum(-1)
    return -(p * s).sum(-1) + tau * kl


def solve_entropic(s: Tensor, log_prior: Tensor | None = None, tau: float = 1.0, *, step: float = 0.5,
                   iters: int = 200) -> Tensor:
    """argmin over the simplex of −⟨p, s⟩ + τ·KL(p ‖ π), by mirror descent from the uniform point.

    Each iteration p ← p ⊙ exp(−η ∇) / Z with ∇ = −s + τ(log p − log π) and η = step / τ (< 1/τ,
    so the iteration contracts the error in log p by the factor 1 − step every time). The result never
    comes from the closed form; it is what an optimiser finds.

    Args:
        s: scores (…, L). log_prior: log π up to a constant (…, L); None = uniform. tau: temperature.
    """
    if not 0 < step < 1:
        raise ValueError(f"step must be in (0, 1) for the iteration to contract, got {step}.")
    log_prior = torch.zeros_like(s) if log_prior is None else log_prior
    log_p = torch.full_like(s, -math.log(s.shape[-1]))
    eta = step / tau
    for _ in range(iters):
        grad = -s + tau * (log_p - log_prior)
        log_p = log_p - eta * grad
        log_p = log_p - torch.logsumexp(log_p, -1, keepdim=True)
    return log_p.exp()


@torch.no_grad()
def prior_panels(prior: GoatPrior, n: int) -> dict[str, np.ndarray]:
    """The four views of Figure 1 for every head: "sink" u_h(j) (h, n); "kappa" κ_h(Δ), Δ = 0…n−1
    (h, n); "centred" the total log-prior K with each row centred over its visible keys (h, n, n; NaN
    above the diagonal when causal); "causal" the induced prior, row-softmax of K over j ≤ i (h, n, n)."""
    pos = torch.arange(n, device=prior.alpha.device)
    k = prior.bias(n, n).double().cpu()
    visible = torch.ones(n, n, dtype=torch.bool).tril() if prior.causal else torch.ones(n, n, dtype=torch.bool)
    masked = k.masked_fill(~visible, math.nan)
    centred = masked - torch.nanmean(masked, dim=-1, keepdim=True)
    causal = torch.softmax(k.masked_fill(~visible, -math.inf), dim=-1)
    return {"sink": prior.sink(pos).double().cpu().numpy(), "kappa": prior.kappa(pos).double().cpu().numpy(),
            "centred": centred.numpy(), "causal": causal.numpy()}


def prior_views(sink, kappa) -> dict[str, np.ndarray]:
    """`prior_panels` of a causal GOAT prior from its `goat_prior` readout: `sink` u_h(j) and `kappa`
    κ_h(Δ), Δ = 0 … n − 1 (h, n) each. The log-prior on the visible keys is rebuilt as
    K_h(i, j) = κ_h(i − j) + u_h(j), summed in float32 as the model sums it (so the panels equal
    `prior_panels` of the model's prior)."""
    u, kap = torch.as_tensor(sink, dtype=torch.float32), torch.as_tensor(kappa, dtype=torch.float32)
    if u.ndim != 2 or u.shape != kap.shape:
        raise ValueError(f"sink and kappa must both be (heads, n), got {tuple(u.shape)} and {tuple(kap.shape)}.")
    n = u.shape[1]
    pos = torch.arange(n)
    visible = torch.ones(n, n, dtype=torch.bool).tril()
    k = (kap[:, (pos[:, None] - pos[None]).clamp_min(0)] + u[:, None, :]).double()
    masked = k.masked_fill(~visible, math.nan)
    centred = masked - torch.nanmean(masked, dim=-1, keepdim=True)
    causal = torch.softmax(k.masked_fill(~visible, -math.inf), dim=-1)
    return {"sink": u.double().numpy(), "kappa": kap.double().numpy(), "centred": centred.numpy(),
            "causal": causal.numpy()}
