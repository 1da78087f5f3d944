"""Verdicts first: the landing page's block, failed preconditions in words, the book's own groups, the
chapter verdict strip and the PDF check, all from the scoreboard's data."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from companion.book import preconditions, words

from companion.book.site import compact, glance, pdf, verdict_strip
from companion.book.display import load_dashboard
from companion.book.claims import ClaimResult, load_ledger, verdict_table
from companion.book.scoreboard import claim_groups
from companion.book.site.sphinxext import book_profile, build_facts

ROOT = Path(__file__).resolve().parents[1]
DOC = json.loads((ROOT / "book" / "chapters" / "scoreboard.json").read_text())


def _doc(verdicts: dict[str, str] | None = None) -> dict:
    doc = copy.deepcopy(DOC)
    for c in doc["claims"]:
        if verdicts and c["id"] in verdicts:
            c["verdict"] = verdicts[c["id"]]
            c["by_profile"]["ci"]["verdict"] = verdicts[c["id"]]
    return doc


def test_every_takeaway_rests_on_the_committed_verdicts():
    """A takeaway on the landing page is prose: it must still say what the scoreboard says."""
    stale = glance.stale_takeaways(DOC["claims"], DOC["groups"], "ci")
    assert not stale, f"rewrite these takeaways in book/dashboard.yml: {stale}"
    assert all(g.get("takeaway") for g in DOC["groups"] if not g["own"]), "every source has a takeaway"


def test_a_takeaway_whose_evidence_moved_is_left_out_and_reported():
    s2 = next(g for g in DOC["groups"] if g["prefix"] == "S2")
    rests = s2["takeaway"]["rests_on"]
    cid, verdict = next(iter(rests.items()))
    other = "partly" if verdict != "partly" else "reproduced"
    block, problems = glance.landing(_doc({cid: other}))
    assert len(problems) == 1 and cid in problems[0] and "book/dashboard.yml" in problems[0]
    assert " ".join(s2["takeaway"]["text"].split()) not in block
    block, problems = glance.landing(DOC)
    assert not problems and " ".join(s2["takeaway"]["text"].split()) in block


def test_landing_block_counts_every_group_and_shows_every_headline_verdict():
    block, _ = glance.landing(DOC)
    by_id = {c["id"]: c for c in DOC["claims"]}
    for g in DOC["groups"]:
        members = [c for c in DOC["claims"] if c["group"] == g["prefix"]]
        if members:
            assert f"<scoreboard-{g['prefix'].lower()}>" in block
            assert words.noun(g["words"], len(members)) in block
    for h in DOC["headlines"]:
        c = by_id[h]
        assert glance.verdict_badge(c["verdict"], c["words"]) in block, h
        assert f"<{c['anchor']}>" in block
    # counts come from the data: change one verdict and the counts change
    moved, _ = glance.landing(_doc({"S1-01": "not reproduced"}))
    before = sum(c["group"] == by_id["S1-01"]["group"] and c["verdict"] == "not reproduced" for c in DOC["claims"])
    assert moved != block and glance.verdict_badge("not reproduced", "", before + 1) in moved


def test_inconclusive_and_the_book_s_own_are_listed_apart_from_not_reproduced():
    block, _ = glance.landing(DOC)
    table_end = block.index("```", block.index("glance-decided"))
    decided = block[block.index("glance-decided"):table_end]
    by_id = {c["id"]: c for c in DOC["claims"]}
    for h in DOC["headlines"]:
        c = by_id[h]
        if c["verdict"] == "inconclusive" or c["own"]:
            assert f"<{c['anchor']}>" not in decided, f"{h} sits among the sources' held and failed claims"
    inconclusive = [h for h in DOC["headlines"] if by_id[h]["verdict"] == "inconclusive"]
    if inconclusive:
        section = block[block.index("**Inconclusive at this scale**"):]
        assert all(f"<claim-{h}>" in section for h in inconclusive)
        assert "measured" in section and "needed" in section
    own = [h for h in DOC["headlines"] if by_id[h]["own"]]
    if own:
        section = block[block.index("**This book's own goals and hypotheses**"):]
        assert all(f"<claim-{h}>" in section for h in own)
        assert "Source:" not in section.split("```")[1], "a goal of the book is not a source's value"


def test_groups_of_the_book_s_own_are_found_without_being_listed():
    sources = [{"prefix": "S2", "title": "Mask"}, {"prefix": "C", "title": "Cost", "own": "goals"},
               {"prefix": "M", "title": "Account"}]
    found = claim_groups(sources + [{"prefix": "R", "title": "Referees", "words": "hypotheses"}],
                         ["S2-01", "C-01", "M-01", "X-01", "S4-01", "R-01"])
    groups = {g["prefix"]: g["own"] for g in found}
    assert groups == {"S2": "", "C": "goals", "M": "hypotheses", "R": "", "X": "hypotheses", "S4": ""}
    assert {g["prefix"]: g["words"] for g in found} == {"S2": "claims", "C": "goals", "M": "hypotheses", "R": "hypotheses",
                                                        "X": "hypotheses", "S4": "claims"}
    with pytest.raises(ValueError, match="one of claims, hypotheses, goals"):
        claim_groups([{"prefix": "R", "title": "x", "words": "questions"}], ["R-01"])
    assert glance.verdict_badge("not reproduced", "goals").endswith(">goal not met</span>")
    assert glance.verdict_badge("reproduced", "hypotheses").endswith(">borne out</span>")
    assert glance.verdict_badge("reproduced", "", 3).endswith(">3&nbsp;reproduced</span>")


def test_a_failed_precondition_says_measured_against_needed():
    ledger = load_ledger(ROOT / "book" / "claims.yml")
    req = next(q for q in ledger["S2-05"].requires if q["id"] == "default-fits-seen")
    text = preconditions.failed_sentence({"says": req["says"], "value": 0.1943}, req["rule"], "ci")
    assert text.startswith("Not decided at the ci scale. Required: the default model fits the seen set")
    assert text.endswith("Measured 19.4 %; needed ≥ 99 %.")
    assert preconditions.needed_words({"kind": "at_least", "threshold": 1}) == "≥ 1"
    assert preconditions.value_words(0, {"kind": "at_least", "threshold": 1}) == "0"
    assert preconditions.value_words(3.1427, {"kind": "at_most", "threshold": 4.0}) == "3.143"
    assert preconditions.value_words(None, req["rule"]) == "not recorded"
    # the chapter's verdict table: words, not the precondition's identifier
    r = ClaimResult("S2-07", 0.62, "inconclusive", "", {"mask-fits-seen": 0.0}, ["mask-fits-seen"])
    cell = verdict_table([r], ledger).data["Verdict"][0]
    assert "mask-fits-seen" not in cell and "measured 0.0 %, needed ≥ 50 %: at least half of the learnable mask" in cell


def test_a_chapter_opens_with_its_answer_and_every_claim_written_out():
    claims = [{"id": "S2-07", "anchor": "claim-S2-07", "verdict": "inconclusive", "words": "claims", "statement": "A <b>"},
              {"id": "C-01", "anchor": "claim-C-01", "verdict": "not reproduced", "words": "goals", "statement": "x"}]
    html = verdict_strip.strip_html(claims, lambda a: f"../scoreboard.html#{a}", "The answer & more.")
    assert html.count('class="verdict-strip-item"') == 2
    assert 'href="../scoreboard.html#claim-s2-07"' in html and "goal not met" in html
    assert "A &lt;b&gt;</li>" in html  # the statement is written out, escaped
    assert '<p class="chapter-answer">The answer &amp; more.</p>' in html
    assert "chapter-answer" not in verdict_strip.strip_html(claims, lambda a: a)
    assert verdict_strip.stale_answer({"S2-07": "inconclusive"}, claims) == []
    assert verdict_strip.stale_answer({"S2-07": "reproduced", "S9-01": "reproduced"}, claims) == [
        "S2-07 is inconclusive, the answer says reproduced", "S9-01 is not decided in this chapter, the answer says reproduced"]


def test_every_chapter_answer_rests_on_the_committed_verdicts():
    """Each chapter's answer (book/dashboard.yml) must still say what its claims' verdicts say."""
    chapters = load_dashboard()["chapters"]
    measured = {Path(c["chapter"]).name for c in DOC["claims"] if c["chapter"] and not c["reason"]}
    assert set(chapters) == measured, "every chapter that decides claims opens with an answer"
    for name, entry in chapters.items():
        claims = [c for c in DOC["claims"] if Path(c["chapter"] or "").name == name and not c["reason"]]
        assert entry["rests_on"] and not verdict_strip.stale_answer(entry["rests_on"], claims), name


def test_every_value_says_what_it_is_and_where_it_was_measured():
    """The compact table, the headline tables and the chapters' verdict tables show a value beside what it
    is (`quantities`); the label of where it was measured comes with every verdict."""
    dash = load_dashboard()
    rebuilt = {c["id"] for c in DOC["claims"] if not c["reason"]}
    assert set(dash["quantities"]) == rebuilt, sorted(set(dash["quantities"]) ^ rebuilt)
    assert set(dash["measured_at"]) <= rebuilt
    for c in DOC["claims"]:
        if c["reason"]:
            continue
        assert c["quantity"] == dash["quantities"][c["id"]]
        assert c["by_profile"]["ci"]["at"] == dash["measured_at"].get(c["id"], "ci scale, CPU")
    table = compact.compact_table(DOC["claims"], "ci")
    r01 = next(line for i, line in enumerate(table) if table[i - 2].startswith("* - {ref}`R-01 "))
    assert "share of the way to the correct mask" in r01
    r = ClaimResult("S3-10", 0.986, "reproduced")
    cell = verdict_table([r], load_ledger(ROOT / "book" / "claims.yml")).data["Ours"][0]
    assert cell.startswith("0.986 × (GOAT") and cell.endswith("· ci scale, CPU")


def test_one_vocabulary_per_kind():
    """A source's claim is reproduced; a hypothesis (the referees' or the book's) borne out; a goal met:
    the same word for a kind in the counts, the cards, the strips and the chapters' tables."""
    by_id = {c["id"]: c for c in DOC["claims"]}
    assert by_id["R-03"]["words"] == "hypotheses" and not by_id["R-03"]["own"]
    assert by_id["M-01"]["words"] == "hypotheses" and by_id["C-01"]["words"] == "goals"
    assert by_id["S2-06"]["words"] == "claims"
    page = (ROOT / "book" / "scoreboard.md").read_text()
    card = page[page.index("(claim-R-03)="):page.index("(claim-R-03)=") + 400]
    assert "not borne out" in card and ">not reproduced<" not in card
    r = ClaimResult("M-01", 0.3, "not reproduced")
    cell = verdict_table([r], load_ledger(ROOT / "book" / "claims.yml")).data["Verdict"][0]
    assert ">not borne out<" in cell
    block, _ = glance.landing(DOC)
    theirs = [c for c in DOC["claims"] if c["words"] == "claims" and not c["own"]]
    assert f"**The sources' {len(theirs)} claims**" in block
    for g in DOC["groups"]:  # the same group sizes on the landing page and on the scoreboard
        n = sum(c["group"] == g["prefix"] for c in DOC["claims"])
        if n:
            assert words.noun(g["words"], n) in block and f"({words.noun(g['words'], n)})" in page, g["prefix"]


