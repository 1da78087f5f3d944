"""The store trusts only what it made, and a careless command cannot hurt the machine.

Every hostile edit of a record (each one given a fresh checksum, as a tool that rewrites records
would) is detected, named in one line, set aside under a name that overwrites nothing, and rerun; a
record that could not be read back is never written; temporary files the store did not make are never
removed; a seed range or a grid beyond the limit is refused before anything is allocated; a full disk
stops a sweep at the first failed write with exact counts and nothing half-written; a chapter's bad
parameter is one line in the notebook.
"""

import errno
import json
import math
import os
import warnings
from dataclasses import replace

import pytest

from companion import store as store_module
from companion.cli import main
from companion.config import apply_overrides
from companion.experiments import get_experiment
from companion.notice import CompanionWarning, StoreWarning
from companion.store import RunStore, StoreFull, record_checksum
from companion.sweep import MAX_RUNS, ensure_runs, parse_seeds, plan, plan_grid
from companion.validate import record_problem

TINY = ["train.steps=8", "train.eval_every=4"]
CFG = apply_overrides(get_experiment("smoke").config("ci", "mask", 0), TINY)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One smoke run's record file, as the store wrote it."""
    root = tmp_path_factory.mktemp("made")
    [record] = ensure_runs("smoke", "ci", [0], ["mask"], store=root, jobs=1, overrides=TINY)
    return root, record


def _rewrite(path, edit):
    """Apply `edit` to the record's JSON and give it a fresh checksum (as a careless tool would)."""
    data = json.loads(path.read_text())
    edit(data)
    data["checksum"] = record_checksum(data)
    path.write_text(json.dumps(data, allow_nan=True))


def _set(*keys, value):
    def edit(data):
        node = data
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return edit


def _drop(*keys):
    def edit(data):
        node = data
        for k in keys[:-1]:
            node = node[k]
        del node[keys[-1]]
    return edit


EDITS = {  # the hostile edits of the review, and what the one line names
    "edited metric": (_set("metrics", "test", "mse", value=0.001), "is not the last evaluation"),
    "NaN metric": (_set("metrics", "test", "mse", value=math.nan), "not a finite number"),
    "infinite metric": (_set("metrics", "test", "mse", value=math.inf), "not a finite number"),
    "metric as a string": (_set("metrics", "test", "mse", value="0.01"), "not a finite number"),
    "metric as a bool": (_set("metrics", "test", "mse", value=True), "not a finite number"),
    "missing split": (_drop("metrics", "test"), "but a toy run reports ['test', 'train']"),
    "missing split, curves too": (lambda d: (d["metrics"].pop("test"), d["curves"]["eval"].pop("test")),
                                  "but a toy run reports ['test', 'train']"),
    "emptied curve": (_set("curves", "train_loss", value=[]), "train_loss"),
    "short eval curve": (lambda d: d["curves"]["eval"]["test"]["mse"].pop(0), "one value per evaluation"),
    "NaN in the training loss": (lambda d: d["curves"]["train_loss"].__setitem__(2, math.nan),
                                 "curves['train_loss'][2] is nan, not a finite number"),
    "infinity inside an eval curve": (lambda d: d["curves"]["eval"]["test"]["mse"].__setitem__(0, math.inf),
                                      "curves['eval']['test']['mse'][0] is inf, not a finite number"),
    "NaN in a readout": (_set("readouts", value={"entropy": {"layer 0": [0.5, math.nan]}}),
                         "readouts['entropy']['layer 0'][1] is nan"),
    "infinity in the drift": (_set("drift", value={"relative": -math.inf}), "drift['relative'] is -inf"),
    "wrong seed": (_set("seed", value=3), "is not its config's seed"),
    "negative wall time": (_set("wall_time", value=-1.0), "wall_time"),
}


@pytest.mark.parametrize("name", EDITS)
def test_a_record_edited_with_a_fresh_checksum_is_named_set_aside_and_rerun(made, tmp_path, name):
    root, record = made
    src = root / f"{record.run_id}.json"
    path = tmp_path / src.name
    path.write_bytes(src.read_bytes())
    assert RunStore(tmp_path).load(record.run_id) == record  # the untouched copy is trusted
    edit, said = EDITS[name]
    _rewrite(path, edit)
    with pytest.warns(StoreWarning) as caught:
        assert RunStore(tmp_path).load(record.run_id) is None
    [line] = [str(w.message) for w in caught]
    assert said in line and "\n" not in line and "Set aside as" in line
    assert not path.exists() and (tmp_path / f"{src.name}.corrupt").exists()
    # the next sweep reruns it: the same numbers as before the edit
    [again] = ensure_runs("smoke", "ci", [0], ["mask"], store=tmp_path, jobs=1, overrides=TINY)
    assert again.metrics == record.metrics and again.curves["train_loss"] == record.curves["train_loss"]


