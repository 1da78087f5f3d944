"""`companion.experiments.chapters` says which runs each chapter reads; each chapter module's `load`,
with the notebook's default seeds, must ask the run store for exactly those (else `companion paper` would make the wrong runs
and the paper column would count the wrong ones), and only read them: it never trains."""

from __future__ import annotations

import inspect
import types

import pytest

from companion import reading
from companion.book.chapter import module_of
from companion.experiments import Request, get_grid
from companion.experiments.chapters import CHAPTERS, chapter_requests, chapter_runs
from companion.identity import run_id
from companion.reading import MissingRuns


def _asked(module, monkeypatch, profile: str = "ci", **kwargs) -> tuple[set, list]:
    """Every (experiment, methods, overrides, seeds) the module's `load(profile, **kwargs)` asks the
    store for, and for each fetch the (profile, store) it passed on."""
    asked, passed = set(), []

    def note(request, seeds):
        methods = tuple(request.methods) if request.methods else None
        asked.add((request.experiment, methods, tuple(request.overrides), tuple(seeds)))

    def fetched(real, *a, **k):
        bound = inspect.signature(real).bind(*a, **k)
        bound.apply_defaults()
        args = bound.arguments
        passed.append((args["profile"], args["store"]))
        return args

    def read_grid(*a, **k):
        args = fetched(reading.read_grid, *a, **k)
        cells = get_grid(args["grid"]).cells(args["profile"])
        for r in cells.values():
            note(r, args["seeds"])
        return {key: [] for key in cells}

    def read_many(*a, **k):
        args = fetched(reading.read_many, *a, **k)
        for r in args["requests"]:
            note(r, args["seeds"])
        return [[] for _ in args["requests"]]

    def read_runs(*a, **k):
        args = fetched(reading.read_runs, *a, **k)
        note(Request(args["experiment"], args["methods"], args["overrides"]), args["seeds"])
        return []

    # the chapter module and the analysis modules of its own it reads runs through (Chapter 9's `resolution`)
    helpers = [v for v in vars(module).values() if isinstance(v, types.ModuleType)
               and v.__name__.startswith("companion.book.chapters.") and hasattr(v, "load")]
    for mod in (module, *helpers):
        for name, fake in (("read_grid", read_grid), ("read_many", read_many), ("read_runs", read_runs)):
            if hasattr(mod, name):
                monkeypatch.setattr(mod, name, fake)
    module.load(profile, **kwargs)  # the notebook's default seeds; `load` only fetches, so empty records pass
    return asked, passed


TRAINING = [k for k, (_, blocks) in CHAPTERS.items() if blocks]


@pytest.mark.parametrize("profile", ["ci", "paper"])
@pytest.mark.parametrize("key", TRAINING)
def test_each_chapter_loads_exactly_the_runs_it_is_said_to_read(key, profile, monkeypatch):
    """At either profile (a block the chapter reads at `ci` only is not asked for at `paper`)."""
    expected = {(r.experiment, tuple(r.methods) if r.methods else None, tuple(r.overrides), tuple(seeds))
                for r, seeds in chapter_requests(key, profile)}
    assert _asked(module_of(key), monkeypatch, profile)[0] == expected


@pytest.mark.parametrize("key", TRAINING)
def test_every_fetch_gets_the_profile_and_store_it_was_given(key, monkeypatch, tmp_path):
    for profile, kwargs in (("ci", {}), ("paper", {"store": tmp_path})):
        _, passed = _asked(module_of(key), monkeypatch, profile, **kwargs)
        assert passed and set(passed) == {(profile, kwargs.get("store"))}


@pytest.mark.parametrize("key", TRAINING)
def test_a_chapter_cannot_train(key):
    """Reading is one way down: a chapter's `load` takes no training options, and its module reaches no
    training function (`companion.sweep`, `companion.executors`, `companion.train`) among its names."""
    module = module_of(key)
    assert not {"train", "jobs"} & set(inspect.signature(module.load).parameters)
    reached = {getattr(v, "__module__", None) or getattr(v, "__name__", None) for v in vars(module).values()}
    assert not reached & {"companion.sweep", "companion.executors", "companion.train"}


def test_the_chapters_are_the_book_s():
    from pathlib import Path

    from companion.paths import repo_root

    names = sorted(p.stem for p in (Path(repo_root()) / "notebooks").glob("*.ipynb"))
    assert sorted(name for name, _ in CHAPTERS.values()) == names


@pytest.fixture(scope="module")
def committed():
    """Every chapter's records, read from the committed `ci` store without training."""
    return {key: module_of(key).load("ci") for key, (_, blocks) in CHAPTERS.items() if blocks}


def _records(block) -> list:
    """The run records of a block, however `load` nests them (lists, dicts of lists, …)."""
    if isinstance(block, dict):
        return [r for v in block.values() for r in _records(v)]
    if isinstance(block, (list, tuple)):
        return [r for v in block for r in _records(v)]
    return [block]


@pytest.mark.parametrize("key", TRAINING)
def test_each_chapter_reads_from_the_store_it_is_given_and_never_trains(key, tmp_path, committed):
    """With an empty store, `load` refuses, naming that store, and writes nothing; from
    the committed store it returns the records of exactly the runs `chapter_runs` names."""
    with pytest.raises(MissingRuns, match=str(tmp_path)):
        module_of(key).load("ci", store=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing was trained or written
    got = {r.run_id for block in committed[key].blocks.values() for r in _records(block)}
    assert got == {run_id(cfg) for cfg in chapter_runs(key, "ci")}
