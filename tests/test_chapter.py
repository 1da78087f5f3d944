"""`companion.book.chapter`: the shape every chapter module shares (Runs, Findings, Decision, claims)."""

from __future__ import annotations

import types

import pytest

from companion.book.chapter import Decision, Findings, Runs, claims, module_of


def test_runs_and_findings_are_frozen_and_name_what_they_hold():
    runs = Runs("ci", [0, 1], {"copymix": {"goat": []}})
    assert runs.seeds == (0, 1) and runs["copymix"] == {"goat": []}
    with pytest.raises(KeyError, match=r"no block of runs named 'qk'; there are 'copymix'"):
        runs["qk"]
    with pytest.raises(TypeError):
        runs.blocks["x"] = 1  # a read-only view
    found = Findings((), {"n": "3"}, {"frame": 1})
    with pytest.raises(KeyError, match=r"no part named 'heads'; there are 'frame'"):
        found["heads"]
    with pytest.raises(AttributeError):
        found.parts = {}


def test_a_decision_keeps_the_claims_in_order_with_their_verdicts():
    d = Decision()
    first = d.claims({"S1-02": 0.0, "S1-01": True})
    second = d.claims({"S3-16": 2.0})
    assert [r.id for r in first] == ["S1-02", "S1-01"] and second[0].verdict == "not reproduced"
    d.glue({"a": "1"})
    with pytest.raises(ValueError, match=r"prose numbers given twice: \['a'\]"):
        d.glue({"a": "2", "b": "3"})
    found = d.done(frame="f")
    assert [r.id for r in found.results] == ["S1-02", "S1-01", "S3-16"]
    assert dict(found.numbers) == {"a": "1"} and found["frame"] == "f"
    with pytest.raises(ValueError, match="requires the preconditions"):
        Decision().claims({"S2-16": 0.5})  # a claim with preconditions cannot be decided without them


def test_claims_is_decide_on_load_with_the_arguments_passed_through():
    seen = {}

    def load(profile, seeds, *, store):
        seen.update(profile=profile, seeds=seeds, store=store)
        return Runs(profile, seeds or (0,))

    def decide(runs):
        d = Decision()
        d.claims({"S1-01": runs.profile == "paper"})
        return d.done()

    module = types.SimpleNamespace(load=load, decide=decide)
    [result] = claims(module, "paper", [3], store="s")
    assert seen == {"profile": "paper", "seeds": [3], "store": "s"}
    assert (result.id, result.measure, result.verdict) == ("S1-01", True, "reproduced")


def test_module_of_finds_every_chapter_by_number_or_name():
    assert module_of("08").__name__ == module_of("chapters/08_copy_mixture").__name__ == \
        "companion.book.chapters.ch08_copy_mixture"
    assert module_of("11").__name__ == "companion.book.chapters.ch11_own_model"
    with pytest.raises(LookupError, match="needs exactly one module companion/book/chapters/ch12_"):
        module_of("12")
