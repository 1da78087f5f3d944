"""The `slurm` executor against a live one-node Slurm (tools/slurm_cluster.py: munge, MariaDB with
slurmdbd for accounting, slurmctld and slurmd on loopback, brought up once for this module and taken
down after it, no process of it left).

What it proves on that cluster: a sweep through real `sbatch` job arrays (one task per group of seeds
trained together) stores records bitwise equal to the local executor's; `sacct` answers; a task
cancelled with `scancel` and a node that dies mid-sweep are one failure line per run naming the job,
how it ended and its log, and the next sweep makes exactly what is missing; a queue that never starts
a job ends in a timeout naming Slurm's reason; `tools/paper_slurm.py` sends a chapter's paper groups
with the request a GPU cluster gets (here `--gpus-per-node 0 --device cpu`). What it does not: GPUs,
several nodes, a shared filesystem between machines, preemption, a cluster's own policies.

Skipped, with one line, only where Slurm's packages are absent; if they are present and the cluster
does not come up, every test errors with the daemons' logs.
"""

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest

if shutil.which("slurmctld") is None:
    pytest.skip("Slurm is not installed: the live-cluster tests need apt-get install -y slurm-wlm slurmdbd munge "
                "mariadb-server (.ci/run installs them)", allow_module_level=True)

# one worker under pytest-xdist (`--dist loadgroup`) takes the whole module: one cluster, up once
pytestmark = pytest.mark.xdist_group("slurm")

from companion.cli import main  # noqa: E402
from companion.executors import same_result  # noqa: E402
from companion.store import RunStore  # noqa: E402
from companion.sweep import ensure_runs, plan  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("slurm_cluster", ROOT / "tools" / "slurm_cluster.py")
slurm_cluster = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(slurm_cluster)

TINY = ["train.steps=8", "train.eval_every=4", "stack=2"]  # two seeds of a method train together
LONG = ["train.steps=1500", "train.eval_every=500", "stack=2"]  # a job that runs for a while (~10 s)


def _sets(overrides):
    return [a for o in overrides for a in ("--set", o)]


def _say(config, text: str) -> None:
    """Print into the test log whatever the capture mode (what a case printed is read there)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled() if capman else nullcontext():
        print(f"\n[slurm] {text}", flush=True)


@pytest.fixture(scope="module")
def slurm(pytestconfig):
    """The live cluster; SLURM_CONF points at it for this module (submitit calls sbatch, sacct, scancel)."""
    root = tempfile.mkdtemp(prefix="companion-slurm-")  # under /tmp: munged (user munge) must reach its socket
    cluster = slurm_cluster.Cluster(root)
    start = time.monotonic()
    try:
        cluster.up()
    except slurm_cluster.ClusterError as err:
        pytest.fail(f"the Slurm test cluster did not come up (packages installed, so this is a failure):\n{err}",
                    pytrace=False)
    _say(pytestconfig, f"cluster up in {time.monotonic() - start:.1f} s: munged, mariadbd + slurmdbd, slurmctld, "
                       f"slurmd (node {cluster.node}, {os.cpu_count()} CPUs) under {root}")
    before = os.environ.get("SLURM_CONF")
    os.environ.update(cluster.env)
    began = time.monotonic()
    yield cluster
    tests_s = time.monotonic() - began
    if before is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = before
    start = time.monotonic()
    cluster.down()
    left = cluster.processes()
    _say(pytestconfig, f"tests took {tests_s:.0f} s; cluster down in {time.monotonic() - start:.1f} s; processes "
                       f"of it left: {left or 'none'}")
    assert not left


@contextmanager
def _deadline(seconds: float):
    """Bound an in-process sweep (a subprocess gets a timeout instead): TimeoutError after `seconds`."""
    def expire(signum, frame):
        raise TimeoutError(f"the sweep did not end within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _records(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in root.glob("*.json")}


def _sweep(store: Path, overrides, *extra: str) -> list[str]:
    return [sys.executable, "-m", "companion", "sweep", "smoke", "--seeds", "0-1", "--executor", "slurm",
            "--timeout-min", "10", "--store", str(store), *_sets(overrides), *extra]


def _array_tasks(cluster, store: Path, timeout: float = 60) -> dict[str, str]:
    """{task: state} of the store's job array from `sacct` (accounting), once none is still running."""
    [array] = {p.name.split("_")[0] for p in (store / ".submitit").glob("*_submitted.pkl")}
    deadline = time.monotonic() + timeout
    while True:
        out = cluster.command("sacct", "-X", "-n", "-P", "-j", array, "-o", "JobID,State").stdout
        tasks = dict(line.split("|", 1) for line in out.splitlines() if "|" in line)
        if tasks and not any(s in ("PENDING", "RUNNING", "COMPLETING") for s in tasks.values()):
            return tasks
        assert time.monotonic() < deadline, f"sacct still shows {tasks} after {timeout} s"
        time.sleep(1)


