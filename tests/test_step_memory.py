"""The whole-step memory benchmark (companion.cost.step): real numbers from fresh processes, with
ratios computed in the same run. Nothing is timed against a threshold here."""

from __future__ import annotations

import pytest

from companion.cost.step import StepShape, measure_step, run_steps

# activations of 16 × 128 × 64 floats (512 KiB a tensor) are above glibc's mmap threshold that the probe
# sets (64 KiB), so each step maps fresh memory and its peak is visible. At batch 4 (a peak near 1.8 MB)
# one clean-clone run measured 0: the kernel updates a process's RSS counters lazily, in batches of
# page faults, so a peak that small can be missed; at 16 the peak is several times that slack.
TINY = StepShape(d_model=64, n_layers=1, n_heads=2, d_head=32, d_ff=128, seq_len=128, batch=16)


def test_a_step_in_a_fresh_process_reports_its_peak():
    r = measure_step("goat", TINY, threads=1)
    assert r["status"] == "ok", r
    assert r["peak_bytes"] > 0 and r["time_s"] > 0 and r["params"] > 0


def test_each_method_runs_in_its_own_process_and_ratios_are_to_rope():
    result = run_steps(("rope", "goat"), TINY, threads=1)
    assert [r["status"] for r in result["results"]] == ["ok", "ok"], result["results"]
    assert result["ratios_vs_rope"]["rope"] == {"memory": 1.0, "time": 1.0}
    goat = next(r for r in result["results"] if r["method"] == "goat")
    rope = next(r for r in result["results"] if r["method"] == "rope")
    assert result["ratios_vs_rope"]["goat"]["memory"] == pytest.approx(goat["peak_bytes"] / rope["peak_bytes"])
    assert goat["params"] != rope["params"]  # GOAT's prior adds parameters; RoPE has none
    # each process computes with flush-to-zero on, and measures that it did
    assert result["settings"]["flush_denormal"] is True
    assert goat["flush_denormal"] == rope["flush_denormal"] == {"on": True, "flushed_share": 1.0}


def test_flush_to_zero_can_be_left_off():
    result = run_steps(("goat",), TINY, threads=1, flush_denormal=False)
    assert result["settings"]["flush_denormal"] is False
    assert result["results"][0]["flush_denormal"] == {"on": False, "flushed_share": 0.0}


def test_an_unknown_method_is_reported_not_raised():
    result = run_steps(("rope", "nope"), TINY, threads=1)
    bad = result["results"][1]
    assert bad["status"] == "error" and "unknown method 'nope'" in bad["reason"]
    assert "nope" not in result["ratios_vs_rope"]


def test_a_zero_reference_gives_no_ratio_instead_of_a_crash(monkeypatch):
    import companion.cost.step as step
    from companion.book.chapters.ch10_cost import step_frame

    fake = {"rope": 0, "goat": 4096}
    monkeypatch.setattr(step, "measure_step", lambda m, shape, **kw: {
        "status": "ok", "method": m, "peak_bytes": fake[m], "time_s": 1.0, "params": 1})
    result = run_steps(("rope", "goat"), TINY)
    assert result["ratios_vs_rope"]["goat"] == {"memory": None, "time": 1.0}
    frame = step_frame(result)
    assert frame["memory vs RoPE"].isna().all() and frame.loc["goat", "time vs RoPE"] == 1.0
