"""Reproducing the committed records: the host a record states, the comparison run by run and claim by
claim, what fails a reproduction and what does not, and the committed `ci` records themselves."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from companion.book.reproduce import ReproductionReport, compare_records, margin, markdown, numbers
from companion.config import apply_overrides
from companion.cost import records
from companion.experiments import get_experiment
from companion.experiments.chapters import CHAPTERS, chapter_runs, recorded_runs
from companion.host import describe, machine, numerics_key, same_numerics, summary
from companion.identity import run_id
from companion.paths import repo_root
from companion.runs import FLUSH_DENORMAL, THREADS, recipe_context, run
from companion.store import RunStore

TINY = ["train.steps=6", "train.eval_every=3"]


@pytest.fixture(scope="module")
def record():
    return run(apply_overrides(get_experiment("smoke").config("ci", "mask", 0), TINY))


def _other_isa(host: dict) -> str:
    """An instruction set other than this host's (the hosts CI runs on report AVX512 or AVX2)."""
    return "AVX512" if host["isa"] == "AVX2" else "AVX2"


def test_a_record_states_its_host_and_what_decides_its_bits(record):
    host = record.host
    assert host == describe("cpu", THREADS, FLUSH_DENORMAL)
    assert host["isa"] == torch.backends.cpu.get_cpu_capability() and host["threads"] == 1
    assert host["torch"] == torch.__version__ and host["flush_denormal"] is True and host["gpu"] is None
    assert host["cpu"]["vendor"] and host["blas"]  # e.g. "AuthenticAMD", "mkl 2024.2"
    key = numerics_key(host)
    assert "cores" not in key["cpu"] and "python" not in key  # what does not change a sum's order
    assert same_numerics(host, dict(host, python="3.12.1", cpu=dict(host["cpu"], cores=64)))
    for change in (dict(isa=_other_isa(host)), dict(env={"MKL_CBWR": "COMPATIBLE"}), dict(threads=2),
                   dict(cpu=dict(host["cpu"], vendor="AuthenticAMD" if host["cpu"]["vendor"] == "GenuineIntel"
                                 else "GenuineIntel")), dict(torch="2.11.0")):  # the other CPU family
        assert not same_numerics(host, {**host, **change}), change
    assert not same_numerics(None, host) and not same_numerics({}, {})
    assert machine(host).endswith(f"{host['cpu']['cores']} cores") and machine(None, "cuda") == "cuda"
    assert f"torch {torch.__version__}, 1 thread" in summary(host)


def test_a_switch_in_the_environment_is_part_of_the_host(monkeypatch):
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    assert describe()["env"] == {"MKL_CBWR": "COMPATIBLE"} and "MKL_CBWR=COMPATIBLE" in summary(describe())


def test_runs_flush_subnormals_to_zero_and_give_the_caller_its_floats_back():
    tiny = torch.tensor([1e-30], dtype=torch.float32)
    assert (tiny * 1e-10).item() != 0.0  # 1e-40: a subnormal float32
    with recipe_context():
        assert (tiny * 1e-10).item() == 0.0 and torch.get_num_threads() == THREADS
    assert (tiny * 1e-10).item() != 0.0


def test_equal_records_compare_equal_and_every_difference_is_located(record):
    same = compare_records(record, record)
    assert same["bitwise"] and same["same_host"] and same["largest_rel"] == 0.0 and same["structure"] is None
    loss = list(record.curves["train_loss"])
    loss[3] *= 1 + 1e-6
    moved = compare_records(record, replace(record, curves={**record.curves, "train_loss": loss}))
    assert not moved["bitwise"] and moved["where"] == "curves.train_loss[3]"
    assert moved["largest_rel"] == pytest.approx(1e-6, rel=1e-3)
    shorter = compare_records(record, replace(record, curves={**record.curves, "train_loss": loss[:-1]}))
    assert shorter["structure"].startswith("1 entries in one record only")
    nan = compare_records(record, replace(record, metrics={**record.metrics, "test": {**record.metrics["test"], "acc": float("nan")}}))
    assert "became nan" in nan["structure"]
    assert dict(numbers({"a": [1, {"b": 2}]})) == {"a[0]": 1, "a[1].b": 2}


def _report(rows, claims=(), missing=()) -> ReproductionReport:
    return ReproductionReport(["03_boolean_extrapolation"], {}, "2026-12-02T00:00:00+00:00", "abc", 1.0,
                              list(rows), list(claims), list(missing))


def test_what_fails_a_reproduction_and_what_does_not(record):
    other_host = replace(record, host={**record.host, "isa": _other_isa(record.host)},
                         metrics={**record.metrics, "test": {**record.metrics["test"], "mse": record.metrics["test"]["mse"] * 1.01}})
    claim = {"id": "S2-07", "chapter": "03", "committed_measure": 0.6276, "measure": 0.6242, "difference": -0.0034,
             "margin": 0.2924, "committed_verdict": "inconclusive", "verdict": "inconclusive"}
    # a host that computes otherwise: its numbers may move; an equal verdict passes
    assert _report([compare_records(other_host, record)], [claim]).ok
    # the same host: any difference is unexplained
    same_host = replace(other_host, host=record.host)
    bad = _report([compare_records(same_host, record)], [claim])
    assert not bad.ok and "differs on a host that computes like the one that made it" in bad.problems[0]
    # a changed verdict fails on any host, and so does a record the chapters read but nobody committed
    flipped = _report([compare_records(other_host, record)], [{**claim, "verdict": "partly"}])
    assert flipped.problems == ["S2-07: verdict 'inconclusive' committed, 'partly' retrained"]
    assert not _report([], [claim], ["gotu-2parity/mask/seed 0"]).ok
    page = markdown(flipped.to_dict())
    assert "FAILED" in page and "| S2-07 | inconclusive → partly | 0.6276 | 0.6242 |" in page


