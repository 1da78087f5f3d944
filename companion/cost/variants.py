"""The attention variants whose cost is measured: one way each of computing causal attention with a prior.

All are causal; B batch, H heads, D head dim; every prior is trainable in fwd+bwd:
- sdpa         plain `F.scaled_dot_product_attention(q, k, v, is_causal=True)`, no prior: the speed of
               light, the denominator of every ratio;
- goat-lanes   `GoatPrior.lanes(q, k)` then the same unmasked SDPA call; building the lanes is timed and
               the gradient reaches every prior parameter (α, β, sink MLP, gain, bump, recency);
               the lanes are in the run dtype, also when that is bfloat16 or float16;
- goat-sdpa    `GoatPrior.sdpa(q, k, v)`, the package's path: as goat-lanes in float32 and float64; a
               causal prior given bfloat16 or float16 inputs works in float32 (`goat.LANES_DTYPE`) and
               returns the run dtype, so this variant prices that safe default;
- mask-sdpa    learnable float mask log σ(M), M an (L, L) `LearnableMask` shared by the heads, causal
               part folded in as −inf, passed as `attn_mask`; gradient to M;
- eager-bias   the same log σ(M) through `companion.attention.attend(..., backend="eager")`: explicit
               scores + materialised bias + softmax;
- flex         `flex_attention` with a causal BlockMask and a `score_mod` adding the captured GOAT tables
               κ_h(i − j) (an (H, 2L − 1) table) and u_h(j) (H, L): softmax(q·k/√D + K) over all D
               dims; compiled with `torch.compile` (compile time excluded from timing). On CPU torch
               2.14 supports its forward only: fwd+bwd records the error string as the data point.
               On CUDA the Triton tiles are fitted first (`flex.fit_kernel_options`: smaller tiles
               when the default needs more shared memory than the GPU has), and `kind` names them;
- eager-goat   the GOAT prior materialised as an (H, L, L) Toeplitz gather of the same tables, through
               `attend(..., backend="eager")`: the function goat-lanes computes, without the lanes;
- mask-attend  the same log σ(M) through `attend(..., causal=True, backend="sdpa")`: the package's own
               fused path. On CUDA, when the mask requires grad (fwd+bwd), `attention.sdpa_backends`
               restricts SDPA to the memory-efficient kernel (+ MATH fallback). `attend` passes the
               mask as LearnableMask returns it, (1, L, L): a 3-D mask, which CPU-flash refuses, so
               on CPU this runs MATH even in fwd, where mask-sdpa's (L, L) mask takes CPU-flash.
Optional: goat-sdpa (above), goat-chunked (goat-sdpa with `GoatPrior.head_chunk` = the torch threads: on the
CPU the lanes a few heads at a time, `companion.goat_chunked`; elsewhere the same one call), alibi-sdpa (a frozen ALiBi float mask, no gradient: the "b′" case of the notes),
mask-sdpa-math (mask-sdpa pinned to the MATH backend: the CUDA reference for EFFICIENT), mask-flex (mask-sdpa's
learnable log σ(M) captured in a flex `score_mod`, causal BlockMask: on CUDA its gradient reaches M through
the kernel's captured-buffer backward, a route for the learnable mask besides SDPA's kernels).

Each variant also knows its `reference`: the same function in float64 through the eager path, with
the prior materialised by the package's own code (`companion.cost.gate` compares the two); and its
`logits`: one head's float32 scores, the matrix its kernel takes the softmax of
(`companion.cost.subnormals` counts how many of their exponentials are subnormal).
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.attention import attend
from companion.cost.flex import describe_options, fit_kernel_options, flex_fn
from companion.goat import LANES_DTYPE, LOW_PRECISION, GoatPrior
from companion.goat_chunked import why_not_chunked
from companion.positions import ALiBi
from companion.priors import LearnableMask

DEFAULT_VARIANTS = ("sdpa", "goat-lanes", "mask-sdpa", "eager-bias", "flex", "eager-goat", "mask-attend")
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}
GOAT_RECENCY = {"value": "alibi"}  # "alibi" (the seeded init) or "zero"; set by --goat-recency


def _goat_prior(L: int, H: int, D: int, rank: int, seed: int, device) -> GoatPrior:
    g = torch.Generator().manual_seed(seed)
    prior = GoatPrior(H, D, train_len=L, rank=rank, causal=True, init="seeded", generator=g)
    with torch.no_grad():
        for name, p in prior.named_parameters():
            if name != "recency":
                p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype))
        if GOAT_RECENCY["value"] == "zero":
            prior.recency.zero_()
    return prior.to(device)


def goat_tables(prior: GoatPrior, L: int) -> tuple[Tensor, Tensor]:
    """κ_h(Δ) for Δ = −(L−1)..L−1, (H, 2L − 1) (index Δ + L − 1), and u_h(j), (H, L)."""
    dev = prior.alpha.device
    return prior.kappa(torch.arange(-(L - 1), L, device=dev)), prior.sink(torch.arange(L, device=dev))


def goat_bias(prior: GoatPrior, L: int, head: int, rows: Tensor) -> Tensor:
    """One head's GOAT prior κ_h(i − j) + u_h(j) at query rows `rows` and every key j < L, (len(rows), L)."""
    kap, u = goat_tables(prior, L)
    offset = rows.to(kap.device)[:, None] - torch.arange(L, device=kap.device)[None, :] + L - 1  # i − j + L − 1
    return kap[head][offset] + u[head][None, :]


