"""A small Sphinx extension for the book: facts computed at build time, never typed by hand.

It sets MyST substitutions (enable the `substitution` extension) that any page may use:
- `{{ version }}`: the package's version, `companion.__version__` (the one place it is set);
- `{{ book_commit }}`, `{{ book_date }}`: the commit the book was built from (with "+ local changes"
  when the work tree differs from it) and its UTC date and time (the build's, with local changes), so
  a clean checkout of one commit builds the same pages on every machine;
- `{{ n_claims }}` and `{{ n_<verdict> }}` (`n_reproduced`, `n_partly`, `n_not_reproduced`,
  `n_inconclusive`, `n_not_run`, `n_not_rebuilt`): the counts of `book/chapters/scoreboard.json`;
- `{{ headline_misses }}`: a list of the headline claims that did not reproduce (not reproduced or
  inconclusive), each linked to its anchor on the scoreboard, with our value beside the source's;
- `{{ verdicts_at_a_glance }}`: the landing page's verdicts-first block (`companion.book.site.glance`): a
  line per source with its counts and takeaway, and the headline claims held and failed alike; a
  takeaway whose evidence moved is left out with a build warning;
- `{{ book_links }}`: where to read the book: its published address (`html.baseurl` in _config.yml,
  else $COMPANION_BOOK_URL, which the Pages workflow sets from GitHub's own Pages URL) and the PDF
  (`make pdf`, `companion.book.site.pdf`), linked only where the build serves it (`pdf_served`).
The same values go into `html_context` (`book_commit`, `book_date`) for templates. Every chapter page
that measures claims opens with a strip of its verdicts (`companion.book.site.verdict_strip`), and
`book/_static/scoreboard.js` unfolds the scoreboard group a link to a claim points into. Built inside
`_build/editions/<profile>/`, the verdicts are that profile's. A notebook output named `tab-…` is a
numbered table (`companion.book.site.tables`), and a percent sign sits a thin no-break space from its number
on every page (`companion.book.site.typography`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

from sphinx.util import logging

import companion
from companion import __version__
from companion.book.site import glance, tables, typography, verdict_strip
from companion.book.display import DASHBOARD, load_dashboard
from companion.book.site.pdf import PDF_NAME

__all__ = ["setup", "build_facts", "git_commit", "book_profile", "pdf_served"]

logger = logging.getLogger(__name__)


def git_commit(root: Path) -> str:
    """Short hash of HEAD, "+ local changes" if the tracked files differ from it; "unknown" outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("GITHUB_SHA", "unknown")[:10]
    return head + (" + local changes" if dirty else "")


