"""Chapter 10's subnormal cliff, from committed results: GOAT's attention with flush-to-zero on and off.

Pure functions of loaded results (`companion.book.chapters.ch10_cost` loads the files and re-exports these):
- two `benchmarks/attention.py` sweeps of one machine, one with flush-to-zero and one without; which is
  which is read from each file's `settings.flush_denormal` (`by_flush`), never from its name, and each
  record's `subnormals` says how many of the call's probabilities are float32 subnormals;
- numbers reported from another host (`reported`: a transcription with its `source`, not a result file
  of the harness), read as given: forward + backward time over plain SDPA, and the report's dissection
  of one SDPA call;
- two `benchmarks/step_memory.py` results (RoPE and GOAT decoders), with and without flush-to-zero.
A result written before the harness recorded the setting ran with torch's default, off (`flush_setting`).
"""

from __future__ import annotations

import math

import pandas as pd

from companion.book.labels import label
from companion.book.prose import num, pct
from companion.cost.subnormals import LOG_LOWEST, LOG_TINY
from companion.positions import ALiBi

__all__ = ["CLIFF_VARIANTS", "flush_setting", "by_flush", "subnormal_band", "cliff_table", "cliff_numbers"]

CLIFF_VARIANTS = ("sdpa", "goat-lanes", "goat-chunked", "mask-sdpa")
MODE = "fwd+bwd"


def flush_setting(result: dict) -> bool:
    """Whether a result computed with flush-to-zero: `settings.flush_denormal`, False where absent."""
    return bool(result.get("settings", {}).get("flush_denormal", False))


def by_flush(*results: dict) -> tuple[dict, dict]:
    """(the result with flush-to-zero on, the one with it off) among `results`; ValueError unless there
    is exactly one of each."""
    on = [r for r in results if flush_setting(r)]
    off = [r for r in results if not flush_setting(r)]
    if len(on) != 1 or len(off) != 1:
        raise ValueError(f"need one result with flush-to-zero on and one with it off, got {len(on)} on and "
                         f"{len(off)} off; rerun benchmarks/attention.py with and without --no-flush-denormal.")
    return on[0], off[0]


def _record(result: dict, variant: str, L: int) -> dict:
    return next((r for r in result["results"] if (r["variant"], r["L"], r["mode"]) == (variant, L, MODE)), {})


def _ratio(result: dict, variant: str, L: int) -> float:
    """Forward + backward time over plain SDPA's (median of per-repeat ratios); NaN if not measured."""
    return float((_record(result, variant, L).get("ratio_vs_sdpa") or {}).get("paired_median", math.nan))


def _spread(result: dict, variant: str, L: int) -> str:
    """The range of the per-repeat time ratios to SDPA, "0.92–1.20" ("—" if not measured)."""
    per = (_record(result, variant, L).get("ratio_vs_sdpa") or {}).get("per_repeat") or []
    return f"{num(min(per), 2)}–{num(max(per), 2)}" if per else "—"


def _subnormal(result: dict, variant: str, L: int, key: str = "prob_fraction") -> float:
    sub = _record(result, variant, L).get("subnormals") or {}
    return float(sub[key]) if sub.get("status") == "ok" else math.nan


def _reported(reported: dict, variant: str, L: int) -> float:
    return float(reported["ratio_vs_sdpa"].get(str(L), {}).get(variant, math.nan))


def _times(x: float) -> str:
    return "—" if x != x else f"{num(x, 2)} ×"


def _host(result: dict) -> str:
    m = result["machine"]
    return m["cpu_model"] + (f" ({m['cpu_capability']})" if m.get("cpu_capability") else "")


def cliff_table(on: dict, off: dict, reported: dict, lengths=None) -> pd.DataFrame:
    """Per (variant, L), forward + backward: the share of the call's softmax probabilities that are
    float32 subnormals (from `on`'s probe), its time over plain SDPA with flush-to-zero on and off on
    this machine (each within its own run), and as reported from the other host."""
    lengths = lengths or sorted({r["L"] for r in on["results"]})
    other = f"{_host(reported)}, off (reported)"
    rows = {}
    for v in CLIFF_VARIANTS:
        for L in lengths:
            rows[(label(v), f"{L:,}")] = {
                "subnormal probabilities": pct(_subnormal(on, v, L), 2),
                f"{_host(on)}, flush-to-zero on": _times(_ratio(on, v, L)),
                f"{_host(off)}, off": _times(_ratio(off, v, L)),
                other: _times(_reported(reported, v, L)),
            }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.names = ["variant", "L"]
    return out


