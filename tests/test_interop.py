"""A prior in attention the book does not own (`companion.interop`): SDPA's `attn_mask`, `nn.MultiheadAttention`'s 3-D
mask and a FlexAttention `score_mod` give `companion.attend`'s output on the same inputs in float64, and the prior's
gradient is the same through every path; the traps of each API are refused by name."""

from __future__ import annotations

import doctest
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import companion
from companion import ALiBi, GoatPrior, LearnableMask, attend, interop, mha_mask, prior_bias, score_mod
from companion.positions import RotaryEmbedding

N, H, D, B = 6, 2, 8, 3


def _priors() -> dict[str, nn.Module]:
    g = torch.Generator().manual_seed(0)
    band = (torch.arange(N)[:, None] - torch.arange(N)[None]).abs() <= 1
    return {"mask (per head)": LearnableMask(torch.randn(H, N, N, generator=g) * 3).double(),
            "mask (shared)": LearnableMask.from_pattern(band, open_value=2.0, closed_value=-2.0).double(),
            "alibi": ALiBi(H, symmetric=True).double(),
            "goat": GoatPrior(H, D, train_len=N, rank=2, causal=False, init="seeded", init_scale=0.5,
                              generator=g).double()}


def _qkv(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, N, D, generator=g, dtype=torch.float64) for _ in range(3)]


def _flex(q, k, v, mod):
    from torch.nn.attention.flex_attention import flex_attention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "called without torch.compile()": eager, unfused, on purpose
        return flex_attention(q, k, v, score_mod=mod)


@pytest.mark.parametrize("name", list(_priors()))
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_and_flex_equal_attend_and_give_the_prior_the_same_gradient(name, causal):
    if name == "goat" and causal:
        prior = GoatPrior(H, D, train_len=N, rank=2, causal=True, init="seeded", init_scale=0.5,
                          generator=torch.Generator().manual_seed(0)).double()
    elif name == "alibi" and causal:
        prior = ALiBi(H).double()
    else:
        prior = _priors()[name]
    q, k, v = _qkv()
    params = [p for p in prior.parameters() if p.requires_grad]
    outs, grads = {}, {}
    for path in ("attend", "sdpa", "flex"):
        if path == "attend":
            out = attend(q, k, v, bias=prior.bias(N, N), causal=causal)
        elif path == "sdpa":
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=prior_bias(prior, N, causal=causal, dtype=q.dtype))
        else:
            out = _flex(q, k, v, score_mod(prior, N, causal=causal, dtype=q.dtype))
        outs[path] = out
        if params:
            loss = (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum()
            grads[path] = [torch.zeros_like(p) if g is None else g  # GOAT's recency slope is unused when bidirectional
                           for p, g in zip(params, torch.autograd.grad(loss, params, allow_unused=True))]
    for path in ("sdpa", "flex"):
        assert torch.allclose(outs[path], outs["attend"], atol=1e-12, rtol=0), path
        for a, b in zip(grads.get(path, ()), grads.get("attend", ())):
            assert torch.allclose(a, b, atol=1e-12, rtol=0), path
    if params:  # the gradient reaches the prior (a constant shift of every score, as GOAT's sink_b2, gets none)
        assert sum(float(g.abs().sum()) for g in grads["sdpa"]) > 0


@pytest.mark.parametrize("name", ["mask (per head)", "mask (shared)", "goat"])
def test_multihead_attention_with_the_prior_equals_its_projections_through_attend(name):
    prior = _priors()[name]
    mha = nn.MultiheadAttention(H * D, H, batch_first=True, dtype=torch.float64)
    x = torch.randn(B, N, H * D, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    mask = mha_mask(prior, N, batch=B, heads=H, dtype=x.dtype)
    assert mask.shape == (B * H, N, N)
    out, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)
    heads = lambda t: t.view(B, N, H, D).transpose(1, 2)  # noqa: E731
    o = attend(heads(x @ w_q.T + b_q), heads(x @ w_k.T + b_k), heads(x @ w_v.T + b_v), bias=prior.bias(N, N))
    ref = mha.out_proj(o.transpose(1, 2).reshape(B, N, H * D))
    assert torch.allclose(out, ref, atol=1e-12, rtol=0)
    mha.eval()  # the inference path (no grad, eval) gives the same output for a float mask
    with torch.no_grad():
        again, _ = mha(x, x, x, attn_mask=mha_mask(prior, N, batch=B, heads=H, dtype=x.dtype), need_weights=False)
    assert torch.allclose(again, out.detach(), atol=1e-12, rtol=0)
    if any(p.requires_grad for p in prior.parameters()):
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
        assert sum(float(p.grad.abs().sum()) for p in prior.parameters() if p.grad is not None) > 0


def test_a_per_head_mask_lands_on_the_head_it_was_built_for():
    """Head 0 open only on the diagonal, head 1 on everything: the 3-D mask must keep that order batch by batch."""
    m = torch.full((H, N, N), -30.0)
    m[0] = torch.where(torch.eye(N, dtype=torch.bool), 30.0, -30.0)
    m[1] = 30.0
    mask = mha_mask(LearnableMask(m), N, batch=B, heads=H)
    diag = torch.eye(N, dtype=torch.bool)
    for b in range(B):
        assert (mask[b * H][diag] > -1e-6).all() and (mask[b * H][~diag] < -20).all()  # head 0
        assert (mask[b * H + 1] > -1e-6).all()  # head 1


def test_the_traps_are_refused_by_name():
    with pytest.raises(ValueError, match="adds no bias to the scores"):
        prior_bias(RotaryEmbedding(D), N)
    with pytest.raises(ValueError, match="has 2 heads but the attention has 4"):
        mha_mask(ALiBi(2), N, batch=1, heads=4)
    with pytest.raises(ValueError, match="causal=True cannot serve attention with causal=False"):
        prior_bias(GoatPrior(H, D, train_len=N, rank=2, causal=True), N)
    blocked = ALiBi(H)
    blocked.bias = lambda i, j=None: torch.full((H, i, j or i), float("-inf"))  # every key of every query blocked
    with pytest.raises(ValueError, match="blocks every key of some query"):
        prior_bias(blocked, N)
    causal = prior_bias(ALiBi(H), N, causal=True)
    lower = torch.ones(N, N, dtype=torch.bool).tril()  # the causal rule: the diagonal and before open, after −inf
    assert causal[:, lower].isfinite().all() and causal[:, ~lower].isneginf().all()


def test_the_public_names_and_their_examples_run():
    for name in ("GoatPrior", "LearnableMask", "ALiBi", "RotaryEmbedding", "SinusoidalPositions", "prior_bias",
                 "mha_mask", "score_mod", "attend", "init_structured_svd_", "init_structured_opt_", "init_mimetic_"):
        assert name in companion.__all__ and getattr(companion, name).__doc__, name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = doctest.testmod(interop, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10 and result.failed == 0
