"""`companion.experiments.chapters` says which runs each chapter reads; each chapter module's `load`,
with the notebook's default seeds, must ask the run store for exactly those (else `companion paper` would make the wrong runs
and the paper column would count the wrong ones)."""

from __future__ import annotations

import pytest

from companion.book.chapter import module_of
from companion.experiments import get_grid
from companion.experiments.chapters import CHAPTERS, chapter_requests, chapter_runs
from companion.identity import run_id
from companion.sweep import MissingRuns


def _asked(module, monkeypatch) -> set:
    """Every (experiment, methods, overrides, seeds) the module's load functions ask for at `ci`."""
    asked = set()

    def note(request, seeds):
        methods = tuple(request.methods) if request.methods else None
        asked.add((request.experiment, methods, tuple(request.overrides), tuple(seeds)))

    def ensure_grid(name, profile, seeds, *a, **k):
        cells = get_grid(name).cells(profile)
        for r in cells.values():
            note(r, seeds)
        return {key: [] for key in cells}

    def ensure_many(requests, profile, seeds, *a, **k):
        for r in requests:
            note(r, seeds)
        return [[] for _ in requests]

    def ensure_runs(experiment, profile="ci", seeds=range(5), methods=None, *a, overrides=(), **k):
        from companion.experiments import Request

        note(Request(experiment, methods, overrides), seeds)
        return []

    for name, fake in (("ensure_grid", ensure_grid), ("ensure_many", ensure_many), ("ensure_runs", ensure_runs)):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, fake)
    module.load("ci")  # the notebook's default seeds; `load` only fetches, so empty records pass
    return asked


@pytest.mark.parametrize("key", [k for k, (_, blocks) in CHAPTERS.items() if blocks])
def test_each_chapter_loads_exactly_the_runs_it_is_said_to_read(key, monkeypatch):
    expected = {(r.experiment, tuple(r.methods) if r.methods else None, tuple(r.overrides), tuple(seeds))
                for r, seeds in chapter_requests(key, "ci")}
    assert _asked(module_of(key), monkeypatch) == expected


def test_the_chapters_are_the_book_s():
    from pathlib import Path

    from companion.paths import repo_root

    names = sorted(p.stem for p in (Path(repo_root()) / "notebooks").glob("*.ipynb"))
    assert sorted(name for name, _ in CHAPTERS.values()) == names


@pytest.fixture(scope="module")
def committed():
    """Every chapter's records, read from the committed `ci` store without training."""
    return {key: module_of(key).load("ci", train=False) for key, (_, blocks) in CHAPTERS.items() if blocks}


def _records(block) -> list:
    """The run records of a block, however `load` nests them (lists, dicts of lists, …)."""
    if isinstance(block, dict):
        return [r for v in block.values() for r in _records(v)]
    if isinstance(block, (list, tuple)):
        return [r for v in block for r in _records(v)]
    return [block]


@pytest.mark.parametrize("key", [k for k, (_, blocks) in CHAPTERS.items() if blocks])
def test_each_chapter_reads_from_the_store_it_is_given_and_trains_only_when_allowed(key, tmp_path, committed):
    """With an empty store and training off, `load` refuses, naming that store, and writes nothing; from
    the committed store it returns the records of exactly the runs `chapter_runs` names."""
    with pytest.raises(MissingRuns, match=str(tmp_path)):
        module_of(key).load("ci", store=tmp_path, train=False)
    assert not any(tmp_path.iterdir())  # nothing was trained or written
    got = {r.run_id for block in committed[key].blocks.values() for r in _records(block)}
    assert got == {run_id(cfg) for cfg in chapter_runs(key, "ci")}
