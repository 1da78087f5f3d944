"""`companion claim ID`: one claim of the ledger, computed as its chapter computes it, with its verdict.

The claim's chapter (its `chapter:` in book/claims.yml) names a chapter module
(`companion.book.chapter.module_name`); that module's `decide`, on what its `load` gives, decides every
claim of the chapter as its notebook does (the claims of a chapter share its runs), and the one asked
for is printed: what the source says and its value, our measure in the source's units with its interval,
the preconditions and the verdict. A reader who doubts one number checks it without a notebook.

Exit status: 0 when the claim is printed, whatever its verdict (an item reported, not rebuilt is
printed with its reason, and one the chapter measures at the other profile only as not run at this
scale: those are verdicts, as the scoreboard shows them, not failures); 1 when it cannot be computed here
(runs missing under --no-train, a failed run, a chapter module without `decide`); 2 for a bad
argument (unknown id, seeds, jobs or profile).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path, PurePosixPath

import torch

from companion.book.chapter import claims, module_of
from companion.book.claims import NOT_REBUILT, NOT_RUN, load_ledger, verdict
from companion.book.display import load_dashboard, number, ours_text, rule_words
from companion.cli.values import folder, positive_int, seeds as seeds_text
from companion.paths import repo_root
from companion.experiments.chapters import chapter_key, chapter_runs
from companion.store import RunStore, StoreError
from companion.reading import MissingRuns, stored_record
from companion.sweep import parse_seeds, run_missing

__all__ = ["paper_store", "describe", "add_commands"]

PAPER_STORE = Path("results") / "paper"  # the committed paper-profile records (`companion paper`)


def paper_store() -> Path:
    """Where `--profile paper` reads by default: results/paper in the repository."""
    return repo_root() / PAPER_STORE


def _find(cid: str, ledger: dict) -> str:
    exact = [k for k in ledger if k.lower() == cid.strip().lower()]
    if exact:
        return exact[0]
    padded = re.sub(r"-(\d)$", r"-0\1", cid.strip().upper())  # "S2-6" → "S2-06"
    near = list(dict.fromkeys(([padded] if padded in ledger else [])
                              + difflib.get_close_matches(cid.strip().upper(), list(ledger), n=4, cutoff=0.6)))
    hint = f"; did you mean {', '.join(near)}?" if near else "; the ids are listed in book/claims.yml."
    raise ValueError(f"unknown claim {cid!r}{hint}")


def describe(claim, result=None, units: dict | None = None, scale: str = "") -> list[str]:
    """The lines `companion claim` prints for a ledger `Claim` and its `ClaimResult` (None when the
    item is reported, not rebuilt, or measured at another profile only: not run at this scale);
    `scale` says where it was computed ("ci profile, seeds 0-4")."""
    where = f"{claim.chapter}, section {claim.section}" + (f"; {scale}" if scale else "")
    lines = [f"{claim.id}  ({where})", f"  claim:   {claim.statement}",
             f"  source:  {claim.source} {claim.location}: {claim.source_value}"]
    if result is None and not claim.rebuilt:
        return lines + [f"  verdict: {NOT_REBUILT}", f"  reason:  {claim.reason}"]
    if result is None:  # the chapter measures it at another profile only
        return lines + [f"  measure: {claim.measure}", f"  verdict: {NOT_RUN}",
                        f"  note:    the chapter measures it at the {claim.profile} profile: "
                        f"add --profile {claim.profile}"]
    units = units or {}
    ours, raw = ours_text(result.measure, claim.id, units, result.detail), number(result.measure)
    lines += [f"  measure: {claim.measure}", f"  ours:    {ours}" + (f" (measure {raw})" if raw != ours else "")]
    if result.detail:
        lines.append(f"  detail:  {result.detail}")
    lines.append(f"  rule:    {rule_words(claim.rule, claim.id, units)}")
    for req in claim.requires:
        value = result.preconditions.get(req["id"])
        met = "met" if verdict(req["rule"], value) == "reproduced" else "NOT met"
        lines.append(f"  requires {req['id']} = {number(value)} ({met}): {req['says']}")
    failed = f" (precondition failed: {', '.join(result.failed)})" if result.failed else ""
    return lines + [f"  verdict: {result.verdict}{failed}"]


def _fail(message: str, code: int) -> int:
    print(f"companion claim: error: {message}", file=sys.stderr)
    return code


def _missing_message(err, chapter: str, profile: str, store, explicit_no_train: bool) -> str:
    number = PurePosixPath(chapter).name.split("_", 1)[0]
    if profile == "paper":
        make = f"make them on a GPU with `companion paper {number}` (it stores into results/paper)"
    else:
        make = (f"make them with `companion chapters {PurePosixPath(chapter).name}` or `companion sweep` "
                "(see `companion list`)")
    allow = "drop --no-train" if explicit_no_train else "add --train"
    return (f"{err.found} of {err.total} runs of this chapter are stored in {store or 'the run store'} at the "
            f"{profile} profile; {make}, or {allow} to train the missing ones here.")


def _missing_paper_runs(chapter: str, store, seeds) -> int:
    """How many of the chapter's paper-profile runs `store` lacks (on any device)."""
    cfgs = chapter_runs(chapter_key(PurePosixPath(chapter).name.split("_", 1)[0]), "paper", seeds)
    records = RunStore(store, read_only=True)
    return sum(stored_record(records, c, any_device=True) is None for c in dict.fromkeys(cfgs))


