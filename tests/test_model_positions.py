"""Positions and trainable priors inside the model: GOAT lanes equal its materialised bias end to end,
every decoder stays causal, position-free models read longer inputs, bad combinations are refused."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from companion.config import ModelConfig, PriorConfig
from companion.model import Transformer, init_weights_
from companion.tasks import TaskSpec

SPEC = TaskSpec(inputs="tokens", output="lm", vocab_size=11, seq_len=12)
BASE = ModelConfig(arch="decoder", d_model=32, n_layers=2, n_heads=2, d_ff=48)
VARIANTS = {
    "learned": BASE,
    "sinusoidal": replace(BASE, positions="sinusoidal"),
    "rope": replace(BASE, positions="rope"),
    "alibi": replace(BASE, positions="none", prior=PriorConfig(kind="alibi")),
    "goat": replace(BASE, positions="none", prior=PriorConfig(kind="goat", goat_rank=3, goat_init="seeded")),
}


def _model(cfg: ModelConfig, seed: int = 0, dtype=torch.float64) -> Transformer:
    g = torch.Generator().manual_seed(seed)
    model = Transformer(cfg, SPEC, generator=g)
    return init_weights_(model, g).to(dtype)


def test_goat_lanes_equal_the_materialised_prior_in_a_whole_model():
    cfg = VARIANTS["goat"]
    fused, eager = _model(cfg), _model(replace(cfg, attn_backend="eager"))
    eager.load_state_dict(fused.state_dict())
    with torch.no_grad():  # a prior that is not flat, so the comparison means something
        for m in (fused, eager):
            for block in m.blocks:
                block.attn.prior.beta.copy_(torch.linspace(-0.5, 0.5, block.attn.prior.beta.numel()).view_as(
                    block.attn.prior.beta))
    x = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(1))
    out_f, out_e = fused(x), eager(x)
    torch.testing.assert_close(out_f, out_e, rtol=1e-10, atol=1e-10)
    out_f.square().sum().backward()
    out_e.square().sum().backward()
    for (name, p), q in zip(fused.named_parameters(), eager.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-8, atol=1e-10, msg=name)
    assert fused.blocks[0].attn.prior.alpha.grad.abs().sum() > 0


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_decoder_is_causal(name):
    model = _model(VARIANTS[name]).eval()
    x = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(2))
    y = x.clone()
    y[:, 7:] = (y[:, 7:] + 1) % 11
    with torch.no_grad():
        torch.testing.assert_close(model(x)[:, :7], model(y)[:, :7], rtol=0, atol=1e-12)
        assert not torch.allclose(model(x)[:, 7:], model(y)[:, 7:])


@pytest.mark.parametrize("name", ["sinusoidal", "rope", "alibi", "goat"])
def test_models_without_learned_positions_read_longer_inputs(name):
    model = _model(VARIANTS[name]).eval()
    x = torch.randint(0, 11, (2, 40), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = model(x)
        assert out.shape == (2, 40, 11) and torch.isfinite(out).all()
        torch.testing.assert_close(out[:, :12], model(x[:, :12]), rtol=0, atol=1e-12)


def test_learned_positions_refuse_longer_inputs_with_the_fix():
    model = _model(BASE)
    with pytest.raises(ValueError, match="use positions 'sinusoidal', 'rope' or 'none'"):
        model(torch.zeros(1, 13, dtype=torch.long))


def test_rope_makes_the_first_layer_scores_depend_on_offsets_only():
    cfg = replace(BASE, positions="rope", n_layers=1)
    attn = _model(cfg).blocks[0].attn
    q = torch.randn(1, 2, 1, 16, dtype=torch.float64)
    k = torch.randn(1, 2, 1, 16, dtype=torch.float64)
    def score(i, j):
        qi, _ = attn.rope(q, q, torch.tensor([i]))
        _, kj = attn.rope(k, k, torch.tensor([j]))
        return (qi * kj).sum()
    torch.testing.assert_close(score(5, 2), score(9, 6))


def test_bad_combinations_are_refused():
    with pytest.raises(ValueError, match="needs positions='learned'"):
        replace(BASE, positions="rope", qk_init="structured-svd")
    with pytest.raises(ValueError, match="lower model.prior.goat_rank"):
        replace(BASE, prior=PriorConfig(kind="goat", goat_rank=8))
    with pytest.raises(ValueError, match="is not one of"):
        replace(BASE, positions="alibi")
