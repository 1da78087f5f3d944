"""Theorem 1 and Corollary 1 of the mask-initialisation paper (arXiv 2608.00418), in closed form.

For one query with content scores a_j and mask entries m_j, p = softmax(a + log σ(m)):

    ∂p_i/∂m_j = p_i (δ_ij − p_j) σ(−m_j),         |∂p_i/∂m_j| ≤ σ(−m_j)/4 ≤ 1/4      (Thm 1, Cor 1)

and for content scores a_j = q·k_j / √d the query and key derivatives

    ∂p_i/∂q   = p_i (k_i − Σ_j p_j k_j) / √d,     ‖∂p_i/∂q‖ ≤ 2 p_i max_j ‖k_j‖ / √d
    ∂p_i/∂k_j = p_i (δ_ij − p_j) q / √d,           ‖∂p_i/∂k_j‖ ≤ ‖q‖ / (4√d)

scale with the key and query norms. Everything here is float64 and checked against autograd and
central finite differences in the tests and in Chapter 2.

`load` and `decide` have the shape every chapter module shares (`companion.book.chapter`); the
other names in `__all__` build the chapter's tables, figures and claim readings from their parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from companion.book.chapter import Decision, Findings, Runs
from companion.book.parameters import check_parameters, one_seed
from companion.book.prose import DIFFERENCES, ROUNDOFF, below

__all__ = [
    "mask_probs", "dp_dm", "dp_dq", "dp_dk", "autograd_jacobian", "central_difference",
    "norm_sweep", "SWEEP_COLUMNS", "sweep_table", "contrast_sweep", "log_sigmoid_values", "theorem1_gaps", "qk_gaps", "ROUNDING", "gap_texts", "within_rounding",
    "corollary1_worst_ratio", "key_growth", "peak_scale", "growth_share", "saturation", "SATURATION_COLUMNS",
    "saturation_table", "grad_at", "content_sweep",
    "adam_first_step", "claim_measures", "prose_numbers", "DRAWS", "SCALES", "CONTRASTS", "SPREADS", "OPEN",
    "ENTRIES", "SEEDS", "Inputs", "load", "decide",
]

# A closed-form derivative that differs from autograd or finite differences by less than this is
# taken to agree up to rounding (finite differences at ε = 1e-6 are accurate to about 1e-10).
ROUNDING = 1e-8


def mask_probs(a: Tensor, m: Tensor) -> Tensor:
    """p = softmax(a + log σ(m)) over the last axis."""
    return torch.softmax(a + F.logsigmoid(m), dim=-1)


def dp_dm(a: Tensor, m: Tensor) -> Tensor:
    """Theorem 1: J[i, j] = ∂p_i/∂m_j = p_i (δ_ij − p_j) σ(−m_j); a, m of shape (n,)."""
    p = mask_probs(a, m)
    return (torch.diag(p) - p[:, None] * p[None, :]) * torch.sigmoid(-m)[None, :]


def dp_dq(q: Tensor, k: Tensor) -> Tensor:
    """J[i] = ∂p_i/∂q = p_i (k_i − Σ_j p_j k_j)/√d for q (d,), k (n, d); shape (n, d)."""
    d = q.shape[-1]
    p = torch.softmax(k @ q / math.sqrt(d), dim=-1)
    return p[:, None] * (k - p @ k) / math.sqrt(d)


def dp_dk(q: Tensor, k: Tensor) -> Tensor:
    """J[i, j] = ∂p_i/∂k_j = p_i (δ_ij − p_j) q/√d; shape (n, n, d)."""
    d = q.shape[-1]
    p = torch.softmax(k @ q / math.sqrt(d), dim=-1)
    return (torch.diag(p) - p[:, None] * p[None, :])[..., None] * q / math.sqrt(d)


def autograd_jacobian(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """∂fn(x)/∂x by autograd, shape fn(x).shape + x.shape."""
    return torch.autograd.functional.jacobian(fn, x)


def central_difference(fn: Callable[[Tensor], Tensor], x: Tensor, eps: float = 1e-6) -> Tensor:
    """(fn(x + εe) − fn(x − εe)) / 2ε for every coordinate e of x; same layout as autograd."""
    flat = x.reshape(-1)
    cols = []
    for idx in range(flat.numel()):
        e = torch.zeros_like(flat)
        e[idx] = eps
        cols.append((fn((flat + e).view_as(x)) - fn((flat - e).view_as(x))) / (2 * eps))
    out = torch.stack(cols, dim=-1)
    return out.reshape(*out.shape[:-1], *x.shape)


def norm_sweep(scales: list[float], *, n: int, d: int, draws: int, m: float, generator: torch.Generator) -> dict:
    """Derivative sizes as the query and key norms grow.

    For each scale c, draws `draws` queries and key sets whose rows are random directions of norm c,
    and records the largest entry of |∂p/∂m| (mask held at m everywhere), of ‖∂p_i/∂q‖ and of
    ‖∂p_i/∂k_j‖, averaged over draws, with the Corollary 1 bound σ(−m)/4 and the QK bounds
    2 max_i p_i max_j‖k_j‖/√d and ‖q‖/(4√d).
    """
    rows = []
    mm = torch.full((n,), m, dtype=torch.float64)
    for c in scales:
        acc = {"dm": 0.0, "dq": 0.0, "dk": 0.0, "bound_q": 0.0}
        for _ in range(draws):
            q = F.normalize(torch.randn(d, generator=generator, dtype=torch.float64), dim=0) * c
            k = F.normalize(torch.randn(n, d, generator=generator, dtype=torch.float64), dim=1) * c
            a = k @ q / math.sqrt(d)
            acc["dm"] += float(dp_dm(a, mm).abs().max())
            acc["dq"] += float(dp_dq(q, k).norm(dim=-1).max())
            acc["dk"] += float(dp_dk(q, k).norm(dim=-1).max())
            p = torch.softmax(a, dim=-1)
            acc["bound_q"] += float(2 * p.max() * c / math.sqrt(d))
        rows.append({
            "scale": c, "mask": acc["dm"] / draws, "query": acc["dq"] / draws, "key": acc["dk"] / draws,
            "bound_mask": 0.25 / (1 + math.exp(m)), "bound_query": acc["bound_q"] / draws,
            "bound_key": c / (4 * math.sqrt(d)),
        })
    return {k: [r[k] for r in rows] for k in rows[0]}


SWEEP_COLUMNS = {"mask": "largest |∂p/∂m|", "query": "largest ‖∂p/∂q‖", "key": "largest ‖∂p/∂k‖",
                 "bound_mask": "bound on |∂p/∂m|", "bound_query": "bound on ‖∂p/∂q‖", "bound_key": "bound on ‖∂p/∂k‖"}


def sweep_table(sweep: dict, digits: int = 4):
    """`norm_sweep` as the page shows it: one row per norm c, each derivative beside its bound."""
    table = pd.DataFrame(sweep).set_index("scale").round(digits)
    table.index.name = "query and key norm c"
    return table[["mask", "bound_mask", "query", "bound_query", "key", "bound_key"]].rename(columns=SWEEP_COLUMNS)


def contrast_sweep(contrasts: list[float], *, a: Tensor, open_: Tensor) -> dict:
    """Mask-gradient sizes for an open/closed mask at ±c, for content scores a (n,) and a bool pattern.

    Returns, per contrast c: the closed entries' total weight, the largest |∂p_i/∂m_j| over open
    keys j and over closed keys j (i ranging over all keys), and σ(−c), the factor of an open entry.
    """
    rows = []
    for c in contrasts:
        m = torch.where(open_, torch.tensor(c, dtype=torch.float64), torch.tensor(-c, dtype=torch.float64))
        p = mask_probs(a, m)
        jac = dp_dm(a, m).abs()
        rows.append({
            "contrast": c, "closed_mass": float(p[~open_].sum()),
            "grad_open": float(jac[:, open_].max()), "grad_closed": float(jac[:, ~open_].max()),
            "sigma_open": 1 / (1 + math.exp(c)),
        })
    return {k: [r[k] for r in rows] for k in rows[0]}


def log_sigmoid_values(entries: tuple[float, ...] = (10.0, 0.0, -10.0)) -> pd.Series:
    """log σ(m) in float64 for each mask entry m: the shift an entry adds to its score."""
    values = pd.Series({m: float(F.logsigmoid(torch.tensor(m, dtype=torch.float64))) for m in entries},
                       name="log σ(m)")
    values.index.name = "m"
    return values


def theorem1_gaps(draws: int, generator: torch.Generator) -> dict[str, float]:
    """Largest |closed form − autograd| and |closed form − central differences| of ∂p/∂m over `draws`
    draws of five scores a ~ N(0, 1) and five mask entries m ~ N(0, 3²), drawn from `generator`."""
    gaps = {"autograd": 0.0, "finite differences": 0.0}
    for _ in range(draws):
        a = torch.randn(5, generator=generator, dtype=torch.float64)
        m = 3 * torch.randn(5, generator=generator, dtype=torch.float64)
        closed = dp_dm(a, m)
        fn = lambda x: mask_probs(a, x)  # noqa: E731
        gaps["autograd"] = max(gaps["autograd"], float((closed - autograd_jacobian(fn, m)).abs().max()))
        gaps["finite differences"] = max(gaps["finite differences"],
                                         float((closed - central_difference(fn, m)).abs().max()))
    return gaps


def qk_gaps(generator: torch.Generator, *, n: int = 6, d: int = 8) -> dict[str, float]:
    """The query and key closed forms against autograd (and the key's against finite differences) for
    one query (d,) and n keys (n, d) ~ N(0, 1), drawn from `generator` in that order."""
    q = torch.randn(d, generator=generator, dtype=torch.float64)
    k = torch.randn(n, d, generator=generator, dtype=torch.float64)
    probs_q = lambda x: torch.softmax(k @ x / math.sqrt(d), dim=-1)  # noqa: E731
    probs_k = lambda x: torch.softmax(x @ q / math.sqrt(d), dim=-1)  # noqa: E731
    return {"∂p/∂q vs autograd": float((dp_dq(q, k) - autograd_jacobian(probs_q, q)).abs().max()),
            "∂p/∂k vs autograd": float((dp_dk(q, k) - autograd_jacobian(probs_k, k)).abs().max()),
            "∂p/∂k vs finite differences": float((dp_dk(q, k) - central_difference(probs_k, k)).abs().max())}


def gap_texts(gaps: dict[str, float]) -> dict[str, str]:
    """Each gap as the page writes it: against autograd under float64's rounding floor, against finite
    differences under theirs, as a bound (`prose.below`), so the page is the same on every processor."""
    return {name: below(v, DIFFERENCES if "finite differences" in name else ROUNDOFF) for name, v in gaps.items()}


def within_rounding(gaps: dict[str, float]) -> dict[str, bool]:
    """Whether each gap is below ROUNDING."""
    return {name: v < ROUNDING for name, v in gaps.items()}


def corollary1_worst_ratio(draws: int, generator: torch.Generator) -> float:
    """Largest |∂p_i/∂m_j| / (σ(−m_j)/4) over `draws` draws of five scores a ~ N(0, 5²) and five mask
    entries m ~ N(0, 3²): at most 1 if Corollary 1 holds."""
    worst = 0.0
    for _ in range(draws):
        a = 5 * torch.randn(5, generator=generator, dtype=torch.float64)
        m = 3 * torch.randn(5, generator=generator, dtype=torch.float64)
        worst = max(worst, float((dp_dm(a, m).abs() / (torch.sigmoid(-m) / 4)).max()))
    return worst


def key_growth(sweep: dict, *, low: float = 0.1, high: float = 3) -> float:
    """How many times the largest key derivative grows from norm `low` to norm `high` in a `norm_sweep`."""
    scales = sweep["scale"]
    return sweep["key"][scales.index(high)] / sweep["key"][scales.index(low)]


def peak_scale(sweep: dict) -> float:
    """The norm at which the largest key derivative of a `norm_sweep` peaks."""
    return sweep["scale"][int(np.argmax(sweep["key"]))]


def growth_share(sweep: dict, column: str = "key") -> float:
    """Share of a `norm_sweep`'s whole range of norms, on a log scale, over which the largest `column`
    derivative grows with the norm: 1 when it grows everywhere (as the linear bounds do), 0 when it
    never does (a derivative independent of the norms)."""
    x, y = np.log(sweep["scale"]), np.asarray(sweep[column])
    rising = sum(x[i + 1] - x[i] for i in range(len(x) - 1) if y[i + 1] > y[i])
    return float(rising / (x[-1] - x[0]))


def content_sweep(spreads: list[float], *, contrast: float, open_: Tensor, draws: int,
                  generator: torch.Generator) -> pd.DataFrame:
    """The mask's derivatives at contrast ±`contrast` as the content scores spread: for each spread σ,
    `draws` draws of scores a ~ N(0, σ²) (one per key of `open_`, from `generator` in order); per draw
    the largest |∂p_i/∂m_j| over open and over closed keys j. Columns: the largest over draws of
    each ("open, max", "closed, max"), the median over draws of the closed one ("closed, median") and
    the mean weight on closed keys. Index "spread"."""
    m = torch.where(open_, torch.tensor(contrast, dtype=torch.float64), torch.tensor(-contrast, dtype=torch.float64))
    rows = []
    for spread in spreads:
        a = spread * torch.randn(draws, open_.numel(), generator=generator, dtype=torch.float64)
        jac = torch.stack([dp_dm(row, m).abs() for row in a])  # (draws, n, n)
        closed = jac[:, :, ~open_].amax((1, 2))
        rows.append({"spread": spread, "open, max": float(jac[:, :, open_].max()), "closed, max": float(closed.max()),
                     "closed, median": float(closed.median()),
                     "closed weight": float(torch.stack([mask_probs(row, m)[~open_].sum() for row in a]).mean())})
    return pd.DataFrame(rows).set_index("spread")


def adam_first_step(grad: float, *, lr: float = 1e-3) -> float:
    """|Δθ| of torch.optim.Adam's first update (default β and ε) on a parameter whose gradient is
    `grad`: about lr whenever |grad| ≫ ε = 1e-8, however small the gradient."""
    theta = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([theta], lr=lr)
    theta.grad = torch.tensor(grad, dtype=torch.float64)
    opt.step()
    return float(theta.detach().abs())


def saturation(contrasts: list[float], *, a: Tensor, open_: Tensor) -> pd.DataFrame:
    """`contrast_sweep` as a table indexed by contrast."""
    return pd.DataFrame(contrast_sweep(contrasts, a=a, open_=open_)).set_index("contrast")


SATURATION_COLUMNS = {"closed_mass": "weight on closed keys", "grad_open": "largest |∂p/∂m|, open entries",
                      "grad_closed": "largest |∂p/∂m|, closed entries", "sigma_open": "σ(−c), an open entry's ∂ log σ/∂m"}


def saturation_table(sat: pd.DataFrame) -> pd.DataFrame:
    """`saturation` as the page shows it: named columns, three significant digits (every value is ≥ 0)."""
    table = sat.rename(columns=SATURATION_COLUMNS).map(lambda x: f"{x:.3g}")
    table.index.name = "mask contrast c"
    return table


def grad_at(sat: pd.DataFrame, contrast: float) -> float:
    """The largest mask derivative, over open and closed entries, at one contrast of `saturation`."""
    return max(sat.loc[contrast, "grad_open"], sat.loc[contrast, "grad_closed"])


def claim_measures(gaps: dict[str, float], worst: float, sweep: dict, sat: pd.DataFrame,
                   content: pd.DataFrame) -> dict[str, float]:
    """The S2-… measures: Theorem 1 against finite differences, Corollary 1's worst ratio, the share
    of the whole norm sweep over which the key derivative grows, and the largest mask derivative at
    contrast 10 over every draw of unit-spread content scores (`content`, a `content_sweep`)."""
    return {"S2-01": gaps["finite differences"], "S2-02": worst, "S2-03": round(growth_share(sweep), 3),
            "S2-04": max(content.loc[1.0, "open, max"], content.loc[1.0, "closed, max"])}


def prose_numbers(values: pd.Series, draws: int, gaps: dict[str, float], worst: float, sweep: dict,
                  sat: pd.DataFrame, content: pd.DataFrame) -> dict[str, str]:
    """Every number the chapter's text cites, by glue name, formatted as the text reads it."""
    spreads = [s for s in content.index if content.loc[s, "closed, max"] > 1e-2]
    g10 = grad_at(sat, 10)
    return {
        "ch2_open": f"{values[10.0]:.3g}",
        "ch2_closed": f"{values[-10.0]:.7f}",
        "ch2_ratio": f"{math.exp(values[-10.0] - values[10.0]):.3g}",
        "ch2_draws": str(draws),
        "ch2_gap_autograd": below(gaps["autograd"]),
        "ch2_gap_fd": below(gaps["finite differences"], DIFFERENCES),
        "ch2_worst_ratio": str(round(worst, 3)),
        "ch2_key_growth": str(round(key_growth(sweep), 1)),
        "ch2_peak_scale": str(peak_scale(sweep)),
        "ch2_grow_share": f"{growth_share(sweep):.0%}",
        "ch2_scale_min": f"{sweep['scale'][0]:g}",
        "ch2_scale_max": f"{sweep['scale'][-1]:g}",
        "ch2_key_at_max": f"{sweep['key'][-1]:.1e}",
        "ch2_grad_at_10": f"{g10:.1e}",
        "ch2_grad_at_1": f"{grad_at(sat, 1):.2f}",
        "ch2_closed_mass_10": f"{sat.loc[10, 'closed_mass']:.1e}",
        "ch2_unit_open": f"{content.loc[1.0, 'open, max']:.1e}",
        "ch2_unit_closed_max": f"{content.loc[1.0, 'closed, max']:.1e}",
        "ch2_unit_closed_median": f"{content.loc[1.0, 'closed, median']:.1e}",
        "ch2_spread_big": f"{spreads[0]:g}" if spreads else "none of the spreads shown",
        "ch2_adam_step": f"{adam_first_step(g10):.2e}",
    }


# The chapter's settings: random draws per profile, the norms of the sweep, the mask contrasts, the
# spreads of the content scores, and which of eight keys the mask opens.
DRAWS = {"ci": 200, "paper": 2000}
SCALES = (0.1, 0.2, 0.5, 1, 2, 3, 5, 10, 20, 30)
CONTRASTS = (0.5, 1, 2, 3, 5, 7, 10)
SPREADS = (0.5, 1.0, 2.0, 4.0, 8.0)
OPEN = (True, True) + (False,) * 6
ENTRIES = (10.0, 0.0, -10.0)  # the mask entries whose log σ the chapter opens with
SEEDS = (0,)  # the notebook's `seed`


@dataclass(frozen=True)
class Inputs:
    """What the chapter computes from: the settings above, the draws at its profile and the seed of
    every random draw. A reader asks another question with `dataclasses.replace(runs["inputs"], ...)`."""

    draws: int
    seed: int
    scales: tuple[float, ...] = SCALES
    contrasts: tuple[float, ...] = CONTRASTS
    spreads: tuple[float, ...] = SPREADS
    open: tuple[bool, ...] = OPEN
    entries: tuple[float, ...] = ENTRIES


def load(profile: str = "ci", seeds=None, *, jobs=None, store=None, train: bool = True) -> Runs:
    """The chapter's inputs at `profile` (block "inputs"): nothing trains, so `jobs`, `store` and `train`
    are accepted for the common interface and unused. `seeds`: None (seed 0) or one seed."""
    seed = one_seed(seeds, "Chapter 2")
    check_parameters(profile, [seed])
    return Runs(profile, [seed], {"inputs": Inputs(DRAWS[profile], seed)})


def decide(runs: Runs) -> Findings:
    """Every S2-0… claim and the numbers the text cites. The draws of Theorem 1, the query-key checks,
    Corollary 1 and the norm sweep share one generator, in that order. Parts: `values` (log σ of
    `entries`), `gaps` and `qk_gaps`, `worst`, `sweep`, `a` (one query's content scores), `open`, `sat`,
    `content`."""
    x = runs["inputs"]
    values = log_sigmoid_values(x.entries)
    g = torch.Generator().manual_seed(x.seed)
    gaps = theorem1_gaps(x.draws, g)
    qk = qk_gaps(g)
    worst = corollary1_worst_ratio(x.draws, g)
    sweep = norm_sweep(list(x.scales), n=8, d=16, draws=max(x.draws // 10, 10), m=0.0, generator=g)
    a = torch.randn(len(x.open), generator=torch.Generator().manual_seed(x.seed), dtype=torch.float64)
    open_ = torch.tensor(x.open)
    sat = saturation(list(x.contrasts), a=a, open_=open_)
    content = content_sweep(list(x.spreads), contrast=10.0, open_=open_, draws=x.draws,
                            generator=torch.Generator().manual_seed(x.seed + 1))
    d = Decision()
    d.claims(claim_measures(gaps, worst, sweep, sat, content))
    d.glue(prose_numbers(values, x.draws, gaps, worst, sweep, sat, content))
    return d.done(values=values, gaps=gaps, qk_gaps=qk, worst=worst, sweep=sweep, a=a, open=open_, sat=sat,
                  content=content)
