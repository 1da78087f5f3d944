"""A prior in attention you already have: the bias a prior adds, in the form each common attention API takes.

Every prior of the book that acts on the scores (`LearnableMask`, `GoatPrior`, `ALiBi`) answers the protocol's
`bias(i, j)`: an additive log-prior of shape (h or 1, i, j), h the heads (1: shared by every head). The functions
here turn it into what an attention API expects, so that the prior, and its gradient, plug into a model that does
not use `companion.attend`:

- `prior_bias`: the float bias (h or 1, n, n), the causal rule folded in (−inf above the diagonal: a float mask
  turns SDPA's `is_causal` off, so the rule has to travel in the mask), cast to the queries' dtype. It is the
  `attn_mask` of `torch.nn.functional.scaled_dot_product_attention`, which adds a float mask to the scores.
- `mha_mask`: the same bias as `torch.nn.MultiheadAttention` and `nn.TransformerEncoderLayer` take a 3-D mask:
  (batch · heads, L, S), batch-major.
- `score_mod`: a FlexAttention `score_mod` that adds the bias; the tensor is captured, so its gradient reaches
  the prior (FlexAttention without `torch.compile` runs unfused, materialising the L × L scores).
- `fastpath_off`: a context in which `nn.MultiheadAttention` and `nn.TransformerEncoderLayer` take their ordinary
  path in inference: their native fast path (eval mode, no grad) reads a float mask as a boolean one, nonzero =
  blocked, so a prior's bias blocks every key and the layer returns NaN (PyTorch bug 118628; measured in
  torch 2.6 and 2.14 on the CPU, Chapter 11).
- `attention_function`: an attention function in the form of Hugging Face's attention interface
  (`fn(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs) -> (output, None)`, the
  output (batch, L, heads, d)), which adds the prior to whatever mask the model passes, boolean or additive.

What trips users of these APIs, guarded here:

- Boolean masks mean opposite things: SDPA's True is *attend*, `nn.MultiheadAttention`'s True is *blocked*.
  Every mask made here is a float bias, which both add to the scores alike.
- A row whose every key is blocked has no softmax (SDPA returns NaN there): `prior_bias` refuses one. The causal
  rule keeps the diagonal open. A model's own padding mask can still block a whole row (a padded query):
  `attention_function` returns zeros there, not NaN.
- A prior built for causal attention (GOAT's recency slope) is refused for bidirectional attention, and the
  other way round, by the prior's own `check_attention`.

A prior that is more than a bias is used here through its bias alone: RoPE rotates q and k and sinusoidal
positions join the token stream, so they have no bias to give (`prior_bias` says so); GOAT's own layer carves
2R + 1 prior lanes out of each head and scores content on the rest (`GoatPrior.attend`), while here its log-prior
κ + u is added to your model's full q·k scores: the prior placed on attention you already have.

Example:
    >>> import torch
    >>> from companion import LearnableMask, prior_bias
    >>> mask = LearnableMask.from_pattern(torch.eye(4, dtype=torch.bool) | torch.eye(4, dtype=torch.bool).roll(1, 1))
    >>> q = k = v = torch.randn(2, 3, 4, 8)
    >>> out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=prior_bias(mask, 4, dtype=q.dtype))
    >>> out.shape
    torch.Size([2, 3, 4, 8])
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch
from torch import Tensor

__all__ = ["prior_bias", "mha_mask", "score_mod", "attention_function", "fastpath_off"]


def prior_bias(prior, n: int, *, causal: bool = False, dtype: torch.dtype | None = None) -> Tensor:
    """The additive bias `prior` puts on the scores of n queries and n keys, as a float `attn_mask`.

    Args:
        prior: a prior with a bias (`companion.priors.Prior`: `LearnableMask`, `GoatPrior`, `ALiBi`).
        n: positions (queries = keys).
        causal: fold the causal rule in: −inf on every key after the query.
        dtype: cast to this dtype (the queries'; SDPA wants the mask in the dtype of q); None keeps the prior's.

    Returns:
        The float bias, of shape (h or 1, n, n) with h the prior's heads (1 when it is shared), differentiable in
        the prior's parameters.

    Raises:
        ValueError: the prior gives no bias (RoPE, sinusoidal positions), serves the other causality, is stacked,
            or blocks every key of a query.

    Example:
        >>> from companion import ALiBi, prior_bias
        >>> b = prior_bias(ALiBi(2), 3, causal=True)  # two heads, slopes 1/16 and 1/256
        >>> b.shape
        torch.Size([2, 3, 3])
        >>> b[0].tolist()  # −slope · distance to each earlier key; −inf after the query
        [[-0.0, -inf, -inf], [-0.0625, -0.0, -inf], [-0.125, -0.0625, -0.0]]
    """
    name = type(prior).__name__
    bias = prior.bias(n, n)  # the protocol: None for a prior that acts elsewhere
    if bias is None:
        raise ValueError(f"{name} adds no bias to the scores (it rotates queries and keys, or adds positions to the "
                         "tokens); apply it to q and k or to the token stream instead of as an attention mask.")
    if bias.dim() != 3:
        raise ValueError(f"{name}'s bias has shape {tuple(bias.shape)}; a mask needs (heads or 1, n, n): a stacked "
                         "prior (several models trained together) gives one per member, so take one member's prior.")
    prior.check_attention(causal=causal)
    if causal:
        after = torch.ones(n, n, dtype=torch.bool, device=bias.device).triu(1)
        bias = bias.masked_fill(after, float("-inf"))
    if torch.isneginf(bias).all(-1).any():
        raise ValueError(f"{name}'s bias blocks every key of some query: softmax has no value there (SDPA returns "
                         "NaN); open at least one key per row (the causal rule keeps the diagonal).")
    return bias if dtype is None else bias.to(dtype)


def mha_mask(prior, n: int, batch: int, heads: int, *, causal: bool = False,
             dtype: torch.dtype | None = None) -> Tensor:
    """`prior_bias` as the 3-D float `attn_mask` of `torch.nn.MultiheadAttention` (and `nn.TransformerEncoderLayer`'s
    `src_mask`): (batch · heads, n, n), batch-major, each head its own bias (a shared one repeated).

    Args:
        prior, n, causal, dtype: as `prior_bias`.
        batch: sequences in the batch. heads: the module's `num_heads`.

    Raises:
        ValueError: a per-head prior with another number of heads (and what `prior_bias` raises).

    Example:
        >>> import torch
        >>> from companion import ALiBi, mha_mask
        >>> mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        >>> x = torch.randn(3, 5, 8)
        >>> out, _ = mha(x, x, x, attn_mask=mha_mask(ALiBi(2), 5, batch=3, heads=2), need_weights=False)
        >>> out.shape
        torch.Size([3, 5, 8])
    """
    bias = prior_bias(prior, n, causal=causal, dtype=dtype)
    if bias.shape[0] not in (1, heads):
        raise ValueError(f"{type(prior).__name__} has {bias.shape[0]} heads but the attention has {heads}; build the "
                         "prior with the module's num_heads (or shared, one bias for every head).")
    return bias.expand(heads, n, n).repeat(batch, 1, 1)


def score_mod(prior, n: int, *, causal: bool = False, dtype: torch.dtype | None = None) -> Callable:
    """A FlexAttention `score_mod` (`torch.nn.attention.flex_attention`) that adds `prior_bias(prior, n)` to each
    score: score + bias[h, q_idx, kv_idx] (bias[0, …] for a shared prior). Build it in each forward pass: the bias
    is computed here, once, and captured, so the gradient of the attention reaches the prior's parameters. It is
    captured as one (h or 1, n, n) tensor, never as the prior's own parameters: a 0-D parameter captured in a
    `score_mod` fails in FlexAttention's tracer on torch 2.6 (a vmap error in the forward pass; it runs on 2.14).

    Args:
        prior, n, causal, dtype: as `prior_bias` (the causal rule as −inf scores; a `block_mask` from
            `create_block_mask` also skips the blocked blocks: pass it `device=q.device`, since torch 2.6 builds
            it on CUDA by default).

    Example:
        >>> import torch
        >>> from torch.nn.attention.flex_attention import flex_attention
        >>> from companion import ALiBi, score_mod
        >>> q = k = v = torch.randn(1, 2, 4, 8)
        >>> out = flex_attention(q, k, v, score_mod=score_mod(ALiBi(2), 4))  # eager on a CPU: unfused
        >>> out.shape
        torch.Size([1, 2, 4, 8])
    """
    bias = prior_bias(prior, n, causal=causal, dtype=dtype)
    if bias.shape[0] == 1:  # shared: a 2-D capture (torch 2.6's tracer fails on a constant index into a grad tensor)
        shared = bias[0]

        def mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score + shared[q_idx, kv_idx]
    else:
        def mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score + bias[h, q_idx, kv_idx]

    return mod


def _additive(mask: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """A model's attention mask as an additive float mask: bool True = attend (SDPA's convention, which Hugging
    Face's SDPA path passes) → 0 / −inf; a float mask (its eager path: 0 / the dtype's minimum) as it is."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
    if not mask.is_floating_point():
        raise ValueError(f"attention_mask of dtype {mask.dtype}: pass a bool mask (True = attend) or an additive "
                         "float mask (0 = attend, very negative = blocked).")
    return mask.to(dtype)


