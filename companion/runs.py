"""A run end to end: build the task and the model, train, and return a `Record`.

A run's recipe is its config: the weights come from `stream(seed, "init")`, the batch order from
`stream(seed, "order")`, the task's data from its own task-level seed, every run trains on `THREADS`
torch threads with subnormals flushed to zero (`recipe_context`), and a config with `stack` > 1 trains seed-stacked beside the other seeds of its block
(`group_configs`, `companion.batched`). Nothing a caller chooses (the executor, `--jobs`, which seeds
it asks for, a resume) enters the computation, so on one host one id gives one result, to the bit.

`run(cfg)` trains the run's group and returns its record; `run_group(cfgs)` trains one whole group and
returns a record per member. A `Record` holds what the chapters read (final metrics, curves, drift
with attention maps, the config's readouts) and the provenance (numerics version, code version, the
host exactly, threads, commit, wall time); `companion.store` keeps it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import os
import platform
import subprocess
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import torch

from companion.batched import why_not_batchable
from companion.config import RunConfig, config_from_dict, config_to_dict
from companion.drift import DriftTracker, keeps_maps
from companion.host import describe as describe_host
from companion.identity import NUMERICS, code_version, run_id
from companion.model import build_model
from companion.paths import repo_root
from companion.measuring import check_readouts, measure_readouts
from companion.readouts import rounded
from companion.tasks import make_task
from companion.train import shares_evaluation, train, train_stacked

__all__ = ["SCHEMA_VERSION", "READABLE_SCHEMAS", "RECORD_KEYS", "THREADS", "Record", "run", "run_group",
           "group_configs", "check_group", "recipe_context", "stream", "git_commit", "execution_note", "machine_name",
    "FLUSH_DENORMAL"]

SCHEMA_VERSION = 6  # 2: threads; 3: execution; 4: readouts; 5: compact curves; 6: ids from the numerics
# version (`companion.identity.NUMERICS`), the host stated exactly, the group's seeds in `execution`
RECORD_KEYS = ("schema_version", "run_id", "numerics", "code_version", "config", "seed", "device", "threads",
               "torch_version", "host", "git_commit", "wall_time", "metrics", "curves", "drift", "finished_at",
               "execution", "readouts")
# Schemas that load. Records before 6 are named by a hash of source files, which no longer names a
# run, so they count as missing (and are retrained) rather than being read under a wrong id.
READABLE_SCHEMAS = {SCHEMA_VERSION: {}}
# Significant digits a record keeps of the per-update training loss (a float32 carries about 7) and of
# the drift measures (read as ratios and differences far above 1e-6). Records stay kilobytes at the
# `paper` profile's thousands of updates and twelve layers; the learning rate of every update is not
# stored at all, since `companion.train.lr_curve(cfg.train, total)` rebuilds it from the config.
LOSS_DIGITS, DRIFT_DIGITS = 7, 6

# Torch intra-op threads of every run, on every executor. A float32 sum split over another number of
# threads rounds differently, and a few dozen steps later two runs of one config part (smoke, seed 0:
# test MSE 0.0020 from `sweep --jobs 1`, which gave a run all the cores, against 0.0177 from submitit,
# which gave it one), so one id must mean one thread count. The count is fixed, not made part of the
# identity, so that a run made by `--jobs 1`, `--jobs 2`, Slurm or a chapter on any machine is the same
# run under the same id (an id that named the threads would depend on the machine, and a chapter would
# not find the runs a cluster made). One thread: the runs here are small, a sweep gets its parallelism
# from running one run per core (`--jobs`), and the common case already ran so (a chapter with jobs =
# cores = 2 gave each run one thread), so its numbers stay what they were. Part of the recipe:
# changing it changes every result, so it comes with a new `companion.identity.NUMERICS`.
THREADS = 1
# Every run computes with subnormal floats flushed to zero (FTZ/DAZ, `torch.set_flush_denormal`).
# A prior that pushes scores far down (GOAT's sink lane: s·j grows with the key's position) drives
# exponentials below float32's smallest normal number, 1.2e-38, where some CPUs compute about 4× more
# slowly (an Intel Xeon with AVX-512; measured in benchmarks/attention.py); a weight of 1e-38 changes no
# sum it enters. Part of the recipe, like the threads.
FLUSH_DENORMAL = True


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
        numerics: the numerics version it was computed with (`companion.identity.NUMERICS`; with the
            config, what `run_id` hashes).
        host: where it was computed, exactly (`companion.host.describe`): two records of one id agree
            to the bit when their hosts' `numerics_key`s are equal.
        metrics: {split: {metric: value}} at the last evaluation.
        curves: `History.to_dict()` without the learning rate (`compact_curves`): steps, eval curves,
            the train loss of every update (to `LOSS_DIGITS` significant digits), wall time.
        drift: `DriftTracker.result()`, its measures to `DRIFT_DIGITS` significant digits.
        execution: how the run was executed, {"mode": "solo" | "batched", "members": [seeds]}: alone, or
            beside the seeds of its group (`group_configs`), which its config's `stack` fixes.
        readouts: {spec: value} of the config's readouts (`companion.readouts`), measured on the
            trained model at the end of the run: what a chapter reads instead of weights.
    """

    run_id: str
    config: RunConfig
    metrics: dict[str, dict[str, float]]
    curves: dict[str, Any]
    drift: dict[str, Any] | None
    wall_time: float
    code_version: str
    numerics: int = NUMERICS
    device: str = "cpu"
    threads: int = THREADS
    torch_version: str = torch.__version__
    host: dict[str, Any] = field(default_factory=dict)
    git_commit: str | None = None
    finished_at: str = ""
    schema_version: int = SCHEMA_VERSION
    execution: dict[str, Any] = field(default_factory=lambda: execution_note([0]))
    readouts: dict[str, Any] = field(default_factory=dict)
    seed: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", self.config.seed)

    def to_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in RECORD_KEYS}
        data["config"] = config_to_dict(self.config)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Record":
        """The record of `data` (any of `READABLE_SCHEMAS`; an older one gets the keys it lacks)."""
        data = {**READABLE_SCHEMAS.get(data.get("schema_version"), {}), **data}
        kwargs = {k: data[k] for k in RECORD_KEYS if k != "seed"}
        kwargs["config"] = config_from_dict(RunConfig, data["config"])
        return cls(**kwargs)


