"""One decision per chapter: the shape every chapter module shares.

A chapter module (`companion/book/chapters/chNN_*.py`) has:

- `SEEDS`, the chapter's seeds: what `load` reads when it is given none (the notebook's `seeds = None`);
- `load(profile, seeds=None, *, store=None) -> Runs`: its records, read from the store and never trained
  (`companion.reading`; a chapter that reads none returns its inputs: the profile, the seed and what it uses);
- `decide(runs) -> Findings`: every claim's measure, detail and preconditions with its verdict, the
  numbers its prose cites, and the named parts its tables and figures draw;
- each claim declared once, as a `Measure` over the analysis it reads: its measure, each precondition the
  ledger's `requires` names, and the detail beside it (the rule, the null and the thresholds are the
  ledger's, `book/claims.yml`); `Decision.measure(specs, analysis)` decides a family of them;
- table and figure functions over those parts.

The notebook calls `load` and `decide` once and shows the parts; `companion claim`, `companion
reproduce` and the paper-profile table call `decide` through `claims`. So a claim is decided in one
place, whichever door a reader comes in by.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import MappingProxyType, ModuleType
from typing import Any, Callable

import companion.book.chapters
from companion.book.claims import ClaimResult, _in_kernel, glue_result, record_all, record_decided
from companion.book.prose import glue_all

__all__ = ["Runs", "Findings", "Measure", "Decision", "measures", "preconditions", "details", "claims", "module_name",
           "module_of"]


def _frozen(mapping: Mapping | None) -> Mapping:
    return MappingProxyType(dict(mapping or {}))


def _part(kind: str, parts: Mapping[str, Any], name: str) -> Any:
    try:
        return parts[name]
    except KeyError:
        raise KeyError(f"no {kind} named {name!r}; there are {', '.join(map(repr, parts)) or 'none'}.") from None


@dataclass(frozen=True)
class Runs:
    """What `load` gives `decide`: the profile and seeds asked for, and the chapter's named blocks of
    records (or, for a chapter that trains nothing, its inputs)."""

    profile: str
    seeds: tuple[int, ...]
    blocks: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "blocks", _frozen(self.blocks))

    def __getitem__(self, name: str) -> Any:
        return _part("block of runs", self.blocks, name)


@dataclass(frozen=True)
class Findings:
    """What a chapter decides: its claims' results (no glue; in the order its verdict table lists
    them), the numbers its prose cites by glue name, and the parts its tables and figures draw."""

    results: tuple[ClaimResult, ...]
    numbers: Mapping[str, Any]
    parts: Mapping[str, Any]
    decided: tuple[ClaimResult, ...] = ()  # claims measured at their `decided` budget (`record_decided`)

    def __post_init__(self):
        object.__setattr__(self, "results", tuple(self.results))
        object.__setattr__(self, "decided", tuple(self.decided))
        object.__setattr__(self, "numbers", _frozen(self.numbers))
        object.__setattr__(self, "parts", _frozen(self.parts))

    def __getitem__(self, name: str) -> Any:
        return _part("part", self.parts, name)

    def record(self) -> list[ClaimResult]:
        """In a notebook: glue every claim (`claim:<id>`) and every prose number, once; returns the
        results for the verdict table. Outside a kernel nothing is glued."""
        for r in (*self.results, *self.decided):
            glue_result(r)
        if self.numbers and _in_kernel():
            glue_all(dict(self.numbers))
        return list(self.results)


@dataclass(frozen=True)
class Measure:
    """One claim as its chapter measures it, declared once: `value(analysis)` is the measure the ledger's rule
    reads; `requires` maps each precondition the ledger names to its measured value (a function of the same
    analysis; one that gives None is not passed, so `record` names it missing); `detail(analysis)` is the
    phrase shown beside the measure; `when(analysis)`, if given, says whether the claim is measured at all
    there (a method a profile does not run). `measures`, `preconditions` and `details` read a family of them."""

    claim: str
    value: Callable[[Any], Any]
    requires: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    detail: Callable[[Any], str] | None = None
    when: Callable[[Any], bool] | None = None


def _measured(specs: Sequence[Measure], analysis: Any) -> list[Measure]:
    return [s for s in specs if s.when is None or s.when(analysis)]


def measures(specs: Sequence[Measure], analysis: Any) -> dict[str, Any]:
    """{claim: measure} of each declaration measured on `analysis`, in order."""
    return {s.claim: s.value(analysis) for s in _measured(specs, analysis)}


def preconditions(specs: Sequence[Measure], analysis: Any) -> dict[str, dict[str, Any]]:
    """{claim: {precondition: value}} of the declarations that require any (values that are None left out)."""
    out = {s.claim: {k: v for k, f in s.requires.items() if (v := f(analysis)) is not None}
           for s in _measured(specs, analysis) if s.requires}
    return {c: pre for c, pre in out.items() if pre}


def details(specs: Sequence[Measure], analysis: Any) -> dict[str, str]:
    """{claim: detail} of the declarations that have one."""
    return {s.claim: s.detail(analysis) for s in _measured(specs, analysis) if s.detail is not None}


class Decision:
    """What `decide` fills as it goes: claims decided (verdicts at once, for prose that cites them),
    prose numbers and parts; `done()` freezes them into `Findings`."""

    def __init__(self):
        self.results: list[ClaimResult] = []
        self.decided: list[ClaimResult] = []
        self.numbers: dict[str, Any] = {}
        self.parts: dict[str, Any] = {}

    def claims(self, measures: Mapping[str, Any], *, details: Mapping[str, str] | None = None,
               preconditions: Mapping[str, Mapping[str, Any]] | None = None) -> list[ClaimResult]:
        """Decide these claims (`record_all` without glue), keep them in order, and return them."""
        found = record_all(dict(measures), details=dict(details or {}), preconditions=dict(preconditions or {}),
                           glue=False)
        self.results += found
        return found

    def measure(self, specs: Sequence[Measure], analysis: Any) -> list[ClaimResult]:
        """Decide a family of declared claims on one analysis (`claims` with their measures, details and
        preconditions)."""
        return self.claims(measures(specs, analysis), details=details(specs, analysis),
                           preconditions=preconditions(specs, analysis))

    def decided_claims(self, measures: Mapping[str, Any], *, preconditions: Mapping[str, Mapping[str, Any]],
                       details: Mapping[str, str] | None = None) -> list[ClaimResult]:
        """Measure these claims at their ledger's `decided` budget (`record_decided`, without glue)."""
        found = [record_decided(cid, m, preconditions=dict(preconditions[cid]), detail=(details or {}).get(cid, ""),
                                glue=False) for cid, m in measures.items()]
        self.decided += found
        return found

    def glue(self, numbers: Mapping[str, Any]) -> None:
        """Numbers the prose cites; a name given twice is an error, not an overwrite."""
        twice = sorted(set(numbers) & set(self.numbers))
        if twice:
            raise ValueError(f"prose numbers given twice: {twice}.")
        self.numbers.update(numbers)

    def done(self, **parts: Any) -> Findings:
        return Findings(self.results, self.numbers, parts, self.decided)