def test_the_rules_fail_for_each_edit_and_hold_for_every_committed_record(made):
    from pathlib import Path

    _, record = made
    for name, (edit, said) in EDITS.items():
        data = json.loads(json.dumps(record.to_dict()))
        edit(data)
        assert said in (record_problem(data) or ""), name
    results = Path(__file__).parents[1] / "results"
    committed = sorted([*(results / "ci").glob("*.json"), *(results / "ladder").glob("*.json")])
    assert committed and all(record_problem(json.loads(p.read_text())) is None for p in committed)


def test_every_task_reports_the_splits_the_rules_expect():
    """EVAL_SPLITS against runs of every task (the golden records cover each one) and the committed ones."""
    from pathlib import Path

    from companion.tasks import load_tasks
    from companion.validate import EVAL_SPLITS

    tests = Path(__file__).parent
    seen = {}
    for p in [*(tests / "golden" / "records").glob("*.json"), *(tests.parent / "results" / "ci").glob("*.json")]:
        data = json.loads(p.read_text())
        seen.setdefault(data["config"]["task"]["name"], set()).add(tuple(sorted(data["metrics"])))
    assert seen == {task: {splits} for task, splits in EVAL_SPLITS.items()}
    assert set(EVAL_SPLITS) == set(load_tasks())


def test_set_aside_never_overwrites_an_earlier_copy(made, tmp_path):
    root, record = made
    src = root / f"{record.run_id}.json"
    store = RunStore(tmp_path)
    for n in range(3):
        (tmp_path / src.name).write_text("{ half a record" + "x" * n)
        with pytest.warns(StoreWarning):
            assert store.load(record.run_id) is None
    aside = sorted(p.name for p in tmp_path.glob("*.corrupt"))
    assert aside == [f"{src.name}.2.corrupt", f"{src.name}.3.corrupt", f"{src.name}.corrupt"]
    assert {(tmp_path / a).read_text() for a in aside} == {"{ half a record", "{ half a recordx", "{ half a recordxx"}


def test_a_record_that_could_not_be_read_back_is_never_written(made, tmp_path):
    _, record = made
    bad = replace(record, metrics={"test": {"mse": math.nan}})
    with pytest.raises(ValueError, match=r"was not saved: metrics\['test'\]\['mse'\] is nan, not a finite number"):
        RunStore(tmp_path).save(bad, {})
    assert list(tmp_path.iterdir()) == []  # neither the record nor its weights


def test_store_warnings_print_as_one_line_without_source():
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        text = warnings.formatwarning("run store: x is unusable", StoreWarning, "/some/file.py", 12, "code line")
        other = warnings.formatwarning("other", UserWarning, "/some/file.py", 12, "code line")
    assert text == "StoreWarning: run store: x is unusable\n"
    assert "/some/file.py:12" in other and "code line" in other  # every other warning keeps Python's format
    assert issubclass(StoreWarning, CompanionWarning) and issubclass(StoreWarning, UserWarning)


# ---------------------------------------------------------------- bounded work


def test_a_huge_seed_range_is_refused_before_anything_is_allocated():
    import tracemalloc

    tracemalloc.start()
    with pytest.raises(ValueError, match=r"seeds '0-99999999999' make 100,000,000,000 runs, more than the 10,000 "
                                         r"one command may plan .*COMPANION_MAX_RUNS=100000000000"):
        parse_seeds("0-99999999999")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1_000_000
    assert parse_seeds(f"0-{MAX_RUNS - 1}") == list(range(MAX_RUNS))  # the limit itself is allowed
    assert parse_seeds("0-2,1-3,7") == [0, 1, 2, 3, 7]


