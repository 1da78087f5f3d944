"""Chapter 9's Figure 2b (S3-11 and S3-12): GOAT's learned key prior u(j) read back from the char-LM runs, its spike on
the first token (seeded start) and its rise over the last keys (uniform start)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapter import Measure
from companion.book.chapters.frames import readout
from companion.book.chapters.length_readings import GOAT_READINGS, RISE_NATS, SPIKE_NATS
from companion.book.labels import label
from companion.positions import alibi_slopes

__all__ = ["goat_profiles", "key_prior_lines", "sink_structure", "structure_table", "SINKS", "sink_numbers"]


def goat_profiles(runs: Mapping[str, Sequence], spec: str) -> dict[str, dict[int, dict]]:
    """{GOAT reading: {seed: key prior}} (readout `spec`, `companion.goat.sink_profile`), arrays "j", "u" (layers,
    heads, keys) and the exact "spike" and "rise" (layers, heads)."""
    return {m: {rec.seed: {k: np.asarray(v, dtype=float) for k, v in readout(rec, spec).items()} for rec in runs[m]}
            for m in GOAT_READINGS}


def key_prior_lines(profiles: Mapping[str, Mapping[int, Mapping]]) -> pd.DataFrame:
    """Figure 2b's lines for each GOAT reading's first seed, long form: reading (label), layer, head ("head h"), j, u,
    line: "trained", and for the seeded GOAT "seeded start" (ALiBi's slope of the head times j)."""
    frames = []
    for method, by_seed in profiles.items():
        p = by_seed[min(by_seed)]
        j, u = p["j"], p["u"]
        layers, heads, _ = u.shape
        slopes = alibi_slopes(heads).double().numpy()
        for layer in range(layers):
            for h in range(heads):
                lines = [("trained", u[layer, h])]
                if method == "goat":
                    lines.append(("seeded start", slopes[h] * j))
                frames += [pd.DataFrame({"reading": label(method), "layer": layer, "head": f"head {h}",
                                         "j": j.astype(int), "u": v, "line": what}) for what, v in lines]
    return pd.concat(frames, ignore_index=True)


def sink_structure(profiles: Mapping[str, Mapping[int, Mapping]]) -> pd.DataFrame:
    """Per GOAT reading and seed, over layers and heads: "spike", the largest max(u(0) − u(1), 0), and "rise", the
    largest rise of u over the window's last L/8 keys (L/8 is the experiment's `SINK_TAIL`)."""
    rows = [{"reading": m, "seed": seed, "spike": float(max(p["spike"].max(), 0)), "rise": float(p["rise"].max())}
            for m, by_seed in profiles.items() for seed, p in by_seed.items()]
    return pd.DataFrame(rows).set_index(["reading", "seed"])


def structure_table(structure: pd.DataFrame) -> pd.DataFrame:
    """Spike and rise per seed (rows), per GOAT reading (column groups), 2 digits."""
    names = {"spike": "largest spike u(0) − u(1)", "rise": "largest rise over the last L/8"}
    out = pd.DataFrame({(label(m), names[what]): structure.loc[m, what]
                        for m in structure.index.unique("reading") for what in names})
    return out.rename_axis("seed").round(2)


def _counts(structure: pd.DataFrame) -> tuple[int, int, int]:
    """(seeds with a spike ≥ 2 nats in the seeded GOAT, uniform-start seeds with a rise > 0.5 nats, seeds)."""
    spikes = int(sum(v >= SPIKE_NATS for v in structure.loc["goat", "spike"]))
    rises = int(sum(v > RISE_NATS for v in structure.loc["goat-uniform", "rise"]))
    return spikes, rises, len(structure.loc["goat"])


# Figure 2b, over `sink_structure`, 3 digits. S3-11: share of seeded-GOAT seeds with a first-token spike of at least
# 2 nats; S3-12: share of uniform-start seeds whose u rises by more than 0.5 nats over the last L/8 keys.
SINKS = (
    Measure("S3-11", lambda st: round(_counts(st)[0] / _counts(st)[2], 3),
            detail=lambda st: f"largest spike per seed: {', '.join(f'{v:.1f}' for v in st.loc['goat', 'spike'])}"),
    Measure("S3-12", lambda st: round(_counts(st)[1] / _counts(st)[2], 3),
            detail=lambda st: "largest rise per seed (uniform start): "
                              f"{', '.join(f'{v:.2f}' for v in st.loc['goat-uniform', 'rise'])}"),
)


def sink_numbers(structure: pd.DataFrame) -> dict[str, str]:
    """The Figure 2b numbers the text cites."""
    spikes, rises, n = _counts(structure)
    return {"ch9_spike_seeds": f"{spikes} of {n}", "ch9_spike_max": f"{structure.loc['goat', 'spike'].max():.1f}",
            "ch9_spike_uniform": f"{structure.loc['goat-uniform', 'spike'].max():.1f}",
            "ch9_rise_seeds": f"{rises} of {n}"}
