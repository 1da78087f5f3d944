"""`companion list` and `companion sweep`: the experiments and grids, their stored and missing runs.

The same functions chapters call (`companion.sweep`), with a progress bar and one-line errors (exit 2):
every value is checked before a run starts (`companion.cli.values`, `companion.preflight`), and a `paper`
profile that would train on this machine's CPU first says for how long and waits for `--yes`.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from companion.cli.values import fail, folder, positive_int, positive_minutes, seeds, nonnegative_int
from companion.config import PROFILES
from companion.executors import plan_groups
from companion.experiments import EXPERIMENTS, GRIDS, load_experiments
from companion.identity import run_id
from companion.preflight import check_runs
from companion.store import RunStore, StoreError
from companion.sweep import run_missing, parse_seeds, plan, plan_grid

__all__ = ["add_commands"]



def _methods(text: str | None) -> list[str] | None:
    if text is None:
        return None
    methods = [m.strip() for m in text.split(",") if m.strip()]
    if not methods:
        raise ValueError(f"--methods {text!r} names no method; give a comma-separated list, or leave it out for all")
    return methods


def _paper_on_cpu(cfgs, executor: str, yes: bool) -> str | None:
    """Why a sweep must not start yet: a paper profile trained here on the CPU, without --yes."""
    here = [c for c in cfgs if c.device == "cpu"]
    if executor != "local" or yes or not here:
        return None
    from companion.cli.paper import estimate_total  # probes the first group: only on this path
    groups = plan_groups(here)
    total, first = estimate_total(groups)
    return (f"the paper profile trains {len(here)} runs on this machine's CPU: about {total / 3600:,.1f} hours "
            f"(the first of {len(groups)} groups probed at {first:,.0f} s, the others scaled by their size). "
            "On a GPU add --set device=cuda, on a cluster --executor slurm; to train here anyway, add --yes")
def _cmd_list(args) -> int:
    load_experiments()
    try:
        seeds = parse_seeds(args.seeds)
        plans = {(n, p): plan(n, p, seeds, overrides=args.set or ())
                 for n in sorted(EXPERIMENTS) for p in EXPERIMENTS[n].profiles}
        grid_plans = {(n, p): plan_grid(n, p, seeds, args.set or ())
                      for n in sorted(GRIDS) for p in GRIDS[n].profiles}
    except ValueError as err:
        return fail("list", str(err))
    # list reads: it never moves or writes a file; each profile's runs in its own records by default
    stores = {p: RunStore(args.store, read_only=True, profile=p) for p in ("ci", "paper")}
    shown = f"   overrides: {' '.join(args.set)}" if args.set else ""
    where = stores["ci"].root if args.store else f"{stores['ci'].root} (ci), {stores['paper'].root} (paper)"
    print(f"store: {where}   seeds: {args.seeds}{shown}")
    for store in {s.root: s for s in stores.values()}.values():
        problem = store.problem()
        if problem:
            print(f"companion list: warning: store {problem}; every run counts as missing, and sweep will "
                  "refuse to train into it.", file=sys.stderr)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _print_listing(stores, plans, grid_plans)
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f"companion list: warning: {message}", file=sys.stderr)
    return 0


def _print_listing(stores: dict[str, RunStore], plans: dict, grid_plans: dict) -> None:
    """Every experiment and grid with its methods, readings and stored/missing counts."""
    print("experiments:")
    for name in sorted(EXPERIMENTS):
        exp = EXPERIMENTS[name]
        print(f"{name}: {exp.description}")
        for profile in exp.profiles:
            print(f"  {profile:<6} methods: {', '.join(exp.methods(profile))}   "
                  f"{_counts(stores[profile], plans[name, profile])}")
        for reading, what in exp.readings:
            print(f"  reading {reading}: {what}")
    print("grids (cells of the experiments above; a run shared by two cells is one run):")
    for name in sorted(GRIDS):
        grid = GRIDS[name]
        print(f"{name}: {grid.description}")
        for profile in grid.profiles:
            cells = grid.cells(profile)
            print(f"  {profile:<6} {len(cells)} cells   {_counts(stores[profile], grid_plans[name, profile])}")


def _counts(store: RunStore, cfgs) -> str:
    ids = list(dict.fromkeys(run_id(c) for c in cfgs))
    stored = sum(store.load(rid) is not None for rid in ids)
    return f"stored {stored}/{len(ids)}, missing {len(ids) - stored}"


def _cmd_sweep(args) -> int:
    try:
        seeds = parse_seeds(args.seeds)
        methods = _methods(args.methods)
        load_experiments()
        if args.experiment in GRIDS:
            if methods:
                raise ValueError(f"--methods selects methods of an experiment; {args.experiment!r} is a grid "
                                 "(its cells name their methods). Drop --methods, or sweep one experiment.")
            cfgs = plan_grid(args.experiment, args.profile, seeds, args.set or ())
        else:
            cfgs = plan(args.experiment, args.profile, seeds, methods, args.set or ())
        check_runs(cfgs, here=args.executor == "local")  # devices here, tasks buildable: before any run starts
    except ValueError as err:
        return fail("sweep", str(err))
    if args.profile == "paper":
        stop = _paper_on_cpu(cfgs, args.executor, args.yes)
        if stop:
            return fail("sweep", stop)
    if args.batch is not None:  # older scripts keep working, and get the same runs as without it
        stack = f" ({cfgs[0].stack} for {cfgs[0].experiment})" if cfgs else ""
        print(f"companion sweep: note: --batch is ignored: the seeds a run trains beside are part of its recipe, "
              f"its config's `stack`{stack}, so that one run id means one result whatever the command line. "
              "`--set stack=1` trains every seed alone (other runs, with other ids).", file=sys.stderr)
    if args.executor == "local":
        options = {"jobs": args.jobs}
    else:
        options = {"cluster": args.cluster, "timeout_min": args.timeout_min,
                   "gpus_per_node": args.gpus_per_node, "cpus_per_task": args.cpus_per_task,
                   "array_parallelism": args.array_parallelism, "partition": args.partition,
                   "queue_timeout_min": args.queue_timeout_min}
    store = RunStore(args.store, profile=args.profile)
    try:
        records, ran = run_missing(cfgs, store, args.executor, True, options)
    except StoreError as err:  # said before any run started
        return fail("sweep", str(err))
    except KeyboardInterrupt:
        print("\ninterrupted: finished runs are stored; rerun the same command to continue.", file=sys.stderr)
        return 130
    except RuntimeError as err:
        print(f"companion sweep: {err}", file=sys.stderr)
        return 1
    unique = len({r.run_id for r in records})
    print(f"{args.experiment}/{args.profile}: {unique} runs, {ran} run now, "
          f"{unique - ran} already stored in {store.root}")
    return 0


def add_commands(subparsers) -> None:
    """Register `list` and `sweep` on the `companion` command line."""
    p = subparsers.add_parser("list", help="experiments, grids, profiles, methods and stored/missing runs")
    p.add_argument("--seeds", default="0-4", type=seeds, help="seeds to count (default 0-4)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="count runs with these overrides, as given to sweep (repeatable)")
    p.add_argument("--store", default=None, type=folder,
                   help="run store folder (default $COMPANION_RUNS, else each profile's records, results/<profile>)")
    p.set_defaults(func=_cmd_list)

    p = subparsers.add_parser("sweep", help="run the missing runs of an experiment or a grid (resumable)")
    p.add_argument("experiment", help="experiment or grid name (see `companion list`)")
    p.add_argument("--profile", default="ci", choices=PROFILES, help="ci (CPU minutes) or paper (default ci)")
    p.add_argument("--seeds", default="0-4", type=seeds, help="e.g. 0-4 or 0,2,5 (default 0-4)")
    p.add_argument("--methods", default=None, help="comma-separated subset of the methods (default all)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a setting, e.g. --set train.lr=1e-4 (repeatable)")
    p.add_argument("--executor", choices=("local", "slurm"), default="local")
    p.add_argument("--jobs", type=positive_int, default=None, help="local worker processes (default: all cores)")
    p.add_argument("--batch", type=positive_int, default=None, help=argparse.SUPPRESS)  # ignored, with a note saying why
    p.add_argument("--store", default=None, type=folder,
                   help="run store folder (default $COMPANION_RUNS, else the profile's records, results/<profile>)")
    p.add_argument("--yes", action="store_true",
                   help="train a paper profile on this machine's CPU (it says how long first, and waits for this)")
    g = p.add_argument_group("slurm executor (submitit)")
    g.add_argument("--cluster", default="slurm", choices=("slurm", "local", "debug"),
                   help="submitit cluster; local/debug run the Slurm path on this machine")
    g.add_argument("--timeout-min", type=positive_int, default=60)
    g.add_argument("--gpus-per-node", type=nonnegative_int, default=0)
    g.add_argument("--cpus-per-task", type=positive_int, default=1)
    g.add_argument("--array-parallelism", type=positive_int, default=32)
    g.add_argument("--partition", default=None)
    g.add_argument("--queue-timeout-min", type=positive_minutes, default=60.0,
                   help="cancel and report the job array when none of its tasks has run for this long, all "
                        "pending for a reason waiting does not cure (a DOWN partition or node, a request no "
                        "node meets; a busy cluster's Priority or Resources never cancels; default 60)")
    p.set_defaults(func=_cmd_sweep)
