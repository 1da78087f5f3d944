"""A golden run: one tiny training run of each `smoke` method must reproduce its stored loss curve and
final metrics on the CPU. A change that moves training numerics (the model, an initialiser, the
optimiser, the data order) fails here first, and is then either a bug or a deliberate change whose
new numbers are regenerated with `python tests/test_golden.py` and committed with the reason.

Tolerance: float32 on one thread reproduces to the last bit on one build; 1e-4 relative leaves room
for another CPU's vector width, never for a real change (one Adam step moves the loss by ≥ 1e-2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from companion.experiments import get_experiment
from companion.runs import run

GOLDEN = Path(__file__).parent / "golden" / "smoke.json"
OVERRIDES = ("train.steps=40", "train.eval_every=20")
METHODS = ("default", "mask")


def _run(method: str) -> dict:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        record = run(get_experiment("smoke").config("ci", method, 0, OVERRIDES))
    finally:
        torch.set_num_threads(before)
    return {"train_loss": record.curves["train_loss"], "steps": record.curves["steps"],
            "eval": record.curves["eval"], "metrics": record.metrics}


@pytest.mark.parametrize("method", METHODS)
def test_tiny_run_reproduces_its_golden_curve_and_metrics(method):
    golden = json.loads(GOLDEN.read_text())[method]
    got = _run(method)
    assert got["steps"] == golden["steps"]
    assert got["train_loss"] == pytest.approx(golden["train_loss"], rel=1e-4, abs=1e-6)
    for split, metrics in golden["metrics"].items():
        for name, value in metrics.items():
            assert got["metrics"][split][name] == pytest.approx(value, rel=1e-4, abs=1e-6), (split, name)


def test_the_golden_runs_differ_where_the_prior_matters():
    """The mask fits y = x0·x1 within 40 updates and the default does not: the golden pair is a
    contrast, so a change that made every method the same would not pass unnoticed."""
    golden = json.loads(GOLDEN.read_text())
    assert golden["mask"]["metrics"]["test"]["acc"] == 1.0
    assert golden["default"]["metrics"]["test"]["acc"] < 0.75


if __name__ == "__main__":  # regenerate (only for a deliberate change of training numerics)
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps({m: _run(m) for m in METHODS}, indent=1) + "\n")
    print(f"wrote {GOLDEN}")