def scores(q: Tensor, k: Tensor, head: int, rows: Tensor) -> Tensor:
    """q·kᵀ/√d (d: q's last dim, SDPA's default scale) of one head's query rows `rows` against every
    key, in float32, (B, len(rows), L)."""
    qh, kh = q[:, head, rows].float(), k[:, head].float()
    return (qh @ kh.transpose(-1, -2)) / math.sqrt(q.shape[-1])


class Variant:
    """One way of computing causal attention; `forward` is the timed work.

    `module` holds the trainable prior (or None); `reference` recomputes the same function with a
    float64 copy of that module through the eager reference path.
    """

    name = ""
    module: nn.Module | None = None

    def __init__(self, L: int, *, H: int, D: int, device, dtype, seed: int = 1, rank: int = 4,
                 compile_flex: bool = True):
        self.L, self.H, self.D, self.device, self.dtype = L, H, D, torch.device(device), dtype
        self.seed, self.rank, self.compile_flex = seed, rank, compile_flex

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        raise NotImplementedError

    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return self.forward(q, k, v)

    def reference(self, q: Tensor, k: Tensor, v: Tensor, module64: nn.Module | None) -> Tensor:
        """float64 eager attention of the same function (module64: float64 copy of `module`)."""
        return attend(q, k, v, causal=True, backend="eager")

    def logits(self, q: Tensor, k: Tensor, head: int, rows: Tensor) -> Tensor:
        """One head's scores as this variant's kernel sees them, before its softmax, at query rows
        `rows` (an index tensor) against every key: (B, len(rows), L), float32, the causal rule not
        applied (the caller's). Plain attention: q·kᵀ/√D."""
        return scores(q, k, head, rows)

    def params(self) -> dict[str, Tensor]:
        return {} if self.module is None else dict(self.module.named_parameters())

    def kind(self) -> str:
        return "sdpa"


class Sdpa(Variant):
    name = "sdpa"

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class GoatLanes(Variant):
    name = "goat-lanes"

    def __init__(self, L, **kw):
        super().__init__(L, **kw)
        self.module = _goat_prior(L, self.H, self.D, self.rank, self.seed, self.device)

    def forward(self, q, k, v):
        q2, k2 = self.module.lanes(q, k)
        return F.scaled_dot_product_attention(q2, k2, v, is_causal=True)

    def lanes_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype the lanes are built in from inputs of `dtype`: the inputs' own."""
        return dtype

    def logits(self, q, k, head, rows):
        """q′·k′ᵀ/√D of the lanes (`GoatPrior.lanes`), built in `lanes_dtype`, as the SDPA call sees them."""
        wide = self.lanes_dtype(q.dtype)
        q2, k2 = self.module.lanes(q.to(wide), k.to(wide))
        return scores(q2, k2, head, rows)

    def reference(self, q, k, v, module64):
        dc = module64.content_dim
        return attend(q[..., :dc], k[..., :dc], v, bias=module64(self.L, self.L), causal=True, backend="eager")


class GoatSdpa(GoatLanes):
    name = "goat-sdpa"

    def forward(self, q, k, v):
        return self.module.sdpa(q, k, v, check=False)

    def lanes_dtype(self, dtype):
        """`LANES_DTYPE` for 16-bit inputs (a causal prior's sink lane needs it, `GoatPrior.sdpa`), else theirs."""
        return LANES_DTYPE if self.module.causal and dtype in LOW_PRECISION else dtype


