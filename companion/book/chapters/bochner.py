"""S3-21, GOAT's Theorem 1 (Bochner) checked on the package's own prior, in float64: the relative term that
GOAT's SDPA lanes compute is a Toeplitz matrix whose offset profile lies in the span of its R frequencies
{cos ω_r Δ, sin ω_r Δ} and whose rank is at most the 2R lanes that carry it; and a bounded, translation-
equivariant prior outside that span (the mask paper's local band, a bump) cannot be carried by 2R lanes:
no rank-2R matrix comes closer to it than the Eckart–Young residual of its singular values, which is what
any SDPA prior of 2R lanes is (Q′K′ᵀ with 2R columns each). ALiBi's causal slope −m(i − j) is the exception
the theorem's boundedness excludes: rank 2, so two lanes carry it exactly, but it grows without bound.

The theorem is an "only if" over every prior, which no finite check can establish; what is checked is each
direction on instances: the package's prior meets it to rounding, and the priors outside it fail it by a
margin (the claim's null). Nothing here trains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import torch

from companion.book.prose import below
from companion.goat import GoatPrior

__all__ = ["RANKS", "LENGTHS", "DRAWS", "NULL_LANES", "OUTSIDE", "lane_relative", "toeplitz_gap", "span_residual",
           "rank_residual", "goat_checks", "outside_checks", "measure", "null_measure", "table", "numbers"]

RANKS = (2, 4, 6)  # R: GOAT's frequencies (2R lanes carry the relative term)
LENGTHS = (16, 64, 256)
DRAWS = 4  # random priors per (R, L)
NULL_LANES = 12  # the lanes of the book's GOAT models (R = 6), given to the priors outside the span
_SEED = 2601  # the generator of the random priors (GOAT's arXiv number)


def _band(delta: torch.Tensor) -> torch.Tensor:
    """The mask paper's local band as a log-prior: log σ(±10), open within 2 positions."""
    logits = torch.where(delta.abs() <= 2, 10.0, -10.0).to(torch.float64)
    return torch.nn.functional.logsigmoid(logits)


def _bump(delta: torch.Tensor) -> torch.Tensor:
    """A bounded recency bump, 3·exp(−Δ²/32)."""
    return 3.0 * torch.exp(-delta.to(torch.float64) ** 2 / 32.0)


def _alibi(delta: torch.Tensor) -> torch.Tensor:
    """ALiBi's causal slope −(i − j)/2 (unbounded)."""
    return -0.5 * delta.to(torch.float64)


# name → (κ(Δ), bounded?); each is translation-equivariant by construction (a function of Δ = i − j)
OUTSIDE: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], bool]] = {
    "local band (mask paper, ±10, width 2)": (_band, True),
    "bump 3·exp(−Δ²/32)": (_bump, True),
    "ALiBi slope −(i − j)/2, causal": (_alibi, False),
}


def _prior(rank: int, length: int, generator: torch.Generator) -> GoatPrior:
    """A GOAT prior of `rank` with every parameter drawn N(0, 1), float64."""
    prior = GoatPrior(2, 2 * rank + 3, train_len=length, rank=rank).double()
    with torch.no_grad():
        for p in prior.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64))
    return prior


def lane_relative(prior: GoatPrior, n: int) -> torch.Tensor:
    """The relative term κ_h(i − j) that the prior's SDPA lanes compute over n positions, (h, n, n): the
    lanes' scores with zero content (scale 1, so the lanes are unscaled) less the key-only sink u_h(j)."""
    zero = torch.zeros(1, prior.n_heads, n, prior.d_head, dtype=torch.float64)
    with torch.no_grad():
        q2, k2 = prior.lanes(zero, zero, scale=1.0)
        scores = (q2 @ k2.transpose(-1, -2))[0]
        return scores - prior.sink(torch.arange(n))[:, None, :].to(torch.float64)


def toeplitz_gap(m: torch.Tensor) -> float:
    """max |M[i+1, j+1] − M[i, j]| / max |M| over the heads: 0 for a translation-equivariant matrix."""
    return float((m[..., 1:, 1:] - m[..., :-1, :-1]).abs().max() / m.abs().max())


