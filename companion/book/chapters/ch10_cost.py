"""Chapter 10: what a prior costs, read from the committed benchmark results (`benchmarks/`).

The CPU sweep's curves, the roofline, the goals on this CPU, the whole training step and the claims are here; what is
read at the goals' length from the GPU runs and from GOAT's lanes chunked and in bfloat16 is `cost_readings`
(re-exported for the notebook).

Nothing here times anything. The JSON `load` gathers (see its docstring) is read into frames by
`companion.cost.records` (`frame`, `gpu_frame`, `step_frame`), beside what writes it; everything here is read from
those frames. A rerun on the executing machine (`companion.cost.run_benchmark`) comes back as the same JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.claims import load_ledger
from companion.book.labels import VARIANTS, label
from companion.book.parameters import check_parameters
from companion.book.chapters import utilisation
from companion.book.chapters.cost_readings import (GOAL_L, GPU_GOALS, bf16_goat_numbers, bf16_goat_table,
                                                   chunked_numbers, chunked_table, gpu_flex_status, gpu_gate_failures,
                                                   gpu_goal_table, gpu_goals_display, gpu_prose_numbers,
                                                   gpu_provenance, gpu_ratio_table, gpu_ratios, gpu_worst, value_at)
from companion.book.chapters.subnormals import by_flush, cliff_numbers, cliff_table, flush_setting
from companion.cost import records
from companion.cost.records import RESULTS, committed, frame, gpu_frame, gpu_results, load_steps, step_frame
from companion.cost.roofline import attention_bytes, attention_flops, bound_s
from companion.paths import repo_root

__all__ = ["RESULTS", "CPU_RESULT", "BF16_RESULT", "CHUNKED_RESULT", "chunked_table", "chunked_numbers",
           "bf16_goat_table", "bf16_goat_numbers", "MODES", "GOAL_L", "LIVE_VARIANTS", "TIME_GOALS", "MEMORY_GOALS", "SEEDS", "LIVE_LENGTHS", "load", "decide",
           "committed", "gpu_results", "frame", "wide", "settings_table", "variant_curves", "ratio_table", "flex_backward_note", "gpu_flex_status", "quadratic_reference", "growth_exponent", "growth_table",
           "roofline", "floor_shares", "goal_table", "goals_table", "goals_display", "steps_display", "gpu_goals_display", "gpu_ratios", "gpu_gate_failures", "gpu_worst", "GPU_GOALS", "gpu_frame",
           "gpu_ratio_table", "gpu_goal_table", "gpu_provenance", "gpu_prose_numbers", "load_steps", "step_frame",
           "side_by_side", "step_comparison", "CLAIMS", "prose_numbers",
           "PEAK_RESULT", "FTZ_RESULTS", "STEP_FTZ_RESULTS", "REPORTED_RESULT",
           "cliff_results", "cliff_table", "cliff_numbers", "by_flush", "flush_setting", "host_numbers"]

CPU_RESULT = "attention-cpu-vm-2core"  # the committed CPU sweep the chapter reads
BF16_RESULT = "attention-cpu-vm-2core-bf16"  # GOAT's lanes in bfloat16 on the same CPU (gate and time)
CHUNKED_RESULT = "attention-cpu-vm-2core-chunked"  # GOAT's lanes a few heads at a time, beside one call
PEAK_RESULT = "peak-cpu-vm-2core"  # the sweep machine's peak rates (benchmarks/peak.py): the roofline's divisor
FTZ_RESULTS = ("attention-cpu-vm-2core-ftz", "attention-cpu-vm-2core-noftz")  # flush-to-zero on and off
STEP_FTZ_RESULTS = ("step-memory-cpu-ftz", "step-memory-cpu-noftz")  # a GOAT and a RoPE step, on and off
REPORTED_RESULT = "reported-attention-intel-xeon-2core"  # numbers reported from an Intel Xeon, with their source
MODES = ("fwd", "fwd+bwd")
LIVE_VARIANTS = "sdpa,goat-lanes,mask-sdpa,mask-attend,eager-bias"
# A goal is {variant: (column, the claim whose threshold it is)}; the limits live in book/claims.yml.
TIME_GOALS = {"goat-lanes": ("paired_ratio", "S3-15"), "mask-sdpa": ("paired_ratio", "C-02")}
MEMORY_GOALS = {"goat-lanes": ("memory_ratio", "C-01")}
CHUNKED_GOALS = {"goat-chunked": ("memory_ratio", "C-01")}  # beside C-01, from CHUNKED_RESULT


def cliff_results() -> tuple[dict, dict, dict, dict, dict]:
    """(sweep with flush-to-zero on, sweep with it off, the reported numbers, whole steps on, off): the
    subnormal section's committed inputs, each pair sorted by its recorded setting (`by_flush`)."""
    on, off = by_flush(*(records.load(repo_root() / RESULTS / f"{stem}.json") for stem in FTZ_RESULTS))
    steps_on, steps_off = by_flush(*(load_steps(stem) for stem in STEP_FTZ_RESULTS))
    return on, off, records.load_reported(REPORTED_RESULT), steps_on, steps_off


