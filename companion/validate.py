"""What a record must hold to be read: its numbers checked against each other and against its config.

A checksum (`companion.store.record_checksum`) catches a record edited or damaged after it was written;
this catches one that was written wrong, or edited and given a fresh checksum: a number that is not a
finite real, a split missing from the metrics or the curves, a curve shorter than its run, a seed
that is not its config's. The store runs `record_problem` on every record it reads and on every record
it is asked to save, so a chapter never reads such numbers and a run whose result cannot be trusted
(a loss that went to NaN) is reported as failed, never stored.

The rules, each a consequence of how `companion.train` makes a record:
- `metrics` is {split: {metric: value}}, neither level empty, every value a finite real (not a bool),
  and its splits are those its task evaluates (`EVAL_SPLITS`, for the tasks the package defines);
- `curves["eval"]` has the same splits and metrics, each curve one value per entry of `curves["steps"]`,
  whose last value is the metric (a record's metrics are its last evaluation);
- `curves["steps"]` is strictly increasing integers ≥ 0, the last one the number of updates, which is
  `len(curves["train_loss"])` and, when the config fixes it (`train.steps` > 0), `train.steps`;
- `seed` is the config's seed, and one of the seeds `execution` says the run trained with;
- `wall_time` is a finite number ≥ 0; `drift` a dict or null; `readouts` a dict;
- no number anywhere in the record (metrics, curves, drift, readouts, or any other field) is NaN or
  infinite (a record of a run whose loss diverged is a failed run, not a result).

What this does not catch is a record edited consistently (a metric and its curve's last value changed
together) and given a fresh checksum: `record_checksum` is public, so a checksum proves that a file is
what some writer wrote, not that a run made it. The proof of a record's content is retraining it
(`companion reproduce`), which compares every number to the bit.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["record_problem", "finite_real", "EVAL_SPLITS"]

# The splits each task's `evaluate` reports (companion.tasks), so that a split dropped from a record's
# metrics and curves alike is still seen; tests/test_store_trust.py checks it against a run of every task.
EVAL_SPLITS = {
    "toy": ("test", "train"), "boolean": ("cube", "seen", "unseen"), "arithmetic": ("test", "train"),
    "images": ("test", "train"), "copy-mixture": ("test",), "char-lm": ("test",), "passkey": ("test",),
}


def finite_real(x: Any) -> bool:
    """An int or float (not a bool) that is finite."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _non_finite_at(value: Any, where: str) -> str | None:
    """Where in `value` (nested dicts and lists) a float is NaN or infinite, in words, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value!r}, not a finite number"
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _non_finite_at(item, f"{where}[{key!r}]")
        if found:
            return found
    return None


def _metrics_problem(metrics: Any) -> str | None:
    if not isinstance(metrics, dict) or not metrics:
        return "metrics is not a non-empty {split: {metric: value}}"
    for split, values in metrics.items():
        if not isinstance(values, dict) or not values:
            return f"metrics[{split!r}] is not a non-empty {{metric: value}}"
        for name, value in values.items():
            if not finite_real(value):
                return f"metrics[{split!r}][{name!r}] is {value!r}, not a finite number"
    return None


def _curves_problem(curves: Any, metrics: dict, train: dict) -> str | None:
    if not isinstance(curves, dict):
        return "curves is not a dict"
    steps, evals, loss = curves.get("steps"), curves.get("eval"), curves.get("train_loss")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        return "curves['steps'] is not a non-empty list of integers"
    if steps[0] < 0 or any(b <= a for a, b in zip(steps, steps[1:])):
        return f"curves['steps'] is not strictly increasing from >= 0 ({steps[:4]}…)"
    if not isinstance(loss, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in loss):
        return "curves['train_loss'] is not a list of numbers"
    if steps[-1] != len(loss):
        return f"curves['train_loss'] has {len(loss)} updates, but the last evaluation is at update {steps[-1]}"
    fixed = train.get("steps", 0) if isinstance(train, dict) else 0
    if isinstance(fixed, int) and fixed > 0 and len(loss) != fixed:
        return f"curves['train_loss'] has {len(loss)} updates, but the config trains {fixed}"
    if not isinstance(evals, dict) or set(evals) != set(metrics):
        return (f"curves['eval'] has splits {sorted(evals) if isinstance(evals, dict) else evals!r}, "
                f"the metrics {sorted(metrics)}")
    for split, values in metrics.items():
        curve_set = evals[split]
        if not isinstance(curve_set, dict) or set(curve_set) != set(values):
            return f"curves['eval'][{split!r}] does not hold the metrics {sorted(values)}"
        for name, value in values.items():
            curve = curve_set[name]
            if not isinstance(curve, list) or len(curve) != len(steps):
                return f"curves['eval'][{split!r}][{name!r}] does not have one value per evaluation ({len(steps)})"
            if curve[-1] != value:
                return f"metrics[{split!r}][{name!r}] = {value!r} is not the last evaluation ({curve[-1]!r})"
    if not finite_real(curves.get("wall_time", 0.0)):
        return "curves['wall_time'] is not a finite number"
    return None


def record_problem(data: dict) -> str | None:
    """Why the record `data` (a record's JSON, keys and identity already checked) cannot be trusted, in
    words, or None."""
    config = data.get("config")
    if not isinstance(config, dict):
        return "config is not a dict"
    problem = _metrics_problem(data.get("metrics"))
    if problem:
        return problem
    task = config.get("task", {}).get("name") if isinstance(config.get("task"), dict) else None
    if task in EVAL_SPLITS and tuple(sorted(data["metrics"])) != EVAL_SPLITS[task]:
        return f"metrics has the splits {sorted(data['metrics'])}, but a {task} run reports {list(EVAL_SPLITS[task])}"
    problem = _curves_problem(data.get("curves"), data["metrics"], config.get("train", {}))
    if problem:
        return problem
    for key in sorted(data):  # anywhere: curves, drift, readouts, but also what no rule above reads
        problem = _non_finite_at(data[key], key)
        if problem:
            return problem
    seed = data.get("seed")
    if seed != config.get("seed") or not isinstance(seed, int) or isinstance(seed, bool):
        return f"seed {seed!r} is not its config's seed {config.get('seed')!r}"
    execution = data.get("execution")
    members = execution.get("members") if isinstance(execution, dict) else None
    if not isinstance(members, list) or seed not in members:
        return f"execution {execution!r} does not name the run's seed {seed} among the seeds it trained with"
    wall = data.get("wall_time")
    if not finite_real(wall) or wall < 0:
        return f"wall_time {wall!r} is not a finite number >= 0"
    if data.get("drift") is not None and not isinstance(data["drift"], dict):
        return "drift is neither a dict nor null"
    if not isinstance(data.get("readouts"), dict):
        return "readouts is not a dict"
    return None