def attention_function(prior, *, causal: bool = False) -> Callable:
    """The prior as an attention function of Hugging Face's attention interface, for a model that dispatches its
    attention by name (`ALL_ATTENTION_FUNCTIONS` in `transformers`, or a registry of your own).

    The function has the interface's signature, `fn(module, query, key, value, attention_mask, scaling=None,
    dropout=0.0, **kwargs) -> (output, None)`: query (batch, heads, L, d), key and value (batch, kv_heads, S, d)
    with kv_heads dividing heads (grouped-query attention: repeated), and the output (batch, L, heads, d), the
    layout the module's output projection reads. The model's mask, boolean (True = attend) or additive float,
    broadcastable to (batch, heads, L, S), is added to the prior's bias (`prior_bias`, the causal rule folded in
    when `causal`); a query that the mask leaves no key gets zeros, not NaN. Dropout applies in training only
    (`module.training`).

    Args:
        prior: as `prior_bias`; its heads must be the query's (or 1).
        causal: fold the causal rule into the bias (a decoder's attention).

    Raises:
        ValueError: keys and queries of different lengths (the prior's bias is square), a mask that is neither
            bool nor float (and what `prior_bias` raises).

    Example:
        >>> import torch
        >>> from companion import ALiBi, attention_function
        >>> fn = attention_function(ALiBi(2), causal=True)
        >>> q = k = v = torch.randn(1, 2, 5, 8)
        >>> padding = torch.tensor([True, True, True, True, False]).view(1, 1, 1, 5)  # the last token is padding
        >>> out, _ = fn(torch.nn.Module(), q, k, v, padding)
        >>> out.shape  # (batch, L, heads, d)
        torch.Size([1, 5, 2, 8])
    """

    def attention(module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                  scaling: float | None = None, dropout: float = 0.0, **kwargs) -> tuple[Tensor, None]:
        n, s = query.shape[-2], key.shape[-2]
        if n != s:
            raise ValueError(f"{n} queries and {s} keys: the prior's bias is square; with a key-value cache, pass "
                             "the full sequence (or use companion.attend with q_start).")
        if key.shape[1] != query.shape[1]:  # grouped-query attention: each key-value head serves a group
            groups = query.shape[1] // key.shape[1]
            key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
        bias = prior_bias(prior, n, causal=causal, dtype=query.dtype)
        extra = _additive(attention_mask, query.dtype)
        total = bias if extra is None else bias + extra[..., :n, :s]
        dead = torch.isneginf(total).all(-1, keepdim=True)  # a query the mask leaves no key (padding)
        if dead.any():
            total = total.masked_fill(dead, 0.0)
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=total, scale=scaling,
            dropout_p=dropout if getattr(module, "training", False) else 0.0)
        if dead.any():
            out = out.masked_fill(dead.expand(*out.shape[:-1], 1), 0.0)
        return out.transpose(1, 2).contiguous(), None

    return attention


@contextmanager
def fastpath_off() -> Iterator[None]:
    """Turn off torch's native inference fast path of `nn.MultiheadAttention` / `nn.TransformerEncoderLayer` while
    the block runs, and restore the setting after: that path reads a float `attn_mask`/`src_mask` as a boolean
    one (nonzero = blocked), so a prior's bias would block every key and give NaN (PyTorch bug 118628).

    Example:
        >>> import torch
        >>> from companion import ALiBi, fastpath_off, mha_mask
        >>> layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
        >>> x, mask = torch.randn(3, 5, 8), mha_mask(ALiBi(2), 5, batch=3, heads=2)
        >>> with torch.no_grad(), fastpath_off():
        ...     bool(layer(x, src_mask=mask).isnan().any())
        False
    """
    was = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(was)
