"""`companion claim ID` and the chapters' one decision: the chapter of every claim has a module with
`load` and `decide`; the chapters without training give, through `decide`, exactly the verdicts and
measures glued in their committed executed notebooks; `Findings.record` glues only inside a kernel;
and every error of the command says what is wrong and what to do."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import pytest
import yaml

from companion.book.chapters import ch01_foundations, ch04_arithmetic
from companion.book.chapter import Findings, claims, module_name, module_of
from companion.book.claim_cli import paper_store
from companion.book.claims import assess, load_ledger
from companion.book.display import load_dashboard, ours_text
from companion.book.missing import gather
from companion.book.scoreboard import collect_measures
from companion.cli import main
from companion.reading import MissingRuns

ROOT = Path(__file__).resolve().parents[1]
LEDGER = load_ledger()
UNTRAINED = ("01_masks_and_positions", "02_prior_in_the_mask", "10_cost", "11_your_own_model")


def _toc_chapters() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    return [f for f in files if f.startswith("book/chapters/")]


def _ids(chapter: str) -> set[str]:
    return {cid for cid, c in LEDGER.items() if c.chapter == f"chapters/{chapter}" and c.rebuilt}


# ---------------------------------------------------------------- the mapping


def test_every_chapter_of_the_book_and_of_the_ledger_has_one_module():
    chapters = _toc_chapters()
    assert len(chapters) == 11
    for f in chapters:
        name = module_name(f)
        assert name.startswith(f"companion.book.chapters.ch{Path(f).name[:2]}_") and importlib.import_module(name)
        assert module_name(Path(f).name[:2]) == name
        module = module_of(f)
        assert callable(module.load) and callable(module.decide) and not hasattr(module, "claims"), name
    for claim in LEDGER.values():
        if claim.chapter != "scoreboard":
            assert module_name(claim.chapter) == module_name(f"book/{claim.chapter}")
    with pytest.raises(LookupError, match=r"^'scoreboard' is not a chapter \(chapters/NN_name\); no module"):
        module_name("scoreboard")


# ---------------------------------------------------------------- decide against the executed chapters


@pytest.fixture(scope="module")
def executed():
    return collect_measures(ROOT / "book" / "chapters")


@pytest.mark.parametrize("chapter", UNTRAINED)
def test_decide_gives_the_verdicts_and_measures_of_the_executed_chapter(chapter, executed):
    results = claims(module_of(chapter), "ci")
    assert {r.id for r in results} == _ids(chapter)
    for r in results:
        glued = executed[r.id]
        assert glued["notebook"] == f"{chapter}.ipynb"
        assert r.verdict == assess(LEDGER[r.id], glued["measure"], glued["preconditions"])[0], r.id
        if isinstance(r.measure, float):  # rounding-level gaps (1e-16) differ between machines
            assert math.isclose(r.measure, glued["measure"], rel_tol=1e-4, abs_tol=1e-9), r.id
        else:
            assert r.measure == glued["measure"], r.id
        assert (r.detail, r.preconditions) == (glued["detail"], glued["preconditions"]), r.id


def test_findings_glue_only_inside_a_kernel_and_then_every_claim_and_number(capsys, monkeypatch):
    import myst_nb

    from companion.book import claims as claims_module

    glued = []
    monkeypatch.setattr(myst_nb, "glue", lambda *a, **k: glued.append(a[0]))
    found = ch01_foundations.decide(ch01_foundations.load("ci"))
    assert found.record() == list(found.results) and glued == []  # outside a kernel, nothing is glued
    claims_module.record("S1-01", True)  # nor does a chapter's record by default
    assert glued == [] and capsys.readouterr() == ("", "")
    monkeypatch.setattr(claims_module, "_in_kernel", lambda: True)
    from companion.book import chapter as chapter_module

    monkeypatch.setattr(chapter_module, "_in_kernel", lambda: True)
    found.record()
    assert glued == [f"claim:{r.id}" for r in found.results] + list(found.numbers)
    claims_module.record("S1-01", True, glue=False)  # and glue=False never does
    assert len(glued) == len(found.results) + len(found.numbers)


def test_gather_counts_the_missing_runs_of_every_block():
    def missing():
        raise MissingRuns("2 of 6 here", 2, 6, ["a"])

    assert gather(lambda: [1], lambda: {"x": [1, 2]}) == [[1], {"x": [1, 2]}]
    with pytest.raises(MissingRuns) as err:
        gather(lambda: {"x": [1, 2], "y": [3]}, missing, missing)
    assert (err.value.found, err.value.total, err.value.missing) == (7, 15, ["a", "a"])


# ---------------------------------------------------------------- the command


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["claim", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_help_says_the_whole_chapter_is_computed(capsys):
    assert main(["claim", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "A chapter's claims share its runs, so the whole chapter's claims are computed" in text
    assert "and the one asked for is printed" in text


def test_a_claim_of_chapter_1_is_printed_with_its_measure_and_verdict(capsys):
    code, out, err = _run(capsys, "S1-07")
    result = {r.id: r for r in claims(ch01_foundations)}["S1-07"]
    claim = LEDGER["S1-07"]
    assert code == 0 and err == ""
    assert out.splitlines() == [
        f"S1-07  (chapters/01_masks_and_positions, section {claim.section}; ci profile, the chapter's own seeds)",
        f"  claim:   {claim.statement}", f"  source:  {claim.source} {claim.location}: {claim.source_value}",
        f"  measure: {claim.measure}", f"  ours:    {ours_text(result.measure, 'S1-07', load_dashboard()['units'])}",
        "  rule:    reproduced at ≥ 1e-06", f"  verdict: {result.verdict}"]


def test_an_unknown_id_suggests_the_near_ones(capsys):
    code, out, err = _run(capsys, "S2-6")
    assert (code, out) == (2, "")
    assert err.startswith("companion claim: error: unknown claim 'S2-6'; did you mean S2-06, S2-16")
    assert _run(capsys, "s2-06", "--no-train", "--store", "/nonexistent")[0] == 1  # ids are case-blind
    assert _run(capsys, "nothing") == (2, "", "companion claim: error: unknown claim 'nothing'; the ids are "
                                              "listed in book/claims.yml.\n")


def test_an_item_reported_not_rebuilt_prints_its_reason(capsys):
    cid = next(c for c, v in LEDGER.items() if not v.rebuilt)
    code, out, err = _run(capsys, cid)
    assert code == 0 and err == ""  # the ledger's verdict is the answer, not a failure
    assert out.splitlines()[-2:] == ["  verdict: reported, not rebuilt", f"  reason:  {LEDGER[cid].reason}"]


def test_a_chapter_module_without_decide_is_named(capsys, monkeypatch):
    monkeypatch.delattr(ch01_foundations, "decide")
    assert _run(capsys, "S1-07") == (1, "", (
        "companion claim: error: companion.book.chapters.ch01_foundations has no load() and decide(), so S1-07 cannot be "
        "computed on its own yet; execute its chapter (chapters/01_masks_and_positions) instead.\n"))


def _decides_nothing(monkeypatch, module):
    monkeypatch.setattr(module, "load", lambda *a, **k: None)
    monkeypatch.setattr(module, "decide", lambda runs: Findings((), {}, {}))


def test_a_claim_measured_at_the_other_profile_only(capsys, monkeypatch):
    _decides_nothing(monkeypatch, ch04_arithmetic)
    code, out, err = _run(capsys, "S2-17", "--train")  # the ledger measures it at paper
    assert code == 0 and err == ""
    assert out.splitlines()[-2:] == ["  verdict: not run at this scale",
                                     "  note:    the chapter measures it at the paper profile: add --profile paper"]
    _decides_nothing(monkeypatch, ch01_foundations)
    assert _run(capsys, "S1-07") == (1, "", "companion claim: error: companion.book.chapters.ch01_foundations.decide() "
                                            "did not measure S1-07 at the ci profile.\n")


def test_profile_paper_reads_the_committed_records_without_training(capsys, monkeypatch):
    calls, real = [], ch01_foundations.load

    def spy(profile, seeds, **kw):
        calls.append((profile, seeds, kw))
        return real()

    monkeypatch.setattr(ch01_foundations, "load", spy)
    for argv in (["--profile", "paper"], ["--profile", "paper", "--train", "--store", "s", "--jobs", "3"],
                 ["--no-train", "--seeds", "0-2"], []):
        assert _run(capsys, "S1-07", *argv)[0] == 0
    assert calls == [("paper", None, {"store": paper_store()}), ("paper", None, {"store": "s"}),
                     ("ci", [0, 1, 2], {"store": None}), ("ci", None, {"store": None})]  # a chapter only reads
    assert paper_store() == ROOT / "results" / "paper"


def test_train_makes_exactly_the_runs_the_chapter_names_missing_and_then_reads(capsys, monkeypatch):
    """The command trains; the chapter only reads. With training on (the default at ci), the configs the
    chapter's `load` names in its `MissingRuns` are trained once each, then the chapter reads again; with
    --no-train nothing trains and the command fails."""
    from companion.book import claim_cli

    calls, trained, real = [], [], ch01_foundations.load

    def load(profile, seeds, *, store):
        calls.append(profile)
        if len(calls) == 1:
            raise MissingRuns("1 of 3", 1, 3, ["a", "b", "a"])
        return real()

    monkeypatch.setattr(ch01_foundations, "load", load)
    monkeypatch.setattr(claim_cli, "run_missing", lambda cfgs, store, executor, progress, options:
                        trained.append((cfgs, store.read_only, options)) or ([], len(cfgs)))
    assert _run(capsys, "S1-07", "--jobs", "3")[0] == 0
    assert trained == [(["a", "b"], False, {"jobs": 3})] and calls == ["ci", "ci"]
    calls.clear(), trained.clear()
    assert _run(capsys, "S1-07", "--no-train")[0] == 1 and trained == [] and calls == ["ci"]


def test_no_train_with_an_empty_store_says_how_many_runs_exist(capsys, tmp_path):
    from companion.experiments import load_experiments
    from companion.sweep import plan_grid

    load_experiments()
    total = len(plan_grid("arithmetic", "ci", ch04_arithmetic.SEEDS))
    assert _run(capsys, "S2-13", "--no-train", "--store", str(tmp_path)) == (1, "", (
        f"companion claim: error: 0 of {total} runs of this chapter are stored in {tmp_path} at the ci profile; "
        "make them with `companion chapters 04_arithmetic` or `companion sweep` (see `companion list`), or drop "
        "--no-train to train the missing ones here.\n"))
    assert list(tmp_path.iterdir()) == []  # nothing was written


def test_missing_paper_runs_name_the_command_that_makes_them(capsys, monkeypatch):
    def missing(*a, **k):
        raise MissingRuns("…", 3, 10, [])

    monkeypatch.setattr(ch04_arithmetic, "load", missing)
    assert _run(capsys, "S2-13", "--profile", "paper") == (1, "", (
        f"companion claim: error: 3 of 10 runs of this chapter are stored in {paper_store()} at the paper profile; "
        "make them on a GPU with `companion paper 04` (it stores into results/paper), or add --train to train "
        "the missing ones here.\n"))


def test_bad_seeds_are_named(capsys):
    assert _run(capsys, "S1-07", "--seeds", "x") == (2, "", "companion claim: error: argument --seeds: malformed "
                                                            "seeds 'x': use a range like 0-4, a list like 0,1,2, or "
                                                            "both (0-2,7) (see `companion claim --help`)\n")
    assert _run(capsys, "S1-07", "--seeds", "0-2") == (2, "", "companion claim: error: Chapter 1 draws from one "
                                                              "seed; give one (e.g. --seeds 0), got [0, 1, 2].\n")
    assert _run(capsys, "C-01", "--seeds", "0") == (2, "", "companion claim: error: Chapter 10 reads committed "
                                                           "benchmark results and takes no seeds, got [0].\n")


def test_preconditions_are_printed_with_whether_they_hold():
    from companion.book.claim_cli import describe
    from companion.book.claims import record

    claim = LEDGER["S2-16"]  # the mask's gain on multiplication, if some method learns it at all
    [req] = claim.requires
    assert req["id"] == "a-method-learns" and req["rule"] == {"kind": "at_least", "threshold": 0.05}
    units = load_dashboard()["units"]
    lines = describe(claim, record("S2-16", 0.5, preconditions={"a-method-learns": 0.01}, glue=False), units)
    assert lines[-2:] == [f"  requires a-method-learns = 0.01 (NOT met): {req['says']}",
                          "  verdict: inconclusive (precondition failed: a-method-learns)"]
    lines = describe(claim, record("S2-16", 0.5, preconditions={"a-method-learns": 0.3}, glue=False), units)
    assert lines[-2:] == [f"  requires a-method-learns = 0.3 (met): {req['says']}", "  verdict: reproduced"]
