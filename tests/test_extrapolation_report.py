"""Chapter 9's readers: position interpolation as a reversible switch, and every reading listed."""

from __future__ import annotations

import pytest
import torch

from companion.config import ModelConfig
from companion.book.ch09_extrapolation import interpolated, readings, sink_profiles
from companion.experiments.copy_mixture import prior_model
from companion.model import Transformer
from companion.positions import RotaryEmbedding
from companion.tasks import TaskSpec

SPEC = TaskSpec(inputs="tokens", output="lm", vocab_size=11, seq_len=8)
BASE = ModelConfig(arch="decoder", d_model=16, n_layers=2, n_heads=2, d_head=8, d_ff=32)


def _model(method):
    return Transformer(prior_model(BASE, method, rank=2), SPEC, generator=torch.Generator().manual_seed(0)).eval()


def test_interpolation_changes_long_inputs_only_and_is_undone():
    model = _model("rope")
    short, long = torch.randint(0, 11, (2, 8)), torch.randint(0, 11, (2, 24))
    with torch.no_grad():
        before_short, before_long = model(short), model(long)
        with interpolated(model, 8):
            assert all(m.interpolate == 8 for m in model.modules() if isinstance(m, RotaryEmbedding))
            torch.testing.assert_close(model(short), before_short)
            assert not torch.allclose(model(long), before_long)
        torch.testing.assert_close(model(long), before_long)
    with pytest.raises(ValueError, match="no rotary embedding"):
        with interpolated(_model("alibi"), 8):
            pass


def test_rope_is_read_twice_and_everything_else_once():
    class Rec:
        def __init__(self, seed):
            self.seed = seed

    runs = {"goat": [Rec(0), Rec(1)], "rope": [Rec(0)]}
    models = {"goat": ["g0", "g1"], "rope": ["r0"]}
    got = [(r, s, m, pi) for r, s, m, pi in readings(runs, models)]
    assert got == [("goat", 0, "g0", False), ("goat", 1, "g1", False), ("rope", 0, "r0", False),
                   ("rope-pi", 0, "r0", True)]


def test_sink_profiles_are_the_priors_own_u():
    model = _model("goat")
    prof = sink_profiles(model, 20)
    assert prof.shape == (2, 2, 20)
    prior = model.blocks[1].attn.prior
    torch.testing.assert_close(torch.from_numpy(prof[1]), prior.sink(torch.arange(20)).double().detach())
    with pytest.raises(ValueError, match="no GOAT prior"):
        sink_profiles(_model("rope"), 4)
