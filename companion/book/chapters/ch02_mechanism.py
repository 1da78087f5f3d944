"""Chapter 2, how a prior in the mask trains: Theorem 1 and Corollary 1 of the mask-initialisation paper (arXiv
2608.00418), checked in `derivatives` (closed forms against autograd and finite differences, re-exported here), and
what they imply measured on random problems: how the mask, query and key derivatives grow with the norms, how a
±c mask saturates, and Adam's first step on a mask entry. Everything is float64 and reads no run.

`load` and `decide` have the shape every chapter module shares (`companion.book.chapter`); the other names in
`__all__` build the chapter's tables, figures and claim readings from their parts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from companion.book.chapter import Decision, Findings, Runs
from companion.book.chapters.derivatives import (ROUNDING, autograd_jacobian, central_difference,
                                                corollary1_worst_ratio, dp_dk, dp_dm, dp_dq, gap_texts, mask_probs,
                                                qk_gaps, theorem1_gaps, within_rounding)
from companion.book.parameters import check_parameters, one_seed
from companion.book.prose import DIFFERENCES, below

__all__ = [
    "mask_probs", "dp_dm", "dp_dq", "dp_dk", "autograd_jacobian", "central_difference",
    "norm_sweep", "SWEEP_COLUMNS", "sweep_table", "contrast_sweep", "log_sigmoid_values", "theorem1_gaps", "qk_gaps", "ROUNDING", "gap_texts", "within_rounding",
    "corollary1_worst_ratio", "key_growth", "peak_scale", "growth_share", "saturation", "SATURATION_COLUMNS",
    "saturation_table", "grad_at", "content_sweep",
    "adam_first_step", "claim_measures", "prose_numbers", "DRAWS", "SCALES", "CONTRASTS", "SPREADS", "OPEN",
    "ENTRIES", "SEEDS", "Inputs", "load", "decide",
]


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


def load(profile: str = "ci", seeds=None, *, store=None) -> Runs:
    """The chapter's inputs at `profile` (block "inputs"): nothing is read, so `store` is accepted for the
    common interface and unused. `seeds`: None (seed 0) or one seed."""
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
