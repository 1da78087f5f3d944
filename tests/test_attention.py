"""attend: eager, SDPA and a hand-written softmax agree in outputs and gradients; bad input is named."""

import math

import pytest
import torch

from companion import attend, visible_keys

B, H, I, J, D = 2, 3, 5, 7, 4


def _qkv(i=I, j=J, d=D, e=D, dtype=torch.float64, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, i, d, generator=g, dtype=dtype)
    k = torch.randn(B, H, j, d, generator=g, dtype=dtype)
    v = torch.randn(B, H, j, e, generator=g, dtype=dtype)
    return [t.requires_grad_(grad) for t in (q, k, v)]


def _reference(q, k, v, bias=None, causal=False):
    """Softmax written out: exp of shifted scores over visible keys, divided by their sum."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    allowed = torch.ones_like(s, dtype=torch.bool)
    if causal:
        allowed = allowed & torch.ones(s.shape[-2:], dtype=torch.bool).tril()
    if bias is not None:
        if bias.dtype == torch.bool:
            allowed = allowed & bias
        else:
            allowed = allowed & ~torch.isneginf(bias)
            s = s + torch.where(torch.isneginf(bias), torch.zeros_like(bias), bias)
    e = torch.where(allowed, torch.exp(s - s.max(-1, keepdim=True).values), torch.zeros_like(s))
    w = e / e.sum(-1, keepdim=True)
    return w @ v, w


def _float_bias(shape=(H, I, J), seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


CASES = {
    "plain": dict(),
    "causal": dict(causal=True),
    "float bias": dict(bias=_float_bias()),
    "float bias + causal": dict(bias=_float_bias(), causal=True),
    "bool bias": dict(bias=torch.rand(I, J, generator=torch.Generator().manual_seed(2)) > 0.3),
    "-inf bias": dict(bias=_float_bias().masked_fill(torch.eye(I, J, dtype=torch.bool).logical_not() & (torch.arange(J) % 2 == 0), -math.inf)),
    "batch-head bias": dict(bias=_float_bias((B, H, I, J))),
}


def _fix_rows(case):
    bias = case.get("bias")
    if bias is not None and bias.dtype == torch.bool:
        bias = bias.clone()
        bias[:, 0] = True  # every row keeps a visible key
        return {**case, "bias": bias}
    return case


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_outputs_match_reference(name, backend):
    case = _fix_rows(CASES[name])
    q, k, v = _qkv(i=I if case.get("causal") is None else I, j=J)
    out = attend(q, k, v, backend=backend, **case)
    ref, _ = _reference(q, k, v, **case)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_eager_equal_sdpa(name):
    case = _fix_rows(CASES[name])
    bias = case.get("bias")
    grads = []
    for backend in ("eager", "sdpa"):
        q, k, v = _qkv(grad=True)
        kw = dict(case)
        if bias is not None and bias.is_floating_point():
            kw["bias"] = bias.clone().requires_grad_(True)
        out = attend(q, k, v, backend=backend, **kw)
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
        g = [q.grad, k.grad, v.grad]
        if "bias" in kw and kw["bias"].is_floating_point():
            g.append(torch.nan_to_num(kw["bias"].grad))
        grads.append(g)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


def test_gradients_match_reference_float32():
    q, k, v = _qkv(dtype=torch.float32, grad=True)
    bias = _float_bias().float().requires_grad_(True)
    attend(q, k, v, bias=bias, causal=True, backend="sdpa").square().sum().backward()
    got = [t.grad.clone() for t in (q, k, v, bias)]
    for t in (q, k, v, bias):
        t.grad = None
    _reference(q, k, v, bias=bias, causal=True)[0].square().sum().backward()
    for a, t in zip(got, (q, k, v, bias)):
        torch.testing.assert_close(a, t.grad, rtol=1e-4, atol=1e-5)


def test_auto_uses_eager_for_weights_and_weights_are_the_reference():
    q, k, v = _qkv()
    bias = _float_bias()
    out, w = attend(q, k, v, bias=bias, causal=True, return_weights=True)
    ref_out, ref_w = _reference(q, k, v, bias=bias, causal=True)
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(out, ref_out)
    assert torch.all(w.triu(1) == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, I, dtype=w.dtype))


def test_value_dim_may_differ():
    q, k, v = _qkv(e=6)
    assert attend(q, k, v, backend="sdpa").shape == (B, H, I, 6)
    torch.testing.assert_close(attend(q, k, v, backend="eager"), attend(q, k, v, backend="sdpa"))


def test_blocked_key_gets_exactly_zero_weight():
    q, k, v = _qkv(i=3, j=3)
    allowed = torch.ones(3, 3, dtype=torch.bool)
    allowed[:, 1] = False
    _, w = attend(q, k, v, bias=allowed, return_weights=True)
    assert torch.all(w[..., 1] == 0)


def test_visible_keys_combines_rule_and_bias():
    bias = torch.zeros(3, 3)
    bias[2, 0] = -math.inf
    vis = visible_keys(bias, 3, 3, causal=True)
    expected = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 1, 1]], dtype=torch.bool)
    assert torch.equal(vis, expected)


# ---------------------------------------------------------------- errors


def test_all_masked_rows_are_named():
    q, k, v = _qkv(i=4, j=4)
    allowed = torch.ones(4, 4, dtype=torch.bool)
    allowed[1] = False
    allowed[3] = False
    with pytest.raises(ValueError, match=r"query rows \[1, 3\] have every key blocked"):
        attend(q, k, v, bias=allowed)


def test_all_masked_by_neg_inf_and_causal():
    q, k, v = _qkv(i=3, j=3)
    bias = torch.zeros(3, 3, dtype=torch.float64)
    bias[2, :3] = -math.inf
    with pytest.raises(ValueError, match=r"rows \[2\]"):
        attend(q, k, v, bias=bias, causal=True)
    bias = torch.zeros(3, 3, dtype=torch.float64)
    bias[0, 0] = -math.inf  # causal leaves only the diagonal of row 0, and the bias blocks it
    with pytest.raises(ValueError, match=r"rows \[0\]"):
        attend(q, k, v, bias=bias, causal=True)


@pytest.mark.parametrize("shape", [(I,), (J, I), (H, I, J + 1), (4, H, I, J), (1, 1, 1, I, J)])
def test_bias_of_wrong_shape(shape):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="bias has shape"):
        attend(q, k, v, bias=torch.zeros(shape, dtype=torch.float64))


def test_bias_leading_axes_must_broadcast():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="do not broadcast"):
        attend(q, k, v, bias=torch.zeros(H + 1, I, J, dtype=torch.float64))


@pytest.mark.parametrize("value, word", [(float("nan"), "NaN"), (math.inf, r"\+inf")])
def test_non_finite_bias(value, word):
    q, k, v = _qkv()
    bias = torch.zeros(I, J, dtype=torch.float64)
    bias[2, 3] = value
    with pytest.raises(ValueError, match=word):
        attend(q, k, v, bias=bias)


def test_mismatched_head_dims():
    q, _, v = _qkv()
    k = torch.randn(B, H, J, D + 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="head dims differ: q has d=4 but k has d=5"):
        attend(q, k, v)


def test_other_bad_inputs():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="4-D"):
        attend(q[0], k, v)
    with pytest.raises(ValueError, match="keys but v has"):
        attend(q, k, v[:, :, :-1])
    with pytest.raises(ValueError, match="unknown backend"):
        attend(q, k, v, backend="flash")
    with pytest.raises(ValueError, match="does not return attention weights"):
        attend(q, k, v, backend="sdpa", return_weights=True)
    with pytest.raises(ValueError, match="dtype"):
        attend(q, k, v, bias=torch.zeros(I, J, dtype=torch.int64))


def test_a_learnable_mask_on_cuda_is_sent_to_the_kernel_that_differentiates_it():
    from torch.nn.attention import SDPBackend

    from companion.attention import sdpa_backends

    mask = torch.zeros(4, 4, requires_grad=True)
    assert sdpa_backends("cuda", mask) == [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    # SDPA's own order for everything else: no bias, a fixed mask, a boolean mask, any CPU input
    assert sdpa_backends("cuda", None) is None
    assert sdpa_backends("cuda", mask.detach()) is None
    assert sdpa_backends("cuda", torch.ones(4, 4, dtype=torch.bool)) is None
    assert sdpa_backends("cpu", mask) is None


def test_a_learnable_mask_gets_the_eager_gradient_through_sdpa():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    grads = []
    for backend in ("eager", "sdpa"):
        mask = torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64).requires_grad_()
        attend(q, k, v, bias=mask, causal=True, backend=backend).square().sum().backward()
        grads.append(mask.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-10, atol=1e-12)
    assert grads[0].triu(1).abs().max() == 0  # keys the causal rule hides get no gradient


def test_a_mask_reaches_sdpa_with_four_axes(monkeypatch):
    """torch picks its kernel by the mask's rank; a (1, i, j) mask must arrive as (1, 1, i, j)."""
    import torch.nn.functional as F

    seen = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kw):
        seen.append(None if attn_mask is None else tuple(attn_mask.shape))
        return real(q, k, v, attn_mask=attn_mask, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    q = torch.randn(2, 3, 5, 4)
    for bias in (torch.zeros(5, 5), torch.zeros(1, 5, 5), torch.zeros(3, 5, 5), torch.zeros(2, 3, 5, 5)):
        out = attend(q, q, q, bias=bias, causal=True, backend="sdpa")
        torch.testing.assert_close(out, attend(q, q, q, bias=bias, causal=True, backend="eager"))
    assert seen == [(1, 1, 5, 5), (1, 1, 5, 5), (1, 3, 5, 5), (2, 3, 5, 5)]


# ---------------------------------------------------------------- bad input: the contract


def _cuda_param():
    return pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                           reason="no CUDA device")])


