"""Fixed positional baselines: ALiBi (a bias on the scores) and RoPE (a rotation of q and k).

- `ALiBi` (Press et al., arXiv 2108.12409): bias −m_h·(i − j) with geometric per-head slopes
  m_h = 2^(−8h/H); `forward(i, j)` returns (h, i, j) like every prior in `companion.priors`.
- `RotaryEmbedding` / `apply_rotary` (Su et al., arXiv 2104.09864): rotate channel pairs of q and
  k by p·θ_k, θ_k = base^(−2k/d), so that ⟨R_m q, R_n k⟩ depends on m − n only.
- `SinusoidalPositions` (Vaswani et al. 2017): `sinusoidal_positions` (in `companion.priors`) added
  to the token stream; `SinCos2DPositions` its two-dimensional form for a square grid of patches
  (half the channels encode the row, half the column, as MAE's and DeiT III's ViTs do). All four
  answer the prior protocol of `companion.priors`.

Notable choices: ALiBi is top-left aligned like `attend(causal=True)`; above the diagonal
−m(i − j) is positive, which causal masking hides (use `symmetric=True`, −m|i − j|, without it).
RoPE uses the half-split (GPT-NeoX/HF) pairing by default, `interleaved=True` for (x_2k, x_2k+1).
Angles are computed in float64 and cast, so long positions stay accurate in float32.

Shapes: b batch, h heads, n positions, d head dim.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from companion.priors import EMBED_STD, Prior, PriorContext, sinusoidal_positions

__all__ = ["ALiBi", "alibi_slopes", "RotaryEmbedding", "MATCHED_SCALE", "SinusoidalPositions", "SinCos2DPositions",
           "apply_rotary", "rotary_angles", "sinusoidal_positions", "sincos_2d_positions"]


def alibi_slopes(n_heads: int) -> Tensor:
    """Slopes m_h, shape (n_heads,), float64.

    For H a power of two, m_h = 2^(−8h/H), h = 1..H. Otherwise, as in the ALiBi reference code,
    the slopes of the nearest lower power of two p are followed by every other slope of 2p.
    """
    if n_heads < 1:
        raise ValueError(f"ALiBi needs at least one head, got n_heads={n_heads}.")

    def geometric(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    p = 2 ** math.floor(math.log2(n_heads))
    slopes = geometric(p)
    if p != n_heads:
        slopes += geometric(2 * p)[0::2][: n_heads - p]
    return torch.tensor(slopes, dtype=torch.float64)


class ALiBi(Prior):
    """Fixed linear distance bias: bias[h, i, j] = −m_h·(i − j), or −m_h·abs(i − j) if symmetric.

    Args:
        n_heads: heads; slope m_h from `alibi_slopes`.
        symmetric: penalise distance in both directions (for bidirectional attention).
    """

    def __init__(self, n_heads: int, *, symmetric: bool = False):
        super().__init__()
        self.symmetric = symmetric
        self.register_buffer("slopes", alibi_slopes(n_heads).float(), persistent=False)

    @staticmethod
    def needs_pattern(cfg) -> bool:
        return False

    @classmethod
    def from_config(cls, cfg, ctx: PriorContext) -> "ALiBi":
        """ALiBi for the layer's heads; symmetric (−m|i − j|) unless the attention is causal."""
        return cls(ctx.n_heads, symmetric=not ctx.causal)

    @property
    def heads(self) -> int:
        return self.slopes.shape[0]

    def bias(self, i: int, j: int | None = None) -> Tensor:
        """The protocol's additive log-prior, as `forward`."""
        return self(i, j)

    def forward(self, i: int, j: int | None = None) -> Tensor:
        """Bias (h, i, j) for queries 0..i−1 and keys 0..j−1."""
        j = i if j is None else j
        dev = self.slopes.device
        dist = (torch.arange(i, device=dev)[:, None] - torch.arange(j, device=dev)[None]).to(self.slopes.dtype)
        if self.symmetric:
            dist = dist.abs()
        return -self.slopes[:, None, None] * dist  # (h, i, j)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, symmetric={self.symmetric}"


