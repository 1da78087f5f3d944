"""Chapter 7, attention as transport with a prior: Propositions 2.2 and 3.1 solved by an optimiser, Theorem 5.4
checked on random problems, Theorem 5.1 and Figure 2c measured on the trained copy-mixture models, and Figure 2c
also on Chapter 9's char-LM models, where key 0 carries no task information and the sink claims are decided, and on
the sink control of their decisive searches (`sink_search`; the curves themselves are `sink_mass`).
`load` and `decide` have the shape every chapter module shares (`companion.book.chapter`); the closed forms that read
no run (the propositions, Theorem 5.4) are `transport_bounds`, re-exported here with the rest of what the notebook
reads.

Theorem 5.1 and Figure 2c are measured at the end of each run on the first `companion.transport.PROBE` test inputs
and stored in its record (readouts `BOUNDS` and `SINK_CURVE`): nothing here trains and no model is rebuilt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.chapters import bochner
from companion.book.chapters.sink_mass import (SINK_CURVE, drops, edge, matched_curve, mean_curve, pooled_shed,
                                                shed, shed_share, sink_curve, sink_curves, sink_heads)
from companion.book.chapters import sink_search as search
from companion.book.chapters.sink_search import control_table
from companion.book.claims import load_ledger
from companion.book.chapters.frames import by_method, readout, run_summary
from companion.book.labels import label
from companion.book.missing import gather
from companion.book.parameters import check_parameters
from companion.book.prose import below
from companion.book.chapters.transport_bounds import (BETTER, CLOSED_FORM_TOL, EQ3, MARGIN, PROP22, PROP31,
                                                      PSI_LOG_L, PSI_UNIFORM, SENS, SENS_TIGHT, SENSITIVITY, SINK,
                                                      SINK_TIGHT, UNIFORM, proposition_checks, propositions,
                                                      propositions_table, sensitivity, sensitivity_checks,
                                                      sensitivity_numbers, sensitivity_table, tolerance_text)
from companion.experiments.copy_mixture import METHODS
from companion.reading import read_runs

__all__ = ["SEEDS", "CONTROL_SEEDS", "BOUNDS", "SINK_CURVE", "PROP22", "PROP31", "EQ3", "BETTER", "CLOSED_FORM_TOL",
           "RECOMPUTE_TOL", "load", "run_summary", "propositions", "propositions_table", "proposition_checks", "theorem",
           "theorem_table", "theorem_checks", "SENS", "SENS_TIGHT", "UNIFORM", "SINK", "SINK_TIGHT", "MARGIN",
           "PSI_UNIFORM", "PSI_LOG_L", "sensitivity", "sensitivity_table", "sensitivity_checks", "SENSITIVITY",
           "BOCHNER", "sensitivity_numbers", "control_table", "matched_curve", "sink_curve", "sink_curves",
           "mean_curve", "shed", "shed_share", "sink_heads", "pooled_shed", "sink_table", "CLAIMS",
           "prose_numbers", "decide"]

SEEDS = (0, 1, 2)  # the chapter's seeds: what `load` reads when the notebook's `seeds` is None
CONTROL_SEEDS = (0, 1)  # and of the char-LM control (Chapter 9's runs)
BOUNDS = "collapse_bounds"  # the readout of Theorem 5.1 on the first layer (`companion.transport`)

RECOMPUTE_TOL = 1e-12  # the recomputed attention equals the forward pass to this


# ---------------------------------------------------------------- Propositions 2.2 and 3.1


# ---------------------------------------------------------------- Definitions 5.2, 5.3 and Theorem 5.4


# Theorem 1 (Bochner), over {"goat": `bochner.goat_checks`, "outside": `bochner.outside_checks`}.
BOCHNER = (Measure("S3-21", lambda a: bochner.measure(a["goat"]),
                   detail=lambda a: f"a bounded prior outside the span misses {bochner.NULL_LANES} lanes by at least "
                                    f"{bochner.null_measure(a['outside']):.2f} at L = 64"),)


# ---------------------------------------------------------------- the models

def load(profile: str, seeds: Sequence[int] | None = None, *, control_seeds: Sequence[int] | None = None,
         store=None) -> Runs:
    """Two blocks, each {method: [Record in seed order]} in `METHODS` order: "copymix" at `seeds` (None: `SEEDS`),
    and "control" at `control_seeds` (None: `CONTROL_SEEDS`), Chapter 9's `charlm` runs of GOAT (the authors'
    start), RoPE and ALiBi. A window of running text starts anywhere, so its first character says no more about the
    next than any other does: a sink there is structural, as on C4. `store` as in `companion.reading.read_runs`;
    missing runs are counted over both blocks (`gather`)."""
    seeds = list(SEEDS if seeds is None else seeds)
    control_seeds = list(CONTROL_SEEDS if control_seeds is None else control_seeds)
    check_parameters(profile, seeds)
    check_parameters(profile, control_seeds)
    copymix, control = gather(
        lambda: by_method(read_runs("copymix", profile, seeds, store=store), METHODS),
        lambda: by_method(read_runs("charlm", profile, control_seeds, methods=list(METHODS), store=store), METHODS))
    return Runs(profile, seeds, {"copymix": copymix, "control": control})


# ---------------------------------------------------------------- Theorem 5.1

def theorem(runs: Mapping[str, Sequence]) -> pd.DataFrame:
    """Theorem 5.1 on every run's first layer (`BOUNDS` readout): "recomputed vs forward" (largest gap between the
    recomputed and forward-pass attention), and `collapse_bounds`' "max violation", "tightness", "checked".
    Index (model label, seed)."""
    out = []
    for m, records in runs.items():
        for record in records:
            b = readout(record, BOUNDS)
            out.append({"model": label(m), "seed": record.seed, "recomputed vs forward": b["recomputed_vs_forward"],
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
    return {f"bound holds everywhere (violation ≤ {tolerance_text(threshold)})": bool(thm["max violation"].max() <= threshold),
            f"recomputation equals the forward pass (≤ {tolerance_text(RECOMPUTE_TOL)})":
                bool(thm["recomputed vs forward"].max() <= RECOMPUTE_TOL),
            "entries checked": int(thm["checked"].sum())}


# ---------------------------------------------------------------- Figure 2c

def sink_table(curves: Mapping[str, pd.DataFrame], control: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per task and method: sink mass in the lowest and highest ω bin, drop and share shed (run means, 3 decimals)."""
    rows = {}
    for task, cs in (("copy-mixture", curves), ("char-LM control", control)):
        for m, c in cs.items():
            mc = mean_curve(c)
            rows[(task, label(m))] = {"p0, lowest ω bin": mc["p0"].iloc[0], "p0, highest ω bin": mc["p0"].iloc[-1],
                                      "drop": float(shed(c).mean()), "share shed": float(shed_share(c).mean())}
    return pd.DataFrame(rows).T.rename_axis(["task", "model"]).round(3)


