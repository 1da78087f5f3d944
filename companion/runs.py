"""Runs: identity, one run end to end, and the run store (one atomic JSON file per finished run).

Identity: run_id = sha256(canonical JSON of {"config": the full RunConfig, "code": code_version()}),
where code_version(task=…) hashes the package files a run of that task executes (`run_side_files`:
the RUN_SIDE modules, `tasks/__init__.py` and the task's own module; not the book-side modules that
only analyse and draw, the experiment presets or the other tasks' modules): any change to code a run executes gives new ids, so stale results are never
reused (they stay on disk, unused). `run(cfg)` trains and returns a
`Record`; `RunStore` saves it atomically and loads it back, moving aside anything corrupt.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

import companion
from companion.config import RunConfig, canonical_json, config_from_dict, config_to_dict
from companion.paths import repo_root
from companion.sides import BOOK_SIDE, RUN_SIDE

__all__ = [
    "SCHEMA_VERSION", "RUN_SIDE", "BOOK_SIDE", "unclassified_modules", "Record", "RunStore", "run", "run_id", "code_version", "run_side_files", "repo_root",
    "default_store_root", "git_commit", "stream", "add_commands",
]

SCHEMA_VERSION = 1
_KEYS = ("schema_version", "run_id", "code_version", "config", "seed", "device", "torch_version",
         "git_commit", "wall_time", "metrics", "curves", "drift", "finished_at")


def default_store_root() -> Path:
    """`$COMPANION_RUNS` if set, else `<repo root>/runs` (gitignored)."""
    env = os.environ.get("COMPANION_RUNS")
    return Path(env) if env else repo_root() / "runs"


def run_side_files(task: str | None = None) -> list[Path]:
    """The package files a run of `task` executes, in sorted order (what its code version hashes).

    The RUN_SIDE modules plus, for task T, `tasks/__init__.py` and T's own module (other tasks'
    modules, the experiment presets and the book-side modules do not count: a run's config already
    holds everything a preset decides). With `task=None` no task module counts.
    """
    pkg = _package_dir()
    own = _task_module(task) if task is not None else None
    files = [pkg / f"{name}.py" for name in RUN_SIDE]
    files += [pkg / "tasks" / "__init__.py"] + ([pkg / own] if own is not None else [])
    return sorted(files)


def unclassified_modules() -> list[str]:
    """Top-level modules and subpackages (other than tasks/ and experiments/, which runs hash per
    task and never, respectively) on neither side or on both: each must be put on exactly one."""
    pkg = _package_dir()
    names = {p.stem for p in pkg.glob("*.py")} - {"sides"}
    names |= {p.parent.name for p in pkg.glob("*/__init__.py")} - {"tasks", "experiments"}
    return sorted((names - RUN_SIDE - BOOK_SIDE) | (RUN_SIDE & BOOK_SIDE) | (RUN_SIDE - names))


def _package_dir() -> Path:
    return Path(companion.__file__).resolve().parent


def _task_module(task: str) -> Path:
    from companion.tasks import TASKS, load_tasks

    if task not in TASKS:
        load_tasks()
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid: {', '.join(sorted(TASKS))}.")
    module = TASKS[task].__module__
    return Path(*module.split(".")[1:]).with_suffix(".py")


@lru_cache(maxsize=16)
def code_version(include_book_side: bool = False, task: str | None = None) -> str:
    """sha256 over (relative path, bytes) of the files a run executes (`run_side_files(task)`).

    With `include_book_side` every .py file of the package counts (what an executed chapter depends
    on) and `task` is ignored.
    """
    pkg = _package_dir()
    if include_book_side:
        files = [p for p in sorted(pkg.rglob("*.py")) if "__pycache__" not in p.parts]
    else:
        files = run_side_files(task)
    h = hashlib.sha256()
    for path in files:
        h.update(path.relative_to(pkg).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def run_id(cfg: RunConfig | dict, code: str | None = None) -> str:
    """sha256 hex of the canonical JSON of {"config": cfg, "code": code or code_version(task=...)}."""
    data = cfg if isinstance(cfg, dict) else config_to_dict(cfg)
    if code is None:
        try:
            code = code_version(task=data["task"]["name"])
        except ValueError:  # an unknown task cannot run; its id still hashes (without a task module)
            code = code_version()
    return hashlib.sha256(canonical_json({"config": data, "code": code}).encode()).hexdigest()


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    """HEAD of the repository, or None without git or without a commit (never raises)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root(), capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None
    except Exception:  # noqa: BLE001  (no git, no repo, timeout: the commit is optional)
        return None


