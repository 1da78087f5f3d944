"""How a chapter source presents its cells: the machinery stays quiet, the reader sees results.

`plan(nb, name)` returns the notebook with the presentation tags this book's convention gives each
code cell, and the "rerun this chapter" note after the title cell; `tools/tag_cells.py` applies it to
every source in notebooks/ and `tests/test_tag_cells.py` checks that every source already follows it.
The convention (only the tags in MANAGED are set or cleared; other tags are left alone):

- the `parameters` cell, cells that only glue numbers or record claims (`glue`, `glue_all`,
  `record`, `record_all`) or show the `{id: verdict}` summary, and cells that load the chapter's runs
  and print how many there are (`load…(...)`, then `print(...)`): `remove-cell` (they still execute,
  and nbval still checks their outputs; the run counts and times are the rerunner's, not the reader's);
- the setup cell (imports, `check_parameters`, `plots.use_style`), `verdict_table(...)`, a
  `listing(...)` of the package's source, and cells that glue or record and then show one table:
  `remove-input` (their output, if any, stays);
- cells that draw a figure (`plt.`, `fig`, `.subplots(`), cells that compute beside a `glue`, and
  cells that only call helpers on names already defined (`ch.table(frame)`, `x = ch.measure(runs)`):
  `hide-input` (the code folds under its output, one click away);
- a cell that runs only `if rerun:` (the rerunner's own measurement, beside the committed one):
  `hide-input`, whatever literals it holds;
- cells that state their inputs as literals (a list of contrasts, a mask written out as a tensor, the
  tokens of an example): shown, since those lines are what a reader changes to ask another question;
- a `recipe` cell (tagged by hand: code a reader copies into a model of their own, which `make wheel-check`
  also runs against the installed wheel): shown whole, imports included.

A figure cell's caption (`metadata.mystnb.figure.caption`, numbered by the build) also gives its image
its alt text (`metadata.mystnb.image.alt`): the caption as plain text, so that a screen reader says
what the figure shows rather than the image's file name. A table cell's caption has a name `tab-…`
(`companion.book.site.tables` numbers it as a table); the verdict table gets `VERDICT_CAPTION`.

Papermill's injected-parameters cell is removed by the runner (`runner.strip_volatile`).
"""

from __future__ import annotations

import ast
import copy
import re

from companion.experiments.chapters import CHAPTERS

__all__ = ["MANAGED", "VERDICT_CAPTION", "RERUN_ID", "classify", "rerun_note", "alt_text", "plan"]

MANAGED = ("remove-cell", "remove-input", "hide-input")
# The caption of the table every measuring chapter ends with (`claims.verdict_table`), numbered as a table.
VERDICT_CAPTION = ("The chapter's claims: what the source says and its value, ours in the same unit, and the "
                   "verdict by the claim's rule (each claim links to its card on the scoreboard).")
RERUN_ID = "rerun-this-chapter"
_BOOKKEEPING_CALLS = {"glue", "glue_all", "record", "record_all"}
_SETUP_CALLS = {"check_parameters", "use_style"}
_PLOTTING = re.compile(r"\bplt\.|\bfig\b|\.subplots\(|\bsns\.")


def _call_name(node) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return None


def _statement_calls(stmt) -> str | None:
    """The function a statement calls at its top (`f(...)`, `x = f(...)`, `x += f(...)`), else None."""
    value = getattr(stmt, "value", None)
    return _call_name(value) if isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)) else None


def _loads_and_counts(body, calls) -> bool:
    """Run bookkeeping: assignments of which one loads runs (`load…`), then a `print(...)` of the count."""
    return (len(body) > 1 and calls[-1] == "print" and isinstance(body[-1], ast.Expr)
            and all(isinstance(s, ast.Assign) for s in body[:-1])
            and any((c or "").startswith("load") for c in calls[:-1]))


_LITERALS = (ast.List, ast.Tuple, ast.Dict, ast.Set)


def _states_inputs(body) -> bool:
    """Whether a cell writes its inputs out as literals: a list, tuple, dict or set display anywhere
    but in a subscript (`ratios[0]`, `x[:, 1:]`) or an unpacking target (`a, b = f()`): those state
    no input."""
    subscripts = {id(n) for s in body for sub in ast.walk(s) if isinstance(sub, ast.Subscript)
                  for n in ast.walk(sub.slice)}
    return any(isinstance(n, _LITERALS) and id(n) not in subscripts and not isinstance(getattr(n, "ctx", None), ast.Store)
               for s in body for n in ast.walk(s))


