"""Train a command's missing runs on this machine (`companion.sweep.run_missing`, local executor, weights kept),
and turn what can go wrong into one line and an exit code: 2 for a store that cannot be written (said before
any run starts), 1 for a run that failed; 0 when every run is stored. Used by the commands that fill a
committed store group by group (`companion ladder`, `companion decisive`)."""

from __future__ import annotations

import sys
from typing import Sequence

from companion.config import RunConfig
from companion.store import RunStore, StoreError
from companion.sweep import run_missing

__all__ = ["train_missing"]


def train_missing(command: str, cfgs: Sequence[RunConfig], store: RunStore, jobs: int) -> int:
    """Train the runs of `cfgs` that `store` lacks with `jobs` local workers; the exit code (module docstring)."""
    try:
        run_missing(list(cfgs), store, "local", True, {"jobs": jobs})
    except StoreError as err:
        print(f"companion {command}: error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        print(f"companion {command}: {err}", file=sys.stderr)
        return 1
    return 0
