"""Faults of the run store and of sweeps: every one a clear error, nothing lost, nothing left behind.

A store that cannot be written (read-only, a file, no permission) is named before anything trains;
`list` never writes; records get the umask's mode; a killed write's temporary file is swept up.
The tests run as root on CI, where permissions do not bind, so they make the operating system refuse
by monkeypatching the store's calls into `os` and `tempfile` (one test uses real permissions, as a
normal user).
"""

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from companion import store as store_module
from companion.cli import main
from companion.config import apply_overrides
from companion.experiments import get_experiment
from companion.store import STALE_AGE_S, RunStore, StoreError

TINY = ["train.steps=8", "train.eval_every=4"]
SETS = [a for item in TINY for a in ("--set", item)]
CFG = apply_overrides(get_experiment("smoke").config("ci", "mask", 0), TINY)
SWEEP = ["sweep", "smoke", "--seeds", "0", "--methods", "mask"] + SETS
LIST = ["list", "--seeds", "0"] + SETS


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in root.iterdir() if p.is_file()}


def _no_training(monkeypatch):
    import companion.executors

    def refuse(*args, **kwargs):
        raise AssertionError("a run started")

    monkeypatch.setattr(companion.executors, "run_group", refuse)


def _refuse_writes(monkeypatch):
    """What a read-only folder does to the store: creating a file or renaming one fails with EACCES."""
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(store_module.tempfile, "mkstemp", denied)
    monkeypatch.setattr(store_module.os, "replace", denied)
    monkeypatch.setattr(store_module.os, "link", denied)


def _corrupt(root: Path) -> Path:
    root.mkdir(exist_ok=True)
    path = RunStore(root).path(CFG)
    path.write_text("{ half a record")
    return path


# ---------------------------------------------------------------- a store that cannot be written


