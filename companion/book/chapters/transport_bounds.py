"""Chapter 7's closed forms checked on random problems, no run read: Propositions 2.2 and 3.1 (the entropic optimiser
against its softmax solutions) and Theorem 5.4 with Definitions 5.2 and 5.3 (how far a perturbation of the values
moves the output, and the limits of the sink bound), with S3-20 and S3-23 declared."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from companion.book.chapter import Measure
from companion.book.chapters.entropic import objective, solve_entropic
from companion.book.claims import load_ledger
from companion.book.prose import below

__all__ = ["PROP22", "PROP31", "EQ3", "BETTER", "CLOSED_FORM_TOL", "tolerance_text", "propositions", "propositions_table",
           "proposition_checks", "SENS", "SENS_TIGHT", "UNIFORM", "SINK", "SINK_TIGHT", "MARGIN", "PSI_UNIFORM",
           "PSI_LOG_L", "psi_of", "sink_gap", "sensitivity", "sensitivity_table", "sensitivity_checks", "SENSITIVITY",
           "sensitivity_numbers"]


PROP22 = "Prop 2.2: max |p − softmax(s/τ)|"
PROP31 = "Prop 3.1: max |p − softmax(s/τ + log π)|"
EQ3 = r"Eq. 3: \(\max\,\lvert -H - (\mathrm{KL}(p \Vert U) - \log L)\rvert\)"
BETTER = "random points better"
CLOSED_FORM_TOL = 1e-12  # the optimiser meets a closed form to this (float64 rounding, not a claim rule)


def tolerance_text(x: float) -> str:
    """A tolerance as the text writes it: 1e-9, 1e-12."""
    return f"{x:g}".replace("e-0", "e-")


def _simplex_points(count: int, rows: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """Uniform points of the simplex (Dirichlet(1): normalised exponential draws), (count, rows, length), float64."""
    e = -torch.rand(count, rows, length, generator=generator, dtype=torch.float64).log()
    return e / e.sum(-1, keepdim=True)


def propositions(lengths: Sequence[int] = (4, 64, 1024), taus: Sequence[float] = (0.25, 1.0, 4.0), *,
                 rows: int = 32, points: int = 64, seed: int = 0) -> pd.DataFrame:
    """Per length L and temperature τ, `rows` random problems (scores s = 3·N(0, 1), log-prior 2·N(0, 1), drawn in
    this order from one generator seeded `seed`): the largest gaps between the mirror-descent minimisers and the
    closed forms of Propositions 2.2 (`PROP22`) and 3.1 (`PROP31`) and of −H(p) = KL(p‖U) − log L (`EQ3`), and how
    many of `points` random simplex points per problem (generator seeded `seed` + 1) have a lower objective than
    the minimiser (`BETTER`). Index (L, τ)."""
    g, draws = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed + 1)
    out = []
    for length in lengths:
        for tau in taus:
            s = 3 * torch.randn(rows, length, generator=g, dtype=torch.float64)
            log_pi = 2 * torch.randn(rows, length, generator=g, dtype=torch.float64)
            p_uni, p_pri = solve_entropic(s, tau=tau), solve_entropic(s, log_pi, tau)
            rand = _simplex_points(points, rows, length, draws)
            entropy = -(p_uni * p_uni.log()).sum(-1)
            kl_u = (p_uni * (p_uni.log() + np.log(length))).sum(-1)
            worse = objective(rand, s, log_pi, tau) < objective(p_pri, s, log_pi, tau) - 1e-12
            out.append({"L": length, "τ": tau,
                        PROP22: float((p_uni - torch.softmax(s / tau, -1)).abs().max()),
                        PROP31: float((p_pri - torch.softmax(s / tau + log_pi, -1)).abs().max()),
                        EQ3: float((-entropy - (kl_u - np.log(length))).abs().max()),
                        BETTER: int(worse.sum())})
    return pd.DataFrame(out).set_index(["L", "τ"])


def propositions_table(eot: pd.DataFrame) -> pd.DataFrame:
    """`propositions` as shown: gaps to one digit, under float64's rounding floor as a bound (`prose.below`: the
    same on every processor)."""
    return eot.map(lambda v: below(v) if isinstance(v, float) else v)


def proposition_checks(eot: pd.DataFrame) -> dict[str, object]:
    """Whether every closed form was met to `CLOSED_FORM_TOL`, and how many random points did better."""
    return {f"closed forms met to {tolerance_text(CLOSED_FORM_TOL)}": bool(eot[[PROP22, PROP31, EQ3]].max().max() < CLOSED_FORM_TOL),
            "random points better": int(eot[BETTER].sum())}


SENS = r"Thm 5.4: \(\max\,(\lVert\Delta o\rVert - \varepsilon\Psi)/\varepsilon\)"
SENS_TIGHT = r"Thm 5.4, aligned \(\Delta v\): \(\max\,\lvert \lVert\Delta o\rVert/(\varepsilon\Psi) - 1\rvert\)"
UNIFORM = r"uniform, \(\omega = 0\): \(\max\,\lvert\Psi - (L-1)/L\rvert\)"
SINK = r"sink prior, \(\omega = 0\): \(\max\,\Psi - (L-1)/(e^{\delta} + L-1)\)"
SINK_TIGHT = r"extremal prior: \(\max\,\lvert\Psi - (L-1)/(e^{\delta} + L-1)\rvert\)"
MARGIN = r"Def 5.2 margin \(m\): \(\max\,\Psi - (L-1)/(e^{m} + L-1)\)"
PSI_UNIFORM = "Ψ, uniform prior, ω = 0"
PSI_LOG_L = "bound at δ = ln L"


def psi_of(z: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """Definition 5.3: Ψ(C) = Σ_{k ∈ C} p_k with C every key but j* (= 1 − p_j*, summed over C so that a
    small Ψ keeps its digits), p = softmax(z) along the last axis."""
    return torch.softmax(z, -1).scatter(-1, sink[:, None], 0.0).sum(-1)


def sink_gap(z: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """Definition 5.2: the margin min_{k ≠ j*} (z_j* − z_k) of key j* in each row of z."""
    others = z.scatter(-1, sink[:, None], float("-inf"))
    return z.gather(-1, sink[:, None])[:, 0] - others.amax(-1)


def sensitivity(lengths: Sequence[int] = (4, 64, 1024), *, rows: int = 64, width: int = 16, eps: float = 0.1,
                seed: int = 0) -> pd.DataFrame:
    """Definitions 5.2–5.3 and Theorem 5.4 on random problems, float64, one generator seeded `seed`.

    Per length L, `rows` problems: scores s = 3·N(0, 1), a log-prior K = 2·N(0, 1) whose key j* (uniform) is raised
    a margin δ ~ U(0, 2 ln L) above every other key, values V = N(0, 1) of `width`, and perturbations Δv_k of random
    direction and norm ε·U(0, 1) on every key but j*. Columns: `SENS` (‖Δo‖ ≤ εΨ(C), violated when > 0),
    `SENS_TIGHT` (all Δv_k = ε·e_1, attaining it), `UNIFORM` (Ψ of the uniform prior at ω = 0 against (L−1)/L),
    `SINK` (Ψ of π itself at ω = 0 against (L−1)/(e^δ + L−1)), `SINK_TIGHT` (the prior δ on j*, 0 elsewhere, which
    attains that bound), `MARGIN` (with content, Ψ against (L−1)/(e^m + L−1), m Definition 5.2's margin on
    z = s + K), `PSI_UNIFORM` and `PSI_LOG_L` (the bound at δ = ln L). Index L."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for length in lengths:
        f64 = dict(generator=g, dtype=torch.float64)
        s = 3 * torch.randn(rows, length, **f64)
        k = 2 * torch.randn(rows, length, **f64)
        sink = torch.randint(0, length, (rows,), generator=g)
        delta = 2 * math.log(length) * torch.rand(rows, **f64)
        k = k.scatter(-1, sink[:, None], (k.scatter(-1, sink[:, None], float("-inf")).amax(-1) + delta)[:, None])
        v = torch.randn(rows, length, width, **f64)
        direction = torch.randn(rows, length, width, **f64)
        dv = eps * torch.rand(rows, length, 1, **f64) * direction / direction.norm(dim=-1, keepdim=True)
        keep = torch.ones(rows, length, 1, dtype=torch.float64).scatter(1, sink[:, None, None], 0.0)
        z = s + k
        p = torch.softmax(z, -1)[:, None]
        psi = psi_of(z, sink)
        moved = ((p @ (v + dv * keep)) - p @ v)[:, 0].norm(dim=-1)
        aligned = torch.zeros_like(v)
        aligned[..., 0] = eps
        moved_aligned = (p @ (aligned * keep))[:, 0].norm(dim=-1)  # Δo = p·ΔV: no cancellation
        bound = lambda d: (length - 1) / (d.exp() + length - 1)  # noqa: E731
        flat = torch.zeros(rows, length, dtype=torch.float64)
        extremal = flat.scatter(-1, sink[:, None], delta[:, None])
        out.append({"L": length, SENS: float(((moved - eps * psi) / eps).max()),
                    SENS_TIGHT: float((moved_aligned / (eps * psi) - 1).abs().max()),
                    UNIFORM: float((psi_of(flat, sink) - (length - 1) / length).abs().max()),
                    SINK: float((psi_of(k, sink) - bound(sink_gap(k, sink))).max()),
                    SINK_TIGHT: float((psi_of(extremal, sink) - bound(delta)).abs().max()),
                    MARGIN: float((psi - bound(sink_gap(z, sink))).max()),
                    PSI_UNIFORM: (length - 1) / length, PSI_LOG_L: (length - 1) / (2 * length - 1)})
    return pd.DataFrame(out).set_index("L")


