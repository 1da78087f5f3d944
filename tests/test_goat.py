"""GoatPrior: the SDPA lanes equal the materialised prior (outputs and gradients), the prior's
structure (Toeplitz κ, key-only u), the exact uniform initialisation, and the error messages."""

import math

import pytest
import torch
import torch.nn.functional as F

from companion import attend
from companion.goat import GoatPrior
from companion.positions import ALiBi, alibi_slopes

B, H, N, D, R = 2, 3, 9, 16, 3


def _prior(causal=True, init="seeded", perturb=True, seed=0, **kw):
    """A float64 prior; `perturb` moves every parameter off its init so no gradient is trivially 0."""
    g = torch.Generator().manual_seed(seed)
    p = GoatPrior(H, D, train_len=8, rank=R, causal=causal, init=init, generator=g, **kw).double()
    if perturb:
        with torch.no_grad():
            for t in p.parameters():
                t.add_(0.5 * torch.randn(t.shape, generator=g, dtype=t.dtype))
    return p


def _qkv(n=N, d=D, seed=1, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, n, d, generator=g, dtype=dtype).requires_grad_(True) for _ in range(3)]


def _grads(out, tensors):
    weight = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    grads = torch.autograd.grad((out * weight).sum(), tensors, allow_unused=True)
    return [torch.zeros_like(t) if g is None else g for g, t in zip(grads, tensors)]


@pytest.mark.parametrize("causal", [True, False])
def test_lanes_equal_materialised_bias_outputs_and_gradients(causal):
    prior = _prior(causal=causal)
    q, k, v = _qkv()
    params = dict(prior.named_parameters())
    dc = prior.content_dim
    # fused: one plain SDPA call, no mask
    q2, k2 = prior.lanes(q, k)
    assert q2.shape == k2.shape == (B, H, N, D)
    out = F.scaled_dot_product_attention(q2, k2, v, is_causal=causal)
    got = _grads(out, [q, k, v, *params.values()])
    # reference: eager softmax(q_c k_cᵀ/√d_c + K) with the materialised (h, n, n) prior
    ref = attend(q[..., :dc], k[..., :dc], v, bias=prior.bias(N), causal=causal, backend="eager")
    want = _grads(ref, [q, k, v, *params.values()])
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
    for name, a, b in zip(["q", "k", "v", *params], got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=f"gradient of {name} differs")
    for name in ("alpha", "beta", "sink_w1", "sink_w2", "sink_gain", "sink_bump"):
        assert got[3 + list(params).index(name)].abs().sum() > 0, f"{name} gets no gradient"
    assert (got[3 + list(params).index("recency")].abs().sum() > 0) == causal
    # the carved-out channels of the projection are discarded
    assert torch.all(got[0][..., dc:] == 0) and torch.all(got[1][..., dc:] == 0)


def test_sdpa_helper_and_content_only_inputs_agree():
    prior = _prior()
    q, k, v = _qkv()
    dc = prior.content_dim
    full = prior.sdpa(q, k, v)
    torch.testing.assert_close(prior.sdpa(q[..., :dc], k[..., :dc], v), full, rtol=0, atol=0)
    torch.testing.assert_close(full, attend(q[..., :dc], k[..., :dc], v, bias=prior(N), causal=True),
                               rtol=1e-10, atol=1e-12)


def test_custom_sdpa_scale_and_shifted_positions():
    prior = _prior()
    q, k, v = _qkv()
    dc = prior.content_dim
    q2, k2 = prior.lanes(q, k, scale=0.3)
    out = F.scaled_dot_product_attention(q2, k2, v, is_causal=True, scale=0.3)
    torch.testing.assert_close(out, prior.sdpa(q, k, v), rtol=1e-10, atol=1e-12)
    # a continued sequence at positions s..s+n−1: κ is unchanged (Toeplitz), u is read at the new keys
    pos = torch.arange(N) + 5
    bias = prior.relative(N) + prior.sink(pos)[:, None, :]
    ref = attend(q[..., :dc], k[..., :dc], v, bias=bias, causal=True)
    torch.testing.assert_close(prior.sdpa(q, k, v, positions=pos), ref, rtol=1e-10, atol=1e-12)


