"""The sampled reproduction (`companion reproduce --sample`): which groups it draws, which records count as
changed, and that a sample is never taken for the whole proof."""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest

from companion.book.reproduce import ReproductionReport, markdown, record_report, write
from companion.book.reproduce_sample import changed_run_ids, draw, seed_of
from companion.cli import main
from companion.executors import plan_groups
from companion.experiments.chapters import recorded_runs
from companion.identity import run_id
from companion.runs import group_configs


@pytest.fixture(scope="module")
def cfgs():
    return recorded_runs()


def _groups_of(sample) -> list[frozenset[str]]:
    return [frozenset(run_id(m) for m in group_configs(c)) for c in sample.configs if c.seed % c.stack == 0]


def test_a_sample_is_one_whole_group_of_every_experiment(cfgs):
    s = draw(cfgs, seed=7)
    experiments = {c.experiment for c in cfgs}
    assert Counter(c.experiment for c in s.configs if c.seed % c.stack == 0) == Counter({e: 1 for e in experiments})
    ids = {run_id(c) for c in s.configs}
    for group in _groups_of(s):  # every member of a drawn group is retrained and compared
        assert group <= ids
    assert len(ids) == len(s.configs) == s.summary()["runs"] < s.of_runs == len(cfgs)
    assert s.groups == len(experiments) and s.of_groups == len(plan_groups(cfgs))


def test_the_draw_is_fixed_by_its_seed_and_another_seed_draws_others(cfgs):
    assert draw(cfgs, seed_of("fc1c94f")).configs == draw(cfgs, seed_of("fc1c94f")).configs
    assert seed_of("a") != seed_of("b")
    few = [c for c in cfgs if c.experiment in ("arith-mul", "charlm", "passkey")]  # 2, 5 and 5 groups
    draws = [frozenset((c.experiment, c.method, c.seed) for c in draw(few, seed=s).configs) for s in range(40)]
    assert len(set(draws)) > 20  # 50 possible draws: forty seeds do not keep drawing the same groups
    for experiment, groups in (("arith-mul", 2), ("charlm", 5), ("passkey", 5)):  # over commits, every group
        assert len({frozenset(x for x in d if x[0] == experiment) for d in draws}) == groups


def test_a_changed_record_brings_its_whole_group(cfgs):
    base = draw(cfgs, seed=3)
    drawn = {run_id(c) for c in base.configs}
    outside = next(c for c in cfgs if run_id(c) not in drawn)
    s = draw(cfgs, seed=3, changed={run_id(outside), "not-a-run"}, base="HEAD~1")
    assert s.changed == (run_id(outside),) and s.groups == base.groups + 1
    assert {run_id(m) for m in group_configs(outside)} <= {run_id(c) for c in s.configs}
    assert s.summary()["changed_runs"] == 1 and s.summary()["base"] == "HEAD~1"


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_changed_records_are_those_that_differ_from_the_base_commit(tmp_path):
    folder = tmp_path / "results" / "ci"
    folder.mkdir(parents=True)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.org")
    _git(tmp_path, "config", "user.name", "t")
    for name in ("kept", "edited", "deleted"):
        (folder / f"{name}.json").write_text("{}")
    (tmp_path / "other.json").write_text("{}")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "base")
    (folder / "edited.json").write_text('{"x": 1}')
    (folder / "deleted.json").unlink()
    (folder / "committed.json").write_text("{}")
    (tmp_path / "other.json").write_text("[]")  # outside results/ci: not a record
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "next")
    (folder / "untracked.json").write_text("{}")
    (folder / "kept.json.tmp").write_text("")  # not a record file
    assert changed_run_ids(tmp_path, "HEAD~1") == {"edited", "deleted", "committed", "untracked"}
    assert changed_run_ids(tmp_path, "HEAD") == {"untracked"}
    with pytest.raises(LookupError):
        changed_run_ids(tmp_path, "HEAD~5")  # no such commit (a clone of depth 1 has no parent)


def _sampled_report() -> ReproductionReport:
    report = ReproductionReport(["03_boolean_extrapolation"], {"cpu": {"vendor": "AuthenticAMD"}}, "2026-12-05T10:00:00",
                                "abc")
    report.sample = {"seed": 1, "base": "HEAD~1", "changed_runs": 2, "runs": 70, "groups": 15, "of_runs": 609,
                     "of_groups": 126}
    return report


def test_a_sample_says_what_it_is_and_is_never_recorded_as_a_reproduction(tmp_path, monkeypatch):
    import companion.book.reproduce as rp

    monkeypatch.setattr(rp, "host_summary", lambda host: "a host")
    report = _sampled_report()
    page = markdown(report.to_dict())
    assert "A sample, not the whole proof: 15 of 126 training groups (70 of 609 runs)" in page
    assert "2 records changed since HEAD~1" in page
    assert "verdicts equal" not in page and "## Claims" not in page  # a sample decides no claim
    paths = write(report, tmp_path / "out")
    assert json.loads(paths[0].read_text())["sample"]["seed"] == 1
    with pytest.raises(ValueError, match="sampled reproduction"):
        record_report(paths[0], tmp_path / "kept")
    assert not (tmp_path / "kept").exists()


def test_sample_and_record_together_are_refused_before_any_training(capsys):
    assert main(["reproduce", "--sample", "--record"]) == 2
    assert "a --sample is not one" in capsys.readouterr().err


def test_ci_samples_and_the_books_workflow_keeps_the_whole_proof_on_a_schedule():
    import yaml

    from companion.paths import repo_root

    root = repo_root()
    ci = [line for line in (root / ".ci" / "run").read_text().splitlines() if line.startswith("make ")]
    assert ci == ["make test REPRODUCE=sample"]
    flow = yaml.safe_load((root / ".github" / "workflows" / "book.yml").read_text())
    assert flow[True]["schedule"], "the whole reproduction must run on a schedule"
    runs = [s["run"] for s in flow["jobs"]["test"]["steps"] if "make test" in s.get("run", "")]
    assert runs and all("REPRODUCE" not in r for r in runs)  # `make test`'s default retrains every run
    makefile = (root / "Makefile").read_text()
    assert "REPRODUCE ?= all" in makefile