def sensitivity_table(sens: pd.DataFrame) -> pd.DataFrame:
    """`sensitivity` as shown: gaps to one digit (`prose.below`), Ψ and the bound to three decimals."""
    gaps = [SENS, SENS_TIGHT, UNIFORM, SINK, SINK_TIGHT, MARGIN]
    return sens.assign(**{c: sens[c].map(lambda v: below(v, fmt=".0e")) for c in gaps}).round(3)


def sensitivity_checks(sens: pd.DataFrame) -> dict[str, object]:
    """Whether each bound holds to S3-20's and S3-23's thresholds (book/claims.yml) and is attained where it should."""
    ledger = load_ledger()
    t20, t23 = float(ledger["S3-20"].rule["threshold"]), float(ledger["S3-23"].rule["threshold"])
    return {rf"\(\lVert\Delta o\rVert \le \varepsilon\Psi(C)\) everywhere (to {tolerance_text(t20)})": bool(sens[SENS].max() <= t20),
            f"attained by aligned perturbations (to {tolerance_text(t20)})": bool(sens[SENS_TIGHT].max() <= t20),
            f"Ψ of the uniform prior is (L−1)/L (to {tolerance_text(t23)})": bool(sens[UNIFORM].max() <= t23),
            rf"\(\Psi \le (L-1)/(e^{{\delta}} + L-1)\) for the sink prior (to {tolerance_text(t23)})": bool(sens[SINK].max() <= t23),
            f"attained by the extremal prior (to {tolerance_text(t23)})": bool(sens[SINK_TIGHT].max() <= t23),
            rf"\(\Psi \le (L-1)/(e^{{m}} + L-1)\) with content (to {tolerance_text(t23)})": bool(sens[MARGIN].max() <= t23)}