def test_float32_lanes_match_float64_reference():
    prior = _prior()
    q, k, v = _qkv()
    ref = prior.sdpa(q, k, v)
    out = prior.float().sdpa(*(t.detach().float() for t in (q, k, v)))
    torch.testing.assert_close(out, ref.detach().float(), rtol=1e-5, atol=1e-5)


def test_relative_part_is_toeplitz_and_matches_the_formula():
    prior = _prior()
    rel = prior.relative(7, 9)
    assert rel.shape == (H, 7, 9)
    torch.testing.assert_close(rel[:, 1:, 1:], rel[:, :-1, :-1], rtol=0, atol=1e-13)
    omega = prior.base ** (-torch.arange(R, dtype=torch.float64) / (R - 1))
    torch.testing.assert_close(omega, torch.tensor([1.0, 1e-2, 1e-4], dtype=torch.float64))
    a, b = prior.alpha.detach(), prior.beta.detach()
    for h, i, j in [(0, 6, 2), (2, 1, 8), (1, 3, 3)]:
        want = sum(a[h, r] * math.cos(omega[r] * (i - j)) + b[h, r] * math.sin(omega[r] * (i - j)) for r in range(R))
        assert rel[h, i, j].item() == pytest.approx(want.item(), abs=1e-12)


def test_sink_depends_on_the_key_only_and_has_its_parts():
    prior = _prior()
    k_minus_rel = prior(6, 8) - prior.relative(6, 8)  # (h, i, j): the same row for every query i
    torch.testing.assert_close(k_minus_rel, k_minus_rel[:, :1].expand(-1, 6, -1), rtol=0, atol=1e-13)
    torch.testing.assert_close(k_minus_rel[:, 0], prior.sink(torch.arange(8)), rtol=0, atol=1e-13)
    # u_h(j) = g_h·MLP(φ(j)) + b_h·[j = 0] + s_h·j: remove the bump and slope, the rest is g_h × one curve
    pos = torch.arange(8)
    u = prior.sink(pos).detach()
    core = u - prior.sink_bump.detach()[:, None] * (pos == 0) - prior.recency.detach()[:, None] * pos
    shared = core / prior.sink_gain.detach()[:, None]
    torch.testing.assert_close(shared, shared[:1].expand(H, -1))
    prior.causal = False  # no recency without causal masking
    torch.testing.assert_close(prior.sink(pos).detach(), u - prior.recency.detach()[:, None] * pos)


def test_uniform_init_is_exactly_plain_attention():
    prior = GoatPrior(H, D, train_len=8, rank=R, init="uniform", generator=torch.Generator().manual_seed(0)).double()
    assert torch.equal(prior.bias(N), torch.zeros(H, N, N, dtype=torch.float64))
    q, k, v = _qkv()
    dc = prior.content_dim
    plain = attend(q[..., :dc], k[..., :dc], v, causal=True, backend="eager")
    assert torch.equal(attend(q[..., :dc], k[..., :dc], v, bias=prior.bias(N), causal=True, backend="eager"), plain)
    for causal in (True, False):
        prior.causal = causal
        want = F.scaled_dot_product_attention(q[..., :dc], k[..., :dc], v, is_causal=causal)
        torch.testing.assert_close(prior.sdpa(q, k, v), want, rtol=1e-12, atol=1e-13)


