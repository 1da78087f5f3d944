"""Where S3-04 and S3-22 are decided when the char-LM control has no sink: the decisive searches of
`companion.experiments.decisive`. S3-04's tries GOAT's character models at 4 and 16 times their updates, then the
sink control (`passkey-lm`, `companion.experiments.sink_control`: passkey sequences read as a language model, whose
queries mostly have nothing to read) at 1, 4, 16 and 32 times its own; S3-22's reads the same GOAT runs there and
trains RoPE and ALiBi only at a rung where GOAT's sink holds. Each claim is decided, by its own rule, on the first rung where every GOAT seed has a
head putting half its attention on key 0. Nothing here trains: the records are `companion decisive`'s in
`results/decisive`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from companion.book.chapter import Decision
from companion.book.chapters import decisive
from companion.book.chapters.sink_mass import SINK_CURVE, drops, edge, shed_share, sink_curves, sink_heads
from companion.book.chapters.stats import Summary, summarize, welch
from companion.book.claims import crossed_lines, in_words, requirement_threshold
from companion.experiments.decisive import SEARCHES
from companion.experiments.sink_control import METHODS
from companion.book.labels import label

__all__ = ["control", "control_table", "spread", "sink_search"]

def control() -> dict | None:
    """The sink control at the rung where S3-04's search holds or, where it holds nowhere, at the last of its rungs
    with all its runs (not one that failed early): GOAT's runs there and, once S3-22's search has them at a holding
    rung, RoPE's and ALiBi's. {"factor", "steps", "holds", "sink" (the precondition's value: the weakest seed's sink
    head), "sinks" (how many seeds have one), "curves" (`sink_curves` per method), "heads" (`sink_heads`), "key"
    (per method, each seed's share of the key's digits copied)}; None before any rung of the sink control is
    complete."""
    tried, factor, records = decisive.rungs("S3-04")
    done = [r for r in tried if r["experiment"] == "passkey-lm" and r["found"] == r["total"]]
    if not done:
        return None
    row = done[-1]
    if factor is None:  # the last rung tried, GOAT's runs only
        records = decisive.rung_records("S3-04", row["factor"], "passkey-lm")
    _, at, with_baselines = decisive.rungs("S3-22")
    records = with_baselines if factor is not None and at == factor else records
    runs = {m: sorted((r for r in records if r.config.method == m), key=lambda r: r.config.seed) for m in METHODS}
    runs = {m: rs for m, rs in runs.items() if rs}
    threshold = requirement_threshold("S3-04", "goat-has-sink")
    return {"factor": row["factor"], "steps": row["steps"], "holds": row["holds"], "sink": row["value"],
            "sinks": sum(max(r.readouts[SINK_CURVE]["head_mean_p0"]) >= threshold for r in runs["goat"]),
            "curves": sink_curves(runs), "heads": sink_heads(runs),
            "key": {m: [r.metrics["test"]["span_acc"] for r in rs] for m, rs in runs.items()}}


def control_table(found: Mapping) -> pd.DataFrame:
    """Per model and run (seed) of the sink control: the sink mass in the lowest and highest ω bin, the share shed,
    the head with the most attention on key 0 with that attention (mean over queries), and the share of the key's
    digits it copies. 3 decimals."""
    rows = []
    for m, curve in found["curves"].items():
        p0, share = curve["p0"].unstack("bin"), shed_share(curve)
        for run in p0.index:
            head = found["heads"].loc[(label(m), run)]
            rows.append({"model": label(m), "seed": run, "p0, lowest ω bin": p0.loc[run].iloc[0],
                         "p0, highest ω bin": p0.loc[run].iloc[-1], "share shed": share.loc[run],
                         "sink head": int(head["head"]), "its mean p0": head["mean p0"],
                         "key digits copied": found["key"][m][run]})
    return pd.DataFrame(rows).set_index(["model", "seed"]).round(3)


def spread(found: Mapping) -> tuple[Summary, Summary | None]:
    """Over the sink control's seeds: GOAT's share shed (its t interval) and its lead over the baseline that sheds
    more on average (Welch's interval: the models differ, so seeds do not pair; None without the baselines)."""
    per_run = {m: shed_share(c).to_numpy() for m, c in found["curves"].items()}
    others = [m for m in per_run if m != "goat"]
    if not others:
        return summarize(per_run["goat"]), None
    best = max(others, key=lambda m: per_run[m].mean())
    return summarize(per_run["goat"]), welch(per_run["goat"], per_run[best])


def _trend(tried: list[dict]) -> str:
    """Where a power law through the sink control's rungs (the weakest seed's sink head at each) reaches the line."""
    need = decisive.needed_factor("S3-04", requirement_threshold("S3-04", "goat-has-sink"), experiment="passkey-lm")
    if need is None:
        return "; its rungs do not rise towards one"
    power = str(math.floor(math.log10(need))).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))
    at = f"{need:,.0f}×" if need < 1e4 else f"10{power}×"  # a flat trend puts it out of reach: its order of magnitude
    return f"; a power law through its rungs would reach half at about {at} its updates"