def _check_rotary_input(x: Tensor, name: str, dim: int | None = None) -> None:
    if x.dim() != 4:
        raise ValueError(
            f"{name} has shape {tuple(x.shape)}; rotary embeddings expect (batch, heads, seq, dim). "
            "Add the missing axes with unsqueeze, e.g. x[None, None] for one sequence and head."
        )
    d = x.shape[-1]
    if d % 2:
        raise ValueError(
            f"{name} has an odd head dim {d}; RoPE rotates channel pairs, so the rotated width must "
            "be even. Use an even d_head."
        )
    if dim is not None and d != dim:
        raise ValueError(
            f"{name} has head dim {d} but the RotaryEmbedding was built for dim={dim}; build it "
            f"with RotaryEmbedding({d})."
        )


def rotary_angles(positions: Tensor, dim: int, *, base: float = 10000.0) -> Tensor:
    """Angles p·θ_k, θ_k = base^(−2k/dim), shape (n, dim/2), float64. Positions may be fractional
    (position interpolation scales them by L_train/L)."""
    theta = base ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim)
    return positions.to(torch.float64)[:, None] * theta[None]


def apply_rotary(
    x: Tensor, positions: Tensor | None = None, *, base: float = 10000.0, interleaved: bool = False
) -> Tensor:
    """Rotate x (b, h, n, d) by the RoPE angles of `positions` (n,), default 0..n−1.

    Half-split pairing: (x_k, x_{k+d/2}) ↦ (x_k cos a_k − x_{k+d/2} sin a_k, x_{k+d/2} cos a_k + x_k sin a_k).
    Interleaved pairing uses (x_2k, x_2k+1) instead. Returns a tensor of the shape and dtype of x.
    """
    _check_rotary_input(x, "x")
    n, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(n, device=x.device)
    if positions.dim() != 1 or positions.shape[0] != n:
        raise ValueError(
            f"positions has shape {tuple(positions.shape)} but x has {n} positions; pass one position "
            f"per token, shape ({n},)."
        )
    ang = rotary_angles(positions.to(x.device), d, base=base)  # (n, d/2)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class RotaryEmbedding(Prior):
    """RoPE for queries and keys of head dim `dim` (no parameters).

    Args:
        dim: head dim to rotate (even).
        base: θ_k = base^(−2k/dim).
        interleaved: pair (x_2k, x_2k+1) instead of the half-split (x_k, x_{k+d/2}).

    Attribute `interpolate` (0 = off): a training length T; an input of n > T positions is then
    read at positions p·(T − 1)/(n − 1) (position interpolation, Chen et al. 2023), so no angle
    exceeds those seen in training. An evaluation-time switch: it changes no parameter.
    """

    interpolates = True
    interpolate: int = 0
    per_layer = True

    @classmethod
    def from_config(cls, kind: str, ctx: PriorContext) -> "RotaryEmbedding":
        """RoPE over the layer's head width."""
        return cls(ctx.d_head)

    def __init__(self, dim: int, *, base: float = 10000.0, interleaved: bool = False):
        super().__init__()
        if dim < 2 or dim % 2:
            raise ValueError(
                f"RoPE rotates channel pairs, so dim must be even and >= 2 (got {dim}); use an even d_head."
            )
        self.dim, self.base, self.interleaved = dim, base, interleaved

    def forward(self, q: Tensor, k: Tensor, positions: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """(q, k) each (b, h, n, dim), rotated by the angles of `positions` (n,), default 0..n−1."""
        _check_rotary_input(q, "q", self.dim)
        _check_rotary_input(k, "k", self.dim)
        if q.shape[-2] != k.shape[-2] and positions is not None:
            raise ValueError(
                f"q has {q.shape[-2]} positions and k has {k.shape[-2]}; one `positions` tensor "
                "serves both only when they are equally long. Rotate each with apply_rotary."
            )
        n = q.shape[-2]
        if positions is None and self.interpolate and n > self.interpolate:
            positions = torch.arange(n, dtype=torch.float64, device=q.device) * ((self.interpolate - 1) / (n - 1))
        kw = dict(base=self.base, interleaved=self.interleaved)
        return apply_rotary(q, positions, **kw), apply_rotary(k, positions, **kw)

    def rotate(self, q: Tensor, k: Tensor, q_start: int = 0) -> tuple[Tensor, Tensor]:
        """The protocol's rotation: `forward(q, k)` at positions 0..n−1; with `q_start` (or fewer
        queries than keys) the keys are at 0..n−1 and the queries at q_start … q_start + i − 1 of them
        (interpolated, when on, over the keys' n)."""
        if q_start == 0 and q.shape[-2] == k.shape[-2]:
            return self(q, k)
        n, i = k.shape[-2], q.shape[-2]
        if q_start < 0 or q_start + i > n:
            raise ValueError(f"queries at positions {q_start} … {q_start + i - 1} are not among the keys' "
                             f"0 … {n - 1}; pass q_start with q_start + queries <= keys.")
        if self.interpolate and n > self.interpolate:
            positions = torch.arange(n, dtype=torch.float64, device=k.device) * ((self.interpolate - 1) / (n - 1))
        else:
            positions = torch.arange(n, device=k.device)
        kw = dict(base=self.base, interleaved=self.interleaved)
        _check_rotary_input(q, "q", self.dim)
        _check_rotary_input(k, "k", self.dim)
        return apply_rotary(q, positions[q_start:q_start + i], **kw), apply_rotary(k, positions, **kw)

    def extra_repr(self) -> str:
        pi = f", interpolate={self.interpolate}" if self.interpolate else ""
        return f"dim={self.dim}, base={self.base:g}, interleaved={self.interleaved}{pi}"


# "sinusoidal-matched": the encoding scaled so that its entries' root mean square, 1/√2 unscaled, equals the
# standard deviation EMBED_STD that the model's token and learned position embeddings start from: fixed
# positions on the scale learned ones start at, where the unscaled encoding outweighs a token's embedding
# about 35 to 1.
MATCHED_SCALE = EMBED_STD * math.sqrt(2)


class SinusoidalPositions(Prior):
    """Fixed sinusoidal absolute positions added to the token stream (no parameters), times `scale`
    (1 for "sinusoidal", `MATCHED_SCALE` for "sinusoidal-matched")."""

    def __init__(self, scale: float = 1.0):
        super().__init__()
        self.scale = scale

    @classmethod
    def from_config(cls, kind: str, ctx: PriorContext) -> "SinusoidalPositions":
        return cls(MATCHED_SCALE if kind == "sinusoidal-matched" else 1.0)

    def embed(self, h: Tensor) -> Tensor:
        """h (b, n, d) + scale · PE (n, d)."""
        return h + self.scale * sinusoidal_positions(h.shape[-2], h.shape[-1], dtype=h.dtype).to(h.device)

    def extra_repr(self) -> str:
        return "" if self.scale == 1.0 else f"scale={self.scale:g}"


def sincos_2d_positions(side: int, d: int, *, base: float = 10000.0, dtype=torch.float32) -> Tensor:
    """The 2-D sinusoidal encoding of a side × side grid read row by row, shape (side², d): channels
    0 … d/2 − 1 are `sinusoidal_positions` of the row, d/2 … d − 1 those of the column, so each axis
    gets d/4 frequencies (He et al. 2022's MAE; Beyer et al. 2022). The width must be a multiple of 4."""
    if d % 4:
        raise ValueError(f"2-D sinusoidal positions give each axis sin and cos pairs, so the width must be a "
                         f"multiple of 4 (got {d}).")
    axis = sinusoidal_positions(side, d // 2, base=base, dtype=torch.float64)
    rows = axis.repeat_interleave(side, dim=0)  # patch p = r·side + c reads row r
    cols = axis.repeat(side, 1)  # … and column c
    return torch.cat([rows, cols], dim=-1).to(dtype)


class SinCos2DPositions(Prior):
    """Fixed 2-D sinusoidal positions of a square grid of patches added to the token stream (no
    parameters). A model with a CLS token or a sequence whose length is not a square has no grid to
    read: a ValueError says so."""

    @classmethod
    def from_config(cls, kind: str, ctx: PriorContext) -> "SinCos2DPositions":
        return cls()

    def embed(self, h: Tensor) -> Tensor:
        """h (b, n, d) + PE (n, d), n = side² patches in row-major order."""
        n = h.shape[-2]
        side = math.isqrt(n)
        if side * side != n:
            raise ValueError(f"2-D sinusoidal positions need a square grid of patches, got {n} tokens (a CLS "
                             "token, or a sequence?); use them on a ViT with pool='mean', or positions "
                             "'sinusoidal' for a sequence.")
        return h + sincos_2d_positions(side, h.shape[-1], dtype=h.dtype).to(h.device)
