"""Chapter 10's reader of `benchmarks/utilisation.py` results: the family table's arithmetic, the text's
figures, and a result file that lacks what the page reads."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from companion.book.chapters import utilisation as u
from companion.cost import records


def _family(flops, before, after, peak=1e10):
    arms = {}
    for name, s in (("before", before), ("after", after)):
        if s is not None:
            arms[name] = {"seconds_per_run": s, "utilisation": flops / (s * peak)}
    return {"flops": {"run": flops}, "arms": arms}


def _cpu():
    return {"machine": {"cpu_model": "AMD EPYC"}, "peak_one_thread": {"peak_flops": 1e10}, "arms": ["before", "after"],
            "finished": "2026-12-04T21:00:00+00:00",
            "families": {"gotu-mask": _family(2e10, 4.0, 2.5), "arithmetic": _family(5e10, 10.0, 8.0)},
            "reproduction": {"runs": 609, "flops": 3e15, "after": {"train_seconds": 600.0, "utilisation": 0.25},
                             "before": {"train_seconds": 1200.0, "utilisation": 0.125}}}


def _gpu():
    return {"machine": {"gpu_name": "NVIDIA H200"}, "peak_one_thread": {"peak_flops": 5e13}, "arms": ["after"],
            "finished": "2026-12-04", "families": {"gotu-mask": _family(2e10, None, 1.0, peak=5e13)}}


def test_family_table_divides_before_by_after_and_reads_the_shares_as_percent():
    t = u.family_table(_cpu(), _gpu())
    row = t.loc[u.FAMILIES["gotu-mask"]]
    assert row["speed-up"] == 4.0 / 2.5
    assert row["% of peak, after"] == pytest.approx(100 * 2e10 / (2.5 * 1e10))
    assert row["% of peak, before"] == pytest.approx(100 * 2e10 / (4.0 * 1e10))
    assert row["GFLOP a run"] == 20.0
    assert row["s a run, GPU"] == 1.0
    assert row["% of peak, GPU"] == pytest.approx(100 * 2e10 / 5e13)
    # a family the GPU did not measure has no GPU cell, not a zero
    assert pd.isna(t.loc[u.FAMILIES["arithmetic"], "s a run, GPU"])


def test_numbers_name_the_lowest_and_highest_family_and_the_whole_reproduction():
    n = u.numbers(_cpu(), _gpu())
    # gotu: 2e10 / 2.5e10 = 80 %, arithmetic: 5e10 / 8e10 = 62.5 %
    assert n["ch10_util_after_low_family"] == u.FAMILIES["arithmetic"]
    assert n["ch10_util_after_high"] == "80 %"
    assert n["ch10_util_speedup_low"] == "1.25" and n["ch10_util_speedup_high"] == "1.60"
    assert n["ch10_util_repro_after"] == "25 %" and n["ch10_util_repro_before_min"] == "20.0"
    assert n["ch10_util_runs"] == "609" and n["ch10_util_repro_tflop"] == "3,000"
    assert n["ch10_util_gpu"] == "NVIDIA H200"


def test_a_result_without_its_counted_flops_is_refused_by_name(tmp_path, monkeypatch):
    bad = _cpu()
    del bad["families"]["arithmetic"]["flops"]
    (tmp_path / records.RESULTS).mkdir(parents=True)
    (tmp_path / records.RESULTS / "utilisation-x.json").write_text(json.dumps(bad))
    monkeypatch.setattr(u, "repo_root", lambda: tmp_path)
    with pytest.raises(ValueError, match="'arithmetic' lacks its counted FLOPs"):
        u.load_utilisation("utilisation-x")
    (tmp_path / records.RESULTS / "utilisation-x.json").write_text('{"machine": {}}')
    with pytest.raises(ValueError, match="lacks"):
        u.load_utilisation("utilisation-x")


def test_the_committed_gpu_result_reads():
    g = u.load_utilisation(u.GPU_UTILISATION)
    t = u.family_table({**g, "families": g["families"]}, None)
    assert set(t.index) <= set(u.FAMILIES.values())
    assert (t["% of peak, after"] > 0).all()
