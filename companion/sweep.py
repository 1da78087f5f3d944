"""Sweeps: seeds × methods of an experiment, running only what the store lacks; `companion list|sweep`.

`ensure_runs(...)` is what chapters call: it loads every stored run and runs the missing ones through an
executor (`companion.executors`), so a rerun with the same code and settings costs seconds and a killed
sweep resumes where it stopped. The command line adds a progress bar and readable errors (exit 2).
"""

from __future__ import annotations

import os
import sys
from typing import Iterable, NamedTuple, Sequence

from companion.config import EXPERIMENTS, RunConfig, get_experiment, load_experiments
from companion.executors import make_executor
from companion.runs import Record, RunStore, run_id

__all__ = ["parse_seeds", "plan", "Request", "ensure_runs", "ensure_many", "records_frame", "add_commands"]


def parse_seeds(text: str) -> list[int]:
    """"0-4" → [0, 1, 2, 3, 4]; "0,2,5" and "0-2,7" work too; duplicates are dropped, order kept."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            lo, dash, hi = part.strip().partition("-")
            a = int(lo)
            b = int(hi) if dash else a
            if a < 0 or b < a:
                raise ValueError
            seeds += [s for s in range(a, b + 1) if s not in seeds]
    except ValueError:
        raise ValueError(
            f"malformed seeds {text!r}: use a range like 0-4, a list like 0,1,2, or both (0-2,7)."
        ) from None
    return seeds


def plan(experiment: str, profile: str, seeds: Iterable[int], methods: Sequence[str] | None = None,
         overrides: Sequence[str] = ()) -> list[RunConfig]:
    """The configs of methods × seeds (method-major), overrides applied; validates every name."""
    exp = get_experiment(experiment)
    names = list(methods) if methods else exp.methods(profile)
    return [exp.config(profile, m, s, overrides) for m in names for s in seeds]


def _sweep(cfgs: list[RunConfig], store: RunStore, executor: str, progress: bool,
           options: dict, weights: bool = False) -> tuple[list[Record], int]:
    missing, seen = [], set()
    for cfg in cfgs:
        rid = run_id(cfg)
        if rid not in seen and (store.load(cfg) is None or (weights and not store.has_weights(rid))):
            missing.append(cfg)
        seen.add(rid)
    failures = []
    if missing:
        failures = make_executor(executor, **options).execute(missing, store, progress=progress)
    records = [store.load(c) for c in cfgs]
    if failures or any(r is None for r in records):
        lines = failures or [f"{c.method}/seed {c.seed}: no record written"
                             for c, r in zip(cfgs, records) if r is None]
        raise RuntimeError(f"{len(lines)} run(s) failed:\n  " + "\n  ".join(lines))
    return records, len(missing)


def ensure_runs(experiment: str, profile: str = "ci", seeds: Iterable[int] = range(5),
                methods: Sequence[str] | None = None, store: RunStore | str | os.PathLike | None = None,
                jobs: int | None = None, *, overrides: Sequence[str] = (), executor: str = "local",
                progress: bool = False, weights: bool = False, **executor_options) -> list[Record]:
    """Records of `experiment` for methods × seeds: loaded when stored, run (in parallel) when missing.

    Args:
        experiment, profile: names in `companion.config.EXPERIMENTS`.
        seeds: run seeds. methods: default all methods of the profile.
        store: a `RunStore` or its folder; default `RunStore()` ($COMPANION_RUNS or <repo>/runs).
        jobs: local worker processes (default os.cpu_count()).
        overrides: "key=value" strings applied to every config (changing them changes the run ids).
        executor: "local" or "slurm"; `executor_options` go to its constructor (e.g. cluster="local").
        progress: show a tqdm bar over runs.
        weights: also require each run's trained weights (`RunStore.load_model`); a stored record
            without them is rerun (same config and code: the same record).

    Returns:
        One `Record` per (method, seed), method-major.

    Raises:
        ValueError: unknown experiment, profile or method, or a bad override.
        RuntimeError: some runs failed (the others are stored).
    """
    store = store if isinstance(store, RunStore) else RunStore(store)
    if executor == "local":
        executor_options.setdefault("jobs", jobs)
    records, _ = _sweep(plan(experiment, profile, seeds, methods, overrides), store, executor, progress,
                        executor_options, weights)
    return records


class Request(NamedTuple):
    """One block of runs for `ensure_many`: an experiment's methods (None = all) under overrides."""

    experiment: str
    methods: Sequence[str] | None = None
    overrides: Sequence[str] = ()


def ensure_many(requests: Sequence[Request], profile: str = "ci", seeds: Iterable[int] = range(5),
                store: RunStore | str | os.PathLike | None = None, jobs: int | None = None, *,
                executor: str = "local", progress: bool = False, weights: bool = False,
                **executor_options) -> list[list[Record]]:
    """`ensure_runs` for several requests at once: one executor runs every missing config of all of
    them (one worker pool, no idle workers between blocks); returns one record list per request.
    A config that appears in several requests runs once."""
    seeds = list(seeds)
    store = store if isinstance(store, RunStore) else RunStore(store)
    if executor == "local":
        executor_options.setdefault("jobs", jobs)
    blocks = [plan(r.experiment, profile, seeds, r.methods, r.overrides) for r in requests]
    records, _ = _sweep([c for b in blocks for c in b], store, executor, progress, executor_options, weights)
    out, start = [], 0
    for b in blocks:
        out.append(records[start:start + len(b)])
        start += len(b)
    return out


