"""`companion paper CHAPTER`: make a chapter's missing `paper`-profile runs inside one GPU window.

The GPU this book can borrow comes for a few minutes at a time, on another software stack (torch 2.11,
Python 3.12, no Jupyter), so the `paper` profile is made in pieces and committed as records:

1. the chapter's paper configs, in the order worth a GPU first (`companion.experiments.chapters`),
   less those already in the store (`results/paper/` by default, records made on any device count);
2. grouped as their configs' recipe says (`plan_groups`, `run_group`: seeds stacked, one process, one GPU);
3. before a group starts, its time is estimated from three short probes of that group (2 and 10
   updates, and 2 with an evaluation after each; nothing stored): the cost of an update, the fixed
   cost (building the models, the first and the final evaluation) and the cost of an intermediate
   evaluation (`estimate_group`). A group whose estimate does not fit what is left of `--minutes`
   is not started, and the window stops cleanly;
4. each finished group's records (JSON with their readouts, no weights) are written at once, so a
   window killed mid-group loses that group only, and the next window continues where it stopped;
5. the window is logged (`windows.jsonl`: machine, versions, what ran with estimated and actual
   seconds, what remains) and the log's table is rewritten in the store's README.md.

It imports no notebook or plotting library, so `PYTHONPATH=. python -m companion.cli.paper 03` runs
where the package runs. Copy the store folder back and commit it; the chapters read it
(`companion.book.paper_status`), training nothing.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

import torch

from companion.cli.values import Parser, device as device_text, fail, folder, positive_minutes, seeds as seeds_text
from companion.config import apply_overrides, config_to_dict
from companion.executors import plan_groups
from companion.experiments import get_experiment
from companion.experiments.chapters import CHAPTERS, chapter_key, chapter_runs, paper_runs
from companion.paths import repo_root
from companion.preflight import check_runs
from companion.runs import _flat, git_commit, machine_name, run_group
from companion.store import RunStore
from companion.reading import stored_record
from companion.sweep import parse_seeds
from companion.tasks import make_task
from companion.train import total_steps

__all__ = ["DEFAULT_ROOT", "run_paper", "estimate_group", "estimate_total", "relative_cost", "missing_runs", "add_commands", "main"]

MARGIN_S = 20.0  # left unused at the end of a window: writing records, copying them back
README_START, README_END = "<!-- windows:start -->", "<!-- windows:end -->"


def default_root() -> Path:
    return repo_root() / "results" / "paper"


DEFAULT_ROOT = "results/paper"


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: no CUDA device here; use --device cpu (tiny checks) or auto.")
    return device


def missing_runs(chapter: str, store, *, seeds: Sequence[int] | None = None, extra: bool = True,
                 overrides: Sequence[str] = ()) -> tuple[list, int]:
    """(the chapter's paper configs not in `store` on any device, in window order; how many it has)."""
    cfgs = [apply_overrides(c, overrides) for c in paper_runs(chapter, seeds, extra=extra)]
    return [c for c in cfgs if stored_record(store, c, any_device=True) is None], len(cfgs)


def _total_updates(cfg) -> int:
    return total_steps(make_task(cfg.task), cfg.train)


def estimate_group(group: list, probe: Callable[[list, int, bool], float] | None = None) -> dict:
    """Seconds the group should take, from three probes `probe(group, k, evaluate)` (default: train the
    group for k updates, nothing stored; with `evaluate`, an evaluation after every update): k = 2 and
    10 without evaluations give the cost of an update (the slope) and the fixed cost (the intercept:
    building the models, the evaluation at step 0 and the final one, which reads every point); k = 2
    with evaluations adds one intermediate evaluation, which reads the task's `eval_points` only. The
    estimate is per-update × updates + fixed + intermediate × (evaluations − 2), times 1.15.

    Two earlier readings overstated a GOTU `paper` group on an H200 (588–624 s against about 190 s
    from its measured parts, `benchmarks/results/paper-step-h200.json`): every evaluation counted at
    the fixed cost (a whole final evaluation and the build), and a floor of half the mean probe time
    on the slope, which the build's seconds inflated. The slope now has no floor but zero, over eight
    updates, after a warm-up probe whose time is not counted."""
    probe = probe or _probe
    probe(group, 1, False)  # warm-up, not counted: the device's first kernels of these shapes (CUDA
    # context, cuBLAS and attention kernel selection) cost more than any later update, and a first
    # probe that pays them reads as a flat slope (measured: 11 s estimated, 92 s taken)
    w2, w10, w2e = probe(group, 2, False), probe(group, 10, False), probe(group, 2, True)
    per_update = max((w10 - w2) / 8, 0.0)
    fixed = max(w2 - 2 * per_update, 0.0)
    intermediate = max(w2e - w2, 0.0)
    cfg = group[0]
    updates = _total_updates(cfg)
    evals = len({0, updates} | (set(range(cfg.train.eval_every, updates + 1, cfg.train.eval_every))
                                if cfg.train.eval_every else set()))
    return {"seconds": 1.15 * (per_update * updates + fixed + intermediate * max(evals - 2, 0)),
            "per_update": per_update, "fixed": fixed, "intermediate": intermediate, "updates": updates,
            "evaluations": evals}


def relative_cost(cfg) -> float:
    """A rough relative training cost of one run, only to order a sweep longest first: updates ×
    batch × width² × layers × tokens per sample (the task's `seq_len`, `n_bits` + 1, else 64).
    An error in it costs idle time at the end of the sweep, never a different result."""
    params = dict(cfg.task.params)
    tokens = params.get("seq_len") or (params["n_bits"] + 1 if "n_bits" in params else 64)
    steps = cfg.train.steps or cfg.train.epochs * 100
    return float(steps * cfg.train.batch_size * cfg.model.d_model ** 2 * cfg.model.n_layers * tokens)


def estimate_total(groups: list[list], estimate=None) -> tuple[float, float]:
    """(seconds to train every group here, seconds of the first): the first group probed as a window
    probes it (`estimate_group`), the others scaled from it by their `relative_cost`. What a command
    says before it trains a paper profile on a CPU."""
    first = (estimate or estimate_group)(groups[0])["seconds"]
    unit = first / sum(relative_cost(c) for c in groups[0])
    return unit * sum(relative_cost(c) for g in groups for c in g), first


def _probe(group: list, k: int, evaluate: bool = False) -> float:
    short = [replace(c, readouts=(), train=replace(c.train, steps=k, epochs=0, eval_every=1 if evaluate else 0))
             for c in group]
    start = time.perf_counter()
    run_group(short)
    return time.perf_counter() - start


def group_label(group: list) -> str:
    """"experiment/method seeds 0,1,…", with what the group's config sets apart from its method's preset
    in brackets (a `PAPER_EXTRA` mask layout, a `--set` override), so two groups never read alike."""
    cfg = group[0]
    label = f"{cfg.experiment}/{cfg.method} seeds {','.join(str(c.seed) for c in group)}"
    try:
        preset = get_experiment(cfg.experiment).config(cfg.profile, cfg.method, cfg.seed, [])
    except (KeyError, ValueError):  # a config no preset makes: the label stays plain
        return label
    mine, base = _flat(config_to_dict(cfg)), _flat(config_to_dict(preset))
    diff = [f"{k}={json.dumps(mine[k]) if not isinstance(mine[k], str) else mine[k]}" for k in sorted(mine)
            if k not in ("seed", "device") and mine[k] != base.get(k)]
    return label + (f" [{', '.join(diff)}]" if diff else "")


def _versions() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__, "git_commit": git_commit()}