class GoatChunked(GoatSdpa):
    """goat-sdpa with the prior's `head_chunk` set to the torch threads (`companion.goat_chunked`): the
    CPU kernel a few heads at a time, keeping one chunk's lanes instead of every head's. Where that
    path does not apply (CUDA, 16-bit inputs), the prior makes its one call and `kind` says why."""

    name = "goat-chunked"

    def __init__(self, L, **kw):
        super().__init__(L, **kw)
        self.module.head_chunk = max(1, min(torch.get_num_threads(), self.H))

    def kind(self):
        probe = torch.empty(0, device=self.device, dtype=self.dtype)
        reason = why_not_chunked(self.module, probe)
        return f"sdpa (CPU flash, {self.module.head_chunk} heads at a time)" if reason is None else \
            f"sdpa (one call: {reason})"


class MaskSdpa(Variant):
    name = "mask-sdpa"

    def __init__(self, L, **kw):
        super().__init__(L, **kw)
        g = torch.Generator(device=self.device).manual_seed(self.seed)
        self.module = LearnableMask(torch.randn(L, L, generator=g, device=self.device))
        self.blocked = ~torch.ones(L, L, dtype=torch.bool, device=self.device).tril()  # causal part, built once

    def mask(self, dtype) -> Tensor:
        return self.module(self.L)[0].masked_fill(self.blocked, -math.inf).to(dtype)  # (L, L)

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask(q.dtype))

    def logits(self, q, k, head, rows):
        """q·kᵀ/√D + log σ(M), the mask as the kernel reads it (run dtype, then float32)."""
        return scores(q, k, head, rows) + self.module(self.L)[0][rows].to(q.dtype).float()

    def reference(self, q, k, v, module64):
        return attend(q, k, v, bias=module64(self.L), causal=True, backend="eager")


class MaskSdpaMath(MaskSdpa):
    name = "mask-sdpa-math"

    def forward(self, q, k, v):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([SDPBackend.MATH]):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask(q.dtype))


class EagerBias(MaskSdpa):
    name = "eager-bias"

    def __init__(self, L, **kw):
        super().__init__(L, **kw)
        self.blocked = None  # attend folds the causal rule in itself

    def forward(self, q, k, v):
        return attend(q, k, v, bias=self.module(self.L), causal=True, backend="eager", check=False)

    def kind(self):
        return "eager"


class MaskAttend(EagerBias):
    name = "mask-attend"

    def forward(self, q, k, v):
        return attend(q, k, v, bias=self.module(self.L), causal=True, backend="sdpa", check=False)

    def kind(self):
        return "sdpa"


class AlibiSdpa(Variant):
    name = "alibi-sdpa"

    def __init__(self, L, **kw):
        super().__init__(L, **kw)
        self.alibi = ALiBi(self.H).to(self.device)
        blocked = ~torch.ones(L, L, dtype=torch.bool, device=self.device).tril()
        self.frozen = self.alibi(L).masked_fill(blocked, -math.inf).to(self.dtype)  # built once: a fixed mask

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.frozen)

    def logits(self, q, k, head, rows):
        return scores(q, k, head, rows) + self.frozen[head, rows].float()

    def reference(self, q, k, v, module64):
        return attend(q, k, v, bias=self.alibi(self.L).double(), causal=True, backend="eager")


class EagerGoat(GoatLanes):
    name = "eager-goat"

    def forward(self, q, k, v):
        kap, u = goat_tables(self.module, self.L)
        # Toeplitz expansion without an (L, L) index: rev[h, t] = κ_h(L − 1 − t), windows
        # rev[h, i' : i' + L] = κ_h(L − 1 − i' − j) for row i' = L − 1 − i, then flip the rows.
        toeplitz = kap.flip(-1).unfold(-1, self.L, 1).flip(-2)  # (H, L, L): κ_h(i − j)
        bias = toeplitz + u[:, None, :]  # + key-only sink
        dc = self.module.content_dim
        return attend(q[..., :dc], k[..., :dc], v, bias=bias, causal=True, backend="eager", check=False)

    def logits(self, q, k, head, rows):
        """q_c·k_cᵀ/√d_c over the content dims, plus the materialised prior κ_h(i − j) + u_h(j)."""
        dc = self.module.content_dim
        return scores(q[..., :dc], k[..., :dc], head, rows) + goat_bias(self.module, self.L, head, rows).float()

    def kind(self):
        return "eager"


_FITTED: dict[tuple, tuple[dict, list[dict]]] = {}  # (score modifier, device, dtype, H, D) → fitted options


