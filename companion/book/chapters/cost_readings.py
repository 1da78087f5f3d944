"""What Chapter 10 reads from the committed results beyond the CPU sweep's curves, at the length its goals are judged at:
the GPU runs (ratios per precision, the float64 gate, the backends, FlexAttention's status), and GOAT's lanes taken a few
heads at a time and in bfloat16 on the CPU."""

from __future__ import annotations


import pandas as pd

from companion.book.claims import load_ledger
from companion.book.labels import VARIANTS, label
from companion.cost.flex import KERNEL_LADDER, describe_options
from companion.cost.records import frame, gpu_frame, shared_memory

__all__ = ["GOAL_L", "value_at", "gpu_goals_display", "gpu_ratios", "gpu_gate_failures", "gpu_worst", "GPU_GOALS",
           "gpu_ratio_table", "gpu_goal_table", "gpu_provenance", "gpu_flex_status", "gpu_prose_numbers",
           "CHUNK_VARIANTS", "chunked_table", "chunked_numbers", "bf16_goat_table", "bf16_goat_numbers"]


GOAL_L = 4096  # the length at which the goals are judged, forward + backward


def value_at(df: pd.DataFrame, variant: str, column: str, L: int = GOAL_L, mode: str = "fwd+bwd") -> float:
    """One variant's value of `column` at (L, mode); NaN if it was not measured."""
    sel = df[(df.variant == variant) & (df.L == L) & (df["mode"] == mode)]
    return float(sel[column].iloc[0]) if len(sel) else float("nan")


def gpu_goals_display(goals: pd.DataFrame) -> pd.DataFrame:
    """`gpu_goal_table` as the page shows it: labelled variants as the index, L with a separator."""
    out = goals.assign(variant=goals["variant"].map(label), L=goals["L"].map(lambda v: f"{int(v):,}"))
    return out.set_index("variant")


def _gpu_at(gf: pd.DataFrame, variant: str, status: str, L: int = GOAL_L) -> pd.DataFrame:
    """The forward + backward rows of `variant` at L with `status` in a `gpu_frame`, in file order."""
    return gf[(gf.variant == variant) & (gf.L == L) & (gf["mode"] == "fwd+bwd") & (gf.status == status)]


def gpu_ratios(gpu: dict[str, dict], variant: str) -> dict[str, float]:
    """{dtype: `variant` over plain SDPA, forward + backward at GOAL_L} from the committed GPU results where it
    passed the float64 gate (a failed call is not timed); of two results in one precision, the later file's."""
    sel = _gpu_at(gpu_frame(gpu), variant, "ok")
    return {dtype: float(ratio) for dtype, ratio in zip(sel.dtype, sel.paired_ratio)}


def gpu_gate_failures(gpu: dict[str, dict], variant: str) -> list[str]:
    """The precisions of the committed GPU results in which `variant` failed the float64 gate at GOAL_L."""
    return sorted(_gpu_at(gpu_frame(gpu), variant, "gate-failed").dtype)


def gpu_worst(gpu: dict[str, dict], variant: str) -> float | None:
    """The largest of `gpu_ratios`, 3 places; None if no GPU result timed `variant`. C-02 and S3-15 are decided on
    it: a claim about fused GPU kernels must hold in every precision that gives a correct answer, bfloat16 (the one
    a GPU trains in) as well as float32."""
    ratios = gpu_ratios(gpu, variant)
    return round(max(ratios.values()), 3) if ratios else None


# The GPU goals (issue "Fast runs", item 5): (variant, L, dtype, the claim whose threshold is the goal;
# None: the goal is only that the variant runs and passes the float64 gate). In bfloat16 GOAT is judged
# both as 16-bit lanes and as the package's path (goat-sdpa: float32 lanes), against bf16 SDPA's time;
# the learnable mask both through SDPA (the package's path) and as a FlexAttention score modifier.
GPU_GOALS = (("goat-lanes", 4096, "float32", "S3-15"), ("goat-lanes", 16384, "float32", "S3-15"),
             ("goat-lanes", 4096, "bfloat16", "S3-15"), ("goat-sdpa", 4096, "bfloat16", "S3-15"),
             ("mask-attend", 4096, "float32", "C-02"),
             ("mask-attend", 4096, "bfloat16", "C-02"), ("mask-flex", 4096, "bfloat16", "C-02"),
             ("flex", 4096, "bfloat16", None))


_STATUS_WORDS = {"gate-failed": "fails the float64 gate", "error": "does not run", "oom": "out of memory",
                 "skipped": "not measured"}


def _ratio_or_status(row) -> str:
    return f"{row.paired_ratio:.2f}" if row.status == "ok" else _STATUS_WORDS.get(row.status, row.status)


