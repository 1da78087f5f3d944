"""`companion.book.chapters.budget`: one vocabulary for every chapter's budget table, read from the config."""

from __future__ import annotations

import pytest

from companion.book.chapters.budget import ROWS, budget
from companion.experiments import get_experiment


def test_the_rows_are_read_from_the_config_in_the_order_asked():
    cfg = get_experiment("arith-add").configs("ci")["default"]
    b = budget(cfg, ("Updates", "Model width", "Learning rate"))
    assert list(b) == ["Updates", "Model width", "Learning rate"]
    assert b == {"Updates": cfg.train.steps, "Model width": cfg.model.d_model, "Learning rate": cfg.train.lr}
    assert list(budget(cfg)) == list(ROWS) and budget(cfg)["Heads"] == cfg.model.n_heads


def test_a_budget_in_epochs_says_so_and_an_unknown_row_is_named():
    cfg = get_experiment("gotu-2parity").configs("paper")["default"]
    updates = budget(cfg, ("Updates",))["Updates"]
    assert updates == (cfg.train.steps or f"{cfg.train.epochs} epochs")
    with pytest.raises(ValueError, match=r"unknown budget rows \['steps'\]; the rows are \['Architecture'"):
        budget(cfg, ("steps",))
