"""What Chapter 9 reads of its runs: the readings (each method as trained, and RoPE again with position interpolation),
the baselines GOAT is scored against, the thresholds of its sink claims, and the readout of each reading."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pandas as pd

from companion.book.chapters.frames import readout
from companion.book.labels import label

__all__ = ["READINGS", "GOAT_READINGS", "DEPTH_SHOWN", "BASELINES", "SPIKE_NATS", "RISE_NATS", "readings", "labelled"]


# Every reading of the runs, in the order of the chapter's tables and legends ("rope-pi" reads the rope runs).
READINGS = ("goat", "goat-uniform", "rope", "rope-pi", "alibi", "sinusoidal")
GOAT_READINGS = ("goat", "goat-uniform")
# The readings of the depth × length grid (Figure 3c), and the baselines of Figure 3a GOAT is scored against.
DEPTH_SHOWN = ("goat", "goat-uniform", "rope", "alibi")
BASELINES = ("rope", "rope-pi", "sinusoidal")
SPIKE_NATS, RISE_NATS = 2.0, 0.5  # what counts as a first-token spike and as a learned rise (claims S3-11, S3-12)


def readings(runs: Mapping[str, Sequence], specs: Mapping[str, str],
             name: str) -> Iterator[tuple[str, object, object]]:
    """(reading, record, value) of readout `name` (`specs[name]`) for every record, RoPE twice: as trained,
    then "rope-pi" (readout `name`-pi, the same reading with position interpolation)."""
    for method, recs in runs.items():
        for rec in recs:
            yield method, rec, readout(rec, specs[name])
            if method == "rope":
                yield "rope-pi", rec, readout(rec, specs[f"{name}-pi"])


def labelled(table: pd.DataFrame) -> pd.DataFrame:
    """The table with its reading index shown by the readings' labels."""
    return table.rename(index=label).rename_axis("reading")