def host_numbers(result: dict) -> dict[str, str]:
    """Where the sweep that decides the CPU claims ran, for the text: its CPU with torch's instruction
    set, and whether it flushed subnormals to zero ("on"/"off"; `flush_setting`)."""
    m = result["machine"]
    return {"ch10_claims_host": m["cpu_model"] + (f" ({m['cpu_capability']})" if m.get("cpu_capability") else ""),
            "ch10_claims_flush": "on" if flush_setting(result) else "off"}


def wide(df: pd.DataFrame, value: str, mode: str) -> pd.DataFrame:
    """variant × L table of one column for one mode (variants in `labels.VARIANTS` order)."""
    t = df[df["mode"] == mode].pivot_table(index="variant", columns="L", values=value)
    return t.reindex([v for v in VARIANTS if v in t.index])


def settings_table(result: dict, gpu: dict[str, dict]) -> pd.DataFrame:
    """What a committed sweep measured and where, and how many GPU results are committed beside it."""
    s, m = result["settings"], result["machine"]
    facts = {"machine": f"{m['cpu_model']}, {m['cpu_affinity']} cores", "torch": result["versions"]["torch"],
             "threads": s["threads"], "dtype": s["dtype"],
             "batch × heads × head dim": f"{s['batch']} × {s['heads']} × {s['head_dim']}",
             "lengths L": ", ".join(map(str, s["lengths"])), "repeats": s["repeats"], "memory": s["memory"],
             "GOAT rank R (lanes)": f"{s['goat_rank']} ({2 * s['goat_rank'] + 1})", "GPU results committed": len(gpu)}
    return pd.Series(facts, name="committed CPU sweep").to_frame()


def variant_curves(df: pd.DataFrame, mode: str) -> dict[str, pd.DataFrame]:
    """{variant: its measured rows of one mode, by L}, variants in `labels.VARIANTS` order."""
    d = df[(df["mode"] == mode) & (df.status == "ok")]
    curves = {v: d[d.variant == v].sort_values("L") for v in VARIANTS}
    return {v: rows for v, rows in curves.items() if len(rows)}


def ratio_table(df: pd.DataFrame) -> pd.DataFrame:
    """Median per-repeat time ratio to SDPA, variant × (mode, L)."""
    return pd.concat({mode: wide(df, "paired_ratio", mode) for mode in MODES}, axis=1)


