"""Which runs a sampled reproduction retrains: `companion reproduce --sample`.

The whole proof retrains every `ci` record the chapters read (`companion reproduce`, `make reproduce`,
`make test`). Where a check has less time than that, a sample stands in for it between full runs:

- **one training group of every experiment**, drawn afresh for each commit: the draw's seed is the
  commit's hash (`seed_of`), so a commit always draws the same groups and a failure can be rerun as it
  was; another commit draws others. A group is the stack of seeds that trains together
  (`companion.executors.plan_groups`), so the whole group is retrained and every member compared;
- **plus every run whose record changed** since a base commit (default: the parent, `HEAD~1`): a record
  file under `results/ci/` that differs from the base's, is new, or is not yet committed
  (`changed_run_ids`), again with its whole group.

A sample proves its runs bitwise (or by verdict on another host) exactly as the whole proof does; the
claims' verdicts it leaves to the committed records, which `companion scoreboard --check` decides.
"""

from __future__ import annotations

import hashlib
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from companion.config import RunConfig
from companion.executors import plan_groups
from companion.identity import run_id

__all__ = ["Sample", "changed_run_ids", "draw", "seed_of"]

RECORDS = "results/ci"


@dataclass(frozen=True)
class Sample:
    """A drawn sample: its seed, the base it compared records against, the changed runs it adds, and
    the configs it retrains (whole groups), out of how many."""

    seed: int
    base: str
    changed: tuple[str, ...]
    configs: tuple[RunConfig, ...]
    groups: int
    of_runs: int
    of_groups: int

    def summary(self) -> dict:
        return {"seed": self.seed, "base": self.base, "changed_runs": len(self.changed), "runs": len(self.configs),
                "groups": self.groups, "of_runs": self.of_runs, "of_groups": self.of_groups}


def seed_of(commit: str) -> int:
    """The draw's seed for `commit` (any string): the first 64 bits of its SHA-256."""
    return int(hashlib.sha256(commit.encode()).hexdigest()[:16], 16)


def _git(root: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise LookupError(out.stderr.strip() or f"git {' '.join(args)} failed")
    return out.stdout


def changed_run_ids(root: Path, base: str) -> set[str]:
    """The run ids whose record under `results/ci/` differs between commit `base` and the working tree:
    changed, added or deleted since `base`, or new and not yet committed. LookupError (with git's own
    message) when `base` is not a commit here, e.g. in a clone of depth 1."""
    _git(root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    names = _git(root, "diff", "--name-only", "--no-renames", base, "--", RECORDS).split()
    names += _git(root, "ls-files", "--others", "--exclude-standard", "--", RECORDS).split()
    return {Path(n).stem for n in names if n.endswith(".json")}


def draw(cfgs: Sequence[RunConfig], seed: int, changed: set[str] = frozenset(), base: str = "") -> Sample:
    """One group of each experiment among `cfgs`, drawn with `seed`, plus the group of every config whose
    run id is in `changed`; the groups keep the order `plan_groups` gives them."""
    groups = plan_groups(cfgs)
    by_experiment: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_experiment.setdefault(g[0].experiment, []).append(i)
    rng = random.Random(seed)
    chosen = {rng.choice(by_experiment[e]) for e in sorted(by_experiment)}
    ids = [[run_id(c) for c in g] for g in groups] if changed else []
    hit = sorted(r for g in ids for r in g if r in changed)
    chosen |= {i for i, g in enumerate(ids) if any(r in changed for r in g)}
    configs = tuple(c for i in sorted(chosen) for c in groups[i])
    return Sample(seed, base, tuple(hit), configs, len(chosen), sum(map(len, groups)), len(groups))
