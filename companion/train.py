"""One plain training loop: `train(model, task, cfg, generator=...) -> History`.

Adam or AdamW, constant / cosine / one-cycle schedule with warm-up, grad-norm clipping, evaluation at
step 0, every `eval_every` steps and at the end, where callbacks `cb(step, model, metrics)` run.
Weight decay skips priors, biases and norms, chosen by parameter name (see `companion.model`).
`train_stacked` runs the same loop over M seed-stacked models (`companion.batched`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import torch
from torch import nn
from tqdm import tqdm  # the console bar: chapters run quietly, so no notebook widget is needed

from companion.batched import clip_grad_norm_members_, stack, unstack_into
from companion.config import TrainConfig
from companion.shared_forward import SharedForward
from companion.tasks import Task, model_device

__all__ = ["History", "train", "train_stacked", "shares_evaluation", "param_groups", "total_steps", "lr_factor", "lr_curve", "prior_lr_sum",
           "adam_step_bound", "evaluate"]

Callback = Callable[[int, nn.Module, dict], None]


@dataclass(frozen=True)
class History:
    """What a training run returns; plain lists and dicts, JSON-able via `to_dict`.

    Attributes:
        steps: the steps at which the model was evaluated (0 … total).
        eval: {split: {metric: [value at each of `steps`]}}.
        train_loss: the training loss of every update, index s − 1 for step s.
        lr: the learning rate of every update.
        wall_time: seconds spent in `train`.
    """

    steps: list[int] = field(default_factory=list)
    eval: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    wall_time: float = 0.0

    def final(self) -> dict[str, dict[str, float]]:
        """{split: {metric: value at the last evaluation}}."""
        return {s: {m: v[-1] for m, v in ms.items()} for s, ms in self.eval.items()}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "History":
        return cls(**data)


def _decays(name: str) -> bool:
    """Weight decay applies unless the name is a prior, a bias or a norm (a part starting with 'ln' or
    ending in '_norm')."""
    parts = name.split(".")
    return not ("prior" in parts or parts[-1] == "bias" or any(p.startswith("ln") or p.endswith("_norm") for p in parts))


def _is_prior(name: str) -> bool:
    return "prior" in name.split(".")


def param_groups(model: nn.Module, weight_decay: float, prior_lr: float = 0.0) -> list[dict]:
    """Optimizer groups by name: decayed weights, and priors/biases/norms with no decay; with
    `prior_lr` > 0 the priors leave the second group for a third of their own at that learning rate."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    own = prior_lr > 0
    groups = [
        {"params": [p for n, p in named if _decays(n)], "weight_decay": weight_decay},
        {"params": [p for n, p in named if not _decays(n) and not (own and _is_prior(n))], "weight_decay": 0.0},
    ]
    if own:
        groups.append({"params": [p for n, p in named if _is_prior(n)], "weight_decay": 0.0, "lr": prior_lr})
    return groups


def total_steps(task: Task, cfg: TrainConfig) -> int:
    """`cfg.steps`, or epochs · ⌈n_train / batch_size⌉."""
    return cfg.steps or cfg.epochs * math.ceil(task.n_train / cfg.batch_size)


def lr_factor(cfg: TrainConfig, step: int, total: int) -> float:
    """Multiplier of `cfg.lr` for update `step` (0-based) of `total` (constant and cosine)."""
    warm = int(cfg.warmup * total)
    if step < warm:
        return (step + 1) / warm
    if cfg.schedule == "cosine":
        t = (step - warm) / max(1, total - warm)
        return 0.5 * (1 + math.cos(math.pi * t))
    return 1.0


def _schedule(opt: torch.optim.Optimizer, cfg: TrainConfig, total: int):
    if cfg.schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=[g["lr"] for g in opt.param_groups], total_steps=total,
                                                   pct_start=cfg.warmup or 0.3)
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(cfg, s, total))


def lr_curve(cfg: TrainConfig, total: int) -> list[float]:
    """The learning rate of each of `total` updates under `cfg` (what `History.lr` holds), rebuilt by
    stepping the run's optimizer and schedule on one parameter: records do not store it."""
    p = nn.Parameter(torch.zeros(1))
    opt = (torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam)([p], lr=cfg.lr, betas=cfg.betas)
    sched, out = _schedule(opt, cfg, total), []
    for _ in range(total):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def _optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """Adam or AdamW as `cfg` says, torch's single-tensor implementation. (Its fused CPU kernel is 7×
    faster on the `ci` models' small tensors but rounds an element by where it falls in the tensor, its
    vector body or its scalar tail, so a stacked member's update differs from its update alone in the
    last bit: measured on tests/test_batched.py's per-head zero mask, 9e-10 after 20 updates.)"""
    cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    return cls(param_groups(model, cfg.weight_decay, cfg.prior_lr), lr=cfg.lr, betas=cfg.betas)


