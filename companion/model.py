"""The Transformer of every chapter, built from a `ModelConfig` and the task's `TaskSpec`.

Pre-LN blocks x += attn(LN(x)); x += FF(LN(x)) (GELU), final LN. Three front/back ends: encoder
(token + positions, optional CLS, pooled regression/classification head), causal decoder (LM head)
and small ViT (linear patch embedding). Priors are pluggable and answer one protocol
(`companion.priors.Prior`): each layer's attention rotates q and k by its position prior (RoPE), then
asks its scores prior (`PriorConfig`: a learnable or fixed mask, ALiBi, GOAT) to attend; the model
asks its position prior (sinusoidal) to embed. Learned positions are a parameter of the model.

Parameter names are an API (weight decay, drift and chapters select by name); they are stable:
    tok_emb.weight            (vocab, d)        encoder, decoder
    patch_emb.weight, .bias   (d, C·p·p), (d,)  vit
    cls                       (d,)              when pool == "cls" (encoder, vit)
    pos_emb                   (n, d)            n = positions incl. CLS (positions "learned" only); with
                                                `ModelConfig.symmetric` the tied positions read the row of
                                                the first of them (the others' rows are never read)
    blocks.{l}.ln1.weight/.bias, blocks.{l}.ln2.weight/.bias
    blocks.{l}.attn.q_proj.weight, .k_proj.weight, .v_proj.weight   (n_heads·d_head, d), no bias
    blocks.{l}.attn.out_proj.weight/.bias                          (d, n_heads·d_head), (d,)
    blocks.{l}.attn.prior.logits   (h or 1, n, n)   mask priors (a buffer when the mask is fixed)
    blocks.{l}.attn.prior.alpha, .beta, .sink_*, .recency   GOAT priors (see `companion.goat`)
    blocks.{l}.attn.q_norm.weight/.bias, .k_norm.weight/.bias   (d_head,)      with qk_norm
    blocks.{l}.ff.fc1.weight/.bias, blocks.{l}.ff.fc2.weight/.bias
    ln_f.weight/.bias, head.weight/.bias
Head h of layer l owns rows h·d_head:(h+1)·d_head of q_proj/k_proj/v_proj.weight.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.config import ModelConfig
from companion.init import STRUCTURED, apply_qk_init_
from companion.priors import (EMBED_STD, NO_PRIOR, Prior, PriorContext, build_positions, build_prior, members_over_batch,
                              needs_pattern, positions_per_layer)
from companion.symmetry import tied_index
from companion.tasks import TaskSpec

__all__ = ["Attention", "Block", "Transformer", "build_model", "init_weights_"]


class Attention(nn.Module):
    """Multi-head attention with separate q/k/v projections and pluggable priors.

    out = W_o · concat_h prior.attend(rope.rotate(x W_q[h]ᵀ, x W_k[h]ᵀ), x W_v[h]ᵀ).

    Args:
        d_model: residual width. n_heads: heads. d_head: width of each head.
        prior: the scores prior (`companion.priors.Prior`: mask, ALiBi, GOAT), or None.
        causal: queries read keys j ≤ i only (decoder).
        backend: `attend` backend.
        qk_norm: layer-norm each head's q and k (bounds the score scale).
        rope: the rotation prior (RoPE), or None.
    """

    def __init__(self, d_model: int, n_heads: int, d_head: int, *, prior: Prior | None = None,
                 causal: bool = False, backend: str = "auto", qk_norm: bool = False, rope: Prior | None = None):
        super().__init__()
        inner = n_heads * d_head
        self.n_heads, self.d_head, self.causal, self.backend = n_heads, d_head, causal, backend
        self.q_proj = nn.Linear(d_model, inner, bias=False)
        self.k_proj = nn.Linear(d_model, inner, bias=False)
        self.v_proj = nn.Linear(d_model, inner, bias=False)
        self.out_proj = nn.Linear(inner, d_model)
        self.q_norm = nn.LayerNorm(d_head) if qk_norm else None
        self.k_norm = nn.LayerNorm(d_head) if qk_norm else None
        self.prior = prior
        self.rope = rope
        if prior is not None:
            prior.check_attention(causal=causal)

    @property
    def scores_prior(self) -> Prior:
        """The prior that attends (a no-op prior when the layer has none)."""
        return self.prior if self.prior is not None else NO_PRIOR

    def _heads(self, t: Tensor) -> Tensor:
        b, n, _ = t.shape
        return t.view(b, n, self.n_heads, self.d_head).transpose(1, 2)  # (b, h, n, d)

    def project(self, x: Tensor, rows: slice | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """x (b, n, d_model) → q, k, v (b, h, n, d_head): projected, QK-normed and rotated, as attended.
        With `rows` (a slice of positions, step 1) only those queries: q is (b, h, rows, d_head)."""
        start = 0 if rows is None else rows.start
        xq = x if rows is None else x[:, rows]
        q, k, v = self._heads(self.q_proj(xq)), self._heads(self.k_proj(x)), self._heads(self.v_proj(x))
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            q, k = self.rope.rotate(q, k) if rows is None else self.rope.rotate(q, k, q_start=start)
        return q, k, v

    def forward(self, x: Tensor, return_weights: bool = False, rows: slice | None = None):
        """x (b, n, d_model) → (b, n, d_model), plus weights (b, h, n, n) if `return_weights`. With
        `rows` (a slice of positions, step 1) only those positions attend, reading every key:
        (b, rows, d_model), equal to those rows of the whole output."""
        q, k, v = self.project(x, rows)
        # Shapes are right by construction and every prior's bias is finite, so attend's input checks
        # are skipped in the training path; requesting weights (analysis) runs them.
        extra = {} if rows is None else {"q_start": rows.start}
        res = self.scores_prior.attend(q, k, v, causal=self.causal, backend=self.backend,
                                       return_weights=return_weights, check=return_weights, **extra)
        out, weights = res if return_weights else (res, None)
        out = self.out_proj(out.transpose(1, 2).reshape(x.shape[0], q.shape[-2], -1))  # (b, n, h·d) → d
        return (out, weights) if return_weights else out


class FeedForward(nn.Module):
    """fc2(GELU(fc1(x)))."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-LN block: x + attn(LN(x)), then + FF(LN(x))."""

    def __init__(self, cfg: ModelConfig, *, prior: Prior | None, rope: Prior | None, causal: bool):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg.d_model, cfg.n_heads, cfg.head_dim, prior=prior, causal=causal,
                              backend=cfg.attn_backend, qk_norm=cfg.qk_norm, rope=rope)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff)

    def forward(self, x: Tensor, return_weights: bool = False, rows: slice | None = None):
        """x (b, n, d) → (b, n, d); with `rows` (a slice of positions, step 1) only those positions'
        outputs, (b, rows, d), every position still serving as a key."""
        if return_weights:
            a, w = self.attn(self.ln1(x), return_weights=True)
            x = x + a
            return x + self.ff(self.ln2(x)), w
        if rows is not None:
            x = x[:, rows] + self.attn(self.ln1(x), rows=rows)
            return x + self.ff(self.ln2(x))
        x = x + self.attn(self.ln1(x))
        return x + self.ff(self.ln2(x))