def _seed_heads(factor: int) -> dict[int, float]:
    """{seed: its most sink-like last-layer head's mean attention on key 0} of GOAT's stored runs on the sink control
    at `factor` times its updates."""
    return {r.config.seed: max(r.readouts[SINK_CURVE]["head_mean_p0"])
            for r in decisive.rung_records("S3-04", factor, "passkey-lm")
            if r is not None and r.config.method == "goat"}


def _early(rows: list[dict]) -> str:
    """What a rung that failed early found (`decisive.failed_early`: its groups of seeds trained weakest-first at the
    rung before, stopped at the first group where one has no sink): how many seeds, how many with a sink, the
    weakest (and its head at the last complete rung before); "" without such a rung."""
    failed = [r for r in rows if decisive.failed_early(r)]
    if not failed:
        return ""
    row, line = failed[-1], requirement_threshold("S3-04", "goat-has-sink")
    heads = _seed_heads(row["factor"])
    weakest, n = min(heads, key=heads.get), sum(v >= line for v in heads.values())
    complete = [r for r in rows if r["found"] == r["total"] and r["factor"] < row["factor"]]
    before = _seed_heads(complete[-1]["factor"]) if complete else {}
    was = f" ({before[weakest]:.2f} at {complete[-1]['factor']}×)" if weakest in before else ""
    return (f"; at {row['factor']}× ({row['steps']:,} updates) the {len(heads)} seeds of the groups weakest at the "
            f"rung before were trained first, {n} of them {'has' if n == 1 else 'have'} a sink, and seed {weakest} "
            f"gives key 0 only {heads[weakest]:.2f}{was}, so that rung fails without its other "
            f"{row['total'] - len(heads)}")


def _turnover(rows: list[dict]) -> str:
    """How the seeds moved between the sink control's last two rungs: how many grew a sink (a last-layer head with at
    least the line's share on key 0) and how many lost the one they had, with the largest loss; "" with fewer than
    two complete rungs. A trend through the weakest seed promises a budget only if the seeds rise together."""
    done = [r for r in rows if r["found"] == r["total"]]
    if len(done) < 2:
        return ""
    line = requirement_threshold("S3-04", "goat-has-sink")
    a, b = (_seed_heads(row["factor"]) for row in done[-2:])
    grew = sum(a[s] < line <= b[s] for s in a)
    lost = sorted((b[s] - a[s], a[s], b[s]) for s in a if b[s] < line <= a[s])
    was = f"{done[-2]['factor']}× to {done[-1]['factor']}×"
    if not lost:
        return f"; from {was} {grew} seed{'s' * (grew != 1)} grew a sink and none lost one"
    _, before, after = lost[0]
    largest = ", the largest loss" * (len(lost) > 1)
    return (f", but the seeds do not rise together: from {was} {grew} grew a sink and {len(lost)} lost the one "
            f"{'it' if len(lost) == 1 else 'they'} had ({before:.2f} → {after:.2f}{largest}), "
            "so that trend is no promise of a budget")


