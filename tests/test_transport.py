"""Attention as transport measured on a trained model (companion.transport): internals recomputed
through the prior protocol equal the forward pass for every kind of prior; measured attention respects
Theorem 5.1's bounds; the readouts `collapse_bounds` and `sink_curve` (and GOAT's `goat_prior`) equal
what the chapters computed from the model before, and reject what they cannot read."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch

from companion.config import ModelConfig, PriorConfig, TaskConfig
from companion.model import Transformer, init_weights_
from companion.measuring import check_readouts, measure_readouts
from companion.tasks import TaskSpec, make_task
from companion.transport import (BINS, PROBE, attention_internals, collapse_bounds, matched_bins, probe_batch,
                                 sink_vs_signal)

G = torch.Generator().manual_seed(0)
SPEC = TaskSpec(inputs="tokens", output="lm", vocab_size=9, seq_len=10)


def _model(cfg, spec=SPEC):
    g = torch.Generator().manual_seed(1)
    return init_weights_(Transformer(cfg, spec, generator=g), g)


BASE = ModelConfig(arch="decoder", d_model=32, n_layers=2, n_heads=2, d_head=16, d_ff=32, positions="none")
GOAT = replace(BASE, prior=PriorConfig(kind="goat", goat_rank=3, goat_init="seeded"))
ALIBI = replace(BASE, prior=PriorConfig(kind="alibi"))
ROPE = replace(BASE, positions="rope")


def _check_internals(model, x):
    for layer in range(len(model.blocks)):
        d = attention_internals(model, x, layer)
        z = (d["content"] + d["prior"]).masked_fill(~d["visible"], float("-inf"))
        torch.testing.assert_close(torch.softmax(z, -1), d["weights"], rtol=0, atol=1e-12)
        b = collapse_bounds(d)
        assert b["max_violation"] <= 1e-9 and 0 < b["max_tightness"] <= 1 + 1e-9
    assert next(model.parameters()).dtype == torch.float32  # analysis left the model alone


def test_internals_reproduce_the_forward_pass_and_theorem_5_1_holds():
    x = torch.randint(0, 9, (4, 10), generator=G)
    for cfg in (GOAT, ALIBI, ROPE, replace(GOAT, qk_norm=True), replace(ROPE, qk_norm=True)):
        _check_internals(_model(cfg), x)


def test_internals_of_an_encoder_with_cls_and_a_mask_prior_cover_every_position():
    spec = TaskSpec(inputs="tokens", output="regression", vocab_size=9, seq_len=10, n_outputs=1)
    pattern = torch.rand(11, 11, generator=G) < 0.5
    pattern |= torch.eye(11, dtype=torch.bool)
    cfg = replace(BASE, arch="encoder", pool="cls", positions="learned", prior=PriorConfig(kind="mask", init="pattern"))
    g = torch.Generator().manual_seed(1)
    model = init_weights_(Transformer(cfg, spec, pattern=pattern, generator=g), g)
    x = torch.randint(0, 9, (3, 10), generator=G)
    _check_internals(model, x)
    d = attention_internals(model, x)
    assert d["content"].shape == (3, 2, 11, 11) and bool(d["visible"].all())  # CLS included, nothing hidden
    torch.testing.assert_close(d["prior"], model.blocks[0].attn.prior.bias(11).double().expand(2, 11, 11))


def test_content_is_the_scaled_dot_product_of_the_content_channels_and_no_prior_is_zero():
    x = torch.randint(0, 9, (2, 10), generator=G)
    for cfg, width in ((GOAT, 16 - 7), (replace(BASE, positions="learned"), 16)):
        model = _model(cfg).double()
        d = attention_internals(model, x, 1)
        attn = model.blocks[1].attn
        with torch.no_grad():
            q, k, _ = attn.project(model.blocks[1].ln1(model.blocks[0](model.embed(x))))
        torch.testing.assert_close(d["content"], q[..., :width] @ k[..., :width].transpose(-1, -2) / math.sqrt(width),
                                   rtol=0, atol=1e-12)
    assert not d["prior"].any()  # the model without a prior has a zero log-prior


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
    model = _model(ALIBI)
    out = sink_vs_signal(attention_internals(model, torch.randint(0, 9, (3, 10), generator=G)))
    assert out["omega"].shape == out["p0"].shape == (3 * 2 * 9,) and (out["p0"] <= 1).all()


@pytest.mark.parametrize("layer", [0, 1])
def test_attention_internals_needs_no_prior_type(layer):
    """The recomputation reads only the protocol: a prior class unknown to the book still works."""
    from companion.priors import Prior

    class Local(Prior):
        def bias(self, i, j=None):
            j = i if j is None else j
            return -0.5 * (torch.arange(i)[:, None] - torch.arange(j)[None]).abs().float()[None]

        def content(self, q, k):
            return q[..., :5], k[..., :5]

    model = _model(BASE)
    for block in model.blocks:
        block.attn.prior = Local()
    x = torch.randint(0, 9, (2, 10), generator=G)
    d = attention_internals(model, x, layer)
    z = (d["content"] + d["prior"]).masked_fill(~d["visible"], float("-inf"))
    torch.testing.assert_close(torch.softmax(z, -1), d["weights"], rtol=0, atol=1e-12)
    assert d["prior"][0, 3, 1] == -1.0


# ---------------------------------------------------------------- the readouts

TASK = TaskConfig.of("copy-mixture", vocab=9, seq_len=13, n_train=8, n_test=20)


def _task_model(cfg):
    task = make_task(TASK)
    g = torch.Generator().manual_seed(1)
    return task, init_weights_(Transformer(cfg, task.spec, generator=g), g)


def test_probe_batch_is_the_first_test_inputs_of_copy_mixture_and_char_lm(monkeypatch):
    task = make_task(TASK)
    x = probe_batch(task, 5)
    assert torch.equal(x, task.sequences["test"][:5, :-1]) and x.shape == (5, 12)
    assert len(probe_batch(task)) == min(PROBE, 20)
    from companion.tasks.text import CharCorpusTask

    text = CharCorpusTask.__new__(CharCorpusTask)  # the batch needs only `windows` and `seq_len`
    text.seq_len = 4
    monkeypatch.setattr(CharCorpusTask, "windows", lambda self, length: torch.arange(50).reshape(10, 5)[:, : length + 1])
    assert torch.equal(probe_batch(text, 3), torch.arange(50).reshape(10, 5)[:3, :4])
    from companion.tasks.passkey import BOS, PasskeyTask

    passkey = PasskeyTask(seq_len=16, digits=2, n_train=4, n_test=8, loss="all")
    x = probe_batch(passkey, 3)  # the training length's first test sequences, BOS at key 0
    assert torch.equal(x, passkey.test_set(16)[0][:3, :-1]) and (x[:, 0] == BOS).all()
    with pytest.raises(ValueError, match="copy-mixture, char-lm or passkey task, not TaskSpec"):
        probe_batch(SPEC)


def _old_theorem_row(model, x, layer):
    """What Chapter 7's `theorem` computed per model before the readout (its body, verbatim)."""
    d = attention_internals(model, x, layer)
    z = (d["content"] + d["prior"]).masked_fill(~d["visible"], float("-inf"))
    b = collapse_bounds(d)
    return {"recomputed_vs_forward": float((torch.softmax(z, -1) - d["weights"]).abs().max()), **b}


