"""GOAT's Figure 5 at the scale of the digits (Chapter 9): S3-19, a ViT read at resolutions it never trained at,
and S3-24, the 2-D prior it learns from a uniform start.

Runs: the `vit-resolution` experiment (`companion.experiments.resolution`, `ci` only), seeds `SEEDS`; every reading
is a readout of its records ("resolution" and "canvas" at the experiment's `SIDES`, "goat_grid" for GOAT).
The shape of every chapter module's part: `load` → `frame`, `prior_maps` → `measures`, `preconditions` →
`table`, `curves`, `numbers`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapter import Measure
from companion.book.chapters.frames import by_method, readout
from companion.book.chapters.stats import Paired, paired, summarize, summary_table
from companion.book.prose import num, signed
from companion.experiments.resolution import GOAT_BASE, GOAT_PRIOR_LR, METHODS, SIDES
from companion.reading import read_runs

__all__ = ["SEEDS", "LABELS", "READINGS", "GOAT", "BASELINE", "LOCAL", "NUMBERS", "load", "frame", "prior_maps",
           "locality", "CLAIMS", "table", "curves", "numbers", "decide"]

SEEDS = tuple(range(6))
LABELS = {"learned": "learned absolute (resampled)", "sincos-2d": "2-D sin-cos", "goat-2d": "GOAT 2-D, own rate",
          "goat-2d-shared": "GOAT 2-D, model's rate"}
READINGS = {"resolution": "resized", "canvas": "on a larger canvas"}
GOAT, BASELINE = "goat-2d", "learned"  # the comparison of S3-19
LOCAL = 3  # offsets |Δy|, |Δx| ≤ 3: every offset of the 4 × 4 grid the prior trained on (S3-24)
NUMBERS = ("ch9_res_sides", "ch9_res_goat_lr", "ch9_res_base", "ch9_res_diff", "ch9_res_canvas_diff",
           "ch9_res_start", "ch9_res_local", "ch9_res_local_last", "ch9_res_range", "ch9_res_shared_range",
           "ch9_res_shared_start", "ch9_res_seeds")


def load(profile: str, *, store=None) -> dict[str, list]:
    """{method: [Record in seed order]} of `vit-resolution` at `SEEDS` (`ci` only: {} at another profile);
    raises `companion.reading.MissingRuns` naming what is absent."""
    if profile != "ci":
        return {}
    return by_method(read_runs("vit-resolution", profile, SEEDS, store=store), METHODS)


def decide(d, block: Mapping[str, Sequence] | None) -> dict:
    """S3-19 and S3-24 into Chapter 9's `Decision` `d`, and their numbers glued; the parts the notebook draws
    ({"frame", "maps"}, empty without the runs)."""
    if not block:
        d.glue(numbers())
        return {}
    df, maps = frame(block), prior_maps(block)
    d.measure(CLAIMS, {"df": df, "maps": maps})
    d.glue(numbers(df, maps, prior_maps(block, layer=-1), prior_maps(block, "goat-2d-shared")))
    return {"frame": df, "maps": maps}


def frame(runs: Mapping[str, Sequence]) -> pd.DataFrame:
    """One row per run × reading × image side: method, seed, reading ("resolution", "canvas"), side (pixels),
    acc (fraction) and "acc (%)"."""
    rows = []
    for method, recs in runs.items():
        for rec in recs:
            for reading in READINGS:
                value = readout(rec, f"{reading}:{','.join(map(str, SIDES))}")
                rows += [{"method": method, "seed": rec.seed, "reading": reading, "side": side, "acc": acc}
                         for side, acc in zip(value["side"], value["acc"])]
    out = pd.DataFrame(rows)
    out["acc (%)"] = 100 * out["acc"]
    return out


def prior_maps(runs: Mapping[str, Sequence], method: str = GOAT, layer: int = 0) -> np.ndarray:
    """The learned prior at every offset of the training grid, averaged over heads, per seed:
    (seeds, 2s − 1, 2s − 1) in nats (readout "goat_grid")."""
    return np.stack([np.asarray(readout(rec, f"goat_grid:{layer}")["offsets"], dtype=float).mean(0)
                     for rec in runs[method]])


def locality(maps: np.ndarray) -> np.ndarray:
    """Per seed, the Spearman rank correlation of the prior at offsets |Δy|, |Δx| ≤ `LOCAL` with minus the
    offset's length √(Δy² + Δx²): 1 when the prior falls with distance in every direction, 0 with no order."""
    side = maps.shape[-1] // 2 + 1
    r = np.arange(-(side - 1), side)
    keep = (np.abs(r)[:, None] <= LOCAL) & (np.abs(r)[None, :] <= LOCAL)
    closeness = -np.hypot(r[:, None], r[None, :])[keep]
    ranks = lambda v: pd.Series(v).rank().to_numpy()  # noqa: E731  (ties share their mean rank)
    return np.array([np.corrcoef(ranks(m[keep]), ranks(closeness))[0, 1] for m in maps])