def classify(source: str, tags: list[str]) -> set[str]:
    """The presentation tags (a subset of MANAGED) a code cell should carry."""
    if "parameters" in tags:
        return {"remove-cell"}
    if "recipe" in tags:
        return set()
    try:
        body = ast.parse(source).body
    except SyntaxError:  # IPython magics: leave the cell as it is
        return set(t for t in tags if t in MANAGED)
    if not body:
        return set()
    calls = [_statement_calls(s) for s in body]
    if all(c in _BOOKKEEPING_CALLS for c in calls):
        return {"remove-cell"}
    if isinstance(body[-1], ast.Expr) and isinstance(body[-1].value, ast.DictComp) and \
            all(c in _BOOKKEEPING_CALLS for c in calls[:-1]):
        return {"remove-cell"}  # the {id: verdict} summary that nbval checks (after any glue)
    if len(body) == 1 and calls[0] == "verdict_table":
        return {"remove-input"}
    if calls[-1] == "listing" and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body[:-1]):
        return {"remove-input"}  # a listing of the package's source: the listing is what the page shows
    if len(body) > 1 and all(c in _BOOKKEEPING_CALLS for c in calls[:-1]) and isinstance(body[-1], ast.Expr):
        return {"remove-input"}  # bookkeeping, then the table it leads to: show the table only
    if _loads_and_counts(body, calls):
        return {"remove-cell"}
    imports = any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body)
    if imports and (set(calls) & _SETUP_CALLS or isinstance(body[0], (ast.Import, ast.ImportFrom))):
        return {"remove-input"}
    if all(isinstance(st, ast.If) and isinstance(st.test, ast.Name) and st.test.id == "rerun" for st in body):
        return {"hide-input"}  # the rerunner's measurement: its output is the reader's, its code is not
    if _PLOTTING.search(source) or set(calls) & _BOOKKEEPING_CALLS:
        return {"hide-input"}  # a figure, or computing beside glue: fold the code under its output
    if _states_inputs(body):
        return set()  # the reader's knobs: shown
    return {"hide-input"}  # helper calls on what is already defined: the output is the reader's


def _shows_verdicts(source: str) -> bool:
    """Whether the cell's one output is the verdict table: it ends with `verdict_table(...)`."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    calls = [_statement_calls(s) for s in body]
    return bool(body) and calls[-1] == "verdict_table" and isinstance(body[-1], ast.Expr)


def _trains(name: str) -> bool:
    """Whether the chapter reads trained runs (`companion.experiments.chapters.CHAPTERS`)."""
    return bool(CHAPTERS.get(name[:2], ("", ()))[1])


def rerun_note(name: str) -> str:
    """The note at the top of a chapter: how to rerun it at both profiles, and where its runs come from."""
    if _trains(name):
        runs = ("into the book. At `ci` the chapter reads the committed run records in `results/ci/`, so a\n"
                f"clean clone trains nothing; `.venv/bin/companion reproduce {name[:2]}` retrains them from nothing\n"
                "and compares, run by run and claim by claim ({ref}`reproductions`).\n")
    else:
        runs = "into the book. This chapter trains nothing.\n"
    return (
        ":::{admonition} Rerun this chapter\n"
        ":class: tip dropdown\n"
        "The page shows the `ci` profile. From the repository root, after `make install`, execute the\n"
        "chapter's source with papermill at either profile (`paper` uses the sources' own settings and is\n"
        "meant for a GPU):\n"
        "\n"
        "```bash\n"
        f".venv/bin/papermill notebooks/{name}.ipynb out.ipynb -p profile ci\n"
        f".venv/bin/papermill notebooks/{name}.ipynb out.ipynb -p profile paper\n"
        "```\n"
        "\n"
        f"`.venv/bin/companion chapters {name} --profile ci` does the same and writes the executed copy\n"
        + runs + ":::"
    )


def alt_text(caption: str) -> str:
    """A caption as plain text for an image's alt attribute (no math dollars, emphasis or roles)."""
    text = re.sub(r"\{[a-z:-]+\}`([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", caption)  # {ref}`text <x>` → text
    text = re.sub(r"[$*`]", "", text).replace("\\", "")
    return " ".join(text.split())


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def plan(nb: dict, name: str) -> dict:
    """A copy of `nb` that follows the convention (idempotent: plan(plan(nb)) == plan(nb))."""
    out = copy.deepcopy(nb)
    cells = out["cells"]
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        meta = cell.setdefault("metadata", {})
        tags = list(meta.get("tags", []))
        want = classify("".join(cell.get("source", "")), tags)
        kept = [t for t in tags if t not in MANAGED]
        new = kept + [t for t in MANAGED if t in want]
        if new:
            meta["tags"] = new
        else:
            meta.pop("tags", None)
        if _shows_verdicts("".join(cell.get("source", ""))):
            meta.setdefault("mystnb", {})["figure"] = {"caption": VERDICT_CAPTION, "name": f"tab-ch{int(name[:2])}-verdicts"}
        figure = meta.get("mystnb", {}).get("figure", {})
        if figure.get("caption") and not figure.get("name", "").startswith("tab-"):
            meta["mystnb"].setdefault("image", {})["alt"] = alt_text(figure["caption"])
    note = {"cell_type": "markdown", "id": RERUN_ID, "metadata": {}, "source": _lines(rerun_note(name))}
    existing = [i for i, c in enumerate(cells) if c.get("id") == RERUN_ID]
    if existing:
        cells[existing[0]]["source"] = note["source"]
    else:
        first_md = next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"), -1)
        cells.insert(first_md + 1, note)
    return out
