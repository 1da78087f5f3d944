"""A run's identity: the hash of its full config and of the package code it executes.

run_id = sha256(canonical JSON of {"config": the full RunConfig, "code": code_version(task)}).

What a run executes is decided by folders, not by a list: the *core* (every module at the top of the
package, `companion/*.py`) and, for a run of task T, `tasks/__init__.py` and T's own module. The
folders `book/` (reads records, never trains), `experiments/` (presets: a run's config already
holds what they decide), `cost/` (benchmarks) and `cli/` (the command line) are never hashed, and no
core module imports them (tests/test_identity.py checks both). Any change to code a run executes
gives new ids, so a stale result is never reused (it stays on disk, unused).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from companion.config import RunConfig, canonical_json, config_to_dict

__all__ = ["UNHASHED", "core_modules", "run_files", "code_version", "run_id"]

# Subpackages that never enter a run's identity (everything else under the package does, per task).
UNHASHED = ("book", "experiments", "cost", "cli")


def _package_dir() -> Path:
    return Path(__file__).resolve().parent


def core_modules() -> list[str]:
    """Names of the core modules: every `companion/*.py` (the entry point `__main__` aside)."""
    return sorted(p.stem for p in _package_dir().glob("*.py") if p.stem != "__main__")


def _task_module(task: str) -> Path:
    from companion.tasks import TASKS, load_tasks

    if task not in TASKS:
        load_tasks()
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid: {', '.join(sorted(TASKS))}.")
    module = TASKS[task].__module__
    return Path(*module.split(".")[1:]).with_suffix(".py")


def run_files(task: str | None = None) -> list[Path]:
    """The package files a run of `task` executes, sorted: the core modules, `tasks/__init__.py` and
    the task's own module (with `task=None`, no task module)."""
    pkg = _package_dir()
    files = [pkg / f"{name}.py" for name in core_modules()] + [pkg / "tasks" / "__init__.py"]
    if task is not None:
        files.append(pkg / _task_module(task))
    return sorted(files)


@lru_cache(maxsize=16)
def code_version(task: str | None = None, *, everything: bool = False) -> str:
    """sha256 over (relative path, bytes) of `run_files(task)`; with `everything`, of every .py file
    of the package (what an executed chapter depends on)."""
    pkg = _package_dir()
    if everything:
        files = [p for p in sorted(pkg.rglob("*.py")) if "__pycache__" not in p.parts]
    else:
        files = run_files(task)
    h = hashlib.sha256()
    for path in files:
        h.update(path.relative_to(pkg).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def run_id(cfg: RunConfig | dict, code: str | None = None) -> str:
    """sha256 hex of the canonical JSON of {"config": cfg, "code": code or code_version(task)}."""
    data = cfg if isinstance(cfg, dict) else config_to_dict(cfg)
    if code is None:
        try:
            code = code_version(data["task"]["name"])
        except ValueError:  # an unknown task cannot run; its id still hashes (without a task module)
            code = code_version()
    return hashlib.sha256(canonical_json({"config": data, "code": code}).encode()).hexdigest()
