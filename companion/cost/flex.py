"""flex_attention with the GOAT tables as a `score_mod`: the function behind the `flex` variant.

Compiled with `torch.compile` once per process (one graph per (L, dtype, grad mode)), never falling
back to eager silently; on CPU torch 2.14 has its forward only.
"""

from __future__ import annotations

import torch

_FLEX_COMPILED = None


def _flex_fn(compiled: bool):
    """flex_attention with the GOAT score_mod; compiled once per process (recompiles per shape)."""
    global _FLEX_COMPILED
    from torch.nn.attention.flex_attention import flex_attention

    def flex_goat(q, k, v, kap, u, block_mask):
        n = q.shape[-2]

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + kap[h, q_idx - kv_idx + n - 1] + u[h, kv_idx]

        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)

    if not compiled:
        return flex_goat
    if _FLEX_COMPILED is None:
        from torch import _dynamo

        _dynamo.config.recompile_limit = 64  # one graph per (L, dtype, grad mode)
        _dynamo.config.fail_on_recompile_limit_hit = True  # never fall back to eager silently
        _FLEX_COMPILED = torch.compile(flex_goat, dynamic=False)
    return _FLEX_COMPILED


def reset_flex_compile() -> None:
    """After a variant raised: a compile that raised leaves dynamo's cache for the flex wrapper in a
    state where later calls ran ~5× slower (unfused) on CPU, so compile afresh (no-op before any compile)."""
    if _FLEX_COMPILED is not None:
        from torch import _dynamo

        _dynamo.reset()
