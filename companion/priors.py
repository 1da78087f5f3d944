"""The prior protocol, its registry, and the mask priors.

Every prior answers one small protocol (`Prior`), and the attention layer only ever asks it how to
attend; it never tests a prior's type. A prior overrides the hooks it changes:

    embed(h)          absolute positions added to the token stream (model level: sinusoidal)
    rotate(q, k)      a rotation of queries and keys (RoPE)
    bias(i, j)        an additive log-prior on the scores, (h or 1, i, j), or None (masks, ALiBi, GOAT)
    content(q, k)     the channels of q and k that carry content (GOAT keeps d_c of d_head)
    attend(q, k, v)   the attention itself: by default `companion.attention.attend` with `bias` on
                      `content(q, k)`; GOAT folds itself into one SDPA call as extra lanes
    check_attention(causal)   refuse attention the prior cannot serve
    mask_logits()     the logits M of a learnable mask (what drift measures), or None (default)

and declares, as class attributes, what the model and the evaluation ask of it: `per_layer` (a
position prior that acts in every layer's attention, RoPE; False: the model applies it once, at the
embedding) and `interpolates` (position interpolation, RoPE).

`rotate` and `attend` take `q_start`: the queries may be a run of the keys' positions, q_start …
q_start + i − 1 (a last layer that computes only the rows its readout reads, `companion.model`);
a prior then gives those queries exactly what it gives them in the whole sequence.

The registries name every prior a config can ask for: `PRIORS` (`PriorConfig.kind`, one per layer,
acting on the scores) and `POSITIONS` (`ModelConfig.positions`). Each entry is "module:Class"; the
class builds itself with `from_config(cfg, ctx)`. Adding a prior is one new file with one class and
one line in a registry.

- `LearnableMask` (arXiv 2608.00418): bias = log σ(M), M initialised from a boolean open pattern
  (open → +10, closed → −10 by default), trainable or fixed, per head or shared.
- `GoatPrior` (`companion.goat`, arXiv 2601.15380); `ALiBi`, `RotaryEmbedding`, `SinusoidalPositions`
  (`companion.positions`).

Notable choices: log σ(M) ≤ 0, so a mask can only down-weight keys; zero initialisation gives a
constant shift −log 2 that softmax ignores, so it equals no mask in the forward pass while still
receiving gradient σ(0) = ½.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.attention import attend
from companion.symmetry import check_orbit, symmetrise

__all__ = ["Prior", "PriorContext", "PRIORS", "POSITIONS", "prior_class", "build_prior", "build_positions",
           "positions_per_layer", "needs_pattern", "LearnableMask", "sinusoidal_positions", "members_over_batch", "interpolated"]

# The standard deviation every embedding of a model starts from (token, learned position, CLS:
# `companion.model.init_weights_`), which a fixed position code can be scaled to (`companion.positions`).
EMBED_STD = 0.02
# kind → "module:Class" (the class has `from_config(cfg: PriorConfig, ctx: PriorContext)`).
PRIORS = {
    "mask": "companion.priors:LearnableMask",
    "alibi": "companion.positions:ALiBi",
    "goat": "companion.goat:GoatPrior",
    "goat-2d": "companion.goat2d:GoatPrior2D",
}
# ModelConfig.positions → "module:Class"; "learned" (a parameter of the model) and "none" build nothing.
POSITIONS = {
    "rope": "companion.positions:RotaryEmbedding",
    "sinusoidal": "companion.positions:SinusoidalPositions",
    "sinusoidal-matched": "companion.positions:SinusoidalPositions",
    "sincos-2d": "companion.positions:SinCos2DPositions",
}


@dataclass(frozen=True)
class PriorContext:
    """What a layer tells its prior when building it.

    Attributes:
        n_heads, d_head: the layer's heads and head width.
        n_positions: the model's positions (CLS included): a mask's size, GOAT's training length.
        causal: the attention is causal (decoder).
        pattern: bool (n, n) open pattern over positions, for priors that `needs_pattern`; or (K, n, n),
            one pattern per head, head h taking pattern h mod K (the impulse patterns).
        generator: random draws of the prior's initialisation.
        symmetric: positions over which the model is exactly symmetric (`ModelConfig.symmetric`,
            CLS offset applied); a mask averages its logits over their permutations.
    """

    n_heads: int
    d_head: int
    n_positions: int
    causal: bool = False
    pattern: Tensor | None = None
    generator: torch.Generator | None = None
    symmetric: tuple[int, ...] = ()


class Prior(nn.Module):
    """The protocol of every prior (module docstring); the defaults change nothing.

    Attributes:
        interpolates: the prior can read inputs longer than its training length at the training
            length's positions (position interpolation; set `interpolate` to that length, 0 = off).
        per_layer: a position prior that acts in every layer's attention (RoPE rotates each layer's
            q and k: one instance per block); False, the model's one instance embeds (sinusoidal).
    """

    interpolates: bool = False
    interpolate: int = 0
    per_layer: bool = False

    def embed(self, h: Tensor) -> Tensor:
        """The token stream (b, n, d) with the prior's absolute positions added (default: unchanged)."""
        return h

    def rotate(self, q: Tensor, k: Tensor, q_start: int = 0) -> tuple[Tensor, Tensor]:
        """(q, k), each (b, h, n, d), rotated by position (default: unchanged); with `q_start` the
        queries are the positions q_start … q_start + i − 1 of the keys' n."""
        return q, k

    def bias(self, i: int, j: int | None = None) -> Tensor | None:
        """Additive log-prior (h or 1, i, j) on the scores, or None (default); a stacked prior
        (`companion.batched`) returns (M, h or 1, i, j), one per member."""
        return None

    def content(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """The channels of q and k whose dot product is the content score (default: all)."""
        return q, k

    def check_attention(self, *, causal: bool) -> None:
        """Raise ValueError if the prior cannot serve attention of this causality (default: it can)."""

    def mask_logits(self) -> Tensor | None:
        """The logits M (h or 1, n, n) of a learnable mask, the parameter whose drift
        `companion.drift` measures, or None (default: the prior holds no mask)."""
        return None

    def attend(self, q: Tensor, k: Tensor, v: Tensor, *, causal: bool, backend: str = "auto",
               return_weights: bool = False, check: bool = False, q_start: int = 0):
        """Attention of q, k, v (b, h, n, d) under the prior: `attend(content(q, k), v, bias=bias(n, n))`.
        With `q_start` the i queries are positions q_start … q_start + i − 1 and get those rows of the
        bias (and of the causal rule)."""
        qc, kc = self.content(q, k)
        bias = self.bias(q_start + q.shape[-2], k.shape[-2])
        if bias is not None and q_start:
            bias = bias[..., q_start:, :]
        members = bias.shape[0] if bias is not None and bias.dim() == 4 else 0  # stacked: (M, h or 1, i, j)
        return attend(qc, kc, v, bias=bias, causal=causal, backend=backend,
                      return_weights=return_weights, check=check, q_start=q_start, members=members)


NO_PRIOR = Prior()


@contextmanager
def interpolated(model: nn.Module, train_len: int):
    """Within the block, every prior of `model` that can interpolate (`Prior.interpolates`, RoPE) reads
    inputs longer than `train_len` with position interpolation to it (an evaluation-time switch that
    changes no weight); the previous setting is restored on leaving, also on an error."""
    priors = [m for m in model.modules() if isinstance(m, Prior) and m.interpolates]
    if not priors:
        raise ValueError("the model has no prior that interpolates positions; position interpolation "
                         "applies to RoPE models only.")
    before = [p.interpolate for p in priors]
    try:
        for p in priors:
            p.interpolate = train_len
        yield model
    finally:
        for p, b in zip(priors, before):
            p.interpolate = b


def members_over_batch(t: Tensor, batch: int, members: int, shape: tuple[int, ...] | None = None) -> Tensor:
    """A tensor of a seed-stacked model (`companion.batched`) given to each member's own samples.

    With `members` = 0 (a model alone) `t` is returned as is and broadcasting does the rest. With
    `members` = M, `t` has a leading member axis (M, ...) and the batch is member-major (M·B samples,
    member m owning samples m·B … m·B + B − 1): the result is (M·B, *shape), row s holding t[s // B]
    broadcast to `shape` (default: t's own shape without the member axis).
    """
    if not members:
        return t
    if batch % members:
        raise ValueError(f"a batch of {batch} samples does not split over {members} stacked members; "
                         "give each member the same number of samples, member-major.")
    # one expand per member: its gradient is then summed over that member's samples alone, in the
    # order a model alone sums it (one expand of the whole stack would reduce another axis)
    per = batch // members
    shape = tuple(t.shape[1:]) if shape is None else tuple(shape)
    return torch.cat([m.expand(per, *shape) for m in t.unbind(0)])


def prior_class(spec: str) -> type[Prior]:
    """The class named by a registry entry "module:Class"."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def needs_pattern(cfg) -> bool:
    """Whether the prior of `cfg` (a PriorConfig) is built from the task's open pattern."""
    return cfg.kind in PRIORS and prior_class(PRIORS[cfg.kind]).needs_pattern(cfg)


def build_prior(cfg, ctx: PriorContext) -> Prior | None:
    """The prior of one layer for `cfg` (a PriorConfig), or None for kind "none"."""
    if cfg.kind == "none":
        return None
    if cfg.kind not in PRIORS:
        raise ValueError(f"unknown prior kind {cfg.kind!r}; valid: none, {', '.join(PRIORS)}.")
    prior = prior_class(PRIORS[cfg.kind]).from_config(cfg, ctx)
    prior.check_attention(causal=ctx.causal)
    return prior


def positions_per_layer(kind: str) -> bool:
    """Whether the position prior of `ModelConfig.positions` acts in every layer (`Prior.per_layer`:
    RoPE); False for a model-level one (sinusoidal) and for "learned" and "none", which build none."""
    if kind in ("learned", "none") or kind not in POSITIONS:
        return False
    return prior_class(POSITIONS[kind]).per_layer


def build_positions(kind: str, ctx: PriorContext) -> Prior | None:
    """The position prior of `ModelConfig.positions` (RoPE per layer, sinusoidal per model), or None."""
    if kind in ("learned", "none"):
        return None
    if kind not in POSITIONS:
        raise ValueError(f"unknown positions {kind!r}; valid: learned, none, {', '.join(POSITIONS)}.")
    return prior_class(POSITIONS[kind]).from_config(kind, ctx)


class LearnableMask(Prior):
    """Additive mask log σ(M) with M of shape (h, n, n); h = 1 means shared by all heads.

    Args:
        logits: initial M, shape (n, n) or (h, n, n).
        trainable: M is an `nn.Parameter` if True, else a buffer (the "fixed mask").
        symmetric: positions whose permutations leave the bias unchanged: the bias is log σ of M's
            projection onto the matrices they leave invariant (`companion.symmetry.symmetrise`);
            empty (the default) uses M as it is.
    """

    def __init__(self, logits: Tensor, *, trainable: bool = True, symmetric: tuple[int, ...] = ()):
        super().__init__()
        self.symmetric = tuple(symmetric)
        if self.symmetric:
            check_orbit(self.symmetric, logits.shape[-1])
        if logits.dim() == 2:
            logits = logits[None]
        if logits.dim() != 3 or logits.shape[-1] != logits.shape[-2]:
            raise ValueError(
                f"mask logits have shape {tuple(logits.shape)}; expected (n, n) or (heads, n, n)."
            )
        if not torch.isfinite(logits).all():
            raise ValueError(
                "mask logits must be finite: log σ(M) already maps M = −10 to a near-closed entry; "
                "use a large negative finite value instead of -inf."
            )
        logits = logits.detach().clone().float()
        self.trainable = trainable
        if trainable:
            self.logits = nn.Parameter(logits)
        else:
            self.register_buffer("logits", logits)

    @classmethod
    def from_pattern(
        cls,
        open_: Tensor,
        *,
        heads: int | None = None,
        open_value: float = 10.0,
        closed_value: float = -10.0,
        trainable: bool = True,
        symmetric: tuple[int, ...] = (),
    ) -> "LearnableMask":
        """Mask from a boolean pattern (True = open), (n, n) or (h, n, n).

        `heads` repeats a 2-D pattern into independent per-head copies; None shares one M.
        """
        if open_.dtype != torch.bool:
            raise ValueError(f"the open pattern must be a bool tensor, got {open_.dtype}.")
        m = torch.where(open_, torch.tensor(open_value), torch.tensor(closed_value)).float()
        if heads is not None:
            if m.dim() != 2:
                raise ValueError("`heads` repeats a 2-D pattern; pass an (n, n) pattern with it.")
            m = m.expand(heads, -1, -1)
        return cls(m, trainable=trainable, symmetric=symmetric)

    @staticmethod
    def needs_pattern(cfg) -> bool:
        """A mask initialised "pattern" is built from the task's open pattern."""
        return cfg.init == "pattern"

    @classmethod
    def from_config(cls, cfg, ctx: PriorContext) -> "LearnableMask":
        """The mask of `cfg` (a PriorConfig) over the model's positions: from `ctx.pattern` ("pattern"),
        or all zero ("zero"); per head or shared; trainable or fixed."""
        heads = ctx.n_heads if cfg.per_head else None
        n = ctx.n_positions
        if cfg.init == "zero":
            return cls(torch.zeros(heads or 1, n, n), trainable=cfg.trainable, symmetric=ctx.symmetric)
        pattern = ctx.pattern
        if pattern is None or tuple(pattern.shape[-2:]) != (n, n) or pattern.dim() not in (2, 3):
            got = None if pattern is None else tuple(pattern.shape)
            raise ValueError(
                f"a mask prior needs a bool ({n}, {n}) open pattern over the model's positions (CLS "
                f"included, if any), or (K, {n}, {n}) with one per head; got {got}."
            )
        if pattern.dim() == 3:  # one pattern per head: head h reads pattern h mod K
            if not cfg.per_head:
                raise ValueError(f"the task gives {pattern.shape[0]} patterns, one per head; set "
                                 "model.prior.per_head=true for a mask of one M per head.")
            pattern, heads = pattern[torch.arange(ctx.n_heads) % pattern.shape[0]], None
        return cls.from_pattern(pattern, heads=heads, open_value=cfg.open_value, closed_value=cfg.closed_value,
                                trainable=cfg.trainable, symmetric=ctx.symmetric)

    @classmethod
    def zeros(cls, n: int, *, heads: int | None = None, trainable: bool = True) -> "LearnableMask":
        """The all-zero mask of the ablation: log σ(0) = −log 2 everywhere."""
        return cls(torch.zeros(heads or 1, n, n), trainable=trainable)

    @property
    def size(self) -> int:
        return self.logits.shape[-1]

    @property
    def heads(self) -> int:
        return self.logits.shape[-3]

    def forward(self, i: int, j: int | None = None) -> Tensor:
        """Bias log σ(M[:, :i, :j]) of shape (h, i, j); sequences shorter than n use a slice. Stacked
        logits (members, h, n, n) (`companion.batched`) give (members, h, i, j)."""
        j = i if j is None else j
        if i > self.size or j > self.size:
            raise ValueError(
                f"the mask covers {self.size} positions but the sequence needs ({i}, {j}); "
                "build the mask for the longest sequence the model will see."
            )
        logits = self.logits
        if self.symmetric:
            logits = symmetrise(logits, self.symmetric)
        return F.logsigmoid(logits[..., :i, :j])

    def bias(self, i: int, j: int | None = None) -> Tensor:
        """The protocol's additive log-prior: log σ(M) over (i, j), as `forward`."""
        return self(i, j)

    def mask_logits(self) -> Tensor:
        """The protocol's mask logits: M itself (parameter or buffer)."""
        return self.logits

    def extra_repr(self) -> str:
        sym = f", symmetric={self.symmetric}" if self.symmetric else ""
        return f"heads={self.heads}, n={self.size}, trainable={self.trainable}{sym}"


def sinusoidal_positions(n: int, d: int, *, base: float = 10000.0, dtype=torch.float32) -> Tensor:
    """PE[p, 2r] = sin(p / base^(2r/d)), PE[p, 2r+1] = cos(p / base^(2r/d)); shape (n, d)."""
    if d % 2:
        raise ValueError(f"sinusoidal positions pair sin and cos, so the width must be even (got {d}).")
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe.to(dtype)
