"""Executors run a list of missing runs; every job writes its own records to the store.

Runs that differ only in the seed and whose model stacks (`companion.batched.batchable`) form groups
(`plan_groups`, at most `max_members` each) that train together in one job (`execute_group`,
`companion.runs.run_group`); every other run is a group of one. Each member's record and weights
are written atomically as the group ends, so a killed group leaves its members missing (rerun).

- `local`: a process pool (spawn) of `jobs` workers, one group per job; with jobs = 1 the groups go
  in this process (no start-up cost).
- `slurm`: submitit `AutoExecutor` job arrays (`map_array`), one array task per group;
  `timeout_min` and `gpus_per_node` are always set explicitly (submitit's local cluster would
  otherwise kill jobs after 2 min and hide GPUs). `cluster="local"` or `"debug"` runs the same code
  path on this machine (used by the tests).

Every run trains on `companion.runs.THREADS` torch threads whichever executor runs it, so a run id
means one result (`companion.runs.run` sets them).

Pool workers die with the sweep that started them: on Linux each asks the kernel to SIGKILL it when
its parent dies (prctl PR_SET_PDEATHSIG, requested in the worker initializer; the parent is the
thread that submits, which `LocalExecutor.execute` holds until the pool is done), and everywhere a
worker checks before each run that the sweep is still its parent, and exits if not. A run an orphan
did finish is whole anyway: every write is atomic (`companion.store`).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tqdm import tqdm  # the console bar: chapters run quietly, so no notebook widget is needed

from companion.batched import MAX_MEMBERS, batchable
from companion.config import RunConfig, canonical_json, config_from_dict, config_to_dict
from companion.runs import run, run_group
from companion.store import RunStore

__all__ = ["EXECUTORS", "LocalExecutor", "SlurmExecutor", "execute_run", "execute_group", "plan_groups",
           "make_executor"]


def execute_run(cfg: dict, root: str) -> str:
    """Job entry point: run `cfg` (a config dict) unless stored with its weights, save record and
    weights; returns its id."""
    config = config_from_dict(RunConfig, cfg)
    store = RunStore(root)
    record = store.load(config)
    if record is None or not store.has_weights(record.run_id):
        record, model = run(config, return_model=True)
        store.save(record, model.state_dict())
    return record.run_id


def execute_group(cfgs: list[dict], root: str) -> list[str]:
    """Job entry point for a group (`plan_groups`): train together the members not yet stored with
    their weights (`run_group`), save each member's record and weights; returns the members' ids."""
    from companion.identity import run_id

    configs = [config_from_dict(RunConfig, c) for c in cfgs]
    store = RunStore(root)
    todo = []
    for config in configs:
        record = store.load(config)
        if record is None or not store.has_weights(record.run_id):
            todo.append(config)
    if todo:
        for record, model in run_group(todo, return_models=True):
            store.save(record, model.state_dict())
    return [run_id(c) for c in configs]


def plan_groups(cfgs: Sequence[RunConfig], *, max_members: int = MAX_MEMBERS, jobs: int = 1) -> list[list[RunConfig]]:
    """`cfgs` as jobs: configs equal but for the seed whose model stacks form groups (in the order of
    first appearance, members in the given order), at most `max_members` each, split evenly; every
    other config is a group of one. While there are fewer groups than `jobs` workers, the largest
    group is halved (so no worker idles while another trains a whole group)."""
    if max_members < 1:
        raise ValueError(f"max_members must be >= 1, got {max_members}.")
    keyed: dict[str, list[RunConfig]] = {}
    for i, cfg in enumerate(cfgs):
        if batchable(cfg) and max_members > 1:
            key = canonical_json({k: v for k, v in config_to_dict(cfg).items() if k != "seed"})
        else:
            key = f"alone/{i}"
        keyed.setdefault(key, []).append(cfg)
    groups: list[list[RunConfig]] = []
    for members in keyed.values():
        parts = -(-len(members) // max_members)
        size = -(-len(members) // parts)
        groups += [members[i:i + size] for i in range(0, len(members), size)]
    while len(groups) < jobs:
        big = max(range(len(groups)), key=lambda i: len(groups[i]), default=None)
        if big is None or len(groups[big]) < 2:
            break
        g = groups.pop(big)
        half = -(-len(g) // 2)
        groups[big:big] = [g[:half], g[half:]]
    return groups


def _label(cfg: RunConfig) -> str:
    return f"{cfg.experiment}/{cfg.profile}/{cfg.method}/seed {cfg.seed}"


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_PARENT: int | None = None  # in a pool worker: the pid of the sweep that started it


def _die_with_parent(parent: int) -> None:
    """Linux: ask the kernel to SIGKILL this process when its parent dies; then exit at once if the
    parent died before the request (this process would already be an orphan)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the check in `_pool_run` remains
            pass
    if os.getppid() != parent:
        os._exit(1)


def _init_worker(parent: int) -> None:
    global _PARENT
    _PARENT = parent
    _die_with_parent(parent)
    # Ctrl-C reaches the whole process group: let it end a worker at once (its run, unsaved, is
    # simply missing) instead of raising inside the run and letting the worker take the next one.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _orphaned() -> bool:
    """Whether this pool worker's sweep is gone (it was reparented)."""
    return _PARENT is not None and os.getppid() != _PARENT