class Transformer(nn.Module):
    """Encoder, causal decoder or ViT (see the module docstring for parameter names).

    Inputs: tokens (b, seq_len) for encoder/decoder, images (b, C, H, W) for vit.
    Outputs: (b, n_outputs) for encoder/vit; (b, seq_len, vocab_size) logits for the decoder.

    Args:
        cfg: the model settings.
        spec: the task's input/output description.
        pattern: bool (n, n) open pattern over token positions incl. CLS (priors that need one).

    Attributes:
        members: 0 for a model alone; M for M seed-stacked models (`companion.batched.stack`), whose
            direct parameters (cls, pos_emb, prior logits) carry a leading member axis and whose
            batch is member-major (M·B samples); the same forward serves both.
    """

    members: int = 0

    def __init__(self, cfg: ModelConfig, spec: TaskSpec, *, pattern: Tensor | None = None,
                 generator: torch.Generator | None = None):
        super().__init__()
        _check_compatible(cfg, spec)
        self.cfg, self.spec = cfg, spec
        self.has_cls = cfg.arch != "decoder" and cfg.pool == "cls"
        d = cfg.d_model
        if cfg.arch == "vit":
            c, hgt, wid = spec.image_shape
            p = cfg.patch_size
            self.patch_emb = nn.Linear(c * p * p, d)
            n_tokens = (hgt // p) * (wid // p)
        else:
            self.tok_emb = nn.Embedding(spec.vocab_size, d)
            n_tokens = spec.seq_len
        self.n_positions = n_tokens + int(self.has_cls)
        if self.has_cls:
            self.cls = nn.Parameter(torch.zeros(d))
        if cfg.positions == "learned":
            self.pos_emb = nn.Parameter(torch.zeros(self.n_positions, d))
        # ModelConfig.symmetric: those bits' tokens read one position embedding (`companion.symmetry`)
        symmetric = tuple(b + int(self.has_cls) for b in cfg.symmetric)
        self.pos_index = tied_index(self.n_positions, symmetric) if symmetric else None
        causal = cfg.arch == "decoder"
        ctx = PriorContext(cfg.n_heads, cfg.head_dim, self.n_positions, causal=causal, pattern=pattern,
                           generator=generator, symmetric=symmetric)
        # the model's position prior (sinusoidal) embeds; a per-layer one (RoPE) rotates in every block
        per_layer = positions_per_layer(cfg.positions)
        self.positions = None if per_layer else build_positions(cfg.positions, ctx)
        self.blocks = nn.ModuleList(
            Block(cfg, prior=build_prior(cfg.prior, ctx) if cfg.prior.layers == "all" or l == 0 else None,
                  rope=build_positions(cfg.positions, ctx) if per_layer else None, causal=causal)
            for l in range(cfg.n_layers)
        )
        self.ln_f = nn.LayerNorm(d)
        n_out = spec.vocab_size if cfg.arch == "decoder" else spec.n_outputs
        self.head = nn.Linear(d, n_out)

    def embed(self, x: Tensor) -> Tensor:
        """Inputs → (b, n_positions, d): token or patch embedding, CLS at position 0, + positions."""
        if self.cfg.arch == "vit":
            p = self.cfg.patch_size
            patches = F.unfold(x, kernel_size=p, stride=p).transpose(1, 2)  # (b, P, C·p·p)
            h = self.patch_emb(patches)
        else:
            h = self.tok_emb(x)  # (b, n, d)
        b = h.shape[0]
        if self.has_cls:
            cls = members_over_batch(self.cls[..., None, :], b, self.members)  # (1, d) alone, (b, 1, d) stacked
            h = torch.cat([cls.expand(b, 1, -1), h], dim=1)
        n = h.shape[1]
        if self.cfg.positions == "learned":
            if n > self.n_positions:
                raise ValueError(f"the model learned {self.n_positions} position embeddings but the input has "
                                 f"{n} positions; use positions 'sinusoidal', 'rope' or 'none' to read longer inputs.")
            pos = self.pos_emb[..., :n, :] if self.pos_index is None else self.pos_emb[..., self.pos_index[:n], :]
            return h + members_over_batch(pos, b, self.members)
        return self.positions.embed(h) if self.positions is not None else h

    def output_rows(self, n: int, outputs: slice | None = None) -> slice | None:
        """The positions (of n, CLS included) the last block must compute: (0, 1) for a model that
        pools its CLS token, a decoder's `outputs` (normalised; None = all), None (all) otherwise.
        A ValueError names a slice that is not a run of positions, or `outputs` for a model that pools."""
        if self.cfg.arch != "decoder":
            if outputs is not None:
                raise ValueError(f"outputs={outputs!r} selects a decoder's positions; an {self.cfg.arch} pools "
                                 "its positions into one output, so leave outputs=None.")
            return slice(0, 1) if self.has_cls else None
        if outputs is None:
            return None
        if not isinstance(outputs, slice):
            raise ValueError(f"outputs={outputs!r} must be a slice of positions, e.g. slice(-5, None) for the last five.")
        start, stop, step = outputs.indices(n)
        if step != 1 or start >= stop:
            raise ValueError(f"outputs={outputs!r} selects no run of positions out of {n}; pass a slice with "
                             "step 1 holding at least one position.")
        return slice(start, stop)

    def readout(self, h: Tensor) -> Tensor:
        """Final LN, pooling (encoder/vit) and head."""
        h = self.ln_f(h)
        if self.cfg.arch != "decoder":
            h = h[:, 0] if self.has_cls else h.mean(dim=1)
        return self.head(h)

    def forward(self, x: Tensor, return_attention: bool = False, *, outputs: slice | None = None):
        """Output, or (output, [weights (b, h, n, n) per layer]) if `return_attention`.

        The last block computes only the positions the output reads (`output_rows`): the CLS token
        of an encoder or ViT that pools it, or a decoder's `outputs` (a slice of positions, step 1:
        logits (b, len, vocab) for those positions only, equal to those rows of the whole output).
        Every other position is still computed in the earlier blocks, where later layers read it as
        a key. The input is never shortened to the last output, although a causal decoder reads no
        token after it: a prior may depend on the input's length (RoPE's position interpolation
        scales every angle by it), so a shorter input would be another computation.
        """
        rows = self.output_rows(x.shape[1] if self.cfg.arch == "decoder" else self.n_positions, outputs)
        h = self.embed(x)
        if not return_attention:
            for block in self.blocks[:-1]:
                h = block(h)
            h = self.blocks[-1](h, rows=rows)
            return self.readout(h)
        if outputs is not None:
            raise ValueError("return_attention gives every position's attention; ask for all outputs "
                             "(outputs=None) with it.")
        maps = []
        for block in self.blocks:
            h, w = block(h, return_weights=True)
            maps.append(w)
        return self.readout(h), maps


def _check_compatible(cfg: ModelConfig, spec: TaskSpec) -> None:
    if cfg.arch == "vit":
        if spec.inputs != "images":
            raise ValueError(f"arch 'vit' needs an image task; this task gives {spec.inputs}. Use arch 'encoder'.")
        _, hgt, wid = spec.image_shape
        if hgt % cfg.patch_size or wid % cfg.patch_size:
            raise ValueError(f"image {hgt}×{wid} is not divisible into {cfg.patch_size}-pixel patches; "
                             "choose a patch_size that divides both sides.")
    elif spec.inputs != "tokens":
        raise ValueError(f"arch {cfg.arch!r} reads tokens but this task gives images; use arch 'vit'.")
    if (cfg.arch == "decoder") != (spec.output == "lm"):
        raise ValueError(f"arch {cfg.arch!r} does not fit a task with output {spec.output!r}: "
                         "language-model tasks need arch 'decoder', the others 'encoder' or 'vit'.")


@torch.no_grad()
def init_weights_(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Draw every weight from `generator`, in parameter-name order.

    Linear weight and bias ~ U(−1/√fan_in, 1/√fan_in) (PyTorch's default Linear distribution);
    embeddings, positions and CLS ~ N(0, 0.02²); LayerNorm 1 and 0; prior logits are left as built.
    """
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            bound = 1 / math.sqrt(module.in_features)
            module.weight.uniform_(-bound, bound, generator=generator)
            if module.bias is not None:
                module.bias.uniform_(-bound, bound, generator=generator)
        elif isinstance(module, nn.Embedding):
            module.weight.normal_(0.0, EMBED_STD, generator=generator)
        elif isinstance(module, nn.LayerNorm):
            module.weight.fill_(1.0)
            module.bias.zero_()
    for name in ("cls", "pos_emb"):
        if hasattr(model, name):
            getattr(model, name).normal_(0.0, EMBED_STD, generator=generator)
    return model


def build_model(cfg: ModelConfig, task, *, generator: torch.Generator) -> Transformer:
    """The model for `task`: mask pattern from `task.mask_pattern(variant, cls=...)`, weights and the
    query-key init (`cfg.qk_init`) drawn from `generator`. Built on the CPU; move it with `.to(device)`.

    The task's pattern (variant `cfg.prior.variant`) serves the mask prior and the structured
    query-key initialisers alike, so both carry the same structure."""
    pattern = None
    if needs_pattern(cfg.prior) or cfg.qk_init in STRUCTURED:
        has_cls = cfg.arch != "decoder" and cfg.pool == "cls"
        pattern = task.mask_pattern(cfg.prior.variant, cls=has_cls)
    model = Transformer(cfg, task.spec, pattern=pattern if needs_pattern(cfg.prior) else None, generator=generator)
    init_weights_(model, generator)
    return apply_qk_init_(model, cfg.qk_init, generator=generator, pattern=pattern)
