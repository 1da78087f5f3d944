"""The `paper` profile as the book reads it: committed records in `results/paper/`, never trained here.

`companion paper CHAPTER` makes a chapter's paper-profile runs on a GPU and writes their records
(metrics, curves and readouts; no weights) to `results/paper/`. A chapter executed at `ci` shows its
paper-profile results beside its own from those records:

- `coverage(chapter)`: how many of the runs the chapter reads at `paper` the folder holds;
- `paper_claims(module, chapter)`: the chapter's claims at `paper` (its own `claims` function, which
  reads records and trains nothing), or None while runs are missing;
- `available(chapter)`: the stored paper records among those the chapter reads (a partial set, for
  tables that can show what exists, e.g. Chapter 3's first comparisons);
- `paper_table(module, chapter)`: the verdict table at `paper`, or None;
- `status_text(chapter)`: one sentence for the chapter's page ("not run at this scale: 12 of 120
  runs …");
- `measures(root)`: {claim id: measure} over every chapter whose paper runs are complete, with the
  coverage of the others: the scoreboard's paper column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from companion.book.chapter import claims, module_of
from companion.book.claims import verdict_table
from companion.book.display import load_dashboard, ours_text
from companion.book.predictions import load_predictions, score, sentence, when
from companion.experiments.chapters import CHAPTERS, chapter_key, chapter_runs
from companion.host import machine
from companion.identity import run_id
from companion.paths import repo_root
from companion.store import RunStore
from companion.reading import stored_record

__all__ = ["PAPER_DIR", "Coverage", "paper_store", "coverage", "available", "provenance", "status_text", "status_markdown",
           "paper_claims", "predictions_text",
           "paper_table", "measures", "older_runs", "OLDER_DIR"]

PAPER_DIR = Path("results") / "paper"


@dataclass(frozen=True)
class Coverage:
    """`found` of the `total` runs a chapter reads at `paper` are in the paper store."""

    chapter: str
    found: int
    total: int

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.found == self.total

    def words(self) -> str:
        return f"{self.found} of {self.total} paper-profile runs"


def paper_store(root: Path | None = None):
    """The committed paper-profile records, read-only."""
    return RunStore((root or repo_root()) / PAPER_DIR, read_only=True)


def coverage(chapter: str, root: Path | None = None) -> Coverage:
    """How many of the runs `chapter` reads at `paper` are stored (made on any device)."""
    key = chapter_key(chapter)
    store = paper_store(root)
    cfgs = chapter_runs(key, "paper")
    found = sum(stored_record(store, c, any_device=True) is not None for c in cfgs)
    return Coverage(key, found, len(cfgs))


def available(chapter: str, root: Path | None = None) -> list:
    """The records the paper store holds among the runs `chapter` reads at `paper`, in the chapter's order."""
    store = paper_store(root)
    found = (stored_record(store, c, any_device=True) for c in chapter_runs(chapter, "paper"))
    return [r for r in found if r is not None]


def status_text(chapter: str, root: Path | None = None) -> str:
    """The chapter's paper-profile status in one sentence, for its page."""
    cov = coverage(chapter, root)
    if cov.total == 0:
        return "This chapter trains nothing; its checks are exact and do not depend on the profile."
    where = f"`{PAPER_DIR.as_posix()}/`"
    made = provenance(available(chapter, root)) if cov.found else ""
    if cov.complete:
        return f"All {cov.total} paper-profile runs are in {where} ({made}); the verdicts at that scale are below."
    return (f"Not run at this scale yet: {cov.words()} are in {where}{f' ({made})' if made else ''}. "
            f"`companion paper {cov.chapter}` makes the missing ones on a GPU, a window at a time.")