def execution_note(seeds, device: str = "cpu") -> dict[str, Any]:
    """A record's `execution`: "solo" for a run alone, "batched" with its group's seeds otherwise; a
    group whose members were evaluated from one stacked forward (`companion.train.shares_evaluation`:
    on CUDA) also says `"evaluation": "shared"`."""
    seeds = [int(s) for s in seeds]
    note = {"mode": "batched" if len(seeds) > 1 else "solo", "members": seeds}
    if len(seeds) > 1 and shares_evaluation(device):
        note["evaluation"] = "shared"
    return note


@lru_cache(maxsize=8)
def machine_name(device: str = "cpu") -> str:
    """What a run on `device` ran on, for its provenance: the GPU's name for CUDA ("NVIDIA H200"),
    else the processor and core count ("x86_64, 2 cores"). Never raises."""
    try:
        if str(device).startswith("cuda") and torch.cuda.is_available():
            return torch.cuda.get_device_name(torch.device(device))
    except Exception:  # noqa: BLE001  (provenance is best effort)
        pass
    return f"{platform.machine() or 'cpu'}, {os.cpu_count() or '?'} cores"


def group_configs(cfg: RunConfig) -> list[RunConfig]:
    """The configs of the group `cfg` trains in, by seed: its block of `cfg.stack` seeds,
    ⌊seed / stack⌋·stack … ⌊seed / stack⌋·stack + stack − 1 (just `cfg` when `stack` is 1)."""
    first = cfg.seed // cfg.stack * cfg.stack
    return [cfg if s == cfg.seed else replace(cfg, seed=s) for s in range(first, first + cfg.stack)]


