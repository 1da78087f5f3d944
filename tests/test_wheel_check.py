"""`make wheel-check`'s reading (tools/wheel_check.py): the floors it installs the wheel with, read from
pyproject.toml; the packages only the extras bring; the recipe script taken from a notebook's tagged cells;
and a notebook or output folder it cannot use refused in one line before anything is built. Nothing here
builds, downloads or installs (`make wheel-check` does)."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("wheel_check", ROOT / "tools" / "wheel_check.py")
wheel_check = importlib.util.module_from_spec(_spec)
sys.modules["wheel_check"] = wheel_check
_spec.loader.exec_module(wheel_check)

LINUX = {"sys_platform": "linux", "python_version": "3.11", "python_full_version": "3.11.9",
         "platform_machine": "x86_64", "implementation_name": "cpython", "os_name": "posix"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_each_floor_is_pinned_with_its_release_padded_to_three_parts():
    project = {"dependencies": ["torch>=2.6", "numpy>=1.26", "foo~=1.2.3", "bar==2.0.1", "baz>=1.0.4.post1",
                                "qux>=4,<5", "winonly>=1; sys_platform == 'win32'"]}
    assert wheel_check.floors(project, LINUX) == [
        "torch==2.6.0", "numpy==1.26.0", "foo==1.2.3", "bar==2.0.1", "baz==1.0.4.post1", "qux==4.0.0"]
    assert wheel_check.floors(project, LINUX | {"sys_platform": "win32"})[-1] == "winonly==1.0.0"


@pytest.mark.parametrize("dep", ["torch", "torch<3", "torch>2.6", "torch!=2.7"])
def test_a_core_dependency_without_a_floor_is_refused_by_name(dep):
    with pytest.raises(wheel_check.CheckFailed,
                       match=rf"dependency '{dep}' has no single floor \(>=\) to install the wheel with; give it one"):
        wheel_check.floors({"dependencies": [dep]}, LINUX)


def test_the_floors_of_pyproject_are_one_pin_per_core_dependency_that_it_accepts():
    project = _project()
    pins = wheel_check.floors(project, LINUX)
    core = [Requirement(r) for r in project["dependencies"]]
    assert [p.split("==")[0] for p in pins] == [r.name for r in core]
    for pin, req in zip(pins, core):
        version = pin.split("==")[1]
        assert req.specifier.contains(version) and len(version.split(".")) >= 3, pin


def test_only_the_extras_packages_count_as_extras_through_a_self_reference():
    project = {"name": "my-pkg", "dependencies": ["torch>=2.6", "numpy>=1.26"],
               "optional-dependencies": {"train": ["pandas>=2", "numpy>=2"], "test": ["My_Pkg[train]", "pytest"]}}
    assert wheel_check.extra_names(project) == {"pandas", "pytest"}
    real = wheel_check.extra_names(_project())
    assert {"torchvision", "pandas", "pyyaml", "scikit-learn", "pytest", "jupyter-book"} <= real
    assert not {"torch", "numpy", "attention-priors"} & real


def _cell(kind, source, *tags):
    return {"cell_type": kind, "metadata": {"tags": list(tags)} if tags else {}, "source": source}


def test_the_recipe_script_is_the_parameters_then_the_recipe_cells_in_order():
    nb = {"cells": [
        _cell("markdown", "A recipe in prose", "recipe"),
        _cell("code", ["seed = 0\n", "profile = 'ci'"], "parameters", "remove-cell"),
        _cell("code", "import torch\nx = torch.zeros(seed + 1)", "recipe"),
        _cell("code", "print('a chapter cell')"),
        _cell("code", ["y = x + 1\n", "assert y.sum() == 1\n"], "hide-input", "recipe"),
    ]}
    assert wheel_check.recipes(nb, "nb.ipynb") == (
        "# parameters of nb.ipynb\nseed = 0\nprofile = 'ci'\n\n"
        "# recipe 1 of nb.ipynb\nimport torch\nx = torch.zeros(seed + 1)\n\n"
        "# recipe 2 of nb.ipynb\ny = x + 1\nassert y.sum() == 1\n")
    without_parameters = {"cells": nb["cells"][2:3]}
    assert wheel_check.recipes(without_parameters, "nb.ipynb") == "# recipe 1 of nb.ipynb\nimport torch\nx = torch.zeros(seed + 1)\n"


def test_a_notebook_without_recipe_cells_or_with_a_magic_in_one_is_refused():
    nb = {"cells": [_cell("code", "seed = 0", "parameters"), _cell("markdown", "prose", "recipe"), _cell("code", "1")]}
    with pytest.raises(wheel_check.CheckFailed) as err:
        wheel_check.recipes(nb, "notebooks/11_your_own_model.ipynb")
    assert str(err.value) == ("notebooks/11_your_own_model.ipynb has no code cell tagged `recipe`; tag the cells a "
                              "reader copies into a model of their own (cell metadata tags), or point RECIPES_NB at "
                              "a notebook that has them")
    nb["cells"].append(_cell("code", "x = 1\n  %timeit x + 1", "recipe"))
    with pytest.raises(wheel_check.CheckFailed, match=r"runs IPython's '%timeit x \+ 1', which plain Python cannot"):
        wheel_check.recipes(nb, "nb.ipynb")


def test_a_notebook_it_cannot_use_is_refused_before_anything_is_built(tmp_path, capsys):
    out = tmp_path / "out"
    empty = tmp_path / "empty.ipynb"
    empty.write_text('{"cells": [{"cell_type": "code", "metadata": {}, "source": "1"}]}')
    assert wheel_check.main(["--notebook", str(empty), "--out", str(out)]) == 1
    assert capsys.readouterr().err == (f"wheel-check: {empty} has no code cell tagged `recipe`; tag the cells a reader "
                                       "copies into a model of their own (cell metadata tags), or point RECIPES_NB at a "
                                       "notebook that has them\n")
    assert wheel_check.main(["--notebook", str(tmp_path / "missing.ipynb"), "--out", str(out)]) == 1
    assert "missing.ipynb does not exist; point RECIPES_NB at" in capsys.readouterr().err
    assert not out.exists()


def test_an_output_folder_with_files_it_did_not_make_is_left_alone(tmp_path, capsys):
    nb = tmp_path / "nb.ipynb"
    nb.write_text('{"cells": [{"cell_type": "code", "metadata": {"tags": ["recipe"]}, "source": "1"}]}')
    (tmp_path / "theirs.txt").write_text("a user's file\n")
    assert wheel_check.main(["--notebook", str(nb), "--out", str(tmp_path)]) == 1
    assert "holds files this check did not make; give it an empty or new --out" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nb.ipynb", "theirs.txt"]
