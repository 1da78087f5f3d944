"""Code that teaches: a span of the package's own source shown on the page, read when the chapter runs.

A chapter shows the few lines that are its idea (the masked scores, GOAT's lanes) with `listing`, so
the page prints the code that produced its numbers rather than a copy that could drift from it.
"""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

from companion.paths import repo_root

__all__ = ["listing", "source_span"]


def source_span(obj, *, start: str | None = None, stop: str | None = None) -> tuple[str, str, int, int]:
    """(file relative to the repository, code, first line, last line) of `obj`'s source, from the first
    line containing `start` to the first line after it containing `stop` (each optional), dedented."""
    lines, first = inspect.getsourcelines(obj)
    a = 0 if start is None else next((n for n, line in enumerate(lines) if start in line), None)
    if a is None:
        raise ValueError(f"{obj.__qualname__} has no line containing {start!r}; name a line of its source")
    b = len(lines) - 1 if stop is None else next((n for n in range(a, len(lines)) if stop in lines[n]), None)
    if b is None:
        raise ValueError(f"{obj.__qualname__} has no line containing {stop!r} after {start!r}")
    path = Path(inspect.getsourcefile(obj)).resolve()
    try:
        shown = path.relative_to(repo_root()).as_posix()
    except ValueError:
        shown = path.name
    return shown, textwrap.dedent("".join(lines[a:b + 1])).rstrip(), first + a, first + b


def listing(obj, *, start: str | None = None, stop: str | None = None):
    """The span of `source_span` as a Python code block (IPython Markdown), headed by where it lives."""
    from IPython.display import Markdown

    path, code, a, b = source_span(obj, start=start, stop=stop)
    return Markdown(f"```python\n# {path}: {obj.__qualname__}, lines {a}–{b}\n{code}\n```")