def test_seeded_init_and_generator_determinism():
    def make(seed):
        return GoatPrior(8, 32, train_len=16, init="seeded", generator=torch.Generator().manual_seed(seed))

    a, b, c = make(0), make(0), make(1)
    for (name, x), y, z in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(x, y), name
    assert not torch.equal(a.alpha, c.alpha) and not torch.equal(a.sink_w1, c.sink_w1)
    assert torch.all(a.beta == 0) and 0.003 < a.alpha.std() < 0.03
    torch.testing.assert_close(a.recency, alibi_slopes(8).float())
    assert torch.all(a.sink_gain == 1) and torch.all(a.sink_bump == 0)


def test_recency_alone_gives_alibi_attention_under_causal_masking():
    prior = GoatPrior(H, D, train_len=8, rank=R, init="uniform").double()
    with torch.no_grad():
        prior.recency.copy_(alibi_slopes(H))
    q, k, v = _qkv()
    dc = prior.content_dim
    alibi = ALiBi(H).double()
    ref = attend(q[..., :dc], k[..., :dc], v, bias=alibi(N), causal=True)
    torch.testing.assert_close(prior.sdpa(q, k, v), ref, rtol=1e-10, atol=1e-12)


def test_bad_inputs_name_the_fix():
    with pytest.raises(ValueError, match=r"9 lanes .* d_head=8 .* lower rank to at most 3"):
        GoatPrior(2, 8, train_len=4, rank=4)
    with pytest.raises(ValueError, match="unknown GOAT init"):
        GoatPrior(2, 16, train_len=4, init="zeros")
    with pytest.raises(ValueError, match="train_len >= 1"):
        GoatPrior(2, 16, train_len=0)
    prior = _prior()
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="expect \\(batch, 3 heads, seq, 16\\)"):
        prior.lanes(q[0], k[0])
    with pytest.raises(ValueError, match="content-only width 9"):
        prior.lanes(q[..., :12], k[..., :12])
    with pytest.raises(ValueError, match="3 heads"):
        prior.lanes(q[:, :2], k[:, :2])
    with pytest.raises(ValueError, match="must be among the keys' positions"):
        prior.lanes(q, k[:, :, :-1])
    with pytest.raises(ValueError, match="one per token"):
        prior.lanes(q, k, positions=torch.arange(N + 1))
    with pytest.raises(ValueError, match=">= 0"):
        prior.lanes(q, k, positions=torch.arange(N) - 1)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_a_non_finite_input_is_named_on_both_goat_paths(name, dtype):
    prior = _prior().to(dtype)
    q, k, v = (t.detach().to(dtype) for t in _qkv())
    dict(q=q, k=k, v=v)[name][0, 1, 2, 3] = math.nan
    for call in (lambda: prior.sdpa(q, k, v), lambda: prior.attend(q, k, v, causal=True, check=True),
                 lambda: prior.attend(q, k, v, causal=True, backend="eager", check=True)):
        with pytest.raises(ValueError, match=rf"^{name} holds 1 non-finite entries \(first: NaN at index \[0, 1, 2, 3\]\)"):
            call()


def test_goat_nan_in_a_discarded_lane_channel_is_ignored():
    """Channels d_c.. of q and k are replaced by the lanes: what they held does not matter."""
    prior = _prior()
    q, k, v = (t.detach() for t in _qkv())
    ref = prior.sdpa(q, k, v)
    q[..., prior.content_dim:] = math.nan
    torch.testing.assert_close(prior.sdpa(q, k, v), ref)


def test_a_diverged_goat_prior_is_named_and_unchecked_goat_matches_the_attention_contract():
    prior = _prior()
    q, k, v = (t.detach() for t in _qkv())
    with torch.no_grad():
        prior.alpha[1, 0] = math.nan
    with pytest.raises(ValueError, match=r"lanes are not finite \(non-finite parameters: \['alpha'\]\).*Lower train\.lr"):
        prior.sdpa(q, k, v)
    prior = _prior()
    q[0, 0, 2, 0] = math.nan  # unchecked (the training path): eager NaN; SDPA NaN or 0 (attention's "Bad input")
    fast = prior.attend(q, k, v, causal=True)
    eager = prior.attend(q, k, v, causal=True, backend="eager")
    assert bool(eager[0, 0, 2].isnan().all())
    assert bool(fast[0, 0, 2].isnan().all()) or bool((fast[0, 0, 2] == 0).all())
    torch.testing.assert_close(fast[0, 0, 3:], eager[0, 0, 3:], rtol=1e-10, atol=1e-12)  # other rows agree


