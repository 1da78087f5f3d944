"""Chapter 7, attention as transport with a prior: Propositions 2.2 and 3.1 solved by an optimiser,
Theorem 5.1 and Figure 2c measured on the trained copy-mixture models.

- the propositions: `propositions` (random problems, the optimiser against the closed forms),
  `propositions_table`, `proposition_checks`;
- the models: `load` (the `copymix` runs with their weights), `trained`, `fixed_batch`, `run_summary`;
- Theorem 5.1: `theorem` (per model and seed), `theorem_table`, `theorem_checks`;
- Figure 2c: `sink_curve`, `sink_curves`, `sink_table`;
- the verdicts and the prose: `claim_measures`, `claim_details`, `prose_numbers`.

Everything reads stored runs and their weights; nothing trains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from companion.book.claims import load_ledger
from companion.book.frames import by_method, records_frame, trained_models
from companion.book.labels import label
from companion.book.transport import attention_internals, collapse_bounds, objective, sink_vs_signal, solve_entropic
from companion.experiments.copy_mixture import METHODS
from companion.sweep import ensure_runs
from companion.tasks import make_task

__all__ = ["PROP22", "PROP31", "EQ3", "BETTER", "CLOSED_FORM_TOL", "RECOMPUTE_TOL", "load", "trained",
           "fixed_batch", "run_summary", "propositions", "propositions_table", "proposition_checks", "theorem",
           "theorem_table", "theorem_checks", "sink_curve", "sink_curves", "sink_table", "claim_measures",
           "claim_details", "prose_numbers"]

PROP22 = "Prop 2.2: max |p − softmax(s/τ)|"
PROP31 = "Prop 3.1: max |p − softmax(s/τ + log π)|"
EQ3 = "Eq. 3: max |−H − (KL(p‖U) − log L)|"
BETTER = "random points better"
CLOSED_FORM_TOL = 1e-12  # the optimiser meets a closed form to this (float64 rounding, not a claim rule)
RECOMPUTE_TOL = 1e-12  # the recomputed attention equals the forward pass to this


# ---------------------------------------------------------------- Propositions 2.2 and 3.1

def _tol(x: float) -> str:
    """A tolerance as the text writes it: 1e-9, 1e-12."""
    return f"{x:g}".replace("e-0", "e-")


def _simplex_points(count: int, rows: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """`count` × `rows` uniform points of the simplex of `length` keys (Dirichlet(1): normalised
    exponential draws), shape (count, rows, length), float64."""
    e = -torch.rand(count, rows, length, generator=generator, dtype=torch.float64).log()
    return e / e.sum(-1, keepdim=True)


def propositions(lengths: Sequence[int] = (4, 64, 1024), taus: Sequence[float] = (0.25, 1.0, 4.0), *,
                 rows: int = 32, points: int = 64, seed: int = 0) -> pd.DataFrame:
    """Per length L and temperature τ, `rows` random problems (scores s = 3·N(0, 1), log-prior
    2·N(0, 1), drawn in this order from one generator seeded `seed`): the largest gaps between the
    mirror-descent minimisers and the closed forms of Propositions 2.2 (`PROP22`) and 3.1 (`PROP31`),
    the largest gap of the identity −H(p) = KL(p‖U) − log L (`EQ3`), and the number of `points`
    random simplex points per problem with a lower objective than the minimiser (`BETTER`; drawn
    from a second generator seeded `seed` + 1). Index (L, τ)."""
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
    """`propositions` as shown: the gaps in scientific notation, one digit."""
    return eot.map(lambda v: f"{v:.1e}" if isinstance(v, float) else v)


def proposition_checks(eot: pd.DataFrame) -> dict[str, object]:
    """Whether every closed form was met to `CLOSED_FORM_TOL`, and how many random points did better."""
    return {f"closed forms met to {_tol(CLOSED_FORM_TOL)}": bool(eot[[PROP22, PROP31, EQ3]].max().max() < CLOSED_FORM_TOL),
            "random points better": int(eot[BETTER].sum())}


# ---------------------------------------------------------------- the models

def load(profile: str, seeds: Sequence[int], *, jobs: int | None = None) -> dict[str, list]:
    """The `copymix` runs with their weights: {method: [Record in seed order]}, methods in
    `companion.experiments.copy_mixture.METHODS` order."""
    return by_method(ensure_runs("copymix", profile, seeds, jobs=jobs, weights=True), METHODS)


def trained(runs: Mapping[str, Sequence]) -> dict[str, list]:
    """{method: [trained model per run]} (float32, eval mode, CPU)."""
    return {m: trained_models(records) for m, records in runs.items()}


def fixed_batch(record, n: int = 64) -> torch.Tensor:
    """The first n test inputs of the run's task: the same batch for every run of the experiment."""
    return make_task(record.config.task).sequences["test"][:n, :-1]


def run_summary(runs: Mapping[str, Sequence]) -> str:
    """How many runs, and their mean wall time."""
    frame = records_frame([r for records in runs.values() for r in records])
    return f"{len(frame)} runs; mean wall time per run {frame['wall_time'].mean():.1f} s"


# ---------------------------------------------------------------- Theorem 5.1

def theorem(runs: Mapping[str, Sequence], models: Mapping[str, Sequence], x: torch.Tensor,
            layer: int = 0) -> pd.DataFrame:
    """Theorem 5.1 on layer `layer` of every run's trained model (`models`, as `trained(runs)`) over
    the batch x: the largest gap between the recomputed and the forward-pass attention ("recomputed
    vs forward"), and `collapse_bounds`' "max violation", "tightness" and "checked".
    Index (model label, seed)."""
    out = []
    for m, ms in models.items():
        for record, model in zip(runs[m], ms):
            d = attention_internals(model, x, layer)
            z = (d["content"] + d["prior"]).masked_fill(~d["visible"], float("-inf"))
            b = collapse_bounds(d)
            out.append({"model": label(m), "seed": record.seed,
                        "recomputed vs forward": float((torch.softmax(z, -1) - d["weights"]).abs().max()),
                        "max violation": b["max_violation"], "tightness": b["max_tightness"], "checked": b["checked"]})
    return pd.DataFrame(out).set_index(["model", "seed"])


