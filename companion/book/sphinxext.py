"""A small Sphinx extension for the book: facts computed at build time, never typed by hand.

It sets MyST substitutions (enable the `substitution` extension) that any page may use:
- `{{ book_commit }}`, `{{ book_date }}`: the commit the book was built from (with "+ local changes"
  when the work tree differs from it) and its UTC date and time (the build's, with local changes), so
  a clean checkout of one commit builds the same pages on every machine;
- `{{ n_claims }}` and `{{ n_<verdict> }}` (`n_reproduced`, `n_partly`, `n_not_reproduced`,
  `n_inconclusive`, `n_not_run`, `n_not_rebuilt`): the counts of `book/chapters/scoreboard.json`;
- `{{ headline_misses }}`: a list of the headline claims that did not reproduce (not reproduced or
  inconclusive), each linked to its anchor on the scoreboard, with our value beside the source's.
The same values go into `html_context` (`book_commit`, `book_date`) for templates.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

__all__ = ["setup", "build_facts", "git_commit"]

_COUNT_NAMES = {"reproduced": "n_reproduced", "partly": "n_partly", "not reproduced": "n_not_reproduced",
                "inconclusive": "n_inconclusive", "not run at this scale": "n_not_run",
                "reported, not rebuilt": "n_not_rebuilt"}
MISSES = ("not reproduced", "inconclusive")


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


def build_facts(root: Path) -> dict[str, str]:
    """The substitutions, from the scoreboard JSON and git."""
    commit = git_commit(root)
    facts = {"book_commit": commit, "book_date": _build_time(root, commit).strftime("%Y-%m-%d %H:%M UTC")}
    path = root / "book" / "chapters" / "scoreboard.json"
    doc = json.loads(path.read_text()) if path.is_file() else {"counts": {}, "claims": [], "headlines": []}
    counts = doc.get("counts", {})
    facts["n_claims"] = str(len(doc.get("claims", [])))
    for verdict, name in _COUNT_NAMES.items():
        facts[name] = str(counts.get(verdict, 0))
    by_id = {c["id"]: c for c in doc.get("claims", [])}
    misses = [by_id[h] for h in doc.get("headlines", []) if h in by_id and by_id[h]["verdict"] in MISSES]
    lines = []
    for c in misses:
        lines.append(f"- {{ref}}`{c['id']} <claim-{c['id']}>` ({c['verdict']}): {c['statement']} "
                     f"Source: {c['source_value']}; ours: {c.get('ours_text', c['ours'])}.")
    facts["headline_misses"] = "\n".join(lines) if lines else "Every headline claim reproduced."
    return facts


def _inject(app, config) -> None:
    facts = build_facts(Path(app.confdir))
    config.myst_substitutions = {**(getattr(config, "myst_substitutions", None) or {}), **facts}
    config.html_context = {**(config.html_context or {}), "book_commit": facts["book_commit"],
                           "book_date": facts["book_date"]}


def setup(app):
    app.connect("config-inited", _inject)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
