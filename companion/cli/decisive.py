"""`companion decisive`: run each decisive search (`companion.experiments.decisive`) into `results/decisive`,
rung by rung in order, and stop a search at the first rung where its claim's precondition holds;
`--status` prints what each search has tried, training nothing.

Resumable by construction: a finished group is a stored record per seed, and the next call skips it. One
worker by default (`--jobs`), so a search runs in the background beside other work.
"""

from __future__ import annotations

from companion.cli.training import train_missing
from companion.cli.values import fail, folder, positive_int
from companion.experiments.decisive import SEARCHES, failed_early, first_holding, rung_configs, weakest_first
from companion.paths import decisive_root
from companion.store import RunStore

__all__ = ["add_commands"]


def _rung(claim: str, row: dict) -> str:
    """"S3-04/4x", or "S3-04/passkey-lm/1x" for a rung of another experiment than the search's own."""
    other = "" if row["experiment"] == SEARCHES[claim].experiment else f"{row['experiment']}/"
    return f"{claim}/{other}{row['factor']}x"


def _line(claim: str, row: dict) -> str:
    search = SEARCHES[claim]
    value = "—" if row["value"] is None else f"{row['value']:.2f}"
    return (f"{_rung(claim, row)} ({row['steps']} updates): {row['found']} of {row['total']} runs; "
            f"{search.precondition} {value}{' (holds)' if row['holds'] else ''}"
            f"{' (fails: a run below the line, the rest not made)' if failed_early(row) else ''}")


def _cmd_decisive(args) -> int:
    claims = [c.strip() for c in args.only.split(",") if c.strip()] if args.only is not None else list(SEARCHES)
    unknown = [c for c in claims if c not in SEARCHES]
    if unknown or not claims:
        what = f"unknown search {unknown[0]!r}" if unknown else f"--only {args.only!r} names no search"
        return fail("decisive", f"{what}; valid: {', '.join(SEARCHES)}")
    store = RunStore(args.store or decisive_root(), read_only=args.status)
    for claim in claims:
        while True:
            tried, found = first_holding(claim, store.load)
            last = tried[-1]
            ended = last["found"] == last["total"] or failed_early(last)
            if args.status or found is not None or ended:
                for row in tried:
                    print(_line(claim, row))
                if found is None and not args.status and ended:
                    rungs = ", ".join(f"{e} {f}×" for e, f in SEARCHES[claim].rungs)
                    print(f"{claim}: no rung ({rungs} the ci updates) meets {SEARCHES[claim].precondition}; "
                          "the claim stays inconclusive.")
                break
            print(f"{_rung(claim, last)}: making {last['total'] - last['found']} of {last['total']} runs", flush=True)
            cfgs = rung_configs(claim, last["factor"], last["experiment"], compare=last["holds"])
            if SEARCHES[claim].falls and not last["holds"]:
                cfgs = weakest_first(claim, tried, cfgs, store.load)
            code = train_missing("decisive", cfgs, store, args.jobs)
            if code:
                return code
    return 0


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("decisive", help="run the decisive searches (resumable) to the first rung where each "
                                               "claim's precondition holds, or print what they tried")
    p.add_argument("--status", action="store_true", help="print each search's rungs; train nothing")
    p.add_argument("--only", default=None, help="comma-separated claims (default all): " + ", ".join(SEARCHES))
    p.add_argument("--jobs", type=positive_int, default=1, help="worker processes (default 1)")
    p.add_argument("--store", default=None, type=folder, help="run store folder (default results/decisive)")
    p.set_defaults(func=_cmd_decisive)