def predictions_text(chapter: str, root: Path | None = None) -> str:
    """The chapter's predictions at `paper` ("" if none), in its claims' units, each scored once its
    records are complete, with when they were committed relative to its records (`predictions.when`)."""
    key = chapter_key(chapter)
    name = CHAPTERS[key][0]
    mine = [p for p in load_predictions(root).values() if p.chapter == name]
    if not mine:
        return ""
    units = load_dashboard()["units"]
    results = {r.id: r for r in (paper_claims(module_of(key), key, root) or [])}
    lines = [f"{p.claim} " + sentence(p, score(p, results[p.claim].measure, results[p.claim].verdict)
                                      if p.claim in results else None,
                                      fmt=lambda x, cid=p.claim: ours_text(x, cid, units))
             for p in mine]
    ids = [run_id(c) for c in chapter_runs(key, "paper")]
    return f" Its predictions at this scale, {when(name, ids, mine[0].made, root)}: " + "; ".join(lines) + "."


def status_markdown(chapter: str, root: Path | None = None):
    """`status_text` as Markdown, for `{glue:md}` (its code spans render as code, in plain weight), with the
    chapter's predictions at that scale and their scores (`predictions_text`)."""
    from IPython.display import Markdown

    return Markdown(status_text(chapter, root) + predictions_text(chapter, root))


def provenance(records) -> str:
    """Where and when records were made: "made on NVIDIA H200 (torch 2.11.0), 2026-12-01 to 2026-12-03"."""
    machines = sorted({f"{machine(r.host, r.device)} (torch {r.torch_version})" for r in records})
    days = sorted({r.finished_at[:10] for r in records if r.finished_at})
    when = "" if not days else (f", {days[0]}" if len(days) == 1 else f", {days[0]} to {days[-1]}")
    return f"made on {', '.join(machines)}{when}" if machines else ""


def paper_claims(module, chapter: str, root: Path | None = None):
    """The chapter's claims at `paper` from the committed records (its `decide`, through
    `companion.book.chapter.claims`), or None while any run is missing (`coverage`)."""
    if not coverage(chapter, root).complete:
        return None
    return claims(module, "paper", store=paper_store(root))


def measures(root: Path | None = None) -> tuple[dict[str, dict], dict[str, Coverage]]:
    """({claim id: {measure, detail, preconditions}} of every chapter complete at `paper`,
    {notebook name: Coverage} of every chapter that trains)."""
    found, cover = {}, {}
    for key, (name, blocks) in CHAPTERS.items():
        if not blocks:
            continue
        cov = coverage(key, root)
        cover[name] = cov
        if cov.complete:
            for r in paper_claims(module_of(key), key, root):
                found[r.id] = {"measure": r.measure, "detail": r.detail, "preconditions": r.preconditions}
    return found, cover


def paper_table(module, chapter: str, root: Path | None = None):
    """The chapter's verdict table at `paper` (`claims.verdict_table`), or None while runs are missing."""
    results = paper_claims(module, chapter, root)
    return None if results is None else verdict_table(results)


OLDER_DIR = PAPER_DIR / "older"  # run summaries made before records were committed (single seeds, older code)


def older_runs(experiments, root: Path | None = None):
    """(table, provenance) of the older paper-profile run summaries (`results/paper/older/*.json`) of
    `experiments`: one row per run (experiment, method, seed, the split metrics the chapter reads, wall
    time, what it changed from the profile), and one sentence saying where, when and by what code
    they were made and what they are not. (None, "") when there is none."""
    rows, sources = [], []
    for path in sorted(((root or repo_root()) / OLDER_DIR).glob("*.json")):
        data = json.loads(path.read_text())
        runs = [r for r in data["runs"] if r["experiment"] in experiments]
        if not runs:
            continue
        sources.append(f"{len(runs)} run{'s' if len(runs) != 1 else ''} made on one {data['machine']} (torch "
                       f"{data['torch']}) on {data['date']} by this package at commit `{data['commit']}`. "
                       f"{data['note']}")
        for r in runs:
            row = {"experiment": r["experiment"], "method": r["method"], "seed": r["seed"]}
            for split, metrics in r["metrics"].items():
                row.update({f"{split}.{k}": v for k, v in metrics.items() if k in ("acc", "mse", "seq_acc")})
            rows.append({**row, "wall time (s)": r["wall_time"], "changed": ", ".join(r.get("overrides", [])) or "—"})
    if not rows:
        return None, ""
    return pd.DataFrame(rows), " ".join(sources)
