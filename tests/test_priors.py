"""LearnableMask and the sinusoidal encoding: values, gradients, equivalences."""

import math

import pytest
import torch

from companion import LearnableMask, attend, sinusoidal_positions


def _qkv(n=5, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 3, n, d, generator=g) for _ in range(3)]


def test_open_and_closed_values_at_plus_minus_ten():
    pattern = torch.eye(4, dtype=torch.bool)
    bias = LearnableMask.from_pattern(pattern)(4)[0].double()
    # log σ(10) = −log(1 + e^−10); log σ(−10) = −10 − log(1 + e^−10)
    assert bias[0, 0].item() == pytest.approx(-math.log1p(math.exp(-10)), rel=1e-5)
    assert bias[0, 1].item() == pytest.approx(-10 - math.log1p(math.exp(-10)), rel=1e-6)
    assert bias[0, 0].item() == pytest.approx(-4.54e-5, rel=1e-2)


def test_fixed_mask_has_no_gradient_and_is_a_buffer():
    m = LearnableMask.from_pattern(torch.eye(4, dtype=torch.bool), trainable=False)
    assert list(m.parameters()) == []
    assert "logits" in dict(m.named_buffers())
    assert not m(4).requires_grad


def test_trainable_mask_gradient_is_logsigmoid_derivative():
    m = LearnableMask(torch.tensor([[0.5, -2.0], [3.0, 0.0]]))
    m(2).sum().backward()
    torch.testing.assert_close(m.logits.grad[0], torch.sigmoid(-m.logits.detach()[0]))


def test_zero_mask_equals_no_mask_in_forward():
    q, k, v = _qkv()
    zero = LearnableMask.zeros(5, heads=3)
    torch.testing.assert_close(attend(q, k, v, bias=zero(5)), attend(q, k, v), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(zero(5), torch.full((3, 5, 5), -math.log(2.0)))


def test_mask_of_minus_inf_above_diagonal_equals_causal_attention():
    q, k, v = _qkv()
    bias = torch.zeros(5, 5).masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), -math.inf)
    torch.testing.assert_close(attend(q, k, v, bias=bias), attend(q, k, v, causal=True))


def test_per_head_and_shared_shapes_and_slicing():
    pattern = torch.ones(6, 6, dtype=torch.bool).tril()
    shared = LearnableMask.from_pattern(pattern)
    per_head = LearnableMask.from_pattern(pattern, heads=4)
    assert shared(6).shape == (1, 6, 6) and per_head(6).shape == (4, 6, 6)
    assert per_head(3, 5).shape == (4, 3, 5)
    torch.testing.assert_close(per_head(3), per_head(6)[:, :3, :3])
    # per-head copies are independent parameters
    per_head(6)[1].sum().backward()
    assert per_head.logits.grad[0].abs().sum() == 0 and per_head.logits.grad[1].abs().sum() > 0


def test_mask_errors():
    with pytest.raises(ValueError, match="covers 4 positions"):
        LearnableMask.zeros(4)(5)
    with pytest.raises(ValueError, match="bool"):
        LearnableMask.from_pattern(torch.eye(3))
    with pytest.raises(ValueError, match="finite"):
        LearnableMask(torch.tensor([[0.0, -math.inf], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="expected"):
        LearnableMask(torch.zeros(2, 3))


def test_sinusoidal_values_width_two_and_formula():
    pe = sinusoidal_positions(2, 2, dtype=torch.float64)
    torch.testing.assert_close(pe, torch.tensor([[0.0, 1.0], [math.sin(1), math.cos(1)]], dtype=torch.float64))
    pe = sinusoidal_positions(7, 6, dtype=torch.float64)
    p, r = 5, 2
    assert pe[p, 2 * r].item() == pytest.approx(math.sin(p / 10000 ** (2 * r / 6)))
    assert pe[p, 2 * r + 1].item() == pytest.approx(math.cos(p / 10000 ** (2 * r / 6)))
    with pytest.raises(ValueError, match="even"):
        sinusoidal_positions(3, 5)


# ---------------------------------------------------------------- position interpolation (`interpolated`)

def _positional(method):
    from companion.config import ModelConfig
    from companion.experiments.copy_mixture import prior_model
    from companion.model import Transformer
    from companion.tasks import TaskSpec

    base = ModelConfig(arch="decoder", d_model=16, n_layers=2, n_heads=2, d_head=8, d_ff=32)
    spec = TaskSpec(inputs="tokens", output="lm", vocab_size=11, seq_len=8)
    return Transformer(prior_model(base, method, rank=2), spec, generator=torch.Generator().manual_seed(0)).eval()


def _interpolating(model):
    from companion.priors import Prior

    return [m for m in model.modules() if isinstance(m, Prior) and m.interpolates]


def test_interpolation_changes_long_inputs_only_and_is_undone():
    from companion.priors import interpolated

    model = _positional("rope")
    assert len(_interpolating(model)) == 2  # one RoPE per layer, found through the protocol
    short, long = torch.randint(0, 11, (2, 8)), torch.randint(0, 11, (2, 24))
    with torch.no_grad():
        before_short, before_long = model(short), model(long)
        with interpolated(model, 8) as m:
            assert m is model and all(p.interpolate == 8 for p in _interpolating(model))
            torch.testing.assert_close(model(short), before_short)
            assert not torch.allclose(model(long), before_long)
        assert all(p.interpolate == 0 for p in _interpolating(model))
        torch.testing.assert_close(model(long), before_long)
    for method in ("alibi", "goat", "sinusoidal"):
        with pytest.raises(ValueError, match="no prior that interpolates"):
            with interpolated(_positional(method), 8):
                pass


def test_interpolation_is_undone_when_the_block_raises():
    from companion.priors import interpolated

    model = _positional("rope")
    with pytest.raises(RuntimeError):
        with interpolated(model, 8):
            raise RuntimeError
    assert all(p.interpolate == 0 for p in _interpolating(model))
