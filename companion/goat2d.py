"""GOAT's prior on a ViT's square grid of patches (arXiv 2601.15380, Figure 5; research notes A3).

For patches at grid cells (y, x), row-major, the log-prior of head h is additively separable,

    K_h(i, j) = κ_h^y(y_i − y_j) + κ_h^x(x_i − x_j),
    κ_h^y(Δ)  = Σ_{r < R_y} α_hr cos(ω_r Δ) + β_hr sin(ω_r Δ)       (and κ^x with the other R_x weights)

with R_y = R − ⌊R/2⌋ frequencies on the rows and R_x = ⌊R/2⌋ on the columns, ω_r = base^(−r/(R_axis − 1)),
as the authors' `for_vit` lays them out ([cos_y, cos_x, sin_y, sin_x]). The lanes are `GoatPrior`'s with
the phases φ(j) = [y_j·ω^y | x_j·ω^x] in place of j·ω (`GoatPrior.phases`), so the same one SDPA call
computes it; the grid's side is read from the number of tokens at every call, so a model trained on a
4 × 4 grid reads an 8 × 8 one with the same parameters (the point of the source's Figure 5).

Choices, each stated where a reader meets it:
- no key-only sink: the authors' ViT gives the sink to its CLS token; a mean-pooled ViT (Zheng et al.'s,
  the book's) has none, and a sink over patches in raster order would not carry to another grid. The
  sink lane is kept at 0, so `n_lanes` is still 2R + 1.
- `base`: GOAT's 1e4 suits its 14 × 14 ImageNet grid; over a 4 × 4 grid every frequency but the first is
  flat (ω = 0.046 turns by 0.14 rad over 3 patches), so the prior could only be cos(Δ), which comes back
  open at a 6-patch offset on a larger grid. The experiment that uses it sets its own (`PriorConfig.goat_base`).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from companion.goat import GoatPrior, _geometric, layer_prior
from companion.priors import PriorContext
from companion.readouts import register_readout

__all__ = ["GoatPrior2D", "grid_side", "SINK_PARAMETERS", "grid_prior"]

SINK_PARAMETERS = ("sink_w1", "sink_b1", "sink_w2", "sink_b2", "sink_gain", "sink_bump", "recency")


def grid_side(n: int) -> int:
    """The side of a square grid of n patches; a ValueError names a count that is not a square."""
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"a 2-D GOAT prior reads a square grid of patches, got {n} tokens (a CLS token, or a "
                         "sequence?); use it on a ViT with pool='mean' and square images, or prior 'goat' for a sequence.")
    return side


class GoatPrior2D(GoatPrior):
    """GOAT's relative prior over a square grid of patches, κ^y(Δy) + κ^x(Δx) (module docstring).

    Args:
        n_heads, d_head: as `GoatPrior`; 2·rank + 1 lanes of each head carry the prior.
        rank: R frequencies in all, R − R // 2 on the rows and R // 2 on the columns (R ≥ 2).
        base: the geometric base of each axis's frequencies.
        init: "uniform" (K ≡ 0: plain attention) or "seeded" (α ~ N(0, 0.01²)).
        generator: the random draws of "seeded".
    """

    def __init__(self, n_heads: int, d_head: int, *, rank: int = 4, base: float = 1e4,
                 init: Literal["uniform", "seeded"] = "uniform", generator: torch.Generator | None = None):
        if rank < 2:
            raise ValueError(f"a 2-D GOAT prior needs rank >= 2 (at least one frequency per axis), got {rank}.")
        super().__init__(n_heads, d_head, train_len=1, rank=rank, abs_rank=0, base=base, causal=False, init=init,
                         generator=generator)
        for name in SINK_PARAMETERS:  # no sink here (module docstring): only α and β are parameters
            delattr(self, name)
        self.rows_rank, self.cols_rank = rank - rank // 2, rank // 2

    @classmethod
    def from_config(cls, cfg, ctx: PriorContext) -> "GoatPrior2D":
        """The prior of a ViT layer: rank `cfg.goat_rank`, base `cfg.goat_base`, init `cfg.goat_init`."""
        return cls(ctx.n_heads, ctx.d_head, rank=cfg.goat_rank, base=cfg.goat_base, init=cfg.goat_init,
                   generator=ctx.generator)

    @torch.no_grad()
    def reset_parameters_(self, generator: torch.Generator | None = None) -> "GoatPrior2D":
        """α = β = 0 ("uniform"), or α ~ N(0, 0.01²) ("seeded"); drawn on the CPU in float64, then copied."""
        self.alpha.zero_()
        self.beta.zero_()
        if self.init == "seeded":
            self.alpha.copy_(torch.randn(self.alpha.shape, generator=generator, dtype=torch.float64) * 0.01)
        return self

    def frequencies(self, device=None) -> tuple[Tensor, Tensor]:
        """(ω^y (R_y,), ω^x (R_x,)), float64."""
        return (_geometric(self.rows_rank, self.base, device), _geometric(self.cols_rank, self.base, device))

    def phases(self, positions: Tensor) -> Tensor:
        """[y·ω^y | x·ω^x] of patches `positions` (n,) on the square grid of all n tokens, (n, R) float64."""
        side = grid_side(positions.shape[0])
        wy, wx = self.frequencies(positions.device)
        p = positions.to(torch.float64)
        y, x = torch.div(p, side, rounding_mode="floor"), torch.remainder(p, side)
        return torch.cat([y[:, None] * wy, x[:, None] * wx], dim=-1)

    def sink(self, positions: Tensor, p: dict[str, Tensor] | None = None) -> Tensor:
        """u ≡ 0 (no sink on a mean-pooled grid), (h, n) in the parameters' dtype."""
        dtype = (self._params() if p is None else p)["alpha"].dtype
        return torch.zeros(self.n_heads, positions.shape[0], dtype=dtype, device=positions.device)

    def relative(self, i: int, j: int | None = None, p: dict[str, Tensor] | None = None) -> Tensor:
        """κ^y(Δy) + κ^x(Δx), (h, i, j), for the first i patches as queries against all j patches of the grid."""
        j = i if j is None else j
        phase = self.phases(torch.arange(j, device=self.alpha.device))
        return self.series(phase[:i, None, :] - phase[None, :, :], p)  # phase differences (i, j, R), float64

    def kappa(self, delta: Tensor, p: dict[str, Tensor] | None = None) -> Tensor:
        """κ_h(Δy, Δx) at offsets `delta` (..., 2) (row, column offsets), (h, ...)."""
        wy, wx = self.frequencies(delta.device)
        d = delta.to(torch.float64)
        return self.series(torch.cat([d[..., :1] * wy, d[..., 1:2] * wx], dim=-1), p)  # phases (..., R)

    def offsets(self, side: int) -> Tensor:
        """κ_h at every offset of a side × side grid, (h, 2·side − 1, 2·side − 1), rows Δy = −(side − 1) …
        side − 1 and columns Δx alike: the log-prior seen from any patch, relative to it (Figure 5b)."""
        r = torch.arange(-(side - 1), side, device=self.alpha.device)
        grid = torch.stack(torch.meshgrid(r, r, indexing="ij"), dim=-1)  # (2s − 1, 2s − 1, 2)
        return self.kappa(grid)

    def extra_repr(self) -> str:
        return (f"heads={self.n_heads}, d_head={self.d_head} (content {self.content_dim} + lanes {self.n_lanes}), "
                f"rank={self.rank} (rows {self.rows_rank}, columns {self.cols_rank}), base={self.base:g}, "
                f"init={self.init!r}")


@register_readout("goat_grid")
@torch.no_grad()
def grid_prior(model: torch.nn.Module, task, arg: str) -> dict[str, object]:
    """The 2-D GOAT prior of layer arg (default 0; negative counts from the last) at every offset of the
    model's grid, per head (`GoatPrior2D.offsets`, (h, 2s − 1, 2s − 1), float64): the log-prior seen from
    any patch, the source's Figure 5b."""
    prior = layer_prior(model, arg, "goat_grid", GoatPrior2D, "a 2-D GOAT prior")
    return {"offsets": prior.offsets(grid_side(model.n_positions)).double()}