def _profile(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A Toeplitz matrix's offsets Δ = −(n−1) … n−1 and its values there, (h, 2n − 1), read off its first
    column (Δ ≥ 0) and first row (Δ < 0)."""
    n = m.shape[-1]
    delta = torch.arange(-(n - 1), n)
    values = torch.cat([m[..., 0, 1:].flip(-1), m[..., :, 0]], dim=-1)
    return delta, values


def span_residual(m: torch.Tensor, rank: int, base: float = 1e4) -> float:
    """‖κ − its least-squares fit on {cos ω_r Δ, sin ω_r Δ}‖ / ‖κ‖ over the offsets, the largest over the
    heads, with GOAT's frequencies ω_r = base^(−r/(R−1))."""
    delta, values = _profile(m)
    r = torch.arange(rank, dtype=torch.float64)
    omega = base ** (-r / max(rank - 1, 1))
    phase = delta.to(torch.float64)[:, None] * omega
    basis = torch.cat([phase.cos(), phase.sin()], dim=-1)  # (2n − 1, 2R)
    coef = torch.linalg.lstsq(basis, values.T).solution
    resid = values.T - basis @ coef
    return float((resid.norm(dim=0) / values.T.norm(dim=0)).max())


def rank_residual(m: torch.Tensor, lanes: int) -> float:
    """The Eckart–Young residual of the best rank-`lanes` matrix, √(Σ_{k > lanes} σ_k²) / ‖M‖_F, the largest
    over the heads: how close any SDPA prior of that many lanes can come to M (0 when M is one)."""
    s = torch.linalg.svdvals(m if m.dim() == 3 else m[None])
    return float(((s[:, lanes:] ** 2).sum(-1).sqrt() / (s ** 2).sum(-1).sqrt()).max())


def goat_checks(ranks: Sequence[int] = RANKS, lengths: Sequence[int] = LENGTHS, draws: int = DRAWS) -> pd.DataFrame:
    """For each R and L, the largest over `draws` random priors of the three departures of the relative term
    the lanes compute: from a Toeplitz matrix, from the span of the R frequencies, from rank 2R."""
    g = torch.Generator().manual_seed(_SEED)
    rows = []
    for rank in ranks:
        for n in lengths:
            gaps = []
            for _ in range(draws):
                m = lane_relative(_prior(rank, n, g), n)
                gaps.append((toeplitz_gap(m), span_residual(m, rank), rank_residual(m, 2 * rank)))
            toe, span, rnk = (max(col) for col in zip(*gaps))
            rows.append({"R": rank, "lanes": 2 * rank, "L": n, "Toeplitz gap": toe, "span residual": span,
                         "rank-2R residual": rnk})
    return pd.DataFrame(rows)


def outside_checks(lengths: Sequence[int] = LENGTHS, lanes: int = NULL_LANES) -> pd.DataFrame:
    """For each prior of `OUTSIDE` and length, its residual from the span of GOAT's `lanes`/2 frequencies
    and the Eckart–Young residual of `lanes` lanes (the best any SDPA prior of that many lanes does)."""
    rows = []
    for name, (kappa, bounded) in OUTSIDE.items():
        for n in lengths:
            idx = torch.arange(n)
            m = kappa(idx[:, None] - idx[None])  # the whole matrix: a causal rule masks its upper part apart
            rows.append({"prior": name, "bounded": bounded, "L": n, "lanes": lanes,
                         "span residual": span_residual(m[None], lanes // 2),
                         "rank residual": rank_residual(m[None], lanes),
                         "rank": int(torch.linalg.matrix_rank(m))})
    return pd.DataFrame(rows)


def measure(goat: pd.DataFrame) -> float:
    """S3-21: the largest departure of GOAT's lane-computed relative term from a finite trigonometric series
    carried by its 2R lanes (Toeplitz gap, span residual, rank-2R residual)."""
    return float(goat[["Toeplitz gap", "span residual", "rank-2R residual"]].to_numpy().max())


def null_measure(outside: pd.DataFrame, length: int = 64) -> float:
    """The smallest rank residual of the bounded priors outside the span at `length`: what S3-21's measure
    reads where a bounded translation-equivariant prior is not a finite trigonometric series."""
    rows = outside[outside.bounded & (outside.L == length)]
    return float(rows["rank residual"].min())


def table(goat: pd.DataFrame, outside: pd.DataFrame) -> pd.DataFrame:
    """The two checks as shown: residuals in scientific notation, those under float64's rounding floor as a bound
    (`prose.below`), one row per (prior, R, L)."""
    g = goat.assign(prior=[f"GOAT, R = {r}" for r in goat.R])
    g = g.rename(columns={"rank-2R residual": "rank residual"})[["prior", "lanes", "L", "Toeplitz gap",
                                                                  "span residual", "rank residual"]]
    o = outside.assign(**{"Toeplitz gap": 0.0})[["prior", "lanes", "L", "Toeplitz gap", "span residual",
                                                   "rank residual"]]
    out = pd.concat([g, o], ignore_index=True)
    for col in ("Toeplitz gap", "span residual", "rank residual"):
        out[col] = [below(x) for x in out[col]]  # rounding written as a bound: the same page on every processor
    return out.set_index(["prior", "L"])


def numbers(goat: pd.DataFrame, outside: pd.DataFrame) -> dict[str, str]:
    """What Chapter 7's Bochner paragraph glues."""
    bounded = outside[outside.bounded]
    band = bounded[bounded.prior.str.startswith("local band")]
    alibi = outside[~outside.bounded]
    return {
        "ch7_bochner_goat": below(measure(goat)),
        "ch7_bochner_null": f"{null_measure(outside):.2f}",
        "ch7_bochner_band_64": f"{float(band[band.L == 64]['rank residual'].iloc[0]):.2f}",
        "ch7_bochner_band_256": f"{float(band[band.L == 256]['rank residual'].iloc[0]):.2f}",
        "ch7_bochner_band_rank": f"{int(band[band.L == 256]['rank'].iloc[0])}",
        "ch7_bochner_alibi_rank": f"{int(alibi['rank'].max())}",
        "ch7_bochner_alibi_rank_residual": below(float(alibi['rank residual'].max())),
        "ch7_bochner_alibi_span": f"{float(alibi['span residual'].max()):.0e}",
        "ch7_bochner_lanes": str(NULL_LANES),
        "ch7_bochner_draws": str(DRAWS * len(RANKS) * len(LENGTHS)),
    }
