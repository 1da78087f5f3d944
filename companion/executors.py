"""Executors run a list of missing runs; every job writes its own records to the store.

A job is one group of the recipe (`plan_groups`): the seeds a run's config stacks it with
(`companion.runs.group_configs`; one run when its `stack` is 1), trained together by `execute_group`
whatever subset of them was asked for, so the executor, `--jobs`, the seeds asked for and a resume
never change what a run computes. Each member's record and weights are written atomically as the
group ends, so a killed group leaves its members missing, and the next sweep trains the whole group
again.

- `local`: a process pool (spawn) of `jobs` workers, one group per job; with jobs = 1 the groups go
  in this process (no start-up cost).
- `slurm`: submitit `AutoExecutor` job arrays (`map_array`), one array task per group;
  `timeout_min` and `gpus_per_node` are always set explicitly (submitit's local cluster would
  otherwise kill jobs after 2 min and hide GPUs). A task that ends without its records (cancelled,
  killed with its node, out of time, an exception) is one failure line per run naming the job, how
  it ended and its log; a queue that starts none of the tasks for `queue_timeout_min` is cancelled
  and reported the same way, never waited on forever. `cluster="local"` or `"debug"` runs the same
  code path on this machine; tests/test_slurm_live.py runs it against a live one-node Slurm.

Every run trains on `companion.runs.THREADS` torch threads whichever executor runs it
(`companion.runs.run_group` sets them), so on one host a run id means one result.

Pool workers die with the sweep that started them: on Linux each asks the kernel to SIGKILL it when
its parent dies (prctl PR_SET_PDEATHSIG, requested in the worker initializer; the parent is the
thread that submits, which `LocalExecutor.execute` holds until the pool is done), and everywhere a
worker checks before each run that the sweep is still its parent, and exits if not. A run an orphan
did finish is whole anyway: every write is atomic (`companion.store`).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tqdm import tqdm  # the console bar: chapters run quietly, so no notebook widget is needed

from companion.config import RunConfig, canonical_json, config_from_dict, config_to_dict
from companion.runs import group_configs, run_group
from companion.store import RunStore, StoreFull

__all__ = ["EXECUTORS", "LocalExecutor", "SlurmExecutor", "execute_group", "plan_groups", "same_result",
           "make_executor", "stuck"]


def execute_group(cfgs: list[dict], root: str) -> list[str]:
    """Job entry point for one group (`plan_groups`): unless every member is stored with its weights,
    train the whole group (`run_group`) and save the record and weights of each member that has no
    record. A record already stored is never replaced; its missing weights are saved only when the
    run just made equals it (`same_result`: the record was computed on a host like this one), since
    weights must belong to their record. Returns the members' ids."""
    configs = [config_from_dict(RunConfig, c) for c in cfgs]
    store = RunStore(root)
    stored = {c.seed: store.load(c) for c in configs}
    if all(r is not None and store.has_weights(r.run_id) for r in stored.values()):
        return [r.run_id for r in stored.values()]
    for record, model in run_group(configs, return_models=True):
        old = stored[record.seed]
        if old is None:
            store.save(record, model.state_dict())
        elif not store.has_weights(old.run_id) and same_result(old, record):
            store.save_weights(old.run_id, model.state_dict())
    return [store.path(c).stem for c in configs]


def same_result(a, b) -> bool:
    """Whether two records of one run hold the same numbers to the bit (metrics, curves but their
    wall time, drift, readouts)."""
    def numbers(r):
        return (r.metrics, {k: v for k, v in r.curves.items() if k != "wall_time"}, r.drift, r.readouts)

    return a.run_id == b.run_id and numbers(a) == numbers(b)


def plan_groups(cfgs: Sequence[RunConfig]) -> list[list[RunConfig]]:
    """The jobs that make `cfgs`: each config's whole group (`group_configs`: the seeds its `stack`
    trains it with, asked for or not), once, in the order the configs first ask for them."""
    groups: dict[str, list[RunConfig]] = {}
    for cfg in cfgs:
        members = group_configs(cfg)
        key = canonical_json([config_to_dict(c) for c in members[:1]])
        groups.setdefault(key, members)
    return list(groups.values())


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
    # tqdm guards its bars with a multiprocessing lock, made at the first bar (even a disabled one): a
    # semaphore registered with the sweep's resource tracker, which a killed worker never releases and
    # the tracker then reports as leaked. A worker draws no bar of its own: a thread lock does.
    tqdm.set_lock(threading.RLock())


