"""Named grids: every grid plans valid configs at both profiles, a grid's cells share runs with their
experiment, and `ensure_grid` and `companion sweep GRID` run each distinct run once."""

from __future__ import annotations

import pytest

from companion.cli import main
from companion.experiments import GRIDS, Grid, Request, get_grid, load_experiments, register_grid
from companion.identity import run_id
from companion.store import RunStore
from companion.sweep import ensure_grid, plan, plan_grid

load_experiments()
TINY = ("train.steps=4", "train.eval_every=2")
# A grid over the smoke experiment: two cells share the mask run, one changes its learning rate.
TEST_GRID = "test-smoke-grid"
if TEST_GRID not in GRIDS:
    register_grid(Grid(TEST_GRID, "smoke cells for the tests", lambda profile: {
        ("mask", "base"): Request("smoke", ("mask",), TINY),
        ("both", "base"): Request("smoke", None, TINY),
        ("mask", "lr"): Request("smoke", ("mask",), (*TINY, "train.lr=1e-2")),
    }))


@pytest.mark.parametrize("name", sorted(n for n in GRIDS if n != TEST_GRID))
@pytest.mark.parametrize("profile", ["ci", "paper"])
def test_every_grid_plans_valid_configs(name, profile):
    cfgs = plan_grid(name, profile, [0, 1])
    assert cfgs and all(c.profile == profile for c in cfgs)
    assert len({run_id(c) for c in cfgs}) >= len(get_grid(name).cells(profile))


def test_referee_grid_shares_the_chapter_3_runs():
    """The correct mask at ±10, the all-zero mask and the default are Chapter 3's very runs."""
    cells = get_grid("referee").cells("ci")
    ids = {key: {run_id(c) for c in plan(r.experiment, "ci", [0], r.methods, r.overrides)} for key, r in cells.items()}
    gotu = {run_id(c) for c in plan("gotu-2parity", "ci", [0])}
    assert ids[("2parity", "correct", 10.0)] <= gotu
    assert ids[("2parity", "all-zero", 0.0)] <= gotu and ids[("2parity", "no mask", 0.0)] <= gotu
    assert not ids[("2parity", "correct", 2.0)] & gotu  # another contrast is another run


def test_arithmetic_grid_has_the_longer_budget_as_its_own_cell():
    cells = get_grid("arithmetic").cells("ci")
    base = plan(*cells[("add", 0.004, "base")][:1], "ci", [0], ["default"])[0]
    [long] = plan(cells[("add", 0.004, "long")].experiment, "ci", [0], ["default"], cells[("add", 0.004, "long")].overrides)
    assert long.train.steps == 2 * base.train.steps and run_id(long) != run_id(base)


def test_ensure_grid_runs_each_distinct_run_once_and_returns_every_cell(tmp_path):
    store = RunStore(tmp_path)
    out = ensure_grid(TEST_GRID, "ci", [0], store=store, jobs=1)
    assert list(out) == [("mask", "base"), ("both", "base"), ("mask", "lr")]
    assert [r.config.method for r in out[("both", "base")]] == ["default", "mask"]
    assert out[("mask", "base")][0] == out[("both", "base")][1]  # the same run, read twice
    assert out[("mask", "lr")][0].config.train.lr == 1e-2
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_cli_sweeps_and_lists_a_grid(tmp_path, capsys):
    assert main(["sweep", TEST_GRID, "--seeds", "0", "--jobs", "1", "--store", str(tmp_path)]) == 0
    assert "3 runs, 3 run now" in capsys.readouterr().out
    assert main(["sweep", TEST_GRID, "--seeds", "0", "--jobs", "1", "--store", str(tmp_path)]) == 0
    assert "3 runs, 0 run now, 3 already stored" in capsys.readouterr().out
    assert main(["list", "--seeds", "0", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{TEST_GRID}: smoke cells for the tests" in out and "stored 3/3, missing 0" in out
    assert "referee: Chapter 6" in out and "reading rope-pi" in out


def test_cli_rejects_methods_for_a_grid(tmp_path, capsys):
    assert main(["sweep", TEST_GRID, "--methods", "mask", "--store", str(tmp_path)]) == 2
    assert "is a grid" in capsys.readouterr().err