def flex_backward_note(df: pd.DataFrame) -> str:
    """FlexAttention's forward + backward in words: measured, or the harness's reason (no exception class)."""
    flex = df[(df.variant == "flex") & (df["mode"] == "fwd+bwd")]
    name = label("flex")
    if not len(flex) or flex.status.iloc[0] == "ok":
        return f"{name}: forward + backward is timed at every length."
    reason = str(flex.reason.iloc[0])
    at = re.search(r"at L=(\d+)", reason)
    plain = reason.split(". ")[0].split(": ")[-1].rstrip(".")
    where = f" (the harness stopped at its first call, L = {at.group(1)})" if at else ""
    return (f"{name}: no forward + backward time on this machine. {plain}{where}, so the harness records "
            f"that instead of a time; its forward is timed as usual.")


def quadratic_reference(mem: pd.DataFrame, variant: str = "mask-sdpa", at: int = 1024) -> np.ndarray:
    """A curve ∝ L² through `variant`'s value at L = `at`, over the columns (lengths) of `mem`."""
    return mem.loc[variant, at] * (np.array(mem.columns) / at) ** 2


def growth_exponent(df: pd.DataFrame, variant: str, mode: str, value: str = "peak_mib", *, min_L: int = 1024) -> float:
    """Slope of log(value) against log(L) over L ≥ min_L: 2 for a cost that grows as L², 1 for linear."""
    d = df[(df.variant == variant) & (df["mode"] == mode) & (df.L >= min_L)].dropna(subset=[value])
    if len(d) < 2:
        return float("nan")
    return float(np.polyfit(np.log(d.L), np.log(d[value]), 1)[0])


def growth_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per variant, forward + backward: peak-memory and time exponents over L ≥ 1024, and peak MiB at every L."""
    mem = wide(df, "peak_mib", "fwd+bwd")
    exponents = pd.DataFrame({"peak-memory exponent": {v: growth_exponent(df, v, "fwd+bwd") for v in mem.index},
                              "time exponent": {v: growth_exponent(df, v, "fwd+bwd", "time_ms") for v in mem.index}})
    return pd.concat([exponents, mem.rename(columns=lambda L: f"MiB at {L}")], axis=1)


def _bias_heads(variant: str, heads: int) -> int:
    """How many (L, L) bias planes a variant moves: one shared mask, a per-head Toeplitz bias, or none."""
    if variant in ("mask-sdpa", "eager-bias", "mask-attend"):
        return 1
    return heads if variant == "eager-goat" else 0


def roofline(df: pd.DataFrame, settings: dict, peak: dict) -> pd.DataFrame:
    """Per measured forward + backward call: roofline floor (ms) at `peak` (`measure_peak`), measured time,
    achieved GFLOP/s and the floor's share of the time."""
    shape = {"B": settings["batch"], "H": settings["heads"], "D": settings["head_dim"], "mode": "fwd+bwd"}
    rows = []
    for r in df[(df["mode"] == "fwd+bwd") & (df.status == "ok")].itertuples():
        flops = attention_flops(r.L, **shape)
        nbytes = attention_bytes(r.L, **shape, bias_heads=_bias_heads(r.variant, settings["heads"]))
        rows.append({"variant": r.variant, "L": r.L, "floor_ms": 1e3 * bound_s(flops, nbytes, peak),
                     "measured_ms": r.time_ms, "achieved GFLOP/s": flops / r.time_ms / 1e6})
    roof = pd.DataFrame(rows)
    roof["share of the floor"] = roof.floor_ms / roof.measured_ms
    return roof


def floor_shares(roof: pd.DataFrame) -> pd.DataFrame:
    """The floor's share of the measured time, variant × L (1 would be the speed of light)."""
    t = roof.pivot_table(index="variant", columns="L", values="share of the floor")
    return t.reindex([v for v in VARIANTS if v in set(roof.variant)])


def goal_table(df: pd.DataFrame, L: int, goals: dict[str, tuple[str, float]], mode: str = "fwd+bwd") -> pd.DataFrame:
    """For each variant: its measured ratio at L against the goal {variant: (column, at most)}."""
    rows = []
    for variant, (column, limit) in goals.items():
        value = value_at(df, variant, column, L, mode)
        rows.append({"variant": variant, "measure": column, "at L": L, "ours": value, "goal ≤": limit,
                     "met": bool(value <= limit) if value == value else None})
    return pd.DataFrame(rows).set_index("variant")


