"""A chapter opens with its answer: one or two sentences, then every claim it decides, one line each.

At build time (Sphinx, `companion.book.site.sphinxext`), every page that measures claims gets, right
after its title, its answer (`chapters` in `book/dashboard.yml`, left out with a build warning when a
verdict it rests on has moved) and a list of its claims: the verdict badge in its kind's words, the
id linked to the claim's card on the scoreboard, and the statement in one line. Nothing is typed
into the notebooks: the claims of a page are those whose `chapter` in `book/chapters/scoreboard.json`
names it, and their verdicts are the scoreboard's at the book's profile. The strip is a placeholder node while reading (doctrees are shared by every
builder) and becomes HTML when references are resolved, with a link that fits the builder: a
relative page link in the HTML book, an anchor in the single-page book that the PDF is printed from.
"""

from __future__ import annotations

import html

from docutils import nodes

from companion.book.site.compact import one_line
from companion.book.words import verdict_badge

__all__ = ["VerdictStrip", "strip_html", "add_strip", "resolve_strips", "stale_answer", "SCOREBOARD_DOC"]

SCOREBOARD_DOC = "book/scoreboard"


class VerdictStrip(nodes.General, nodes.Element):
    """Placeholder for a chapter's verdict strip; `docname` names the page whose claims it shows."""


def strip_html(claims: list[dict], href, answer: str = "") -> str:
    """The chapter's opening as HTML: its answer (if any), then a line per claim; `href(anchor)` gives
    the link to a claim's card."""
    items = []
    for c in claims:
        items.append(f'<li>{verdict_badge(c["verdict"], c.get("words", "claims"))} '
                     f'<a class="verdict-strip-item" href="{html.escape(href(c["anchor"].lower()), quote=True)}">'
                     f'{c["id"]}</a> {html.escape(one_line(c["statement"], 140))}</li>')
    head = f'<p class="chapter-answer">{html.escape(" ".join(answer.split()))}</p>' if answer else ""
    return (f'<div class="verdict-strip">{head}<p class="verdict-strip-label">What this chapter decides '
            f'(each links to its card on the scoreboard):</p><ul class="chapter-claims">{"".join(items)}</ul></div>')


def stale_answer(rests_on: dict, claims: list[dict]) -> list[str]:
    """["S2-06 is now partly, the answer says not reproduced", …] for a chapter whose answer no longer
    matches its claims' verdicts (or names a claim the chapter does not decide)."""
    by_id = {c["id"]: c["verdict"] for c in claims}
    return [f"{cid} is {by_id.get(cid, 'not decided in this chapter')}, the answer says {expected}"
            for cid, expected in (rests_on or {}).items() if by_id.get(cid) != expected]


def add_strip(doctree: nodes.document, docname: str) -> bool:
    """Put a placeholder after the page's first title; False when the page has no title."""
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not section.children or not isinstance(section[0], nodes.title):
        return False
    section.insert(1, VerdictStrip(docname=docname))
    return True


def resolve_strips(app, doctree: nodes.document, fromdocname: str) -> None:
    """Replace each placeholder by the strip of its page's claims (`app.companion_strips`: {docname:
    claims}, read from the scoreboard when the build starts), in HTML builders; by nothing elsewhere or
    when the page measures no claim."""
    builder = app.builder
    for node in list(doctree.findall(VerdictStrip)):
        claims = getattr(app, "companion_strips", {}).get(node["docname"], [])
        answer = getattr(app, "companion_answers", {}).get(node["docname"], "")
        if builder.format != "html" or not claims:
            node.parent.remove(node)
            continue
        if builder.name == "singlehtml":
            def href(anchor: str) -> str:
                return "#" + anchor
        else:
            base = builder.get_relative_uri(fromdocname, SCOREBOARD_DOC)

            def href(anchor: str, base=base) -> str:
                return f"{base}#{anchor}"
        node.replace_self(nodes.raw("", strip_html(claims, href, answer), format="html"))