# ---------------------------------------------------------------- verdicts and prose

def _shed(a: dict) -> str:
    """What the sink rows add: every method's share shed on the char-LM control (where the sink claims are decided)
    and on copy-mixture and, with "heads" (`sink_heads` of the copy-mixture models), the first-token head its GOAT
    builds."""
    shares = lambda cs: ", ".join(f"{label(m)} {v:+.3f}" for m, v in drops(cs).items())  # noqa: E731
    both = f"share of sink mass shed, char-LM (decides): {shares(a['control'])}; copy-mixture: {shares(a['curves'])}"
    if a.get("heads") is not None:
        both += (f"; copy-mixture's GOAT puts {a['heads'].loc[label('goat'), 'mean p0'].min():.2f} of one head's "
                 "attention on key 0, a token it copies")
    return both


# S3-04 and S3-22 need a sink to shed: the smallest over GOAT's runs of its sink head's "mean p0" (`sink_heads` of the
# char-LM control, "control_heads"; 3 decimals).
_SINK = {"goat-has-sink": lambda a: round(float(a["control_heads"].loc[label("goat"), "mean p0"].min()), 3)}

# Over {"eot": `propositions`, "thm": `theorem`, "curves" / "control": `sink_curves` of copy-mixture / the char-LM
# control (key 0 carries no task information there), "heads" / "control_heads": their `sink_heads`}. S3-01, S3-02:
# the largest gap to Proposition 2.2's and 3.1's closed forms; S3-03: the largest violation of Theorem 5.1; S3-04:
# GOAT's `shed_share` on the control (mean over runs); S3-22: GOAT's share shed minus the larger of RoPE's and
# ALiBi's (3 decimals).
CLAIMS = (
    Measure("S3-01", lambda a: float(a["eot"][PROP22].max())),
    Measure("S3-02", lambda a: float(a["eot"][PROP31].max()),
            detail=lambda a: f"random simplex points better: {int(a['eot'][BETTER].sum())}"),
    Measure("S3-03", lambda a: float(a["thm"]["max violation"].max()),
            detail=lambda a: f"{int(a['thm']['checked'].sum()):,} (query, key, head) triples"),
    Measure("S3-04", lambda a: round(drops(a["control"])["goat"], 3), _SINK, _shed),
    Measure("S3-22", lambda a: round(edge(drops(a["control"])), 3), _SINK, _shed),
)