def subnormal_band(slope: float) -> tuple[int, int]:
    """The key distances i − j at which a recency slope alone puts exp(score − row max) among float32
    subnormals: slope·(i − j) between −log 2⁻¹²⁶ and −log 2⁻¹⁵⁰ (first, last)."""
    return math.ceil(-LOG_TINY / slope), math.floor(-LOG_LOWEST / slope)


def _step(result: dict, method: str) -> float:
    r = next((r for r in result["results"] if r["method"] == method and r.get("status") == "ok"), None)
    return float(r["time_s"]) if r else math.nan


def cliff_numbers(on: dict, off: dict, reported: dict, steps_on: dict, steps_off: dict, L: int = 4096,
                  short: int = 1024) -> dict[str, str]:
    """The section's glued numbers (names `ch10_sub_*`): subnormal shares, ratios and the range of the
    per-repeat ratios at L and `short` on this machine, with flush-to-zero on and off; the band of the
    steepest ALiBi slope; the reported host's ratios, its SDPA-call dissection and training times; the
    whole-step times of GOAT and RoPE with flush-to-zero on and off."""
    heads = on["settings"]["heads"]
    steep = max(ALiBi(heads).slopes.tolist())
    first, last = subnormal_band(steep)
    call = reported["sdpa_call_ms"]
    train = reported.get("training", {})
    out = {"ch10_sub_host": _host(on), "ch10_sub_other": _host(reported),
           "ch10_sub_source": reported["source"], "ch10_sub_slope": f"1/{round(1 / steep):d}",
           "ch10_sub_band_first": f"{first:,}", "ch10_sub_band_last": f"{last:,}",
           "ch10_sub_flushed": pct(on["settings"]["flush_denormal_check"]["flushed_share"], 0),
           "ch10_sub_call_random": f"{call['random']:,}", "ch10_sub_call_lanes": f"{call['lanes']:,}",
           "ch10_sub_call_ftz": f"{call['lanes_flush_denormal']:,}",
           "ch10_sub_call_ftz_ratio": num(call["lanes_flush_denormal"] / call["random"], 2),
           "ch10_sub_train_off": num(train.get("seconds_flush_off", math.nan), 1),
           "ch10_sub_train_on": num(train.get("seconds_flush_on", math.nan), 1)}
    for n in (short, L):
        out[f"ch10_sub_goat_{n}"] = pct(_subnormal(on, "goat-lanes", n), 1)
        out[f"ch10_sub_zero_{n}"] = pct(_subnormal(on, "goat-lanes", n, "prob_zero_fraction"), 0)
        for v, key in (("goat-lanes", "lanes"), ("goat-chunked", "chunked")):
            out[f"ch10_sub_on_{key}_{n}"] = num(_ratio(on, v, n), 2)
            out[f"ch10_sub_off_{key}_{n}"] = num(_ratio(off, v, n), 2)
            out[f"ch10_sub_other_{key}_{n}"] = num(_reported(reported, v, n), 2)
            out[f"ch10_sub_spread_on_{key}_{n}"] = _spread(on, v, n)
            out[f"ch10_sub_spread_off_{key}_{n}"] = _spread(off, v, n)
    for name, result in (("on", steps_on), ("off", steps_off)):
        goat, rope = _step(result, "goat"), _step(result, "rope")
        out[f"ch10_sub_step_goat_{name}"] = num(goat, 2)
        out[f"ch10_sub_step_ratio_{name}"] = num(goat / rope, 2)
    out["ch10_sub_step_cliff"] = num(_step(steps_off, "goat") / _step(steps_on, "goat"), 2)
    out["ch10_sub_step_len"] = f"{steps_on['settings']['shape']['seq_len']:,}"
    return out
