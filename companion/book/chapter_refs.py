"""Chapter references in the book's data files (the claims ledger, the dashboard), glued, never typed.

A ledger text writes `{chapter:06}` where it means the chapter whose source is `06_…`; `expand` turns it
into "Chapter 6", the number that chapter has in `_toc.yml` (numbered parts, in order), so that a book
whose chapters are reordered renumbers its ledger with its pages. A key no chapter has is named in a
ValueError.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from companion.paths import repo_root

__all__ = ["TOKEN", "chapter_numbers", "expand"]

TOKEN = re.compile(r"\{chapter:(\d\d)\}")


@lru_cache(maxsize=None)
def chapter_numbers(root: Path | None = None) -> dict[str, int]:
    """{"06": 6, …}: each numbered chapter's key (its file's first two characters) → its number in `_toc.yml`."""
    toc = yaml.safe_load(((root or repo_root()) / "_toc.yml").read_text())
    files = [c["file"] for part in toc.get("parts", []) if part.get("numbered")
             for c in part.get("chapters", [])]
    return {Path(f).name[:2]: n for n, f in enumerate(files, start=1)}


def expand(value: Any, numbers: dict[str, int] | None = None) -> Any:
    """`value` with every `{chapter:NN}` in its strings (nested lists and dicts too) written "Chapter n"."""
    numbers = chapter_numbers() if numbers is None else numbers
    if isinstance(value, str):
        def one(m: re.Match) -> str:
            if m.group(1) not in numbers:
                raise ValueError(f"{m.group(0)} names no numbered chapter of _toc.yml (keys: {', '.join(numbers)}).")
            return f"Chapter {numbers[m.group(1)]}"
        return TOKEN.sub(one, value)
    if isinstance(value, list):
        return [expand(v, numbers) for v in value]
    if isinstance(value, dict):
        return {k: expand(v, numbers) for k, v in value.items()}
    return value
