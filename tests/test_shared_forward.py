"""Shared evaluation forwards (`companion.shared_forward`, `train_stacked(shared_eval=...)`).

The property: members evaluated through one stacked forward get the metrics they get evaluated one
by one. On the build the batched contract is stated for (CPU, one thread, torch 2.14: `BITWISE` in
tests/test_batched.py) the stacked forward is each member's forward alone to the last bit, so whole
histories must be equal exactly; elsewhere float reassociation only (rtol 1e-5 on the metrics).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from companion.batched import stack
from companion.experiments import get_experiment
from companion.model import build_model
from companion.runs import stream
from companion.shared_forward import SharedForward
from companion.tasks import make_task
from companion.train import evaluate, train_stacked

BITWISE = torch.__version__.startswith("2.14")
CASES = {
    # Boolean task: several evaluation batches per split, a fixed subsample drawn by the task's own generator
    "boolean-mask": ("gotu-2parity", "mask", ["task.n_bits=8", "task.n_train=64", "task.eval_points=40",
                                              "train.steps=12", "train.eval_every=6", "train.batch_size=16"]),
    # decoder with `outputs` (a keyword slice), teacher-forced digits
    "arith-mask": ("arith-add", "mask", ["task.n_test=64", "task.eval_points=0", "train.steps=12",
                                         "train.eval_every=6", "train.batch_size=16"]),
    # GOAT lanes built per member inside the shared forward (random α, sink MLP, ALiBi slopes)
    "passkey-goat": ("passkey", "goat", ["train.steps=12", "train.eval_every=6", "train.batch_size=16"]),
    "vit-mask": ("vit-digits", "mask", ["task.eval_points=64", "train.steps=12", "train.eval_every=6",
                                        "train.batch_size=16"]),
}


def _setup(case: str, seeds=(0, 1, 2)):
    exp, method, overrides = CASES[case]
    cfgs = [get_experiment(exp).config("ci", method, s, overrides) for s in seeds]
    task = make_task(cfgs[0].task)
    models = [build_model(c.model, task, generator=stream(c.seed, "init")) for c in cfgs]
    return task, cfgs, models


def _histories(case: str, shared: bool):
    task, cfgs, models = _setup(case)
    return train_stacked(models, task, cfgs[0].train, generators=[stream(c.seed, "order") for c in cfgs],
                         shared_eval=shared)


@pytest.mark.parametrize("case", list(CASES))
def test_shared_evaluation_gives_every_member_its_metrics_alone(case):
    apart, shared = _histories(case, False), _histories(case, True)
    for a, b in zip(apart, shared):
        assert a.steps == b.steps and a.train_loss == b.train_loss  # training is untouched
        for split, metrics in a.eval.items():
            for name, values in metrics.items():
                if BITWISE:
                    assert b.eval[split][name] == values, (split, name)
                else:
                    assert b.eval[split][name] == pytest.approx(values, rel=1e-5, abs=1e-7)
    # the members are different runs, so a mixed-up share could not pass the comparison above
    assert shared[0].eval != shared[1].eval


def _trained(case: str):
    task, cfgs, models = _setup(case)
    with torch.no_grad():  # members that differ from their initialisation in a seed-dependent way
        for i, model in enumerate(models):
            for p in model.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(i)))
    net = stack(models)
    return task, net, models


@pytest.mark.parametrize("case", list(CASES))
def test_every_member_call_is_served_from_the_leaders_stacked_forward(case):
    task, net, models = _trained(case)
    alone = [evaluate(m, task, final=True) for m in models]
    share = SharedForward(net, models)
    got = []
    for m, model in enumerate(models):
        with share.serving(m):
            got.append(evaluate(model, task, final=True))
        assert "forward" not in vars(model)  # the model is given back unpatched
    assert share.sharing
    calls = share.shared_calls
    assert calls > 0 and calls % 3 == 0  # each of the leader's calls served all three members
    for a, b in zip(alone, got):
        assert b.keys() == a.keys()
        for split in a:  # {split: {name: value}}: pytest.approx compares one level at a time
            assert b[split] == a[split] if BITWISE else b[split] == pytest.approx(a[split], rel=1e-5, abs=1e-7)
    assert net.training  # the stacked model is back in its mode


class _Greedy(nn.Module):
    """A model-dependent evaluation, as greedy decoding is: the second call's input is the first
    call's output, so the members' second calls differ from the leader's."""

    def __init__(self, task):
        super().__init__()
        self.task = task

    @torch.no_grad()
    def evaluate(self, model, *, final=True):
        x = torch.zeros(4, 3)
        first = model(x)
        second = model(first.detach().round())
        return {"test": {"a": float(first.sum()), "b": float(second.sum())}}


class _Linear(nn.Module):
    def __init__(self, seed):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        with torch.no_grad():
            self.lin.weight.copy_(torch.randn(3, 3, generator=torch.Generator().manual_seed(seed)))
            self.lin.bias.fill_(float(seed))
        self.cfg = None

    def forward(self, x):
        return self.lin(x)


def test_an_evaluation_whose_inputs_depend_on_the_model_falls_back_to_each_member_alone():
    models = [_Linear(s) for s in range(3)]
    net = stack(models)
    fake = _Greedy(None)
    expect = [fake.evaluate(m) for m in models]
    share = SharedForward(net, models)
    got = []
    for m, model in enumerate(models):
        with share.serving(m):
            got.append(fake.evaluate(model))
    assert got == expect
    assert not share.sharing  # the first mismatch stopped sharing for this evaluation
    # the next evaluation starts sharing again with its leader
    with share.serving(0):
        fake.evaluate(models[0])
    assert share.sharing


def test_the_leaders_inputs_are_kept_as_they_were_when_it_called():
    """A caller that writes into its input after the call (a decoder filling in its answer) must not
    change what the members' calls are compared with."""
    models = [_Linear(s) for s in range(2)]
    share = SharedForward(stack(models), models)
    x = torch.zeros(2, 3)
    with share.serving(0):
        out0 = models[0](x)
    x += 1.0  # written in place after the leader's call
    with share.serving(1):
        out1 = models[1](torch.zeros(2, 3))  # member 1 asks for what the leader asked for: served
    assert share.sharing and share.shared_calls == 2
    assert torch.equal(out0, models[0].lin(torch.zeros(2, 3)))
    assert torch.equal(out1, models[1].lin(torch.zeros(2, 3)))


def test_a_stacked_model_and_models_of_another_count_are_refused():
    models = [_Linear(s) for s in range(3)]
    with pytest.raises(ValueError, match="3 members but 2 models"):
        SharedForward(stack(models), models[:2])


def test_records_say_when_a_groups_evaluation_was_shared():
    from companion.runs import execution_note
    from companion.train import shares_evaluation

    assert shares_evaluation("cuda") and shares_evaluation("cuda:1") and not shares_evaluation("cpu")
    assert execution_note([0, 1, 2], "cuda")["evaluation"] == "shared"
    assert "evaluation" not in execution_note([0, 1, 2], "cpu")  # the CPU default evaluates member by member
    assert "evaluation" not in execution_note([0], "cuda")  # a run alone has nothing to share
