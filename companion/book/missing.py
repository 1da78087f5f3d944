"""Read several blocks of runs at once, so that missing runs are counted over all of them.

A chapter that reads two grids (or one grid with two sets of seeds) calls `companion.reading` twice;
the first call that lacks runs raises `MissingRuns` and the second is never counted.
`gather` makes every call and, when some lack runs, raises one `MissingRuns` whose `found` and
`total` cover all of them ("12 of 60 runs"), which is what `companion claim` reports.
"""

from __future__ import annotations

from typing import Any, Callable

from companion.reading import MissingRuns

__all__ = ["gather"]


def _count(result: Any) -> int:
    """The records in what an `ensure_*` call returned: a list of records, of lists, or a dict of lists."""
    blocks = result.values() if isinstance(result, dict) else result
    return sum(len(b) if isinstance(b, (list, tuple)) else 1 for b in blocks)


def gather(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, in order; if some raise `MissingRuns`, one `MissingRuns` over all of them
    (the found and total of the calls that failed plus the records of those that did not)."""
    results, errors = [], []
    for call in calls:
        try:
            results.append(call())
        except MissingRuns as err:
            errors.append(err)
    if errors:
        ok = sum(_count(r) for r in results)
        raise MissingRuns(" ".join(str(e) for e in errors), sum(e.found for e in errors) + ok,
                          sum(e.total for e in errors) + ok, [c for e in errors for c in e.missing])
    return results