class Flex(Variant):
    name = "flex"
    score = "goat"  # the score modifier (`companion.cost.flex.flex_fn`)

    def __init__(self, L, **kw):
        super().__init__(L, **kw)
        self.module = self.prior_module()
        self.compiled = self.compile_flex
        self.fn = flex_fn(self.score, self.compile_flex)
        self.block_mask = _causal_block_mask(L, self.device)  # built once, as a model would cache it
        self.kernel_options, self.kernel_attempts = self._fit()

    def prior_module(self) -> nn.Module:
        return _goat_prior(self.L, self.H, self.D, self.rank, self.seed, self.device)

    def tables(self, dtype) -> tuple[Tensor, ...]:
        """The captured tensors of the score modifier, in `dtype` (≥ float32: tables stay wide)."""
        kap, u = goat_tables(self.module, self.L)
        return kap.to(dtype), u.to(dtype)

    def table_shapes(self, n: int) -> list[tuple[int, ...]]:
        """The shapes of `tables` at length n: κ (H, 2n − 1) and u (H, n)."""
        return [(self.H, 2 * n - 1), (self.H, n)]

    def _table_dtype(self, q_dtype) -> torch.dtype:
        return torch.float64 if q_dtype == torch.float64 else torch.float32

    def _fit(self) -> tuple[dict, list[dict]]:
        """Kernel options that compile on this GPU (`fit_kernel_options`), fitted once per (score
        modifier, device, dtype, H, D) on a forward + backward at min(L, 256); inductor's default
        elsewhere (CPU, or eager flex)."""
        if not (self.compile_flex and self.device.type == "cuda"):
            return {}, []
        key = (self.score, str(self.device), self.dtype, self.H, self.D)
        if key not in _FITTED:
            _FITTED[key] = fit_kernel_options(self._probe)
        return _FITTED[key]

    def _probe(self, options: dict) -> None:
        n = min(self.L, 256)
        g = torch.Generator(device=self.device).manual_seed(self.seed)
        q, k, v = (torch.randn(1, self.H, n, self.D, generator=g, device=self.device, dtype=self.dtype,
                               requires_grad=True) for _ in range(3))
        tab = self._table_dtype(self.dtype)
        tables = [torch.randn(s, generator=g, device=self.device, dtype=tab, requires_grad=True)
                  for s in self.table_shapes(n)]
        self.fn(q, k, v, *tables, _causal_block_mask(n, self.device), options or None).sum().backward()
        torch.cuda.synchronize(self.device)

    def forward(self, q, k, v):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
            return self.fn(q, k, v, *self.tables(self._table_dtype(q.dtype)), self.block_mask,
                           self.kernel_options or None)

    def reference(self, q, k, v, module64):
        return attend(q, k, v, bias=module64(self.L, self.L), causal=True, backend="eager")

    def logits(self, q, k, head, rows):
        """q·kᵀ/√D over all D dims plus the captured tables, κ_h(i − j) + u_h(j)."""
        return scores(q, k, head, rows) + goat_bias(self.module, self.L, head, rows).float()

    def kind(self):
        if not self.compiled:
            return "flex (eager, unfused)"
        return "flex (compiled)" if not self.kernel_options else f"flex (compiled, {describe_options(self.kernel_options)})"


class MaskFlex(Flex):
    """The learnable mask of mask-sdpa as a FlexAttention score modifier: b = log σ(M), (L, L), captured."""

    name = "mask-flex"
    score = "bias"

    def prior_module(self) -> nn.Module:
        g = torch.Generator(device=self.device).manual_seed(self.seed)
        return LearnableMask(torch.randn(self.L, self.L, generator=g, device=self.device))

    def tables(self, dtype) -> tuple[Tensor, ...]:
        return (self.module(self.L)[0].to(dtype),)

    def table_shapes(self, n: int) -> list[tuple[int, ...]]:
        return [(n, n)]

    def logits(self, q, k, head, rows):
        return scores(q, k, head, rows) + self.module(self.L)[0][rows].float()

    def reference(self, q, k, v, module64):
        return attend(q, k, v, bias=module64(self.L), causal=True, backend="eager")


def _causal_block_mask(L: int, device):
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None, L, L, device=device)


VARIANTS: dict[str, type[Variant]] = {
    c.name: c for c in (Sdpa, GoatLanes, GoatSdpa, GoatChunked, MaskSdpa, EagerBias, Flex, EagerGoat, MaskAttend, AlibiSdpa,
                         MaskSdpaMath, MaskFlex)
}


def _variant_cls(variant) -> type[Variant]:
    return VARIANTS[variant] if isinstance(variant, str) else variant


def build(variant, L: int, *, H: int, D: int, device, dtype, seed: int = 1, rank: int = 4,
          compile_flex: bool = True) -> Variant:
    """Instantiate a variant; prior parameters are float32 (mixed precision), float64 in a float64 run."""
    var = _variant_cls(variant)(L, H=H, D=D, device=device, dtype=dtype, seed=seed, rank=rank,
                                compile_flex=compile_flex)
    if dtype == torch.float64 and var.module is not None:
        var.module.double()
    return var
