"""`companion.experiments.chapters` says which runs each chapter reads; each chapter module's load
functions must ask the run store for exactly those (else `companion paper` would make the wrong runs
and the paper column would count the wrong ones)."""

from __future__ import annotations

import inspect

import pytest

from companion.book.paper import chapter_module
from companion.experiments import get_grid
from companion.experiments.chapters import CHAPTERS, chapter_requests


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
    for name, fn in inspect.getmembers(module, inspect.isfunction):
        if name.startswith("load") and fn.__module__ == module.__name__:
            params = inspect.signature(fn).parameters
            seeds = _default_seeds(module.__name__, name)
            kwargs = {"text_seeds": _default_seeds(module.__name__, "text")} if "text_seeds" in params else {}
            try:
                fn("ci", seeds, **kwargs)
            except Exception:  # noqa: BLE001  (empty records cannot make frames; the asks are what counts)
                pass
    return asked


def _default_seeds(module: str, which: str) -> tuple[int, ...]:
    """The seeds the chapter's notebook uses: those of its blocks in CHAPTERS."""
    key = module.split(".ch")[-1][:2]
    blocks = CHAPTERS[key][1]
    if which == "text":
        return next(b.seeds for b in blocks if b.cells == ("text",))
    if which.endswith("_symmetry"):  # a section with seeds of its own (Chapter 3's symmetry account)
        return next(b.seeds for b in blocks if b.grid == "symmetry")
    return blocks[0].seeds


@pytest.mark.parametrize("key", [k for k, (_, blocks) in CHAPTERS.items() if blocks])
def test_each_chapter_loads_exactly_the_runs_it_is_said_to_read(key, monkeypatch):
    expected = {(r.experiment, tuple(r.methods) if r.methods else None, tuple(r.overrides), tuple(seeds))
                for r, seeds in chapter_requests(key, "ci")}
    assert _asked(chapter_module(key), monkeypatch) == expected


def test_the_chapters_are_the_book_s():
    from pathlib import Path

    from companion.paths import repo_root

    names = sorted(p.stem for p in (Path(repo_root()) / "notebooks").glob("*.ipynb"))
    assert sorted(name for name, _ in CHAPTERS.values()) == names
