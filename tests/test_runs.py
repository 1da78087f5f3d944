"""Run identity, records and the run store: hashing, atomic writes, corruption handling."""

import copy
import os
import dataclasses
import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import torch

import companion
from companion import runs, store as store_module
from companion.config import TaskConfig, apply_overrides, config_to_dict
from companion.experiments import EXPERIMENTS, load_experiments
from companion.identity import NUMERICS, code_version, run_id
from companion.runs import run
from companion.store import RunStore
from companion.sweep import ensure_runs

load_experiments()


TINY = ["train.steps=8", "train.eval_every=4"]
CFG = apply_overrides(EXPERIMENTS["smoke"].config("ci", "mask", 0), TINY)


def _mutations(obj, path=()):
    """(path, mutated copy of obj) for every leaf field, recursively: one change at a time."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, kind = getattr(obj, f.name), hints[f.name]
        if dataclasses.is_dataclass(value) and not isinstance(value, TaskConfig):
            for sub_path, sub in _mutations(value, path + (f.name,)):
                yield sub_path, _with(obj, f.name, sub)
            continue
        if isinstance(value, (bool, int, float)):
            new = _bump(value)
        elif typing.get_origin(kind) is typing.Literal:
            new = next(c for c in typing.get_args(kind) if c != value)
        elif isinstance(value, str):
            new = value + "x"
        elif isinstance(value, TaskConfig):
            yield path + (f.name, "name"), _with(obj, f.name, _with(value, "name", value.name + "x"))
            for i, (k, v) in enumerate(value.params):
                params = list(value.params)
                params[i] = (k, _bump(v))
                yield path + (f.name, k), _with(obj, f.name, _with(value, "params", tuple(params)))
            continue
        elif isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            new = value[:-1] if value else ("log_mask",)  # readouts: one more or one fewer
        elif isinstance(value, tuple):
            new = tuple(v / 2 for v in value)
        else:
            raise AssertionError(f"no mutation for field {f.name} of type {kind}; extend this test")
        yield path + (f.name,), _with(obj, f.name, new)


def _bump(v):
    return (not v) if isinstance(v, bool) else v + "x" if isinstance(v, str) else v + 1


def _with(obj, name, value):
    """dataclasses.replace, bypassing validation (hashing must not depend on validity)."""
    new = copy.copy(obj)
    object.__setattr__(new, name, value)
    return new


def test_hash_sensitive_to_every_field():
    base = run_id(CFG)
    seen = {base: "base"}
    n = 0
    for path, mutated in _mutations(CFG):
        rid = run_id(mutated)
        assert rid not in seen, f"changing {'.'.join(path)} did not change the run id (same as {seen.get(rid)})"
        seen[rid] = ".".join(path)
        n += 1
    assert n >= 30  # every leaf of model, prior, task, train, plus identity fields, device and stack
    assert "stack" in seen.values()  # the seeds a run is stacked with are part of what it computes
    assert run_id(CFG, numerics=NUMERICS + 1) != base  # a numerics change re-keys on purpose


def test_the_id_names_the_config_and_the_numerics_version_not_source_files(tmp_path):
    """A refactor that keeps the numerics keeps every id: the id of a config is a function of the config
    and `NUMERICS` alone, so no source file, of orchestration or otherwise, enters it. Checked by
    computing the id in a copy of the package whose sweep.py and model.py gained a line: same id."""
    import shutil

    pkg = Path(companion.__file__).parent
    copy_root = tmp_path / "copy"
    shutil.copytree(pkg, copy_root / "companion", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("sweep.py", "model.py"):
        with open(copy_root / "companion" / name, "a") as fh:
            fh.write("\n# a refactor\n")
    code = ("from companion.config import apply_overrides; from companion.experiments import get_experiment;"
            "from companion.identity import run_id, code_version; import companion;"
            f"print(companion.__file__); print(run_id(apply_overrides(get_experiment('smoke').config('ci', 'mask', 0), {TINY!r})));"
            "print(code_version('toy'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=copy_root, env={**os.environ, "PYTHONPATH": str(copy_root)})
    where, rid, code_hash = out.stdout.split()
    assert where.startswith(str(copy_root)) and rid == run_id(CFG)
    assert code_hash != code_version("toy")  # the provenance hash does see the change


def test_hash_stable_across_processes():
    code = (
        "from companion.config import apply_overrides; from companion.experiments import get_experiment;"
        "from companion.identity import run_id;"
        f"print(run_id(apply_overrides(get_experiment('smoke').config('ci', 'mask', 0), {TINY!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == run_id(CFG)
    assert len(code_version()) == 64


def test_run_record_round_trip_and_determinism(tmp_path):
    r1, r2 = run(CFG), run(CFG)
    assert r1.curves["train_loss"] == r2.curves["train_loss"] and r1.drift == r2.drift
    assert r1.metrics == r2.metrics and r1.seed == 0 and r1.run_id == run_id(CFG)
    store = RunStore(tmp_path)
    path = store.save(r1)
    assert path.name == f"{r1.run_id}.json"
    data = json.loads(path.read_text())
    for key in ("schema_version", "config", "metrics", "curves", "drift", "seed", "device", "threads",
                "torch_version", "git_commit", "wall_time", "code_version", "numerics", "host", "checksum"):
        assert key in data
    assert data["numerics"] == NUMERICS and data["host"]["isa"] == torch.backends.cpu.get_cpu_capability()
    assert data["host"]["threads"] == 1 and data["host"]["torch"] == torch.__version__
    assert data["torch_version"] == torch.__version__ and data["device"] == "cpu"
    assert data["threads"] == runs.THREADS == 1
    back = store.load(CFG)
    assert back == r1
    assert list(tmp_path.iterdir()) == [path]  # no temp file left behind


@pytest.mark.parametrize("fail", ["fsync", "replace"])
def test_crash_mid_write_leaves_nothing_readable(tmp_path, monkeypatch, fail):
    record = run(CFG)
    store = RunStore(tmp_path)

    def boom(*args, **kwargs):
        raise OSError(f"simulated crash in {fail}")

    monkeypatch.setattr(store_module.os, fail, boom)
    with pytest.raises(OSError, match="simulated"):
        store.save(record)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    assert store.load(CFG) is None


def _stored(tmp_path):
    store = RunStore(tmp_path)
    store.save(run(CFG))
    return store, store.path(CFG)


@pytest.mark.parametrize("damage, problem", [
    (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "not readable JSON"),
    (lambda p: p.write_text("{ this is not json"), "not readable JSON"),
    (lambda p: p.write_text("[]"), "not a JSON object"),
    (lambda p: p.write_text(p.read_text().replace(f'"schema_version":{runs.SCHEMA_VERSION}', '"schema_version":99')),
     "schema_version 99"),
    (lambda p: p.write_text(p.read_text().replace('"lr":0.003', '"lr":0.004')), "checksum"),
    (lambda p: _rewrite(p, lambda d: d["config"]["train"].update(lr=0.004)), "hash of the stored config"),
    (lambda p: _rewrite(p, lambda d: d["metrics"]["test"].update(mse=0.0), checksum=False), "checksum"),
    (lambda p: p.write_text(json.dumps({k: v for k, v in json.loads(p.read_text()).items() if k != "metrics"})),
     "missing keys"),
])
def test_corrupt_file_is_reported_moved_aside_and_rerun(tmp_path, damage, problem):
    """Every kind of damage is named: a file cut short or not JSON, a wrong schema, a missing key,
    contents edited without their checksum, and a config edited together with a fresh checksum (then
    the file name is no longer the hash of its config)."""
    store, path = _stored(tmp_path)
    damage(path)
    with pytest.warns(UserWarning, match=problem) as caught:
        assert store.load(CFG) is None
    assert path.name in str(caught[0].message)
    assert not path.exists() and path.with_name(path.name + ".corrupt").exists()
    # the next sweep reruns it and never reads the .corrupt file
    [record] = ensure_runs("smoke", "ci", [0], ["mask"], store=store, jobs=1, overrides=TINY)
    assert record.run_id == run_id(CFG) and store.load(CFG) == record


def test_git_commit_never_fails(monkeypatch, tmp_path):
    runs.git_commit.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on PATH
    assert runs.git_commit() is None
    runs.git_commit.cache_clear()


def test_default_store_root(monkeypatch, tmp_path):
    monkeypatch.setenv("COMPANION_RUNS", str(tmp_path / "x"))
    assert RunStore().root == tmp_path / "x" == RunStore(profile="paper").root
    monkeypatch.delenv("COMPANION_RUNS")
    root = runs.repo_root()
    assert RunStore().root == root / "results" / "ci" and (root / "_toc.yml").is_file()
    assert RunStore(profile="paper").root == root / "results" / "paper"
    with pytest.raises(ValueError, match="unknown profile 'gpu'"):
        RunStore(profile="gpu")


@pytest.mark.gpu
def test_cuda_run_matches_cpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    cpu, gpu = run(CFG), run(apply_overrides(CFG, ["device=cuda"]))
    assert gpu.device == "cuda" and gpu.config.device == "cuda"
    assert gpu.metrics["test"]["mse"] == pytest.approx(cpu.metrics["test"]["mse"], rel=0.05, abs=1e-3)


def test_a_run_imports_nothing_outside_the_core_and_its_task():
    """What a run executes is what its identity hashes: training a run loads no module of book/,
    experiments/, cost/ or cli/, and no other task's module."""
    code = (
        "import sys\n"
        "from companion.config import RunConfig, config_from_dict\n"
        "from companion.runs import run\n"
        f"cfg = config_from_dict(RunConfig, {config_to_dict(CFG)!r})\n"
        "run(cfg)\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('companion.book', 'companion.experiments',\n"
        "             'companion.cost', 'companion.cli')) or (m.startswith('companion.tasks.') and m != 'companion.tasks.toy'))\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def _rewrite(path, change, checksum: bool = True) -> None:
    """Edit a stored record's data and write it back, with a checksum that matches the edit or not."""
    data = json.loads(path.read_text())
    change(data)
    if checksum:
        data["checksum"] = store_module.record_checksum(data)
    path.write_text(json.dumps(data))


def test_code_version_ignores_the_unhashed_folders_but_chapters_see_everything():
    assert code_version() != code_version(everything=True)


def test_a_run_hashes_the_core_and_its_own_task_module_only():
    from companion.identity import run_files

    names = {p.relative_to(p.parents[1]).as_posix() if p.parent.name == "tasks" else p.name
             for p in run_files("toy")}
    assert "tasks/toy.py" in names and "tasks/__init__.py" in names
    assert "tasks/boolean.py" not in names and "tasks/arithmetic.py" not in names
    assert {"model.py", "train.py", "attention.py", "priors.py", "config.py"} <= names
    assert not any("/" in n and not n.startswith("tasks/") for n in names)  # no book/, experiments/, cost/, cli/
    assert code_version("toy") != code_version("boolean")
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        run_files("nope")


def test_weights_round_trip_and_damage_is_detected_and_rerun(tmp_path):
    store = RunStore(tmp_path)
    [record] = ensure_runs("smoke", "ci", [0], ["mask"], store=store, jobs=1, overrides=TINY, weights=True)
    assert store.weights_path(record.run_id).is_file()
    _, trained = run(CFG, return_model=True)
    model = store.load_model(record)
    x = torch.randint(0, 2, (5, 6))
    torch.testing.assert_close(model(x), trained.eval()(x))
    store.weights_path(record.run_id).write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="unreadable"):
        store.load_model(record)
    assert not store.has_weights(record.run_id)
    [again] = ensure_runs("smoke", "ci", [0], ["mask"], store=store, jobs=1, overrides=TINY, weights=True)
    assert again.metrics == record.metrics and store.has_weights(record.run_id)
    store.weights_path(record.run_id).unlink()
    with pytest.raises(FileNotFoundError, match="weights=True"):
        store.load_model(record)


