"""Reading the benchmark harness's JSON (companion.cost.records): a file the harness writes reads back
into the same frame, and a damaged, partial or foreign file is refused with its name and the fix."""

from __future__ import annotations

import json

import numpy as np
import pytest

from companion.cost import records

MiB = 2**20


def _sweep(device="cpu", dtype="float32", **extra):
    rows = [{"variant": "sdpa", "L": 256, "mode": "fwd+bwd", "status": "ok", "time_s": {"median": 0.002, "iqr": 0.0002},
             "ratio_vs_sdpa": {"median_ratio": 1.0, "paired_median": 1.0}, "memory": {"peak_bytes": 4 * MiB},
             "backend": {"kind": "sdpa", "sdp_choice_names": ["FLASH"]}},
            {"variant": "goat-lanes", "L": 256, "mode": "fwd+bwd", "status": "ok",
             "time_s": {"median": 0.003, "iqr": 0.0003}, "ratio_vs_sdpa": {"median_ratio": 1.5, "paired_median": 1.4},
             "memory": {"peak_bytes": 6 * MiB}, "gate": {"passed": True, "worst": 0.01, "tol": 0.06}},
            {"variant": "flex", "L": 256, "mode": "fwd+bwd", "status": "error", "reason": "no backward here"}]
    return {"benchmark": "attention", "machine": {"gpu_name": "G"}, "settings": {"device": device, "dtype": dtype},
            "results": rows, "ratios": {}, "finished": "2026-12-03T10:00:00", **extra}


def test_a_written_sweep_reads_back_into_its_frame(tmp_path):
    path = tmp_path / "attention-x.json"
    records.write_result(path, _sweep())  # the harness's own writer
    result = records.load(path)
    assert result == _sweep()
    df = records.frame(result).set_index("variant")
    assert df.loc["goat-lanes", "time_ms"] == pytest.approx(3.0) and df.loc["sdpa", "iqr_ms"] == pytest.approx(0.2)
    assert df.loc["goat-lanes", "paired_ratio"] == 1.4 and df.loc["goat-lanes", "time_ratio"] == 1.5
    assert df.loc["goat-lanes", "memory_ratio"] == 1.5 and df.loc["goat-lanes", "peak_mib"] == 6.0
    assert (df.loc["goat-lanes", "gate_worst"], df.loc["goat-lanes", "gate_tol"]) == (0.01, 0.06)
    assert np.isnan(df.loc["sdpa", "gate_worst"]) and df.loc["sdpa", "sdp_choices"] == ("FLASH",)
    assert df.loc["flex", "status"] == "error" and df.loc["flex", "reason"] == "no backward here"
    assert np.isnan(df.loc["flex", "time_ms"]) and np.isnan(df.loc["flex", "memory_ratio"])


def test_gpu_results_are_picked_by_device_and_flattened_once_in_file_order():
    results = {"cpu": _sweep(), "a": _sweep("cuda:0", "float32"), "b": _sweep("cuda", "bfloat16")}
    gpu = records.gpu_results(results)
    assert list(gpu) == ["a", "b"]
    gf = records.gpu_frame(gpu)
    assert gf.dtype.tolist() == ["float32"] * 3 + ["bfloat16"] * 3 and set(gf.gpu) == {"G"}
    assert gf[gf.dtype == "bfloat16"].drop(columns=["dtype", "gpu"]).reset_index(drop=True).equals(
        records.frame(results["b"]))
    empty = records.gpu_frame({})
    assert len(empty) == 0 and {"variant", "L", "mode", "status", "paired_ratio", "dtype"} <= set(empty.columns)


def test_a_whole_step_result_reads_back_with_failed_methods_kept(tmp_path):
    steps = {"machine": {}, "settings": {}, "finished": "now",
             "results": [{"method": "rope", "status": "ok", "peak_bytes": 100 * MiB, "time_s": 2.0, "params": 10},
                         {"method": "goat", "status": "error", "reason": "probe died", "peak_bytes": None,
                          "time_s": None}],
             "ratios_vs_rope": {"rope": {"memory": 1.0, "time": 1.0}, "goat": {"memory": None, "time": None}}}
    path = tmp_path / "step.json"
    path.write_text(json.dumps(steps))
    df = records.step_frame(records.load(path, ("machine", "settings", "results", "ratios_vs_rope", "finished")))
    assert df.loc["rope", "peak MiB"] == 100.0 and df.loc["rope", "memory vs RoPE"] == 1.0
    assert np.isnan(df.loc["goat", "memory vs RoPE"]) and df.loc["goat", "reason"] == "probe died"
    ok = {**steps, "results": steps["results"][:1]}
    assert "reason" not in records.step_frame(ok).columns  # no failure: no status columns


@pytest.mark.parametrize("text, says", [
    ('{"results": [', "is not a readable benchmark result"),                      # cut off mid-write
    ("", "is not a readable benchmark result"),                                 # empty
    ("[1, 2]", "is not a readable benchmark result (a JSON list, not an object)"),  # foreign
    (json.dumps({"results": []}), "lacks ['machine', 'settings', 'ratios', 'finished']"),  # interrupted
])
def test_a_corrupt_or_incomplete_file_is_refused_naming_the_file_and_the_fix(tmp_path, text, says):
    bad = tmp_path / "attention-broken.json"
    bad.write_text(text)
    with pytest.raises(ValueError) as err:
        records.load(bad)
    message = str(err.value)
    assert str(bad) in message and says in message and "erun" in message  # "rerun"/"Rerun": the fix


def test_a_missing_file_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match="nowhere.json is not a readable benchmark result"):
        records.load(tmp_path / "nowhere.json")


def test_the_committed_results_load_through_the_reader():
    results = records.committed()
    assert "attention-cpu-vm-2core" in results and all("results" in r for r in results.values())
    assert records.load_peak("peak-cpu-vm-2core")["source"].startswith("measured by benchmarks/peak.py on ")
    assert {"goat", "rope"} <= set(records.step_frame(records.load_steps()).index)


def test_write_result_replaces_a_file_whole_and_leaves_nothing_beside_it(tmp_path):
    path = tmp_path / "deep" / "attention-x.json"
    result = {"machine": {}, "settings": {}, "results": [], "ratios": {}, "finished": "now"}
    assert records.write_result(path, result) == path
    assert records.load(path) == result
    records.write_result(path, {**result, "finished": "later"})
    assert records.load(path)["finished"] == "later"
    assert [p.name for p in path.parent.iterdir()] == ["attention-x.json"]
