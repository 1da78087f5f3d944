"""The minimum-degree interpolator's accuracies: the reference line of every Boolean-function result.

GOTU's baseline is computed, never typed: for each task, the MDI of the seen set is evaluated on the
whole cube and its predictions are read as the runs' are (`BooleanTask.reference`, under each accuracy
reading). Chapter 3 tabulates it and Chapter 6 measures the widened falsifier against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from companion.tasks.boolean import FUNCTIONS, BooleanTask

__all__ = ["N_BITS", "READINGS", "references", "mdi"]

N_BITS = 15  # the cube the book's Boolean tasks live on (GOTU's 15 bits; `companion.experiments.gotu`)
READINGS = ("nearest", "sign", "tolerance")  # accuracy readings of a real-valued prediction


def references(readings: Sequence[str] = READINGS) -> dict[str, dict[str, dict[str, float]]]:
    """The MDI's accuracy per reading and task: {reading: {task: {"cube", "unseen", "seen"}}}."""
    return {r: {fn: _reference(fn, r) for fn in FUNCTIONS} for r in readings}


@lru_cache(maxsize=None)
def _reference(task: str, reading: str) -> dict[str, float]:
    return BooleanTask(task, n_bits=N_BITS, metric=reading).reference()


def mdi(task: str, split: str = "cube", reading: str = "nearest") -> float:
    """One number of `references`: the MDI's accuracy on `split` of `task` (0.75 on 2Parity's full cube)."""
    return float(_reference(task, reading)[split])