def sink_search(d: Decision, profile: str, found: Mapping | None) -> dict[str, str]:
    """Decide S3-04 (and S3-22, once RoPE and ALiBi are there) on the sink control where GOAT grows a sink (`found`:
    `control()`), by GOAT's share of sink mass shed and its lead over the larger of RoPE's and ALiBi's, and glue
    what the searches tried: "ch7_sink_search" (the weakest seed's sink head at each char-LM rung), "ch7_sc_*" (the
    sink control at the rung `control` reads: its rung, seeds with a sink, the outcome, each model's numbers; "—"
    where a model is not there). At other profiles than `ci` every glue is "—"."""
    names = ("ch7_sink_search", "ch7_sc_rung", "ch7_sc_sink", "ch7_sc_sinks", "ch7_sc_key", "ch7_sc_outcome",
             "ch7_sc_goat_interval", "ch7_sc_lead", "ch7_sc_lead_interval", "ch7_sc_seeds", "ch7_sc_seed_min",
             "ch7_sc_seed_max")
    names += tuple(f"ch7_sc_{k}_{m}" for k in ("low", "high", "share") for m in METHODS)
    if profile != "ci":
        return dict.fromkeys(names, "—")
    tried, _, _ = decisive.rungs("S3-04")
    charlm = [r for r in tried if r["experiment"] == "charlm" and r["value"] is not None]
    out = {"ch7_sink_search": " and ".join(f"{r['value']:.3f} at {r['factor']}×" for r in charlm) or "—"}
    if found is None:
        return out | {k: "—" for k in names if k not in out}
    shares, (goat, lead) = drops(found["curves"]), spread(found)
    out |= {"ch7_sc_rung": f"{found['factor']}× its updates ({found['steps']:,})", "ch7_sc_sink": f"{found['sink']:.2f}",
            "ch7_sc_sinks": f"{found['sinks']} of {goat.n}", "ch7_sc_seeds": str(goat.n),
            "ch7_sc_key": f"{min(min(v) for v in found['key'].values()):.1%}",
            "ch7_sc_goat_interval": f"[{goat.lo:+.2f}, {goat.hi:+.2f}]",
            "ch7_sc_seed_min": f"{shed_share(found['curves']['goat']).min():+.2f}",
            "ch7_sc_seed_max": f"{shed_share(found['curves']['goat']).max():+.2f}"}
    if lead is not None:
        out |= {"ch7_sc_lead": f"{lead.mean:+.2f}", "ch7_sc_lead_interval": f"[{lead.lo:+.2f}, {lead.hi:+.2f}]"}
    for m, curve in found["curves"].items():
        mean = curve.groupby("bin").mean()
        out |= {f"ch7_sc_low_{m}": f"{mean['p0'].iloc[0]:.3f}", f"ch7_sc_high_{m}": f"{mean['p0'].iloc[-1]:.3f}",
                f"ch7_sc_share_{m}": f"{shares[m]:+.0%}"}
    if not found["holds"]:
        rows = [r for r in tried if r["experiment"] == "passkey-lm"]
        rungs_ = ", ".join(f"{r['factor']}×" for r in rows)
        if rows[-1]["value"] is None or len(rows) < len(SEARCHES["S3-04"].then):
            out["ch7_sc_outcome"] = (f"the search has tried {rungs_[:rungs_.rfind(',')] if ',' in rungs_ else 'none'} "
                                     "of its rungs (`companion decisive --only S3-04` goes on), so S3-04 and S3-22 stay "
                                     "inconclusive for now")
        else:
            out["ch7_sc_outcome"] = (f"no rung tried ({rungs_} its updates) gives every seed one, so S3-04 and S3-22 "
                                     "stay inconclusive" + _early(rows) + _trend(tried) + _turnover(rows))
        return out | {k: "—" for k in names if k not in out}
    where = f"the sink control (passkey sequences read as a language model) at {found['factor']}× its updates " \
            f"({found['steps']:,}); share shed " + ", ".join(f"{label(m)} {v:+.3f}" for m, v in shares.items())
    fmt = lambda t: f"{t:+.2f}"  # noqa: E731
    measures = {"S3-04": round(shares["goat"], 3)}
    details = {"S3-04": f"{where}; GOAT over {goat.n} seeds, 95 % interval [{goat.lo:+.3f}, {goat.hi:+.3f}]"
                        + crossed_lines("S3-04", goat.lo, goat.hi, fmt)}
    if lead is not None:
        measures["S3-22"] = round(edge(shares), 3)
        details["S3-22"] = (f"{where}; GOAT's lead, 95 % interval (Welch) [{lead.lo:+.3f}, {lead.hi:+.3f}]"
                            + crossed_lines("S3-22", lead.lo, lead.hi, fmt))
    decided = d.decided_claims(measures, details=details,
                               preconditions={c: {"goat-has-sink": round(found["sink"], 3)} for c in measures})
    out["ch7_sc_outcome"] = (f"S3-04, decided there, is {in_words(decided[0])}, and S3-22 "
                             + (f"is {in_words(decided[1])}" if lead is not None else
                                "waits for RoPE and ALiBi at that rung (`companion decisive --only S3-22`)"))
    return out | {k: "—" for k in names if k not in out}