@contextlib.contextmanager
def _workers_start_deaf():
    """Spawn pool workers (`submit` starts them) with Ctrl-C ignored, a disposition a new process
    inherits, so a Ctrl-C that reaches a worker while it is still starting (importing torch) does not
    print a KeyboardInterrupt traceback from inside multiprocessing; `_init_worker` then restores the
    default, under which Ctrl-C ends a worker at once. The sweep itself ignores Ctrl-C only while it
    submits (milliseconds), and only in the main thread, where Python handles signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _orphaned() -> bool:
    """Whether this pool worker's sweep is gone (it was reparented)."""
    return _PARENT is not None and os.getppid() != _PARENT


def _pool_run(cfgs: list[dict], root: str):
    """`execute_group` in a pool worker, unless the sweep that started the worker is gone: then exit,
    as nobody waits for the run (the portable half of dying with the parent)."""
    if _orphaned():
        os._exit(1)
    return execute_group(cfgs, root)


def _disk_full(err: StoreFull, store: RunStore, cfgs: Sequence[RunConfig]) -> StoreFull:
    """The one line a sweep stopped by a full disk says: what is saved, what is not, and about how much
    space the rest needs (the mean size of the records and weights this sweep saved, or the failed write's
    size when none was saved)."""
    ids = list(dict.fromkeys(store.path(c).stem for c in cfgs))
    sizes = [sum(p.stat().st_size for p in (store.root / f"{rid}.json", store.root / f"{rid}.pt") if p.is_file())
             for rid in ids if (store.root / f"{rid}.json").is_file()]
    left = len(ids) - len(sizes)
    each = sum(sizes) / len(sizes) if sizes else err.needed
    return StoreFull(f"{err}. The sweep stopped: {len(sizes)} of {len(ids)} runs are saved, {left} are not; "
                     f"they need about {_size(each * left)} ({_size(each)} a run{'' if sizes else ' at least'}). "
                     "Free that much space (or point --store elsewhere) and rerun the same command: saved runs "
                     "are kept.", int(each * left))


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} GB"


