"""Every bad value of every command is refused before any work starts: exit 2, one line on stderr that
names the value, no traceback, no file touched (the committed records and the store named on the command
line alike). Random bad values for each option (hypothesis), and the probes of the review by name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from companion.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _tree(*folders: Path) -> dict:
    """(size, mtime) of every file under `folders`: what a command touched shows here."""
    out = {}
    for folder in folders:
        for dirpath, _, files in os.walk(folder):
            for name in files:
                st_ = os.stat(os.path.join(dirpath, name))
                out[os.path.join(dirpath, name)] = (st_.st_size, st_.st_mtime_ns)
    return out


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A store folder with one file in it, a plain file, the checkout as cwd; and the tree to compare."""
    store = tmp_path / "store"
    store.mkdir()
    (store / "mine.txt").write_text("a user's file\n")
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder\n")
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("COMPANION_ROOT", raising=False)
    monkeypatch.setenv("COMPANION_RUNS", str(store))  # where a command that failed to refuse would write
    return store, a_file


def _refused(argv: list[str], capsys, watched: list[Path]) -> str:
    before = _tree(*watched)
    code = main(argv)  # the parser's refusals too come back as a code, never SystemExit
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (argv, code, err)
    assert len(lines) == 1 and "Traceback" not in err and lines[0].startswith("companion"), (argv, err)
    assert _tree(*watched) == before, argv
    return lines[0]


# hypothesis: random bad values of each kind, each given to every option of that kind
def _not_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return True
    return False


not_a_whole_number = st.one_of(st.text(min_size=1, max_size=6), st.floats(allow_nan=True).map(repr)).filter(_not_int)
below_one = st.integers(max_value=0).map(str)
negative = st.integers(max_value=-1).map(str)
bad_minutes = st.one_of(st.floats(max_value=0.0).map(repr), st.sampled_from(["nan", "inf", "-inf", "soon", ""]))
bad_seeds = st.one_of(st.tuples(st.integers(1, 50), st.integers(0, 49)).filter(lambda t: t[1] < t[0])
                      .map(lambda t: f"{t[0]}-{t[1]}"), negative, st.sampled_from(["", ",", "a-b", "0-", "1.5", "0..4"]))
bad_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_.", min_size=1, max_size=12).map(lambda s: "no" + s)

POSITIVE_INT = [("sweep smoke", "--jobs"), ("sweep smoke", "--batch"), ("sweep smoke", "--timeout-min"),
                ("sweep smoke", "--cpus-per-task"), ("sweep smoke", "--array-parallelism"), ("ladder", "--jobs"),
                ("claim S2-06", "--jobs"), ("reproduce", "--jobs")]
NONNEGATIVE_INT = [("sweep smoke", "--gpus-per-node"), ("reproduce --sample", "--sample-seed")]
MINUTES = [("sweep smoke", "--queue-timeout-min"), ("paper 08", "--minutes")]
SEEDS = [("list", "--seeds"), ("sweep smoke", "--seeds"), ("paper 08", "--seeds"), ("claim S2-06", "--seeds")]
STORES = [("list", "--store"), ("sweep smoke", "--store"), ("paper 08", "--store"), ("ladder", "--store"),
          ("claim S2-06", "--store")]
CHOICES = [("sweep smoke", "--profile"), ("sweep smoke", "--executor"), ("sweep smoke", "--cluster"),
           ("chapters", "--profile"), ("claim S2-06", "--profile")]
NAMES = [("sweep", None), ("paper", None), ("claim", None), ("chapters", None), ("reproduce", None),
         ("ladder", "--only"), ("sweep smoke", "--methods")]


def _argv(where: str, option: str | None, value: str) -> list[str]:
    return where.split() + ([f"{option}={value}"] if option else [value])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.one_of(
    st.tuples(st.sampled_from(POSITIVE_INT), st.one_of(not_a_whole_number, below_one)),
    st.tuples(st.sampled_from(NONNEGATIVE_INT), st.one_of(not_a_whole_number, negative)),
    st.tuples(st.sampled_from(MINUTES), bad_minutes),
    st.tuples(st.sampled_from(SEEDS), bad_seeds),
    st.tuples(st.sampled_from(CHOICES), bad_names),
    st.tuples(st.sampled_from(NAMES), bad_names)))