def run(cfg: RunConfig, *, progress: bool = False, return_model: bool = False):
    """Train `cfg` as its recipe says and return its `Record` (and the trained model, on the CPU, with
    `return_model`). A config with `stack` > 1 trains its whole group (`group_configs`) and returns
    its own member; the others' records are dropped (`companion.executors` stores them all).

    Randomness: the model's weights come from `stream(seed, "init")`, the batch order from
    `stream(seed, "order")`; the task's data come from its own task-level seed. The run trains on
    `THREADS` torch threads (the caller's setting is restored afterwards).
    """
    if cfg.stack > 1:
        return run_group(group_configs(cfg), progress=progress, return_models=return_model)[cfg.seed % cfg.stack]
    with recipe_context():
        return _run(cfg, progress, return_model)


@contextlib.contextmanager
def recipe_context():
    """Torch as every run computes: `THREADS` intra-op threads, subnormals flushed to zero
    (`FLUSH_DENORMAL`); afterwards the caller's threads and torch's default (no flushing) again."""
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    torch.set_flush_denormal(FLUSH_DENORMAL)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(before)


def _run(cfg: RunConfig, progress: bool, return_model: bool):
    check_readouts(cfg.readouts, cfg.task.name)  # a readout it cannot use fails before training, not after
    start = time.perf_counter()
    task = make_task(cfg.task)
    model = _build(cfg, task)
    tracker = DriftTracker(task.probe_inputs(), maps=keeps_maps(cfg.model))
    hist = train(model, task, cfg.train, generator=stream(cfg.seed, "order"), callbacks=[tracker],
                 progress=progress)
    record = _record(cfg, hist, tracker, time.perf_counter() - start, [cfg.seed], _readouts(cfg, model, task))
    return (record, model.cpu()) if return_model else record


def _build(cfg: RunConfig, task):
    return build_model(cfg.model, task, generator=stream(cfg.seed, "init")).to(cfg.device)


def _readouts(cfg: RunConfig, model, task) -> dict[str, Any]:
    return measure_readouts(cfg.readouts, model, task, cfg.task.name)


def compact_curves(hist) -> dict[str, Any]:
    """A `History` as a record stores it: no learning-rate curve (the config rebuilds it,
    `companion.train.lr_curve`), the per-update losses to `LOSS_DIGITS` significant digits."""
    curves = hist.to_dict()
    curves.pop("lr", None)
    curves["train_loss"] = rounded(curves["train_loss"], LOSS_DIGITS)
    return curves


def compact_drift(drift: dict[str, Any]) -> dict[str, Any]:
    """`DriftTracker.result()` with its per-step measures to `DRIFT_DIGITS` significant digits (the
    maps are already rounded by the tracker)."""
    return {k: ({layer: rounded(v, DRIFT_DIGITS) for layer, v in values.items()}
                if k in ("mask", "mask_step", "qk", "attention") else values) for k, values in drift.items()}


def _record(cfg: RunConfig, hist, tracker, wall_time: float, seeds: list[int], readouts: dict[str, Any]) -> Record:
    threads = torch.get_num_threads()
    return Record(
        run_id=run_id(cfg), config=cfg, metrics=hist.final(), curves=compact_curves(hist),
        drift=compact_drift(tracker.result()), wall_time=wall_time,
        code_version=code_version(cfg.task.name), numerics=NUMERICS,
        device=cfg.device, threads=threads, host=describe_host(cfg.device, threads, FLUSH_DENORMAL),
        git_commit=git_commit(),
        finished_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        execution=execution_note(seeds, cfg.device), readouts=readouts,
    )