def test_build_facts_offers_the_landing_block_and_the_links(tmp_path):
    facts, problems = build_facts(ROOT, url="https://example.org/book/", pdf=True)
    assert not problems
    assert facts["verdicts_at_a_glance"].startswith("**Verdicts at the `ci` profile.** **The sources' ")
    assert "<https://example.org/book/>" in facts["book_links"] and f'href="../{pdf.PDF_NAME}"' in facts["book_links"]
    facts, _ = build_facts(ROOT)
    assert "Read it online" not in facts["book_links"]
    assert "href" not in facts["book_links"] and "`make pdf` prints the whole book" in facts["book_links"]


def test_the_pdf_is_linked_only_where_it_is_served(tmp_path, monkeypatch):
    from companion.book.site.sphinxext import pdf_served
    monkeypatch.delenv("COMPANION_PDF", raising=False)
    assert not pdf_served(tmp_path)
    (tmp_path / pdf.PDF_NAME).write_bytes(b"%PDF-1.4")
    assert pdf_served(tmp_path)
    monkeypatch.setenv("COMPANION_PDF", "1")
    assert pdf_served(tmp_path / "elsewhere")
    assert book_profile(tmp_path / "_build" / "editions" / "paper") == "paper" and book_profile(ROOT) is None


def _pdf(titles: list[str], pages: int) -> bytes:
    objs = [b"%PDF-1.4"]
    objs += [f"{i + 10} 0 obj\n<</Type /Page>>\nendobj".encode() for i in range(pages)]
    objs += [b"20 0 obj\n<</Title <" + ("\ufeff" + t).encode("utf-16-be").hex().encode() + b">>>\nendobj" for t in titles]
    return b"\n".join(objs + [b"trailer\n<<>>\n%%EOF\n"])