def run_paper(chapter: str, *, minutes: float = 9.0, root: str | Path | None = None, seeds: Sequence[int] | None = None,
              device: str = "auto", extra: bool = True, overrides: Sequence[str] = (),
              dry_run: bool = False, log: Callable[[str], None] = print,
              clock: Callable[[], float] = time.monotonic, estimate=estimate_group) -> dict:
    """Make the chapter's missing paper runs that fit in `minutes`; returns the window's summary
    (what ran, estimated and actual seconds, what remains). See the module docstring."""
    start = clock()
    key = chapter_key(chapter)
    store = RunStore(root or default_root())
    device = resolve_device(device)
    todo, total = missing_runs(key, store, seeds=seeds, extra=extra, overrides=overrides)
    todo = [replace(c, device=device) for c in todo]
    summary = {"chapter": key, "started": _now(), "machine": machine_name(device), "device": device, **_versions(),
               "minutes": minutes, "total": total, "stored_before": total - len(todo), "ran": [], "stopped": None}
    log(f"chapter {key}: {total - len(todo)} of {total} paper runs stored in {store.root}; {len(todo)} to make "
        f"on {summary['machine']} within {minutes:g} min.")
    if todo and not dry_run:
        store.check_writable()
        store.remove_stale_temporaries()
    budget = 60.0 * minutes - MARGIN_S
    wanted = {store.path(c).stem for c in todo}
    for group in plan_groups(todo):
        label = group_label(group)
        if dry_run:
            log(f"  would run {label}")
            continue
        est = estimate(group)
        left = budget - (clock() - start)
        if est["seconds"] > left:
            summary["stopped"] = f"{label}: estimated {est['seconds']:.0f} s, {max(left, 0):.0f} s left"
            log(f"  stop before {summary['stopped']}.")
            break
        t0 = clock()
        records = [r for r in run_group(group) if store.load(r.run_id) is None]  # a stored record stays as it is
        for rec in records:
            store.save(rec)  # records only: weights never enter results/paper
        took = clock() - t0
        summary["ran"].append({"group": label, "run_ids": [r.run_id for r in records], "estimated_s": round(est["seconds"], 1),
                               "seconds": round(took, 1)})
        log(f"  {label}: {took:.0f} s (estimated {est['seconds']:.0f} s)")
        summary["remaining"] = len(wanted - {i for g in summary["ran"] for i in g["run_ids"]})
        summary["finished"] = _now()
        _log_window(store.root, summary)  # after every group: a window killed later keeps its log
    summary["remaining"] = len(wanted - {i for g in summary["ran"] for i in g["run_ids"]})
    summary["finished"] = _now()
    if not dry_run:
        _log_window(store.root, summary)
    log(f"chapter {key}: {summary['remaining']} paper runs remain.")
    return summary


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _log_window(root: Path, summary: dict) -> None:
    """Write the window's line of `windows.jsonl` (replacing its earlier line, the same `started`) and
    the README table."""
    path = Path(root) / "windows.jsonl"
    rows = [r for r in window_rows(Path(root)) if r.get("started") != summary["started"]]
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in [*rows, summary]), encoding="utf-8")
    os.replace(tmp, path)
    write_readme_table(Path(root))


