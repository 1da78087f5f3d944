"""One stacked forward serving M members' evaluations: the evaluation half of seed-batched training.

`train_stacked` trains M members as one stacked model (`companion.batched`), but each evaluation used
to run member by member through the unchanged `task.evaluate(model)`: M forwards at the evaluation's
batch, a third or more of a small group's time on the CPU. A task's evaluation reads the same inputs
whatever the model (a fixed split, a fixed subsample drawn from its own seeded generator), so the
members' forwards differ only in their weights, and the stacked model computes all M of them in
one call on the inputs repeated M times, member-major.

`SharedForward(net, models)` does that without touching a task. While member m is `serving(m)`, its
model's `forward` is replaced (an instance attribute, removed on exit) by one that answers the k-th
call of its evaluation:

- member 0 (the leader) runs `net` on its inputs repeated M times and keeps every member's share
  of the output; it is given its own share;
- member m > 0 is given its share of the leader's k-th output when its k-th call has the leader's
  k-th arguments exactly (tensors equal in shape, dtype, device and every element; other arguments
  equal); any other call (a task whose inputs depend on the model, e.g. greedy decoding, or more
  calls than the leader made) runs on member m alone, and sharing stops for the rest of this
  evaluation, so a task that cannot share pays one wasted stacked forward per evaluation at most.

The stacked forward is the members' forwards alone up to float reassociation, and to the last bit on
the CPU where `companion.batched` sums in the order of a model alone (tests/test_shared_forward.py
compares whole runs, shared against member by member). The leader's outputs are held until every
member has taken its share: M times one evaluation's outputs. Where the stacked forward does not fit
in memory (a CUDA out-of-memory error), the leader falls back to running alone and sharing stops.
"""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

import torch
from torch import Tensor, nn

__all__ = ["SharedForward"]


def _same(a: Any, b: Any) -> bool:
    """Whether two call arguments are the same input: tensors equal exactly, containers item by item."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return (isinstance(a, Tensor) and isinstance(b, Tensor) and a.shape == b.shape and a.dtype == b.dtype
                and a.device == b.device and bool(torch.equal(a, b)))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _kept(a: Any) -> Any:
    """A copy of a call's arguments that the caller cannot change afterwards (tensors cloned)."""
    if isinstance(a, Tensor):
        return a.clone()
    if isinstance(a, (tuple, list)):
        return type(a)(_kept(x) for x in a)
    if isinstance(a, dict):
        return {k: _kept(v) for k, v in a.items()}
    return a


def _split(out: Any, members: int) -> list:
    """The stacked output (M·B, …) cut into M member shares, through tuples and lists."""
    if isinstance(out, Tensor):
        return list(out.chunk(members))
    if isinstance(out, (tuple, list)):
        parts = [_split(o, members) for o in out]
        return [type(out)(p[m] for p in parts) for m in range(members)]
    raise TypeError(f"a shared forward splits tensors, tuples and lists, not {type(out).__name__}.")


class SharedForward:
    """Serve the evaluations of `models` (the members of `net`, already holding its weights, e.g. by
    `companion.batched.unstack_into`) from stacked forwards of `net`; see the module docstring."""

    def __init__(self, net: nn.Module, models: Sequence[nn.Module]):
        members = getattr(net, "members", 0)
        if members != len(models):
            raise ValueError(f"the stacked model holds {members} members but {len(models)} models were given; "
                             "pass the models it was stacked from, in order.")
        self.net, self.models, self.members = net, list(models), members
        self._calls: list[tuple[tuple, dict, list]] = []  # the leader's (args, kwargs, shares) per call
        self.sharing = True
        self.shared_calls = 0  # calls answered from a stacked forward (the leader's included)

    @contextlib.contextmanager
    def serving(self, m: int):
        """While inside, `models[m]`'s forward is answered as the module docstring says."""
        model, count = self.models[m], [0]
        alone = type(model).forward.__get__(model)

        def forward(*args, **kwargs):
            k, count[0] = count[0], count[0] + 1
            if not self.sharing:
                return alone(*args, **kwargs)
            if m == 0:
                return self._lead(alone, args, kwargs)
            if k < len(self._calls):
                largs, lkwargs, shares = self._calls[k]
                if _same(args, largs) and _same(kwargs, lkwargs):
                    out, shares[m] = shares[m], None  # each share is given once
                    self.shared_calls += 1
                    return out
            self.sharing = False
            return alone(*args, **kwargs)

        if m == 0:
            self._calls, self.sharing = [], True
        was_training = self.net.training
        self.net.eval()
        model.forward = forward
        try:
            yield self
        finally:
            del model.forward
            self.net.train(was_training)
            if m == self.members - 1:
                self._calls = []

    def _lead(self, alone, args: tuple, kwargs: dict):
        if not args or not isinstance(args[0], Tensor):
            self.sharing = False
            return alone(*args, **kwargs)
        x = args[0]
        try:
            out = self.net(x.repeat(self.members, *([1] * (x.dim() - 1))), *args[1:], **kwargs)
        except torch.OutOfMemoryError:
            self.sharing = False
            return alone(*args, **kwargs)
        shares = _split(out, self.members)
        self._calls.append((_kept(args), _kept(kwargs), shares))
        self.shared_calls += 1
        first, shares[0] = shares[0], None
        return first
