"""Records → tables and curves: the one place a chapter turns stored runs into data frames.

`records_frame` (one row per run, final metrics as "split.metric" columns), `curves` (evaluation
curves per method, seeds stacked), `long_curves` (the same, long form, for seaborn), `by_method`,
`trained_models` (weights read back from the store), `open_mass` (the share of a query row's
attention on a pattern's open keys, from the maps a record keeps) and `open_mass_frame` (that share
at the start and the end of every record's layers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.labels import label
from companion.store import RunStore

__all__ = ["records_frame", "run_summary", "curves", "long_curves", "by_method", "readout", "trained_models", "open_mass",
           "open_mass_frame", "map_panels"]


def records_frame(records: Sequence) -> pd.DataFrame:
    """One row per record: experiment, profile, method, seed, run_id, wall_time and the final metrics
    as "split.metric" columns (e.g. "test.mse")."""
    rows = []
    for r in records:
        c = r.config
        row = {"experiment": c.experiment, "profile": c.profile, "method": c.method, "seed": c.seed,
               "run_id": r.run_id, "wall_time": r.wall_time}
        row.update({f"{split}.{m}": v for split, ms in r.metrics.items() for m, v in ms.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def flat_records(runs) -> list:
    """The records of `runs`, flattened: a sequence of them, or mappings of those, to any depth."""
    if isinstance(runs, Mapping):
        return [r for v in runs.values() for r in flat_records(v)]
    if isinstance(runs, Sequence) and not isinstance(runs, str):
        return [r for v in runs for r in (flat_records(v) if isinstance(v, (Mapping, list, tuple)) else [v])]
    return [runs]


def run_summary(runs) -> str:
    """"N runs; mean wall time per run X s" of a chapter's runs: records in any nesting of mappings and
    sequences (what the chapters' `load` return), or the `records_frame` of them."""
    frame = runs if isinstance(runs, pd.DataFrame) else records_frame(flat_records(runs))
    return f"{len(frame)} runs; mean wall time per run {frame['wall_time'].mean():.1f} s"


def curves(records: Sequence, split: str, metric: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{method: (steps, values of shape (seeds, evaluations))} of one evaluation curve."""
    out: dict[str, list] = {}
    steps: dict[str, list] = {}
    for rec in records:
        m = rec.config.method
        steps[m] = rec.curves["steps"]
        out.setdefault(m, []).append(rec.curves["eval"][split][metric])
    return {m: (np.asarray(steps[m]), np.asarray(v)) for m, v in out.items()}


def long_curves(records: Sequence, split: str, metric: str, *, scale: float = 1.0) -> pd.DataFrame:
    """The evaluation curve of every record, long form: method, seed, step, value (× `scale`)."""
    rows = [{"method": r.config.method, "seed": r.seed, "step": s, "value": scale * v}
            for r in records for s, v in zip(r.curves["steps"], r.curves["eval"][split][metric])]
    return pd.DataFrame(rows)


def by_method(records: Sequence, methods: Sequence[str] | None = None) -> dict[str, list]:
    """{method: [records in seed order]}, methods in `methods` order (default: first appearance)."""
    out: dict[str, list] = {m: [] for m in methods} if methods else {}
    for rec in records:
        out.setdefault(rec.config.method, []).append(rec)
    return {m: sorted(rs, key=lambda r: r.seed) for m, rs in out.items()}


def readout(record, spec: str):
    """The value of readout `spec` measured at the end of `record`'s run (`companion.readouts`); a
    ValueError naming the run and the fix when the record lacks it (made before the readout existed,
    or by a config without it)."""
    values = getattr(record, "readouts", None) or {}
    if spec not in values:
        raise ValueError(f"run {record.run_id[:12]} ({record.config.experiment}/{record.config.method}, seed "
                         f"{record.seed}) has no readout {spec!r} (it has: {sorted(values) or 'none'}); its config "
                         "must list it in `readouts` (companion.experiments): rerun the run with that config.")
    return values[spec]


def trained_models(records: Sequence, store=None) -> list:
    """The trained models of `records`, in order (float32, eval mode, CPU), from the run store."""
    store = store or RunStore(profile=records[0].config.profile if records else "ci")
    return [store.load_model(r) for r in records]


def open_mass(attention, pattern, row: int | None = None) -> float:
    """Share of attention on the pattern's open keys: of query `row` (e.g. 0 = CLS), or averaged over
    every query when `row` is None. `attention` is a (n, n) map (rows sum to 1), `pattern` bool (n, n)."""
    a = np.asarray(attention, dtype=float)
    p = np.asarray(pattern, dtype=bool)
    if row is not None:
        return float(a[row][p[row]].sum())
    return float((a * p).sum(-1).mean())


def open_mass_frame(records: Mapping[str, Sequence], patterns: Mapping, methods: Sequence[str], *, key: str,
                    row: int | None = None) -> pd.DataFrame:
    """`open_mass` of the attention maps at initialisation and at the end (columns init, final), one
    row per group × method × seed × layer for the records of `methods`; `records` and `patterns` are
    keyed by the group (a task, an image set), whose column is named `key`."""
    rows = []
    for group, recs in records.items():
        for rec in recs:
            if rec.config.method not in methods:
                continue
            maps = rec.drift["maps"]
            for layer in range(len(maps["init"])):
                rows.append({key: group, "method": rec.config.method, "seed": rec.seed, "layer": layer,
                             "init": open_mass(maps["init"][layer], patterns[group], row),
                             "final": open_mass(maps["final"][layer], patterns[group], row)})
    return pd.DataFrame(rows)


def map_panels(records: Sequence, seed: int, methods: Sequence[str],
               views: Sequence[tuple[str, int]]) -> list[tuple[str, list]]:
    """The recorded attention maps (`drift["maps"]`) of the run with `seed`, per method in `methods`, at
    each (when, layer) of `views` (when: init or final; layer −1: the last), as (title, map)."""
    runs = {r.config.method: r for r in records if r.seed == seed}
    panels = []
    for m in methods:
        maps = runs[m].drift["maps"]
        for when, layer in views:
            layer = layer % len(maps[when])
            panels.append((f"{label(m)}: layer {layer + 1}, {'start' if when == 'init' else 'end'}", maps[when][layer]))
    return panels
