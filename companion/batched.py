"""Seed-batched models: M models of one shape fused into one, trained together as if each ran alone.

`stack(models)` takes M models built exactly as they would be alone (`build_model(cfg, task,
generator=stream(seed, "init"))` each) and returns one `Transformer` whose every tensor has a leading
member axis M, under the same parameter names:

- each `nn.Linear` becomes a `StackedLinear`: weight (M, out, in), input (M·B, …, in) viewed as
  (M, B·…, in) and multiplied with one `torch.baddbmm`, the weight's gradient taken as gᵀ·x, the
  orientation of a linear layer alone (`_BatchedLinear`);
- each `nn.LayerNorm` a `StackedLayerNorm` (one fused layer norm per member); each `nn.Embedding`
  a `StackedEmbedding` (member m reads rows m·V … m·V + V − 1 of one (M·V, d) table);
- every other parameter or buffer (cls, pos_emb, a mask prior's logits) gets the member axis and is
  given to each member's own samples by `companion.priors.members_over_batch`; a GOAT prior's
  parameters get it too, and the prior builds each member's SDPA lanes from that member's slices on
  that member's samples (`companion.goat.GoatPrior.sdpa`);
- a buffer that is not saved with the model (ALiBi's slopes, a constant of the config) is equal in
  every member and stays one, shared; RoPE and sinusoidal positions hold nothing and act per sample.

The members are folded into the batch dimension, member-major (M·B samples, member m owning samples
m·B … m·B + B − 1), so the model's one forward serves both: attention is still one SDPA call on
(M·B, h, n, d) with each member's prior expanded over its own samples. Every output sample depends on
its own member's parameters only, and the loss is the sum of the members' own losses, so member m's
gradient is the gradient it would get alone, up to float reassociation. Each piece is written so that
it sums in the order of a model alone where that was measurable (CPU, one thread, torch 2.14): a
fused layer norm per member, a single-output map as w·xᵀ, a weight gradient as gᵀ·x, a prior or a
position table expanded per member to its samples' full shape, GOAT's lanes built per member. There a member's forward, gradient and whole run equal its run
alone to the last bit, whatever the group (tests/test_batched.py); other kernels (a GPU, another BLAS)
may round otherwise, which each record's `execution` notes. Adam and AdamW are elementwise, so one
optimiser over the stacked tensors is M optimisers; gradient clipping is per member
(`clip_grad_norm_members_`).

`unstack_into(stacked, m, model)` copies member m back into a model alone, where the unchanged
`evaluate`, drift tracking and the store take it (on CUDA the members' evaluation forwards are then
served from one stacked forward, `companion.shared_forward`). `batchable(cfg)` says which configs this covers
(`why_not_batchable` says why not); everything else runs alone.
"""

from __future__ import annotations

import copy
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["StackedLinear", "StackedLayerNorm", "StackedEmbedding", "stack", "unstack_into",
           "clip_grad_norm_members_", "batchable", "why_not_batchable", "MAX_MEMBERS", "STACKED_ARCHS",
           "STACKED_POSITIONS", "STACKED_PRIORS"]

MAX_MEMBERS = 8  # the default cap on a group's size (executors split larger groups)
# What stacks, each kind checked member by member against its run alone (tests/test_batched.py).
STACKED_ARCHS = ("encoder", "decoder", "vit")
STACKED_POSITIONS = ("learned", "none", "sinusoidal", "sinusoidal-matched", "sincos-2d", "rope")
STACKED_PRIORS = ("none", "mask", "alibi", "goat", "goat-2d")


