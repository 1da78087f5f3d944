"""Numbered, captioned tables from notebook outputs: a chapter's table is cited as "Table 3.2".

A code cell whose output is a table carries the same metadata as a figure cell, with a name that
starts with `tab-`: `metadata.mystnb.figure = {caption: …, name: "tab-ch3-…"}`. myst-nb wraps the
output in a figure node; `number_tables` (at `doctree-read`) turns each such node into a `Table` node,
caption first as journals set it, which Sphinx numbers in the sequence of tables (`numfig_format`'s
"Table %s"), so that `{numref}` cites it as a table and the page prints "Table 3.2." before its caption.
"""

from __future__ import annotations

from docutils import nodes

__all__ = ["Table", "PREFIX", "number_tables", "visit_table", "depart_table", "setup"]

PREFIX = "tab-"


class Table(nodes.General, nodes.Element):
    """A notebook output shown as a numbered table: its caption, then the output."""


def _is_table(node: nodes.figure) -> bool:
    return any(name.startswith(PREFIX) for name in node.get("names", []))


def number_tables(app, doctree) -> None:
    """Replace every figure node named `tab-…` by a `Table` with the same ids and names, caption first."""
    for figure in list(doctree.findall(nodes.figure)):
        if not _is_table(figure):
            continue
        # MyST marks the page "mathjax_ignore" and typesets only what is marked as math; a table's
        # headers and cells may hold \( … \) math, so the table asks MathJax to process it
        table = Table("", classes=["numbered-table", "mathjax_process", *figure.get("classes", [])])
        for key in ("ids", "names"):
            table[key] = list(figure[key])
        captions = [c for c in figure.children if isinstance(c, nodes.caption)]
        table.extend(captions + [c for c in figure.children if not isinstance(c, nodes.caption)])
        table.source, table.line = figure.source, figure.line
        figure.replace_self(table)
        for id_ in table["ids"]:  # a {numref} finds its target through the document's ids
            doctree.ids[id_] = table


def visit_table(self, node: Table) -> None:
    self.body.append(self.starttag(node, "div", CLASS="numbered-table"))


def depart_table(self, node: Table) -> None:
    self.body.append("</div>\n")


def setup(app) -> None:
    """Register the node as a member of Sphinx's "table" sequence and convert tables when a page is read."""
    app.add_enumerable_node(Table, "table", html=(visit_table, depart_table))
    app.connect("doctree-read", number_tables)