# Over `sensitivity`. S3-20: the largest violation of ‖Δo‖ ≤ εΨ(C), in units of ε; S3-23: the largest violation of
# Theorem 5.4's limits (Ψ = (L−1)/L uniform, Ψ ≤ (L−1)/(e^δ + L−1) peaked) and of the margin form (L−1)/(e^m + L−1).
# The details say how tight the bounds are where they are attained.
SENSITIVITY = (
    Measure("S3-20", lambda sens: float(sens[SENS].max()),
            detail=lambda sens: f"aligned perturbations attain it to {below(sens[SENS_TIGHT].max(), fmt='.0e')}"),
    Measure("S3-23", lambda sens: float(max(sens[UNIFORM].max(), sens[SINK].max(), sens[MARGIN].max())),
            detail=lambda sens: f"the extremal prior attains the sink bound to {below(sens[SINK_TIGHT].max(), fmt='.0e')}"),
)


def sensitivity_numbers(sens: pd.DataFrame) -> dict[str, str]:
    """The numbers the section's text cites, by glue name."""
    lengths = list(sens.index)
    return {"ch7_sens_worst": below(sens[SENS].max(), fmt=".0e"), "ch7_sens_tight": below(sens[SENS_TIGHT].max(), fmt=".0e"),
            "ch7_limit_worst": below(max(sens[UNIFORM].max(), sens[SINK].max(), sens[MARGIN].max()), fmt=".0e"),
            "ch7_sink_tight": below(sens[SINK_TIGHT].max(), fmt=".0e"), "ch7_sens_lmax": f"{lengths[-1]:,}",
            "ch7_psi_uniform_lmax": f"{sens[PSI_UNIFORM].iloc[-1]:.3f}",
            "ch7_psi_logl_lmax": f"{sens[PSI_LOG_L].iloc[-1]:.3f}"}
