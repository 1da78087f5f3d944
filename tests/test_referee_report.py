"""Chapter 6's helpers: overrides, selection and drift curves."""

import numpy as np
import pandas as pd
import pytest

from companion.experiments import get_experiment
from companion.book.ch06_referees import by_seed, drift_curve, final_drift, mask_overrides, select


def test_correct_mask_at_ten_is_exactly_chapter_3s_mask_run():
    exp = get_experiment("gotu-2parity")
    shared = exp.config("ci", "mask", 3, mask_overrides("support", 10.0))
    assert shared == exp.config("ci", "mask", 3)  # same config, so the same stored run
    moved = exp.config("ci", "mask", 3, mask_overrides("pair:0-2", 2.0))
    assert (moved.model.prior.variant, moved.model.prior.open_value, moved.model.prior.closed_value) == ("pair:0-2", 2.0, -2.0)


def test_select_and_by_seed():
    frame = pd.DataFrame({"task": ["maj3"] * 4, "placement": ["correct", "correct", "no mask", "correct"],
                          "contrast": [10.0, 10.0, 0.0, 1.0], "seed": [0, 1, 0, 0], "cube.acc": [1.0, 0.9, 0.8, 0.7]})
    assert len(select(frame, "maj3", "correct", 10.0)) == 2
    assert by_seed(frame, "maj3", "correct", 10.0) == {0: 1.0, 1: 0.9}


class _Rec:
    def __init__(self, drift):
        self.drift = drift


def test_drift_curve_averages_layers_and_heads():
    rec = _Rec({"steps": [0, 5, 10], "mask": {"0": [[0.0], [1.0], [2.0]], "1": [[0.0], [3.0], [4.0]]},
                "attention": {"0": [[0.0, 0.0], [1.0, 3.0], [2.0, 2.0]]}, "qk": {}})
    steps, vals = drift_curve(rec, "mask")
    assert steps.tolist() == [0, 5, 10] and vals.tolist() == [0.0, 2.0, 3.0]
    assert final_drift(rec, "attention") == pytest.approx(2.0)
    assert np.isnan(final_drift(rec, "qk"))


def test_mask_init_norm_matches_the_mask_module():
    import torch

    from companion.priors import LearnableMask
    from companion.book.ch06_referees import mask_init_norm

    pattern = torch.eye(5, dtype=torch.bool)
    pattern[0, 1] = True
    for c in (1.0, 10.0):
        bias = LearnableMask.from_pattern(pattern, open_value=c, closed_value=-c)(5).double()
        assert mask_init_norm(pattern, c) == pytest.approx(float(bias.detach().norm()), rel=1e-6)