def test_the_pdf_check_finds_every_chapter_title_and_fails_without_one(tmp_path):
    titles = pdf.chapter_titles(ROOT)
    assert len(titles) == 11 and "Masks and positions" in titles
    out = tmp_path / "book.pdf"
    # Chromium joins a heading's laid-out lines without a space and numbers it: still found
    out.write_bytes(_pdf([f"{i + 1}. {t.replace(' and ', ' and')}#" for i, t in enumerate(titles)], 12))
    assert pdf.check(out, titles) == 12
    out.write_bytes(_pdf([f"{i + 1}. {t}" for i, t in enumerate(titles[1:])], 12))
    with pytest.raises(ValueError, match="Masks and positions"):
        pdf.check(out, titles)
    out.write_bytes(_pdf(titles, 12)[:-8])
    with pytest.raises(ValueError, match="not a complete PDF"):
        pdf.check(out, titles)


def test_printing_opens_the_scoreboard_folds_only(tmp_path):
    page = tmp_path / "book" / "intro.html"
    page.parent.mkdir()
    page.write_text('<details class="sd-sphinx-override sd-dropdown x"><details class="admonition hide">'
                    '<details open class="sd-dropdown">')
    out = pdf.printable(page, tmp_path)
    assert out == tmp_path / "print.html"
    assert out.read_text() == ('<details open class="sd-sphinx-override sd-dropdown x"><details class="admonition hide">'
                               '<details open class="sd-dropdown">')


