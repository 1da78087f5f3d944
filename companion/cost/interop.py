"""The ways a prior's bias enters attention you already have (`companion.interop`), as functions of one signature,
`path(prior, q, k, v, causal) -> out` with q, k, v and out (batch, heads, L, d): what Chapter 11 checks against
`companion.attend` and what `benchmarks/interop_paths.py` times. `NULL` is the same attention without the prior:
the comparison that has to fail for the agreement to mean anything, and the cost floor.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.attention import attend
from companion.interop import attention_function, prior_bias, score_mod

__all__ = ["PATHS", "NULL", "via_attend", "via_sdpa", "via_flex", "via_function", "without_prior", "flex_eager", "sdpa_ops"]


def flex_eager(q: Tensor, k: Tensor, v: Tensor, mod) -> Tensor:
    """FlexAttention without `torch.compile`: on a CPU it runs unfused (the L × L scores in memory), and torch says
    so in a UserWarning, silenced here because it is the point."""
    from torch.nn.attention.flex_attention import flex_attention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return flex_attention(q, k, v, score_mod=mod)


def via_attend(prior, q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """The book's own attention, the reference: `attend` with the prior's bias."""
    n = q.shape[-2]
    return attend(q, k, v, bias=prior.bias(n, n), causal=causal)


def via_sdpa(prior, q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """`scaled_dot_product_attention` with `prior_bias` as its float `attn_mask` (the causal rule inside it)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=prior_bias(prior, q.shape[-2], causal=causal,
                                                                        dtype=q.dtype))


def via_flex(prior, q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """FlexAttention (eager) with `score_mod(prior, L)`."""
    return flex_eager(q, k, v, score_mod(prior, q.shape[-2], causal=causal, dtype=q.dtype))


def via_function(prior, q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """`attention_function(prior)`, called as a Hugging Face-style model calls its attention (no mask of its own);
    its (batch, L, heads, d) output turned back to (batch, heads, L, d)."""
    out, _ = attention_function(prior, causal=causal)(nn.Module(), q, k, v, None)
    return out.transpose(1, 2)


def without_prior(prior, q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """The same attention with no prior at all (SDPA, `is_causal` when causal): the null and the cost floor."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


PATHS = {"companion.attend": via_attend, "SDPA attn_mask": via_sdpa, "FlexAttention score_mod": via_flex,
         "attention function": via_function}
NULL = ("no prior (SDPA)", without_prior)


def sdpa_ops(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, *, grad: bool = True) -> list[str]:
    """The aten operators SDPA dispatches to for these inputs, from `torch.profiler`: which kernel a float mask
    leaves SDPA on this device; `grad`: q, k, v require a gradient and the backward runs too (else inference,
    under no_grad). The profiler's own log lines (native code writing to the terminal) are silenced."""
    from torch.profiler import ProfilerActivity, profile

    from companion.cost.measure import native_output_silenced

    q, k, v = (t.detach().requires_grad_(grad) for t in (q, k, v))
    with native_output_silenced(), profile(activities=[ProfilerActivity.CPU]) as prof, torch.set_grad_enabled(grad):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if grad:
            out.sum().backward()
    return sorted({e.key for e in prof.key_averages() if "scaled_dot_product" in e.key})