def prose_numbers(eot: pd.DataFrame, thm: pd.DataFrame, curves: Mapping[str, pd.DataFrame],
                  control: Mapping[str, pd.DataFrame], heads: pd.DataFrame, pooled: float,
                  control_heads: pd.DataFrame | None = None) -> dict[str, str]:
    """Every number the text cites, by glue name; `heads`, `control_heads`: `sink_heads` of copy-mixture and of the
    char-LM control; `pooled`: GOAT's `pooled_shed`."""
    out = {"ch7_prop22": below(eot[PROP22].max()), "ch7_prop31": below(eot[PROP31].max()),
           "ch7_thm_worst": f"{thm['max violation'].max():.1e}", "ch7_thm_checked": f"{int(thm['checked'].sum()):,}",
           "ch7_thm_recompute": f"{thm['recomputed vs forward'].max():.0e}",
           "ch7_thm_tight": f"{thm['tightness'].max():.2f}", "ch7_pooled_goat": f"{pooled:.2f}"}
    for prefix, cs in (("ch7", curves), ("ch7_ctl", control)):
        for m, c in cs.items():
            mc = mean_curve(c)
            out[f"{prefix}_p0_low_{m}"] = f"{mc['p0'].iloc[0]:.3f}"
            out[f"{prefix}_p0_high_{m}"] = f"{mc['p0'].iloc[-1]:.3f}"
            out[f"{prefix}_drop_{m}"] = f"{float(shed(c).mean()):+.3f}"
            out[f"{prefix}_share_{m}"] = f"{float(shed_share(c).mean()):+.0%}"
    goat = heads.loc[label("goat")]
    out["ch7_sinkhead_low"] = f"{goat['p0, lowest ω bin'].mean():.2f}"
    out["ch7_sinkhead_high"] = f"{goat['p0, highest ω bin'].mean():.2f}"
    out["ch7_sinkhead_min"] = f"{goat['mean p0'].min():.2f}"
    if control_heads is not None:
        out["ch7_ctl_sinkhead"] = f"{control_heads.loc[label('goat'), 'mean p0'].max():.3f}"
    return out


def decide(runs: Runs) -> Findings:
    """Every claim in verdict-table order (S3-01 … S3-04, S3-22, then S3-20, S3-23, S3-21) and the numbers the prose
    cites (the propositions, the sensitivity bound and Theorem 1 need no runs: random problems, fixed seeds). Parts:
    `eot`, `thm`, `curves`, `control` (`sink_curves` of copy-mixture and the char-LM control), `heads`,
    `control_heads` (their `sink_heads`), `sens`, `bochner` and `outside` (`companion.book.chapters.bochner`)."""
    copymix, control_runs = runs["copymix"], runs["control"]
    eot = propositions()
    thm = theorem(copymix)
    curves, control = sink_curves(copymix), sink_curves(control_runs)
    heads, control_heads = sink_heads(copymix), sink_heads(control_runs)
    d = Decision()
    d.measure(CLAIMS, {"eot": eot, "thm": thm, "curves": curves, "control": control, "heads": heads,
                       "control_heads": control_heads})
    d.glue(prose_numbers(eot, thm, curves, control, heads, pooled_shed(copymix["goat"]), control_heads))
    sink_control = search.control() if runs.profile == "ci" else None  # where GOAT grows a sink (the decisive searches)
    d.glue(search.sink_search(d, runs.profile, sink_control))
    sens = sensitivity()
    d.measure(SENSITIVITY, sens)
    d.glue(sensitivity_numbers(sens))
    goat, outside = bochner.goat_checks(), bochner.outside_checks()
    d.measure(BOCHNER, {"goat": goat, "outside": outside})
    d.glue(bochner.numbers(goat, outside))
    return d.done(eot=eot, thm=thm, curves=curves, control=control, heads=heads, control_heads=control_heads,
                  sink_control=sink_control, sens=sens, bochner=goat, outside=outside)