def _limits(goals: dict[str, tuple[str, str]]) -> dict[str, tuple[str, float]]:
    """{variant: (column, claim)} → {variant: (column, the claim's threshold in the ledger)}."""
    ledger = load_ledger()
    return {v: (column, float(ledger[cid].rule["threshold"])) for v, (column, cid) in goals.items()}


def goals_table(df: pd.DataFrame, chunked: pd.DataFrame | None = None) -> pd.DataFrame:
    """Time, then memory goals at GOAL_L on the CPU against their claims' thresholds; with `chunked` (`frame` of the
    head-chunked result) a row of its own against C-01's (the claim is decided on the one-call path)."""
    goals = goal_table(df, GOAL_L, _limits(TIME_GOALS)).assign(device="CPU")
    parts = [goals, goal_table(df, GOAL_L, _limits(MEMORY_GOALS)).assign(device="CPU")]
    if chunked is not None:
        parts.append(goal_table(chunked, GOAL_L, _limits(CHUNKED_GOALS)).assign(device="CPU"))
    return pd.concat(parts)


_MEASURES = {"paired_ratio": "time vs plain SDPA", "memory_ratio": "peak memory vs plain SDPA"}


def goals_display(goals: pd.DataFrame) -> pd.DataFrame:
    """`goals_table` as the page shows it (labels, units, the goal as a bound, "yes"/"no"; CPU, forward + backward)."""
    rows = [{"variant": label(v), "measure": _MEASURES.get(r["measure"], r["measure"]), "L": f"{int(r['at L']):,}",
             "ours": "—" if r["ours"] != r["ours"] else f"{r['ours']:.2f} ×", "goal": f"≤ {r['goal ≤']:g} ×",
             "met": {True: "yes", False: "no"}.get(r["met"], "—")} for v, r in goals.iterrows()]
    return pd.DataFrame(rows).set_index("variant")


def steps_display(steps: pd.DataFrame) -> pd.DataFrame:
    """`step_frame` as the page shows it: labelled methods, named units, parameters as integers."""
    def fmt(v, spec):
        return "—" if v is None or v != v else format(v, spec)

    out = pd.DataFrame({
        "peak memory (MiB)": steps["peak MiB"].map(lambda v: fmt(v, ".1f")),
        "memory vs RoPE": steps["memory vs RoPE"].map(lambda v: fmt(v, ".3f")),
        "step time (s)": steps["step s"].map(lambda v: fmt(v, ".3f")),
        "time vs RoPE": steps["time vs RoPE"].map(lambda v: fmt(v, ".3f")),
        "parameters": steps["parameters"].map(lambda v: fmt(int(v), ",") if v == v and v is not None else "—"),
    }, index=steps.index)
    if "reason" in steps:
        out["why not measured"] = steps["reason"].fillna("")
    out.index = [label(m) for m in steps.index]
    out.index.name = "method"
    return out


def side_by_side(committed_frame: pd.DataFrame, live: pd.DataFrame, lengths: list[int]) -> pd.DataFrame:
    """Forward + backward time ratios to SDPA at `lengths`: the committed sweep beside a live one."""
    return pd.concat({"committed": wide(committed_frame, "paired_ratio", "fwd+bwd")[lengths],
                      "here": wide(live, "paired_ratio", "fwd+bwd")[lengths]}, axis=1)


def step_comparison(live_steps: pd.DataFrame, steps: pd.DataFrame) -> str:
    """One line: GOAT over RoPE whole-step peak memory, here and in the committed result."""
    return (f"whole step, GOAT over RoPE peak memory: here {live_steps.loc['goat', 'memory vs RoPE']:.3f}, "
            f"committed {steps.loc['goat', 'memory vs RoPE']:.3f}")


