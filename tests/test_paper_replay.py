"""The paper-profile records made on a CPU, proved in seconds: each group's first updates retrained and
compared with the record's loss curve (`companion.replay`), to the bit on a host like the one that made
them and within `REPLAY_RTOL` elsewhere; and the nulls of that comparison (a learning rate 10 % off, the
next seeds) fail it in both modes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from companion.config import apply_overrides
from companion.experiments import get_experiment
from companion.experiments.chapters import paper_runs
from companion.paths import repo_root
from companion.replay import REPLAY_RTOL, compare, replay, this_host
from companion.runs import group_configs, run_group
from companion.store import RunStore

UPDATES = 20
PAPER = RunStore(repo_root() / "results" / "paper", read_only=True)
OTHER_HOST: dict = {}  # a host stated as nothing: never the same numerics, so the tolerance decides


def _cpu_groups() -> dict[str, list]:
    """The paper groups of every chapter whose committed records were made on a CPU, by a readable name."""
    groups = {}
    for chapter in ("03", "04", "05", "06", "07", "08", "09"):
        for cfg in paper_runs(chapter):
            record = PAPER.load(cfg) if cfg.seed % cfg.stack == 0 else None
            if record is not None and record.device == "cpu":
                groups[f"{chapter}-{cfg.experiment}-{cfg.method}-{cfg.seed}"] = group_configs(cfg)
    return groups


GROUPS = _cpu_groups()


def test_chapter_8_has_every_paper_record_and_they_were_made_on_a_cpu():
    cfgs = paper_runs("08")
    records = [PAPER.load(c) for c in cfgs]
    assert len(cfgs) == 9 and all(r is not None for r in records), "Chapter 8's paper edition needs its 9 records"
    assert {r.device for r in records} == {"cpu"} and {r.config.train.steps for r in records} == {6000}
    assert len([k for k in GROUPS if k.startswith("08-")]) == 3


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_a_cpu_paper_group_replays_its_first_updates(name):
    cfgs = GROUPS[name]
    host = this_host()
    for cfg, losses in zip(cfgs, replay(cfgs, UPDATES)):
        check = compare(PAPER.load(cfg), losses, host)
        assert check.ok, check.why()


@pytest.fixture(scope="module")
def alibi_group():
    return group_configs(next(c for c in paper_runs("08") if c.method == "alibi" and c.seed == 0))


@pytest.mark.parametrize("change", ["lr", "seeds"])
def test_the_replay_catches_another_run_in_both_modes(alibi_group, change):
    """Null: the warm-up keeps the first 20 learning rates small, yet 10 % more of them moves the losses
    by ~2e-2 (200x `REPLAY_RTOL`), and the next seeds' group by ~5e-2."""
    g = alibi_group
    other = ([apply_overrides(c, [f"train.lr={c.train.lr * 1.1}"]) for c in g] if change == "lr"
             else [replace(c, seed=c.seed + c.stack) for c in g])
    for cfg, losses in zip(g, replay(other, UPDATES)):
        record = PAPER.load(cfg)
        assert not compare(record, losses, this_host()).ok
        tolerant = compare(record, losses, OTHER_HOST)
        assert tolerant.mode == "tolerance" and not tolerant.ok and tolerant.worst_rel > 50 * REPLAY_RTOL


def _toy_group():
    return group_configs(get_experiment("smoke").config("ci", "mask", 0, ["train.steps=12", "train.eval_every=6",
                                                                        "stack=2"]))


def test_a_replay_is_the_start_of_the_whole_run_to_the_bit():
    """`stop_after` keeps the whole run's schedule: the first 5 of 12 updates, alone and stacked, equal the
    full run's first 5 losses exactly (same process, same host)."""
    cfgs = _toy_group()
    assert len(cfgs) == 2
    full = run_group(cfgs)
    for record, losses in zip(full, replay(cfgs, 5)):
        assert losses == record.curves["train_loss"][:5] and len(losses) == 5
        assert compare(record, losses, record.host).mode == "bitwise"
    alone = replace(cfgs[0], stack=1)
    assert replay([alone], 5)[0] == run_group([alone])[0].curves["train_loss"][:5]


def test_a_replay_outside_the_run_or_longer_than_the_record_is_refused():
    cfgs = _toy_group()
    with pytest.raises(ValueError, match="replay 1 to 12"):
        replay(cfgs, 13)
    with pytest.raises(ValueError, match="replay 1 to 12"):
        replay(cfgs, 0)
    record = run_group(cfgs)[0]
    with pytest.raises(ValueError, match="holds 12 losses"):
        compare(record, [1.0] * 13, record.host)
