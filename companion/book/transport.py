"""Attention as entropic optimal transport with a prior (GOAT, arXiv 2601.15380, §2–§5), in numbers.

- `solve_entropic(s, log_prior, tau)`: the minimiser of −⟨p, s⟩ + τ·KL(p ‖ π) over the simplex,
  found by mirror descent (exponentiated gradient) without using the closed form; Proposition 2.2
  (uniform π: softmax(s/τ)) and Proposition 3.1 (any π: softmax(s/τ + log π)) are checked against it.
- `objective`: the transport objective, to confirm that a solution is optimal among simplex points.
- `attention_internals(model, x, layer)`: a layer's content scores, prior and attention weights,
  recomputed from the model's parameters through the prior protocol (`Attention.project`,
  `Attention.scores_prior`: `content`, `bias`), the same attention the forward pass computes.
- `collapse_bounds`: Theorem 5.1, e^{−ω_i} ≤ p_ij / π_ij ≤ e^{ω_i} with ω_i the range of row i's
  content scores over its visible keys, measured on a trained model.
- `sink_vs_signal`: per (head, query), the content signal ω and the attention on key 0 (Figure 2c).
- `prior_panels(prior, n)`: the four views of a learned GOAT prior in Figure 1.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import Tensor

from companion.goat import GoatPrior

__all__ = ["objective", "solve_entropic", "attention_internals", "collapse_bounds", "sink_vs_signal",
           "prior_panels"]


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
def attention_internals(model, x: Tensor, layer: int = 0) -> dict[str, Tensor]:
    """Recompute layer `layer`'s attention on inputs x from the model's parameters, through the public
    attention API: `attn.project` gives q, k as attended (projected, QK-normed, rotated) and the layer's
    scores prior (`attn.scores_prior`) gives the content channels (`content`) and the log-prior (`bias`).

    Returns float64 tensors over the n positions the layer sees: "content" (b, h, n, n) content scores
    q_c·k_c/√d_c (GOAT: its content channels; RoPE: the rotated q·k; otherwise q·k, with d_c the
    width of the content channels), "prior" (h, n, n) the additive log-prior (zeros without one),
    "weights" (b, h, n, n) the model's own attention weights, and "visible" (n, n) bool.
    Works on a float64 copy; the model itself is left as it is.
    """
    model = copy.deepcopy(model).double().eval()
    h = model.embed(x)
    for block in model.blocks[:layer]:
        h = block(h)
    block = model.blocks[layer]
    attn = block.attn
    q, k, _ = attn.project(block.ln1(h))
    prior = attn.scores_prior
    qc, kc = prior.content(q, k)
    content = qc @ kc.transpose(-1, -2) / math.sqrt(qc.shape[-1])
    n = h.shape[1]
    bias = prior.bias(n, n)
    bias = torch.zeros(1, n, n, dtype=torch.float64) if bias is None else bias.double()
    visible = torch.ones(n, n, dtype=torch.bool)
    if attn.causal:
        visible = visible.tril()
    _, maps = model(x, return_attention=True)
    return {"content": content, "prior": bias.expand(attn.n_heads, n, n), "weights": maps[layer].double(),
            "visible": visible}


def _row_range(scores: Tensor, visible: Tensor) -> Tensor:
    hi = scores.masked_fill(~visible, -math.inf).amax(-1)
    lo = scores.masked_fill(~visible, math.inf).amin(-1)
    return hi - lo


def collapse_bounds(internals: dict[str, Tensor]) -> dict[str, float]:
    """Theorem 5.1 on measured attention: log(p_ij/π_ij) against ±ω_i over visible keys.

    π_i = softmax over visible keys of the prior row; p the model's weights. Returns the largest
    violation max(|log(p/π)| − ω) (≤ 0 up to rounding when the theorem holds), the largest ratio of
    |log(p/π)| to ω (how tight the bound is; 1 = attained) and the number of (b, h, i, j) checked.
    """
    vis = internals["visible"]
    prior = internals["prior"].masked_fill(~vis, -math.inf)
    log_pi = prior - torch.logsumexp(prior, -1, keepdim=True)
    log_p = internals["weights"].clamp_min(1e-300).log()
    omega = _row_range(internals["content"], vis)[..., None]  # (b, h, n, 1)
    dev = (log_p - log_pi).abs()
    mask = vis.expand_as(dev)
    violation = (dev - omega)[mask]
    tight = (dev / omega.clamp_min(1e-12))[mask & (omega > 1e-6).expand_as(dev)]
    return {"max_violation": float(violation.max()), "max_tightness": float(tight.max()), "checked": int(mask.sum())}


def sink_vs_signal(internals: dict[str, Tensor], *, skip: int = 1, flat: bool = True) -> dict[str, np.ndarray]:
    """Per (batch, head, query i ≥ skip): content signal ω_i and the attention weight on key 0,
    flattened, or (flat=False) as arrays (batch, head, n − skip)."""
    omega = _row_range(internals["content"], internals["visible"])[..., skip:]
    p0 = internals["weights"][..., skip:, 0]
    if not flat:
        return {"omega": omega.numpy(), "p0": p0.numpy()}
    return {"omega": omega.flatten().numpy(), "p0": p0.flatten().numpy()}


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
