"""Where things live: the book's root (the folder holding `_toc.yml`), the paths under it, and the
folders searched for datasets that cannot ship with the book (`data_roots`)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["repo_root", "data_roots", "ladder_root", "decisive_root"]


def repo_root(start: str | os.PathLike | None = None) -> Path:
    """The nearest folder at or above `start` (default: cwd, then the package) with a `_toc.yml`.

    `$COMPANION_ROOT` overrides the search. Falls back to the current directory.
    """
    env = os.environ.get("COMPANION_ROOT")
    if env:
        return Path(env).resolve()
    starts = [Path(start)] if start else [Path.cwd(), Path(__file__).resolve().parent]
    for s in starts:
        for folder in (s.resolve(), *s.resolve().parents):
            if (folder / "_toc.yml").is_file():
                return folder
    return Path.cwd().resolve()


def data_roots(root: str | os.PathLike = "") -> list[Path]:
    """The folders searched for datasets, in order: `root` alone if given; else `$COMPANION_DATA` (if
    set), `<repo>/data` and `<repo>/../shared/data`."""
    if root:
        return [Path(root).expanduser()]
    env = os.environ.get("COMPANION_DATA")
    base = repo_root()
    return ([Path(env).expanduser()] if env else []) + [base / "data", base.parent / "shared" / "data"]


def ladder_root() -> Path:
    """The scale ladder's committed records, `<repo root>/results/ladder` (`companion ladder`)."""
    return repo_root() / "results" / "ladder"


def decisive_root() -> Path:
    """The decisive searches' committed records, `<repo root>/results/decisive` (`companion decisive`)."""
    return repo_root() / "results" / "decisive"
