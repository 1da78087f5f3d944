"""Where things live: the book's root (the folder holding `_toc.yml`) and the paths under it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["repo_root"]


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
