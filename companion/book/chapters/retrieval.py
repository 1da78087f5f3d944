"""Chapter 9's passkey retrieval (Figures 3a, 3b and 3c; S3-13 and S3-14): span-token accuracy by length and by the depth of
the key, GOAT's margin over the best baseline beyond the training length, and one head's prior at 8L."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapter import Measure
from companion.book.chapters.frames import readout
from companion.book.chapters.length_readings import BASELINES, READINGS, labelled, readings

__all__ = ["passkey_lengths", "passkey_table", "depth_panel", "PASSKEY", "passkey_numbers", "head_prior"]


def passkey_lengths(runs: Mapping[str, Sequence], specs: Mapping[str, str],
                    digits: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Retrieval of every passkey model at every length (readouts "lengths", "lengths-pi", `passkey_lengths`;
    `digits`: the key's length). Returns (table, grid): table has columns reading, seed, length, span_acc,
    strict_acc, ce; grid (Figure 3c) is span-token accuracy pooled over seeds (correct digits over digits of the
    keys in the bin; NaN when empty), index (reading, length), one column per equal depth bin of [0, max_depth]."""
    rows, cells, edges = [], [], None
    for reading, rec, value in readings(runs, specs, "lengths"):
        edges = value["depth_edges"]
        for n, r in value["lengths"].items():
            rows.append({"reading": reading, "seed": rec.seed, "length": int(n), "span_acc": r["span_acc"],
                         "strict_acc": r["strict_acc"], "ce": r["ce"]})
            cells += [{"reading": reading, "length": int(n), "bin": k, "hits": hits, "n": keys * digits}
                      for k, (hits, keys) in enumerate(zip(r["digits"], r["keys"]))]
    grid = pd.DataFrame(cells).groupby(["reading", "length", "bin"])[["hits", "n"]].sum()
    grid = (grid["hits"] / grid["n"].where(grid["n"] > 0)).unstack("bin")
    grid.columns = [f"{edges[k]:.2f}–{edges[k + 1]:.2f}" for k in grid.columns]
    columns = ["reading", "seed", "length", "span_acc", "strict_acc", "ce"]
    return pd.DataFrame(rows, columns=columns), grid


def _accuracy(pk: pd.DataFrame, value: str = "span_acc") -> pd.DataFrame:
    """Mean `value` over seeds, one row per reading (chapter order), one column per length."""
    return pk.pivot_table(index="reading", columns="length", values=value).reindex(list(READINGS))


def passkey_table(pk: pd.DataFrame) -> pd.DataFrame:
    """Span-token and strict (whole key) accuracy by reading and length, means over seeds, 3 digits."""
    both = pd.concat({"span-token accuracy": _accuracy(pk), "strict (whole key)": _accuracy(pk, "strict_acc")}, axis=1)
    return labelled(both.round(3))


def depth_panel(grid: pd.DataFrame, reading: str) -> pd.DataFrame:
    """One reading's depth × length grid: rows the lengths, columns the depth bins by their lower edge."""
    g = grid.loc[reading]
    return g.set_axis([c.split("–")[0] for c in g.columns], axis=1)


def _margin(pk: pd.DataFrame, train_len: int) -> pd.Series:
    """Per seed: GOAT's span-token accuracy minus the best of `BASELINES`, each averaged over lengths beyond L."""
    beyond = [n for n in sorted(pk.length.unique()) if n > train_len]
    per_seed = pk[pk.length.isin(beyond)].groupby(["reading", "seed"])["span_acc"].mean().unstack("seed")
    return per_seed.loc["goat"] - per_seed.loc[list(BASELINES)].max()


def _worst_depth(grid: pd.DataFrame) -> float:
    """GOAT's span-token accuracy in its worst depth bin at the farthest length."""
    goat = grid.loc["goat"]
    return float(goat.loc[goat.index.max()].min())


# Figures 3a and 3c, over {"pk", "grid": `passkey_lengths`, "L": the training length}, 3 digits. S3-13: GOAT minus the
# best of RoPE, RoPE + PI and sinusoidal in span-token accuracy beyond L, mean over seeds (per seed beside it);
# S3-14: GOAT's worst depth bin at the farthest length.
PASSKEY = (
    Measure("S3-13", lambda a: round(float(_margin(a["pk"], a["L"]).mean()), 3),
            detail=lambda a: "GOAT minus the best of RoPE, RoPE + PI, sinusoidal per seed: "
                             + ", ".join(f"{v:+.2f}" for v in _margin(a["pk"], a["L"]))),
    Measure("S3-14", lambda a: round(_worst_depth(a["grid"]), 3),
            detail=lambda a: "GOAT, lowest span-token accuracy over depth bins at 8L"),
)


def passkey_numbers(pk: pd.DataFrame, grid: pd.DataFrame, train_len: int, digits: int) -> dict[str, str]:
    """The Figures 3a and 3c numbers the text cites: accuracy of every reading at L, 4L and the farthest
    length, GOAT's margin and the orderings at 4L, and GOAT's depth grid at the farthest length (the
    last position of its first depth bin counts the key's `digits` and the prompt's)."""
    acc = _accuracy(pk)
    far = int(pk.length.max())
    out = {}
    for reading in READINGS:
        out[f"ch9_pk_L_{reading}"] = f"{acc.loc[reading, train_len]:.2f}"
        out[f"ch9_pk_far_{reading}"] = f"{acc.loc[reading, far]:.2f}"
        out[f"ch9_pk_4L_{reading}"] = f"{acc.loc[reading, 4 * train_len]:.2f}"
    margin = _margin(pk, train_len).mean()
    out["ch9_pk_margin"] = f"{abs(margin):.2f}"
    at4 = acc[4 * train_len]
    out["ch9_goat_rope_word"] = "above" if at4["goat"] > at4["rope"] else "below"
    out["ch9_goat_pi_word"] = "above" if at4["goat"] > at4["rope-pi"] else "below"
    out["ch9_margin_word"] = "ahead of" if margin > 0 else "behind"
    out["ch9_alibi_word"] = "above" if at4["alibi"] > at4["goat"] else "below"
    goat_far = grid.loc["goat"].loc[far]
    out["ch9_niah_min"] = f"{_worst_depth(grid):.2f}"
    out["ch9_niah_first"] = f"{goat_far.iloc[0]:.2f}"
    out["ch9_niah_rest"] = f"{goat_far.iloc[1:].max():.2f}"
    out["ch9_niah_first_end"] = f"{int(float(goat_far.index[0].split('–')[1]) * (far - 1 - 2 * digits)) + 1}"
    return out


def head_prior(record, spec: str) -> dict[str, np.ndarray]:
    """The last layer's GOAT prior per head at the farthest length (readout `spec`, `companion.goat.head_prior`):
    "i" the positions drawn (the whole n × n matrices would make the record megabytes), "centred" the row-centred
    log-prior at them ((h, P, P), NaN above the diagonal), "limit" its largest magnitude over the whole matrix
    ((h,)) and "log_causal" log10 of the causal prior + 1e-12 ((h, P, P))."""
    return {k: np.asarray(v, dtype=float) for k, v in readout(record, spec).items()}
