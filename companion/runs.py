"""A run end to end: build the task and the model, train, and return a `Record`.

`run(cfg)` is deterministic for a config on one build: the weights come from `stream(seed, "init")`,
the batch order from `stream(seed, "order")`, the task's data from its own task-level seed, and every
run trains on `THREADS` torch threads, whoever calls it. A `Record` holds what the chapters read
(final metrics, curves, drift with attention maps) and the provenance (code version, device,
threads, versions, commit, wall time); `companion.store` keeps it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import subprocess
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch

from companion.config import RunConfig, config_from_dict, config_to_dict
from companion.identity import code_version, run_id
from companion.paths import repo_root

__all__ = ["SCHEMA_VERSION", "RECORD_KEYS", "THREADS", "Record", "run", "stream", "git_commit"]

SCHEMA_VERSION = 2  # 2: records say how many threads trained them
RECORD_KEYS = ("schema_version", "run_id", "code_version", "config", "seed", "device", "threads",
               "torch_version", "git_commit", "wall_time", "metrics", "curves", "drift", "finished_at")

# Torch intra-op threads of every run, on every executor. A float32 sum split over another number of
# threads rounds differently, and a few dozen steps later two runs of one config part (smoke, seed 0:
# test MSE 0.0020 from `sweep --jobs 1`, which gave a run all the cores, against 0.0177 from submitit,
# which gave it one), so one id must mean one thread count. The count is fixed, not made part of the
# identity, so that a run made by `--jobs 1`, `--jobs 2`, Slurm or a chapter on any machine is the same
# run under the same id (an id that named the threads would depend on the machine, and a chapter would
# not find the runs a cluster made). One thread: the runs here are small, a sweep gets its parallelism
# from running one run per core (`--jobs`), and the common case already ran so (a chapter with jobs =
# cores = 2 gave each run one thread), so its numbers stay what they were. A constant of a core
# module: changing it changes every run id, as it changes every result.
THREADS = 1


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
    threads: int = THREADS
    torch_version: str = torch.__version__
    git_commit: str | None = None
    finished_at: str = ""
    schema_version: int = SCHEMA_VERSION
    seed: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", self.config.seed)

    def to_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in RECORD_KEYS}
        data["config"] = config_to_dict(self.config)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Record":
        kwargs = {k: data[k] for k in RECORD_KEYS if k != "seed"}
        kwargs["config"] = config_from_dict(RunConfig, data["config"])
        return cls(**kwargs)


def run(cfg: RunConfig, *, progress: bool = False, return_model: bool = False):
    """Build task and model, train with a `DriftTracker`, and return the `Record` (and the trained
    model, on the CPU, with `return_model`).

    Randomness: the model's weights come from `stream(seed, "init")`, the batch order from
    `stream(seed, "order")`; the task's data come from its own task-level seed. The run trains on
    `THREADS` torch threads (the caller's setting is restored afterwards).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        return _run(cfg, progress, return_model)
    finally:
        torch.set_num_threads(before)


def _run(cfg: RunConfig, progress: bool, return_model: bool):
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
        code_version=code_version(cfg.task.name),
        device=cfg.device, threads=torch.get_num_threads(), git_commit=git_commit(),
        finished_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    return (record, model.cpu()) if return_model else record


