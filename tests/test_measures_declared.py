"""Each claim is declared once (`companion.book.chapter.Measure`): its chapter's declaration names exactly the
preconditions the ledger's `requires` lists, no claim is declared twice, and the helpers that read a family of
declarations skip what a declaration says is not measured."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import companion.book.chapters
from companion.book.chapter import Measure, details, measures, preconditions
from companion.book.claims import load_ledger


def _declared() -> list[tuple[str, Measure]]:
    found = []
    for info in pkgutil.iter_modules(companion.book.chapters.__path__):
        module = importlib.import_module(f"companion.book.chapters.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, tuple) and value and all(isinstance(m, Measure) for m in value):
                if getattr(value[0].value, "__module__", module.__name__) == module.__name__:  # not an imported family
                    found += [(f"{info.name}.{name}", m) for m in value]
    return found


DECLARED = _declared()


def test_the_chapters_declare_their_claims_as_measures():
    assert len(DECLARED) >= 50  # every chapter with records declares its families this way
    ids = [m.claim for _, m in DECLARED]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


@pytest.mark.parametrize("where, m", DECLARED, ids=[m.claim for _, m in DECLARED])
def test_a_declaration_names_exactly_the_ledgers_preconditions(where, m):
    ledger = load_ledger()
    assert m.claim in ledger, f"{where} declares {m.claim}, which the ledger lacks"
    claim = ledger[m.claim]
    assert claim.rebuilt, f"{m.claim} is reported, not rebuilt, yet {where} measures it"
    assert set(m.requires) == {r["id"] for r in claim.requires}, where


def test_the_helpers_read_a_family_in_order_and_skip_what_is_not_measured():
    family = (Measure("A", lambda a: a["x"] + 1, {"p": lambda a: a["x"], "q": lambda a: None}, lambda a: "a"),
              Measure("B", lambda a: 1 / 0, when=lambda a: False),  # never read where `when` is false
              Measure("C", lambda a: a["x"] * 2))
    assert list(measures(family, {"x": 2})) == ["A", "C"] and measures(family, {"x": 2}) == {"A": 3, "C": 4}
    assert preconditions(family, {"x": 2}) == {"A": {"p": 2}}  # a precondition giving None is left out
    assert details(family, {"x": 2}) == {"A": "a"}
    all_none = (Measure("D", lambda a: 0, {"p": lambda a: None}),)
    assert preconditions(all_none, {}) == {}  # so `record` names the missing precondition
