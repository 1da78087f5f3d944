"""GOAT's 2-D prior on a grid of patches (companion.goat2d) and a ViT read at other resolutions
(companion.resolution): the lanes equal the materialised bias, the bias is κ^y(Δy) + κ^x(Δx) in closed form,
a uniform start is plain attention, and what carries to a larger grid carries exactly."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from companion.attention import attend
from companion.config import ModelConfig, PriorConfig
from companion.goat2d import GoatPrior2D, grid_side
from companion.model import build_model
from companion.resolution import at_resolution, canvas_readout, resample_positions, resolution_readout
from companion.tasks.images import ImageTask


def _prior(rank=6, base=16.0, heads=2, d_head=32, seed=0) -> GoatPrior2D:
    p = GoatPrior2D(heads, d_head, rank=rank, base=base).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        p.alpha.copy_(torch.randn(p.alpha.shape, generator=g, dtype=torch.float64))
        p.beta.copy_(torch.randn(p.beta.shape, generator=g, dtype=torch.float64))
    return p


def test_the_bias_is_the_separable_trigonometric_series_in_closed_form():
    p = _prior(rank=5, base=10.0)  # 3 frequencies on the rows, 2 on the columns
    assert (p.rows_rank, p.cols_rank) == (3, 2) and set(dict(p.named_parameters())) == {"alpha", "beta"}
    side, n = 4, 16
    wy = [10.0 ** (-r / 2) for r in range(3)]
    wx = [10.0 ** (-r / 1) for r in range(2)]
    a, b = p.alpha.detach(), p.beta.detach()
    expected = torch.zeros(2, n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(n):
            dy, dx = i // side - j // side, i % side - j % side
            for h in range(2):
                ky = sum(a[h, r] * math.cos(w * dy) + b[h, r] * math.sin(w * dy) for r, w in enumerate(wy))
                kx = sum(a[h, 3 + r] * math.cos(w * dx) + b[h, 3 + r] * math.sin(w * dx) for r, w in enumerate(wx))
                expected[h, i, j] = ky + kx
    torch.testing.assert_close(p.bias(n), expected, rtol=0, atol=1e-12)
    # translation invariant: the bias is the offsets map read at each pair's (Δy, Δx)
    off = p.offsets(side)
    assert off.shape == (2, 7, 7)
    for i, j in ((0, 15), (5, 6), (12, 3)):
        torch.testing.assert_close(expected[:, i, j], off[:, i // side - j // side + 3, i % side - j % side + 3])


@pytest.mark.parametrize("n", [16, 64])
def test_the_sdpa_lanes_equal_attention_with_the_materialised_bias(n):
    p = _prior()
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(3, 2, n, 32, generator=g, dtype=torch.float64) for _ in range(3))
    qc, kc = p.content(q, k)
    reference = attend(qc, kc, v, bias=p.bias(n), backend="eager")
    torch.testing.assert_close(p.sdpa(q, k, v), reference, rtol=0, atol=1e-12)
    torch.testing.assert_close(p.attend(q, k, v, causal=False), reference, rtol=0, atol=1e-12)


def test_a_uniform_start_is_plain_attention_and_gradients_reach_the_prior():
    p = GoatPrior2D(2, 32, rank=6, init="uniform").double()
    assert bool((p.bias(16) == 0).all())
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 2, 16, 32, generator=g, dtype=torch.float64) for _ in range(3))
    qc, kc = p.content(q, k)
    torch.testing.assert_close(p.sdpa(q, k, v), attend(qc, kc, v, backend="eager"), rtol=0, atol=1e-12)
    p.sdpa(q, k, v).square().sum().backward()
    assert float(p.alpha.grad.abs().sum()) > 0 and float(p.beta.grad.abs().sum()) > 0


def test_what_is_not_a_square_grid_or_a_mean_pooled_vit_is_refused():
    with pytest.raises(ValueError, match="square grid of patches, got 17 tokens"):
        grid_side(17)
    with pytest.raises(ValueError, match="rank >= 2"):
        GoatPrior2D(2, 32, rank=1)
    with pytest.raises(ValueError, match="arch='vit', pool='mean'"):
        ModelConfig(arch="vit", d_model=64, n_heads=2, pool="cls", prior=PriorConfig(kind="goat-2d"))
    with pytest.raises(ValueError, match="arch='vit', pool='mean'"):
        ModelConfig(arch="encoder", d_model=64, n_heads=2, pool="mean", prior=PriorConfig(kind="goat-2d"))
    with pytest.raises(ValueError, match="goat_base must be > 1"):
        PriorConfig(kind="goat-2d", goat_base=1.0)


# ---------------------------------------------------------------- a ViT at another resolution

@pytest.fixture(scope="module")
def digits():
    return ImageTask("digits", patch_size=2)


def _vit(digits, **kw):
    base = ModelConfig(arch="vit", d_model=64, n_layers=1, n_heads=2, d_ff=32, pool="mean", patch_size=2)
    return build_model(replace(base, **kw), digits, generator=torch.Generator().manual_seed(0)).eval()


def test_resampling_a_position_table_keeps_it_at_its_own_size_and_spreads_it_over_a_larger_grid():
    table = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(resample_positions(table, 4), table, rtol=0, atol=1e-6)
    big = resample_positions(table, 8)
    assert big.shape == (64, 8)
    # a table constant along the rows stays constant along them (bicubic along a constant line is that constant)
    rows = torch.arange(4.0).repeat_interleave(4)[:, None].expand(16, 3).contiguous()
    spread = resample_positions(rows, 8).reshape(8, 8, 3)
    assert torch.allclose(spread, spread[:, :1], atol=1e-6)


def test_the_test_images_at_the_training_size_are_the_training_view_and_a_canvas_keeps_them_whole(digits):
    x, y = digits.test_at(8)
    torch.testing.assert_close(x, digits._images("test", torch.arange(len(y))), rtol=0, atol=0)
    big, _ = digits.test_at(16, canvas=True)
    torch.testing.assert_close(big[..., 4:12, 4:12], x, rtol=0, atol=0)
    blank = digits.to_float(torch.zeros(1, 1, 1, 1, dtype=torch.uint8))
    assert bool((big[..., :4, :] == blank).all())
    assert digits.test_at(12)[0].shape == (len(y), 1, 12, 12)
    with pytest.raises(ValueError, match="even number of pixels"):
        digits.test_at(11, canvas=True)


def test_a_model_rebuilt_for_its_own_size_computes_what_it_did(digits):
    x, _ = digits.test_at(8)
    for kw in ({}, {"positions": "sincos-2d"},
               {"positions": "none", "prior": PriorConfig(kind="goat-2d", goat_rank=6, goat_base=16.0)}):
        model = _vit(digits, **kw)
        with torch.no_grad():
            torch.testing.assert_close(at_resolution(model, 8)(x[:32]), model(x[:32]), rtol=0, atol=1e-6)


def test_what_carries_to_a_larger_grid(digits):
    goat = _vit(digits, positions="none", prior=PriorConfig(kind="goat-2d", goat_rank=6, goat_base=16.0,
                                                            goat_init="seeded"))
    big = at_resolution(goat, 16)
    assert big.n_positions == 64 and big.spec.image_shape == (1, 16, 16)
    torch.testing.assert_close(big.blocks[0].attn.prior.alpha, goat.blocks[0].attn.prior.alpha, rtol=0, atol=0)
    learned = _vit(digits)
    torch.testing.assert_close(at_resolution(learned, 16).pos_emb, resample_positions(learned.pos_emb.detach(), 8))
    with pytest.raises(ValueError, match="does not carry"):
        at_resolution(_vit(digits, prior=PriorConfig(kind="mask", variant="local:1")), 16)
    with pytest.raises(ValueError, match="blocks.0.attn.prior.logits hold one entry per position"):
        at_resolution(_vit(digits, prior=PriorConfig(kind="mask", init="zero")), 16)  # no pattern, still a grid's
    with pytest.raises(ValueError, match="not a multiple of the patch size"):
        at_resolution(learned, 15)


def test_the_readouts_score_each_size_from_the_training_one_on(digits):
    model = _vit(digits, positions="sincos-2d")
    out = resolution_readout(model, digits, "12,16")
    assert out["side"] == [8, 12, 16] and all(0.0 <= a <= 1.0 for a in out["acc"])
    x, y = digits.test_at(8)
    with torch.no_grad():
        logits = model(x)
    assert out["acc"][0] == pytest.approx(float((logits.argmax(-1) == y).double().mean()))
    assert out["ce"][0] == pytest.approx(float(F.cross_entropy(logits, y)), rel=1e-5)
    assert canvas_readout(model, digits, "12")["side"] == [8, 12]
    assert np.isfinite(out["ce"]).all()
