"""GOAT lanes a few heads at a time: the CPU path whose peak memory stays near plain SDPA's.

`GoatPrior.sdpa` builds the lanes q′, k′ for every head and hands them to one SDPA call, whose
backward keeps them: two more (b, h, n, d) tensors than plain attention holds, 1.91× plain SDPA's
peak at L = 4096 on the CPU (`benchmarks/results/attention-cpu-vm-2core.json`). Here one autograd
function runs the CPU flash-attention kernel `chunk` heads at a time and keeps only what plain
attention keeps (q, k, v, the output and its log-sum-exp):

- forward: per chunk, build that chunk's lanes, run the kernel, write its output and log-sum-exp
  into the whole ones, drop the lanes;
- backward: per chunk, build the lanes again (a few elementwise products: no attention is
  recomputed), run the kernel's backward, and write the gradients into dq, dk, dv, which are
  allocated whole but written chunk by chunk, as a kernel writes its output. The content
  channels get the lanes' gradient times their scale (the lane channels of q and k are discarded,
  so theirs is zero), and the prior's parameters get the gradient of `GoatPrior.lane_parts` (the
  lanes summed over the batch) through autograd on those small tensors.

The kernel treats every (sample, head) on its own, so the output and the gradients of q, k and v
equal one call's to the last bit (tests/test_goat_chunked.py); the prior's gradients sum the heads'
shares in another order, so they agree to float reassociation. Fewer heads per chunk hold less but
leave threads idle (the kernel parallelises over samples × heads); `chunk` = the torch threads is
the balance (`benchmarks/attention.py` prices it as the variant `goat-chunked`).

Measured (`benchmarks/results/attention-cpu-vm-2core-chunked.json`, Chapter 10): at L = 4096 with two
threads and two heads per chunk, the peak stays at plain SDPA's, against about twice for the one
call, and the time is the one call's; short calls pay for the loop over chunks.

What it covers: a prior alone (not seed-stacked), on the CPU, float32 or float64, causal or not, any
`q_start`. Elsewhere `GoatPrior.sdpa` keeps its one call (`why_not_chunked` says why), and
`head_chunked_sdpa` called there raises a ValueError that names the reason.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["PER_HEAD", "head_chunked_sdpa", "why_not_chunked"]

# the GoatPrior parameters with a heads axis first; the sink MLP's are shared by the heads
PER_HEAD = ("alpha", "beta", "sink_gain", "sink_bump", "recency")
DTYPES = (torch.float32, torch.float64)


def why_not_chunked(prior, q: Tensor) -> str | None:
    """Why `head_chunked_sdpa` cannot serve this call, or None when it can."""
    if prior.members:
        return "a seed-stacked prior builds its lanes member by member; chunking is for a prior alone"
    if q.device.type != "cpu":
        return f"it runs the CPU flash-attention kernel, and the inputs are on {q.device.type}"
    if q.dtype not in DTYPES:
        return f"the CPU kernel path is float32 or float64, and the inputs are {q.dtype}"
    return None


def _heads(p: dict[str, Tensor], hs: slice) -> dict[str, Tensor]:
    return {n: (t[hs] if n in PER_HEAD else t) for n, t in p.items()}


def _rule(prior, i: int, n: int, q_start: int, device, dtype) -> tuple[bool, Tensor | None]:
    """(is_causal, attn_mask) for the kernel: a causal prior's rule, aligned at q_start (the kernel
    takes a float mask of the inputs' dtype, −inf where a query may not look)."""
    if not prior.causal:
        return False, None
    if not q_start:
        return True, None
    allowed = torch.ones(i, n, dtype=torch.bool, device=device).tril(q_start)
    return False, torch.zeros(i, n, dtype=dtype, device=device).masked_fill(~allowed, -math.inf)


