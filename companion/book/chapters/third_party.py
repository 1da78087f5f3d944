"""A stand-in for attention code the book does not own, written the way Hugging Face's models write theirs.

Chapter 11 plugs a prior into it without editing it: the module picks its attention function by name from a
registry (`ATTENTION_FUNCTIONS`, as `transformers`' `ALL_ATTENTION_FUNCTIONS`), hands it queries, keys and values
as (batch, heads, L, d) and the mask it prepares for that function, and reads the output as (batch, L, heads, d).
The mask is the trap: the "sdpa" function takes a boolean mask (True = attend), the "eager" one an additive mask
(0, or the dtype's most negative number); any other name gets the boolean one, as a registered function does in
`transformers`. Only torch is needed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ATTENTION_FUNCTIONS", "ThirdPartyAttention", "eager_attention", "sdpa_attention"]


def eager_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Explicit scores, an additive mask, softmax in float32; output (batch, L, heads, d) and the weights."""
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = query @ key.transpose(-1, -2) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = F.dropout(scores.softmax(-1, dtype=torch.float32).to(query.dtype), dropout, module.training)
    return (weights @ value).transpose(1, 2).contiguous(), weights


def sdpa_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """torch's fused attention with a boolean mask (True = attend); output (batch, L, heads, d)."""
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, scale=scaling,
                                         dropout_p=dropout if module.training else 0.0)
    return out.transpose(1, 2).contiguous(), None


ATTENTION_FUNCTIONS = {"eager": eager_attention, "sdpa": sdpa_attention}


class ThirdPartyAttention(nn.Module):
    """Self-attention with q/k/v/o projections whose attention function is chosen by name at construction."""

    def __init__(self, hidden: int, heads: int, *, attn_implementation: str = "sdpa", dtype=None):
        super().__init__()
        if attn_implementation not in ATTENTION_FUNCTIONS:
            raise ValueError(f"unknown attention {attn_implementation!r}; register it in ATTENTION_FUNCTIONS first "
                             f"(known: {sorted(ATTENTION_FUNCTIONS)}).")
        self.heads, self.head_dim, self.attn_implementation = heads, hidden // heads, attn_implementation
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(hidden, hidden, dtype=dtype) for _ in range(4))

    def split(self, x: Tensor) -> Tensor:
        """(batch, L, hidden) → (batch, heads, L, head_dim)."""
        return x.view(*x.shape[:2], self.heads, self.head_dim).transpose(1, 2)

    def forward(self, hidden_states: Tensor, padding: Tensor | None = None) -> Tensor:
        """hidden_states (batch, L, hidden); padding (batch, L) bool, True for a real token (None: all real)."""
        q, k, v = (self.split(p(hidden_states)) for p in (self.q_proj, self.k_proj, self.v_proj))
        mask = None
        if padding is not None:
            mask = padding[:, None, None, :]  # (batch, 1, 1, S): every query may read the real keys
            if self.attn_implementation == "eager":
                mask = torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, torch.finfo(q.dtype).min)
        out, _ = ATTENTION_FUNCTIONS[self.attn_implementation](self, q, k, v, mask)
        return self.o_proj(out.reshape(*hidden_states.shape[:2], -1))
