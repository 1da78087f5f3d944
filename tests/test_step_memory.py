"""The whole-step memory benchmark (companion.cost.step): real numbers from fresh processes, with
ratios computed in the same run. Nothing is timed against a threshold here."""

from __future__ import annotations

import pytest

from companion.cost.step import StepShape, measure_step, run_steps

TINY = StepShape(d_model=32, n_layers=1, n_heads=2, d_head=16, d_ff=64, seq_len=32, batch=2)


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


def test_an_unknown_method_is_reported_not_raised():
    result = run_steps(("rope", "nope"), TINY, threads=1)
    bad = result["results"][1]
    assert bad["status"] == "error" and "unknown method 'nope'" in bad["reason"]
    assert "nope" not in result["ratios_vs_rope"]
