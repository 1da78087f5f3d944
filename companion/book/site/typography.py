"""One typographic rule the book applies at build time: a percent sign sits a thin space from its number.

"87.3 %" is written by the package, the prose and the captions with an ordinary space (or none is
wanted at all by a reader who types it); on the page it becomes "87.3 %", the number, U+202F (a
narrow no-break space: thin, and never a line break between the number and its unit) and the sign, as
SI typesetting writes it. The rule runs once a page is resolved (`doctree-resolved`, after glued
values and tables are in place), on the page's text and on the HTML tables that notebooks output, so
every number of every page follows it and no chapter module has to remember it; code, literals and
math are left as they are.
"""

from __future__ import annotations

import re

from docutils import nodes

__all__ = ["THIN", "PERCENT", "thin_percent", "thin_percent_html", "apply", "setup"]

THIN = "\u202f"  # NARROW NO-BREAK SPACE
PERCENT = re.compile(r"(?<=\d)[ \u00a0\u2009]?%")  # a digit, an optional space of any kind we write, then %
_SKIP = (nodes.literal, nodes.literal_block, nodes.math, nodes.math_block, nodes.FixedTextElement)
_TAG = re.compile(r"(<[^>]*>)")
_VERBATIM = re.compile(r"<(script|style|pre|code)\b", re.I)


def thin_percent(text: str) -> str:
    """Every "digit [space]%" of `text` with a thin no-break space between the number and the sign."""
    return PERCENT.sub(THIN + "%", text)


def thin_percent_html(html: str) -> str:
    """`thin_percent` on the text between the tags of an HTML fragment (tags and attributes untouched;
    the content of script, style, pre and code elements too)."""
    out, verbatim = [], None
    for part in _TAG.split(html):
        if part.startswith("<"):
            opened = _VERBATIM.match(part)
            if verbatim is None and opened:
                verbatim = opened.group(1).lower()
            elif verbatim is not None and part.lower().startswith(f"</{verbatim}"):
                verbatim = None
            out.append(part)
        else:
            out.append(part if verbatim else thin_percent(part))
    return "".join(out)


def _verbatim(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, _SKIP):
            return True
        parent = parent.parent
    return False


def apply(doctree: nodes.Node) -> int:
    """Apply the rule to a resolved doctree in place; returns how many text or raw nodes changed."""
    changed = 0
    for text in list(doctree.findall(nodes.Text)):
        if "%" not in text or _verbatim(text):
            continue
        new = thin_percent(str(text))
        if new != str(text):
            text.parent.replace(text, nodes.Text(new))
            changed += 1
    for raw in list(doctree.findall(nodes.raw)):
        if "html" not in raw.get("format", "").split() or "%" not in raw.astext() or len(raw.children) != 1:
            continue
        new = thin_percent_html(raw.astext())
        if new != raw.astext():
            raw.replace(raw.children[0], nodes.Text(new))
            changed += 1
    return changed


def _resolved(app, doctree, docname) -> None:
    apply(doctree)


def setup(app) -> None:
    app.connect("doctree-resolved", _resolved)
