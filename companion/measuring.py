"""Measuring a run's readouts: which readouts a run of a task may use, checked before it trains and
measured on the trained model after (`companion.readouts` holds the registry they are entered in).

The generic readouts are registered by core modules, imported here for that: GOAT's prior
(`goat_prior`, `companion.goat`; `goat_grid`, `companion.goat2d`), a ViT at other resolutions
(`resolution`, `companion.resolution`) and attention as transport (`collapse_bounds`, `sink_curve`,
`companion.transport`); a task's own readouts by its task module, loaded with the task registry.
"""

from __future__ import annotations

from typing import Any

import torch

import companion.goat  # noqa: F401  (registers goat_prior)
import companion.goat2d  # noqa: F401  (registers goat_grid)
import companion.resolution  # noqa: F401  (registers resolution)
import companion.transport  # noqa: F401  (registers collapse_bounds and sink_curve)
from companion.identity import core_modules
from companion.readouts import READOUTS, Readout, jsonable, parse_readout
from companion.tasks import TASKS, load_tasks

__all__ = ["check_readouts", "measure_readouts"]


def _registry(task: str | None = None) -> dict[str, Readout]:
    """The readouts a run of `task` may use: those registered by a core module (`companion/*.py`) and
    those its own task's module registers (a run's identity hashes the core and its task's module
    only, so a readout from another task's module would run code the id does not name). Without
    `task`, all of them."""
    if task is None or task not in TASKS:
        load_tasks()  # task modules register their readouts on import
    if task is None:
        return dict(READOUTS)
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid: {', '.join(sorted(TASKS))}.")
    allowed = {f"companion.{m}" for m in core_modules()} | {TASKS[task].__module__}
    return {n: f for n, f in READOUTS.items() if f.__module__ in allowed}


def check_readouts(specs, task: str | None = None) -> None:
    """Raise ValueError naming the first readout a run of `task` cannot use (unknown, or another
    task's) and listing those it can."""
    if not specs:
        return
    known = _registry(task)
    for spec in specs:
        name, _ = parse_readout(spec)
        if name not in known:
            where = f" for task {task!r}" if task else ""
            other = READOUTS.get(name)
            hint = (f" ({name!r} belongs to {other.__module__})" if other is not None else "")
            raise ValueError(f"unknown readout {name!r} in {spec!r}{where}{hint}; registered: "
                             f"{', '.join(sorted(known)) or 'none'}. A readout is registered with "
                             "companion.readouts.register_readout in a core module (generic) or in the task's module.")


def measure_readouts(specs, model: torch.nn.Module, task, task_name: str | None = None) -> dict[str, Any]:
    """{spec: value} of every readout in `specs` on the trained `model` (eval mode, no gradients; the
    model's training mode is restored afterwards); `task_name` limits them to that task's (`check_readouts`)."""
    if not specs:
        return {}
    check_readouts(specs, task_name)
    known = _registry(task_name)
    was_training = model.training
    model.eval()
    out = {}
    try:
        with torch.no_grad():
            for spec in specs:
                name, arg = parse_readout(spec)
                out[spec] = jsonable(known[name](model, task, arg))
    finally:
        model.train(was_training)
    return out