def _pool_run(cfg: dict | list[dict], root: str):
    """`execute_run` (one config) or `execute_group` (a list of them) in a pool worker, unless the
    sweep that started the worker is gone: then exit, as nobody waits for the run (the portable half
    of dying with the parent)."""
    if _orphaned():
        os._exit(1)
    return execute_group(cfg, root) if isinstance(cfg, list) else execute_run(cfg, root)


@dataclass
class LocalExecutor:
    """Processes on this machine; `jobs` defaults to os.cpu_count() (each run uses one core, see
    `companion.runs.THREADS`); each job trains one group of at most `max_members` seeds together
    (`plan_groups`; 1 runs every run alone). Runs on a GPU go through one process (this one), group
    after group: a pool of processes sharing a GPU time-slices it instead of overlapping."""

    jobs: int | None = None
    max_members: int = MAX_MEMBERS

    def execute(self, cfgs: Sequence[RunConfig], store: RunStore, *, progress: bool = False) -> list[str]:
        """Run `cfgs`; returns one line per failed run (empty when all succeeded)."""
        jobs = max(1, min(self.jobs or os.cpu_count() or 1, len(cfgs) or 1))
        if any(str(c.device).startswith("cuda") for c in cfgs):
            jobs = 1  # one process drives the GPU: processes sharing one time-slice it instead of overlapping
        groups = plan_groups(cfgs, max_members=self.max_members, jobs=jobs)
        jobs = min(jobs, len(groups) or 1)
        failures: list[str] = []
        bar = tqdm(total=len(cfgs), disable=not progress, desc="runs", unit="run")

        def failed(group, err) -> None:
            failures.extend(f"{_label(c)}: {type(err).__name__}: {err}" for c in group)

        try:
            if jobs == 1:
                for group in groups:
                    try:
                        execute_group([config_to_dict(c) for c in group], str(store.root))
                    except Exception as err:  # noqa: BLE001  (report, keep going)
                        failed(group, err)
                    bar.update(len(group))
                return failures
            ctx = multiprocessing.get_context("spawn")
            pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker,
                                       initargs=(os.getpid(),))
            try:
                futures = {pool.submit(_pool_run, [config_to_dict(c) for c in g], str(store.root)): g
                           for g in groups}
                for fut in as_completed(futures):
                    err = fut.exception()
                    if isinstance(err, BrokenProcessPool):
                        # a worker was killed (Ctrl-C reaches the whole process group, or the OS
                        # killed it): stop like an interrupt; finished runs are already stored
                        raise KeyboardInterrupt from err
                    if err is not None:
                        failed(futures[fut], err)
                    bar.update(len(futures[fut]))
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown()
            return failures
        finally:
            bar.close()


@dataclass
class SlurmExecutor:
    """submitit job arrays: one array task per group of seeds trained together (`plan_groups`).

    Attributes:
        cluster: "slurm", or "local"/"debug" to run the same path on this machine.
        folder: submitit's log folder; default `<store>/.submitit`.
        timeout_min, gpus_per_node, cpus_per_task: per job (always passed to submitit; a run trains on
            `companion.runs.THREADS` threads whatever cpus_per_task reserves).
        array_parallelism: at most this many array tasks run at once (Slurm's `%N`).
        partition: Slurm partition, if needed.
        poll_s: how often to poll job states.
        max_members: the largest group one task trains (1: every run alone).
    """

    cluster: str = "slurm"
    folder: str | None = None
    timeout_min: int = 60
    gpus_per_node: int = 0
    cpus_per_task: int = 1
    array_parallelism: int = 32
    partition: str | None = None
    poll_s: float = 0.5
    max_members: int = MAX_MEMBERS

    def execute(self, cfgs: Sequence[RunConfig], store: RunStore, *, progress: bool = False) -> list[str]:
        """Submit `cfgs` as one job array (one task per group) and wait; returns one line per failed run."""
        import submitit

        if not cfgs:
            return []
        ex = submitit.AutoExecutor(folder=Path(self.folder or store.root / ".submitit"), cluster=self.cluster)
        params = dict(name="companion", timeout_min=self.timeout_min, gpus_per_node=self.gpus_per_node,
                      cpus_per_task=self.cpus_per_task, slurm_array_parallelism=self.array_parallelism)
        if self.partition:
            params["slurm_partition"] = self.partition
        ex.update_parameters(**params)
        groups = plan_groups(cfgs, max_members=self.max_members)
        dicts = [[config_to_dict(c) for c in g] for g in groups]
        jobs = ex.map_array(execute_group, dicts, [str(store.root)] * len(groups))
        failures: list[str] = []
        bar = tqdm(total=len(cfgs), disable=not progress, desc="runs", unit="run")
        pending = dict(enumerate(jobs))
        try:
            while pending:
                for i, job in list(pending.items()):
                    if self.cluster == "debug" or job.done():  # debug jobs run when asked for a result
                        try:
                            job.result()
                        except Exception as err:  # noqa: BLE001
                            failures.extend(f"{_label(c)} (job {job.job_id}): {err}" for c in groups[i])
                        del pending[i]
                        bar.update(len(groups[i]))
                if pending:
                    time.sleep(self.poll_s)
        finally:
            bar.close()
        return failures


EXECUTORS = {"local": LocalExecutor, "slurm": SlurmExecutor}


def make_executor(name: str, **options):
    """`EXECUTORS[name](**options)` with a readable error for an unknown name."""
    if name not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; valid: {', '.join(EXECUTORS)}.")
    return EXECUTORS[name](**options)
