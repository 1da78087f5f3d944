"""The command line without the `train` extra (`pip install attention-priors`, the core alone): one line that
names the missing packages and the command that adds them, exit 1, no traceback and no parser built; and the
modules it checks are the `train` extra of pyproject.toml, so the two cannot drift apart."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import companion.cli as cli

ROOT = Path(__file__).resolve().parents[1]


def _without(monkeypatch, *modules: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None if name in modules else real(name, *a, **k))


def test_a_missing_module_of_the_train_extra_is_one_line_with_the_fix(monkeypatch, capsys):
    _without(monkeypatch, "pandas", "yaml")
    monkeypatch.setattr(cli, "build_parser", lambda: (_ for _ in ()).throw(AssertionError("parser built")))
    assert cli.main(["list"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("companion: error: the command line needs the engine's packages, and pandas, PyYAML are not "
                   "installed: pip install 'attention-priors[train]'\n")


def test_one_missing_module_reads_in_the_singular(monkeypatch):
    _without(monkeypatch, "sklearn")
    assert cli.missing_train_extra() == ("companion: error: the command line needs the engine's packages, and "
                                         "scikit-learn is not installed: pip install 'attention-priors[train]'")


def test_with_the_extra_installed_nothing_is_missing_and_the_command_line_runs(capsys):
    assert cli.missing_train_extra() is None
    assert cli.main(["--help"]) == 0
    assert "usage: companion" in capsys.readouterr().out


def test_the_checked_modules_are_exactly_the_train_extra_of_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    train = {canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["train"]}
    assert {canonicalize_name(dist) for dist in cli.TRAIN_MODULES.values()} == train
    for module in cli.TRAIN_MODULES:  # each import name is real here, where the lock installs the extra
        assert importlib.util.find_spec(module) is not None, module
