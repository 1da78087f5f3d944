"""A chapter opens with its verdicts: a strip of badges under its title, from the scoreboard's data.

At build time (Sphinx, `companion.book.sphinxext`), every page that measures claims gets, right
after its title, one line: "Verdicts in this chapter:" and a badge per claim, each linked to the
claim's card on the scoreboard. Nothing is typed into the notebooks: the claims of a page are those
whose `chapter` in `book/chapters/scoreboard.json` names it, and their verdicts are the scoreboard's
at the book's profile. The strip is a placeholder node while reading (doctrees are shared by every
builder) and becomes HTML when references are resolved, with a link that fits the builder: a
relative page link in the HTML book, an anchor in the single-page book that the PDF is printed from.
"""

from __future__ import annotations

import html

from docutils import nodes

from companion.book.glance import verdict_badge

__all__ = ["VerdictStrip", "strip_html", "add_strip", "resolve_strips", "SCOREBOARD_DOC"]

SCOREBOARD_DOC = "book/scoreboard"


class VerdictStrip(nodes.General, nodes.Element):
    """Placeholder for a chapter's verdict strip; `docname` names the page whose claims it shows."""


def strip_html(claims: list[dict], href) -> str:
    """The strip's HTML; `href(anchor)` gives the link to a claim's card."""
    items = []
    for c in claims:
        title = html.escape(f"{c['id']}: {' '.join(c['statement'].split())}", quote=True)
        items.append(f'<a class="verdict-strip-item" href="{html.escape(href(c["anchor"].lower()), quote=True)}" '
                     f'title="{title}"><span class="verdict-strip-id">{c["id"]}</span>&nbsp;'
                     f'{verdict_badge(c["verdict"], c.get("own", ""))}</a>')
    return ('<p class="verdict-strip"><span class="verdict-strip-label">Verdicts in this chapter:</span> '
            + " ".join(items) + "</p>")


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
        node.replace_self(nodes.raw("", strip_html(claims, href), format="html"))