def prior_lr_sum(cfg: TrainConfig, total: int) -> float:
    """Σ_t of the learning rate the attention prior trains at over `total` updates (`prior_lr`, or `lr`,
    under the schedule): Adam moves a parameter by about one learning rate per update (at most
    (1 − β₁)/√(1 − β₂) of it, Kingma & Ba 2015 §2.1), so no entry of a mask can move much further."""
    scale = (cfg.prior_lr or cfg.lr) / cfg.lr
    return scale * math.fsum(lr_curve(cfg, total))


ONECYCLE_BASE_MOMENTUM = 0.85  # torch's OneCycleLR cycles Adam's β₁ between this and 0.95 (cycle_momentum)


def adam_step_bound(cfg: TrainConfig) -> float:
    """(1 − β₁)/√(1 − β₂): the most one Adam update can move a parameter, in learning rates, when
    (1 − β₁) > √(1 − β₂) (3.16 at the default betas); otherwise 1 (Kingma & Ba 2015 §2.1). Under the
    onecycle schedule β₁ is not `cfg.betas[0]`: OneCycleLR cycles it down to 0.85 at the peak learning rate,
    so the bound takes that smallest β₁ (1.06 at β₂ = 0.98, where the configured 0.9 would give 1)."""
    b1, b2 = cfg.betas
    if cfg.schedule == "onecycle":
        b1 = ONECYCLE_BASE_MOMENTUM
    return max(1.0, (1 - b1) / math.sqrt(1 - b2))


@torch.no_grad()
def evaluate(model: nn.Module, task: Task, *, final: bool = True) -> dict[str, dict[str, float]]:
    """`task.evaluate(model, final=final)` in eval mode; restores the previous mode."""
    was_training = model.training
    model.eval()
    try:
        return task.evaluate(model, final=final)
    finally:
        model.train(was_training)


def _batches(task: Task, batch_size: int, generator: torch.Generator):
    while True:  # epochs, each in a fresh order from the data-order generator
        empty = True
        for batch in task.train_batches(batch_size, generator):
            empty = False
            yield batch
        if empty:
            raise ValueError("the task yielded no training batches; check its n_train and data.")


def train(model: nn.Module, task: Task, cfg: TrainConfig, *, generator: torch.Generator,
          callbacks: Iterable[Callback] = (), progress: bool = False) -> History:
    """Train `model` on `task`; the only randomness is the batch order drawn from `generator`.

    Each update: loss = task.loss(model(x), y); backward; clip ‖∇‖₂ ≤ clip_norm (if > 0); optimizer
    step; schedule step. A task whose loss reads only some positions (`Task.outputs`, a slice) gets
    the model's outputs at those positions and their targets, `task.loss(model(x, outputs=s), y[:, s])`:
    the same loss, since every other target is ignored. At step 0, every `eval_every` steps and at the end: metrics =
    `task.evaluate(model)` (eval mode, no grad) and each callback(step, model, metrics).

    Args:
        model: the model, already on its device.
        task: a `companion.tasks.Task`.
        cfg: optimisation settings.
        generator: CPU generator for the data order.
        callbacks: called after each evaluation (e.g. `companion.drift.DriftTracker`).
        progress: show a tqdm bar (command line); quiet otherwise.

    Returns:
        The `History` of the run.
    """
    return _train(model, [model], task, cfg, [generator], [list(callbacks)], progress)[0]


def shares_evaluation(device) -> bool:
    """Whether `train_stacked` evaluates its members from one stacked forward by default on `device`
    (`shared_eval=None`): on CUDA only (see `train_stacked`)."""
    return torch.device(device).type == "cuda"