def test_goat_lanes_refuse_a_bad_scale():
    prior = _prior()
    q, k, _ = _qkv()
    for scale in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="must be finite and > 0"):
            prior.lanes(q, k, scale=scale)


def _low_precision_case(n: int, causal: bool, dtype):
    """A prior with ALiBi-seeded recency slopes (u(j) ∋ s·j), inputs of `dtype`, and the float64
    reference on the same rounded inputs and parameters: (prior, q, k, v, reference output)."""
    g = torch.Generator().manual_seed(3)
    prior = GoatPrior(8, 32, train_len=n, rank=4, causal=causal, init="seeded", generator=g)
    with torch.no_grad():  # every parameter off its init but the slopes (kept at ALiBi's), as benchmarks do
        for name, t in prior.named_parameters():
            if name != "recency":
                t.add_(0.3 * torch.randn(t.shape, generator=g))
    prior = prior.to(dtype)
    q, k, v = (torch.randn(1, 8, n, 32, generator=g).to(dtype) for _ in range(3))
    p64 = GoatPrior(8, 32, train_len=n, rank=4, causal=causal).double()
    p64.load_state_dict({name: t.double() for name, t in prior.state_dict().items()})
    dc = prior.content_dim
    ref = attend(q[..., :dc].double(), k[..., :dc].double(), v.double(), bias=p64(n, n), causal=causal,
                 backend="eager")
    return prior, q, k, v, ref


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_causal_goat_in_16_bit_works_in_float32_where_16_bit_lanes_fail(dtype):
    """The sink lane holds u(j) ∋ s·j: in bfloat16 it is rounded by ~2⁻⁹·|u(j)|, which at n = 1024 moves
    the output by more than the 16-bit gate's tolerance (6e-2 of the output's scale). `sdpa` then
    works in float32 and lands within it, returning the inputs' dtype; gradients reach the prior."""
    n, tol = 1024, 6e-2
    prior, q, k, v, ref = _low_precision_case(n, True, dtype)
    q2, k2 = prior.lanes(q, k)  # the lanes in the inputs' own 16-bit dtype: what the fix avoids
    naive = F.scaled_dot_product_attention(q2, k2, v, is_causal=True)
    scale = max(1.0, float(ref.abs().max()))
    if dtype == torch.bfloat16:  # 8 mantissa bits: the output alone fails the gate (float16's 11 bits
        assert float((naive.double() - ref).abs().max()) > tol * scale  # fail it later, in the gradients)
    q.requires_grad_(True)
    out = prior.sdpa(q, k, v)
    assert out.dtype == dtype
    assert float((out.double() - ref).abs().max()) <= tol * scale
    out.float().square().sum().backward()
    assert q.grad is not None and q.grad.dtype == dtype
    assert all(p.grad is not None and p.grad.dtype == dtype and bool(torch.isfinite(p.grad).all())
               for p in prior.parameters())


def test_non_causal_goat_in_bfloat16_keeps_its_dtype():
    """Without the recency term u(j) stays bounded, so a non-causal prior runs in the inputs' dtype:
    `sdpa` is exactly its 16-bit lanes through SDPA, and within the gate's tolerance."""
    prior, q, k, v, ref = _low_precision_case(256, False, torch.bfloat16)
    out = prior.sdpa(q, k, v)
    q2, k2 = prior.lanes(q, k)
    assert q2.dtype == torch.bfloat16
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q2, k2, v), rtol=0, atol=0)
    assert float((out.double() - ref).abs().max()) <= 6e-2 * max(1.0, float(ref.abs().max()))