def _read_or_train(module, profile: str, seeds, store, train: bool, jobs: int | None) -> list:
    """The chapter's claims from its stored records; with `train`, the runs its `load` names as missing
    are trained first (one sweep of exactly those configs), then read again. The chapter itself only reads."""
    try:
        return claims(module, profile, seeds, store=store)
    except MissingRuns as err:
        if not train:
            raise
        run_missing(list(dict.fromkeys(err.missing)), RunStore(store, profile=profile), "local", False, {"jobs": jobs})
    return claims(module, profile, seeds, store=store)


def _cmd_claim(args) -> int:
    ledger = load_ledger()
    try:
        cid = _find(args.id, ledger)
        seeds = parse_seeds(args.seeds) if args.seeds else None
    except ValueError as err:
        return _fail(str(err), 2)
    claim = ledger[cid]
    if not claim.rebuilt:
        print("\n".join(describe(claim)))
        return 0
    try:
        module = module_of(claim.chapter)
    except LookupError as err:
        return _fail(str(err), 1)
    if not all(callable(getattr(module, name, None)) for name in ("load", "decide")):
        return _fail(f"{module.__name__} has no load() and decide(), so {cid} cannot be computed on its own yet; "
                     f"execute its chapter ({claim.chapter}) instead.", 1)
    paper = args.profile == "paper"
    store = args.store if args.store is not None else (paper_store() if paper else None)
    train = args.train if args.train is not None else not paper
    if paper and train and not args.yes and not torch.cuda.is_available():
        missing = _missing_paper_runs(claim.chapter, store, seeds)
        if missing:
            return _fail(f"--train at the paper profile would train {missing} missing paper runs of this chapter on "
                         f"this machine's CPU, hours each; `companion chapters {PurePosixPath(claim.chapter).name} "
                         "--profile paper --train` says how long first, `companion paper` makes them on a GPU. To "
                         "train here anyway, add --yes", 2)
    try:
        results = _read_or_train(module, args.profile, seeds, store, train, args.jobs)
    except MissingRuns as err:
        return _fail(_missing_message(err, claim.chapter, args.profile, store, args.train is False), 1)
    except ValueError as err:
        return _fail(str(err), 2)
    except (StoreError, RuntimeError) as err:
        return _fail(str(err), 1)
    found = [r for r in results if r.id == cid]
    if not found and claim.profile == args.profile:
        return _fail(f"{module.__name__}.decide() did not measure {cid} at the {args.profile} profile.", 1)
    scale = f"{args.profile} profile, " + (f"seeds {args.seeds}" if seeds else "the chapter's own seeds")
    print("\n".join(describe(claim, found[0] if found else None, load_dashboard()["units"], scale)))
    return 0


def add_commands(subparsers) -> None:
    """Register `claim` on the `companion` command line."""
    p = subparsers.add_parser(
        "claim", help="compute one claim as its chapter does and print it with its verdict",
        description="Compute one claim of book/claims.yml with its chapter's own functions and print it: the "
                    "source's statement and value, our measure in the source's units with its interval, the "
                    "preconditions and the verdict. A chapter's claims share its runs, so the whole chapter's "
                    "claims are computed (its runs loaded from the store, or trained when missing) and the one "
                    "asked for is printed.")
    p.add_argument("id", help="claim id, e.g. S2-06 (see book/claims.yml or the scoreboard)")
    p.add_argument("--profile", choices=("ci", "paper"), default="ci",
                   help="ci (CPU scale, the rendered book; default) or paper (the sources' scale, read from "
                        "the committed records in results/paper)")
    p.add_argument("--seeds", default=None, type=seeds_text, help="e.g. 0-4 or 0,2,5 (default: the chapter's own seeds)")
    p.add_argument("--store", default=None, type=folder,
                   help="run store folder (default: $COMPANION_RUNS, else the profile's committed records, results/ci or "
                        "results/paper)")
    p.add_argument("--jobs", type=positive_int, default=None,
                   help="training processes when runs are missing (default: all cores)")
    p.add_argument("--train", action=argparse.BooleanOptionalAction, default=None,
                   help="--train trains missing runs (the default at ci); --no-train reads stored runs only and "
                        "says how many are missing (the default at paper)")
    p.add_argument("--yes", action="store_true", help="with --train at paper on a machine without a GPU: go on")
    p.set_defaults(func=_cmd_claim)
