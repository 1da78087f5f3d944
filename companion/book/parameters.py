"""A chapter's papermill parameters, checked before any cell uses them.

`papermill chapter.ipynb out.ipynb -p profile nonsense` would otherwise fail with a KeyError deep in
a cell; the first cell after the parameters calls `check_parameters(profile, seeds)`, which
names the bad value and lists the valid ones. papermill's `-p` reads a number or a word, so a list
of seeds is given with `-y "seeds: [0, 1, 2]"`.

The error is a `ParameterError`, which a notebook shows as its one line (IPython prints what an
exception's `_render_traceback_` returns instead of the frames): papermill then stops at that cell and
adds its own report of the failed cell around the line.
"""

from __future__ import annotations

from typing import Sequence

from companion.config import PROFILES

__all__ = ["check_parameters", "one_seed", "ParameterError"]

class ParameterError(ValueError):
    """A chapter parameter that names nothing: its message says which value and what is valid."""

    def _render_traceback_(self) -> list[str]:  # IPython: the lines to show instead of the frames
        return [f"{type(self).__name__}: {self}"]


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_profile(profile) -> None:
    if profile not in PROFILES:
        raise ParameterError(f"profile={profile!r} is not a profile; valid: {', '.join(PROFILES)} (ci: small models, "
                         "minutes on a CPU, the rendered book; paper: the sources' settings, for a GPU). "
                         "Pass e.g. -p profile ci.")


def _check_seeds(seeds) -> None:
    fix = 'give a non-empty list of distinct integers >= 0, e.g. -y "seeds: [0, 1, 2]"'
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise ParameterError(f"seeds={seeds!r} is not a list of seeds; {fix}.")
    if not seeds:
        raise ParameterError(f"seeds=[] names no run; {fix}.")
    bad = [s for s in seeds if not _is_int(s) or s < 0]
    if bad:
        raise ParameterError(f"seeds={list(seeds)!r} holds {bad!r}, which are not integers >= 0; {fix}.")
    repeated = sorted({s for s in seeds if list(seeds).count(s) > 1})
    if repeated:
        raise ParameterError(f"seeds={list(seeds)!r} repeats {repeated}: a seed is one run, and a repeat would "
                         f"count it twice in every mean; {fix}.")


def check_parameters(profile: str, seeds: Sequence[int] = (0,)) -> None:
    """Raise ValueError naming the first bad parameter and its valid values.

    Args:
        profile: one of `companion.config.PROFILES`.
        seeds: a non-empty list (or tuple) of distinct integers >= 0 (default: one seed, for the
            chapters that take none).
    """
    _check_profile(profile)
    _check_seeds(seeds)


def one_seed(seeds: Sequence[int] | None, chapter: str) -> int:
    """The seed of a chapter whose notebook takes one `seed` (default 0): `seeds` None or one seed.

    `claims(profile, seeds)` of every chapter takes a list; these chapters draw from one generator."""
    if seeds is None:
        return 0
    _check_seeds(seeds)
    if len(seeds) != 1:
        raise ParameterError(f"{chapter} draws from one seed; give one (e.g. --seeds 0), got {list(seeds)!r}.")
    return seeds[0]
