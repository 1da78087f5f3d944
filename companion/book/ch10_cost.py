"""Chapter 10: what a prior costs, read from the attention benchmark's JSON (`benchmarks/attention.py`).

Nothing here times anything; the chapter's small live sweep goes through `companion.cost.run_benchmark`
and comes back as the same JSON. `frame(result)` flattens a result into one row per
(variant, L, mode) with time, ratio to plain SDPA (same run) and peak memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from companion.paths import repo_root

__all__ = ["RESULTS", "LABELS", "COLOURS", "load", "committed", "frame", "wide", "growth_exponent", "goal_table", "load_steps",
           "step_frame"]

RESULTS = Path("benchmarks") / "results"
LABELS = {"sdpa": "SDPA, no prior", "goat-lanes": "GOAT lanes (SDPA)", "mask-sdpa": "learnable mask (SDPA)",
          "mask-attend": "learnable mask (attend)", "mask-sdpa-math": "learnable mask (MATH)",
          "eager-bias": "eager + bias", "flex": "FlexAttention + tables", "eager-goat": "eager GOAT (Toeplitz)",
          "alibi-sdpa": "frozen ALiBi mask (SDPA)"}
# one colour per variant (tab10), the same in every figure of the chapter
COLOURS = dict(zip(LABELS, ("#1f77b4", "#ff7f0e", "#2ca02c", "#17becf", "#bcbd22", "#7f7f7f", "#9467bd", "#d62728",
                            "#8c564b")))
_MiB = 2**20


def load(path: str | Path, required=("machine", "settings", "results", "ratios", "finished")) -> dict:
    """One benchmark result; a file that is not a complete result is an error naming the file."""
    path = Path(path)
    try:
        result = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a readable benchmark result ({err}); rerun benchmarks/attention.py "
                         "to rewrite it.") from None
    missing = [k for k in required if k not in result]
    if missing:
        raise ValueError(f"{path} lacks {missing}: an interrupted or foreign file. Rerun the benchmark to "
                         "produce a complete result.")
    return result


def committed(pattern: str = "attention-*.json") -> dict[str, dict]:
    """The committed results in benchmarks/results, keyed by file stem."""
    return {p.stem: load(p) for p in sorted((repo_root() / RESULTS).glob(pattern))}


def frame(result: dict) -> pd.DataFrame:
    """One row per (variant, L, mode): status, backend, median time (ms) and IQR, ratio to SDPA
    (median over median, and the median of per-repeat ratios), peak memory (MiB) and its ratio."""
    rows = []
    for r in result["results"]:
        t, ratio, mem = r.get("time_s") or {}, r.get("ratio_vs_sdpa") or {}, r.get("memory") or {}
        peak = mem.get("peak_bytes")
        rows.append({"variant": r["variant"], "L": r["L"], "mode": r["mode"], "status": r["status"],
                     "backend": (r.get("backend") or {}).get("kind"),
                     "time_ms": t["median"] * 1e3 if t.get("median") is not None else np.nan,
                     "iqr_ms": t["iqr"] * 1e3 if t.get("iqr") is not None else np.nan,
                     "time_ratio": ratio.get("median_ratio", np.nan), "paired_ratio": ratio.get("paired_median", np.nan),
                     "peak_mib": peak / _MiB if peak is not None else np.nan, "reason": r.get("reason", "")})
    out = pd.DataFrame(rows)
    base = out[out.variant == "sdpa"].set_index(["L", "mode"])["peak_mib"]
    out["memory_ratio"] = [row.peak_mib / base.get((row.L, row.mode), np.nan) for row in out.itertuples()]
    return out


def wide(df: pd.DataFrame, value: str, mode: str) -> pd.DataFrame:
    """variant × L table of one column for one mode (variants in LABELS order)."""
    t = df[df["mode"] == mode].pivot_table(index="variant", columns="L", values=value)
    return t.reindex([v for v in LABELS if v in t.index])


def growth_exponent(df: pd.DataFrame, variant: str, mode: str, value: str = "peak_mib", *, min_L: int = 1024) -> float:
    """Slope of log(value) against log(L) over L ≥ min_L: 2 for a cost that grows as L², 1 for linear."""
    d = df[(df.variant == variant) & (df["mode"] == mode) & (df.L >= min_L)].dropna(subset=[value])
    if len(d) < 2:
        return float("nan")
    return float(np.polyfit(np.log(d.L), np.log(d[value]), 1)[0])


def goal_table(df: pd.DataFrame, L: int, goals: dict[str, tuple[str, float]], mode: str = "fwd+bwd") -> pd.DataFrame:
    """For each variant: its measured ratio at L against the goal {variant: (column, at most)}."""
    rows = []
    for variant, (column, limit) in goals.items():
        sel = df[(df.variant == variant) & (df.L == L) & (df["mode"] == mode)]
        value = float(sel[column].iloc[0]) if len(sel) else float("nan")
        rows.append({"variant": variant, "measure": column, "at L": L, "ours": value, "goal ≤": limit,
                     "met": bool(value <= limit) if value == value else None})
    return pd.DataFrame(rows).set_index("variant")


def load_steps(stem: str = "step-memory-cpu") -> dict:
    """A committed whole-step result (`benchmarks/step_memory.py`) from benchmarks/results/<stem>.json."""
    return load(repo_root() / RESULTS / f"{stem}.json", ("machine", "settings", "results", "ratios_vs_rope", "finished"))


def _number(value) -> float:
    return np.nan if value is None else float(value)


def step_frame(result: dict) -> pd.DataFrame:
    """One row per method of a whole-step result: peak MiB, memory and time relative to RoPE, step
    time, parameters. A method whose probe failed is a row of NaN with its reason."""
    rows = {}
    for r in result["results"]:
        ok = r.get("status") == "ok"
        ratio = result["ratios_vs_rope"].get(r["method"], {})
        rows[r["method"]] = {"peak MiB": r["peak_bytes"] / _MiB if ok else np.nan,
                             "memory vs RoPE": _number(ratio.get("memory")), "step s": r["time_s"] if ok else np.nan,
                             "time vs RoPE": _number(ratio.get("time")), "parameters": r.get("params"),
                             "status": r.get("status"), "reason": r.get("reason", "")}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "method"
    return out if out["reason"].astype(bool).any() else out.drop(columns=["status", "reason"])