def train_stacked(models: Sequence[nn.Module], task: Task, cfg: TrainConfig, *,
                  generators: Sequence[torch.Generator], callbacks: Sequence[Iterable[Callback]] | None = None,
                  progress: bool = False, shared_eval: bool | None = None) -> list[History]:
    """Train M models of one config together, each as if by `train` alone (`companion.batched`).

    Member m draws its batches from `generators[m]`, and its loss, gradient, optimiser state and
    clipping are its own (the updates equal its updates alone up to float reassociation). At each
    evaluation the trained member is copied into `models[m]`, which the unchanged `evaluate` and
    `callbacks[m]` then see; at the end every `models[m]` holds its trained weights. Each History
    gets its own losses and an equal share of the wall time.

    `shared_eval`: serve the members' evaluation forwards from one stacked forward
    (`companion.shared_forward`; the same metrics, to the last bit on the CPU). None (default): on
    CUDA only, where M small evaluation forwards are launch-bound. On the CPU the stacked forward
    at M times the evaluation's batch leaves the cache and is slower than M forwards alone (GOTU
    `ci`, 5 seeds: 0.83× and 0.87× the groups' rate, default and mask, records equal to the last
    bit; `benchmarks/results/sweep_throughput-cpu-eval.json`), so it stays off there.
    """
    models = list(models)
    if len(generators) != len(models):
        raise ValueError(f"{len(models)} models but {len(generators)} data-order generators; give one each.")
    cbs = [list(c) for c in callbacks] if callbacks is not None else [[] for _ in models]
    if len(cbs) != len(models):
        raise ValueError(f"{len(models)} models but {len(cbs)} callback lists; give one each.")
    net = stack(models)
    if shared_eval is None:
        shared_eval = shares_evaluation(model_device(net))
    return _train(net, models, task, cfg, list(generators), cbs, progress, shared_eval)


def _train(net: nn.Module, models: list[nn.Module], task: Task, cfg: TrainConfig,
           generators: list[torch.Generator], callbacks: list[list[Callback]], progress: bool,
           shared_eval: bool = False, stop_after: int | None = None) -> list[History]:
    """The one loop. `net` is what trains: `models[0]` itself (alone), or the stack of `models`
    (`net.members` = M), whose batch is the members' batches one after another and whose loss is the
    sum of theirs. Losses stay on the device until the end (no host synchronisation per step).

    `stop_after` (a replay, `companion.replay`): stop after that many updates, with no evaluations;
    the schedule is still the whole run's, so those updates are the run's first ones."""
    start = time.perf_counter()
    members = getattr(net, "members", 0)
    device, total = model_device(net), total_steps(task, cfg)
    opt = _optimizer(net, cfg)
    sched = _schedule(opt, cfg, total)
    steps: list[int] = []
    evals: list[dict] = [{} for _ in models]
    losses, lrs = [], []

    share = SharedForward(net, models) if members and shared_eval else None

    def checkpoint(step: int) -> None:
        steps.append(step)
        for m, model in enumerate(models):
            if model is not net:
                unstack_into(net, m, model)
            with share.serving(m) if share else contextlib.nullcontext():
                metrics = evaluate(model, task, final=step == total)
            for split, ms in metrics.items():
                for name, value in ms.items():
                    evals[m].setdefault(split, {}).setdefault(name, []).append(float(value))
            with torch.no_grad():
                for cb in callbacks[m]:
                    cb(step, model, metrics)

    if stop_after is not None and not 0 < stop_after <= total:
        raise ValueError(f"stop_after={stop_after} updates, but the run has {total}; replay 1 to {total}.")
    net.train()
    if stop_after is None:
        checkpoint(0)
    batches = [_batches(task, cfg.batch_size, g) for g in generators]
    outputs = getattr(task, "outputs", None)  # a decoder task's loss positions (`Task.outputs`)
    for step in tqdm(range(1, total + 1), disable=not progress, desc="train", leave=False):
        parts = [next(b) for b in batches]
        if members:
            if len({len(x) for x, _ in parts}) != 1:
                raise ValueError("stacked members drew batches of different sizes; they must share task and batch size.")
            x, y = torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])
        else:
            x, y = parts[0]
        if outputs is not None:
            y = y[:, outputs]  # the targets of the positions the loss reads (the rest are ignored)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        out = net(x) if outputs is None else net(x, outputs=outputs)
        if members:
            loss = torch.stack([task.loss(o, t) for o, t in zip(out.chunk(members), y.chunk(members))])
            objective = loss.sum()  # d objective / d loss_m = 1: each member gets its own gradient
        else:
            loss = objective = task.loss(out, y)
        opt.zero_grad(set_to_none=True)
        objective.backward()
        if cfg.clip_norm > 0:
            if members:
                clip_grad_norm_members_(list(net.parameters()), cfg.clip_norm, members)
            else:
                nn.utils.clip_grad_norm_(net.parameters(), cfg.clip_norm)
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        losses.append(loss.detach())
        if step == stop_after:
            break
        if step == total or (cfg.eval_every and step % cfg.eval_every == 0):
            checkpoint(step)
    per_member = torch.stack(losses).reshape(len(losses), -1).T.tolist() if losses else [[] for _ in models]
    wall = (time.perf_counter() - start) / len(models)
    return [History(list(steps), evals[m], per_member[m], list(lrs), wall) for m in range(len(models))]
