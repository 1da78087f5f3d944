"""Readouts: what a chapter reads from a trained model, measured once at the end of its run.

A chapter that needs more than a run's metrics and curves (predictions on a held-out set against a
reference function, the final prior parameters, losses at lengths it never trained on, attention
internals on a fixed batch…) names a readout in the run's config (`RunConfig.readouts`, e.g.
`("mdi_distance",)` or `("lm_lengths:64,128,256",)`). The run measures it on the trained model, in
eval mode without gradients, and stores the value in its record (`Record.readouts`, keyed by the
spec). Records are kilobytes, so records made on any machine (a GPU window, a cluster) can be copied
back, committed and read by a chapter without weights.

A readout is a function `(model, task, arg) -> JSON-able value`, registered under a name with
`register_readout` by the module that knows what it measures (a task module for task readouts, this
module for generic ones). `arg` is the text after the first ":" of the spec ("" when none); the
function parses and validates it. Values are plain Python (tensors are converted by `jsonable`).

This module is the registry and the parsing helpers only, so the modules that register readouts
(GOAT, transport, the tasks) import it without reaching up; which readouts a run may use, checking
them before training and measuring them after, is `companion.measuring`'s.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
import torch.nn.functional as F

__all__ = ["READOUTS", "register_readout", "parse_readout", "jsonable", "parse_ints", "split_arg", "option_int", "sample_positions", "rounded", "log_mask"]

Readout = Callable[[torch.nn.Module, Any, str], Any]
READOUTS: dict[str, Readout] = {}


def register_readout(name: str):
    """Decorator: register `fn(model, task, arg)` as the readout `name` (a name is registered once)."""
    if not name or ":" in name:
        raise ValueError(f"a readout name is a non-empty word without ':', got {name!r}.")

    def deco(fn: Readout) -> Readout:
        if name in READOUTS and READOUTS[name] is not fn:
            raise ValueError(f"readout {name!r} is registered twice ({READOUTS[name].__module__} and {fn.__module__}).")
        READOUTS[name] = fn
        return fn

    return deco


def parse_readout(spec: str) -> tuple[str, str]:
    """"lm_lengths:64,128" → ("lm_lengths", "64,128"); "mdi_distance" → ("mdi_distance", "")."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"a readout is a name with an optional ':argument', got {spec!r}.")
    name, _, arg = spec.partition(":")
    return name.strip(), arg.strip()


def jsonable(value: Any) -> Any:
    """Tensors and arrays to nested lists, numpy scalars to Python numbers, NaN/inf to None, recursively."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().double().tolist() if value.is_floating_point() else value.detach().cpu().tolist()
    elif hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def parse_ints(arg: str, what: str) -> list[int]:
    """"64,128,256" → [64, 128, 256] (positive integers); a clear error names `what` otherwise."""
    try:
        values = [int(v) for v in arg.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{what} takes positive integers separated by commas (e.g. '64,128'), got {arg!r}.")
    return values


@register_readout("log_mask")
def log_mask(model: torch.nn.Module, task, arg: str) -> dict[str, Any]:
    """The trained learnable masks as log σ(M), averaged over heads, computed in float64 and kept to 7
    significant digits (a float32 mask's own precision): {parameter name: (n, n) nested list}; empty
    for a model without one (no argument). Head-averaged because the masks start equal across heads
    and every chapter measure of their drift is a mean over heads (and a record stays kilobytes at
    the `paper` profile's twelve layers)."""
    if arg:
        raise ValueError(f"readout 'log_mask' takes no argument, got {arg!r}.")
    return {name: rounded(F.logsigmoid(p.detach().double()).mean(0), 7)
            for name, p in model.state_dict().items() if name.endswith("prior.logits")}


def split_arg(arg: str, what: str, options: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """"64,128;tokens=16384;pi" → ("64,128", {"tokens": "16384", "pi": ""}): the argument before the first
    ";" and the options after it (a bare name is a flag); a clear error names `what` and the allowed
    options when one is unknown or repeated."""
    head, *rest = arg.split(";")
    opts: dict[str, str] = {}
    for part in rest:
        key, _, value = part.partition("=")
        key = key.strip()
        if key not in options or key in opts:
            raise ValueError(f"{what}: option {key!r} in {arg!r} is unknown or repeated; "
                             f"options: {', '.join(options) or 'none'} (separated by ';').")
        opts[key] = value.strip()
    return head.strip(), opts


def option_int(opts: dict[str, str], key: str, default: int | None, what: str) -> int | None:
    """The positive integer option `key` of `split_arg`'s options, or `default` when absent."""
    if key not in opts:
        return default
    try:
        value = int(opts[key])
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{what}: option {key}= takes a positive integer, got {opts[key]!r}.")
    return value


def sample_positions(n: int, points: int, keep: tuple[int, ...] = ()) -> list[int]:
    """Positions 0 … n − 1, all of them when n ≤ `points`, else `points` evenly spaced ones (the first
    and the last included), plus the positions in `keep`; sorted, each once."""
    if n <= points:
        return list(range(n))
    grid = {round(k * (n - 1) / (points - 1)) for k in range(points)} if points > 1 else {0}
    return sorted(grid | {p for p in keep if 0 <= p < n})


def rounded(values: Any, digits: int) -> Any:
    """`values` (tensor, array or nested lists) as nested lists of floats with `digits` significant
    digits (NaN and inf become None): for what a figure draws, where float64's 17 digits would only
    make the record larger."""
    values = jsonable(values)
    if isinstance(values, list):
        return [rounded(v, digits) for v in values]
    return None if values is None else float(f"{values:.{digits}g}")