def window_rows(root: Path) -> list[dict]:
    """The window log, one dict per window; a line that is not JSON raises ValueError naming it."""
    path = Path(root) / "windows.jsonl"
    rows = []
    if path.is_file():
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    raise ValueError(f"{path}:{i} is not a JSON line; fix or delete that line (the records are "
                                     "unaffected).") from None
    return rows


def write_readme_table(root: Path) -> None:
    """Rewrite the table of windows between the markers of `root`/README.md (added when absent)."""
    lines = ["| Finished (UTC) | Chapter | Machine | torch | Runs made | Seconds (estimated) | Remaining | Stopped before |",
             "|---|---|---|---|---|---|---|---|"]
    for w in window_rows(root):
        made = sum(len(g["run_ids"]) for g in w["ran"])
        secs = f"{sum(g['seconds'] for g in w['ran']):.0f} ({sum(g['estimated_s'] for g in w['ran']):.0f})"
        lines.append(f"| {w['finished']} | {w['chapter']} | {w['machine']} | {w['torch']} | {made} | {secs} | "
                     f"{w['remaining']} | {w['stopped'] or '—'} |")
    block = "\n".join([README_START, *lines, README_END])
    readme = Path(root) / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else "# Paper-profile records\n\n"
    if README_START in text and README_END in text:
        head, rest = text.split(README_START, 1)
        text = head + block + rest.split(README_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Windows\n\n" + block + "\n"
    readme.write_text(text, encoding="utf-8")


def status_lines(root: str | Path | None = None) -> list[str]:
    """One line per chapter that trains: how many of its paper runs `root` holds."""
    store = RunStore(root or default_root(), read_only=True)
    out = []
    for key, (name, blocks) in CHAPTERS.items():
        if not blocks:
            continue
        cfgs = chapter_runs(key, "paper")
        have = sum(stored_record(store, c, any_device=True) is not None for c in cfgs)
        out.append(f"{key} {name}: {have} of {len(cfgs)} paper runs")
    return out


def _cmd_paper(args) -> int:
    try:
        if args.status:
            print("\n".join(status_lines(args.store)))
            return 0
        if args.chapter is None:
            return fail("paper", "name a chapter (e.g. 03), or --status")
        chapter_key(args.chapter)
        seeds = parse_seeds(args.seeds) if args.seeds else None
        overrides = list(args.set)
        todo, _ = missing_runs(args.chapter, RunStore(args.store or default_root(), read_only=True), seeds=seeds,
                               extra=not args.no_extra, overrides=overrides)
        check_runs([replace(c, device=resolve_device(args.device)) for c in todo])
    except ValueError as err:
        return fail("paper", err)
    if todo and resolve_device(args.device) == "cpu" and not (args.yes or args.dry_run):
        return fail("paper", f"{len(todo)} paper runs of chapter {chapter_key(args.chapter)} are missing and this "
                             f"window would train them on the CPU for up to {args.minutes:g} min (--minutes), where a "
                             "paper run takes hours; on a GPU it uses CUDA by itself. To train here anyway, add --yes")
    try:
        run_paper(args.chapter, minutes=args.minutes, root=args.store, seeds=seeds, device=args.device,
                  extra=not args.no_extra, overrides=overrides, dry_run=args.dry_run)
    except ValueError as err:
        return fail("paper", err)
    except OSError as err:
        return fail("paper", err, 1)
    return 0


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("chapter", nargs="?", help="chapter number or notebook name, e.g. 03 or 03_boolean_extrapolation")
    p.add_argument("--minutes", type=positive_minutes, default=9.0, help="the window: no group starts that would "
                   "not end inside it (default 9, for a 15-minute lease with start-up and copying)")
    p.add_argument("--store", default=None, type=folder,
                   help=f"record folder (default <repo>/{DEFAULT_ROOT}, committed)")
    p.add_argument("--seeds", default=None, type=seeds_text, help="seeds instead of the chapter's own, e.g. 0-9")
    p.add_argument("--device", default="auto", type=device_text, help="auto (CUDA when present), cuda, cuda:1, cpu")
    p.add_argument("--no-extra", action="store_true", help="only the runs the chapter reads (skip PAPER_EXTRA)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override applied to every config (changes the run ids; for tiny checks)")
    p.add_argument("--dry-run", action="store_true", help="list the groups, train nothing")
    p.add_argument("--status", action="store_true", help="how many paper runs each chapter has in the store")
    p.add_argument("--yes", action="store_true", help="train on the CPU (a paper run there takes hours)")


EPILOG = """\
Continue a partial paper profile on any GPU: check out the same commit, run
`PYTHONPATH=. python -m companion.cli.paper 03 --minutes 9` (one process per GPU), copy
results/paper/ back and commit it; the next window skips what is stored. On a Slurm cluster,
`companion sweep <grid> --profile paper --executor slurm --store results/paper` makes the same records
(weights beside them are ignored by git). `--status` counts what each chapter has."""


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("paper", help="make a chapter's missing paper-profile runs within one GPU window",
                              description=__doc__.split("\n\n")[0], epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(p)
    p.set_defaults(func=_cmd_paper)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m companion.cli.paper", description=__doc__.split("\n\n")[0],
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(parser)
    return _cmd_paper(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