def test_a_card_gives_a_second_profile_only_where_scale_can_change_its_value():
    """Cards of exact and float64 checks, benchmarks and reported claims carry one badge; a card whose value
    comes from trained runs carries one per profile; the page's line counts those with a paper verdict,
    which are Chapter 8's three (its nine records are committed) and no claim of a chapter without them."""
    from companion.book.site.scoreboard_page import _card, _other_profile_line

    dash = load_dashboard()
    units = dash["units"]
    profiles = DOC["profiles"]
    assert profiles == ["ci", "paper"]
    for c in DOC["claims"]:
        assert c["scaled"] == (not c["reason"] and c["id"] not in dash["measured_at"]), c["id"]
        head = _card(c, profiles, units)[2]
        assert head.count("verdict-badge") == (2 if c["scaled"] else 1), (c["id"], head)
        assert ("&nbsp;(paper)" in head) == c["scaled"]
    measured = sorted(c["id"] for c in DOC["claims"] if c["scaled"] and c["by_profile"]["paper"]["ours"] is not None)
    assert measured == ["S3-05", "S3-06", "S3-07"]
    line = _other_profile_line(DOC["claims"], "paper")
    scaled = sum(c["scaled"] for c in DOC["claims"])
    assert f"({scaled} claims)" in line and ": 3 have one, from {doc}`Chapter 8 <chapters/08_copy_mixture>`;" in line
    page = (ROOT / "book" / "scoreboard.md").read_text()
    assert line in page and "no column is shown" not in page