def _stop_pool(pool: ProcessPoolExecutor, kill: bool) -> None:
    """Stop a pool the sweep is leaving: queued groups are cancelled; with `kill` (an interrupt) the
    running ones end at once (unsaved, so simply missing), else (a full disk) they are left to finish
    or fail their own write. Then wait for the pool's processes and threads, so that none outlives the
    sweep and its queues are closed (an abandoned pool makes multiprocessing's resource tracker warn
    of leaked semaphores at exit)."""
    if kill:
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            if proc.is_alive():
                proc.kill()
    pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class LocalExecutor:
    """Processes on this machine; `jobs` defaults to os.cpu_count() (each run uses one core, see
    `companion.runs.THREADS`); each job trains one group of the recipe (`plan_groups`). Runs on a GPU
    go through one process (this one), group after group: a pool of processes sharing a GPU
    time-slices it instead of overlapping."""

    jobs: int | None = None

    def execute(self, cfgs: Sequence[RunConfig], store: RunStore, *, progress: bool = False) -> list[str]:
        """Run `cfgs`; returns one line per failed run (empty when all succeeded)."""
        jobs = max(1, min(self.jobs or os.cpu_count() or 1, len(cfgs) or 1))
        if any(str(c.device).startswith("cuda") for c in cfgs):
            jobs = 1  # one process drives the GPU: processes sharing one time-slice it instead of overlapping
        groups = plan_groups(cfgs)
        jobs = min(jobs, len(groups) or 1)
        failures: list[str] = []
        bar = tqdm(total=len(cfgs), disable=not progress, desc="runs", unit="run")

        asked = {store.path(c).stem for c in cfgs}

        def failed(group, err) -> None:  # a member saved before the group failed is not a failure
            failures.extend(f"{_label(c)}: {type(err).__name__}: {err}" for c in group
                            if store.path(c).stem in asked and not store.path(c).is_file())

        def done(group) -> int:
            return sum(store.path(c).stem in asked for c in group)

        try:
            if jobs == 1:
                for group in groups:
                    try:
                        execute_group([config_to_dict(c) for c in group], str(store.root))
                    except StoreFull as err:  # every later run would train and be thrown away: stop
                        raise _disk_full(err, store, cfgs) from None
                    except Exception as err:  # noqa: BLE001  (report, keep going)
                        failed(group, err)
                    bar.update(done(group))
                return failures
            ctx = multiprocessing.get_context("spawn")
            pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker,
                                       initargs=(os.getpid(),))
            try:
                with _workers_start_deaf():
                    futures = {pool.submit(_pool_run, [config_to_dict(c) for c in g], str(store.root)): g
                               for g in groups}
                for fut in as_completed(futures):
                    err = fut.exception()
                    if isinstance(err, BrokenProcessPool):
                        # a worker was killed (Ctrl-C reaches the whole process group, or the OS
                        # killed it): stop like an interrupt; finished runs are already stored
                        raise KeyboardInterrupt from err
                    if isinstance(err, StoreFull):
                        raise _disk_full(err, store, cfgs) from None
                    if err is not None:
                        failed(futures[fut], err)
                    bar.update(done(futures[fut]))
            except BaseException as err:
                _stop_pool(pool, kill=not isinstance(err, StoreFull))
                del pool  # its queues' semaphores are released now, not reported as leaked at exit
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
        queue_timeout_min: on Slurm, when for this long no task of the array has run or ended and
            every task left is PENDING for a reason that waiting does not cure (a DOWN partition, a
            drained or DOWN node, a request no node can meet: `stuck`), the array is cancelled and its
            runs reported as failed with Slurm's reason; None waits forever. A busy cluster's reasons
            (Priority, Resources, a QOS or association limit, …) never cancel anything. Checked with `squeue` every `queue_check_s`,
            which also reads a task's end from `sacct` as soon as it leaves the queue.
        poll_s: how often to poll job states (submitit reads them from `sacct`: the cluster needs
            accounting, or a job that ends without a result is never seen to end).
    """

    cluster: str = "slurm"
    folder: str | None = None
    timeout_min: int = 60
    gpus_per_node: int = 0
    cpus_per_task: int = 1
    array_parallelism: int = 32
    partition: str | None = None
    queue_timeout_min: float | None = 60.0
    poll_s: float = 0.5
    queue_check_s: float = 5.0

    def execute(self, cfgs: Sequence[RunConfig], store: RunStore, *, progress: bool = False) -> list[str]:
        """Submit `cfgs` as one job array (one task per group) and wait; returns one line per failed run."""
        import submitit  # optional dependency: only the Slurm executor needs it

        if not cfgs:
            return []
        ex = submitit.AutoExecutor(folder=Path(self.folder or store.root / ".submitit"), cluster=self.cluster)
        params = dict(name="companion", timeout_min=self.timeout_min, gpus_per_node=self.gpus_per_node,
                      cpus_per_task=self.cpus_per_task, slurm_array_parallelism=self.array_parallelism)
        if self.partition:
            params["slurm_partition"] = self.partition
        ex.update_parameters(**params)
        groups = plan_groups(cfgs)
        asked = {store.path(c).stem for c in cfgs}
        dicts = [[config_to_dict(c) for c in g] for g in groups]
        jobs = ex.map_array(execute_group, dicts, [str(store.root)] * len(groups))
        failures: list[str] = []
        bar = tqdm(total=len(cfgs), disable=not progress, desc="runs", unit="run")
        pending = dict(enumerate(jobs))

        def unsaved(i: int) -> list[RunConfig]:  # a member saved before its job failed is not a failure
            return [c for c in groups[i] if store.path(c).stem in asked and not store.path(c).is_file()]

        moved = time.monotonic()  # when a task last ran or ended
        next_check = moved + self.queue_check_s
        try:
            while pending:
                for i, job in list(pending.items()):
                    if self.cluster == "debug" or job.done():  # debug jobs run when asked for a result
                        try:
                            job.result()
                        except Exception as err:  # noqa: BLE001
                            failures.extend(f"{_label(c)}: {_job_failure(job, err)}" for c in unsaved(i))
                        del pending[i]
                        moved = time.monotonic()
                        bar.update(sum(store.path(c).stem in asked for c in groups[i]))
                if pending and self.cluster == "slurm" and time.monotonic() >= next_check:
                    queue = _squeue(jobs[0].job_id.split("_")[0])
                    now = time.monotonic()
                    next_check = now + self.queue_check_s
                    if queue is not None and any(job.job_id not in queue for job in pending.values()):
                        # a task left the queue: read its end from sacct now, not at submitit's next
                        # look (its interval grows with the jobs' age, to minutes)
                        next(iter(pending.values())).done(force_check=True)
                    if queue is not None and any(state != "PENDING" for state, _ in queue.values()):
                        moved = now
                    elif (queue and self.queue_timeout_min is not None and all(stuck(r) for _, r in queue.values())
                          and now - moved > 60 * self.queue_timeout_min):
                        failures.extend(self._give_up(pending, queue, unsaved))
                        pending.clear()
                if pending:
                    time.sleep(self.poll_s)
        finally:
            bar.close()
        return failures

    def _give_up(self, pending: dict, queue: dict[str, tuple[str, str]], unsaved) -> list[str]:
        """Cancel the array's tasks that never started; one line per run they held."""
        ids = sorted({job.job_id.split("_")[0] for job in pending.values()})
        subprocess.run(["scancel", *ids], capture_output=True, timeout=60)
        reasons = ", ".join(sorted({reason for _, reason in queue.values()})) or "none given"
        lines = []
        for i, job in pending.items():
            lines += [f"{_label(c)}: Slurm job {job.job_id} never started: no task of its array ran for "
                      f"{self.queue_timeout_min:g} min (PENDING, Slurm's reason: {reasons}), so the array was "
                      "cancelled. `sinfo` shows why (a DOWN partition, a drained or DOWN node, a request no node "
                      "meets); rerun when jobs can start, or wait longer with --queue-timeout-min" for c in unsaved(i)]
        return lines