def _old_sink(model, x, bins, layer=-1):
    """What Chapter 7's `sink_curve`, `sink_heads` and `pooled_shed` computed per model before the readout."""
    d = sink_vs_signal(attention_internals(model, x, layer % len(model.blocks)), flat=False)
    om, p = matched_bins(d["omega"].mean(1), d["p0"].mean(1), bins)
    share = d["p0"].mean((0, 2))
    h = int(share.argmax())
    _, ph = matched_bins(d["omega"][:, h], d["p0"][:, h], bins)
    flat = sink_vs_signal(attention_internals(model, x, layer % len(model.blocks)))
    omega, p0 = flat["omega"], flat["p0"]
    edges = np.quantile(omega, np.linspace(0, 1, bins + 1))
    idx = np.clip(np.searchsorted(edges, omega, side="right") - 1, 0, bins - 1)
    with warnings.catch_warnings():  # an empty bin: the old measure's NaN, with numpy's warning
        warnings.simplefilter("ignore", RuntimeWarning)
        pooled = float(p0[idx == 0].mean() - p0[idx == bins - 1].mean())
    return om, p, h, float(share[h]), ph, pooled


@pytest.mark.parametrize("cfg", [GOAT, ALIBI, ROPE])
def test_readouts_equal_what_the_chapter_computed_from_the_model(cfg):
    task, model = _task_model(cfg)
    x = task.sequences["test"][:PROBE, :-1]
    out = measure_readouts(("collapse_bounds", "sink_curve", "collapse_bounds:1", "sink_curve:0"), model, task)
    assert out["collapse_bounds"] == _old_theorem_row(model, x, 0)
    assert out["collapse_bounds:1"] == _old_theorem_row(model, x, 1)
    assert out["collapse_bounds"]["checked"] == 20 * 2 * (12 * 13 // 2)  # batch × heads × visible (i, j ≤ i)
    finite = []
    for spec, layer in (("sink_curve", 1), ("sink_curve:0", 0)):
        s = out[spec]
        om, p, h, mean_p0, ph, pooled = _old_sink(model, x, BINS, layer)
        assert s["omega"] == om.tolist() and s["p0"] == p.tolist() and len(s["p0"]) == BINS
        assert int(np.argmax(s["head_mean_p0"])) == h and s["head_mean_p0"][h] == mean_p0
        assert s["head_p0"][h] == ph.tolist()
        # a record stores NaN as None (JSON): ties of ω in an untrained model can leave a pooled bin empty
        assert s["pooled_drop"] == pooled or (s["pooled_drop"] is None and math.isnan(pooled))
        finite.append(s["pooled_drop"] is not None)
        assert np.array(s["head_omega"]).shape == (2, BINS)
    assert any(finite)  # the comparison is not only of NaNs


def test_readouts_reject_what_they_cannot_read():
    task, model = _task_model(ALIBI)
    with pytest.raises(ValueError, match="layer 2 does not exist in a model of 2 layers"):
        measure_readouts(("collapse_bounds:2",), model, task)
    with pytest.raises(ValueError, match="takes a layer index"):
        measure_readouts(("sink_curve:last",), model, task)
    with pytest.raises(ValueError, match="needs a GOAT prior in layer 0, not ALiBi"):
        measure_readouts(("goat_prior",), model, task)
    with pytest.raises(ValueError, match="copy-mixture, char-lm or passkey task"):
        measure_readouts(("sink_curve",), model, SPEC)
    check_readouts(("collapse_bounds", "sink_curve:-1", "goat_prior:0"))  # registered by name


def test_goat_prior_readout_is_u_and_kappa_of_the_layer_in_the_model_precision():
    task, model = _task_model(GOAT)
    out = measure_readouts(("goat_prior", "goat_prior:-1"), model, task)
    prior = model.blocks[1].attn.scores_prior
    pos = torch.arange(model.n_positions)
    assert out["goat_prior:-1"]["sink"] == prior.sink(pos).double().tolist()
    assert out["goat_prior:-1"]["kappa"] == prior.kappa(pos).double().tolist() and out["goat_prior"]["causal"] is True
    assert out["goat_prior"]["sink"] == model.blocks[0].attn.scores_prior.sink(pos).double().tolist()


def test_the_copymix_and_charlm_runs_list_the_readouts_chapters_7_and_8_read():
    from companion.experiments import get_experiment

    for profile in ("ci", "paper"):
        cfgs = get_experiment("copymix").configs(profile)
        assert cfgs["goat"].readouts == ("collapse_bounds", "sink_curve", "goat_prior")
        assert cfgs["rope"].readouts == cfgs["alibi"].readouts == ("collapse_bounds", "sink_curve")
        charlm = get_experiment("charlm").configs(profile)
        assert all("sink_curve" in charlm[m].readouts for m in ("goat", "rope", "alibi"))
