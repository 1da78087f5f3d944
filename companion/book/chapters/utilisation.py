"""How much of the machine a `ci` training run uses: `benchmarks/utilisation.py`'s committed results, read
for Chapter 10.

A result holds, per model family at its `ci` shape, the counted FLOPs of one run and the seconds a run took
under each arm ("before": attention on PyTorch's paths; "after": the package's small-map kernel), both as a
share of the one-thread peak measured in the same process, and optionally the whole reproduction's FLOPs
over its wall time and the all-core peak. `family_table` lays the CPU result beside a GPU one; `numbers`
gives the text's figures by glue name.
"""

from __future__ import annotations

import pandas as pd

from companion.cost import records
from companion.paths import repo_root

__all__ = ["CPU_UTILISATION", "GPU_UTILISATION", "REQUIRED", "FAMILIES", "load_utilisation", "family_table", "numbers"]

CPU_UTILISATION = "utilisation-cpu-vm-2core"  # the 2-core VM, before and after, with the whole reproduction
GPU_UTILISATION = "utilisation-h200"  # the same families on one H200, the package as it trains ("after")
REQUIRED = ("machine", "peak_one_thread", "arms", "families", "finished")
FAMILIES = {  # the benchmark's family → what the page calls it (its chapters)
    "gotu-mask": "GOTU encoder, learnable mask (Ch. 3, 6)", "gotu-default": "GOTU encoder, default (Ch. 3, 6)",
    "symmetry": "symmetric mask, moved set (Ch. 3)", "arithmetic": "arithmetic decoder (Ch. 4)",
    "copy-mixture": "copy-mixture decoder, GOAT (Ch. 7, 8)", "char-lm": "character model, RoPE (Ch. 5, 9)",
    "passkey": "passkey decoder, GOAT (Ch. 9)", "vit": "ViT on the digits, learnable mask (Ch. 5)",
}


def load_utilisation(stem: str) -> dict:
    """One committed utilisation result; a file without what the chapter reads is an error that says so."""
    result = records.load(repo_root() / records.RESULTS / f"{stem}.json", REQUIRED)
    for fam, entry in result["families"].items():
        if "flops" not in entry or "run" not in entry["flops"] or not entry.get("arms"):
            raise ValueError(f"{stem}.json: family {fam!r} lacks its counted FLOPs or its timed arms; rerun "
                             "benchmarks/utilisation.py for it.")
    return result


def _arm(entry: dict, arm: str, key: str) -> float | None:
    value = entry["arms"].get(arm, {}).get(key)
    return None if value is None else float(value)


def family_table(cpu: dict, gpu: dict | None = None) -> pd.DataFrame:
    """One row per family of `cpu`: a run's GFLOPs, its seconds and share of the one-thread peak before and
    after the kernel, the speed-up, and (when `gpu` has the family) a run's seconds and share on the GPU."""
    rows = []
    for fam, e in cpu["families"].items():
        before, after = _arm(e, "before", "seconds_per_run"), _arm(e, "after", "seconds_per_run")
        row = {"family": FAMILIES.get(fam, fam), "GFLOP a run": e["flops"]["run"] / 1e9,
               "s a run, before": before, "s a run, after": after,
               "speed-up": before / after if before and after else None,
               "% of peak, before": _pct(_arm(e, "before", "utilisation")),
               "% of peak, after": _pct(_arm(e, "after", "utilisation"))}
        if gpu is not None:
            g = gpu["families"].get(fam)
            row["s a run, GPU"] = None if g is None else _arm(g, "after", "seconds_per_run")
            row["% of peak, GPU"] = None if g is None else _pct(_arm(g, "after", "utilisation"))
        rows.append(row)
    return pd.DataFrame(rows).set_index("family")


def _pct(share: float | None) -> float | None:
    return None if share is None else 100 * share


def numbers(cpu: dict, gpu: dict | None = None) -> dict[str, str]:
    """The text's figures, formatted, by glue name (`ch10_util_*`)."""
    table = family_table(cpu, gpu)
    after = table["% of peak, after"].dropna()
    speed = table["speed-up"].dropna()
    out = {"ch10_util_cpu": cpu["machine"]["cpu_model"],
           "ch10_util_peak": f"{cpu['peak_one_thread']['peak_flops'] / 1e9:.0f}",
           "ch10_util_after_low": f"{after.min():.0f} %", "ch10_util_after_low_family": str(after.idxmin()),
           "ch10_util_after_high": f"{after.max():.0f} %", "ch10_util_after_high_family": str(after.idxmax()),
           "ch10_util_speedup_low": f"{speed.min():.2f}", "ch10_util_speedup_high": f"{speed.max():.2f}",
           "ch10_util_date": cpu["finished"][:10]}
    rep = cpu.get("reproduction")
    if rep:
        out["ch10_util_runs"] = f"{rep['runs']:,}"
        out["ch10_util_repro_tflop"] = f"{rep['flops'] / 1e12:,.0f}"
        for arm in ("before", "after"):
            if arm in rep:
                out[f"ch10_util_repro_{arm}_min"] = f"{rep[arm]['train_seconds'] / 60:.1f}"
                out[f"ch10_util_repro_{arm}"] = f"{100 * rep[arm]['utilisation']:.0f} %"
    if gpu is not None:
        g = table["% of peak, GPU"].dropna()
        out["ch10_util_gpu"] = gpu["machine"].get("gpu_name", "GPU")
        out["ch10_util_gpu_high"] = f"{g.max():.1f} %"
        out["ch10_util_gpu_low"] = f"{g.min():.1f} %"
    return out
