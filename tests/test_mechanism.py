"""Theorem 1 / Corollary 1 closed forms against autograd and finite differences (float64)."""

import math

import pytest
import torch

from companion.book.ch02_mechanism import (
    autograd_jacobian, central_difference, contrast_sweep, dp_dk, dp_dm, dp_dq, mask_probs, norm_sweep,
)


@pytest.mark.parametrize("seed", range(5))
def test_theorem1_matches_autograd_and_finite_differences(seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(6, generator=g, dtype=torch.float64)
    m = 4 * torch.randn(6, generator=g, dtype=torch.float64)
    closed = dp_dm(a, m)
    fn = lambda x: mask_probs(a, x)  # noqa: E731
    torch.testing.assert_close(closed, autograd_jacobian(fn, m), rtol=0, atol=1e-14)
    torch.testing.assert_close(closed, central_difference(fn, m), rtol=0, atol=1e-8)


def test_qk_derivatives_match_autograd():
    g = torch.Generator().manual_seed(7)
    q = torch.randn(5, generator=g, dtype=torch.float64)
    k = torch.randn(4, 5, generator=g, dtype=torch.float64)
    torch.testing.assert_close(dp_dq(q, k), autograd_jacobian(lambda x: torch.softmax(k @ x / math.sqrt(5), -1), q))
    torch.testing.assert_close(dp_dk(q, k), autograd_jacobian(lambda x: torch.softmax(x @ q / math.sqrt(5), -1), k))


def test_corollary1_bound_and_its_tightness():
    # Two equal dominant scores give p_i = p_j = 1/2, where |p_i p_j| = 1/4 attains the bound.
    a = torch.tensor([50.0, 50.0, 0.0], dtype=torch.float64)
    m = torch.zeros(3, dtype=torch.float64)
    ratio = dp_dm(a, m).abs() / (torch.sigmoid(-m) / 4)
    assert ratio.max().item() == pytest.approx(1.0, abs=1e-12)
    g = torch.Generator().manual_seed(0)
    for _ in range(100):
        a, m = 5 * torch.randn(5, generator=g, dtype=torch.float64), 3 * torch.randn(5, generator=g, dtype=torch.float64)
        assert (dp_dm(a, m).abs() <= torch.sigmoid(-m) / 4 + 1e-15).all()


def test_sweeps_show_saturation_and_growth():
    sat = contrast_sweep([1.0, 10.0], a=torch.zeros(4, dtype=torch.float64), open_=torch.tensor([True, False, False, False]))
    assert sat["grad_open"][1] < 1e-4 < sat["grad_open"][0]
    assert sat["sigma_open"][1] == pytest.approx(1 / (1 + math.exp(10)))
    sweep = norm_sweep([0.1, 3.0], n=8, d=16, draws=10, m=0.0, generator=torch.Generator().manual_seed(0))
    assert sweep["key"][1] > 10 * sweep["key"][0]
    assert max(sweep["mask"]) <= sweep["bound_mask"][0]