def gpu_ratio_table(gf: pd.DataFrame) -> pd.DataFrame:
    """Forward + backward time over plain SDPA, (precision, variant) × L, as text: the ratio, or what
    became of the call ("fails the float64 gate", "does not run", "out of memory"; "—" not measured)."""
    g = gf[gf["mode"] == "fwd+bwd"].copy()
    g["cell"] = [_ratio_or_status(r) for r in g.itertuples()]
    order = [v for v in VARIANTS if v in set(g.variant)]
    t = g.pivot_table(index=["dtype", "variant"], columns="L", values="cell", aggfunc="first").fillna("—")
    t = t.reindex([(d, v) for d in sorted(set(g.dtype), reverse=True) for v in order if (d, v) in t.index])
    t.index.names, t.columns.name = ["precision", "variant"], "L"
    return t


def gpu_goal_table(gf: pd.DataFrame, ledger: dict | None = None) -> pd.DataFrame:
    """Each of `GPU_GOALS`: measured ratio (or what became of the call), the goal (its claim's threshold), met."""
    ledger = ledger or load_ledger()
    limits = {cid: float(ledger[cid].rule["threshold"]) for cid in ("S3-15", "C-02")}
    rows = []
    for variant, L, dtype, claim in GPU_GOALS:
        sel = gf[(gf.variant == variant) & (gf.L == L) & (gf.dtype == dtype) & (gf["mode"] == "fwd+bwd")]
        if not len(sel):
            measured, met = "not measured", "—"
        else:
            row = next(sel.itertuples())
            measured = _ratio_or_status(row)
            ok = row.status == "ok" and (claim is None or row.paired_ratio <= limits[claim])
            met = "yes" if ok else "no"
        goal = "runs and passes the gate" if claim is None else f"≤ {limits[claim]:g} ×"
        rows.append({"variant": variant, "L": L, "precision": dtype, "measured": measured, "goal": goal, "met": met})
    return pd.DataFrame(rows)


def gpu_provenance(gpu: dict[str, dict]) -> pd.DataFrame:
    """Where each committed GPU result comes from: the GPU, precision, versions and date (each result's commit
    and exact command stay in benchmarks/results/provenance.json, for a rerunner, not on the page)."""
    rows = {}
    for stem, r in gpu.items():
        v = r.get("versions", {})
        rows[stem] = {"GPU": r["machine"].get("gpu_name", "?"), "precision": r["settings"]["dtype"],
                      "torch": v.get("torch", "?"), "CUDA": v.get("cuda", "?"), "cuDNN": v.get("cudnn", "?"),
                      "date": r.get("started", "")[:10]}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "result"
    return out


def _gate_error(gf: pd.DataFrame, variant: str, dtype: str) -> tuple[float, float] | None:
    """(worst gate error over its scaled tolerance, the tolerance) of a variant's forward gate in one
    precision of a `gpu_frame` (the first file's), or None."""
    sel = gf[(gf.variant == variant) & (gf["mode"] == "fwd") & (gf.dtype == dtype) & gf.gate_worst.notna()]
    return (float(sel.gate_worst.iloc[0]), float(sel.gate_tol.iloc[0])) if len(sel) else None


_BACKENDS = {"CUDNN": "cuDNN", "EFFICIENT": "memory-efficient", "FLASH": "flash", "MATH": "math"}


def _backend(gf: pd.DataFrame, variant: str, dtype: str, L: int = GOAL_L) -> str:
    """The SDPA kernel of a variant's forward + backward at L in one precision (first file's; "—" if unknown)."""
    sel = gf[(gf.variant == variant) & (gf.L == L) & (gf["mode"] == "fwd+bwd") & (gf.dtype == dtype)]
    names = sel.sdp_choices.iloc[0] if len(sel) else ()
    return ", ".join(_BACKENDS.get(n, n) for n in names) or "—"


def _reason(gf: pd.DataFrame, variant: str) -> str:
    """The first recorded failure reason of a variant in a `gpu_frame` ("" if none)."""
    return next((reason for reason in gf[gf.variant == variant].reason if reason), "")


