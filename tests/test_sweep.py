"""Sweeps: resume after SIGKILL, the Slurm path through submitit's local/debug clusters, CLI errors."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from companion.cli import main
from companion.experiments import EXPERIMENTS
from companion.store import RunStore
from companion.sweep import ensure_runs, parse_seeds, plan

TINY = ["train.steps=30", "train.eval_every=10"]
SWEEP = [sys.executable, "-m", "companion", "sweep", "smoke", "--profile", "ci", "--seeds", "0-4"]
SETS = [a for item in TINY for a in ("--set", item)]


def _records(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in root.glob("*.json")}


def _check_complete(root: Path, seeds=range(5), overrides=TINY) -> None:
    store = RunStore(root)
    records = [store.load(p.stem) for p in root.glob("*.json")]
    assert all(r is not None for r in records)
    assert sorted((r.config.method, r.seed) for r in records) == sorted(
        (m, s) for m in ("default", "mask") for s in seeds)
    assert all(r.config == c for r in records for c in plan("smoke", "ci", [r.seed], [r.config.method], overrides))
    assert not list(root.glob("*.corrupt"))


def _start(cmd):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for(proc, root: Path, n: int) -> None:
    deadline = time.monotonic() + 120
    while len(_records(root)) < n:
        assert proc.poll() is None, "the sweep finished before it could be interrupted; make the runs longer"
        assert time.monotonic() < deadline, f"fewer than {n} runs finished within 120 s"
        time.sleep(0.01)


def test_sweep_interrupted_by_sigint_then_sigkill_resumes_to_exactly_ten_runs(tmp_path):
    root = tmp_path / "runs"
    cmd = SWEEP + ["--jobs", "2", "--store", str(root)] + SETS
    proc = _start(cmd)  # 1. Ctrl-C (SIGINT to the process group): clean exit 130, no traceback
    try:
        _wait_for(proc, root, 2)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "rerun the same command" in err and "Traceback" not in err
    first = _records(root)
    assert 2 <= len(first) < 10
    proc = _start(cmd)  # 2. restart, then SIGKILL the sweep and its workers mid-run
    try:
        _wait_for(proc, root, len(first) + 2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = _records(root)
    assert len(first) + 2 <= len(before) < 10, len(before)
    assert all(before[name] == data for name, data in first.items())
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)  # 3. restart to the end
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"{10 - len(before)} run now, {len(before)} already stored" in out.stdout
    after = _records(root)
    assert all(after[name] == data for name, data in before.items())  # finished runs were not redone
    _check_complete(root)
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert "0 run now, 10 already stored" in again.stdout and _records(root) == after


@pytest.mark.parametrize("seeds", [
    "0-1",
    pytest.param("0-4", marks=pytest.mark.slow),  # the full 5 × 2 sweep: 10 concurrent processes, ~45 s
])
def test_slurm_path_through_submitit_local_cluster(tmp_path, seeds):
    root = tmp_path / "runs"
    n = len(parse_seeds(seeds))
    stacked = [*TINY, f"stack={n}"]  # the recipe: the seeds of a method train together
    code = main(["sweep", "smoke", "--seeds", seeds, "--executor", "slurm", "--cluster", "local",
                 "--timeout-min", "10", "--store", str(root)] + [a for item in stacked for a in ("--set", item)])
    assert code == 0
    _check_complete(root, range(n), stacked)
    results = list((root / ".submitit").rglob("*_result.pkl"))
    assert len(results) == 2  # one submitit array task per method: its seeds train together
    notes = [json.loads(p.read_text())["execution"] for p in root.glob("*.json")]
    assert notes == [{"mode": "batched", "members": list(range(n))}] * (2 * n)  # each member wrote its own record


def test_slurm_path_debug_cluster_runs_only_missing(tmp_path):
    store = RunStore(tmp_path)
    first = ensure_runs("smoke", "ci", [0, 1], ["mask"], store=store, overrides=TINY, executor="slurm",
                        cluster="debug")
    stamp = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")}
    records = ensure_runs("smoke", "ci", [0, 1, 2], ["mask"], store=store, overrides=TINY, executor="slurm",
                          cluster="debug")
    assert [r.seed for r in records] == [0, 1, 2] and records[:2] == first
    assert all(tmp_path.joinpath(n).stat().st_mtime_ns == t for n, t in stamp.items())


def test_parse_seeds():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("0-2,7,1") == [0, 1, 2, 7]
    for bad in ("0-", "-1", "a", "3-1", "", "1,,2"):
        with pytest.raises(ValueError, match="malformed seeds"):
            parse_seeds(bad)


@pytest.mark.parametrize("argv, needle", [
    (["sweep", "smok"], "unknown experiment 'smok'; valid: arith-add, arith-mul, charlm, copymix, gotu-2parity, gotu-cyclic3, gotu-maj3, gotu-threesym, lm-local, passkey, passkey-lm, smoke, symmetry-2parity, symmetry-2parity-moved, symmetry-maj3, symmetry-threesym, vit-cifar10, vit-cifar100, vit-digits, vit-imagenet100"),
    (["sweep", "smoke", "--profile", "gpu"], "argument --profile: invalid choice: 'gpu'"),
    (["sweep", "smoke", "--methods", "default,magic"], "unknown method 'magic'"),
    (["sweep", "smoke", "--seeds", "0-"], "malformed seeds '0-'"),
    (["sweep", "smoke", "--set", "train.lx=1"], "unknown override key 'train.lx'; valid keys: model.arch"),
    (["sweep", "smoke", "--set", "train.lr=fast"], "train.lr='fast': expected float"),
    (["sweep", "smoke", "--set", "model.n_layers=2.5"], "expected int"),
    (["sweep", "smoke", "--jobs", "0"], "argument --jobs: must be a whole number >= 1, got '0'"),
    (["sweep", "smoke", "--set", "stack=0"], "RunConfig.stack must be in 1..16"),
    (["list", "--seeds", "x"], "malformed seeds"),
    (["sweep", "smoke", "--set", "train.lr=nan"], "override train.lr='nan': expected a finite float"),
    (["sweep", "smoke", "--set", "train.clip_norm=inf"], "override train.clip_norm='inf': expected a finite float"),
    (["sweep", "smoke", "--set", "model.prior.open_value=inf"], "open_value='inf': expected a finite float"),
    (["list", "--set", "train.lr=nan"], "override train.lr='nan': expected a finite float"),
])
def test_cli_bad_input_is_one_readable_line_exit_2(capsys, argv, needle, tmp_path):
    assert main(argv + (["--store", str(tmp_path)])) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())  # nothing ran


def test_batch_is_ignored_with_a_note_and_changes_nothing(capsys, tmp_path):
    """`--batch` once chose the groups; the recipe does now. Old scripts still run, get told why, and
    store the same runs as without it."""
    args = ["sweep", "smoke", "--seeds", "0-1", "--methods", "mask", "--jobs", "1"] + SETS + ["--set", "stack=2"]
    assert main(args + ["--batch", "1", "--store", str(tmp_path / "a")]) == 0
    assert "--batch is ignored: the seeds a run trains beside are part of its recipe" in capsys.readouterr().err
    assert main(args + ["--store", str(tmp_path / "b")]) == 0
    a, b = _records(tmp_path / "a"), _records(tmp_path / "b")
    assert len(a) == 2 and a.keys() == b.keys()
    for name in a:
        strip = lambda d: {k: v for k, v in json.loads(d).items() if k not in ("wall_time", "finished_at", "checksum")}  # noqa: E731
        da, db = strip(a[name]), strip(b[name])
        da["curves"].pop("wall_time"), db["curves"].pop("wall_time")
        assert da == db


def test_cli_list_counts_stored_and_missing(capsys, tmp_path):
    ensure_runs("smoke", "ci", [0, 1], ["default"], store=tmp_path, jobs=1, overrides=TINY)
    assert main(["list", "--seeds", "0-4", "--store", str(tmp_path)] + SETS) == 0
    out = capsys.readouterr().out
    assert "smoke" in out and "methods: default, mask" in out
    assert "ci     methods: default, mask   stored 2/10, missing 8" in out
    assert "paper  methods: default, mask   stored 0/10, missing 10" in out
    assert set(EXPERIMENTS) == {"smoke"} or all(name in out for name in EXPERIMENTS)


def test_ensure_many_runs_each_config_once_in_one_pool(tmp_path):
    from companion.sweep import Request, ensure_many

    reqs = [Request("smoke", ["mask"], TINY), Request("smoke", ["default", "mask"], TINY)]
    blocks = ensure_many(reqs, "ci", [0, 1], store=tmp_path, jobs=1)
    assert [len(b) for b in blocks] == [2, 4]
    assert len(list(tmp_path.glob("*.json"))) == 4  # the shared mask runs ran once
    assert [r.run_id for r in blocks[0]] == [r.run_id for r in blocks[1][2:]]
    again = ensure_runs("smoke", "ci", [0, 1], ["default"], store=tmp_path, jobs=1, overrides=TINY)
    assert [r.to_dict() for r in again] == [r.to_dict() for r in blocks[1][:2]]


def test_reading_without_training_finds_records_of_any_device_and_counts_the_missing(tmp_path):
    from dataclasses import replace as _replace

    from companion.identity import run_id
    from companion.runs import execution_note, run
    from companion.reading import MissingRuns, read_runs

    store = RunStore(tmp_path)
    cfgs = plan("smoke", "ci", [0, 1], ["mask"], TINY)
    made = run(cfgs[0])
    # a record made on another device (as a GPU window makes it) under that device's id
    def on_gpu(cfg):
        gpu = _replace(cfg, device="cuda")
        return _replace(made, config=gpu, run_id=run_id(gpu), execution=execution_note([gpu.seed], "cuda"))

    store.save(on_gpu(cfgs[0]))
    with pytest.raises(MissingRuns, match=r"1 of 2 runs are not in .* \(1 found; missing: smoke/mask\); train them "
                       r"with .*`companion sweep EXPERIMENT --profile ci .*\(here: smoke\)") as err:
        read_runs("smoke", "ci", [0, 1], ["mask"], store, overrides=TINY)
    assert (err.value.found, err.value.total) == (1, 2) and err.value.missing == [cfgs[1]]
    assert not list(tmp_path.glob(".*.tmp")) and len(list(tmp_path.glob("*.json"))) == 1  # nothing trained
    store.save(on_gpu(cfgs[1]))
    got = read_runs("smoke", "ci", [0, 1], ["mask"], str(tmp_path), overrides=TINY)  # a folder opens read-only
    assert [r.config.device for r in got] == ["cuda", "cuda"] and [r.seed for r in got] == [0, 1]


def test_only_a_pending_reason_that_waiting_does_not_cure_can_cancel_a_slurm_array():
    from companion.executors import stuck

    for reason in ("PartitionDown", "PartitionInactive", "ReqNodeNotAvail, UnavailableNodes:vm", "NodeDown",
                   "BadConstraints", "PartitionTimeLimit", "InvalidQOS"):
        assert stuck(reason), reason
    for reason in ("Priority", "Resources", "None", "Dependency", "JobArrayTaskLimit", "QOSMaxJobsPerUserLimit",
                   "AssocGrpCpuLimit", "MaxJobsPerAccount"):
        assert not stuck(reason), reason  # a busy cluster: the array waits its turn, however long
