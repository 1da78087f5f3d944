"""Tasks: the data, loss, metrics and mask patterns of each experiment, behind one `Task` protocol.

A task owns its data (generated offline, with a fixed task-level seed so the split never depends on the
run seed), its loss and its metrics; the model never knows the task and the loop never knows the data.
`TASKS` maps names to classes (filled by `register_task` in each module of this package, imported on
first use by `make_task`); `make_task(TaskConfig)` builds one.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, Iterator, Literal, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from companion.config import TaskConfig

__all__ = ["TaskSpec", "Task", "TASKS", "register_task", "load_tasks", "make_task", "epoch_batches", "model_device", "IGNORE"]

IGNORE = -100  # target value of positions left out of a language-model loss (F.cross_entropy ignore_index)


@dataclass(frozen=True)
class TaskSpec:
    """What the model needs to know about the task's inputs and outputs.

    Attributes:
        inputs: "tokens" (LongTensor (B, seq_len) of ids < vocab_size) or "images" (float (B, C, H, W)).
        output: "regression" (model → (B, n_outputs) floats), "classification" (→ (B, n_outputs)
            logits over classes) or "lm" (→ (B, seq_len, vocab_size) next-token logits).
        vocab_size: number of token ids (tokens only).
        seq_len: input tokens per example, CLS excluded (tokens only; images derive it from patches).
        n_outputs: regression outputs or classes (unused for "lm").
        image_shape: (C, H, W) for images.
    """

    inputs: Literal["tokens", "images"]
    output: Literal["regression", "classification", "lm"]
    vocab_size: int = 0
    seq_len: int = 0
    n_outputs: int = 1
    image_shape: tuple[int, int, int] = (0, 0, 0)


@runtime_checkable
class Task(Protocol):
    """The interface every task implements.

    - `spec`: a `TaskSpec`; `n_train`: training examples (an epoch is ⌈n_train / batch_size⌉ steps).
    - `train_batches(batch_size, generator)`: one epoch of (inputs, targets) in an order drawn from
      `generator` (the run's data-order stream); tensors on the CPU, the loop moves them.
    - `loss(output, target)`: the scalar training loss (MSE for regression, cross-entropy for classes,
      token cross-entropy ignoring `IGNORE` targets for "lm": that is the loss mask over answer tokens).
    - `evaluate(model, *, final)`: {split: {metric: float}}, e.g. {"train": {"mse": …}, "test":
      {"acc": …}}; called in eval mode under `torch.no_grad()`, on the model's device
      (`model_device`). `final` is True for the last evaluation of a run, whose numbers are the
      run's result; intermediate evaluations (curves) may use a fixed subsample to save time.
    - `mask_pattern(variant, *, cls)`: bool (n, n) open pattern over the model's token positions, True =
      open; with `cls` the CLS token is position 0 and n = seq_len + 1. Unknown variants raise ValueError.
    - `probe_inputs()`: a fixed small batch of inputs (drift of attention maps is measured on it).
    - optional `probe_sequences(n)`: for a language-model task whose test inputs are sequences of one
      length, the first n of them, inputs only (the batch `companion.transport` reads attention on);
      `probe_inputs()` is then `probe_sequences(16)`.
    - optional `outputs`: for a language-model task whose loss reads some positions only (every
      other target is `IGNORE`), the slice of those positions, e.g. `slice(-5, None)`; the loop then
      asks the model for those positions only (`Transformer.forward(x, outputs=...)`, whose last
      block computes nothing else) and passes `loss` the matching targets. Absent or None: all.
    """

    spec: TaskSpec
    n_train: int

    def train_batches(self, batch_size: int, generator: torch.Generator) -> Iterator[tuple[Tensor, Tensor]]: ...

    def loss(self, output: Tensor, target: Tensor) -> Tensor: ...

    def evaluate(self, model: nn.Module, *, final: bool = True) -> dict[str, dict[str, float]]: ...

    def mask_pattern(self, variant: str, *, cls: bool) -> Tensor: ...

    def probe_inputs(self) -> Tensor: ...


TASKS: dict[str, Callable[..., Task]] = {}


def register_task(name: str):
    """Class decorator adding a task class to `TASKS` under `name`."""

    def wrap(cls):
        if name in TASKS:
            raise ValueError(f"task {name!r} is already registered.")
        TASKS[name] = cls
        return cls

    return wrap


def load_tasks() -> dict[str, Callable[..., Task]]:
    """Import every module of `companion.tasks` (each registers its tasks); returns `TASKS`."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return TASKS


def make_task(cfg: TaskConfig) -> Task:
    """Build `TASKS[cfg.name](**cfg.kwargs)`; unknown names or parameters raise ValueError."""
    if cfg.name not in TASKS:
        load_tasks()
    if cfg.name not in TASKS:
        raise ValueError(f"unknown task {cfg.name!r}; valid: {', '.join(sorted(TASKS))}.")
    try:
        return TASKS[cfg.name](**cfg.kwargs)
    except TypeError as err:
        raise ValueError(f"task {cfg.name!r} rejected its parameters {cfg.kwargs}: {err}") from None


def epoch_batches(x: Tensor, y: Tensor, batch_size: int, generator: torch.Generator):
    """Yield (x[idx], y[idx]) over one random permutation drawn from `generator`; the last may be short."""
    order = torch.randperm(len(x), generator=generator)
    for start in range(0, len(x), batch_size):
        idx = order[start : start + batch_size]
        yield x[idx], y[idx]


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (CPU for a model without parameters)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


from companion.tasks import toy  # noqa: E402,F401  (registers "toy"; the others load on first use)
