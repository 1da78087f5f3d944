"""Drift of masks, query-key forms and attention maps."""

import numpy as np
import pytest
import torch
from dataclasses import replace

from companion import drift
from companion.priors import LearnableMask
from companion.config import PriorConfig, TrainConfig
from companion.experiments import get_experiment
from companion.drift import DriftTracker
from companion.model import build_model
from companion.tasks import make_task
from companion.train import train


CFG = get_experiment("smoke").configs("ci")["mask"]


def tracked(prior: PriorConfig, steps=40, every=0):
    task = make_task(CFG.task)
    model = build_model(replace(CFG.model, prior=prior), task, generator=torch.Generator().manual_seed(0))
    tracker = DriftTracker(task.probe_inputs(), every=every)
    train(model, task, TrainConfig(lr=3e-3, batch_size=16, steps=steps, eval_every=10),
          generator=torch.Generator().manual_seed(1), callbacks=[tracker])
    return tracker.result()


def test_trainable_mask_drift_zero_at_start_positive_after():
    r = tracked(PriorConfig(kind="mask", per_head=True))
    assert r["steps"] == [0, 10, 20, 30, 40]
    for kind in ("mask", "qk", "attention"):
        assert set(r[kind]) == {"0", "1"}
        for per_step in r[kind].values():
            assert per_step[0] == [0.0, 0.0]           # step 0, two heads
            assert all(d > 0 for d in per_step[-1])    # moved after training
    # log σ(M) of an open (+10) entry barely moves, so the change is small but positive
    assert 0 < max(r["mask"]["0"][-1]) < 5


def test_fixed_mask_drift_stays_exactly_zero():
    r = tracked(PriorConfig(kind="mask", trainable=False))
    assert all(d == [0.0] for per_step in r["mask"].values() for d in per_step)
    assert r["qk"]["0"][-1][0] > 0 and r["attention"]["0"][-1][0] > 0


def test_no_prior_has_no_mask_drift_but_qk_and_attention():
    r = tracked(PriorConfig(), every=20)
    assert r["mask"] == {} and r["steps"] == [0, 20, 40]
    assert len(r["qk"]["1"]) == 3 and r["qk"]["1"][-1][0] > 0


def test_drift_formulas_by_hand():
    task = make_task(CFG.task)
    model = build_model(CFG.model, task, generator=torch.Generator().manual_seed(0))
    tracker = DriftTracker(task.probe_inputs())
    tracker(0, model)
    with torch.no_grad():
        model.blocks[0].attn.prior.logits[0, 0, 0] = 0.0          # log σ: −4.54e-5 → −log 2
        model.blocks[1].attn.q_proj.weight.mul_(2.0)              # A → 2A: relative change exactly 1
    tracker(1, model)
    r = tracker.result()
    expected = abs(torch.nn.functional.logsigmoid(torch.tensor(0.0)) - torch.nn.functional.logsigmoid(torch.tensor(10.0)))
    assert r["mask"]["0"][1][0] == pytest.approx(float(expected), rel=1e-5)
    assert r["mask"]["1"][1] == [0.0]
    assert r["qk"]["1"][1] == pytest.approx([1.0, 1.0], rel=1e-5) and r["qk"]["0"][1] == [0.0, 0.0]


def test_a_decoder_run_keeps_no_attention_maps_an_encoder_run_does():
    from companion.drift import keeps_maps
    from companion.experiments import get_experiment
    from companion.runs import run

    tiny = ["train.steps=2", "train.eval_every=1"]
    enc = run(get_experiment("smoke").config("ci", "mask", 0, tiny))
    assert keeps_maps(enc.config.model) and len(enc.drift["maps"]["init"]) == enc.config.model.n_layers
    cfg = get_experiment("copymix").config("ci", "rope", 0, tiny + ["model.n_layers=1", "readouts="])
    dec = run(cfg)
    assert not keeps_maps(cfg.model) and dec.drift["maps"] == {}
    assert dec.drift["attention"] and len(dec.drift["steps"]) == 3  # the drift itself is still measured


def test_a_recorded_curve_averages_layers_and_heads():
    rec = {"steps": [0, 5, 10], "mask": {"0": [[0.0], [1.0], [2.0]], "1": [[0.0], [3.0], [4.0]]},
           "attention": {"0": [[0.0, 0.0], [1.0, 3.0], [2.0, 2.0]]}, "qk": {}}
    steps, vals = drift.curve(rec, "mask")
    assert steps.tolist() == [0, 5, 10] and vals.tolist() == [0.0, 2.0, 3.0]
    assert drift.final(rec, "attention") == pytest.approx(2.0)
    assert np.isnan(drift.final(rec, "qk"))


def test_mask_scale_is_the_norm_of_the_initial_mask_bias():
    pattern = torch.eye(5, dtype=torch.bool)
    pattern[0, 1] = True
    for c in (1.0, 10.0):
        bias = LearnableMask.from_pattern(pattern, open_value=c, closed_value=-c)(5).double()
        assert drift.mask_scale(pattern, c) == pytest.approx(float(bias.detach().norm()), rel=1e-6)