DEVICES = ["cpu", _cuda_param()]
DTYPES = [torch.float64, torch.float32, torch.bfloat16]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ["auto", "eager", "sdpa"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", ["q", "k", "v"])
@pytest.mark.parametrize("value, word", [(math.nan, "NaN"), (math.inf, r"\+inf"), (-math.inf, "-inf")])
def test_a_non_finite_query_key_or_value_is_named_on_every_backend(device, dtype, backend, causal, name, value,
                                                                   word):
    q, k, v = (t.to(device) for t in _qkv(dtype=dtype))
    dict(q=q, k=k, v=v)[name][1, 2, 3, 0] = value
    with pytest.raises(ValueError, match=rf"^{name} holds 1 non-finite entries \(first: {word} at index "
                                         r"\[1, 2, 3, 0\]\);.*lower train\.lr"):
        attend(q, k, v, causal=causal, backend=backend)
    with pytest.raises(ValueError, match=rf"^{name} holds"):  # with a bias too (the mask reaches SDPA)
        attend(q, k, v, causal=causal, backend=backend, bias=torch.zeros(I, J, dtype=dtype, device=device))


@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize("backend", ["auto", "eager", "sdpa"])
@pytest.mark.parametrize("scale", [math.nan, math.inf, -math.inf, 0.0, -0.5])
def test_a_scale_that_is_not_finite_and_positive_is_refused_even_unchecked(scale, backend, check):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=rf"^scale={scale} multiplies every score: it must be finite and > 0"):
        attend(q, k, v, scale=scale, backend=backend, check=check)