def test_the_margin_is_the_distance_to_the_nearest_threshold():
    assert margin({"kind": "at_least", "threshold": 0.99, "partly_threshold": 0.92}, 0.6276) == pytest.approx(0.2924)
    assert margin({"kind": "at_most", "threshold": 1e-12}, 0.0) == 1e-12
    assert margin({"kind": "close", "target": 0.5, "tol": 0.1}, 0.55) == pytest.approx(0.05)
    assert margin({"kind": "holds"}, True) is None and margin({"kind": "at_least", "threshold": 1}, None) is None


def test_the_committed_records_are_exactly_what_the_chapters_read():
    """results/ci holds a valid record (checksum, id) for every run the chapters read, in whole
    groups, and nothing else: `make records` keeps it so, and `make book` then trains nothing."""
    folder = repo_root() / "results" / "ci"
    need = {run_id(c): c for c in recorded_runs()}
    have = {p.stem for p in folder.glob("*.json")}
    assert not need.keys() - have, f"{len(need.keys() - have)} records missing: run `make records` and commit"
    assert not have - need.keys(), f"{len(have - need.keys())} records no chapter reads: run `make records`"
    store = RunStore(folder, read_only=True)
    hosts = set()
    for rid, cfg in need.items():
        rec = store.load(rid)
        assert rec is not None and rec.config == cfg, rid
        hosts.add(json.dumps(numerics_key(rec.host), sort_keys=True))
    assert len(hosts) == 1  # one host made them all: a comparison is bitwise or not, never half


def test_whole_groups_cover_what_each_chapter_reads_and_nothing_more():
    from companion.runs import group_configs

    for key in CHAPTERS:
        read = chapter_runs(key, "ci")
        assert set(recorded_runs([key])) == {m for c in read for m in group_configs(c)}
    # Chapter 9 reads charlm seeds 0-1, whose recipe trains them beside seed 2 (Chapter 7 reads it)
    charlm = [c for c in recorded_runs(["09"]) if c.experiment == "charlm" and c.method == "sinusoidal"]
    assert sorted(c.seed for c in charlm) == [0, 1, 2]


def test_the_reproductions_page_lists_every_recorded_host(tmp_path):
    from companion.book.reproductions import SUMMARIES, build_page, load_summaries

    summaries = load_summaries()
    assert {s["host"]["cpu"]["vendor"] for s in summaries} >= {"AuthenticAMD", "GenuineIntel"}
    page = build_page()
    for s in summaries:
        assert f"| {s['date']} | {s['host_summary']} |" in page
        assert f"{s['verdicts_equal']} of {len(s['claims'])} verdicts equal" in page
    # a claim that moved is shown against its margin; one whose verdict changed says from what to what
    moved = dict(summaries[0], claims=[{"id": "S2-07", "committed_measure": 0.6, "measure": 0.7, "difference": 0.1,
                                         "margin": 0.05, "committed_verdict": "partly", "verdict": "reproduced"}])
    folder = tmp_path / SUMMARIES
    folder.mkdir(parents=True)
    (folder / "a.json").write_text(json.dumps(moved))
    assert "| S2-07 | partly → reproduced | 0.6 | 0.7 | 0.1 | 0.05 |" in build_page(tmp_path)
    (folder / "b.json").write_text("{}")
    with pytest.raises(ValueError, match="b.json is not a reproduction summary"):
        load_summaries(tmp_path)


def test_chapter_10_reads_the_committed_peak():
    from companion.book.chapters import ch10_cost as cr

    peak = records.load_peak(cr.PEAK_RESULT)
    assert peak["peak_flops"] > 1e9 and peak["bandwidth_bytes_s"] > 1e9 and peak["threads"] == 2
    assert peak["source"].startswith("measured by benchmarks/peak.py on AMD EPYC, 2026-")


def test_a_finished_reports_summary_is_recorded_without_retraining(tmp_path, record):
    from companion.book.reproduce import record_report, summary_name, write

    report = _report([compare_records(record, record)], [])
    report.host = record.host
    paths = write(report, tmp_path / "out")
    kept = record_report(paths[0], tmp_path / "kept")
    assert kept.name.startswith(f"2026-12-02-{record.host['cpu']['vendor'].lower()}-") and kept.name.endswith("-abc.json")
    other = dict(report.summary(), host={**record.host, "env": {"MKL_CBWR": "COMPATIBLE"}})
    assert summary_name(other) != kept.name  # the same machine with another BLAS switch is another host
    assert json.loads(kept.read_text()) == json.loads(json.dumps(report.summary()))
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(ValueError, match="bad.json is not a reproduction report"):
        record_report(tmp_path / "bad.json", tmp_path / "kept")