def _wait_for(what: str, ready, proc=None, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while not (value := ready()):
        assert proc is None or proc.poll() is None, f"the sweep ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.3)
    return value


def _running_task(cluster, index: int | None = None) -> str | None:
    """A RUNNING array task (`<array>_<index>`), if any."""
    out = cluster.command("squeue", "-h", "-r", "-o", "%i %T").stdout.splitlines()
    tasks = [line.split()[0] for line in out if line.endswith(" RUNNING")]
    return next((t for t in tasks if index is None or t.endswith(f"_{index}")), None)


def _failure_lines(err: str, needle: str) -> list[str]:
    return [line.strip() for line in err.splitlines() if needle in line]


def _log_end(lines: list[str]) -> str:
    """The last line of the job log the first failure line names, to show in the test log."""
    found = re.search(r"its log: (\S+)", lines[0]) if lines else None
    try:
        text = Path(found.group(1)).read_text().strip().splitlines() if found else []
    except OSError:
        return ""
    return f"\n  (its log ends: {text[-1] if text else '(empty)'})"


def test_records_equal_the_local_executors_one_array_task_per_group(slurm, tmp_path):
    store = tmp_path / "slurm"
    with _deadline(300):
        assert main(["sweep", "smoke", "--seeds", "0-1", "--executor", "slurm", "--timeout-min", "10",
                     "--store", str(store), *_sets(TINY)]) == 0
    tasks = _array_tasks(slurm, store)  # sacct works: accounting as a real cluster has it
    assert sorted(tasks.values()) == ["COMPLETED", "COMPLETED"], tasks  # methods default and mask: 2 groups
    local = ensure_runs("smoke", "ci", [0, 1], store=tmp_path / "local", overrides=TINY, jobs=1)
    remote = RunStore(store)
    assert len(_records(store)) == 4
    for record in local:
        other = remote.load(record.run_id)
        assert other is not None and same_result(other, record), record.run_id
        assert other.execution == {"mode": "batched", "members": [0, 1]}
    assert all(r.config == c for r, c in zip(local, plan("smoke", "ci", [0, 1], overrides=TINY)))


def test_a_cancelled_task_is_reported_per_run_and_the_next_sweep_finishes_it(slurm, tmp_path, pytestconfig):
    store = tmp_path / "runs"
    cmd = _sweep(store, LONG)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        task = _wait_for("running task", lambda: _running_task(slurm), proc)
        time.sleep(1)
        slurm.command("scancel", task)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = _failure_lines(err, " ended CANCELLED")
    _say(pytestconfig, f"scancel {task} mid-sweep; the sweep (exit {proc.returncode}) said:\n  " + "\n  ".join(lines)
         + _log_end(lines))
    assert proc.returncode == 1 and len(lines) == 2, err[-3000:]
    assert all(f"job {task} ended CANCELLED" in line for line in lines)
    log = Path(re.search(r"its log: (\S+)", lines[0]).group(1))
    assert log.is_file() and log.parent == store / ".submitit"
    kept = _records(store)
    assert len(kept) == 2  # the other group finished and is stored
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "2 run now, 2 already stored" in again.stdout
    after = _records(store)
    assert len(after) == 4 and all(after[name] == data for name, data in kept.items())


def test_a_queue_that_never_starts_a_job_is_a_timeout_naming_the_reason(slurm, tmp_path, capsys, pytestconfig):
    start = time.monotonic()
    with _deadline(120):
        code = main(["sweep", "smoke", "--seeds", "0-1", "--methods", "mask", "--executor", "slurm", "--partition",
                     slurm_cluster.CLOSED, "--queue-timeout-min", "0.05", "--store", str(tmp_path), *_sets(TINY)])
    took = time.monotonic() - start
    err = capsys.readouterr().err
    lines = _failure_lines(err, "never started")
    _say(pytestconfig, f"partition {slurm_cluster.CLOSED} DOWN, --queue-timeout-min 0.05: exit {code} after "
                       f"{took:.0f} s:\n  " + "\n  ".join(lines))
    assert code == 1 and len(lines) == 2 and all("Slurm's reason: PartitionDown" in line for line in lines), err
    assert took < 60
    assert slurm.command("squeue", "-h").stdout.strip() == ""  # cancelled: nothing left queued
    assert not _records(tmp_path)


def test_paper_groups_go_to_slurm_with_the_gpu_request_and_land_in_the_store(slurm, tmp_path):
    """tools/paper_slurm.py as on a GPU cluster, but for the device: --gpus-per-node 0 --device cpu, and tiny."""
    store = tmp_path / "paper"
    cmd = [sys.executable, str(ROOT / "tools" / "paper_slurm.py"), "08", "--store", str(store), "--seeds", "0",
           "--set", "train.steps=4", "--set", "stack=1", "--device", "cpu", "--gpus-per-node", "0",
           "--partition", "debug", "--timeout-min", "10"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "0 of 3 paper runs stored" in out.stdout and "3 of 3 paper runs stored; 0 remain." in out.stdout
    records = [json.loads(p.read_text()) for p in store.glob("*.json")]
    assert sorted(r["config"]["method"] for r in records) == ["alibi", "goat", "rope"]
    assert {(r["config"]["profile"], r["config"]["device"], r["config"]["train"]["steps"]) for r in records} == {
        ("paper", "cpu", 4)}
    [script] = (store / ".submitit").glob("*_submission.sh")
    flags = set(re.findall(r"#SBATCH (\S+)", script.read_text()))
    assert {"--array=0-2%3", "--gpus-per-node=0", "--partition=debug", "--time=10"} <= flags
    assert sorted(_array_tasks(slurm, store).values()) == ["COMPLETED"] * 3
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "3 of 3 paper runs stored in" in again.stdout and "0 to make" in again.stdout


def test_a_node_that_dies_mid_sweep_is_reported_per_run_and_nothing_finished_is_lost(slurm, tmp_path, pytestconfig):
    """One task at a time (--array-parallelism 1): the first group finishes, the node dies under the second."""
    store = tmp_path / "runs"
    cmd = _sweep(store, LONG, "--array-parallelism", "1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    killed = []
    try:
        _wait_for("first group stored", lambda: len(_records(store)) == 2, proc)
        task = _wait_for("second task running", lambda: _running_task(slurm, index=1), proc)
        start = time.monotonic()
        killed = slurm.kill_node()
        out, err = proc.communicate(timeout=300)
        noticed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
        if killed:
            slurm.start_slurmd()  # the node comes back (ReturnToService=2), for the next sweep
    lines = _failure_lines(err, " ended NODE_FAIL")
    _say(pytestconfig, f"node killed under {task} (slurmd, job steps, the job: {len(killed)} processes); the sweep "
                       f"ended {noticed:.0f} s later (exit {proc.returncode}) saying:\n  " + "\n  ".join(lines)
         + _log_end(lines))
    assert proc.returncode == 1 and len(lines) == 2, err[-3000:]
    assert all(f"job {task} ended NODE_FAIL" in line for line in lines)
    assert Path(re.search(r"its log: (\S+)", lines[0]).group(1)).is_file()
    kept = _records(store)
    assert len(kept) == 2
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "2 run now, 2 already stored" in again.stdout
    after = _records(store)
    assert len(after) == 4 and all(after[name] == data for name, data in kept.items())


def test_a_killed_node_takes_its_orphaned_jobs_with_it(slurm, tmp_path):
    """The race a loaded machine loses: a job step dies while it starts its job, whose processes live on orphaned
    (no longer below slurmd or a step, without the daemons' mark). `kill_node` finds them by their job's
    environment, so the job cannot finish on a dead node; `processes` sees them too, so `down` leaves none."""
    job = slurm.command("sbatch", "--parsable", "-o", str(tmp_path / "out"), "--wrap", "sleep 300").stdout.strip()
    _wait_for("the job running", lambda: "RUNNING" in slurm.command("squeue", "-h", "-j", job, "-o", "%T").stdout)
    sleeping = lambda: [p for p, cmd in slurm.processes().items() if cmd == "sleep 300"]  # noqa: E731
    _wait_for("the job's process", sleeping)
    for pid, cmd in slurm.processes().items():
        if cmd.startswith("slurmstepd"):
            os.kill(pid, signal.SIGKILL)  # its steps die, the job's processes stay
    orphans = _wait_for("orphans", lambda: [p for p in sleeping() if not _alive_parent_is_step(p)])
    killed = []
    try:
        killed = slurm.kill_node()
        assert set(orphans) <= set(killed) and not sleeping()
    finally:
        slurm.command("scancel", job, check=False)  # first: the node comes back with no job to wait for
        if killed:
            slurm.start_slurmd()


def _alive_parent_is_step(pid: int) -> bool:
    """Whether `pid`'s parent is a live slurmstepd."""
    try:
        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        return Path(f"/proc/{ppid}/cmdline").read_bytes().startswith(b"slurmstepd")
    except (OSError, IndexError, ValueError):
        return False