def test_the_limit_counts_methods_and_grid_cells_and_can_be_raised(monkeypatch):
    seeds = range(MAX_RUNS // 2)  # smoke has two methods: exactly the limit
    assert len(plan("smoke", "ci", seeds)) == MAX_RUNS
    with pytest.raises(ValueError, match=r"2 methods × 5,001 seeds of smoke make 10,002 runs"):
        plan("smoke", "ci", range(MAX_RUNS // 2 + 1))
    with pytest.raises(ValueError, match=r"cells of gotu × 10,000 seeds make"):
        plan_grid("gotu", "ci", range(MAX_RUNS))
    monkeypatch.setenv("COMPANION_MAX_RUNS", "20000")
    assert len(plan("smoke", "ci", range(MAX_RUNS // 2 + 1))) == MAX_RUNS + 2
    monkeypatch.setenv("COMPANION_MAX_RUNS", "lots")
    with pytest.raises(ValueError, match=r"COMPANION_MAX_RUNS='lots' is not an integer >= 1"):
        plan("smoke", "ci", [0])


def test_the_cli_says_the_limit_in_one_line(capsys):
    assert main(["sweep", "smoke", "--seeds", "0-99999999999"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "COMPANION_MAX_RUNS=100000000000" in err


# ---------------------------------------------------------------- a full disk


@pytest.fixture
def small_disk(monkeypatch):
    """The store's writes see a disk that holds `budget[0]` more bytes, then fail with ENOSPC."""
    budget = [0]
    real = os.fdopen

    class Limited:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            if len(data) > budget[0]:
                self.fh.write(data[: budget[0]])  # what a full disk does: a partial write, then the error
                budget[0] = 0
                raise OSError(errno.ENOSPC, "No space left on device")
            budget[0] -= len(data)
            return self.fh.write(data)

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(store_module.os, "fdopen", lambda fd, mode: Limited(real(fd, mode)))
    return budget


def test_a_full_disk_stops_the_sweep_at_the_first_failed_write_and_counts_exactly(made, tmp_path, small_disk, capsys):
    root, record = made
    each = sum((root / f"{record.run_id}{ext}").stat().st_size for ext in (".json", ".pt"))
    small_disk[0] = int(2.5 * each)  # two runs fit, the third's weights do not
    seeds = "0-5"
    args = ["sweep", "smoke", "--seeds", seeds, "--methods", "mask", "--jobs", "1",
            "--store", str(tmp_path)] + [a for item in TINY for a in ("--set", item)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"companion sweep: error: no space left in {tmp_path} (No space left on device) writing ")
    assert "The sweep stopped: 2 of 6 runs are saved, 4 are not; they need about " in err
    assert "rerun the same command: saved runs are kept." in err
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len([n for n in names if n.endswith(".json")]) == 2 and not [n for n in names if n.endswith(".tmp")]
    store = RunStore(tmp_path)
    assert all(store.load(n[:-5]) is not None for n in names if n.endswith(".json"))  # whole and trusted
    small_disk[0] = 10**9  # space freed: the same command finishes the rest, the saved runs untouched
    saved = {n: (tmp_path / n).read_bytes() for n in names}
    assert main(args) == 0
    assert len(list(tmp_path.glob("*.json"))) == 6
    assert all((tmp_path / n).read_bytes() == b for n, b in saved.items())


def test_a_full_disk_names_the_bytes_of_the_write_that_failed(tmp_path, small_disk):
    small_disk[0] = 10
    with pytest.raises(StoreFull, match=r"writing x\.json \(100 bytes\); nothing of it was kept") as err:
        RunStore(tmp_path)._atomic_write(tmp_path / "x.json", b"y" * 100)
    assert err.value.needed == 100 and list(tmp_path.iterdir()) == []


def test_a_full_disk_while_saving_a_run_names_its_weights_and_record_together(made, tmp_path, small_disk):
    _, record = made
    state = {"w": __import__("torch").arange(2000.0)}
    weights = len(RunStore._weights_bytes(state))
    small_disk[0] = weights + 10  # the weights fit, the record does not
    with pytest.raises(StoreFull, match=r"the run needs [0-9,]+ bytes in all \(its weights [0-9,]+, its record") as err:
        RunStore(tmp_path).save(record, state)
    assert (tmp_path / f"{record.run_id}.pt").stat().st_size == weights
    assert not (tmp_path / f"{record.run_id}.json").exists()
    assert err.value.needed > weights + 1000  # what rerunning it writes again: both files, not the record alone


def test_store_full_crosses_processes_with_its_byte_count():
    import pickle

    err = pickle.loads(pickle.dumps(StoreFull("no space", 1234)))
    assert isinstance(err, StoreFull) and str(err) == "no space" and err.needed == 1234


# ---------------------------------------------------------------- a chapter's bad parameter


def test_a_bad_chapter_parameter_shows_as_one_line_in_a_notebook():
    from companion.book.parameters import ParameterError, check_parameters

    with pytest.raises(ParameterError) as err:
        check_parameters("nonsense", [0])
    assert isinstance(err.value, ValueError)
    assert err.value._render_traceback_() == [f"ParameterError: {err.value}"]
    assert "profile='nonsense' is not a profile; valid: ci, paper" in str(err.value)