def test_list_reads_a_store_holding_a_corrupt_record_and_leaves_it_in_place(tmp_path, capsys, monkeypatch):
    path = _corrupt(tmp_path)
    before = _snapshot(tmp_path)
    _refuse_writes(monkeypatch)  # a read-only store: list must not even try
    assert main(LIST + ["--store", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "ci     methods: default, mask   stored 0/2, missing 2" in out
    assert err == (f"companion list: warning: run store: {path} is unusable: not readable JSON (Expecting "
                   "property name enclosed in double quotes: line 1 column 3 (char 2)); probably a partial "
                   "write. Left in place (read-only); a sweep will set it aside and rerun the run.\n")
    assert _snapshot(tmp_path) == before


def test_sweep_into_an_unwritable_store_says_so_before_training(tmp_path, capsys, monkeypatch):
    path = _corrupt(tmp_path)
    before = _snapshot(tmp_path)
    _refuse_writes(monkeypatch)
    _no_training(monkeypatch)
    with pytest.warns(UserWarning, match=r"could not be set aside \(Permission denied\)"):
        assert main(SWEEP + ["--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"companion sweep: error: run store {tmp_path} is not writable (Permission denied): a sweep "
                   "would train runs it cannot save. Point --store (or $COMPANION_RUNS) at a writable folder, "
                   "or fix this one's permissions.\n")
    assert _snapshot(tmp_path) == before and path.exists()


def test_a_store_path_that_is_a_file_is_refused_by_list_and_sweep(tmp_path, capsys, monkeypatch):
    not_a_folder = tmp_path / "runs"
    not_a_folder.write_text("notes")
    _no_training(monkeypatch)
    for command in (LIST, SWEEP):
        assert main(command + ["--store", str(not_a_folder)]) == 2
        err = capsys.readouterr().err
        assert err == (f"companion {command[0]}: error: argument --store: {str(not_a_folder)!r} is a file, not a "
                       f"folder (see `companion {command[0]} --help`)\n")
    assert not_a_folder.read_text() == "notes"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any permission bits")
def test_a_read_only_folder_is_refused_for_real(tmp_path, capsys, monkeypatch):
    root = tmp_path / "runs"
    root.mkdir()
    root.chmod(0o555)
    try:
        _no_training(monkeypatch)
        assert main(SWEEP + ["--store", str(root)]) == 2
        assert "is not writable (Permission denied)" in capsys.readouterr().err
    finally:
        root.chmod(0o755)


def _can_mount_read_only() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _can_mount_read_only(), reason="needs unshare -m (root) for a read-only bind mount")
def test_a_read_only_file_system_is_named_by_list_and_sweep_for_real(tmp_path):
    """The store bind-mounted read-only in a private mount namespace: the operating system refuses."""
    path = _corrupt(tmp_path)
    before = _snapshot(tmp_path)
    both = (f"import contextlib, io, warnings; from companion.cli import main; warnings.simplefilter('ignore')\n"
            f"with contextlib.redirect_stdout(io.StringIO()): code = main({LIST + ['--store', str(tmp_path)]})\n"
            f"print('list', code, 'sweep', main({SWEEP + ['--store', str(tmp_path)]}))")
    script = (f"mount --bind {tmp_path} {tmp_path} && mount -o remount,bind,ro {tmp_path} && "
              f"{sys.executable} -c \"{both}\"")
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout == "list 0 sweep 2\n", out.stderr
    assert out.stderr.splitlines() == [
        f"companion list: warning: run store: {path} is unusable: not readable JSON (Expecting property name "
        "enclosed in double quotes: line 1 column 3 (char 2)); probably a partial write. Left in place "
        "(read-only); a sweep will set it aside and rerun the run.",
        f"companion sweep: error: run store {tmp_path} is not writable (Read-only file system): a sweep would "
        "train runs it cannot save. Point --store (or $COMPANION_RUNS) at a writable folder, or fix this "
        "one's permissions.",
    ]
    assert _snapshot(tmp_path) == before


def test_a_read_only_store_object_never_writes(tmp_path):
    store = RunStore(tmp_path, read_only=True)
    assert repr(store) == f"RunStore({str(tmp_path)!r}, read_only=True)"
    with pytest.raises(StoreError, match="opened read-only"):
        store.check_writable()
    with pytest.raises(StoreError, match="opened read-only"):
        store.save(None)
    assert list(tmp_path.iterdir()) == []


def test_a_record_we_may_not_read_is_reported_and_never_set_aside(tmp_path, monkeypatch):
    path = _corrupt(tmp_path)
    real = open

    def denied(file, *args, **kwargs):  # what a file of another user's, mode 0600, does (root reads anything)
        if Path(file) == path:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(file, *args, **kwargs)

    monkeypatch.setattr(store_module, "open", denied, raising=False)
    with pytest.warns(UserWarning, match=r"cannot be read \(Permission denied\); the run counts as missing.*umask"):
        assert RunStore(tmp_path).load(CFG) is None
    assert path.exists() and not path.with_name(path.name + ".corrupt").exists()


# ---------------------------------------------------------------- file modes


@pytest.fixture(scope="module")
def record():
    from companion.runs import run

    return run(CFG, return_model=True)


@pytest.mark.parametrize("umask", [0o002, 0o022, 0o077])
def test_records_and_weights_get_the_mode_the_umask_allows(tmp_path, record, umask):
    old = os.umask(umask)
    try:
        assert store_module._umask() == umask
        RunStore(tmp_path).save(record[0], record[1].state_dict())
    finally:
        os.umask(old)
    modes = {p.suffix: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {".json": 0o666 & ~umask, ".pt": 0o666 & ~umask}


def test_the_umask_is_read_without_proc_too(monkeypatch):
    old = os.umask(0o027)
    try:
        real = Path.read_text
        monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (_ for _ in ()).throw(OSError())
                            if str(self) == "/proc/self/status" else real(self, *a, **k))
        assert store_module._umask() == 0o027
        assert os.umask(0o027) == 0o027  # and left as it was
    finally:
        os.umask(old)


# ---------------------------------------------------------------- temporary files of killed writes


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temporaries_are_swept_and_nothing_else(tmp_path):
    here = store_module._writer_tag()
    dead, alive, old = _dead_pid(), os.getpid(), time.time() - STALE_AGE_S - 60
    names = {
        f".companion-0123456789ab-{dead}-{here}-k1l2m3n4.tmp": "removed",  # its writer is gone
        f".companion-0123456789ab-{alive}-{here}-a1b2c3d4.tmp": "kept",  # a write in progress
        f".companion-0123456789ab-{dead}-0badc0de-e5f6g7h8.tmp": "kept",  # another machine's: judged by age
        f".companion-fedcba987654-{dead}-0badc0de-i9j0k1l2.tmp": "old",
        f".companion-probe-{dead}-0badc0de-x1y2.tmp": "old",
        # names the store does not make are never touched, however old (a user's files in the folder)
        ".notes.tmp": "kept, old",
        ".draft.ipynb.tmp": "kept, old",
        f".0123456789ab-{dead}-{here}-q8w7e6r5.tmp": "kept, old",
        ".companion-notes.tmp": "kept, old",
        "0123456789ab.json": "kept",
        "0123456789ab.json.corrupt": "kept, old",
        "notes.tmp": "kept, old",
    }
    for name, fate in names.items():
        (tmp_path / name).write_text("x")
        if fate.endswith("old"):
            os.utime(tmp_path / name, (old, old))
    (tmp_path / ".submitit").mkdir()
    removed = RunStore(tmp_path).remove_stale_temporaries()
    assert sorted(removed) == sorted(n for n, fate in names.items() if not fate.startswith("kept"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [n for n, fate in names.items() if fate.startswith("kept")] + [".submitit"])
    assert RunStore(tmp_path, read_only=True).remove_stale_temporaries(max_age_s=0) == []


KILLED_WRITE = """
import os, sys, time
from companion.store import RunStore
store = RunStore(sys.argv[1])
def stuck(fd):  # the write is in the temporary file, not yet renamed: kill it here
    print("writing", flush=True)
    time.sleep(600)
os.fsync = stuck
store._atomic_write(store.path(sys.argv[2]), b"half a rec")
"""


def test_a_write_killed_midway_leaves_a_temporary_that_the_next_sweep_removes(tmp_path):
    from companion.identity import run_id
    from companion.sweep import ensure_runs

    rid = run_id(CFG)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITE, str(tmp_path), rid], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline() == "writing\n"
    finally:
        proc.kill()
        proc.wait()
    [tmp] = tmp_path.glob(".*.tmp")
    assert tmp.name.startswith(f".companion-{rid[:12]}-{proc.pid}-{store_module._writer_tag()}-")
    assert list(tmp_path.glob("*.json")) == []  # the record was never half-written under its name
    [record] = ensure_runs("smoke", "ci", [0], ["mask"], store=tmp_path, jobs=1, overrides=TINY)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{rid}.json", f"{rid}.pt"]
    assert json.loads((tmp_path / f"{rid}.json").read_text())["run_id"] == record.run_id == rid


# ---------------------------------------------------------------- one id, one result


def _result(record) -> dict:
    """What a run computed, without when it finished, how long it took and how it was executed."""
    data = record.to_dict()
    del data["wall_time"], data["finished_at"], data["execution"]
    data["curves"] = {k: v for k, v in data["curves"].items() if k != "wall_time"}
    return data


def test_one_run_id_gives_one_result_whatever_the_command_line(tmp_path):
    """The recipe, not the caller, decides what a run computes: `--jobs 1` (in this process, which has
    threads of its own), `--jobs 2` (two workers), submitit, asking for seed 0 alone or for seeds 0-1,
    and a resume after one member's record was lost all store the same numbers under each id, on any
    host (no two execution paths are compared: each path trains the same group the same way). Before
    the group was part of the recipe, an Intel host gave smoke seed 0 a test MSE of 0.0126 alone and
    0.0026 beside seed 1."""
    import torch

    from companion.reading import read_runs
    from companion.sweep import ensure_runs

    stacked = [*TINY, "stack=2"]
    torch.set_num_threads(2)  # a caller with threads of its own (a notebook): restored by conftest
    # submitit's debug cluster runs its jobs in this process; its local cluster runs them in fresh
    # processes, as the pool does (and costs as much again: left out)
    ways = {"jobs-1": ([0, 1], dict(jobs=1)), "jobs-2": ([0, 1], dict(jobs=2)),
            "submitit-debug": ([0, 1], dict(executor="slurm", cluster="debug")),
            "seed-0-asked-alone": ([0], dict(jobs=1)), "seed-1-asked-alone": ([1], dict(jobs=2))}
    results = {}
    for name, (seeds, kw) in ways.items():
        got = ensure_runs("smoke", "ci", seeds, ["mask"], store=tmp_path / name, overrides=stacked, **kw)
        results[name] = {r.seed: _result(r) for r in got}
        assert len(list((tmp_path / name).glob("*.json"))) == 2  # the whole group is made and stored
    assert torch.get_num_threads() == 2  # the caller's setting survives an in-process run
    first = results["jobs-1"]
    assert [r["threads"] for r in first.values()] == [1, 1] and first[0]["run_id"] != first[1]["run_id"]
    for name, got in results.items():
        assert all(got[s] == first[s] for s in got), name
    # a resume: one member's record lost (a killed write, a deleted file) retrains the whole group
    store = tmp_path / "jobs-2"
    lost = store / f"{first[1]['run_id']}.json"
    kept = (store / f"{first[0]['run_id']}.json").read_bytes()
    lost.unlink()
    [again] = ensure_runs("smoke", "ci", [1], ["mask"], store=store, overrides=stacked, jobs=2)
    assert _result(again) == first[1] and (store / f"{first[0]['run_id']}.json").read_bytes() == kept
    notes = [r.execution for r in read_runs("smoke", "ci", [0, 1], ["mask"], store=store, overrides=stacked)]
    assert notes == [{"mode": "batched", "members": [0, 1]}] * 2


# ---------------------------------------------------------------- killed sweeps leave nothing running


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state first), or None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _children(pid: int) -> dict[int, str]:
    """{pid: command line} of the processes whose parent is `pid`."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat(int(stat.parent.name))
        if fields and int(fields[1]) == pid:
            try:
                out[int(stat.parent.name)] = stat.with_name("cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
    return out


def _running(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


DRIVER = """
import sys
from companion.config import apply_overrides
from companion.executors import LocalExecutor
from companion.experiments import get_experiment
from companion.store import RunStore

def cfg(seed, steps):
    return apply_overrides(get_experiment("smoke").config("ci", "mask", seed), [f"train.steps={steps}", "train.eval_every=0"])

if __name__ == "__main__":  # two short runs, then two that would take hours
    LocalExecutor(jobs=2).execute([cfg(0, 8), cfg(1, 8), cfg(2, 10**7), cfg(3, 10**7)], RunStore(sys.argv[1]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_workers_and_the_resource_tracker_die_with_a_killed_sweep(tmp_path):
    """SIGKILL reaches the sweep alone (no process group): its workers, each in the middle of a run that
    would take hours, must die at once, and the resource tracker with them."""
    store = tmp_path / "runs"
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    proc = subprocess.Popen([sys.executable, str(driver), str(store)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(store.glob("*.json"))) < 2:  # both workers started, ran a short run, took a long one
            assert proc.poll() is None and time.monotonic() < deadline, "the short runs did not finish"
            time.sleep(0.05)
        children = _children(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    workers = [p for p, cmd in children.items() if "spawn_main" in cmd]
    tracker = [p for p, cmd in children.items() if "resource_tracker" in cmd]
    assert len(workers) == 2 and len(tracker) == 1, children
    deadline = time.monotonic() + 15
    while any(_running(p) for p in children):
        assert time.monotonic() < deadline, f"still running after their sweep died: {children}"
        time.sleep(0.05)
    assert len(list(store.glob("*.json"))) == 2 and not list(store.glob(".*.tmp"))


def test_a_worker_whose_sweep_is_gone_starts_no_run(monkeypatch):
    """The portable half: before each run a pool worker checks that the sweep is still its parent."""
    import companion.executors as ex

    exits = []

    def fake_exit(code):
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(ex, "execute_group", lambda cfgs, root: "ran")
    monkeypatch.setattr(ex.os, "_exit", fake_exit)
    monkeypatch.setattr(ex, "_PARENT", os.getppid())
    assert ex._pool_run([{}], "runs") == "ran"
    monkeypatch.setattr(ex, "_PARENT", _dead_pid())
    with pytest.raises(SystemExit):
        ex._pool_run([{}], "runs")
    assert exits == [1]


ORPHAN = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import sys, json; from companion.executors import execute_group; "
                          "execute_group([json.loads(sys.argv[1])], sys.argv[2])", sys.argv[1], sys.argv[2]])
print(child.pid, flush=True)
child.wait()
"""


def test_a_run_an_orphan_finishes_is_whole(tmp_path, record):
    """A process whose parent was killed before it even started its run still stores a whole record,
    the same one this process computes (writes are atomic; the run is deterministic)."""
    from companion.config import config_to_dict

    proc = subprocess.Popen([sys.executable, "-c", ORPHAN, json.dumps(config_to_dict(CFG)), str(tmp_path)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        orphan = int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 120
    while _running(orphan):
        assert time.monotonic() < deadline, "the orphan did not finish its run"
        time.sleep(0.05)
    stored = RunStore(tmp_path).load(CFG)
    assert stored is not None and _result(stored) == _result(record[0])
    assert not list(tmp_path.glob(".*.tmp"))