def _flat(data: dict, prefix: str = "") -> dict:
    """{"train": {"lr": 1}} → {"train.lr": 1}."""
    out = {}
    for k, v in data.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def check_group(cfgs) -> None:
    """Raise ValueError, saying why, unless `cfgs` are one whole group (`run_group`): at least one
    config, all equal but for the seed, their seeds exactly the block `group_configs` gives, in
    order, and a model that stacks (`companion.batched.why_not_batchable`)."""
    cfgs = list(cfgs)
    if not cfgs:
        raise ValueError("a run group needs at least one config.")
    base = _flat({k: v for k, v in config_to_dict(cfgs[0]).items() if k != "seed"})
    for c in cfgs[1:]:
        other = _flat({k: v for k, v in config_to_dict(c).items() if k != "seed"})
        if other != base:
            keys = sorted(k for k in base.keys() | other.keys() if base.get(k) != other.get(k))
            raise ValueError(f"configs of a run group must be equal but for the seed; seed {c.seed} differs from "
                             f"seed {cfgs[0].seed} in {', '.join(keys)}. Group the seeds of one method only.")
    seeds = [c.seed for c in cfgs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"a run group holds a seed twice ({seeds}); each member must be its own run.")
    block = [c.seed for c in group_configs(cfgs[0])]
    if seeds != block:
        raise ValueError(f"seeds {seeds} of {cfgs[0].experiment}/{cfgs[0].method} are not one group: with stack="
                         f"{cfgs[0].stack} a run trains beside seeds {block} (its config's recipe). Train "
                         "`group_configs(cfg)`, or set stack to change the recipe (other run ids).")
    if len(cfgs) > 1:
        why = why_not_batchable(cfgs[0])
        if why is not None:
            raise ValueError(f"runs of {cfgs[0].experiment}/{cfgs[0].method} cannot train seed-stacked: {why}. "
                             "Run them alone (`run`).")


def run_group(cfgs, *, progress: bool = False, return_models: bool = False) -> list:
    """Train one whole group (`group_configs`) together, seed-stacked (`companion.batched`), and
    return one `Record` per member (with `return_models`, (Record, model on the CPU) pairs).

    Each member is trained as it would be alone up to float reassociation: its own weights from
    `stream(seed, "init")`, batch order from `stream(seed, "order")`, optimiser state, clipping and
    drift tracker, its own record and run id, an equal share of the wall time, and `execution`
    naming the group's seeds. Whether a member equals the same seed trained alone to the last bit
    depends on the BLAS's kernels (it does on this project's AMD hosts, and on an Intel host only
    with MKL in a reproducible mode: tests/test_batched.py), which is why the group is part of the
    recipe rather than left to the caller. A group of one trains alone. Raises ValueError
    (`check_group`) for configs that are not one whole group.
    """
    cfgs = list(cfgs)
    check_group(cfgs)
    with recipe_context():
        if len(cfgs) == 1:
            return [_run(cfgs[0], progress, return_models)]
        return _run_group(cfgs, progress, return_models)


def _run_group(cfgs, progress: bool, return_models: bool) -> list:
    check_readouts(cfgs[0].readouts, cfgs[0].task.name)
    start = time.perf_counter()
    task = make_task(cfgs[0].task)
    models = [_build(c, task) for c in cfgs]
    trackers = [DriftTracker(task.probe_inputs(), maps=keeps_maps(c.model)) for c in cfgs]
    hists = train_stacked(models, task, cfgs[0].train, generators=[stream(c.seed, "order") for c in cfgs],
                          callbacks=[[t] for t in trackers], progress=progress)
    readouts = [_readouts(c, m, task) for c, m in zip(cfgs, models)]
    wall = (time.perf_counter() - start) / len(cfgs)
    seeds = [c.seed for c in cfgs]
    records = [_record(c, h, t, wall, seeds, r) for c, h, t, r in zip(cfgs, hists, trackers, readouts)]
    return [(r, m.cpu()) for r, m in zip(records, models)] if return_models else records