def _worst_words(ratios: Mapping[str, float], failed: Sequence[str] = ()) -> str:
    words = "worst of " + ", ".join(f"{d} {r:.2f} ×" for d, r in sorted(ratios.items()))
    return words + "".join(f"; {d} fails the float64 gate, not timed" for d in failed)


def _gpu_words(variant: str):
    def words(a: dict) -> str:
        ratios = gpu_ratios(a["gpu"], variant)
        return _worst_words(ratios, gpu_gate_failures(a["gpu"], variant)) if ratios else "no GPU result is committed"
    return words


# Over {"cpu": the committed sweep's `frame`, "gpu": the GPU results, "steps": `step_frame`}. C-03: the mask's
# peak-memory exponent; C-01: GOAT's memory over SDPA at GOAL_L on this CPU; S3-15 and C-02: GOAT's lanes and the mask
# over SDPA at GOAL_L on a GPU, the worse precision (None without a GPU result; the ratio per precision and those
# that failed the gate beside it, and for S3-15 this CPU's ratio); S3-16: GOAT over RoPE, whole step.
CLAIMS = (
    Measure("C-03", lambda a: round(growth_exponent(a["cpu"], "mask-sdpa", "fwd+bwd"), 3)),
    Measure("S3-15", lambda a: gpu_worst(a["gpu"], "goat-lanes"),
            detail=lambda a: _gpu_words("goat-lanes")(a) + f"; on this CPU {value_at(a['cpu'], 'goat-lanes', 'paired_ratio'):.2f} ×"),
    Measure("C-01", lambda a: round(value_at(a["cpu"], "goat-lanes", "memory_ratio"), 3)),
    Measure("C-02", lambda a: gpu_worst(a["gpu"], "mask-attend"), detail=_gpu_words("mask-attend")),
    Measure("S3-16", lambda a: round(float(a["steps"].loc["goat", "memory vs RoPE"]), 3)),
)


def prose_numbers(result: dict, peak: dict, steps: pd.DataFrame, live_lengths: list[int]) -> dict[str, str]:
    """The text's numbers from the CPU sweep (`result`), `peak`, the whole-step result and the live lengths, formatted,
    by glue name."""
    s, cpu = result["settings"], frame(result)
    t, t_fwd = wide(cpu, "paired_ratio", "fwd+bwd"), wide(cpu, "paired_ratio", "fwd")
    mem = wide(cpu, "peak_mib", "fwd+bwd")
    shares = floor_shares(roofline(cpu, s, peak))
    out = {"ch10_live_lengths": ", ".join(map(str, live_lengths)), "ch10_threads": str(s["threads"]),
           "ch10_heads": str(s["heads"]), "ch10_head_dim": str(s["head_dim"]),
           "ch10_cpu": result["machine"]["cpu_model"]}
    for variant, L in (("goat-lanes", 1024), ("goat-lanes", 4096), ("mask-sdpa", 4096), ("mask-sdpa", 8192),
                       ("eager-bias", 4096), ("eager-goat", 4096)):
        out[f"ch10_t_{variant}_{L}"] = f"{t.loc[variant, L]:.2f}"
    out["ch10_mask_fwd_4096"] = f"{t_fwd.loc['mask-sdpa', 4096]:.2f}"
    out["ch10_flex_fwd_4096"] = f"{t_fwd.loc['flex', 4096]:.2f}"
    for v in ("sdpa", "goat-lanes", "mask-sdpa"):
        out[f"ch10_exp_{v}"] = f"{growth_exponent(cpu, v, 'fwd+bwd'):.2f}"
        out[f"ch10_mib_{v}"] = f"{mem.loc[v, 4096]:,.1f}"
    out["ch10_mib_mask_8192"] = f"{mem.loc['mask-sdpa', 8192] / 1024:.1f}"
    out["ch10_peak_gflops"] = f"{peak['peak_flops'] / 1e9:.0f}"
    out["ch10_bandwidth"] = f"{peak['bandwidth_bytes_s'] / 1e9:.1f}"
    out["ch10_peak_source"] = peak.get("source", "measured on the machine that executed this page, as it did")
    share = shares.loc["sdpa", 4096]
    # peak and sweep ran at different moments on a shared machine: a share above 1 is not a call beating the floor
    out["ch10_sdpa_share"] = (f"{share:.0%}" if share <= 1 else
                              f"{share:.0%} (above 1 only because the peak was measured at a busier moment "
                              "than the sweep ran)")
    out["ch10_goat_mem_ratio"] = f"{value_at(cpu, 'goat-lanes', 'memory_ratio'):.2f}"
    out["ch10_step_goat"] = f"{steps.loc['goat', 'memory vs RoPE']:.2f}"
    out["ch10_step_rope_mib"] = f"{steps.loc['rope', 'peak MiB']:.0f}"
    out["ch10_step_goat_mib"] = f"{steps.loc['goat', 'peak MiB']:.0f}"
    return out