def claims(module: ModuleType, profile: str = "ci", seeds: Sequence[int] | None = None, *,
           store=None) -> list[ClaimResult]:
    """Every claim a chapter decides, as its notebook decides them (no figures, no glue): `module.decide`
    on `module.load(profile, seeds, store=store)`, which reads stored records and trains nothing (it
    raises `companion.reading.MissingRuns` naming what is absent). `seeds` None means the chapter's
    `SEEDS`."""
    return list(module.decide(module.load(profile, seeds, store=store)).results)


def module_name(chapter: str) -> str:
    """The module of a chapter: "chapters/03_boolean_extrapolation", "book/chapters/03_…" or "03" →
    "companion.book.chapters.ch03_boolean"."""
    number = PurePosixPath(str(chapter)).name.split("_", 1)[0]
    if not (len(number) == 2 and number.isdigit()):
        raise LookupError(f"{chapter!r} is not a chapter (chapters/NN_name); no module computes its claims.")
    found = sorted(m.name for m in pkgutil.iter_modules(companion.book.chapters.__path__)
                   if m.name.startswith(f"ch{number}_"))
    if len(found) != 1:
        raise LookupError(f"chapter {chapter} needs exactly one module companion/book/chapters/ch{number}_*.py, "
                          f"found {found or 'none'}.")
    return f"companion.book.chapters.{found[0]}"


def module_of(chapter: str) -> ModuleType:
    """The imported module of a chapter (`module_name`)."""
    return importlib.import_module(module_name(chapter))