def stream(seed: int, name: str) -> torch.Generator:
    """A CPU generator for one purpose ("init", "order", …) derived from the run seed."""
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


@dataclass(frozen=True)
class Record:
    """A finished run as stored: config, final metrics, curves (History), drift and provenance.

    Attributes:
        metrics: {split: {metric: value}} at the last evaluation.
        curves: `History.to_dict()`: steps, eval curves, per-step train loss and lr, wall time.
        drift: `DriftTracker.result()`.
    """

    run_id: str
    config: RunConfig
    metrics: dict[str, dict[str, float]]
    curves: dict[str, Any]
    drift: dict[str, Any] | None
    wall_time: float
    code_version: str
    device: str = "cpu"
    torch_version: str = torch.__version__
    git_commit: str | None = None
    finished_at: str = ""
    schema_version: int = SCHEMA_VERSION
    seed: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", self.config.seed)

    def to_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in _KEYS}
        data["config"] = config_to_dict(self.config)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Record":
        kwargs = {k: data[k] for k in _KEYS if k != "seed"}
        kwargs["config"] = config_from_dict(RunConfig, data["config"])
        return cls(**kwargs)


def run(cfg: RunConfig, *, progress: bool = False, return_model: bool = False):
    """Build task and model, train with a `DriftTracker`, and return the `Record` (and the trained
    model, on the CPU, with `return_model`).

    Randomness: the model's weights come from `stream(seed, "init")`, the batch order from
    `stream(seed, "order")`; the task's data come from its own task-level seed.
    """
    from companion.drift import DriftTracker
    from companion.model import build_model
    from companion.tasks import make_task
    from companion.train import train

    start = time.perf_counter()
    task = make_task(cfg.task)
    model = build_model(cfg.model, task, generator=stream(cfg.seed, "init")).to(cfg.device)
    tracker = DriftTracker(task.probe_inputs())
    hist = train(model, task, cfg.train, generator=stream(cfg.seed, "order"), callbacks=[tracker],
                 progress=progress)
    record = Record(
        run_id=run_id(cfg), config=cfg, metrics=hist.final(), curves=hist.to_dict(),
        drift=tracker.result(), wall_time=time.perf_counter() - start,
        code_version=code_version(task=cfg.task.name),
        device=cfg.device, git_commit=git_commit(),
        finished_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    return (record, model.cpu()) if return_model else record


class RunStore:
    """A folder of `<run_id>.json` records, each with the trained weights beside it in `<run_id>.pt`.

    Writes are atomic (temp file in the same folder, flush, fsync, `os.replace`), so a reader sees a
    whole record or none; the weights are written before the record, so a record's presence means its
    run finished. A file that fails to load (not JSON, wrong schema, missing keys, hash mismatch) is
    reported with a warning, renamed to `<run_id>.json.corrupt` and treated as missing. Weights are
    read with `torch.load(weights_only=True)` (no code runs); missing or unreadable weights make
    `load_model` raise, and `ensure_runs(..., weights=True)` reruns such runs.
    """

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else default_store_root()

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    def path(self, cfg_or_id: RunConfig | str) -> Path:
        rid = cfg_or_id if isinstance(cfg_or_id, str) else run_id(cfg_or_id)
        return self.root / f"{rid}.json"

    def ids(self) -> set[str]:
        """Ids of the files present (not validated)."""
        return {p.stem for p in self.root.glob("*.json")} if self.root.is_dir() else set()

    def weights_path(self, rid: str) -> Path:
        return self.root / f"{rid}.pt"

    def _atomic_write(self, final: Path, write) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{final.stem[:12]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def save(self, record: Record, state: dict[str, torch.Tensor] | None = None) -> Path:
        """Write the weights `state` (if given), then `record`, each atomically; returns the record's path."""
        self.root.mkdir(parents=True, exist_ok=True)
        if state is not None:
            cpu = {k: v.detach().cpu() for k, v in state.items()}
            self._atomic_write(self.weights_path(record.run_id), lambda fh: torch.save(cpu, fh))
        text = json.dumps(record.to_dict(), indent=1, sort_keys=True, allow_nan=True)
        final = self.path(record.run_id)
        self._atomic_write(final, lambda fh: fh.write(text.encode("utf-8")))
        return final

    def has_weights(self, rid: str) -> bool:
        """Whether a weights file exists and loads (validates)."""
        try:
            self._load_state(rid)
            return True
        except (FileNotFoundError, ValueError):
            return False

    def _load_state(self, rid: str) -> dict[str, torch.Tensor]:
        path = self.weights_path(rid)
        if not path.is_file():
            raise FileNotFoundError(f"no weights for run {rid[:12]} in {self.root}; rerun it with "
                                    "ensure_runs(..., weights=True) (runs are deterministic).")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001  (any unreadable file is reported the same way)
            raise ValueError(f"weights file {path} is unreadable ({type(err).__name__}); delete it and rerun "
                             "with ensure_runs(..., weights=True).") from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise ValueError(f"weights file {path} does not hold a state dict; delete it and rerun.")
        return state

    def load_model(self, record: Record, device: str = "cpu"):
        """The trained model of `record`: rebuilt from its config, weights loaded (strict), eval mode."""
        from companion.model import build_model
        from companion.tasks import make_task

        state = self._load_state(record.run_id)
        model = build_model(record.config.model, make_task(record.config.task), generator=stream(0, "init"))
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise ValueError(f"weights of run {record.run_id[:12]} do not fit its model: {err}") from None
        return model.to(device).eval()

    def _problem(self, path: Path) -> tuple[Record | None, str]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            return None, f"not readable JSON ({err}); probably a partial write"
        if not isinstance(data, dict):
            return None, "not a JSON object"
        if data.get("schema_version") != SCHEMA_VERSION:
            return None, f"schema_version {data.get('schema_version')!r}, expected {SCHEMA_VERSION}"
        missing = [k for k in _KEYS if k not in data]
        if missing:
            return None, f"missing keys {missing}"
        if data["run_id"] != path.stem:
            return None, f"run_id {data['run_id']!r} does not match the file name"
        if not isinstance(data["config"], dict) or run_id(data["config"], data["code_version"]) != path.stem:
            return None, "the hash of the stored config and code version does not match the file name"
        try:
            return Record.from_dict(data), ""
        except (TypeError, ValueError, KeyError) as err:
            return None, f"config does not parse ({err})"

    def load(self, cfg_or_id: RunConfig | str) -> Record | None:
        """The stored record, or None if missing or corrupt (corrupt files are moved aside)."""
        path = self.path(cfg_or_id)
        if not path.is_file():
            return None
        record, problem = self._problem(path)
        if record is None:
            aside = path.with_name(path.name + ".corrupt")
            try:
                os.replace(path, aside)
            except FileNotFoundError:  # another process moved it aside first
                pass
            warnings.warn(f"run store: {path} is unusable: {problem}. Moved aside to {aside.name}; "
                          "the run counts as missing and will be rerun.", stacklevel=2)
        return record

    def has(self, cfg: RunConfig) -> bool:
        """Whether a loadable record exists (validates, so a corrupt file answers False)."""
        return self.load(cfg) is not None


def add_commands(subparsers) -> None:
    """Register `companion list` and `companion sweep` (defined in `companion.sweep`)."""
    from companion.sweep import add_commands as _add

    _add(subparsers)


def __getattr__(name: str):
    """`companion.runs.ensure_runs` is `companion.sweep.ensure_runs` (imported lazily: sweep imports runs)."""
    if name == "ensure_runs":
        from companion.sweep import ensure_runs

        return ensure_runs
    raise AttributeError(f"module 'companion.runs' has no attribute {name!r}")
