"""GOAT lanes a few heads at a time (`companion.goat_chunked`, `GoatPrior.head_chunk`).

Properties: the chunked path computes the one-call path's function. The kernel treats each
(sample, head) alone, so the output and the gradients of q, k, v equal the one call's to the last
bit; the prior's parameter gradients sum the heads' shares in another order, so they are compared
with the float64 reference (the materialised bias through eager attention) at the tolerance of a
float32 sum, scaled by the largest gradient (a shared sink bias has a true gradient of zero: adding
it to every key changes no softmax, so its float32 value is cancellation noise around 0).
"""

from __future__ import annotations

import copy

import pytest
import torch

from companion.attention import attend
from companion.batched import stack
from companion.cost.variants import _goat_prior
from companion.experiments import get_experiment
from companion.goat_chunked import head_chunked_sdpa, why_not_chunked
from companion.model import build_model
from companion.runs import stream
from companion.tasks import make_task

B, H, D = 2, 8, 32


def _inputs(n_q: int, n: int, dtype=torch.float32, seed=1):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, n_q, D, generator=g, dtype=dtype).requires_grad_()
    k, v = [torch.randn(B, H, n, D, generator=g, dtype=dtype).requires_grad_() for _ in range(2)]
    return q, k, v, torch.randn(B, H, n_q, D, generator=g, dtype=dtype)


def _prior(n: int, causal: bool, chunk, dtype=torch.float32):
    prior = _goat_prior(n, H, D, 4, 1, "cpu").to(dtype)  # random α, β and sink MLP, ALiBi slopes
    prior.causal, prior.head_chunk = causal, chunk
    return prior


def _step(prior, q, k, v, do, q_start=0):
    for t in (q, k, v, *prior.parameters()):
        t.grad = None
    out = prior.sdpa(q, k, v, q_start=q_start)
    out.backward(do)
    return out.detach(), [t.grad for t in (q, k, v)], {n: p.grad for n, p in prior.named_parameters()}


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("chunk", [1, 3, 8])
@pytest.mark.parametrize("q_start", [0, 5])
def test_chunked_output_and_input_gradients_equal_the_one_call_exactly(causal, chunk, q_start):
    n = 40
    q, k, v, do = _inputs(n - q_start, n)
    one = _step(_prior(n, causal, None), q, k, v, do, q_start)
    chunked = _step(_prior(n, causal, chunk), q, k, v, do, q_start)
    assert torch.equal(chunked[0], one[0])
    for a, b in zip(chunked[1], one[1]):
        assert torch.equal(a, b)
    assert chunked[2].keys() == one[2].keys()
    for name, g in one[2].items():  # the same parameters get a gradient (none for recency when not causal)
        assert (chunked[2][name] is None) == (g is None), name


@pytest.mark.parametrize("causal", [True, False])
def test_chunked_parameter_gradients_match_the_float64_reference(causal):
    n, q_start = 48, 7
    q, k, v, do = _inputs(n - q_start, n)
    prior = _prior(n, causal, 3)
    _, inputs, grads = _step(prior, q, k, v, do, q_start)
    # reference: the materialised log-prior through eager attention, all in float64
    ref = copy.deepcopy(prior).double()
    q64, k64, v64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
    dc = ref.content_dim
    bias = ref(n, n)[:, q_start:]
    out = attend(q64[..., :dc], k64[..., :dc], v64, bias=bias, causal=causal, backend="eager", q_start=q_start)
    out.backward(do.double())
    scale = max(float(p.grad.abs().max()) for p in ref.parameters() if p.grad is not None)
    for name, p in ref.named_parameters():
        if p.grad is None:
            assert grads[name] is None
            continue
        assert torch.allclose(grads[name].double(), p.grad, rtol=1e-4, atol=1e-5 * scale), name
    for a, b in zip(inputs, (q64, k64, v64)):
        assert torch.allclose(a.double(), b.grad, rtol=1e-4, atol=1e-5 * float(b.grad.abs().max()))


def test_chunked_float64_equals_the_reference_to_float64_precision():
    n = 32
    q, k, v, do = _inputs(n, n, torch.float64)
    prior = _prior(n, True, 2, torch.float64)
    out, inputs, grads = _step(prior, q, k, v, do)
    ref = copy.deepcopy(prior)
    q2, k2, v2 = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    dc = ref.content_dim
    expect = attend(q2[..., :dc], k2[..., :dc], v2, bias=ref(n, n), causal=True, backend="eager")
    expect.backward(do)
    assert torch.allclose(out, expect.detach(), rtol=0, atol=1e-12)
    for name, p in ref.named_parameters():
        assert torch.allclose(grads[name], p.grad, rtol=1e-9, atol=1e-11), name


def test_a_chunk_sees_only_its_own_heads_parameters():
    """Change head 5's slope: the output of every other head stays bitwise equal, head 5's moves."""
    n = 24
    q, k, v, _ = _inputs(n, n)
    prior = _prior(n, True, 2)
    before = prior.sdpa(q, k, v).detach()
    with torch.no_grad():
        prior.recency[5] += 0.5
    after = prior.sdpa(q, k, v).detach()
    others = [h for h in range(H) if h != 5]
    assert torch.equal(before[:, others], after[:, others])
    assert not torch.equal(before[:, 5], after[:, 5])


def test_where_the_chunked_path_does_not_apply_the_one_call_serves():
    n = 16
    prior = _prior(n, True, 2)
    q, k, v, _ = _inputs(n, n)
    assert why_not_chunked(prior, q) is None
    # bfloat16: the causal prior works in float32 (LANES_DTYPE), through the one call
    qb, kb, vb = (t.detach().bfloat16() for t in (q, k, v))
    assert why_not_chunked(prior, qb) is not None
    one = _prior(n, True, None)
    assert torch.equal(prior.sdpa(qb, kb, vb), one.sdpa(qb, kb, vb))
    # a seed-stacked prior builds its lanes member by member
    exp = get_experiment("passkey")
    cfgs = [exp.config("ci", "goat", s) for s in (0, 1)]
    task = make_task(cfgs[0].task)
    stacked = stack([build_model(c.model, task, generator=stream(c.seed, "init")) for c in cfgs]).blocks[0].attn.prior
    assert stacked.members == 2 and "seed-stacked" in why_not_chunked(stacked, q)
    with pytest.raises(ValueError, match="seed-stacked.*Leave head_chunk unset"):
        head_chunked_sdpa(stacked, q, k, v, chunk=2)
    with pytest.raises(ValueError, match="positive number of heads"):
        head_chunked_sdpa(prior, q, k, v, chunk=0)
    with pytest.raises(ValueError, match="positive number of heads"):
        _goat_prior(n, H, D, 4, 1, "cpu").__class__(H, D, train_len=n, head_chunk=0)


def test_a_diverged_prior_is_named_on_the_chunked_path_too():
    n = 16
    prior = _prior(n, True, 2)
    q, k, v, _ = _inputs(n, n)
    with torch.no_grad():
        prior.sink_w2.fill_(float("nan"))
    with pytest.raises(ValueError, match="lanes are not finite.*sink_w2"):
        prior.sdpa(q, k, v, check=True)
