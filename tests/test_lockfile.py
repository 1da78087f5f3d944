"""The environment is the lock (tools/lockfile.py, tools/pythons.py): requirements.lock agrees with
pyproject.toml and environment.yml on Python 3.11-3.13, every pin carries hashes, the running
environment equals the lock's pins for it, and each disagreement is named."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


lockfile = _tool("lockfile")
pythons = _tool("pythons")
LOCK = ROOT / "requirements.lock"


@pytest.fixture(scope="module")
def pins():
    return lockfile.read(LOCK)


def _copy_project(tmp_path):
    for name in ("pyproject.toml", "environment.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_the_committed_lock_agrees_with_pyproject_and_conda_on_every_supported_python(pins):
    assert lockfile.lock_problems(pins) == []
    assert all(p.hashes and all(h.startswith("sha256:") for h in p.hashes) for p in pins)
    for python in lockfile.SUPPORTED:
        versions = lockfile.resolved(pins, lockfile.environment(python))
        assert versions["torch"] == "2.14.1" and versions["torchvision"] == "0.29.1"
        assert versions["jupyter-book"].startswith("1.")


def test_every_python_gets_the_same_release_of_every_package(pins):
    """One lock for three Pythons, and one version of each package across them (`make lock` resolves for
    3.11, then for every Python constrained to those versions): a chapter computes with the same numpy,
    scipy and pandas on 3.13 as on 3.11. Only packages that exist on one Python alone (papermill needs
    aiohttp on 3.12) may be missing elsewhere."""
    chosen = {py: lockfile.resolved(pins, lockfile.environment(py)) for py in lockfile.SUPPORTED}
    for name in set().union(*chosen.values()):
        assert len({versions[name] for versions in chosen.values() if name in versions}) == 1, name
    assert {"numpy", "scipy", "pandas", "torch", "matplotlib"} <= set.intersection(*map(set, chosen.values()))
    assert sum(1 for p in pins if p.name == "numpy") == 1


def test_the_running_environment_equals_the_lock(pins):
    """What `make install` checks after installing: pip freeze against the lock (pip itself aside)."""
    locked = lockfile.resolved(pins, lockfile.environment())
    assert lockfile.environment_problems(locked, lockfile.installed()) == []


def test_an_environment_that_drifted_from_the_lock_is_named_line_by_line():
    locked = {"torch": "2.14.1", "pandas": "3.0.1", "tqdm": "4.67.1"}
    have = {"torch": "2.14.1", "pandas": "3.1.0", "rich": "14.0.0", "pip": "26.3"}
    assert lockfile.environment_problems(locked, have) == [
        "pandas 3.1.0 is installed but the lock says 3.0.1",
        "tqdm==4.67.1 is in the lock but not installed",
        "rich==14.0.0 is installed but not in the lock",
    ]
    assert lockfile.environment_problems(locked, locked) == []


def test_a_pyproject_the_lock_does_not_satisfy_is_named(tmp_path, pins):
    root = _copy_project(tmp_path)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace('"pandas>=2.1"', '"pandas>=99"')
                                         .replace('"tqdm>=4.66",', '"tqdm>=4.66",\n    "rich>=13",'))
    problems = lockfile.lock_problems(pins, root)
    assert len(problems) == 2 * len(lockfile.SUPPORTED), problems
    assert any("does not satisfy pyproject.toml's pandas>=99 on Python 3.12; run `make lock`" in p for p in problems)
    assert any("rich is missing from the lock for Python 3.13" in p for p in problems)


def test_a_narrower_python_range_and_a_conda_file_off_the_lock_are_named(tmp_path, pins):
    root = _copy_project(tmp_path)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace('requires-python = ">=3.11.5,<3.14"', 'requires-python = ">=3.11.5,<3.13"'))
    (root / "environment.yml").write_text("name: x\ndependencies:\n  - python=3.10\n  - pip\n  - pip:\n      - torch==2.14.1\n")
    problems = lockfile.lock_problems(pins, root)
    assert any("requires-python excludes Python 3.13" in p for p in problems)
    assert any("environment.yml must name one supported python" in p for p in problems)
    assert any("pip section must be exactly '-r requirements.lock'" in p for p in problems)


def test_an_unhashed_or_unpinned_entry_is_refused(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("tqdm==4.67.1\n")
    assert lockfile.lock_problems(lockfile.read(lock), ROOT)[0] == "tqdm==4.67.1 has no --hash; run `make lock`"
    lock.write_text("tqdm>=4.66 \\\n    --hash=sha256:00\n")
    with pytest.raises(ValueError, match="not pinned with ==; regenerate it with `make lock`"):
        lockfile.read(lock)


def test_the_lock_and_the_check_command_agree_on_this_environment():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "lockfile.py"), "check", str(LOCK)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "this environment equals its" in out.stdout


def test_every_interpreter_found_is_supported_and_other_never_returns_the_given_version():
    found = pythons.interpreters()
    assert set(found) <= set(pythons.SUPPORTED)
    for version, path in found.items():
        assert pythons._version(path) == version
    mine = "%d.%d" % sys.version_info[:2]
    assert mine in found  # the interpreter running the tests is one the Makefile can find
    other = subprocess.run([sys.executable, str(ROOT / "tools" / "pythons.py"), "--other", mine],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert other == "" if len(found) == 1 else pythons._version(other) not in ("", None, mine)


def test_an_extra_that_names_the_project_stands_for_that_extras_requirements_once():
    """`test` and `book` each take `attention-priors[train]`: the lock must hold the train extra's packages, and
    each requirement is checked once, not once per extra that reaches it."""
    project = {"name": "Attention_Priors", "dependencies": ["torch>=2.6"],
               "optional-dependencies": {"train": ["pandas>=2.1", "tqdm>=4.66"],
                                         "test": ["attention-priors[train]", "pytest>=8"],
                                         "book": ["attention-priors[train]", "papermill>=2.6", "pandas>=2.1"]}}
    assert [str(r) for r in lockfile.requirements(project, ("test", "book"))] == [
        "torch>=2.6", "pandas>=2.1", "tqdm>=4.66", "pytest>=8", "papermill>=2.6"]
    assert [str(r) for r in lockfile.requirements(project, ())] == ["torch>=2.6"]
    real = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {r.name for r in lockfile.requirements(real, lockfile.EXTRAS)}
    assert {"torch", "numpy", "torchvision", "pandas", "pytest", "jupyter-book"} <= names
    assert "attention-priors" not in names