def test_a_random_bad_value_of_any_option_is_one_line_and_exit_2_before_any_work(case, sandbox, capsys):
    (where, option), value = case
    store, _ = sandbox
    _refused(_argv(where, option, value), capsys, [ROOT / "results", store])


BOUNDARIES = ([(w, "0") for w in POSITIVE_INT] + [(w, "-1") for w in NONNEGATIVE_INT] + [(w, "0") for w in MINUTES]
              + [(w, "3-1") for w in SEEDS] + [(w, "nosuch") for w in CHOICES + NAMES])


@pytest.mark.parametrize("where, value", BOUNDARIES, ids=[f"{w} {o} {v}" for (w, o), v in BOUNDARIES])
def test_the_first_bad_value_of_every_option_is_refused(where, value, sandbox, capsys):
    store, _ = sandbox
    _refused(_argv(*where, value), capsys, [ROOT / "results", store])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(STORES))
def test_a_store_that_is_a_file_is_refused_by_every_command(where, sandbox, capsys):
    store, a_file = sandbox
    line = _refused(_argv(*where, str(a_file)), capsys, [ROOT / "results", store, a_file])
    assert "is a file, not a folder" in line


PROBES = {  # the review's probes, each with what the line must name
    "n_train below zero": (["sweep", "smoke", "--set", "task.n_train=-5"], "n_train"),
    "no such task": (["sweep", "smoke", "--set", "task.name=nosuch"], "unknown task 'nosuch'"),
    "a device this machine lacks": (["sweep", "smoke", "--set", "device=cuda:7"], "not on this machine"),
    "an empty --methods": (["sweep", "smoke", "--methods", ","], "names no method"),
    "an unknown method": (["sweep", "smoke", "--methods", "nosuch"], "nosuch"),
    "reproduce --jobs 0": (["reproduce", "--jobs", "0"], ">= 1"),
    "reproduce --jobs -1": (["reproduce", "--jobs", "-1"], ">= 1"),
    "paper 99": (["paper", "99"], "unknown chapter '99'"),
    "paper seeds backwards": (["paper", "08", "--seeds", "5-3"], "malformed seeds '5-3'"),
    "paper on a missing GPU": (["paper", "08", "--device", "cuda:7"], "not on this machine"),
    "paper negative minutes": (["paper", "08", "--minutes", "-5"], "minutes > 0"),
    "paper with no chapter": (["paper"], "name a chapter"),
    "ladder --only ,": (["ladder", "--only", ","], "names no family"),
    "prune at paper": (["chapters", "--prune", "--profile", "paper"], "--prune"),
    "yes without train": (["chapters", "--yes"], "--yes"),
    "--since without --sample": (["reproduce", "--since", "HEAD"], "--sample"),
    "--since not a commit": (["reproduce", "--sample", "--since", "no-such-commit"], "no-such-commit"),
    "--note without a report": (["reproduce", "--note", "a host"], "--record-report"),
    "a report that does not exist": (["reproduce", "--record-report", "/nonexistent/report.json"], "is not a file"),
    "--sample --record": (["reproduce", "--sample", "--record"], "--record"),
    "no such claim": (["claim", "S9-99"], "S9-99"),
    "no such command": (["frobnicate"], "invalid choice"),
}


@pytest.mark.parametrize("name", PROBES)
def test_the_review_s_probes_are_refused_before_any_work(name, sandbox, capsys):
    argv, said = PROBES[name]
    store, _ = sandbox
    line = _refused(argv + (["--store", str(store)] if argv[0] == "sweep" else []), capsys, [ROOT / "results", store])
    assert said in line, line


def test_a_companion_root_that_is_not_a_checkout_is_one_line(sandbox, capsys, monkeypatch):
    monkeypatch.setenv("COMPANION_ROOT", "/nonexistent")
    line = _refused(["claim", "S3-07"], capsys, [ROOT / "results"])
    assert "COMPANION_ROOT='/nonexistent' is not a checkout" in line


def test_a_paper_sweep_on_the_cpu_says_how_long_and_waits_for_yes(sandbox, capsys, monkeypatch):
    import companion.cli.paper as paper
    store, _ = sandbox
    asked = []
    monkeypatch.setattr(paper, "estimate_total", lambda groups, estimate=None: asked.append(groups) or (3 * 3600.0, 90.0))
    line = _refused(["sweep", "smoke", "--profile", "paper", "--store", str(store)], capsys, [ROOT / "results", store])
    assert len(asked) == 1 and "about 3.0 hours" in line and "--yes" in line
