"""S3-21's check (GOAT's Theorem 1, companion.book.chapters.bochner): the lanes compute GOAT's κ, the three residuals
against closed forms, and the null: priors outside the trigonometric form fail the rule where they must, and pass
it where any matrix of that many lanes would."""

from __future__ import annotations

import math

import pytest
import torch

from companion.book.chapters import bochner
from companion.book.claims import load_ledger
from companion.goat import GoatPrior


def _random_prior(rank: int = 3, seed: int = 0) -> GoatPrior:
    g = torch.Generator().manual_seed(seed)
    prior = GoatPrior(2, 2 * rank + 3, train_len=32, rank=rank).double()
    with torch.no_grad():
        for p in prior.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
    return prior


def test_the_lanes_compute_goats_relative_prior():
    prior = _random_prior()
    n = 40
    lanes = bochner.lane_relative(prior, n)
    with torch.no_grad():
        kappa = prior.relative(n)
    assert lanes.shape == (2, n, n)
    assert torch.allclose(lanes, kappa, rtol=0, atol=1e-12 * float(kappa.abs().max()))


def test_residuals_against_closed_forms():
    # rank: singular values 3, 2, 1 → the best rank-1 matrix misses √(4 + 1) of √14
    m = torch.diag(torch.tensor([3.0, 2.0, 1.0], dtype=torch.float64))
    assert bochner.rank_residual(m, 1) == pytest.approx(math.sqrt(5 / 14), rel=1e-12)
    assert bochner.rank_residual(m, 3) == 0.0
    # Toeplitz: a function of i − j has no gap; adding a key-only term j² breaks it
    idx = torch.arange(8, dtype=torch.float64)
    toe = torch.cos(0.3 * (idx[:, None] - idx[None]))
    assert bochner.toeplitz_gap(toe[None]) == 0.0
    assert bochner.toeplitz_gap((toe + idx[None] ** 2)[None]) > 0.1
    # span: a series at GOAT's own frequencies lies in it; one at a frequency between them does not
    omega = 1e4 ** (-torch.arange(3, dtype=torch.float64) / 2)  # R = 3: 1, 1e-2, 1e-4
    inside = 2 * torch.cos(omega[0] * (idx[:, None] - idx[None])) - torch.sin(omega[1] * (idx[:, None] - idx[None]))
    outside = torch.cos(2.5 * (idx[:, None] - idx[None]))
    assert bochner.span_residual(inside[None], 3) < 1e-12
    assert bochner.span_residual(outside[None], 3) > 0.1


def test_goats_term_meets_the_rule_and_the_priors_outside_it_do_not():
    goat, outside = bochner.goat_checks(ranks=(2, 4), lengths=(16, 64), draws=2), bochner.outside_checks((16, 64))
    threshold = float(load_ledger()["S3-21"].rule["threshold"])
    assert bochner.measure(goat) <= threshold
    bounded = outside[outside.bounded & (outside.L == 64)]
    assert (bounded["rank residual"] > 100 * threshold).all() and (bounded["span residual"] > 0.01).all()
    # the ledger's null is what the chapter measures there
    assert bochner.null_measure(outside) == pytest.approx(float(load_ledger()["S3-21"].null), abs=5e-4)
    # ALiBi's slope is unbounded and rank 2: two lanes carry it exactly, which the theorem's boundedness excludes
    alibi = outside[~outside.bounded]
    assert (alibi["rank"] == 2).all() and (alibi["rank residual"] < 1e-12).all()


def test_the_check_can_pass_a_prior_outside_the_form_when_the_lanes_suffice():
    """The rule is not one no prior could pass: with as many lanes as positions any matrix is carried exactly, so
    the band's residual is then rounding, and the band fails only because 12 lanes are fewer than its rank."""
    idx = torch.arange(16)
    band = bochner.OUTSIDE["local band (mask paper, ±10, width 2)"][0](idx[:, None] - idx[None])
    assert bochner.rank_residual(band[None], 16) < 1e-12
    assert bochner.rank_residual(band[None], 12) > 0.01


def test_the_numbers_the_chapter_glues():
    goat, outside = bochner.goat_checks(ranks=(2,), lengths=(16, 64, 256), draws=1), bochner.outside_checks()
    numbers = bochner.numbers(goat, outside)
    assert numbers["ch7_bochner_alibi_rank"] == "2" and numbers["ch7_bochner_lanes"] == "12"
    assert numbers["ch7_bochner_band_rank"] == "256"
    assert numbers["ch7_bochner_goat"] == "< 1e-13" and numbers["ch7_bochner_alibi_rank_residual"] == "< 1e-13"
    table = bochner.table(goat, outside)
    assert len(table) == len(goat) + len(outside)