SEEDS = ()  # the chapter reads committed results: no seeds
LIVE_LENGTHS = (256, 512, 1024)  # the notebook's `live_lengths`: its optional live sweep on the executing machine


def load(profile: str = "ci", seeds=None, *, store=None) -> Runs:
    """Blocks: "committed" (every attention result by stem), "steps" and "gpu_steps" (whole steps on this CPU and
    the H200), "peak" (the sweep machine's peak rates), "cliff" (`cliff_results`), "utilisation" (how much
    of the CPU and of the H200 a `ci` run uses, `utilisation.load_utilisation`). `seeds` must be None; `store`
    is unused (common interface)."""
    check_parameters(profile)
    if seeds is not None:
        raise ValueError(f"Chapter 10 reads committed benchmark results and takes no seeds, got {list(seeds)!r}.")
    return Runs(profile, SEEDS, {"committed": committed(), "steps": load_steps("step-memory-cpu"),
                                 "gpu_steps": load_steps("step-memory-h200"), "peak": records.load_peak(PEAK_RESULT),
                                 "cliff": cliff_results(),
                                 "utilisation": {"cpu": utilisation.load_utilisation(utilisation.CPU_UTILISATION),
                                                 "gpu": utilisation.load_utilisation(utilisation.GPU_UTILISATION)}})


def decide(runs: Runs, *, peak: dict | None = None, live_lengths: Sequence[int] = LIVE_LENGTHS) -> Findings:
    """Every claim, from the committed results (a live rerun decides none), and every cited number. `peak`: rates
    measured on the executing machine (default: committed); `live_lengths`: the live sweep's lengths, for the text."""
    results = runs["committed"]
    cpu_result, gpu = results[CPU_RESULT], gpu_results(results)
    cpu, steps, gpu_steps = frame(cpu_result), step_frame(runs["steps"]), step_frame(runs["gpu_steps"])
    chunked, bf16, cliff = results[CHUNKED_RESULT], results[BF16_RESULT], runs["cliff"]
    peak = runs["peak"] if peak is None else peak
    d = Decision()
    d.measure(CLAIMS, {"cpu": cpu, "gpu": gpu, "steps": steps})
    d.glue(chunked_numbers(chunked))
    d.glue({**cliff_numbers(*cliff), **host_numbers(cpu_result)})
    d.glue(gpu_prose_numbers(gpu, gpu_steps))
    d.glue(bf16_goat_numbers(bf16, gpu))
    d.glue(prose_numbers(cpu_result, peak, steps, list(live_lengths)))
    util = runs["utilisation"]
    d.glue(utilisation.numbers(util["cpu"], util["gpu"]))
    return d.done(cpu_result=cpu_result, cpu=cpu, lengths=cpu_result["settings"]["lengths"], gpu_results=gpu,
                  gf=gpu_frame(gpu), steps=steps, gpu_steps=gpu_steps, chunked_result=chunked, bf16_result=bf16,
                  cliff=cliff, peak=peak, utilisation=utilisation.family_table(util["cpu"], util["gpu"]))