def theorem_table(thm: pd.DataFrame) -> pd.DataFrame:
    """`theorem` as shown: gaps to one significant digit, tightness to three decimals."""
    sci = lambda v: f"{v:.0e}"  # noqa: E731
    return thm.assign(**{"max violation": thm["max violation"].map(sci), "tightness": thm["tightness"].round(3),
                         "recomputed vs forward": thm["recomputed vs forward"].map(sci)})


def theorem_checks(thm: pd.DataFrame) -> dict[str, object]:
    """Whether the bound holds everywhere (to S3-03's threshold in book/claims.yml), whether the
    recomputation equals the forward pass (to `RECOMPUTE_TOL`), and how many entries were checked."""
    threshold = float(load_ledger()["S3-03"].rule["threshold"])
    return {f"bound holds everywhere (violation ≤ {_tol(threshold)})": bool(thm["max violation"].max() <= threshold),
            f"recomputation equals the forward pass (≤ {_tol(RECOMPUTE_TOL)})":
                bool(thm["recomputed vs forward"].max() <= RECOMPUTE_TOL),
            "entries checked": int(thm["checked"].sum())}


# ---------------------------------------------------------------- Figure 2c

def sink_curve(models: Sequence, x: torch.Tensor, *, bins: int = 8, layer: int = -1) -> pd.DataFrame:
    """Attention on key 0 against the content signal ω (Figure 2c), pooled over models (seeds),
    heads and queries of `layer`: ω is cut at its quantiles; per bin the mean ω, mean and quartiles
    of p0, and the count. Index "bin"."""
    omega, p0 = [], []
    for model in models:
        d = sink_vs_signal(attention_internals(model, x, layer % len(model.blocks)))
        omega.append(d["omega"])
        p0.append(d["p0"])
    omega, p0 = np.concatenate(omega), np.concatenate(p0)
    edges = np.quantile(omega, np.linspace(0, 1, bins + 1))
    idx = np.clip(np.searchsorted(edges, omega, side="right") - 1, 0, bins - 1)
    out = []
    for b in range(bins):
        sel = idx == b
        out.append({"bin": b, "omega": float(omega[sel].mean()), "p0": float(p0[sel].mean()),
                    "p0_q1": float(np.quantile(p0[sel], 0.25)), "p0_q3": float(np.quantile(p0[sel], 0.75)),
                    "n": int(sel.sum())})
    return pd.DataFrame(out).set_index("bin")


def sink_curves(models: Mapping[str, Sequence], x: torch.Tensor, **kwargs) -> dict[str, pd.DataFrame]:
    """{method: `sink_curve` of its models}."""
    return {m: sink_curve(ms, x, **kwargs) for m, ms in models.items()}


def _shed(curves: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """Per method, attention on key 0 in the lowest-ω bin minus that in the highest."""
    return {m: float(c["p0"].iloc[0] - c["p0"].iloc[-1]) for m, c in curves.items()}


def sink_table(curves: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per method (rows): p0 and ω in the lowest and the highest ω bin, three decimals."""
    return pd.DataFrame({label(m): {"p0, lowest ω bin": c["p0"].iloc[0], "p0, highest ω bin": c["p0"].iloc[-1],
                                    "ω, lowest bin": c["omega"].iloc[0], "ω, highest bin": c["omega"].iloc[-1]}
                         for m, c in curves.items()}).T.round(3)


# ---------------------------------------------------------------- verdicts and prose

def claim_measures(eot: pd.DataFrame, thm: pd.DataFrame, curves: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """S3-01 and S3-02: the largest gap to Proposition 2.2's and 3.1's closed forms; S3-03: the
    largest violation of Theorem 5.1; S3-04: GOAT's attention on key 0 in the lowest-ω bin minus
    that in the highest (3 decimals)."""
    return {"S3-01": float(eot[PROP22].max()), "S3-02": float(eot[PROP31].max()),
            "S3-03": float(thm["max violation"].max()), "S3-04": round(_shed(curves)["goat"], 3)}


def claim_details(eot: pd.DataFrame, thm: pd.DataFrame, curves: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    """What the verdict rows add: random points that did better, entries checked, every method's shed."""
    return {"S3-02": f"random simplex points better: {int(eot[BETTER].sum())}",
            "S3-03": f"{int(thm['checked'].sum()):,} (query, key, head) triples",
            "S3-04": "; ".join(f"{label(m)} {v:+.2f}" for m, v in _shed(curves).items())}


def prose_numbers(eot: pd.DataFrame, thm: pd.DataFrame, curves: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    """Every number the chapter's text cites, by glue name."""
    out = {"ch7_prop22": f"{eot[PROP22].max():.1e}", "ch7_prop31": f"{eot[PROP31].max():.1e}",
           "ch7_thm_worst": f"{thm['max violation'].max():.1e}", "ch7_thm_checked": f"{int(thm['checked'].sum()):,}",
           "ch7_thm_recompute": f"{thm['recomputed vs forward'].max():.0e}",
           "ch7_thm_tight": f"{thm['tightness'].max():.2f}"}
    for m, c in curves.items():
        out[f"ch7_p0_low_{m}"] = f"{c['p0'].iloc[0]:.2f}"
        out[f"ch7_p0_high_{m}"] = f"{c['p0'].iloc[-1]:.2f}"
    return out
