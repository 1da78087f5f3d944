"""Checks a command makes on its runs before any of them starts: that their device is on this machine
and that their task can be built with its parameters (data found, values in range).

Without them a bad `--set task.n_train=-5`, `--set task.name=nosuch` or `--set device=cuda` on a machine
without a GPU was found by every worker as it started, one failed run at a time; with them it is one line
and exit 2 before anything trains (`companion.cli`).
"""

from __future__ import annotations

from typing import Iterable

import torch

from companion.config import RunConfig, TaskConfig

__all__ = ["check_device", "check_runs"]


def _devices_here() -> list[str]:
    have = ["cpu"]
    if torch.cuda.is_available():
        have += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        have.append("mps")
    return have


def check_device(name: str) -> str:
    """`name` if this machine has that device, else ValueError naming the devices it has."""
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"{name!r} is not a device; use cpu, cuda, cuda:N or mps") from None
    have = _devices_here()
    if dev.type == "cpu" and dev.index in (None, 0):
        return name
    if dev.type == "cuda" and torch.cuda.is_available() and (dev.index is None or dev.index < torch.cuda.device_count()):
        return name
    if dev.type == "mps" and "mps" in have:
        return name
    raise ValueError(f"device {name!r} is not on this machine (it has {', '.join(have)}); run there, or use one "
                     "of these")


def _check_task(task: TaskConfig) -> None:
    from companion.tasks import make_task  # builds the data: the one way to know the parameters hold
    try:
        make_task(task)
    except (ValueError, OSError, KeyError) as err:
        message = str(err).strip("'\"")
        raise ValueError(message if message.startswith(("task", "unknown task")) else
                         f"task {task.name!r} with {task.kwargs} cannot be built: {message}") from None


def check_runs(cfgs: Iterable[RunConfig], *, here: bool = True) -> None:
    """ValueError (one sentence) unless every config's task builds and, when they train `here` (not on a
    cluster's nodes), its device is on this machine. Each distinct device and task is checked once."""
    cfgs = list(cfgs)
    for name in dict.fromkeys(c.device for c in cfgs) if here else ():
        check_device(name)
    for task in dict.fromkeys(c.task for c in cfgs):
        _check_task(task)
