"""`companion ladder`: make the scale ladder's missing runs (`companion.experiments.ladder`), cheapest
rung first, a whole group at a time, into `results/ladder`; `--status` counts what each rung has.

Resumable by construction: a finished group is a stored record per seed, and the next call skips it.
One worker by default (`--jobs`), so the ladder runs in the background beside other work.
"""

from __future__ import annotations

from companion.cli.training import train_missing
from companion.cli.values import fail, folder, positive_int
from companion.experiments.ladder import FAMILIES, rung_configs, rung_order
from companion.paths import ladder_root
from companion.store import RunStore

__all__ = ["add_commands"]


def _cmd_ladder(args) -> int:
    families = [f.strip() for f in args.only.split(",") if f.strip()] if args.only is not None else list(FAMILIES)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or not families:
        what = f"unknown family {unknown[0]!r}" if unknown else f"--only {args.only!r} names no family"
        return fail("ladder", f"{what}; valid: {', '.join(FAMILIES)}")
    store = RunStore(args.store or ladder_root(), read_only=args.status)
    for fam, rung in rung_order():
        if fam.name not in families:
            continue
        cfgs = rung_configs(fam.name, rung.name)
        have = sum(store.load(c) is not None for c in cfgs)
        label = f"{fam.name}/{rung.name}: {rung.what}"
        if args.status or have == len(cfgs):
            print(f"{label}: {have} of {len(cfgs)} runs stored")
            continue
        print(f"{label}: making {len(cfgs) - have} of {len(cfgs)} runs", flush=True)
        code = train_missing("ladder", cfgs, store, args.jobs)
        if code:
            return code
    return 0


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("ladder", help="make the scale ladder's missing runs (resumable), or count them")
    p.add_argument("--status", action="store_true", help="count each rung's stored runs; train nothing")
    p.add_argument("--only", default=None, help="comma-separated families (default all): " + ", ".join(FAMILIES))
    p.add_argument("--jobs", type=positive_int, default=1, help="worker processes (default 1: the ladder runs beside "
                                                       "other work)")
    p.add_argument("--store", default=None, type=folder, help="run store folder (default results/ladder)")
    p.set_defaults(func=_cmd_ladder)