def test_a_positive_scale_is_used_on_every_backend():
    q, k, v = _qkv()
    ref = _reference(q * 0.3 * math.sqrt(D), k, v)[0]  # scale 0.3 = the default of q·(0.3·√d)
    for backend in ("eager", "sdpa"):
        torch.testing.assert_close(attend(q, k, v, scale=0.3, backend=backend), ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(TypeError, match="is not a number"):
        attend(q, k, v, scale="big")


@pytest.mark.parametrize("backend", ["auto", "eager", "sdpa"])
@pytest.mark.parametrize("causal", [False, True])
def test_no_keys_is_an_error_not_zeros(backend, causal):
    q, k, v = _qkv(j=0)
    with pytest.raises(ValueError, match=r"^k has shape \(2, 3, 0, 4\): no keys, so every query row would "
                                         r"normalise over an empty set"):
        attend(q, k, v, causal=causal, backend=backend)
    with pytest.raises(ValueError, match="no keys"):
        attend(q, k, v, causal=causal, backend=backend, bias=torch.zeros(I, 0, dtype=torch.float64))


def test_empty_batches_heads_and_queries_are_fine():
    for i, b in ((0, B), (I, 0)):
        q, k, v = (t[:b] for t in _qkv(i=i))
        for backend in ("eager", "sdpa"):
            assert attend(q, k, v, backend=backend).shape == (b, H, i, D)


def test_dtypes_and_head_dim_zero_are_named():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"dtypes torch.float64, torch.float32, torch.float64; .* k.to\(q.dtype\)"):
        attend(q, k.float(), v)
    with pytest.raises(ValueError, match=r"^q has dtype torch.int64; .*\.float\(\)"):
        attend(q.long(), k.long(), v.long())
    q0, k0 = q[..., :0], k[..., :0]
    for check in (True, False):
        with pytest.raises(ValueError, match="head dim 0"):
            attend(q0, k0, v, check=check)


