"""A run's identity: the hash of its full config and of the numerics version it is computed with.

run_id = sha256(canonical JSON of {"config": the full RunConfig, "numerics": NUMERICS}).

The config says what is trained (model, task, budget, seed, the seeds it is stacked with, the
device); `NUMERICS` says how the package computes it, as a declared version rather than a hash of
source files. A refactor that keeps every number a run computes keeps every id (and every committed
record, `results/ci/` and the GPU-made `results/paper/`); orchestration (sweep, store, executors, the
command line, the book, benchmarks) never enters an id at all.

Bump `NUMERICS` in the commit that changes what any run computes (the model, attention, a prior, a
task's data, the training loop, a readout, the order of a sum, the threads of a run), then remake the
committed records (`make records`). An accidental change is caught twice: the golden
runs of the unit tests (tests/test_golden.py) retrain small runs of every task, prior and architecture
and compare them with their committed records, and `make test` retrains every `ci` record cold
(`companion reproduce`): bitwise on a host like the one that made them, by verdict elsewhere.

`code_version` (a hash of the package files a run executes) is still written into every record, as
provenance next to the git commit: it tells which source made a record, never whether it is valid.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from companion.config import RunConfig, canonical_json, config_to_dict
from companion.tasks import TASKS, load_tasks

__all__ = ["NUMERICS", "UNHASHED", "core_modules", "run_files", "code_version", "run_id"]

# The numerics version. History: 1 (2026-12-02) the first declared version: the code of 14ce3bd
# with the seeds a run is stacked with fixed by its config (`RunConfig.stack`) and subnormals flushed
# to zero in every run (`companion.runs.FLUSH_DENORMAL`). 2 (2026-12-04): attention over small CPU maps
# in the package's own kernel (`companion.kernel`; GOAT's prior as its materialised bias there, not
# as SDPA lanes).
NUMERICS = 2

# Subpackages a run never executes (so never in `code_version(task)`).
UNHASHED = ("book", "experiments", "cost", "cli")


def _package_dir() -> Path:
    return Path(__file__).resolve().parent


def core_modules() -> list[str]:
    """Names of the core modules: every `companion/*.py` (the entry point `__main__` aside)."""
    return sorted(p.stem for p in _package_dir().glob("*.py") if p.stem != "__main__")


def _task_module(task: str) -> Path:
    if task not in TASKS:
        load_tasks()
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid: {', '.join(sorted(TASKS))}.")
    module = TASKS[task].__module__
    return Path(*module.split(".")[1:]).with_suffix(".py")


def run_files(task: str | None = None) -> list[Path]:
    """The package files a run of `task` may execute, sorted: the core modules, the small-map kernel's
    C source (`kernel.c`), `tasks/__init__.py` and the task's own module (with `task=None`, no task module)."""
    pkg = _package_dir()
    files = [pkg / f"{name}.py" for name in core_modules()] + [pkg / "kernel.c", pkg / "tasks" / "__init__.py"]
    if task is not None:
        files.append(pkg / _task_module(task))
    return sorted(files)


@lru_cache(maxsize=16)
def code_version(task: str | None = None, *, everything: bool = False) -> str:
    """sha256 over (relative path, bytes) of `run_files(task)`; with `everything`, of every .py file
    of the package (what an executed chapter depends on). Provenance, not identity."""
    pkg = _package_dir()
    if everything:
        files = [p for p in sorted(pkg.rglob("*.py")) if "__pycache__" not in p.parts]
    else:
        files = run_files(task)
    h = hashlib.sha256()
    for path in files:
        h.update(path.relative_to(pkg).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def run_id(cfg: RunConfig | dict, numerics: int = NUMERICS) -> str:
    """sha256 hex of the canonical JSON of {"config": cfg, "numerics": numerics}."""
    data = cfg if isinstance(cfg, dict) else config_to_dict(cfg)
    return hashlib.sha256(canonical_json({"config": data, "numerics": int(numerics)}).encode()).hexdigest()