def _by_seed(df: pd.DataFrame, method: str, reading: str, side: int) -> dict[int, float]:
    sub = df[(df.method == method) & (df.reading == reading) & (df.side == side)]
    return dict(zip(sub.seed, sub.acc))


def _differences(df: pd.DataFrame) -> dict[str, Paired]:
    far, trained = max(SIDES), int(df.side.min())
    return {"resized": paired(_by_seed(df, GOAT, "resolution", far), _by_seed(df, BASELINE, "resolution", far)),
            "canvas": paired(_by_seed(df, GOAT, "canvas", far), _by_seed(df, BASELINE, "canvas", far)),
            "start": paired(_by_seed(df, GOAT, "resolution", trained), _by_seed(df, BASELINE, "resolution", trained))}


def _range(maps: np.ndarray) -> float:
    """The mean over seeds of the prior's spread over the offsets (largest − smallest), nats."""
    return float(np.mean(maps.max(axis=(1, 2)) - maps.min(axis=(1, 2))))


# Over {"df": `frame`, "maps": `prior_maps`}. S3-19: the lower end of the interval of GOAT minus learned positions in
# test accuracy at the largest side, resized (fraction), if GOAT learns the images at the training side (GOAT minus
# learned there, mean); S3-24: the lower end of the interval over seeds of the prior's locality (`locality`), if the
# prior moved (its spread over the offsets, `_range`, nats).
CLAIMS = (
    Measure("S3-19", lambda a: round(_differences(a["df"])["resized"].lo, 4),
            {"goat-learns-images": lambda a: round(_differences(a["df"])["start"].mean_diff, 4)}),
    Measure("S3-24", lambda a: round(summarize(locality(a["maps"])).lo, 4),
            {"prior-moved": lambda a: round(_range(a["maps"]), 3)}),
)


def table(df: pd.DataFrame) -> pd.DataFrame:
    """Test top-1 accuracy (%) per way of giving positions (rows) and image side (columns), resized and on a
    larger canvas, mean ± std [95 % interval] over seeds."""
    parts = []
    for reading, name in READINGS.items():
        sub = df[df.reading == reading].copy()
        sub["positions"] = pd.Categorical(sub.method.map(LABELS), categories=[LABELS[m] for m in METHODS],
                                          ordered=True)
        for side, at in sub.groupby("side", sort=True):
            t = summary_table(at.sort_values("positions"), "positions", ["acc (%)"], digits=1)["acc (%)"]
            head = "trained at" if side == df.side.min() else name
            parts.append(t.rename(f"{side} px ({head})"))
    out = pd.concat(parts, axis=1)
    out = out.loc[:, ~out.columns.duplicated()]
    out.index.name = "Positions"
    return out


def curves(df: pd.DataFrame) -> pd.DataFrame:
    """Long form for the figure: positions (label), seed, reading (label), side, "test accuracy (%)"."""
    out = df.assign(positions=df.method.map(LABELS), reading=df.reading.map(READINGS))
    return out.rename(columns={"acc (%)": "test accuracy (%)"})[["positions", "seed", "reading", "side",
                                                                 "test accuracy (%)"]]


def numbers(df: pd.DataFrame | None = None, maps: np.ndarray | None = None, last: np.ndarray | None = None,
            shared: np.ndarray | None = None) -> dict[str, str]:
    """What Chapter 9's resolution section glues besides the verdicts: `maps`, `last` and `shared` are
    `prior_maps` of GOAT's first and last layer and of the model's-rate GOAT's first; "—" each, verdicts
    included, without the runs (the `paper` profile has none)."""
    if df is None:
        return dict.fromkeys(NUMBERS + ("ch9_verdict_S3-19", "ch9_verdict_S3-24"), "—")
    d = _differences(df)

    def points(p: Paired) -> str:
        return f"{signed(100 * p.mean_diff, 1)} points (95 % interval [{num(100 * p.lo, 1)}, {num(100 * p.hi, 1)}])"

    def corr(values: np.ndarray) -> str:
        s = summarize(values)
        return f"{num(s.mean, 2)} (95 % interval [{num(s.lo, 2)}, {num(s.hi, 2)}])"

    trained = int(df.side.min())
    start = df[(df.reading == "resolution") & (df.side == trained)]
    shared_start = float(start[start.method == "goat-2d-shared"].acc.mean())
    return {"ch9_res_sides": f"{trained} px, then {' and '.join(f'{s} px' for s in SIDES)}",
            "ch9_res_goat_lr": f"{GOAT_PRIOR_LR:g}", "ch9_res_base": f"{GOAT_BASE:g}",
            "ch9_res_diff": points(d["resized"]), "ch9_res_canvas_diff": points(d["canvas"]),
            "ch9_res_start": points(d["start"]), "ch9_res_local": corr(locality(maps)),
            "ch9_res_local_last": corr(locality(last)), "ch9_res_range": f"{num(_range(maps), 1)} nats",
            "ch9_res_shared_range": f"{num(_range(shared), 1)} nats",
            "ch9_res_shared_start": f"{num(100 * shared_start, 1)} %", "ch9_res_seeds": str(len(SEEDS))}
