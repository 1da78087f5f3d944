"""Reading what the benchmarks write: load a committed result, check it is complete, flatten it to a frame.

The harness writes one JSON file per sweep (`lengths.run_benchmark`, `benchmarks/attention.py`), per
whole-step comparison (`step.run_steps`, `benchmarks/step_memory.py`) and per peak-rate measurement
(`benchmarks/peak.py`), all under benchmarks/results/. `load` reads any of them and refuses a file that
is unreadable or lacks a key its reader needs, naming the file and the fix; `frame` flattens an
attention sweep into one row per (variant, L, mode), `gpu_frame` does so for every GPU result at once,
and `step_frame` flattens a whole-step result into one row per method. Chapter 10
(`companion.book.chapters.ch10_cost`) builds its tables and claims on these frames.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from companion.paths import repo_root

__all__ = ["RESULTS", "load", "write_result", "committed", "load_peak", "load_reported", "load_steps", "gpu_results", "frame",
           "gpu_frame", "step_frame", "shared_memory"]

RESULTS = Path("benchmarks") / "results"
_MiB = 2**20


def load(path: str | Path, required=("machine", "settings", "results", "ratios", "finished")) -> dict:
    """One benchmark result; a file that is not a complete result is an error naming the file."""
    path = Path(path)
    try:
        result = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a readable benchmark result ({err}); rerun benchmarks/attention.py "
                         "to rewrite it.") from None
    if not isinstance(result, dict):
        raise ValueError(f"{path} is not a readable benchmark result (a JSON {type(result).__name__}, not an "
                         "object); rerun benchmarks/attention.py to rewrite it.")
    missing = [k for k in required if k not in result]
    if missing:
        raise ValueError(f"{path} lacks {missing}: an interrupted or foreign file. Rerun the benchmark to "
                         "produce a complete result.")
    return result


def write_result(path: str | Path, result: dict) -> Path:
    """Write a benchmark result whole or not at all: a temporary file beside `path`, flushed to disk, then
    renamed over it, so a killed benchmark never leaves a half-written result that `load` would have to
    refuse."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps(result, indent=1, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def committed(pattern: str = "attention-*.json") -> dict[str, dict]:
    """The committed results in benchmarks/results, keyed by file stem."""
    return {p.stem: load(p) for p in sorted((repo_root() / RESULTS).glob(pattern))}


def load_peak(stem: str) -> dict:
    """Committed peak rates (`benchmarks/peak.py`) as `roofline.measure_peak` gives them, with `source`:
    where and when they were measured (a live `measure_peak` has no `source`: the executing machine, now)."""
    result = load(repo_root() / RESULTS / f"{stem}.json", ("machine", "peak", "finished"))
    return {**result["peak"], "source": f"measured by benchmarks/peak.py on {result['machine']['cpu_model']}, "
                                        f"{result['finished'][:10]}"}


def load_reported(stem: str) -> dict:
    """Numbers reported from another host (benchmarks/results/<stem>.json): a transcription with its
    `source`, not a result file of the harness."""
    return load(repo_root() / RESULTS / f"{stem}.json", ("source", "machine", "settings", "ratio_vs_sdpa",
                                                         "sdpa_call_ms"))


def load_steps(stem: str = "step-memory-cpu") -> dict:
    """A committed whole-step result (`benchmarks/step_memory.py`) from benchmarks/results/<stem>.json."""
    return load(repo_root() / RESULTS / f"{stem}.json", ("machine", "settings", "results", "ratios_vs_rope", "finished"))


def gpu_results(results: dict[str, dict]) -> dict[str, dict]:
    """The results among `results` measured on a CUDA device."""
    return {k: v for k, v in results.items() if v["settings"]["device"].startswith("cuda")}


def _number(value) -> float:
    return np.nan if value is None else float(value)


def frame(result: dict) -> pd.DataFrame:
    """One row per (variant, L, mode): status, backend, median time (ms) and IQR, ratio to SDPA
    (median over median, and the median of per-repeat ratios), peak memory (MiB) and its ratio, the
    failure reason, the SDPA kernels that ran (`sdp_choices`, a tuple), the float64 gate's worst error
    and tolerance (NaN where the record has no gate) and the compiled-kernel `attempts` of a FlexAttention
    variant ({"options", "error"} per tile size tried, in order; `companion.cost.flex`)."""
    rows = []
    for r in result["results"]:
        t, ratio, mem = r.get("time_s") or {}, r.get("ratio_vs_sdpa") or {}, r.get("memory") or {}
        backend, gate = r.get("backend") or {}, r.get("gate") or {}
        peak = mem.get("peak_bytes")
        rows.append({"variant": r["variant"], "L": r["L"], "mode": r["mode"], "status": r["status"],
                     "backend": backend.get("kind"),
                     "time_ms": t["median"] * 1e3 if t.get("median") is not None else np.nan,
                     "iqr_ms": t["iqr"] * 1e3 if t.get("iqr") is not None else np.nan,
                     "time_ratio": ratio.get("median_ratio", np.nan), "paired_ratio": ratio.get("paired_median", np.nan),
                     "peak_mib": peak / _MiB if peak is not None else np.nan, "reason": r.get("reason", ""),
                     "sdp_choices": tuple(backend.get("sdp_choice_names") or ()),
                     "gate_worst": _number(gate.get("worst")) if gate else np.nan,
                     "gate_tol": _number(gate.get("tol")) if gate else np.nan,
                     "attempts": tuple(gate.get("kernel_attempts") or backend.get("kernel_attempts") or ())})
    out = pd.DataFrame(rows)
    base = out[out.variant == "sdpa"].set_index(["L", "mode"])["peak_mib"]
    out["memory_ratio"] = [row.peak_mib / base.get((row.L, row.mode), np.nan) for row in out.itertuples()]
    return out


def gpu_frame(gpu: dict[str, dict]) -> pd.DataFrame:
    """`frame` of every result in `gpu` (`gpu_results`), in order, with its dtype and GPU name as columns."""
    if not gpu:
        return pd.DataFrame(columns=["variant", "L", "mode", "status", "backend", "paired_ratio", "reason",
                                     "sdp_choices", "gate_worst", "gate_tol", "attempts", "dtype", "gpu"])
    return pd.concat([frame(r).assign(dtype=r["settings"]["dtype"], gpu=r["machine"].get("gpu_name", "GPU"))
                      for r in gpu.values()], ignore_index=True)


_SHARED_MEMORY = re.compile(r"Required: (\d+) Hardware limit:\s*(\d+)")


def shared_memory(reason: str) -> tuple[int, int] | None:
    """(bytes needed, bytes available) of a Triton kernel whose shared memory does not fit, read from a
    recorded failure reason ("… Required: 246784 Hardware limit:232448 …"); None for any other reason."""
    found = _SHARED_MEMORY.search(reason or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


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
