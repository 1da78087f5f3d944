"""Make a chapter's missing paper-profile runs on a Slurm cluster with GPUs, into results/paper/.

    .venv/bin/python tools/paper_slurm.py 03 --partition gpu --gpus-per-node 1 --timeout-min 240

The runs are those `companion paper 03` would make (the chapter's paper configs, `PAPER_FIRST` first,
then what the chapter reads, then `PAPER_EXTRA`, less what the store holds from any device), grouped as
their recipe says (`plan_groups`: a group's seeds train together) and sent as one job array through the
`slurm` executor: one array task per group, each with `--gpus-per-node` GPUs, `--cpus-per-task` CPUs and
`--timeout-min` minutes, on `--device` (cuda). Each task writes its members' records (and weights, which
git ignores in results/paper) as it ends; a task that fails, is cancelled or loses its node is one line
per run, and the same command makes only what is still missing.

The time limit is explicit: `companion paper`'s estimate trains two probes of every group on the machine
that asks, which on a cluster is a login node without the GPU (wrong, and not cheap: minutes a group at
paper scale). Take it from a GPU window instead (`companion paper` logs each group's seconds in
results/paper/windows.jsonl), with a margin; a task out of time ends TIMEOUT, its runs reported.

The cluster needs: this repository and its virtual environment on a filesystem the nodes share
(submitit runs the same Python there), the store on it too, and `sacct` (accounting).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/paper_slurm.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("chapter", help="chapter number or notebook name, e.g. 03")
    parser.add_argument("--timeout-min", type=int, required=True,
                        help="time limit of each array task (one group), in minutes")
    parser.add_argument("--partition", default=None, help="Slurm partition (default: the cluster's default)")
    parser.add_argument("--gpus-per-node", type=int, default=1, help="GPUs per task (default 1: one process per GPU)")
    parser.add_argument("--cpus-per-task", type=int, default=1,
                        help="CPUs per task (default 1: a run trains on companion.runs.THREADS = 1 thread)")
    parser.add_argument("--array-parallelism", type=int, default=32, help="at most this many tasks at once")
    parser.add_argument("--queue-timeout-min", type=float, default=24 * 60.0,
                        help="cancel and report the array when none of its tasks has run for this long, all pending for a "
                             "reason waiting does not cure (a DOWN partition or node; default 1440)")
    parser.add_argument("--device", default="cuda", help="device the runs train on (default cuda)")
    parser.add_argument("--store", default=None, help="record folder (default <repo>/results/paper, committed)")
    parser.add_argument("--seeds", default=None, help="seeds instead of the chapter's own, e.g. 0-9")
    parser.add_argument("--no-extra", action="store_true", help="only the runs the chapter reads (skip PAPER_EXTRA)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override applied to every config (changes the run ids; for tiny checks)")
    parser.add_argument("--dry-run", action="store_true", help="list the groups and the request, submit nothing")
    args = parser.parse_args(argv)

    from companion.cli.paper import default_root, group_label, missing_runs
    from companion.executors import SlurmExecutor, plan_groups
    from companion.store import RunStore
    from companion.sweep import parse_seeds

    try:
        if args.device.startswith("cuda") and args.gpus_per_node < 1:
            raise ValueError(f"--device {args.device} needs --gpus-per-node >= 1 (or --device cpu)")
        seeds = parse_seeds(args.seeds) if args.seeds else None
        store = RunStore(args.store or default_root())
        todo, total = missing_runs(args.chapter, store, seeds=seeds, extra=not args.no_extra, overrides=args.set)
    except (ValueError, OSError) as err:
        print(f"paper_slurm: {err}", file=sys.stderr)
        return 2
    todo = [replace(c, device=args.device) for c in todo]
    groups = plan_groups(todo)
    where = f"partition {args.partition}" if args.partition else "the default partition"
    print(f"chapter {args.chapter}: {total - len(todo)} of {total} paper runs stored in {store.root}; {len(todo)} "
          f"to make in {len(groups)} array tasks on {where}, each {args.gpus_per_node} GPU(s), {args.cpus_per_task} "
          f"CPU(s), {args.timeout_min} min, device {args.device}.")
    if args.dry_run:
        for g in groups:
            print(f"  would run {group_label(g)}")
        return 0
    if not todo:
        return 0
    store.check_writable()
    store.remove_stale_temporaries()
    executor = SlurmExecutor(timeout_min=args.timeout_min, gpus_per_node=args.gpus_per_node,
                             cpus_per_task=args.cpus_per_task, array_parallelism=args.array_parallelism,
                             partition=args.partition, queue_timeout_min=args.queue_timeout_min)
    failures = executor.execute(todo, store, progress=True)
    left, _ = missing_runs(args.chapter, store, seeds=seeds, extra=not args.no_extra, overrides=args.set)
    for line in failures:
        print(f"  failed: {line}", file=sys.stderr)
    print(f"chapter {args.chapter}: {total - len(left)} of {total} paper runs stored; {len(left)} remain"
          + (" (rerun the same command to make them)." if left else "."))
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