class _BatchedLinear(torch.autograd.Function):
    """y = x·Wᵀ (+ b) per member, x (M, R, in), W (M, out, in), b (M, out) or None, with the weight's
    gradient taken as gᵀ·x (M, out, in), the orientation of a linear layer alone (`F.linear`'s
    backward computes grad_outᵀ·x). Autograd of `bmm(x, Wᵀ)` takes xᵀ·g (M, in, out) instead, which
    the CPU kernel sums in another order for some shapes (in = 4: a ViT's patch embedding; out = 10:
    a ten-class head), so those members drifted from their runs alone in the last bit. The input's
    gradient g·W and the bias's Σ_rows g are what autograd of `baddbmm` computes."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        wt = weight.transpose(1, 2)
        return torch.bmm(x, wt) if bias is None else torch.baddbmm(bias.unsqueeze(1), x, wt)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight = ctx.saved_tensors
        gx = torch.bmm(g, weight) if ctx.needs_input_grad[0] else None
        gw = torch.bmm(g.transpose(1, 2), x) if ctx.needs_input_grad[1] else None
        gb = g.sum(1) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb


class StackedLinear(nn.Module):
    """M linear maps: weight (M, out, in), bias (M, out) or None; input (M·B, …, in), member-major."""

    def __init__(self, weight: Tensor, bias: Tensor | None):
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.bias = None if bias is None else nn.Parameter(bias)
        self.members, self.out_features, self.in_features = weight.shape

    def forward(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]
        xm = x.reshape(self.members, -1, self.in_features)  # (M, B·…, in)
        if self.out_features == 1:
            # x·wᵀ with one output column is a matrix-vector product, which the batched kernel sums in
            # another order for M > 1 than for M = 1 (or alone); w·xᵀ sums as a model alone does.
            out = torch.bmm(self.weight, xm.transpose(1, 2)).transpose(1, 2)
            out = out if self.bias is None else out + self.bias.unsqueeze(1)
        else:
            out = _BatchedLinear.apply(xm, self.weight, self.bias)
        return out.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        return f"members={self.members}, in_features={self.in_features}, out_features={self.out_features}"


class StackedLayerNorm(nn.Module):
    """M layer norms over the last axis, weight and bias (M, d): one fused `F.layer_norm` per member
    on its own samples (an affine step after one shared normalisation would sum the weight's
    gradient in another order than a model alone does)."""

    def __init__(self, weight: Tensor, bias: Tensor, eps: float):
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(weight), nn.Parameter(bias), eps
        self.members, self.width = weight.shape

    def forward(self, x: Tensor) -> Tensor:
        shape = (self.width,)
        parts = x.reshape(self.members, -1, self.width).unbind(0)
        return torch.stack([F.layer_norm(xm, shape, w, b, self.eps)
                            for xm, w, b in zip(parts, self.weight, self.bias)]).reshape(x.shape)


class StackedEmbedding(nn.Module):
    """M embedding tables (M, V, d); ids (M·B, …), member-major, each looked up in its member's table."""

    def __init__(self, weight: Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.members, self.num_embeddings, self.width = weight.shape

    def forward(self, ids: Tensor) -> Tensor:
        offsets = torch.arange(self.members, device=ids.device) * self.num_embeddings
        flat = ids.reshape(self.members, -1) + offsets[:, None]
        out = F.embedding(flat, self.weight.reshape(-1, self.width))
        return out.reshape(*ids.shape, self.width)


STACKED = (StackedLinear, StackedLayerNorm, StackedEmbedding)


def _stacked_leaf(mods: list[nn.Module]) -> nn.Module | None:
    """The stacked version of M copies of one leaf module, or None when it is not a stacked kind."""
    first = mods[0]
    if isinstance(first, nn.Linear):
        bias = None if first.bias is None else torch.stack([m.bias.detach() for m in mods])
        return StackedLinear(torch.stack([m.weight.detach() for m in mods]), bias)
    if isinstance(first, nn.LayerNorm):
        if not first.elementwise_affine or first.bias is None or len(first.normalized_shape) != 1:
            raise ValueError("only affine layer norms over the last axis stack; run this config alone.")
        return StackedLayerNorm(torch.stack([m.weight.detach() for m in mods]),
                                torch.stack([m.bias.detach() for m in mods]), first.eps)
    if isinstance(first, nn.Embedding):
        if first.padding_idx is not None or first.max_norm is not None:
            raise ValueError("embeddings with padding_idx or max_norm do not stack; run this config alone.")
        return StackedEmbedding(torch.stack([m.weight.detach() for m in mods]))
    return None


@torch.no_grad()
def stack(models: Sequence[nn.Module]) -> nn.Module:
    """One model holding `models` (same class, config and shapes) on a leading member axis.

    The parameter and buffer names are those of a model alone (so weight decay, which selects by
    name, treats each member alike), every tensor of `state_dict()` is (M, *shape alone), and
    `stacked(x)` for a member-major batch x (M·B, …) returns (M·B, …): member m's outputs are
    rows m·B … m·B + B − 1. The members are not changed; the stacked model owns copies.
    """
    models = list(models)
    if not models:
        raise ValueError("stack needs at least one model.")
    first = models[0]
    shapes = {k: tuple(v.shape) for k, v in first.state_dict().items()}
    for i, m in enumerate(models[1:], 1):
        if type(m) is not type(first) or getattr(m, "cfg", None) != getattr(first, "cfg", None):
            raise ValueError(f"model {i} is not of the first model's class and config; only models of one "
                             "config (seeds aside) stack.")
        other = {k: tuple(v.shape) for k, v in m.state_dict().items()}
        if other != shapes:
            raise ValueError(f"model {i} has other tensors or shapes than the first; only models of one shape stack.")
    out = copy.deepcopy(first)
    for name, mod in list(out.named_modules()):
        if not name or isinstance(mod, STACKED):
            continue
        leaf = _stacked_leaf([m.get_submodule(name) for m in models])
        if leaf is not None:
            parent, _, child = name.rpartition(".")
            setattr(out.get_submodule(parent) if parent else out, child, leaf)
    for name, mod in out.named_modules():
        if isinstance(mod, STACKED):
            continue
        prefix = f"{name}." if name else ""
        for pname, p in list(mod._parameters.items()):
            if p is not None:
                data = torch.stack([m.get_parameter(prefix + pname).detach() for m in models])
                mod._parameters[pname] = nn.Parameter(data, requires_grad=p.requires_grad)
        for bname, b in list(mod._buffers.items()):
            if b is None:
                continue
            if bname in mod._non_persistent_buffers_set:
                # a constant of the config (ALiBi's slopes): not saved, not trained, one for every member
                if not all(torch.equal(m.get_buffer(prefix + bname), b) for m in models):
                    raise ValueError(f"buffer {prefix + bname} is not saved with the model and differs between "
                                     "the members, so it cannot be stacked; run this config alone.")
                continue
            mod._buffers[bname] = torch.stack([m.get_buffer(prefix + bname) for m in models])
    out.members = len(models)
    return out


@torch.no_grad()
def unstack_into(stacked: nn.Module, m: int, model: nn.Module) -> nn.Module:
    """Copy member `m` of `stacked` into `model` (a model alone of the same config); returns `model`."""
    source = stacked.state_dict()
    for name, t in model.state_dict().items():
        t.copy_(source[name][m])
    return model


@torch.no_grad()
def clip_grad_norm_members_(params: Sequence[Tensor], max_norm: float, members: int) -> Tensor:
    """Per member, `torch.nn.utils.clip_grad_norm_` over that member's slices of every gradient: its
    norm ‖(g₁[m], g₂[m], …)‖₂ (by `torch.nn.utils.get_total_norm`, as a model alone computes it) and
    the factor min(1, max_norm / (norm + 1e-6)). Returns the (M,) norms."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(members)
    total = torch.stack([nn.utils.get_total_norm([g[m] for g in grads]) for m in range(members)])  # (M,)
    coef = torch.clamp(float(max_norm) / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.reshape(members, *([1] * (g.dim() - 1))))
    return total


def why_not_batchable(cfg) -> str | None:
    """Why the runs of `cfg` (a RunConfig) cannot train seed-stacked, or None if they can.

    Covered: every architecture (encoder, causal decoder, ViT), every position kind (learned, none,
    sinusoidal, RoPE: the last two have no parameters and act on each sample alone), CLS or mean
    pooling, every prior (none; a mask, learnable, fixed or zero, shared or per head; ALiBi, whose
    fixed slopes all members share; GOAT, whose lanes each member builds from its own parameters on
    its own samples, `companion.goat.GoatPrior.sdpa`), first or all layers, with or without QK-norm,
    any query-key init (inits happen per member when each is built alone), any backend. A kind added
    to the registries later is refused until tests/test_batched.py covers it.
    """
    m = cfg.model
    if m.arch not in STACKED_ARCHS:
        return f"arch {m.arch!r} (stacked: {', '.join(STACKED_ARCHS)})"
    if m.positions not in STACKED_POSITIONS:
        return f"positions {m.positions!r} (stacked: {', '.join(STACKED_POSITIONS)})"
    if m.prior.kind not in STACKED_PRIORS:
        return f"prior {m.prior.kind!r} (stacked: {', '.join(STACKED_PRIORS)})"
    return None


def batchable(cfg) -> bool:
    """Whether runs of `cfg` can train seed-stacked (`why_not_batchable` says why not)."""
    return why_not_batchable(cfg) is None
