"""Chapter 10's readers of benchmark JSON and the roofline arithmetic."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from companion.book import ch10_cost as cr
from companion.cost.roofline import attention_bytes, attention_flops, bound_s


def _result(rows, **extra):
    return {"machine": {}, "settings": {}, "ratios": {}, "finished": "now", "results": rows, **extra}


def _rec(variant, L, mode="fwd+bwd", t=1.0, peak=100, ratio=1.0, status="ok"):
    return {"variant": variant, "L": L, "mode": mode, "status": status, "time_s": {"median": t, "iqr": 0.1 * t},
            "ratio_vs_sdpa": {"median_ratio": ratio, "paired_median": ratio}, "memory": {"peak_bytes": peak},
            "backend": {"kind": "fused"}}


def test_a_damaged_or_partial_result_is_refused_with_its_name(tmp_path):
    bad = tmp_path / "attention-x.json"
    bad.write_text('{"results": [')
    with pytest.raises(ValueError, match="attention-x.json is not a readable benchmark result"):
        cr.load(bad)
    bad.write_text(json.dumps({"results": []}))
    with pytest.raises(ValueError, match="lacks \\['machine', 'settings', 'ratios', 'finished'\\]"):
        cr.load(bad)


def test_frame_divides_memory_by_sdpa_at_the_same_length_and_mode():
    rows = [_rec("sdpa", 1024, peak=2**20), _rec("mask-sdpa", 1024, peak=8 * 2**20, ratio=3.0),
            _rec("sdpa", 1024, "fwd", peak=2**19), _rec("mask-sdpa", 1024, "fwd", peak=2**20)]
    df = cr.frame(_result(rows))
    got = df.set_index(["variant", "mode"])
    assert got.loc[("mask-sdpa", "fwd+bwd"), "memory_ratio"] == 8.0
    assert got.loc[("mask-sdpa", "fwd"), "memory_ratio"] == 2.0
    assert got.loc[("mask-sdpa", "fwd+bwd"), "time_ms"] == 1000.0
    assert cr.wide(df, "paired_ratio", "fwd+bwd").loc["mask-sdpa", 1024] == 3.0


def test_growth_exponent_recovers_a_power_law():
    Ls = [512, 1024, 2048, 4096]
    rows = [_rec("mask-sdpa", L, peak=3 * L**2) for L in Ls] + [_rec("sdpa", L, peak=7 * L) for L in Ls]
    df = cr.frame(_result(rows))
    assert cr.growth_exponent(df, "mask-sdpa", "fwd+bwd") == pytest.approx(2.0)
    assert cr.growth_exponent(df, "sdpa", "fwd+bwd") == pytest.approx(1.0)
    assert np.isnan(cr.growth_exponent(df, "sdpa", "fwd+bwd", min_L=4096))  # one point is no slope


def test_goal_table_says_met_or_not():
    df = cr.frame(_result([_rec("sdpa", 4096), _rec("goat-lanes", 4096, ratio=1.05), _rec("mask-sdpa", 4096, ratio=4.0)]))
    t = cr.goal_table(df, 4096, {"goat-lanes": ("paired_ratio", 1.15), "mask-sdpa": ("paired_ratio", 2.0)})
    assert t["met"].tolist() == [True, False]


def test_the_committed_results_load():
    results = cr.committed()
    assert "attention-cpu-vm-2core" in results
    steps = cr.step_frame(cr.load_steps("step-memory-cpu"))
    assert steps.loc["rope", "memory vs RoPE"] == 1.0 and {"goat", "rope"} <= set(steps.index)


def test_roofline_counts_match_a_hand_count():
    # L = 2, causal: 3 visible entries; each costs 2·D for q·k and 2·D for p·v
    assert attention_flops(2, B=1, H=1, D=4, mode="fwd") == 3 * 4 * 4
    assert attention_flops(2, B=1, H=1, D=4, mode="fwd+bwd") == 3.5 * 48
    assert attention_flops(2, B=1, H=1, D=4, mode="fwd", causal=False) == 4 * 4 * 4
    assert attention_bytes(8, B=1, H=2, D=4, mode="fwd") == 4 * 4 * 2 * 8 * 4
    assert attention_bytes(8, B=1, H=2, D=4, mode="fwd+bwd", bias_heads=1) == 4 * (8 * 2 * 8 * 4 + 2 * 64)
    peak = {"peak_flops": 100.0, "bandwidth_bytes_s": 10.0}
    assert bound_s(1000, 50, peak) == 10.0 and bound_s(100, 500, peak) == 50.0


def test_native_output_is_silenced_only_inside_the_block(capfd):
    import os

    from companion.cost import native_output_silenced

    with native_output_silenced():
        os.write(2, b"profiler noise\n")
        os.write(1, b"more noise\n")
    os.write(2, b"after\n")
    out, err = capfd.readouterr()
    assert "noise" not in out + err and err == "after\n"
