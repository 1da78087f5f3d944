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


@pytest.mark.parametrize("name", ["mask (per head)", "mask (shared)", "goat"])
@pytest.mark.parametrize("kind", ["none", "bool", "additive"])
def test_the_attention_function_adds_the_prior_to_the_models_own_mask(name, kind):
    """Hugging Face's interface: (batch, heads, L, d) in, (batch, L, heads, d) out; the model's mask, boolean
    (True = attend) or additive, joins the prior's bias; the prior's gradient is attend's."""
    prior = _priors()[name]
    q, k, v = _qkv(3)
    keep = torch.ones(B, N, dtype=torch.bool)
    keep[0, -2:] = False  # the last two keys of the first sequence are padding
    model_mask = {"none": None, "bool": keep[:, None, None, :],
                  "additive": torch.zeros(B, 1, 1, N, dtype=q.dtype).masked_fill(~keep[:, None, None, :], -1e9)}[kind]
    out, weights = interop.attention_function(prior)(nn.Module(), q, k, v, model_mask)
    assert weights is None and out.shape == (B, N, H, D)
    extra = 0.0 if kind == "none" else torch.zeros(B, 1, 1, N, dtype=q.dtype).masked_fill(~keep[:, None, None, :],
                                                                                        float("-inf"))
    ref = attend(q, k, v, bias=prior.bias(N, N) + extra).transpose(1, 2)
    assert torch.allclose(out, ref, atol=1e-12, rtol=0)
    params = [p for p in prior.parameters() if p.requires_grad]
    if params:
        got = torch.autograd.grad((out * ref.detach()).sum(), params, allow_unused=True)
        want = torch.autograd.grad((ref * ref.detach()).sum(), params, allow_unused=True)
        for a, b in zip(got, want):
            assert (a is None and b is None) or torch.allclose(a, b, atol=1e-12, rtol=0)


def test_the_attention_function_gives_zeros_to_a_query_with_no_key_and_serves_grouped_queries():
    prior = ALiBi(H).double()
    q, k, v = _qkv(4)
    keep = torch.ones(B, N, dtype=torch.bool)
    keep[:, :2] = False  # left padding: with the causal rule, queries 0 and 1 have no key left
    out, _ = interop.attention_function(prior, causal=True)(nn.Module(), q, k, v, keep[:, None, None, :])
    assert not out.isnan().any()
    assert (out[:, :2] == 0).all() and (out[:, 2:].abs().sum(-1) > 0).all()
    kv = [t[:, :1] for t in (k, v)]  # one key-value head serving every query head (grouped-query attention)
    grouped, _ = interop.attention_function(prior)(nn.Module(), q, *kv, None)
    ref = attend(q, kv[0].expand(-1, H, -1, -1), kv[1].expand(-1, H, -1, -1), bias=prior.bias(N, N))
    assert torch.allclose(grouped, ref.transpose(1, 2), atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="5 queries and 6 keys: the prior's bias is square"):
        interop.attention_function(prior)(nn.Module(), q[:, :, :5], k, v, None)
    with pytest.raises(ValueError, match="pass a bool mask"):
        interop.attention_function(prior)(nn.Module(), q, k, v, keep.long()[:, None, None, :])


def test_fastpath_off_gives_the_encoder_layers_training_output_in_inference_and_restores_the_setting():
    layer = nn.TransformerEncoderLayer(H * D, H, 4 * H * D, dropout=0.0, batch_first=True, dtype=torch.float64)
    x = torch.randn(B, N, H * D, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    mask = mha_mask(_priors()["mask (per head)"], N, batch=B, heads=H, dtype=x.dtype).detach()
    trained = layer(x, src_mask=mask)
    layer.eval()
    before = torch.backends.mha.get_fastpath_enabled()
    with torch.no_grad(), companion.fastpath_off():
        assert not torch.backends.mha.get_fastpath_enabled()
        inferred = layer(x, src_mask=mask)
    assert torch.backends.mha.get_fastpath_enabled() == before
    assert torch.allclose(inferred, trained.detach(), atol=1e-12, rtol=0)


class _Slope(ALiBi):
    """A prior whose bias is −θ·|i − j| with θ one 0-D parameter: the case a `score_mod` capturing θ itself breaks."""

    def __init__(self):
        super().__init__(1, symmetric=True)
        self.theta = nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def bias(self, i, j=None):
        pos = torch.arange(i, dtype=torch.float64)
        return (-self.theta * (pos[:, None] - pos[None]).abs())[None]


def test_a_zero_dim_parameter_reaches_flex_attention_through_the_captured_bias_with_its_closed_form_gradient():
    """d/dθ of Σ w·out equals the closed form Σ_ij ∂L/∂s_ij · (−|i − j|), computed here from attend's weights."""
    prior = _Slope()
    q, k, v = _qkv(6)
    out = _flex(q, k, v, score_mod(prior, N))
    w = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    (grad,) = torch.autograd.grad((out * w).sum(), prior.theta)
    _, p = attend(q.detach(), k, v, bias=prior.bias(N, N).detach(), return_weights=True)
    dp = w @ v.transpose(-1, -2)  # ∂L/∂p_ij = w_i · v_j
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))  # softmax's Jacobian
    dist = (torch.arange(N)[:, None] - torch.arange(N)[None]).abs().double()
    assert torch.allclose(grad, (ds * -dist).sum(), atol=1e-12, rtol=0)
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    # the device given: on torch 2.6 create_block_mask's default is CUDA
    blocks = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, N, N, device=q.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        causal = flex_attention(q, k, v, score_mod=score_mod(prior, N, causal=True), block_mask=blocks)
    assert torch.allclose(causal, attend(q, k, v, bias=prior.bias(N, N), causal=True), atol=1e-12, rtol=0)


class _Negated(nn.Module):
    """A prior with its sign flipped: the mistake the equivalences must catch."""

    def __init__(self, prior):
        super().__init__()
        self.prior = prior

    def bias(self, i, j=None):
        return -self.prior.bias(i, j)

    def check_attention(self, *, causal):
        self.prior.check_attention(causal=causal)


@pytest.mark.parametrize("name", ["mask (per head)", "mask (shared)", "alibi", "goat"])
def test_every_path_fails_the_equivalence_when_the_prior_is_dropped_or_mis_signed(name):
    """The checks of Chapter 11 and its recipes (atol 1e-12 against attend) can fail: a path handed the prior with
    its sign flipped, or no prior, misses attend's output by far more."""
    from companion.cost.interop import NULL, PATHS

    prior = _priors()[name]
    q, k, v = _qkv(7)
    ref = attend(q, k, v, bias=prior.bias(N, N))
    for path_name, path in PATHS.items():
        assert torch.allclose(path(prior, q, k, v, False), ref, atol=1e-12, rtol=0), path_name
        wrong = path(_Negated(prior), q, k, v, False)
        assert (wrong - ref).abs().max() > 1e-3, path_name
    assert (NULL[1](prior, q, k, v, False) - ref).abs().max() > 1e-3
