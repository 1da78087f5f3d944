"""Attention as entropic transport: the optimiser's solution equals softmax (Props 2.2, 3.1); measured
attention respects Theorem 5.1's bounds; internals recomputed from parameters equal the forward pass."""

from __future__ import annotations

from dataclasses import replace

import torch

from companion.config import ModelConfig, PriorConfig
from companion.model import Transformer, init_weights_
from companion.tasks import TaskSpec
from companion.book.transport import attention_internals, collapse_bounds, objective, sink_vs_signal, solve_entropic

G = torch.Generator().manual_seed(0)


def test_uniform_prior_gives_softmax_and_a_prior_shifts_it():
    for tau in (0.3, 1.0, 2.5):
        s = torch.randn(7, 33, generator=G, dtype=torch.float64) * 3
        log_pi = torch.randn(7, 33, generator=G, dtype=torch.float64) * 2
        torch.testing.assert_close(solve_entropic(s, tau=tau), torch.softmax(s / tau, -1), rtol=0, atol=1e-12)
        p = solve_entropic(s, log_pi, tau)
        torch.testing.assert_close(p, torch.softmax(s / tau + log_pi, -1), rtol=0, atol=1e-12)
        # optimal among simplex points: no random point does better
        other = torch.distributions.Dirichlet(torch.ones(33, dtype=torch.float64)).sample((7, 200)).transpose(0, 1)
        assert (objective(other, s, log_pi, tau) >= objective(p, s, log_pi, tau) - 1e-12).all()
        assert not torch.allclose(p, torch.softmax(s / tau, -1), atol=1e-3)  # the prior matters


def _model(cfg):
    g = torch.Generator().manual_seed(1)
    return init_weights_(Transformer(cfg, TaskSpec(inputs="tokens", output="lm", vocab_size=9, seq_len=10),
                                     generator=g), g)


BASE = ModelConfig(arch="decoder", d_model=32, n_layers=2, n_heads=2, d_head=16, d_ff=32, positions="none")


def test_internals_reproduce_the_forward_pass_and_theorem_5_1_holds():
    x = torch.randint(0, 9, (4, 10), generator=G)
    for cfg in (replace(BASE, prior=PriorConfig(kind="goat", goat_rank=3, goat_init="seeded")),
                replace(BASE, prior=PriorConfig(kind="alibi")), replace(BASE, positions="rope")):
        model = _model(cfg)
        for layer in (0, 1):
            d = attention_internals(model, x, layer)
            z = (d["content"] + d["prior"]).masked_fill(~d["visible"], float("-inf"))
            torch.testing.assert_close(torch.softmax(z, -1), d["weights"], rtol=0, atol=1e-12)
            b = collapse_bounds(d)
            assert b["max_violation"] <= 1e-9 and 0 < b["max_tightness"] <= 1 + 1e-9
        assert next(model.parameters()).dtype == torch.float32  # analysis left the model alone


def test_a_wrong_prior_breaks_the_bound():
    model = _model(replace(BASE, prior=PriorConfig(kind="goat", goat_rank=3)))
    with torch.no_grad():
        for block in model.blocks:
            block.attn.prior.sink_bump.fill_(6.0)  # a strong sink on key 0
    d = attention_internals(model, torch.randint(0, 9, (2, 10), generator=G))
    assert collapse_bounds(d)["max_violation"] <= 1e-9
    d["prior"] = torch.zeros_like(d["prior"])  # pretend there was no prior
    assert collapse_bounds(d)["max_violation"] > 1.0


def test_sink_vs_signal_skips_the_first_query():
    model = _model(replace(BASE, prior=PriorConfig(kind="alibi")))
    out = sink_vs_signal(attention_internals(model, torch.randint(0, 9, (3, 10), generator=G)))
    assert out["omega"].shape == out["p0"].shape == (3 * 2 * 9,) and (out["p0"] <= 1).all()