def records_frame(records: Sequence[Record]):
    """A pandas DataFrame, one row per record: experiment, profile, method, seed, run_id, wall_time and
    the final metrics as "split.metric" columns (e.g. "test.mse"); input for `companion.stats` tables."""
    import pandas as pd

    rows = []
    for r in records:
        c = r.config
        row = {"experiment": c.experiment, "profile": c.profile, "method": c.method, "seed": c.seed,
               "run_id": r.run_id, "wall_time": r.wall_time}
        row.update({f"{split}.{m}": v for split, ms in r.metrics.items() for m, v in ms.items()})
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# command line


def _fail(command: str, message: str) -> int:
    print(f"companion {command}: error: {message}", file=sys.stderr)
    return 2


def _cmd_list(args) -> int:
    load_experiments()
    try:
        seeds = parse_seeds(args.seeds)
        plans = {(n, p): plan(n, p, seeds, overrides=args.set or ())
                 for n in sorted(EXPERIMENTS) for p in EXPERIMENTS[n].profiles}
    except ValueError as err:
        return _fail("list", str(err))
    store = RunStore(args.store)
    shown = f"   overrides: {' '.join(args.set)}" if args.set else ""
    print(f"store: {store.root}   seeds: {args.seeds}{shown}")
    for name in sorted(EXPERIMENTS):
        exp = EXPERIMENTS[name]
        print(f"{name}: {exp.description}")
        for profile in exp.profiles:
            cfgs = plans[name, profile]
            stored = sum(store.load(c) is not None for c in cfgs)
            print(f"  {profile:<6} methods: {', '.join(exp.methods(profile))}   "
                  f"stored {stored}/{len(cfgs)}, missing {len(cfgs) - stored}")
    return 0


def _cmd_sweep(args) -> int:
    try:
        seeds = parse_seeds(args.seeds)
        methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
        cfgs = plan(args.experiment, args.profile, seeds, methods, args.set or ())
        if args.jobs is not None and args.jobs < 1:
            raise ValueError(f"--jobs must be >= 1, got {args.jobs}.")
    except ValueError as err:
        return _fail("sweep", str(err))
    if args.executor == "local":
        options = {"jobs": args.jobs}
    else:
        options = {"cluster": args.cluster, "timeout_min": args.timeout_min,
                   "gpus_per_node": args.gpus_per_node, "cpus_per_task": args.cpus_per_task,
                   "array_parallelism": args.array_parallelism, "partition": args.partition}
    store = RunStore(args.store)
    try:
        records, ran = _sweep(cfgs, store, args.executor, True, options)
    except KeyboardInterrupt:
        print("\ninterrupted: finished runs are stored; rerun the same command to continue.", file=sys.stderr)
        return 130
    except RuntimeError as err:
        print(f"companion sweep: {err}", file=sys.stderr)
        return 1
    print(f"{args.experiment}/{args.profile}: {len(records)} runs, {ran} run now, "
          f"{len(records) - ran} already stored in {store.root}")
    return 0


def add_commands(subparsers) -> None:
    """Register `list` and `sweep` on the `companion` command line."""
    p = subparsers.add_parser("list", help="experiments, profiles, methods and stored/missing runs")
    p.add_argument("--seeds", default="0-4", help="seeds to count (default 0-4)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="count runs with these overrides, as given to sweep (repeatable)")
    p.add_argument("--store", default=None, help="run store folder (default $COMPANION_RUNS or <repo>/runs)")
    p.set_defaults(func=_cmd_list)

    p = subparsers.add_parser("sweep", help="run the missing runs of an experiment (resumable)")
    p.add_argument("experiment", help="experiment name (see `companion list`)")
    p.add_argument("--profile", default="ci", help="ci (CPU minutes) or paper (default ci)")
    p.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 0,2,5 (default 0-4)")
    p.add_argument("--methods", default=None, help="comma-separated subset of the methods (default all)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a setting, e.g. --set train.lr=1e-4 (repeatable)")
    p.add_argument("--executor", choices=("local", "slurm"), default="local")
    p.add_argument("--jobs", type=int, default=None, help="local worker processes (default: all cores)")
    p.add_argument("--store", default=None, help="run store folder (default $COMPANION_RUNS or <repo>/runs)")
    g = p.add_argument_group("slurm executor (submitit)")
    g.add_argument("--cluster", default="slurm", choices=("slurm", "local", "debug"),
                   help="submitit cluster; local/debug run the Slurm path on this machine")
    g.add_argument("--timeout-min", type=int, default=60)
    g.add_argument("--gpus-per-node", type=int, default=0)
    g.add_argument("--cpus-per-task", type=int, default=1)
    g.add_argument("--array-parallelism", type=int, default=32)
    g.add_argument("--partition", default=None)
    p.set_defaults(func=_cmd_sweep)