def _build_time(root: Path, commit: str) -> dt.datetime:
    """$SOURCE_DATE_EPOCH if set (reproducible builds pin it); else the commit's time when the work tree
    is the commit; else now."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if not epoch and commit != "unknown" and "local changes" not in commit:
        try:
            epoch = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=root, capture_output=True, text=True,
                                   check=True).stdout.strip() or None
        except (OSError, subprocess.CalledProcessError):
            epoch = None
    return dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc) if epoch else dt.datetime.now(dt.timezone.utc)


def book_profile(root: Path) -> str | None:
    """The profile of an edition built in `_build/editions/<profile>/`; None for the book itself."""
    return root.name if root.parent.name == "editions" else None


def _scoreboard(root: Path) -> dict:
    path = root / "book" / "chapters" / "scoreboard.json"
    return json.loads(path.read_text()) if path.is_file() else {"counts": {}, "claims": [], "headlines": []}


def _links(url: str, root_doc: str, pdf_served: bool) -> str:
    """Where to read the book; the PDF is linked only where it is served beside the HTML (`pdf_served`),
    so that no build links a file it does not have."""
    up = "../" * root_doc.count("/")
    if pdf_served:
        pdf = f'<a class="book-pdf-link" href="{up}{PDF_NAME}">the whole book as one PDF</a>'
        return f"Read it online at <{url}> or download {pdf}." if url else f"Download {pdf}."
    make = "`make pdf` prints the whole book as one PDF."
    return f"Read it online at <{url}>; {make}" if url else make


def pdf_served(outdir: Path) -> bool:
    """Whether this build serves the PDF: it is already in the output folder, or the build was told it
    will be (`COMPANION_PDF=1`, which `make pdf` and the Pages workflow set before they print it)."""
    return os.environ.get("COMPANION_PDF", "") == "1" or (Path(outdir) / PDF_NAME).is_file()


def build_facts(root: Path, *, url: str = "", root_doc: str = "book/intro",
                pdf: bool = False) -> tuple[dict[str, str], list[str]]:
    """The substitutions, from the scoreboard JSON and git, and the problems to warn about."""
    commit = git_commit(root)
    facts = {"book_commit": commit, "book_date": _build_time(root, commit).strftime("%Y-%m-%d %H:%M UTC"),
             "version": __version__}
    doc = _scoreboard(root)
    facts["verdicts_at_a_glance"], problems = glance.landing(doc, book_profile(root))
    facts["book_links"] = _links(url, root_doc, pdf)
    return facts, problems


def _inject(app, config) -> None:
    root = Path(app.confdir)
    url = (getattr(config, "html_baseurl", "") or os.environ.get("COMPANION_BOOK_URL", "")).strip()
    facts, problems = build_facts(root, url=url, root_doc=getattr(config, "root_doc", "book/intro"),
                                  pdf=pdf_served(Path(app.outdir)))
    if book_profile(root) is None:  # an edition leaves out the takeaways its own verdicts do not bear out
        for problem in problems:
            logger.warning(problem)
    config.myst_substitutions = {**(getattr(config, "myst_substitutions", None) or {}), **facts}
    config.html_context = {**(config.html_context or {}), "book_commit": facts["book_commit"],
                           "book_date": facts["book_date"]}
    doc = _scoreboard(root)
    profile = book_profile(root)
    app.companion_strips = {}
    for c in doc.get("claims", []):
        if not c.get("chapter") or c.get("reason"):
            continue
        verdict = c.get("by_profile", {}).get(profile, {}).get("verdict", c["verdict"]) if profile else c["verdict"]
        app.companion_strips.setdefault(f"book/{c['chapter']}", []).append(
            {"id": c["id"], "anchor": c["anchor"], "verdict": verdict, "words": c.get("words", "claims"),
             "statement": c["statement"]})
    app.companion_answers = {}
    dash = root / DASHBOARD
    for chapter, entry in load_dashboard(dash if dash.is_file() else None)["chapters"].items():
        docname = f"book/chapters/{chapter}"
        stale = verdict_strip.stale_answer(entry.get("rests_on", {}), app.companion_strips.get(docname, []))
        if stale:
            if book_profile(root) is None:
                logger.warning(f"book/dashboard.yml: the answer of chapter {chapter} no longer matches its verdicts "
                               f"({'; '.join(stale)}); rewrite it or its rests_on")
            continue
        app.companion_answers[docname] = entry.get("answer", "")


def _read(app, doctree) -> None:
    if app.env.docname in getattr(app, "companion_strips", {}):
        verdict_strip.add_strip(doctree, app.env.docname)


def undocumented(documented) -> list[str]:
    """The public names (`companion.__all__`, the version aside) that no autodoc entry documents, given the Python
    domain's object names (`companion.attend`, ...)."""
    return [f"companion.{n}" for n in companion.__all__ if n != "__version__" and f"companion.{n}" not in documented]


def _check_api(app, env) -> None:
    """Every public name is on the API page: a warning per missing one, which the strict build (-W) makes fatal."""
    if "autodoc" not in " ".join(app.extensions):
        return
    for name in undocumented(set(env.get_domain("py").objects)):
        logger.warning(f"{name} is public (companion.__all__) but book/api.md does not document it; add an autodoc "
                       "entry for it there, or take it out of __all__")


def setup(app):
    app.connect("config-inited", _inject)
    app.connect("env-check-consistency", _check_api)
    app.connect("doctree-read", _read)
    app.connect("doctree-resolved", verdict_strip.resolve_strips)
    app.add_node(verdict_strip.VerdictStrip)
    app.add_js_file("scoreboard.js")
    app.add_js_file("book.js")
    tables.setup(app)
    typography.setup(app)
    return {"version": "2", "parallel_read_safe": True, "parallel_write_safe": True}
