"""The training loop: determinism, learning, schedules, weight-decay groups, History."""

import json
import math

import pytest
import torch

from companion.config import TrainConfig
from companion.experiments import get_experiment
from companion.model import build_model
from companion.tasks import make_task
from companion.train import History, lr_curve, lr_factor, param_groups, total_steps, train


CFG = get_experiment("smoke").configs("ci")["mask"]


def fit(train_cfg=CFG.train, seed=0, callbacks=()):
    task = make_task(CFG.task)
    model = build_model(CFG.model, task, generator=torch.Generator().manual_seed(seed))
    hist = train(model, task, train_cfg, generator=torch.Generator().manual_seed(seed + 100), callbacks=callbacks)
    return model, hist


def test_same_seed_same_history_and_weights_bitwise():
    cfg = TrainConfig(lr=3e-3, batch_size=16, steps=40, eval_every=10, clip_norm=1.0, schedule="cosine", warmup=0.1)
    (m1, h1), (m2, h2) = fit(cfg), fit(cfg)
    assert h1.train_loss == h2.train_loss and h1.eval == h2.eval and h1.steps == h2.steps
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    _, h3 = fit(cfg, seed=1)
    assert h3.train_loss != h1.train_loss


def test_train_loss_decreases_on_toy_task():
    _, h = fit()
    first, last = sum(h.train_loss[:10]) / 10, sum(h.train_loss[-10:]) / 10
    assert last < 0.05 * first
    assert h.eval["test"]["acc"][-1] == 1.0 and h.eval["test"]["mse"][-1] < 0.05
    assert h.steps == [0, 50, 100, 150] and len(h.train_loss) == 150


def test_history_is_json_serialisable_and_round_trips():
    _, h = fit(TrainConfig(steps=5, batch_size=16))
    data = json.loads(json.dumps(h.to_dict()))
    assert History.from_dict(data) == h
    assert h.final()["train"]["mse"] == h.eval["train"]["mse"][-1]


def test_epochs_count_steps_and_callbacks_see_each_evaluation():
    seen = []
    cfg = TrainConfig(steps=0, epochs=2, batch_size=16, eval_every=4)
    _, h = fit(cfg, callbacks=[lambda step, model, metrics: seen.append((step, metrics["test"]["mse"]))])
    assert total_steps(make_task(CFG.task), cfg) == 6  # 2 · ⌈48 / 16⌉
    assert h.steps == [0, 4, 6] and [s for s, _ in seen] == [0, 4, 6]
    assert seen[-1][1] == h.eval["test"]["mse"][-1]


def test_schedules():
    cos = TrainConfig(lr=1.0, steps=100, schedule="cosine", warmup=0.1)
    assert lr_factor(cos, 0, 100) == pytest.approx(0.1) and lr_factor(cos, 9, 100) == pytest.approx(1.0)
    assert lr_factor(cos, 10, 100) == pytest.approx(1.0) and lr_factor(cos, 55, 100) == pytest.approx(0.5)
    assert lr_factor(TrainConfig(steps=10), 7, 10) == 1.0
    _, h = fit(TrainConfig(lr=1e-2, steps=20, batch_size=16, schedule="onecycle", warmup=0.25))
    peak = max(range(20), key=lambda i: h.lr[i])
    assert h.lr[peak] == pytest.approx(1e-2) and peak == 4 and h.lr[0] == pytest.approx(1e-2 / 25)
    _, h = fit(TrainConfig(lr=1e-2, steps=20, batch_size=16, schedule="cosine"))
    assert h.lr[0] == 1e-2 and h.lr[-1] < 1e-4 + 1e-2 * (1 - math.cos(math.pi / 20))


@pytest.mark.parametrize("cfg", [
    TrainConfig(lr=1e-2, steps=20, batch_size=16, schedule="onecycle", warmup=0.25, optimizer="adamw"),
    TrainConfig(lr=3e-3, steps=20, batch_size=16, schedule="cosine", warmup=0.1),
    TrainConfig(lr=1e-3, steps=20, batch_size=16),
])
def test_lr_curve_rebuilds_the_learning_rate_of_every_update(cfg):
    """Records keep no learning-rate curve; `lr_curve` must give exactly what the run used."""
    _, h = fit(cfg)
    assert lr_curve(cfg, 20) == h.lr and len(set(h.lr)) > (1 if cfg.schedule != "constant" else 0)


def test_weight_decay_skips_priors_biases_norms_by_name():
    task = make_task(CFG.task)
    model = build_model(CFG.model, task, generator=torch.Generator())
    decay, no_decay = param_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    dn = {names[id(p)] for p in decay["params"]}
    nn_ = {names[id(p)] for p in no_decay["params"]}
    assert "blocks.0.attn.prior.logits" in nn_ and "blocks.0.ln1.weight" in nn_ and "ln_f.weight" in nn_
    assert "blocks.1.ff.fc1.bias" in nn_ and "blocks.0.attn.q_proj.weight" in dn and "head.weight" in dn
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert len(dn) + len(nn_) == len(list(model.parameters()))
