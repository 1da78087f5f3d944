"""GOAT: a trainable attention prior that runs inside the plain SDPA kernel (arXiv 2601.15380).

Attention with a prior is softmax_j(q_c·k_c/√d_c + K_h(i, j)), with the log-prior of head h

    K_h(i, j) = κ_h(i − j) + u_h(j)
    κ_h(Δ)    = Σ_r α_hr cos(ω_r Δ) + β_hr sin(ω_r Δ),      ω_r = base^(−r/(R−1))   (relative)
    u_h(j)    = g_h·MLP(φ(j)) + b_h·[j = 0] (+ s_h·j if causal)                        (key-only sink)

φ(j) = [cos ν_m j, sin ν_m j (m < M), j/T, log(1+j)/log(1+T)], T = `train_len`; the MLP (SiLU,
4 hidden units) is shared by the heads, each head has its gain g, first-token bump b and recency
slope s. `lanes` folds K into q and k (notes A4, carve-out): of the d_head channels, the first
d_c = d_head − (2R + 1) carry content, then 2R spectral lanes, then 1 sink lane, and
`F.scaled_dot_product_attention(q', k', v, is_causal=...)` with its default scale 1/√d_head
computes exactly the attention above; v keeps all d_head channels, so no mask and no padding.

Notable choices (research notes `goat-and-kernels.md` A3–A5; [ref] = the authors' code):
- α, β are sign-free (negative weights make troughs); ω_r, ν_m are fixed, computed in float64.
- the recency slope s_h is unconstrained, not softplus(ρ) as in [ref]: init "uniform" sets s = 0,
  so the prior is exactly uniform (κ ≡ 0, u ≡ 0) and GOAT equals plain attention; [ref]'s ρ = −30
  leaves ~1e-13·j. "seeded" starts s at the ALiBi slopes, as [ref]. s·j enters only when causal
  (there it equals ALiBi's −s(i − j) up to a row constant).
- `train_len` is required: [ref] falls back to the current length, which makes u(j) change with n.
- the sink MLP is held as plain parameters (no nn.Linear), so model-wide Linear initialisers do
  not overwrite its zero output layer.
- q/k channels d_c.. of the projection are discarded (they get no gradient), as in [ref].
- a causal prior in bfloat16 or float16 builds its lanes and calls SDPA in float32 (`LANES_DTYPE`):
  the sink lane carries u(j) ∋ s·j, which grows with the position, and a 16-bit float rounds it by
  up to 2⁻⁹·|u(j)| (bf16), an error of the order of a logit at s·j ≈ 500. Against the float64 reference
  (`benchmarks/attention.py --dtype bfloat16 --variants goat-lanes,goat-sdpa --gate-len 4096`, read by
  Chapter 10), bf16 lanes fail the gate from L = 256 on with the ALiBi-seeded slopes, and this path
  passes it up to 4096. A non-causal prior has no recency term and keeps the inputs' dtype.
- `head_chunk` (off by default): on the CPU, the lanes a few heads at a time around the flash kernel
  (`companion.goat_chunked`), so the backward keeps one chunk's q′, k′ instead of every head's; the
  same output and input gradients to the last bit, the peak memory of plain SDPA.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion import kernel
from companion.attention import check_qkv, check_scale
from companion.goat_chunked import head_chunked_sdpa, why_not_chunked
from companion.positions import alibi_slopes
from companion.priors import Prior, PriorContext
from companion.readouts import option_int, parse_ints, register_readout, rounded, sample_positions, split_arg

__all__ = ["LANES_DTYPE", "LOW_PRECISION", "GoatPrior", "goat_priors", "layer_prior", "sink_profiles", "prior_readout", "sink_profile", "head_prior"]

INITS = ("uniform", "seeded")
# Causal GOAT in these dtypes computes its lanes and attention in LANES_DTYPE (module docstring).
LOW_PRECISION = (torch.bfloat16, torch.float16)
LANES_DTYPE = torch.float32


def _geometric(count: int, base: float, device=None) -> Tensor:
    """base^(−r/(count−1)), r = 0..count−1, float64: from 1 rad/token down to 1/base."""
    r = torch.arange(count, dtype=torch.float64, device=device)
    return base ** (-r / max(count - 1, 1))


class GoatPrior(Prior):
    """Spectral relative prior κ plus key-only sink u, as a bias (h, i, j) or as SDPA lanes.

    Args:
        n_heads: heads h.
        d_head: head dim of q, k and v; 2·rank + 1 of it become prior lanes (`n_lanes`).
        train_len: training sequence length T; normalises the absolute features of u.
        rank: R spectral frequencies. abs_rank: M frequencies of the sink features.
        base, abs_base: geometric bases of ω_r and ν_m.
        hidden: hidden units of the sink MLP.
        causal: add the recency slope s_h·j (use with causal attention only).
        init: "uniform" (K ≡ 0: equals plain attention) or "seeded" (α ~ N(0, 0.01²),
            MLP weights ~ N(0, init_scale²), s = ALiBi slopes).
        init_scale: std of the random sink-MLP weights.
        generator: source of the random draws (None: torch's global generator).
        head_chunk: run `sdpa` this many heads at a time through `companion.goat_chunked` (the CPU
            path whose peak memory stays near plain SDPA's; the same output and input gradients),
            where that path applies (a prior alone, CPU, float32/float64: `why_not_chunked`);
            None (default): one SDPA call over every head.
    """

    def __init__(self, n_heads: int, d_head: int, *, train_len: int, rank: int = 4, abs_rank: int = 4,
                 base: float = 1e4, abs_base: float = 1e4, hidden: int = 4, causal: bool = True,
                 init: Literal["uniform", "seeded"] = "uniform", init_scale: float = 1e-3,
                 generator: torch.Generator | None = None, head_chunk: int | None = None):
        super().__init__()
        for name, value in dict(n_heads=n_heads, train_len=train_len, rank=rank, hidden=hidden).items():
            if value < 1:
                raise ValueError(f"GoatPrior needs {name} >= 1, got {value}.")
        if abs_rank < 0:
            raise ValueError(f"GoatPrior needs abs_rank >= 0, got {abs_rank}.")
        if init not in INITS:
            raise ValueError(f"unknown GOAT init {init!r}; choose one of {INITS}.")
        self.n_lanes = 2 * rank + 1
        if d_head <= self.n_lanes:
            raise ValueError(
                f"GOAT carves 2·rank + 1 = {self.n_lanes} lanes out of the head dim, but d_head={d_head} "
                f"leaves no content channels; lower rank to at most {max((d_head - 2) // 2, 0)} or widen the heads."
            )
        self.n_heads, self.d_head, self.content_dim = n_heads, d_head, d_head - self.n_lanes
        self.train_len, self.rank, self.abs_rank, self.base, self.abs_base = train_len, rank, abs_rank, base, abs_base
        self.causal, self.init, self.init_scale = causal, init, init_scale
        if head_chunk is not None and head_chunk < 1:
            raise ValueError(f"head_chunk must be a positive number of heads or None, got {head_chunk}.")
        self.head_chunk = head_chunk
        self.alpha = nn.Parameter(torch.empty(n_heads, rank))  # cos weights (symmetric part)
        self.beta = nn.Parameter(torch.empty(n_heads, rank))  # sin weights (directional part)
        n_in = 2 * abs_rank + 2
        self.sink_w1 = nn.Parameter(torch.empty(hidden, n_in))
        self.sink_b1 = nn.Parameter(torch.empty(hidden))
        self.sink_w2 = nn.Parameter(torch.empty(hidden))
        self.sink_b2 = nn.Parameter(torch.empty(()))
        self.sink_gain = nn.Parameter(torch.empty(n_heads))
        self.sink_bump = nn.Parameter(torch.empty(n_heads))
        self.recency = nn.Parameter(torch.empty(n_heads))
        self.reset_parameters_(generator)

    @staticmethod
    def needs_pattern(cfg) -> bool:
        return False

    @classmethod
    def from_config(cls, cfg, ctx: PriorContext) -> "GoatPrior":
        """GOAT for the layer: rank `cfg.goat_rank`, init `cfg.goat_init`, training length = the
        model's positions, the attention's causality."""
        return cls(ctx.n_heads, ctx.d_head, train_len=ctx.n_positions, rank=cfg.goat_rank, base=cfg.goat_base,
                   causal=ctx.causal, init=cfg.goat_init, generator=ctx.generator)

    @torch.no_grad()
    def reset_parameters_(self, generator: torch.Generator | None = None) -> "GoatPrior":
        """Re-initialise every parameter per `self.init` (draws on the CPU, then copies)."""
        def normal(p: Tensor, std: float) -> None:
            p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64) * std)

        self.alpha.zero_()
        self.beta.zero_()
        self.sink_w2.zero_()  # zero output layer: u ≡ 0
        normal(self.sink_w1, self.init_scale)
        if self.init == "seeded":
            normal(self.alpha, 0.01)
            normal(self.sink_w2, self.init_scale)
        self.sink_b1.zero_()
        self.sink_b2.zero_()
        self.sink_gain.fill_(1.0)
        self.sink_bump.zero_()
        self.recency.copy_(alibi_slopes(self.n_heads) if self.init == "seeded" else torch.zeros(self.n_heads))
        return self

    # ------------------------------------------------------------------ seed-stacked members

    @property
    def members(self) -> int:
        """0 for a prior alone; M when seed-stacked (`companion.batched`), every parameter then
        carrying a leading member axis."""
        return self.alpha.shape[0] if self.alpha.dim() == 3 else 0

    def _params(self) -> dict[str, Tensor]:
        """The prior's own parameters by name (a prior alone)."""
        return dict(self.named_parameters(recurse=False))

    def _member_params(self) -> list[dict[str, Tensor]]:
        """Per member of a stacked prior, its parameters by name (slices of the stacked ones by
        `unbind`, whose backward only places each member's gradient: nothing is summed across members)."""
        names, tensors = zip(*self._params().items())
        return [dict(zip(names, parts)) for parts in zip(*(t.unbind(0) for t in tensors))]

    # ------------------------------------------------------------------ the prior as functions
    # Each takes the parameters `p` to use (default: the prior's own); a stacked prior calls them once
    # per member with that member's slices, so each member computes exactly what it computes alone.

    def kappa(self, delta: Tensor, p: dict[str, Tensor] | None = None) -> Tensor:
        """Relative log-prior κ_h(Δ) for offsets Δ = i − j of any shape S; returns (h, ``*S``)."""
        phase = delta.to(torch.float64)[..., None] * _geometric(self.rank, self.base, delta.device)
        return self.series(phase, p)

    def series(self, phase: Tensor, p: dict[str, Tensor] | None = None) -> Tensor:
        """Σ_r α_hr cos φ_r + β_hr sin φ_r of phase differences φ (*S, R) float64, in the parameters' dtype; (h, *S)."""
        p = self._params() if p is None else p
        alpha, beta = p["alpha"], p["beta"]
        cos, sin = phase.cos().to(alpha.dtype), phase.sin().to(alpha.dtype)  # (*S, R)
        return (cos @ alpha.T + sin @ beta.T).movedim(-1, 0)

    def phases(self, positions: Tensor) -> Tensor:
        """The spectral lanes' phases ω_r·j of tokens at `positions` (n,), (n, R) float64: the relative term
        is Σ_r α_r cos(φ_r(i) − φ_r(j)) + β_r sin(φ_r(i) − φ_r(j)) (`companion.goat2d` puts a grid here)."""
        return positions.to(torch.float64)[:, None] * _geometric(self.rank, self.base, positions.device)

    def features(self, positions: Tensor) -> Tensor:
        """Absolute features φ(j) of the sink MLP, (n, 2M + 2), float64."""
        p = positions.to(torch.float64)[:, None]
        phase = p * _geometric(self.abs_rank, self.abs_base, positions.device)
        t = float(self.train_len)
        return torch.cat([phase.cos(), phase.sin(), p / t, torch.log1p(p) / math.log1p(t)], dim=-1)

    def sink(self, positions: Tensor, p: dict[str, Tensor] | None = None) -> Tensor:
        """Key-only log-prior u_h(j) at key positions (n,) (non-negative integers); returns (h, n)."""
        p = self._params() if p is None else p
        x = self.features(positions).to(p["sink_w1"].dtype)
        shared = F.silu(x @ p["sink_w1"].T + p["sink_b1"]) @ p["sink_w2"] + p["sink_b2"]  # (n,)
        first = (positions == 0).to(shared.dtype)
        u = p["sink_gain"][:, None] * shared + p["sink_bump"][:, None] * first
        if self.causal:
            u = u + p["recency"][:, None] * positions.to(shared.dtype)
        return u

    def relative(self, i: int, j: int | None = None, p: dict[str, Tensor] | None = None) -> Tensor:
        """Toeplitz part κ_h(i − j), (h, i, j), queries 0..i−1 and keys 0..j−1."""
        j = i if j is None else j
        dev = self.alpha.device
        return self.kappa(torch.arange(i, device=dev)[:, None] - torch.arange(j, device=dev)[None], p)

    def forward(self, i: int, j: int | None = None) -> Tensor:
        """Materialised log-prior K = κ_h(i − j) + u_h(j), (h, i, j); the causal mask is not in it.
        A stacked prior (`members` = M) gives (M, h, i, j), one per member."""
        j = i if j is None else j
        if self.members:
            return torch.stack([self._bias(i, j, p) for p in self._member_params()])
        return self._bias(i, j, None)

    def _bias(self, i: int, j: int, p: dict[str, Tensor] | None) -> Tensor:
        return self.relative(i, j, p) + self.sink(torch.arange(j, device=self.alpha.device), p)[:, None, :]

    def bias(self, i: int, j: int | None = None) -> Tensor:
        """The protocol's additive log-prior K, (h, i, j) (as `forward`)."""
        return self(i, j)

    def content(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """The content channels :d_c of q and k (the rest of each head becomes prior lanes)."""
        return q[..., :self.content_dim], k[..., :self.content_dim]

    def check_attention(self, *, causal: bool) -> None:
        if causal != self.causal:
            raise ValueError(f"a GOAT prior built with causal={self.causal} cannot serve attention with "
                             f"causal={causal}; build it with the attention's causality.")

    def attend(self, q: Tensor, k: Tensor, v: Tensor, *, causal: bool, backend: str = "auto",
               return_weights: bool = False, check: bool = False, q_start: int = 0):
        """GOAT attention: the lanes through one unmasked SDPA call; the eager backend, a request for the
        weights, or small CPU maps (`companion.kernel.applies`: the small-map kernel) use the content
        channels with the materialised K instead (the paths agree to rounding).
        `check` validates as `companion.attention.attend` does (on both paths); with `q_start` the
        queries are positions q_start … q_start + i − 1 of the keys'."""
        self.check_attention(causal=causal)
        if return_weights or backend == "eager":
            return super().attend(q, k, v, causal=causal, backend="eager", return_weights=return_weights,
                                  check=check, q_start=q_start)
        if backend in ("auto", "kernel") and kernel.applies(q, k, v, None):
            # small CPU maps: the content channels and the materialised K through the small-map kernel
            # (companion.kernel), cheaper there than lanes that widen q and k for every sample
            return super().attend(q, k, v, causal=causal, backend="kernel", check=check, q_start=q_start)
        return self.sdpa(q, k, v, check=check, q_start=q_start)

    # ------------------------------------------------------------------ the prior as SDPA lanes

    def _check(self, q: Tensor, k: Tensor, positions: Tensor | None, q_start: int = 0) -> None:
        for name, t in (("q", q), ("k", k)):
            if t.dim() != 4 or t.shape[1] != self.n_heads or t.shape[-1] not in (self.d_head, self.content_dim):
                raise ValueError(
                    f"{name} has shape {tuple(t.shape)}; GOAT lanes expect (batch, {self.n_heads} heads, seq, "
                    f"{self.d_head}) (the last {self.n_lanes} channels are replaced) or content-only width "
                    f"{self.content_dim}. Reshape to (b, h, n, d) or build the prior for this head dim."
                )
        if q.shape[:2] != k.shape[:2] or q.shape[-1] != k.shape[-1]:
            raise ValueError(
                f"q {tuple(q.shape)} and k {tuple(k.shape)} differ in batch, heads or width; GOAT lanes are for "
                "self-attention with equally wide queries and keys."
            )
        if q_start < 0 or q_start + q.shape[-2] > k.shape[-2]:
            raise ValueError(
                f"q has {q.shape[-2]} positions from q_start={q_start} but k has {k.shape[-2]}: the queries "
                "must be among the keys' positions (equally long q and k, or q_start + queries <= keys)."
            )
        n = k.shape[-2]
        if positions is not None and (positions.dim() != 1 or positions.shape[0] != n):
            raise ValueError(f"positions has shape {tuple(positions.shape)}; pass one per token, shape ({n},).")
        if positions is not None and bool((positions < 0).any()):
            raise ValueError("positions must be >= 0 (the sink features use log(1 + j)); count from 0.")

    def lanes(self, q: Tensor, k: Tensor, positions: Tensor | None = None, *,
              scale: float | None = None, p: dict[str, Tensor] | None = None,
              q_start: int = 0) -> tuple[Tensor, Tensor]:
        """Fold the prior into queries and keys: returns (q', k'), each (b, h, n, d_head), with

            (q'·k') · scale = q_c·k_c/√d_c + κ_h(i − j) + u_h(j)
            q' = [q_c·s_c | Rot(ω_r i)(α_r, −β_r) / scale | 1 / scale]
            k' = [k_c     | Rot(ω_r j)(1, 0)              | u_h(j)   ]

        with s_c = 1/(√d_c · scale); the 2R spectral lanes hold the R first pair members, then the R
        second ones (cos-like | sin-like). So `F.scaled_dot_product_attention(q', k', v, is_causal=self.causal)`
        equals `attend(q_c, k_c, v, bias=self(n, n), causal=self.causal)`.

        Args:
            q, k: (b, h, n, d_head), content in channels :d_c (the rest is ignored), or (b, h, n, d_c).
            positions: token positions (n,), default 0..n−1 (shift them for a continued sequence).
            scale: the scale SDPA will apply; None = its default 1/√d_head.
            p: the parameters to use (default: the prior's own; a stacked prior passes one member's).
            q_start: the queries are the keys' positions q_start … q_start + i − 1 (i ≤ n; default:
                all of them), e.g. the rows a last layer computes.
        """
        self._check(q, k, positions, q_start)
        p = self._params() if p is None else p
        inv = self.lane_scale(scale)
        parts = self.lane_parts(k.shape[-2], q.shape[-2], positions, p=p, q_start=q_start, dtype=q.dtype,
                                device=q.device, inv=inv)
        return self.assemble(q, k, parts, inv)

    def assemble(self, q: Tensor, k: Tensor, parts: tuple[Tensor, Tensor, Tensor], inv: float) -> tuple[Tensor, Tensor]:
        """(q′, k′) from the content channels of q, k (b, h, ·, ·) and the lane parts of their h heads
        (`lane_parts`): q′ = [q_c·inv/√d_c | query lanes | inv], k′ = [k_c | key lanes | sink]. The
        one place the lanes are laid out: `lanes` and the head-chunked path (`companion.goat_chunked`,
        which passes detached parts) both call it."""
        q_rel, k_rel, u = parts
        b, h, i, _ = q.shape
        dc = self.content_dim
        q2 = torch.cat([q[..., :dc] * (inv / math.sqrt(dc)), q_rel.expand(b, -1, -1, -1),
                        q.new_full((b, h, i, 1), inv)], dim=-1)
        k2 = torch.cat([k[..., :dc], k_rel.expand(b, h, -1, -1), u[None, :, :, None].expand(b, -1, -1, 1)], dim=-1)
        return q2, k2

    def lane_scale(self, scale: float | None = None) -> float:
        """1 / the scale SDPA applies (None: its default 1/√d_head); the lanes are multiplied by it."""
        return math.sqrt(self.d_head) if scale is None else 1.0 / check_scale(scale)

    def lane_parts(self, n: int, i: int, positions: Tensor | None = None, *, p: dict[str, Tensor], q_start: int,
                   dtype: torch.dtype, device, inv: float) -> tuple[Tensor, Tensor, Tensor]:
        """What the prior puts in the lanes, before it is spread over the batch (`lanes`):
        the queries' spectral lanes Rot(ω_r i)(α_r, −β_r)·inv (h, i, 2R), the keys' Rot(ω_r j)(1, 0)
        (n, 2R) and the sink u_h(j) (h, n), for n keys and the i queries from q_start, in `dtype`.
        The queries' last lane is the constant inv and carries no parameter."""
        pos = torch.arange(n, device=device) if positions is None else positions.to(device)
        phase = self.phases(pos)
        cos, sin = phase.cos().to(dtype), phase.sin().to(dtype)  # (n, R)
        cq, sq = cos[q_start:q_start + i], sin[q_start:q_start + i]  # the queries' rows, (i, R)
        a, bt = p["alpha"].to(dtype)[:, None, :], p["beta"].to(dtype)[:, None, :]  # (h, 1, R)
        q_rel = torch.cat([a * cq + bt * sq, a * sq - bt * cq], dim=-1)  # (h, i, 2R)
        k_rel = torch.cat([cos, sin], dim=-1)  # (n, 2R)
        u = self.sink(pos, p).to(dtype)  # (h, n)
        return q_rel * inv, k_rel, u

    def sdpa(self, q: Tensor, k: Tensor, v: Tensor, positions: Tensor | None = None, *,
             check: bool = True, q_start: int = 0) -> Tensor:
        """GOAT attention through one unmasked SDPA call: out (b, h, i, e); q, k as in `lanes`.

        `check` (as `companion.attention.attend`'s): the content channels of q and k and all of v must
        be finite and of one dtype, and so must the prior's lanes (a diverged prior is named); without
        it a NaN query row comes out as NaN or 0 (the attention module's "Bad input"). With `q_start` > 0
        (queries that are the last rows of the keys' positions) a causal prior passes its rule as a
        boolean mask, since SDPA's `is_causal` aligns queries and keys at the top left. A causal prior
        given bfloat16 or float16 inputs works in `LANES_DTYPE` and returns the inputs' dtype (a 16-bit
        sink lane cannot hold s·j; module docstring); `lanes` itself keeps the dtype it is given.
        """
        if check:
            self._check(q, k, positions, q_start)
            check_qkv(*self.content(q, k), v)
        dtype = q.dtype
        if self.causal and dtype in LOW_PRECISION:
            wide = LANES_DTYPE  # inputs and parameters (the sink's MLP and slope) in float32
            return self._sdpa(q.to(wide), k.to(wide), v.to(wide), positions, check, q_start, wide).to(dtype)
        return self._sdpa(q, k, v, positions, check, q_start)

    def _sdpa(self, q: Tensor, k: Tensor, v: Tensor, positions: Tensor | None, check: bool, q_start: int,
              wide: torch.dtype | None = None) -> Tensor:
        convert = (lambda p: p) if wide is None else (lambda p: {n: t.to(wide) for n, t in p.items()})  # noqa: E731
        if self.head_chunk and wide is None and why_not_chunked(self, q) is None:
            if check:
                self._check_parts(k.shape[-2], q.shape[-2], positions, q_start, q)
            return head_chunked_sdpa(self, q, k, v, chunk=self.head_chunk, positions=positions, q_start=q_start)
        if self.members:
            # seed-stacked (member-major batch): each member's lanes from its own parameters on its own
            # samples, exactly as alone, then one SDPA call over every member's samples
            parts = [self.lanes(qm, km, positions, p=convert(p), q_start=q_start) for qm, km, p in
                     zip(q.chunk(self.members), k.chunk(self.members), self._member_params())]
            q2, k2 = torch.cat([a for a, _ in parts]), torch.cat([b for _, b in parts])
        else:
            q2, k2 = self.lanes(q, k, positions, p=convert(self._params()), q_start=q_start)
        if check:
            self._check_lanes(q2, k2)
        if self.causal and q_start:
            rule = torch.ones(q2.shape[-2], k2.shape[-2], dtype=torch.bool, device=q2.device).tril(q_start)
            return F.scaled_dot_product_attention(q2, k2, v, attn_mask=rule[None, None])
        return F.scaled_dot_product_attention(q2, k2, v, is_causal=self.causal)

    def _check_parts(self, n: int, i: int, positions: Tensor | None, q_start: int, q: Tensor) -> None:
        """`_check_lanes` for the head-chunked path, on the lanes before they are spread over the batch."""
        with torch.no_grad():
            parts = self.lane_parts(n, i, positions, p=self._params(), q_start=q_start, dtype=q.dtype,
                                    device=q.device, inv=self.lane_scale())
        self._check_lanes(*parts[::2], content=False)

    def _check_lanes(self, q2: Tensor, k2: Tensor, *, content: bool = True) -> None:
        dc = self.content_dim if content else 0
        if not (bool(torch.isfinite(q2[..., dc:]).all()) and bool(torch.isfinite(k2[..., dc:]).all())):
            bad = [n for n, p in self.named_parameters() if not bool(torch.isfinite(p).all())]
            raise ValueError(
                f"the GOAT prior's lanes are not finite (non-finite parameters: {bad or 'none; the sink overflows'}); "
                "the prior has diverged. Lower train.lr or set train.clip_norm, and retrain."
            )

    def extra_repr(self) -> str:
        return (f"heads={self.n_heads}, d_head={self.d_head} (content {self.content_dim} + lanes {self.n_lanes}), "
                f"rank={self.rank}, abs_rank={self.abs_rank}, train_len={self.train_len}, "
                f"causal={self.causal}, init={self.init!r}")


def goat_priors(model: nn.Module) -> list[GoatPrior]:
    """Every GOAT prior of `model`, in module order (one per layer; empty for a model without GOAT)."""
    return [m for m in model.modules() if isinstance(m, GoatPrior)]


@torch.no_grad()
def sink_profiles(model: nn.Module, n: int) -> Tensor:
    """u_h(j) of every GOAT prior in `model` for keys j = 0 … n − 1, (priors, heads, n) float64 on the
    CPU, recency included. Raises ValueError if the model has none."""
    priors = goat_priors(model)
    if not priors:
        raise ValueError("the model has no GOAT prior; sink profiles exist for GOAT models only.")
    return torch.stack([p.sink(torch.arange(n, device=p.alpha.device)).double().cpu() for p in priors])


def layer_prior(model: nn.Module, arg: str, readout: str, kind: type, what: str = "a GOAT prior") -> "GoatPrior":
    """The prior of layer `arg` (default 0; negative counts from the last) of `model` for readout `readout`,
    which must be a `kind` (`what`, in words); a ValueError names a bad index, a missing layer or another prior."""
    try:
        layer = int(arg) if arg else 0
    except ValueError:
        raise ValueError(f"readout {readout!r} takes a layer index (e.g. '{readout}:0'), got {arg!r}.") from None
    blocks = getattr(model, "blocks", ())
    if not -len(blocks) <= layer < len(blocks):
        raise ValueError(f"readout {readout!r}: layer {layer} does not exist in a model of {len(blocks)} layers.")
    prior = blocks[layer].attn.scores_prior
    if not isinstance(prior, kind):
        raise ValueError(f"readout {readout!r} needs {what} in layer {layer}, not {type(prior).__name__}.")
    return prior


@register_readout("goat_prior")
@torch.no_grad()
def prior_readout(model: nn.Module, task, arg: str) -> dict[str, object]:
    """The GOAT prior of layer arg (default 0; negative counts from the last) over the model's n
    positions, per head: "sink" u_h(j), j = 0 … n − 1, and "kappa" κ_h(Δ), Δ = 0 … n − 1 (both (h, n),
    in the model's precision), and "causal". On a causal prior these give back the whole log-prior on
    the visible keys, K_h(i, j) = κ_h(i − j) + u_h(j) for j ≤ i, so a record holds Figure 1 of the
    GOAT paper in 2hn numbers instead of hn²."""
    prior = layer_prior(model, arg, "goat_prior", GoatPrior)
    pos = torch.arange(model.n_positions, device=prior.alpha.device)
    return {"sink": prior.sink(pos), "kappa": prior.kappa(pos), "causal": bool(prior.causal)}


def _goat_priors(model: torch.nn.Module, what: str) -> list:
    priors = goat_priors(model)
    if not priors:
        raise ValueError(f"readout {what!r} reads GOAT priors, and the model has none; list it for GOAT runs only.")
    return priors


@register_readout("sink_profile")
def sink_profile(model: torch.nn.Module, task, arg: str) -> dict[str, Any]:
    """GOAT's key prior u_h(j) of every layer and head (`companion.goat.sink_profiles`, recency
    included) for keys j = 0 … n − 1; arg "n;points=P;tail=T" (P default 128, T default 8).

    Returns {"j": the keys drawn (`sample_positions(n, P)`, keys 0 and 1 always), "u": (layers, heads,
    len(j)) at 6 significant digits (the figure's lines), and, exact in float64 from the whole profile,
    "spike": (layers, heads) u(0) − u(1) (the first-token sink) and "rise": (layers, heads)
    u(L − 1) − u(L − 1 − L // T) (the rise over the last 1/T of the training window, L the task's
    `seq_len`)}."""
    head, opts = split_arg(arg, "readout 'sink_profile'", ("points", "tail"))
    (n,) = parse_ints(head, "readout 'sink_profile' (keys n)")
    points, tail = option_int(opts, "points", 128, "sink_profile"), option_int(opts, "tail", 8, "sink_profile")
    L = task.seq_len
    if n < max(L, 2):
        raise ValueError(f"readout 'sink_profile' reads keys up to n ≥ the training length {L}, got n = {n}.")
    _goat_priors(model, "sink_profile")
    u = sink_profiles(model, n)
    keys = sample_positions(n, points, keep=(0, 1))
    return {"j": keys, "u": rounded(u[:, :, keys], 6), "spike": u[:, :, 0] - u[:, :, 1],
            "rise": u[:, :, L - 1] - u[:, :, L - 1 - L // tail]}


@register_readout("head_prior")
def head_prior(model: torch.nn.Module, task, arg: str) -> dict[str, Any]:
    """The last GOAT prior of `model` (its last layer) at n positions, every head, as Figure 3b of the
    GOAT paper draws it; arg "n;points=P" (P default 24).

    Returns {"i": the positions drawn (`sample_positions(n, P)`, rows and columns alike), "centred":
    the log-prior K with each row centred over its visible keys (h, P, P; None above the diagonal when
    causal), "log_causal": log10 of the induced prior (row-softmax of K over the visible keys) + 1e-12
    (h, P, P), both at those rows and columns and at 4 significant digits (a heatmap's resolution: the
    whole n × n matrices would be megabytes), and "limit": max |centred| of each head over the whole
    matrix, exact (the colour scale)}."""
    head, opts = split_arg(arg, "readout 'head_prior'", ("points",))
    (n,) = parse_ints(head, "readout 'head_prior' (positions n)")
    points = option_int(opts, "points", 24, "head_prior")
    prior = _goat_priors(model, "head_prior")[-1]
    k = prior.bias(n, n).double().cpu()
    visible = torch.ones(n, n, dtype=torch.bool)
    visible = visible.tril() if prior.causal else visible
    masked = k.masked_fill(~visible, math.nan)
    centred = masked - torch.nanmean(masked, dim=-1, keepdim=True)
    causal = torch.softmax(k.masked_fill(~visible, -math.inf), dim=-1)
    idx = torch.tensor(sample_positions(n, points))
    pick = lambda t: t[:, idx][:, :, idx]  # noqa: E731
    limit = centred.abs().nan_to_num(nan=-math.inf).flatten(1).max(1).values
    return {"i": idx, "centred": rounded(pick(centred), 4), "log_causal": rounded(pick(torch.log10(causal + 1e-12)), 4),
            "limit": limit}