def gpu_flex_status(gpu: dict[str, dict], variant: str = "flex") -> str:
    """What became of a FlexAttention variant on the GPU in bfloat16, forward + backward at GOAL_L, as a
    clause ("compiles … and costs 1.31 × plain SDPA …", "does not compile …: … bytes needed …", "was not
    measured …"), with the Triton tiles it ran with or tried (`companion.cost.flex.KERNEL_LADDER`)."""
    gf = gpu_frame(gpu)
    sel = gf[(gf.variant == variant) & (gf.L == GOAL_L) & (gf["mode"] == "fwd+bwd") & (gf.dtype == "bfloat16")]
    if not len(sel):
        return "was not measured on this GPU (benchmarks/gpu.sh measures it on the next one)"
    row = next(sel.itertuples())
    if row.status == "ok":
        ran = [a["options"] for a in row.attempts if a["error"] is None]
        how = f"with {describe_options(ran[-1])}" if ran else f"as {row.backend or 'flex'}"
        return (f"compiles on this GPU {how} and costs {row.paired_ratio:.2f} × plain SDPA at L = {GOAL_L:,} in "
                "bfloat16, forward and backward")
    need = shared_memory(row.reason)
    if need is None:
        return f"does not run on this GPU ({_STATUS_WORDS.get(row.status, row.status)}: {str(row.reason)[:160]})"
    text = (f"does not compile on this GPU: Triton finds no kernel configuration whose shared memory fits "
            f"({need[0]:,} bytes needed, {need[1]:,} available)")
    if not row.attempts:
        smaller = ", then ".join(describe_options(o) for o in KERNEL_LADDER[1:])
        return (text + f" with the default tiles, the only ones the recorded run tried; whether smaller ones "
                f"({smaller}) fit is for the next GPU run to say")
    return text + (f", with each of the {len(row.attempts)} tile sizes tried, down to "
                   f"{describe_options(row.attempts[-1]['options'])}")


def gpu_prose_numbers(gpu: dict[str, dict], steps: pd.DataFrame | None = None) -> dict[str, str]:
    """The GPU section's cited numbers by glue name ("—" where a result is missing): ratios, kernels,
    FlexAttention's shared-memory need, the bfloat16 gate error, and (with `steps`, a GPU whole-step
    result) GOAT over RoPE peak memory."""
    gf = gpu_frame(gpu)

    def ratio(variant, L, dtype):
        sel = gf[(gf.variant == variant) & (gf.L == L) & (gf.dtype == dtype) & (gf["mode"] == "fwd+bwd")]
        return _ratio_or_status(next(sel.itertuples())) if len(sel) else "—"

    out = {f"ch10_gpu_{v}_{d}_{L}": ratio(v, L, d) for v in ("goat-lanes", "mask-attend", "mask-sdpa")
           for d in ("float32", "bfloat16") for L in (1024, 4096, 16384)}
    first = next(iter(gpu.values()), None)
    out["ch10_gpu_name"] = first["machine"].get("gpu_name", "—") if first else "—"
    out["ch10_gpu_torch"] = first["versions"].get("torch", "—") if first else "—"
    out["ch10_gpu_results"] = str(len(gpu))
    for variant in ("sdpa", "mask-attend"):
        for dtype in ("float32", "bfloat16"):
            out[f"ch10_gpu_backend_{variant}_{dtype}"] = _backend(gf, variant, dtype)
    flex = shared_memory(_reason(gf, "flex"))
    out["ch10_gpu_flex_needs"] = f"{flex[0]:,}" if flex else "—"
    out["ch10_gpu_flex_has"] = f"{flex[1]:,}" if flex else "—"
    out["ch10_gpu_flex_status"] = gpu_flex_status(gpu, "flex")
    out["ch10_gpu_mask_flex_status"] = gpu_flex_status(gpu, "mask-flex")
    gate = _gate_error(gf, "goat-lanes", "bfloat16")
    out["ch10_gpu_goat_bf16_gate"] = f"{gate[0]:.2f}" if gate else "—"
    out["ch10_gpu_gate_tol"] = f"{gate[1]:g}" if gate else "—"
    if steps is not None:
        out["ch10_gpu_step_goat"] = f"{steps.loc['goat', 'memory vs RoPE']:.2f}"
        out["ch10_gpu_step_alibi"] = f"{steps.loc['alibi', 'memory vs RoPE']:.2f}"
    return out


def _gate_cell(row) -> str:
    gate = row.get("gate") or {}
    if not gate:
        return "—"
    verdict = "passes" if gate.get("passed") else "fails"
    return f"{verdict}: {float(gate['worst']):.3f} (tolerance {float(gate['tol']):g})"


CHUNK_VARIANTS = ("goat-lanes", "goat-chunked")


def chunked_table(result: dict) -> pd.DataFrame:
    """GOAT's lanes in one SDPA call and a few heads at a time (`companion.goat_chunked`), by L, forward + backward
    on the CPU: peak memory and time over plain SDPA, all from one run."""
    df = frame(result)
    df = df[(df["mode"] == "fwd+bwd") & df.variant.isin(CHUNK_VARIANTS)]
    rows = {}
    for r in df.itertuples():
        row = rows.setdefault(r.L, {})
        name = label(r.variant)
        row[f"{name}: peak memory vs SDPA"] = f"{r.memory_ratio:.2f} ×" if r.memory_ratio == r.memory_ratio else r.status
        row[f"{name}: time vs SDPA"] = f"{r.paired_ratio:.2f} ×" if r.paired_ratio == r.paired_ratio else r.status
    out = pd.DataFrame.from_dict(rows, orient="index").sort_index()
    out.index.name = "L"
    return out


