"""The paper-profile path on the CPU: `companion paper` windows, resuming, the budget, the estimate,
and the book reading the records back (coverage, the scoreboard's paper column)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from companion.book import paper_status as paper
from companion.book.chapter import Findings
from companion.cli import main
from companion.cli.paper import estimate_group, run_paper, window_rows
from companion.experiments import EXPERIMENTS, get_experiment
from companion.experiments.chapters import CHAPTERS, chapter_key, chapter_runs, paper_runs
from companion.host import describe, machine
from companion.store import RunStore

# a paper-shaped copy-mixture run at toy size: Chapter 8 reads 3 methods × seeds 0-1 of `copymix`, which
# its recipe trains in groups of three (seed 2 is Chapter 7's)
TINY = {"model.n_layers": 1, "model.d_model": 32, "model.n_heads": 2, "model.d_head": 16, "model.d_ff": 16,
        "train.steps": 3, "train.eval_every": 0, "train.batch_size": 4}


@pytest.fixture
def tiny_paper(monkeypatch):
    """`copymix` whose paper profile is toy-sized (its ci profile unchanged)."""
    from companion.config import apply_overrides

    exp = get_experiment("copymix")

    def build(profile):
        cfgs = exp.build(profile)
        if profile != "paper":
            return cfgs
        return {m: apply_overrides(c, [f"{k}={v}" for k, v in TINY.items()]) for m, c in cfgs.items()}

    monkeypatch.setitem(EXPERIMENTS, "copymix", replace(exp, build=build))
    return exp


def _no_estimate(group):
    return {"seconds": 0.0}


def test_chapter_keys_and_plans():
    assert chapter_key("3") == chapter_key("03") == chapter_key("03_boolean_extrapolation") == "03"
    with pytest.raises(ValueError, match="unknown chapter '12'; valid: 01 .*11 "):
        chapter_key("12")
    with pytest.raises(ValueError, match="unknown chapter '03_arithmetic'"):
        chapter_key("03_arithmetic")
    assert {k for k, (_, blocks) in CHAPTERS.items() if not blocks} == {"01", "02", "10", "11"}
    # Chapter 3 reads the gotu grid: 4 tasks × 6 methods × 5 seeds, and at ci the symmetry grid: 4 tasks
    # × 3 methods × 10 seeds; the paper window starts with default and mask on 2Parity, Cyclic3 and
    # Majority, and ends with the three mask layouts on 2Parity
    assert len(chapter_runs("03", "ci")) == 120 + 120
    assert len(chapter_runs("03", "paper")) == 120
    order = paper_runs("03")
    assert len(order) == 120 + 15 and len(set(order)) == 135
    assert [(c.experiment, c.method) for c in order[:30:5]] == [
        (f"gotu-{fn}", m) for fn in ("2parity", "cyclic3", "maj3") for m in ("default", "mask")]
    assert {c.model.prior.layers for c in order[-5:]} == {"first"}


def test_a_window_writes_records_only_and_the_next_one_continues(tmp_path, tiny_paper):
    lines = []
    first = run_paper("08", root=tmp_path, device="cpu", log=lines.append, estimate=_no_estimate)
    assert first["total"] == 9 and first["stored_before"] == 0 and first["remaining"] == 0
    assert sum(len(g["run_ids"]) for g in first["ran"]) == 9  # each method's whole group, seeds 0-2
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json"] * 9 + [".jsonl", ".md"]  # no weights
    store = RunStore(tmp_path)
    records = [store.load(p.stem) for p in tmp_path.glob("*.json")]
    # the recipe's groups (seeds 0-2 trained together), each record stating this machine
    assert all(r.execution["members"] == [0, 1, 2] for r in records)
    assert {machine(r.host) for r in records} == {machine(describe())}
    second = run_paper("08", root=tmp_path, device="cpu", log=lines.append, estimate=_no_estimate)
    assert second["stored_before"] == 9 and second["ran"] == [] and second["remaining"] == 0
    assert [w["chapter"] for w in window_rows(tmp_path)] == ["08", "08"]
    readme = (tmp_path / "README.md").read_text()
    assert readme.count("| 08 |") == 2 and "<!-- windows:start -->" in readme


def test_a_group_that_would_not_fit_is_not_started(tmp_path, tiny_paper):
    summary = run_paper("08", root=tmp_path, device="cpu", minutes=1.0, log=lambda _: None,
                        estimate=lambda group: {"seconds": 1e6}, clock=lambda: 0.0)
    assert summary["ran"] == [] and summary["remaining"] == 9
    assert summary["stopped"] == "copymix/goat seeds 0,1,2: estimated 1000000 s, 40 s left"  # 60 s less the margin
    assert not list(tmp_path.glob("*.json"))


def test_the_estimate_separates_updates_fixed_costs_and_intermediate_evaluations():
    cfg = get_experiment("copymix").config("ci", "goat", 0)  # 'ci': a fixed number of updates
    fixed, per, mid = 3.0, 0.5, 0.25
    est = estimate_group([cfg], probe=lambda group, k, evaluate: fixed + per * k + (mid if evaluate else 0.0))
    checkpoints = cfg.train.steps // cfg.train.eval_every + 1  # step 0, every eval_every, the last
    assert est["per_update"] == pytest.approx(per) and est["fixed"] == pytest.approx(fixed)
    assert est["intermediate"] == pytest.approx(mid) and est["evaluations"] == checkpoints
    assert est["seconds"] == pytest.approx(1.15 * (per * cfg.train.steps + fixed + mid * (checkpoints - 2)))


def test_the_book_reads_the_records_back(tmp_path, tiny_paper, monkeypatch):
    root = tmp_path  # a repository root: records go to <root>/results/paper
    assert paper.coverage("08", root).words() == "0 of 9 paper-profile runs"
    assert "Not run at this scale yet: 0 of 9" in paper.status_text("08", root)
    run_paper("08", root=root / paper.PAPER_DIR, device="cpu", log=lambda _: None, estimate=_no_estimate)
    cov = paper.coverage("08", root)
    assert (cov.found, cov.total, cov.complete) == (9, 9, True)
    today = paper.available("08", root)[0].finished_at[:10]
    assert paper.status_text("08", root) == (
        f"All 9 paper-profile runs are in `results/paper/` (made on {machine(describe())} (torch "
        f"{torch.__version__}), {today}); the verdicts at that scale are below.")
    # the chapter's claims at paper read exactly those records, without training
    seen = {}

    class Chapter:
        @staticmethod
        def load(profile, seeds, *, store):
            seen.update(profile=profile, root=store.root, read_only=store.read_only)
            return None

        @staticmethod
        def decide(runs):
            return Findings((), {}, {})

    assert paper.paper_claims(Chapter, "08", root) == []
    assert seen == {"profile": "paper", "root": root / paper.PAPER_DIR, "read_only": True}
    assert paper.paper_claims(Chapter, "09", root) is None  # nothing stored for Chapter 9


def test_the_command_line(tmp_path, tiny_paper, capsys):
    assert main(["paper", "08", "--store", str(tmp_path), "--dry-run", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "chapter 08: 0 of 9 paper runs stored" in out and "would run copymix/goat seeds 0,1,2" in out
    assert not list(tmp_path.glob("*.json"))
    assert main(["paper", "12", "--store", str(tmp_path)]) == 2
    assert "unknown chapter '12'" in capsys.readouterr().err
    assert main(["paper", "--status", "--store", str(tmp_path)]) == 0
    assert "08 08_copy_mixture: 0 of 9 paper runs" in capsys.readouterr().out


def test_partial_records_are_available_to_the_chapter(tmp_path, tiny_paper):
    root = tmp_path
    estimates = iter([0.0, 1e6])  # the first group fits the window, the second does not
    run_paper("08", root=root / paper.PAPER_DIR, device="cpu", log=lambda _: None,
              estimate=lambda group: {"seconds": next(estimates)})
    got = paper.available("08", root)
    assert sorted((r.config.method, r.seed) for r in got) == [("goat", 0), ("goat", 1), ("goat", 2)]
    assert paper.coverage("08", root).words() == "3 of 9 paper-profile runs"
    assert paper.paper_table(object(), "08", root) is None


def test_a_window_killed_in_a_group_keeps_the_log_of_the_groups_it_finished(tmp_path, tiny_paper, monkeypatch):
    """The log is written after every group: a window stopped during its second group (a call's time
    limit, here an exception from the training) still says what its first group made."""
    import companion.cli.paper as cli

    calls, cli_run_group = [], cli.run_group

    def run_group(group):
        calls.append(group)
        if len(calls) == 2:
            raise KeyboardInterrupt("the call's time limit")
        return cli_run_group(group)

    monkeypatch.setattr(cli, "run_group", run_group)
    with pytest.raises(KeyboardInterrupt):
        run_paper("08", root=tmp_path, device="cpu", log=lambda _: None, estimate=_no_estimate)
    rows = window_rows(tmp_path)
    assert len(rows) == 1 and [g["group"] for g in rows[0]["ran"]] == ["copymix/goat seeds 0,1,2"]
    assert rows[0]["remaining"] == 6 and len(list(tmp_path.glob("*.json"))) == 3
    assert "| 3 |" in (tmp_path / "README.md").read_text()  # the table says 3 runs made


def test_groups_of_one_method_are_told_apart_by_what_their_configs_set():
    """Chapter 3's extra mask layouts are all method "mask" of 2Parity: the window log names each layout."""
    from companion.cli.paper import group_label

    groups = {}
    for cfg in paper_runs("03", extra=True):
        groups.setdefault((cfg.experiment, cfg.method, str(cfg.model), str(cfg.train)), []).append(cfg)
    labels = [group_label(g) for g in groups.values()]
    assert len(set(labels)) == len(labels)
    assert "gotu-2parity/mask seeds 0,1,2,3,4" in labels  # the preset itself: nothing in brackets
    assert "gotu-2parity/mask seeds 0,1,2,3,4 [model.prior.per_head=true]" in labels
    assert "gotu-2parity/mask seeds 0,1,2,3,4 [model.prior.layers=first]" in labels
    assert "gotu-2parity/mask seeds 0,1,2,3,4 [model.pool=mean, model.prior.variant=per-token]" in labels
