"""Copy-mixture: the sampler follows the stated process and the Bayes-optimal predictor is exact."""

from __future__ import annotations

import math

import pytest
import torch

from companion.tasks.copy_mixture import CopyMixtureTask, bayes_log_probs, sample_copy_mixture


def test_sampler_frequencies_match_the_process():
    x = sample_copy_mixture(20000, 12, 50, 0.3, 0.4, 2, torch.Generator().manual_seed(0))
    t = 7
    same0 = (x[:, t] == x[:, 0]).double().mean()
    local = (x[:, t] == x[:, t - 2]).double().mean()
    # P(x_t = x_0) = 0.3 + 0.4·P(x_{t−2} = x_0) + 0.3/V, and symmetric statements; check loosely
    assert abs(float(same0) - float((x[:, 5] == x[:, 0]).double().mean())) < 0.02
    assert float(local) > 0.4 and float(same0) > 0.3
    assert (x[:, 1] == x[:, 0]).double().mean() == pytest.approx(0.3 + 0.7 / 50, abs=0.01)  # t < lag: no local copy


def test_bayes_probabilities_are_a_distribution_and_match_brute_force():
    vocab, pg, pl, lag = 5, 0.3, 0.4, 2
    x = sample_copy_mixture(64, 9, vocab, pg, pl, lag, torch.Generator().manual_seed(1))
    for t in range(1, 9):
        total = torch.zeros(64, dtype=torch.float64)
        for v in range(vocab):
            y = x.clone()
            y[:, t] = v
            total += bayes_log_probs(y, vocab, pg, pl, lag)[:, t - 1].exp()
            if v == 0:
                brute = pg * (x[:, 0] == v) + (pl * (x[:, t - lag] == v) if t >= lag else 0) \
                    + (1 - pg - (pl if t >= lag else 0)) / vocab
                torch.testing.assert_close(bayes_log_probs(y, vocab, pg, pl, lag)[:, t - 1].exp(), brute.double())
        torch.testing.assert_close(total, torch.ones(64, dtype=torch.float64))


def test_task_reports_bayes_and_uniform_baselines():
    task = CopyMixtureTask(n_train=64, n_test=256)
    assert task.spec.seq_len == 63 and 0 < task.bayes_ce() < task.uniform_ce == pytest.approx(math.log(32))
    p = task.mask_pattern("default", cls=False)
    assert p[:, 0].all() and p[10, 9] and not p.triu(1).any()
    with pytest.raises(ValueError, match="lag must be in"):
        CopyMixtureTask(lag=0)