def _rows(out: torch.Tensor) -> str:
    """One letter per query row of batch 0, head 0: N (NaN), 0 (exact zeros) or . (finite, not all zero)."""
    row = out[0, 0].float()
    return "".join("N" if r.isnan().any() else "0" if (r == 0).all() else "." for r in row)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unchecked_backends_agree_on_good_input_and_differ_only_as_documented(dtype):
    """check=False (the training path) adds no work: the module docstring lists what each backend
    returns for input that check=True refuses. This pins that list on the CPU."""
    def both(q, k, v, **kw):
        return [_rows(attend(q, k, v, backend=b, check=False, **kw)) for b in ("eager", "sdpa")]

    q, k, v = _qkv(i=4, j=4, dtype=dtype)
    for causal in (False, True):  # good input: the same function
        out = [attend(q, k, v, backend=b, check=False, causal=causal).float() for b in ("eager", "sdpa")]
        torch.testing.assert_close(out[0], out[1], rtol=2e-2, atol=2e-2)
    for j in (4, 64):  # a NaN query row: eager NaN; SDPA NaN with a bias, NaN or 0 without (by key count)
        q, k, v = _qkv(i=4, j=j, dtype=dtype)
        q[0, 0, 1, 2] = math.nan
        for causal in (False, True):
            eager, sdpa = both(q, k, v, causal=causal)
            assert eager == ".N.." and sdpa in (".N..", ".0..")
        assert both(q, k, v, bias=torch.zeros(4, j, dtype=dtype)) == [".N..", ".N.."]
    q, k, v = _qkv(i=4, j=4, dtype=dtype)
    blocked = torch.zeros(4, 4, dtype=dtype)
    blocked[2] = -math.inf  # a row with every key blocked: eager NaN, SDPA 0
    assert both(q, k, v, bias=blocked) == ["..N.", "..0."]
    nan_k = k.clone()
    nan_k[0, 0, 1, 0] = math.nan  # a NaN key: every row that sees it is NaN; eager also the rows the rule hides it from
    assert both(q, nan_k, v) == ["NNNN", "NNNN"]
    assert both(q, nan_k, v, causal=True) == ["NNNN", ".NNN"]
    nan_v = v.clone()
    nan_v[0, 0, 1, 0] = math.nan
    assert both(q, k, nan_v) == ["NNNN", "NNNN"]
    assert both(*_qkv(i=4, j=0, dtype=dtype)) == ["0000", "0000"]  # no keys: zeros everywhere
