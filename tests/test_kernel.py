"""The small-map attention kernel (`companion.kernel`, kernel.c): the function it computes, its
gradients, that a map's result does not depend on the batch around it (what stacked runs rely on),
and when `attend` takes it."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

from companion import kernel
from companion.attention import attend
from companion.kernel import small_attention

pytestmark = pytest.mark.skipif(not kernel.available(), reason=f"kernel {kernel.status()}")


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _inputs(R, H, I, J, Dk, Dv, seed=0, layout="heads-inner"):
    """q, k, v (R, H, ·, ·) as the model hands them over: views of (R, n, H, d) projections."""
    g = torch.Generator().manual_seed(seed)
    if layout == "heads-inner":
        make = lambda n, d: torch.randn(R, n, H, d, generator=g).transpose(1, 2)  # noqa: E731
    else:
        make = lambda n, d: torch.randn(R, H, n, d, generator=g)  # noqa: E731
    return [make(I, Dk).requires_grad_(), make(J, Dk).requires_grad_(), make(J, Dv).requires_grad_()]


def _reference(q, k, v, bias, members, causal, q_start, scale):
    """float64 attention, the bias given to each sample as `small_attention` reads it."""
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if bias is not None:
        b = bias.double()
        if members:
            b = b.repeat_interleave(q.shape[0] // members, 0)
        s = s + b
    if causal:
        visible = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(q_start)
        s = s.masked_fill(~visible, -math.inf)
    return torch.softmax(s, -1) @ v.double()


CASES = {
    # R, H, I, J, Dk, Dv, bias heads (None: no bias), members, causal, q_start
    "gotu, mask shared by the heads, 3 members": (6, 4, 16, 16, 8, 8, 1, 3, False, 0),
    "gotu's last layer: the CLS row": (4, 4, 1, 16, 8, 8, 1, 2, False, 0),
    "decoder rows, per-head bias": (4, 2, 5, 12, 16, 16, 2, 0, True, 7),
    "goat: content 15 of 24, per-head K": (3, 4, 63, 63, 15, 24, 4, 3, True, 0),
    "no bias, causal, odd sizes": (5, 3, 13, 13, 6, 10, None, 0, True, 0),
    "no bias, encoder": (2, 2, 9, 9, 4, 4, None, 0, False, 0),
}


@pytest.mark.parametrize("case", CASES)
def test_forward_and_gradients_equal_float64_attention(case):
    R, H, I, J, Dk, Dv, hb, members, causal, q_start = CASES[case]
    q, k, v = _inputs(R, H, I, J, Dk, Dv)
    g = torch.Generator().manual_seed(1)
    bias = None if hb is None else torch.randn(members or 1, hb, I, J, generator=g).requires_grad_()
    scale = 1 / math.sqrt(Dk)
    out = small_attention(q, k, v, bias, members=members, causal=causal, q_start=q_start, scale=scale)
    ref = _reference(q, k, v, bias, members, causal, q_start, scale)
    assert out.shape == ref.shape and out.dtype == torch.float32
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=2e-6)
    grad = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    inputs = [t for t in (q, k, v, bias) if t is not None]
    got = torch.autograd.grad(out, inputs, grad.float())
    want = torch.autograd.grad(ref, inputs, grad)
    for name, a, b in zip("qkvb", got, want):
        assert a.shape == b.shape, name
        assert torch.allclose(a.double(), b.double(), rtol=1e-5, atol=5e-6), (name, (a.double() - b.double()).abs().max())


def test_hidden_keys_get_exactly_zero_weight_and_no_gradient():
    """The causal rule: query i (position q_start + i) reads keys ≤ q_start + i; a value it cannot see
    changes neither its output nor gets gradient from it."""
    q, k, v = _inputs(2, 2, 4, 10, 8, 8)
    out = small_attention(q, k, v, causal=True, q_start=6, scale=0.3)
    (dv,) = torch.autograd.grad(out[:, :, 0].sum(), [v])  # query 0 sits at position 6
    assert torch.equal(dv[:, :, 7:], torch.zeros_like(dv[:, :, 7:]))
    assert bool((dv[:, :, :7] != 0).all())


def _run(q, k, v, bias, members, causal, q_start):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    b = None if bias is None else bias.detach().clone().requires_grad_()
    out = small_attention(q, k, v, b, members=members, causal=causal, q_start=q_start, scale=0.35)
    grads = torch.autograd.grad((out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum(),
                                [t for t in (q, k, v, b) if t is not None])
    return out, grads


@pytest.mark.parametrize("case", ["gotu, mask shared by the heads, 3 members", "goat: content 15 of 24, per-head K",
                                  "decoder rows, per-head bias"])
def test_a_member_computes_alone_what_it_computes_in_a_stack(case):
    """The property seed-stacked runs rely on: member m's rows of a stacked call (its bias one of M)
    equal, to the last bit, a call on its rows alone with its bias: output and every gradient."""
    R, H, I, J, Dk, Dv, hb, members, causal, q_start = CASES[case]
    members = members or 2
    R = R // members * members
    q, k, v = _inputs(R, H, I, J, Dk, Dv, seed=3)
    bias = torch.randn(members, hb, I, J, generator=torch.Generator().manual_seed(4))
    per = R // members
    with torch.no_grad():
        stacked = small_attention(q, k, v, bias, members=members, causal=causal, q_start=q_start, scale=0.35)
        for m in range(members):
            rows = slice(m * per, (m + 1) * per)
            alone = small_attention(q[rows], k[rows], v[rows], bias[m], causal=causal, q_start=q_start, scale=0.35)
            assert torch.equal(stacked[rows], alone)
    for m in range(members):
        rows = slice(m * per, (m + 1) * per)
        qs, ks, vs = (t.detach().clone().requires_grad_() for t in (q, k, v))
        bs = bias.detach().clone().requires_grad_()
        out = small_attention(qs, ks, vs, bs, members=members, causal=causal, q_start=q_start, scale=0.35)
        w = torch.zeros(out.shape)
        w[rows] = torch.linspace(-1, 1, out[rows].numel()).reshape(out[rows].shape)
        gq, gk, gv, gb = torch.autograd.grad((out * w).sum(), [qs, ks, vs, bs])
        qa, ka, va = (t[rows].detach().clone().requires_grad_() for t in (q, k, v))
        ba = bias[m].detach().clone().requires_grad_()
        alone = small_attention(qa, ka, va, ba, causal=causal, q_start=q_start, scale=0.35)
        aq, ak, av, ab = torch.autograd.grad((alone * w[rows]).sum(), [qa, ka, va, ba])
        assert torch.equal(gq[rows], aq) and torch.equal(gk[rows], ak) and torch.equal(gv[rows], av)
        assert torch.equal(gb[m], ab)
        others = torch.ones(members, dtype=torch.bool)
        others[m] = False
        assert torch.equal(gb[others], torch.zeros_like(gb[others]))  # no member's bias learns from another's rows


def test_two_calls_give_the_same_bits():
    q, k, v = _inputs(3, 4, 16, 16, 8, 8, seed=5)
    bias = torch.randn(1, 16, 16)
    a, ga = _run(q, k, v, bias, 0, False, 0)
    b, gb = _run(q, k, v, bias, 0, False, 0)
    assert torch.equal(a, b) and all(torch.equal(x, y) for x, y in zip(ga, gb))


def test_the_output_is_laid_out_for_the_output_projection():
    """(R, H, I, Dv) seen through a transpose of (R, I, H, Dv): merging the heads is a view."""
    q, k, v = _inputs(2, 4, 5, 5, 8, 8)
    out = small_attention(q, k, v, scale=0.3)
    merged = out.transpose(1, 2).reshape(2, 5, 32)
    assert merged._base is not None or merged.data_ptr() == out.data_ptr()


def test_attend_takes_the_kernel_on_one_thread_and_sdpa_on_more():
    q, k, v = (t.detach() for t in _inputs(2, 2, 6, 6, 8, 8))
    bias = torch.randn(2, 6, 6)
    ref = _reference(q, k, v, bias, 0, True, 0, 1 / math.sqrt(8))
    one = attend(q, k, v, bias=bias, causal=True)
    assert torch.equal(one, attend(q, k, v, bias=bias, causal=True, backend="kernel"))
    torch.set_num_threads(2)
    two = attend(q, k, v, bias=bias, causal=True)
    assert torch.equal(two, attend(q, k, v, bias=bias, causal=True, backend="sdpa"))
    for out in (one, two):
        assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-6)


def test_attend_with_a_stacked_bias_equals_the_bias_given_to_each_sample():
    q, k, v = (t.detach() for t in _inputs(4, 2, 6, 6, 8, 8))
    stacked = torch.randn(2, 1, 6, 6)
    each = stacked.repeat_interleave(2, 0).expand(4, 2, 6, 6)
    for backend in ("auto", "eager", "sdpa"):
        a = attend(q, k, v, bias=stacked, members=2, backend=backend)
        b = attend(q, k, v, bias=each, backend=backend)
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-7), backend
    with pytest.raises(ValueError, match=r"members=3 means a stacked bias \(members, h or 1, i, j\); got shape \(2, 1, 6, 6\)"):
        attend(q, k, v, bias=stacked, members=3)


@pytest.mark.parametrize("why, make", [
    ("float64", lambda: [t.detach().double() for t in _inputs(1, 1, 4, 4, 4, 4)]),
    ("more keys than the kernel's buffers", lambda: [t.detach() for t in _inputs(1, 1, 2, kernel.MAX_POSITIONS + 1, 4, 4)]),
])
def test_backend_kernel_says_why_it_cannot_serve_a_call(why, make):
    q, k, v = make()
    with pytest.raises(ValueError, match=r"^backend='kernel' cannot serve this call: it serves float32 CPU tensors on one "
                                         r"torch thread with at most 256 keys.*Use backend='auto'"):
        attend(q, k, v, backend="kernel")
    attend(q, k, v)  # auto falls back


def test_backend_kernel_refuses_weights_and_a_bool_bias():
    q, k, v = (t.detach() for t in _inputs(1, 1, 4, 4, 4, 4))
    with pytest.raises(ValueError, match="it returns no attention weights"):
        attend(q, k, v, backend="kernel", return_weights=True)
    with pytest.raises(ValueError, match=r"it takes a float bias"):
        attend(q, k, v, bias=torch.ones(4, 4, dtype=torch.bool), backend="kernel")


def test_switched_off_it_is_not_built_and_says_so():
    code = ("import os, torch; from companion import kernel; torch.set_num_threads(1); "
            "print(kernel.available(), kernel.status())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COMPANION_KERNEL": "off"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False off (COMPANION_KERNEL)"


def test_the_library_is_cached_by_source_and_compiler(tmp_path):
    code = "from companion import kernel; print(kernel.available())"
    env = {**os.environ, "COMPANION_KERNEL_CACHE": str(tmp_path)}
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
        assert out.stdout.strip() == "True", out.stderr
    built = list(tmp_path.glob("small_attention-*.so"))
    assert len(built) == 1 and not list(tmp_path.glob("*.tmp*"))  # one library, no half-written file left


@pytest.mark.parametrize("causal", [True, False])
def test_goat_on_the_kernel_equals_its_lanes_and_the_explicit_path(causal):
    """On one CPU thread GOAT attends through the kernel with its materialised K: the same attention as
    its SDPA lanes and as the explicit (eager) path, outputs and gradients, at float32 rounding."""
    from companion.goat import GoatPrior

    prior = GoatPrior(4, 16, train_len=12, rank=3, causal=causal, init="seeded",
                      generator=torch.Generator().manual_seed(0))
    q, k, v = _inputs(3, 4, 12, 12, 16, 16, seed=6, layout="heads-outer")
    results = {}
    for backend in ("kernel", "eager"):
        out = prior.attend(q, k, v, causal=causal, backend=backend)
        results[backend] = (out, torch.autograd.grad(out.sum(), [q, k, v, prior.alpha, prior.sink_w1]))
    out = prior.sdpa(q, k, v)
    results["lanes"] = (out, torch.autograd.grad(out.sum(), [q, k, v, prior.alpha, prior.sink_w1]))
    ref_out, ref_grads = results["eager"]
    for name in ("kernel", "lanes"):
        got, grads = results[name]
        assert torch.allclose(got, ref_out, rtol=1e-5, atol=1e-6), name
        for a, b in zip(grads, ref_grads):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), name