class _HeadChunked(torch.autograd.Function):
    @staticmethod
    def forward(ctx, prior, chunk, q_start, positions, names, q, k, v, *params):
        p = dict(zip(names, params))
        b, h, i, _ = q.shape
        n = k.shape[-2]
        causal, mask = _rule(prior, i, n, q_start, q.device, q.dtype)
        inv = prior.lane_scale()
        out, lse = q.new_empty(b, h, i, v.shape[-1]), None
        for h0 in range(0, h, chunk):
            hs = slice(h0, h0 + chunk)
            parts = prior.lane_parts(n, i, positions, p=_heads(p, hs), q_start=q_start, dtype=q.dtype,
                                     device=q.device, inv=inv)
            q2, k2 = _lanes(prior, q[:, hs], k[:, hs], parts, inv)
            o, m = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q2, k2, v[:, hs], 0.0, causal,
                                                                            attn_mask=mask)
            if lse is None:
                lse = m.new_empty(b, h, i)
            out[:, hs], lse[:, hs] = o, m
            del q2, k2, o, m
        ctx.save_for_backward(q, k, v, out, lse, *params)
        ctx.prior, ctx.chunk, ctx.q_start, ctx.positions, ctx.names = prior, chunk, q_start, positions, names
        return out

    @staticmethod
    def backward(ctx, dout: Tensor):
        q, k, v, out, lse, *params = ctx.saved_tensors
        prior, chunk, q_start, positions, names = ctx.prior, ctx.chunk, ctx.q_start, ctx.positions, ctx.names
        b, h, i, _ = q.shape
        n, dc = k.shape[-2], prior.content_dim
        causal, mask = _rule(prior, i, n, q_start, q.device, q.dtype)
        inv = prior.lane_scale()
        # written chunk by chunk (each page becomes resident when its chunk writes it, as in a kernel)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        leaves = [t.detach().requires_grad_() for t in params]
        dparams: list[Tensor | None] = [None] * len(params)  # None for a parameter the lanes do not use
        for h0 in range(0, h, chunk):
            hs = slice(h0, h0 + chunk)
            with torch.enable_grad():
                parts = prior.lane_parts(n, i, positions, p=_heads(dict(zip(names, leaves)), hs),
                                         q_start=q_start, dtype=q.dtype, device=q.device, inv=inv)
            q2, k2 = _lanes(prior, q[:, hs], k[:, hs], parts, inv)
            gq2, gk2, gv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
                dout[:, hs].contiguous(), q2, k2, v[:, hs], out[:, hs], lse[:, hs], 0.0, causal, attn_mask=mask)
            del q2, k2
            dv[:, hs] = gv
            del gv
            # content channels: q′ = q·inv/√d_c and k′ = k there; the lane channels of q and k are discarded
            torch.mul(gq2[..., :dc], inv / math.sqrt(dc), out=dq[:, hs, :, :dc])
            dk[:, hs, :, :dc] = gk2[..., :dc]
            dq[:, hs, :, dc:] = 0.0
            dk[:, hs, :, dc:] = 0.0
            q_rel, _, u = parts  # the keys' spectral lanes hold no parameter
            lane_grads = (gq2[..., dc:dc + q_rel.shape[-1]].sum(0), gk2[..., -1].sum(0))  # over the batch
            del gq2, gk2
            grads = torch.autograd.grad((q_rel, u), leaves, lane_grads, allow_unused=True)
            for j, g in enumerate(grads):
                if g is not None:
                    dparams[j] = g if dparams[j] is None else dparams[j] + g
        return (None, None, None, None, None, dq, dk, dv, *dparams)


def _lanes(prior, q: Tensor, k: Tensor, parts: tuple[Tensor, Tensor, Tensor], inv: float) -> tuple[Tensor, Tensor]:
    """A chunk's (q′, k′) from its lane parts (`GoatPrior.assemble`), outside autograd (the function
    owns the gradient)."""
    return prior.assemble(q, k, tuple(t.detach() for t in parts), inv)


def head_chunked_sdpa(prior, q: Tensor, k: Tensor, v: Tensor, *, chunk: int, positions: Tensor | None = None,
                      q_start: int = 0) -> Tensor:
    """GOAT attention of `prior` (a `GoatPrior`) over q, k, v (b, h, ·, d_head), `chunk` heads at a
    time (module docstring); equal to `prior.sdpa(q, k, v, ...)`."""
    reason = why_not_chunked(prior, q)
    if reason is not None:
        raise ValueError(f"head-chunked GOAT attention cannot run here: {reason}. Leave head_chunk unset "
                         "to use the one-call path.")
    if chunk < 1:
        raise ValueError(f"head_chunk must be a positive number of heads, got {chunk}.")
    names, params = zip(*prior._params().items())
    return _HeadChunked.apply(prior, int(chunk), q_start, positions, names, q, k, v, *params)