def chunked_numbers(result: dict, L: int = GOAL_L, short: int = 1024) -> dict[str, str]:
    """The head-chunked GOAT section's glued numbers at L, forward + backward: heads per chunk, each path's peak
    memory (ratio to plain SDPA and MiB) and time ratio, and the time ratios at `short` (`..._<short>`)."""
    df = frame(result)
    out = {"ch10_chunk_heads": "—"}
    for r in result["results"]:
        kind = (r.get("backend") or {}).get("kind") or ""
        if r["variant"] == "goat-chunked" and "heads at a time" in kind:
            out["ch10_chunk_heads"] = kind.split("CPU flash, ")[1].split(" heads")[0]
    for v, key in (("sdpa", "sdpa"), ("goat-lanes", "one"), ("goat-chunked", "chunked")):
        out[f"ch10_chunk_mib_{key}"] = f"{value_at(df, v, 'peak_mib', L):.1f}"
        if v != "sdpa":
            out[f"ch10_chunk_mem_{key}"] = f"{value_at(df, v, 'memory_ratio', L):.2f}"
            out[f"ch10_chunk_time_{key}"] = f"{value_at(df, v, 'paired_ratio', L):.2f}"
            out[f"ch10_chunk_time_{key}_{short}"] = f"{value_at(df, v, 'paired_ratio', short):.2f}"
    return out


def bf16_goat_table(result: dict) -> pd.DataFrame:
    """GOAT in bfloat16 by L, forward + backward: the float64 gate (worst error relative to the reference's scale,
    and tolerance) of bfloat16 lanes (`goat-lanes`) and of the package's path (`goat-sdpa`, lanes and call in
    float32), and the package path's time over bfloat16 SDPA (same run)."""
    rows = {}
    for r in result["results"]:
        if r["mode"] != "fwd+bwd" or r["variant"] not in ("goat-lanes", "goat-sdpa"):
            continue
        row = rows.setdefault(r["L"], {})
        row[f"{VARIANTS[r['variant']]}: float64 gate"] = _gate_cell(r)
        if r["variant"] == "goat-sdpa":
            ratio = (r.get("ratio_vs_sdpa") or {}).get("paired_median")
            row["companion path: time vs bfloat16 SDPA"] = f"{ratio:.2f} ×" if ratio is not None else r["status"]
    out = pd.DataFrame.from_dict(rows, orient="index").sort_index()
    out.index.name = "L"
    return out


def bf16_goat_numbers(result: dict, gpu: dict[str, dict], L: int = GOAL_L) -> dict[str, str]:
    """The bfloat16 GOAT section's glued numbers: where bfloat16 lanes start failing the gate and their error at
    the longest L; the longest L the package path passes, its worst error and its time over bfloat16 SDPA at L on
    this CPU; and, from the GPU runs, float32 lanes over bfloat16 SDPA at L (a ratio across two runs; "—" without)."""
    rows = [r for r in result["results"] if r["mode"] == "fwd+bwd" and r.get("gate")]
    lanes = sorted((r for r in rows if r["variant"] == "goat-lanes"), key=lambda r: r["L"])
    package = [r for r in rows if r["variant"] == "goat-sdpa"]
    fails = [r["L"] for r in lanes if not r["gate"]["passed"]]
    passing = sorted(r["L"] for r in package if r["gate"]["passed"])
    at = next((r for r in package if r["L"] == L), None)
    ratio = (at.get("ratio_vs_sdpa") or {}).get("paired_median") if at else None
    out = {"ch10_bf16_fails_from": f"{fails[0]:,}" if fails else "—",
           "ch10_bf16_lanes_worst": f"{float(lanes[-1]['gate']['worst']):.2f}" if lanes else "—",
           "ch10_bf16_passes_to": f"{passing[-1]:,}" if passing else "—",
           "ch10_bf16_pkg_all_pass": "every" if package and len(passing) == len(package) else "not every",
           "ch10_bf16_pkg_worst": f"{max(float(r['gate']['worst']) for r in package):.3f}" if package else "—",
           "ch10_bf16_pkg_time": f"{ratio:.2f}" if ratio is not None else "—"}
    gf = gpu_frame(gpu)

    def ms(variant: str, dtype: str) -> float | None:
        sel = gf[(gf.variant == variant) & (gf.L == L) & (gf.dtype == dtype) & (gf["mode"] == "fwd+bwd")
                 & (gf.status == "ok")]
        return float(sel.time_ms.iloc[0]) if len(sel) else None

    f32, b16 = ms("goat-lanes", "float32"), ms("sdpa", "bfloat16")
    out["ch10_gpu_goat_f32_over_bf16"] = f"{f32 / b16:.1f}" if f32 and b16 else "—"
    return out
