"""How a retrained record is compared with the committed one: every number of each, walked in one order, equal to the bit
or not (the first that differs named), and how far a claim's measure sits from its rule's nearest line."""

from __future__ import annotations

import math
from typing import Any, Iterator

from companion.host import same_numerics

__all__ = ["numbers", "compare_records", "is_number", "margin"]


def numbers(obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) of every leaf of a record's nested dicts and lists, in a fixed order."""
    if isinstance(obj, dict):
        for k in sorted(obj, key=str):
            yield from numbers(obj[k], f"{path}.{k}" if path else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from numbers(v, f"{path}[{i}]")
    else:
        yield path, obj


def _result(record) -> dict:
    """What a record computed: metrics, curves without wall time, drift and readouts."""
    return {"metrics": record.metrics, "curves": {k: v for k, v in record.curves.items() if k != "wall_time"},
            "drift": record.drift, "readouts": record.readouts}


def compare_records(committed, new) -> dict:
    """How `new` (retrained) compares with `committed`: {bitwise, same_host, structure (None, or what
    differs in shape), largest_abs, largest_rel, where (the path of the largest relative difference)}."""
    a, b = dict(numbers(_result(committed))), dict(numbers(_result(new)))
    out = {"run_id": committed.run_id, "label": f"{committed.config.experiment}/{committed.config.method}/seed "
           f"{committed.seed}", "same_host": same_numerics(committed.host, new.host), "bitwise": a == b,
           "structure": None, "largest_abs": 0.0, "largest_rel": 0.0, "where": ""}
    if a.keys() != b.keys():
        only = sorted(a.keys() ^ b.keys())
        out["structure"] = f"{len(only)} entries in one record only, e.g. {only[0]}"
        return out
    for path, x in a.items():
        y = b[path]
        if x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)):
            continue
        if not (is_number(x) and is_number(y)):
            out["structure"] = f"{path}: {x!r} against {y!r}"
            return out
        if math.isnan(float(y)) != math.isnan(float(x)):
            out["structure"] = f"{path} became {y!r} (committed {x!r})"
            return out
        diff = abs(float(x) - float(y))
        rel = diff / max(abs(float(x)), abs(float(y)), 1e-30)
        out["largest_abs"] = max(out["largest_abs"], diff)
        if rel > out["largest_rel"]:
            out["largest_rel"], out["where"] = rel, path
    return out


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def margin(rule: dict | None, measure) -> float | None:
    """Distance from `measure` to the nearest threshold of `rule` (a numeric rule), or None."""
    if not rule or not is_number(measure) or math.isnan(float(measure)):
        return None
    kind, x = rule["kind"], float(measure)
    if kind in ("at_least", "at_most"):
        edges = [rule["threshold"], rule.get("partly_threshold")]
    elif kind == "close":
        t = float(rule["target"])
        edges = [t + s * float(rule[k]) for k in ("tol", "partly_tol") if k in rule for s in (-1, 1)]
    else:
        return None
    return min(abs(x - float(e)) for e in edges if e is not None)
