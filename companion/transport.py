"""Attention as transport with a prior, measured on a trained model (GOAT, arXiv 2601.15380, §5).

What Part IV reads from a trained language model's attention, and the readouts that store it in the
run's record (`companion.readouts`), so that a chapter needs records, not weights:

- `probe_batch(task, n)`: the first n test inputs of a copy-mixture, char-lm or passkey task, as the task
  gives them (`probe_sequences`; the batch every run of an experiment is read on).
- `attention_internals(model, x, layer)`: a layer's content scores, prior and attention weights,
  recomputed from the model's parameters through the prior protocol (`Attention.project`,
  `Attention.scores_prior`: `content`, `bias`), the same attention the forward pass computes.
- `collapse_bounds`: Theorem 5.1, e^{−ω_i} ≤ p_ij / π_ij ≤ e^{ω_i} with ω_i the range of row i's
  content scores over its visible keys.
- `sink_vs_signal`: per (head, query), the content signal ω and the attention on key 0 (Figure 2c);
  `matched_bins`: ω and p0 in position-matched bins.
- readouts "collapse_bounds[:layer]" (`bounds_reading`, layer 0 by default) and
  "sink_curve[:layer]" (`sink_reading`, the last layer by default), both on `probe_batch(task,
  PROBE)`: a handful of numbers per run (per-head curves in `BINS` bins, never the attention maps).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import Tensor

from companion.readouts import register_readout

__all__ = ["PROBE", "BINS", "probe_batch", "attention_internals", "collapse_bounds", "sink_vs_signal",
           "matched_bins", "bounds_reading", "sink_reading", "bounds_readout", "sink_readout"]

PROBE = 64  # sequences of the probe batch every reading of this module is taken on
BINS = 8  # position-matched bins of ω in a sink curve (Figure 2c)


def probe_batch(task, n: int = PROBE) -> Tensor:
    """The first n test inputs of `task`, as the task gives them (`probe_sequences(n)`, an optional
    method of the task protocol): copy-mixture's test sequences, char-lm's test windows and passkey's test
    sequences at the training length (inputs only, the last token dropped); the same batch for every run of
    a task."""
    sequences = getattr(task, "probe_sequences", None)  # optional in the Task protocol
    if sequences is None:
        name = type(task).__name__
        raise ValueError(f"the transport readings need a copy-mixture, char-lm or passkey task, not {name}: they read "
                         f"the task's first test sequences (`probe_sequences(n)`), which {name} does not give; "
                         "run them on a task that defines it.")
    return sequences(n)


@torch.no_grad()
def attention_internals(model, x: Tensor, layer: int = 0) -> dict[str, Tensor]:
    """Recompute layer `layer`'s attention on inputs x from the model's parameters, through the public
    attention API: `attn.project` gives q, k as attended (projected, QK-normed, rotated) and the layer's
    scores prior (`attn.scores_prior`) gives the content channels (`content`) and the log-prior (`bias`).

    Returns float64 CPU tensors over the n positions the layer sees: "content" (b, h, n, n) content
    scores q_c·k_c/√d_c (GOAT: its content channels; RoPE: the rotated q·k; otherwise q·k, with d_c
    the width of the content channels), "prior" (h, n, n) the additive log-prior (zeros without one),
    "weights" (b, h, n, n) the model's own attention weights, and "visible" (n, n) bool.
    Works on a float64 copy on the model's device; the model itself is left as it is.
    """
    model = copy.deepcopy(model).double().eval()
    device = next(model.parameters()).device
    x = x.to(device)
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
    bias = torch.zeros(1, n, n, dtype=torch.float64) if bias is None else bias.double().cpu()
    visible = torch.ones(n, n, dtype=torch.bool)
    if attn.causal:
        visible = visible.tril()
    _, maps = model(x, return_attention=True)
    return {"content": content.cpu(), "prior": bias.expand(attn.n_heads, n, n), "weights": maps[layer].double().cpu(),
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


def matched_bins(omega: np.ndarray, p0: np.ndarray, bins: int = BINS) -> tuple[np.ndarray, np.ndarray]:
    """Position-matched bins of ω: `omega`, `p0` are (sequences, positions); at every position the
    sequences are cut into `bins` equal-count bins by the rank of ω there (ties by order), and each
    bin's mean ω and mean p0 are averaged over positions, so every bin holds the same mix of early and
    late queries. Returns (ω per bin, p0 per bin), each (bins,)."""
    n, positions = omega.shape
    if n < bins:
        raise ValueError(f"{n} sequences cannot fill {bins} bins at every position; use bins ≤ {n}.")
    rank = np.argsort(np.argsort(omega, axis=0, kind="stable"), axis=0, kind="stable")
    which = rank * bins // n
    om = np.zeros((positions, bins))
    p = np.zeros((positions, bins))
    for b in range(bins):
        sel = which == b
        om[:, b] = (omega * sel).sum(0) / sel.sum(0)
        p[:, b] = (p0 * sel).sum(0) / sel.sum(0)
    return om.mean(0), p.mean(0)


def _pooled_drop(omega: np.ndarray, p0: np.ndarray, bins: int) -> float:
    """Every (sequence, head, query) pooled and cut at the quantiles of ω, positions unmatched: mean p0
    in the lowest bin minus the highest (the measure Chapter 7 used before position matching)."""
    omega, p0 = omega.ravel(), p0.ravel()
    edges = np.quantile(omega, np.linspace(0, 1, bins + 1))
    idx = np.clip(np.searchsorted(edges, omega, side="right") - 1, 0, bins - 1)
    low, high = p0[idx == 0], p0[idx == bins - 1]
    return float(low.mean() - high.mean()) if low.size and high.size else math.nan  # ties of ω can empty a bin


def bounds_reading(model, x: Tensor, layer: int = 0) -> dict[str, float]:
    """Theorem 5.1 on layer `layer` of `model` over the batch x: "recomputed_vs_forward" (the largest
    gap between the recomputed and the forward-pass attention) and `collapse_bounds`' "max_violation",
    "max_tightness" and "checked"."""
    d = attention_internals(model, x, layer % len(model.blocks))
    z = (d["content"] + d["prior"]).masked_fill(~d["visible"], float("-inf"))
    return {"recomputed_vs_forward": float((torch.softmax(z, -1) - d["weights"]).abs().max()), **collapse_bounds(d)}


def sink_reading(model, x: Tensor, layer: int = -1, bins: int = BINS) -> dict[str, object]:
    """Figure 2c on layer `layer` of `model` over the batch x (queries ≥ 1), as numbers per bin:
    "omega", "p0": each query's head-mean ω against its head-mean attention on key 0, in `bins`
    position-matched bins (`matched_bins`); "head_mean_p0" (h,): each head's mean attention on key 0;
    "head_omega", "head_p0" (h, bins): the same bins per head; "pooled_drop": `_pooled_drop` of every
    (sequence, head, query) of this model (NaN, stored as None, when ties of ω leave a bin empty)."""
    d = sink_vs_signal(attention_internals(model, x, layer % len(model.blocks)), flat=False)
    omega, p0 = d["omega"], d["p0"]  # (b, h, n − 1)
    om, p = matched_bins(omega.mean(1), p0.mean(1), bins)
    heads = [matched_bins(omega[:, h], p0[:, h], bins) for h in range(omega.shape[1])]
    return {"omega": om, "p0": p, "head_mean_p0": p0.mean((0, 2)), "head_omega": np.stack([h[0] for h in heads]),
            "head_p0": np.stack([h[1] for h in heads]), "pooled_drop": _pooled_drop(omega, p0, bins)}


def _layer(arg: str, name: str, default: int) -> int:
    """The readout's argument as a layer index (negative counts from the last), `default` when empty."""
    if not arg:
        return default
    try:
        return int(arg)
    except ValueError:
        raise ValueError(f"readout {name!r} takes a layer index (e.g. '{name}:0' or '{name}:-1'), got {arg!r}.") from None


def _check_layer(model, layer: int, name: str) -> None:
    blocks = len(model.blocks)
    if not -blocks <= layer < blocks:
        raise ValueError(f"readout {name!r}: layer {layer} does not exist in a model of {blocks} layers.")


@register_readout("collapse_bounds")
def bounds_readout(model, task, arg: str) -> dict[str, float]:
    """`bounds_reading` of layer arg (default 0) on `probe_batch(task)`."""
    layer = _layer(arg, "collapse_bounds", 0)
    _check_layer(model, layer, "collapse_bounds")
    return bounds_reading(model, probe_batch(task), layer)


@register_readout("sink_curve")
def sink_readout(model, task, arg: str) -> dict[str, object]:
    """`sink_reading` of layer arg (default −1, the last) on `probe_batch(task)`, in `BINS` bins."""
    layer = _layer(arg, "sink_curve", -1)
    _check_layer(model, layer, "sink_curve")
    return sink_reading(model, probe_batch(task), layer)
