"""Replay a record's first updates and compare them with its loss curve: a proof of a long run that costs
seconds.

A paper-profile record (`results/paper/`) takes an hour of a CPU or minutes of a GPU to remake, more than a
CI run can spend. Its first updates are cheap, and they are the run's own: the same weights from
`stream(seed, "init")`, the same batches from `stream(seed, "order")`, the same group trained together
(`runs.group_configs`), the same learning-rate schedule (the whole run's, `train._train(stop_after=...)`).
`replay(cfgs, updates)` trains a group that far and returns each member's losses as a record stores
them (`runs.LOSS_DIGITS` significant digits); `compare` checks them against the record's curve:

- to the bit where this host computes like the one that made the record (`companion.host.same_numerics`);
- elsewhere within `REPLAY_RTOL` (relative, every replayed loss). Early in a run the losses of two hosts
  agree to about the seventh digit: Chapter 8's nine paper runs replayed for 20 updates under three
  other sets of kernels on this project's AMD host (`MKL_CBWR=COMPATIBLE`, `ATEN_CPU_CAPABILITY=default`,
  `avx2`) differ from their records by at most 3.6e-7, while a learning rate 10 % higher moves them
  by 1.9e-2 to 2.3e-2 and the next seeds' group by 4.7e-2 (tests/test_paper_replay.py keeps both nulls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from companion.batched import stack
from companion.config import RunConfig
from companion.host import describe as describe_host, same_numerics
from companion.readouts import rounded
from companion.runs import FLUSH_DENORMAL, Record, LOSS_DIGITS, THREADS, _build, check_group, recipe_context, stream
from companion.tasks import make_task
from companion.train import _train  # the one loop, stopped early

# the replay's tolerance on a host that computes otherwise: ~280x the other kernels' 3.6e-7, ~200x below a
# learning rate 10 % off (module docstring)
REPLAY_RTOL = 1e-4


def replay(cfgs: Sequence[RunConfig], updates: int) -> list[list[float]]:
    """Each member's first `updates` losses, the group trained as its recipe says (alone or stacked),
    rounded as its record stores them. Raises ValueError for configs that are not one whole group or
    `updates` outside 1 … the run's length."""
    cfgs = list(cfgs)
    check_group(cfgs)
    with recipe_context():
        task = make_task(cfgs[0].task)
        models = [_build(c, task) for c in cfgs]
        net = models[0] if len(models) == 1 else stack(models)
        hists = _train(net, models, task, cfgs[0].train, [stream(c.seed, "order") for c in cfgs],
                       [[] for _ in cfgs], progress=False, stop_after=updates)
    return [rounded(h.train_loss, LOSS_DIGITS) for h in hists]


def this_host(device: str = "cpu") -> dict[str, Any]:
    """This host as a record describes its own (threads as runs use them)."""
    return describe_host(device, THREADS, FLUSH_DENORMAL)


@dataclass(frozen=True)
class ReplayCheck:
    """One member's replay against its record: `mode` "bitwise" (same numerics) or "tolerance"."""

    run_id: str
    updates: int
    mode: str
    ok: bool
    worst_rel: float

    def why(self) -> str:
        if self.ok:
            return f"{self.run_id[:12]}: first {self.updates} losses equal ({self.mode})"
        return (f"{self.run_id[:12]}: first {self.updates} losses differ from the record's ({self.mode}; "
                f"largest relative difference {self.worst_rel:.3g})")


def compare(record: Record, losses: Sequence[float], host: dict[str, Any]) -> ReplayCheck:
    """`losses` (a replay on `host`) against the start of `record`'s loss curve."""
    n = len(losses)
    curve = record.curves["train_loss"]
    if len(curve) < n:
        raise ValueError(f"record {record.run_id[:12]} holds {len(curve)} losses; a replay of {n} updates "
                         "needs at least as many.")
    old = torch.tensor(curve[:n], dtype=torch.float64)
    new = torch.tensor(list(losses), dtype=torch.float64)
    worst = float(((new - old).abs() / old.abs().clamp_min(1e-30)).max()) if n else 0.0
    if same_numerics(record.host, host):
        return ReplayCheck(record.run_id, n, "bitwise", list(curve[:n]) == list(losses), worst)
    ok = bool(torch.allclose(new, old, rtol=REPLAY_RTOL, atol=0))
    return ReplayCheck(record.run_id, n, "tolerance", ok, worst)