def test_an_unknown_readout_fails_before_training():
    from companion.experiments import get_experiment

    with pytest.raises(ValueError, match=r"unknown readout 'nonsense' in 'nonsense:3' for task 'toy'; registered: (\w+, )*log_mask(, \w+)*\. "):
        get_experiment("smoke").config("ci", "mask", 0, ["readouts=nonsense:3"])
    # a readout of another task's module is not this run's (its code is not in the run's identity)
    with pytest.raises(ValueError, match=r"unknown readout 'mdi_distance' .* belongs to companion.tasks.boolean"):
        get_experiment("smoke").config("ci", "mask", 0, ["readouts=mdi_distance"])
    assert get_experiment("smoke").config("ci", "mask", 0, ["readouts=log_mask"]).readouts == ("log_mask",)
    assert apply_overrides(CFG, ["readouts=a:1,2; b"]).readouts == ("a:1,2", "b")  # ";" separates, "," stays
    assert apply_overrides(CFG, ["readouts="]).readouts == ()
    cfg = dataclasses.replace(get_experiment("smoke").config("ci", "mask", 0), readouts=("nonsense",))
    with pytest.raises(ValueError, match="unknown readout 'nonsense'"):
        run(cfg)


def test_a_record_keeps_no_learning_rate_curve_and_losses_at_float32_precision():
    import json
    import math

    from companion.runs import LOSS_DIGITS, compact_curves, compact_drift
    from companion.train import History

    g = torch.Generator().manual_seed(0)
    loss = (torch.rand(10_000, generator=g, dtype=torch.float64) * 3).tolist()  # a paper-length run
    hist = History(steps=[0, 10_000], eval={"test": {"mse": [1.0, 0.5]}}, train_loss=loss,
                   lr=[1e-3] * 10_000, wall_time=1.0)
    curves = compact_curves(hist)
    assert "lr" not in curves and curves["steps"] == hist.steps and curves["eval"] == hist.eval
    worst = max(abs(a - b) / abs(b) for a, b in zip(curves["train_loss"], loss) if b)
    assert worst <= 0.5 * 10 ** (1 - LOSS_DIGITS) and worst > 0  # rounded, to float32's precision
    assert len(json.dumps(curves, separators=(",", ":"))) < 10_000 * 11  # against ~20 characters a loss before
    drift = compact_drift({"steps": [0], "mask": {}, "qk": {"0": [[math.pi, 1 / 3]]}, "attention": {}, "maps": {}})
    assert drift["qk"]["0"] == [[3.14159, 0.333333]]
