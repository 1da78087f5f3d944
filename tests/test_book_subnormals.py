"""Chapter 10's subnormal section (companion.book.chapters.subnormals, through ch10_cost): which sweep had
flush-to-zero is read from the file, the table and glued numbers follow the results they are given,
and the committed files are what the section says they are."""

from __future__ import annotations

import json

import pytest

from companion.book.chapters import ch10_cost as cr
from companion.book.chapters.subnormals import by_flush, cliff_numbers, cliff_table, flush_setting, subnormal_band
from companion.paths import repo_root


def _rec(variant, L, ratio, fraction, zero=0.0):
    return {"variant": variant, "L": L, "mode": "fwd+bwd", "status": "ok",
            "ratio_vs_sdpa": {"median_ratio": ratio, "paired_median": ratio, "per_repeat": [ratio - 0.05, ratio, ratio + 0.1]},
            "subnormals": {"status": "ok", "prob_fraction": fraction, "prob_zero_fraction": zero}}


def _sweep(flush, goat_ratio):
    rows = [_rec("sdpa", L, 1.0, 0.0) for L in (1024, 4096)]
    rows += [_rec("goat-lanes", 1024, goat_ratio, 0.025, 0.13), _rec("goat-lanes", 4096, goat_ratio, 0.0316, 0.35)]
    rows += [_rec("goat-chunked", L, goat_ratio + 0.1, 0.03) for L in (1024, 4096)]
    rows += [_rec("mask-sdpa", L, 4.0, 0.0) for L in (1024, 4096)]
    settings = {"heads": 8, "flush_denormal": flush, "flush_denormal_check": {"flushed_share": 1.0 if flush else 0.0}}
    return {"machine": {"cpu_model": "AMD EPYC", "cpu_capability": "AVX512"}, "settings": settings, "results": rows}


REPORTED = {"source": "reported somewhere", "machine": {"cpu_model": "Intel Xeon", "cpu_capability": "AVX512"},
            "ratio_vs_sdpa": {"1024": {"sdpa": 1.0, "goat-lanes": 3.3}, "4096": {"sdpa": 1.0, "goat-lanes": 4.0}},
            "sdpa_call_ms": {"random": 300, "lanes": 1200, "lanes_flush_denormal": 294},
            "training": {"seconds_flush_off": 40.0, "seconds_flush_on": 41.0}}


def _steps(flush, goat, rope):
    return {"settings": {"flush_denormal": flush, "shape": {"seq_len": 1024}},
            "results": [{"method": "rope", "status": "ok", "time_s": rope}, {"method": "goat", "status": "ok", "time_s": goat}]}


def test_which_sweep_flushed_is_read_from_the_file_not_its_name():
    on, off = _sweep(True, 1.0), _sweep(False, 1.1)
    assert by_flush(off, on) == (on, off)
    assert flush_setting({"settings": {}}) is False  # a result from before the setting was recorded: torch's default
    with pytest.raises(ValueError, match="one result with flush-to-zero on and one with it off, got 2 on"):
        by_flush(on, on)


def test_the_band_of_a_slope():
    assert subnormal_band(0.5) == (175, 207)  # 87.34 / 0.5 and 103.97 / 0.5
    assert subnormal_band(1.0) == (88, 103)


def test_the_table_puts_both_settings_beside_the_reported_host():
    table = cliff_table(_sweep(True, 1.02), _sweep(False, 1.08), REPORTED)
    assert list(table.columns) == ["subnormal probabilities", "AMD EPYC (AVX512), flush-to-zero on",
                                   "AMD EPYC (AVX512), off", "Intel Xeon (AVX512), off (reported)"]
    goat = table.loc[("GOAT lanes (SDPA)", "4,096")].tolist()
    assert goat == ["3.16 %", "1.02 ×", "1.08 ×", "4.00 ×"]
    assert table.loc[("learnable mask (SDPA)", "1,024")].tolist() == ["0.00 %", "4.00 ×", "4.00 ×", "—"]


def test_the_glued_numbers_follow_the_results():
    got = cliff_numbers(_sweep(True, 1.02), _sweep(False, 1.08), REPORTED, _steps(True, 1.0, 1.0),
                        _steps(False, 1.5, 1.0))
    assert got["ch10_sub_goat_4096"] == "3.2 %" and got["ch10_sub_zero_4096"] == "35 %"
    assert (got["ch10_sub_on_lanes_4096"], got["ch10_sub_off_lanes_4096"]) == ("1.02", "1.08")
    assert (got["ch10_sub_spread_on_lanes_4096"], got["ch10_sub_spread_off_lanes_4096"]) == ("0.97–1.12", "1.03–1.18")
    assert got["ch10_sub_other_lanes_4096"] == "4.00" and got["ch10_sub_other_chunked_4096"] == "—"
    assert (got["ch10_sub_slope"], got["ch10_sub_band_first"], got["ch10_sub_band_last"]) == ("1/2", "175", "207")
    assert got["ch10_sub_call_ftz_ratio"] == "0.98" and got["ch10_sub_call_lanes"] == "1,200"
    assert (got["ch10_sub_step_goat_on"], got["ch10_sub_step_goat_off"], got["ch10_sub_step_cliff"]) == ("1.00", "1.50", "1.50")
    assert got["ch10_sub_flushed"] == "100 %" and got["ch10_sub_source"] == "reported somewhere"


def test_the_committed_files_are_what_the_section_says():
    on, off, reported, steps_on, steps_off = cr.cliff_results()
    assert on["settings"]["flush_denormal_check"]["flushed_share"] == 1.0
    assert off["settings"]["flush_denormal_check"]["flushed_share"] == 0.0
    assert flush_setting(steps_on) and not flush_setting(steps_off)
    # the probe counts the scores of the same inputs in both sweeps, whatever the switch
    assert on["subnormals"] == off["subnormals"] and on["subnormals"]["goat-lanes"]["4096"] > 0
    assert on["subnormals"]["sdpa"]["4096"] == 0
    # numbers from elsewhere say where they come from, in the file and in provenance.json
    assert "Intel Xeon" in reported["source"] and "2026-12-02" in reported["source"]
    assert reported["settings"]["flush_denormal"] is False
    provenance = json.loads((repo_root() / cr.RESULTS / "provenance.json").read_text())
    assert provenance[cr.REPORTED_RESULT]["source"] == reported["source"]
    assert cr.host_numbers(cr.committed()[cr.CPU_RESULT]) == {"ch10_claims_host": "AMD EPYC",
                                                             "ch10_claims_flush": "off"}