# Slurm's pending reasons that a busy cluster gives and time cures: the job waits its turn or a limit.
_WAITING = {"None", "Priority", "Resources", "Dependency", "BeginTime", "JobArrayTaskLimit", "Reservation",
            "Licenses", "PartitionJobLimit", "AssociationJobLimit", "AssociationResourceLimit"}


def stuck(reason: str) -> bool:
    """Whether a PENDING task's Slurm reason is one that waiting does not cure (PartitionDown,
    ReqNodeNotAvail, BadConstraints, …), as opposed to a busy cluster's (Priority, Resources, a QOS or
    association limit: `QOSMaxJobsPerUserLimit`, `AssocGrpCpuLimit`, …)."""
    return reason not in _WAITING and not reason.startswith(("QOS", "Assoc", "MaxJob"))


def _squeue(array_id: str) -> dict[str, tuple[str, str]] | None:
    """{task id: (state, reason)} of a job array's tasks still in Slurm's queue (`squeue -r`), or None
    when squeue does not answer."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-j", array_id, "-o", "%i|%T|%r"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    rows = [line.split("|", 2) for line in out.stdout.splitlines() if line.count("|") == 2]
    return {task: (state, reason) for task, state, reason in rows}


def _job_failure(job, err: Exception) -> str:
    """How a task that left runs unsaved ended, in one line: its job id, its state or the exception its
    function raised, and where its log is."""
    from submitit.core.utils import FailedJobError  # optional dependency: only the Slurm executor needs it

    log = f"its log: {job.paths.stderr}"
    if isinstance(err, FailedJobError):  # the function raised: the trace's last line is the exception
        trace = str(err).split("-" * 22)
        last = [line for line in (trace[1] if len(trace) > 2 else str(err)).splitlines() if line.strip()]
        return f"job {job.job_id} failed: {last[-1].strip() if last else type(err).__name__}; {log}"
    try:
        state = job.state
    except Exception:  # noqa: BLE001  (a state is a courtesy here)
        state = "UNKNOWN"
    return f"job {job.job_id} ended {state} without a result; {log}"


EXECUTORS = {"local": LocalExecutor, "slurm": SlurmExecutor}


def make_executor(name: str, **options):
    """`EXECUTORS[name](**options)` with a readable error for an unknown name."""
    if name not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; valid: {', '.join(EXECUTORS)}.")
    return EXECUTORS[name](**options)
