"""Retrain the committed `ci` records cold and say how the new ones compare: `companion reproduce`.

The book's numbers come from the records in `results/ci/`, which the chapters read without training.
`reproduce(chapters)` retrains every run those chapters read (their whole groups) into an empty
scratch store, then compares:

- **run by run**, every number a record holds (metrics, curves, drift, readouts): equal to the bit, or
  the largest absolute and relative difference and where it is. Two records must agree to the bit
  exactly when their hosts compute alike (`companion.host.same_numerics`: same CPU family and model,
  ISA, BLAS and switches, torch build, threads); elsewhere float rounding differs from the first
  matrix product on, and a trained run may end anywhere its seed's neighbourhood allows;
- **claim by claim**, the chapter's own `decide` on the retrained records against the measures of
  the executed chapters (`book/chapters/scoreboard.json`): verdict equal or not, and the measure's
  difference against its margin, the distance from the committed measure to the nearest threshold
  of its rule (a difference within the margin cannot change the verdict).

It passes (`Report.ok`) when every verdict is equal, every record the chapters read is committed,
every retrained record has the committed one's structure (same keys, same curve lengths, no number
that became NaN), and every record from a host like this one is equal to the bit. A difference on
another host is reported, not failed: that is the stated tolerance, by verdict. The report is
written as JSON and Markdown (`_build/reproduce/`); `--record` also keeps its summary in
`results/reproductions/`, which the book's Reproductions page reads (`--record-report` does it for a
reproduction that already ran, such as the one `make test` makes).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from companion.book.chapter import claims, module_of
from companion.book.claims import load_ledger
from companion.book.display import number
from companion.book.record_compare import compare_records, is_number, margin, numbers
from companion.book.reproduce_sample import changed_run_ids, draw, seed_of
from companion.book.runner import toc_chapters
from companion.book.scratch import check_scratch, prepare_scratch
from companion.cli.values import existing_file, fail, nonnegative_int, positive_int
from companion.experiments.chapters import CHAPTERS, chapter_key, recorded_runs
from companion.host import describe, numerics_key, summary as host_summary
from companion.identity import run_id
from companion.paths import repo_root
from companion.runs import FLUSH_DENORMAL, THREADS, git_commit
from companion.store import RunStore, StoreError
from companion.sweep import run_missing

__all__ = ["REPORT_DIR", "RECORDS_DIR", "ReproductionReport", "compare_records", "numbers", "margin", "record_report",
           "summary_name",
           "reproduce", "markdown", "write", "add_commands"]

REPORT_DIR = Path("_build") / "reproduce"
RECORDS_DIR = Path("results") / "reproductions"
SCOREBOARD = Path("book") / "chapters" / "scoreboard.json"


@dataclass
class ReproductionReport:
    """What `reproduce` found; `ok` and `problems` decide the exit status."""

    chapters: list[str]
    host: dict
    started: str
    commit: str | None
    train_seconds: float = 0.0
    runs: list[dict] = field(default_factory=list)
    claims: list[dict] = field(default_factory=list)
    missing_committed: list[str] = field(default_factory=list)
    sample: dict | None = None  # a sampled reproduction: `Sample.summary()` (None: every run)
    notes: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        out = [f"{c['id']}: verdict {c['committed_verdict']!r} committed, {c['verdict']!r} retrained"
               for c in self.claims if c["verdict"] != c["committed_verdict"]]
        out += [f"{name}: not in results/ci (the chapters read it; commit it)" for name in self.missing_committed]
        out += [f"{r['label']}: {r['structure']}" for r in self.runs if r["structure"]]
        out += [f"{r['label']}: differs on a host that computes like the one that made it (largest relative "
                f"difference {r['largest_rel']:.3g} at {r['where']})"
                for r in self.runs if r["same_host"] and not r["bitwise"] and not r["structure"]]
        return out

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> dict:
        """The report without its per-run rows: what results/reproductions/ keeps."""
        same = [r for r in self.runs if r["same_host"]]
        return {
            "date": self.started[:10], "commit": self.commit, "host": self.host, "host_summary": host_summary(self.host),
            "chapters": self.chapters, "train_seconds": round(self.train_seconds, 1),
            "runs": len(self.runs), "same_host_runs": len(same), "bitwise_equal": sum(r["bitwise"] for r in self.runs),
            "largest_rel": max((r["largest_rel"] for r in self.runs), default=0.0),
            "claims": self.claims, "verdicts_equal": sum(c["verdict"] == c["committed_verdict"] for c in self.claims),
            "ok": self.ok, "problems": self.problems, "sample": self.sample, "notes": self.notes,
        }

    def to_dict(self) -> dict:
        return {**self.summary(), "runs_compared": self.runs, "missing_committed": self.missing_committed}


def _committed_claims(root: Path, chapters: Sequence[str]) -> dict[str, dict]:
    data = json.loads((root / SCOREBOARD).read_text())
    names = {f"chapters/{c}" for c in chapters}
    return {c["id"]: c for c in data["claims"] if c.get("chapter") in names and c["profile"] == "ci"}


def _claims(chapter: str, store) -> list:
    return claims(module_of(chapter), "ci", None, store=store)


def reproduce(chapters: Sequence[str] | None = None, *, jobs: int | None = None, scratch: Path | None = None,
              resume: bool = False, progress: bool = False, root: Path | None = None, sample: bool = False,
              since: str | None = None, sample_seed: int | None = None) -> ReproductionReport:
    """Retrain the `ci` runs of `chapters` (default: every chapter that trains) cold into `scratch`
    (default `_build/reproduce/runs`; a folder it makes and marks, emptied of its own records first unless
    `resume`: `companion.book.scratch`) and compare them with the committed
    records and the executed chapters' claims (module docstring).

    With `sample`, retrain only `companion.book.reproduce_sample.draw`'s sample (one group of every
    experiment, drawn with `sample_seed`, default the commit's `seed_of`, plus the groups of every record
    changed since commit `since`, default the parent commit) and compare those runs; the claims are then
    left to the committed records. Where the parent is not a commit here (a clone of depth 1), every run
    is retrained and the report's notes say why; a `since` given that is not a commit is a ValueError."""
    if jobs is not None and (not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be a whole number >= 1, got {jobs!r}")
    if not sample and (since is not None or sample_seed is not None):
        raise ValueError("--since and --sample-seed choose a sample; add --sample, or drop them")
    root = root or repo_root()
    names = [CHAPTERS[chapter_key(c)][0] for c in chapters] if chapters else toc_chapters(root)
    names = [n for n in names if CHAPTERS[chapter_key(n)][1]]  # chapters 1, 2, 10 train nothing
    default = root / REPORT_DIR / "runs"
    scratch = Path(scratch) if scratch else default
    check_scratch(scratch, root, default)  # every value checked before any work
    changed, notes = None, []
    if sample:
        try:
            changed = changed_run_ids(root, since or "HEAD~1")
        except LookupError as err:
            if since is not None:
                raise ValueError(f"--since {since}: {err}") from None
            notes.append(f"no sample: the records changed since the parent commit cannot be found ({err}); "
                         f"every run is retrained")
    report = ReproductionReport(names, describe("cpu", THREADS, FLUSH_DENORMAL),
                                _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), git_commit())
    report.notes.extend(notes)
    cfgs = every = recorded_runs(names)
    if changed is not None:
        seed = seed_of(report.commit or "uncommitted") if sample_seed is None else sample_seed
        drawn = draw(cfgs, seed, changed, since or "HEAD~1")
        cfgs, report.sample = list(drawn.configs), drawn.summary()
    prepare_scratch(scratch, root, default, resume)
    committed, new = RunStore(root / "results" / "ci", read_only=True), RunStore(scratch)
    start = time.perf_counter()
    run_missing(cfgs, new, "local", progress, {"jobs": jobs})
    report.train_seconds = time.perf_counter() - start
    retrained = {run_id(c) for c in cfgs}
    for cfg in every:
        old = committed.load(cfg)
        if old is None:
            report.missing_committed.append(f"{cfg.experiment}/{cfg.method}/seed {cfg.seed}")
        elif run_id(cfg) in retrained:
            report.runs.append(compare_records(old, new.load(cfg)))

    if report.sample is not None:
        return report  # the claims are read from the committed records (`companion scoreboard --check`)
    ledger, before = load_ledger(), _committed_claims(root, names)
    for name in names:
        for result in _claims(name, RunStore(scratch, read_only=True)):
            if result.id not in before:
                continue
            old = before[result.id]
            old_m = old["by_profile"]["ci"]["ours"] if "by_profile" in old else old["ours"]
            diff = (float(result.measure) - float(old_m)) if is_number(result.measure) and is_number(old_m) else None
            report.claims.append({
                "id": result.id, "chapter": name, "committed_measure": old_m, "measure": result.measure,
                "difference": diff, "margin": margin(ledger[result.id].rule, old_m),
                "committed_verdict": old.get("by_profile", {}).get("ci", {}).get("verdict", old["verdict"]),
                "verdict": result.verdict})
    return report


def markdown(report: dict) -> str:
    """The report as a page a reader can scan: the host, the counts, the claims, the largest differences."""
    lines = [f"# Reproduction of the `ci` records, {report['date']}", "",
             f"Host: {report['host_summary']}. Commit: {report['commit'] or 'unknown'}. "
             f"Chapters: {', '.join(report['chapters'])}. Training took {report['train_seconds'] / 60:.1f} min.", "",
             f"- runs retrained: {report['runs']}; equal to the bit: {report['bitwise_equal']}; from a host that "
             f"computes like the committed records' host: {report['same_host_runs']}",
             f"- largest relative difference of any number of any run: {report['largest_rel']:.3g}",
             f"- verdicts equal: {report['verdicts_equal']} of {len(report['claims'])}" if not report.get("sample") else
             "- verdicts: not retrained in a sample; `companion scoreboard --check` decides them from the committed records",
             f"- result: {'passed' if report['ok'] else 'FAILED'}", ""]
    if report.get("sample"):
        s = report["sample"]
        lines[2:2] = [f"A sample, not the whole proof: {s['groups']} of {s['of_groups']} training groups ({s['runs']} of "
                      f"{s['of_runs']} runs), one of every experiment drawn with seed {s['seed']}, plus the groups of "
                      f"{s['changed_runs']} records changed since {s['base']}. The claims' verdicts are read from the "
                      f"committed records (`companion scoreboard --check`); `companion reproduce` retrains every run.", ""]
    lines[2:2] = [f"Note: {n}" for n in report.get("notes", [])] + ([""] if report.get("notes") else [])
    if report["problems"]:
        lines += ["## Problems", ""] + [f"- {p}" for p in report["problems"]] + [""]
    if report["claims"]:
        lines += ["## Claims", "", "| claim | verdict | committed | retrained | difference | margin |",
                  "|---|---|---|---|---|---|"]
    for c in report["claims"]:
        verdict = c["verdict"] if c["verdict"] == c["committed_verdict"] else f"{c['committed_verdict']} → {c['verdict']}"
        lines.append(f"| {c['id']} | {verdict} | {_fmt(c['committed_measure'])} | {_fmt(c['measure'])} | "
                     f"{_fmt(c['difference'])} | {_fmt(c['margin'])} |")
    worst = sorted(report.get("runs_compared", []), key=lambda r: -r["largest_rel"])[:15]
    if worst and worst[0]["largest_rel"] > 0:
        lines += ["", "## Largest differences, run by run", "", "| run | largest relative | at |", "|---|---|---|"]
        lines += [f"| {r['label']} | {r['largest_rel']:.3g} | {r['where']} |" for r in worst if r["largest_rel"] > 0]
    return "\n".join(lines) + "\n"


def _fmt(v) -> str:
    return "—" if v is None else number(v)


def write(report: ReproductionReport, out: Path, record_dir: Path | None = None) -> list[Path]:
    """The report as `report.json` and `report.md` in `out`; with `record_dir`, its summary as
    `<date>-<cpu vendor>-<commit>.json` there too (what the Reproductions page reads)."""
    out.mkdir(parents=True, exist_ok=True)
    data = report.to_dict()
    paths = [out / "report.json", out / "report.md"]
    paths[0].write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    paths[1].write_text(markdown(data))
    if record_dir is not None:
        record_dir.mkdir(parents=True, exist_ok=True)
        path = record_dir / summary_name(report.summary())
        path.write_text(json.dumps(report.summary(), indent=1, sort_keys=True) + "\n")
        paths.append(path)
    return paths


def summary_name(summary: dict) -> str:
    """`<date>-<cpu vendor>-<8 hex of the host's numerics key>-<commit>.json`: one file per host, kind of
    host and commit (the same machine with another BLAS switch is another host)."""
    key = hashlib.sha256(json.dumps(numerics_key(summary["host"]), sort_keys=True).encode()).hexdigest()[:8]
    vendor = summary["host"].get("cpu", {}).get("vendor", "cpu").lower()
    return f"{summary['date']}-{vendor}-{key}-{(summary['commit'] or 'nocommit')[:7]}.json"


def record_report(report: Path, record_dir: Path, note: str = "") -> Path:
    """Keep the summary of a finished reproduction (its `report.json`, e.g. from `make test`) in
    `record_dir`, as `--record` does at the end of a run: the report without its per-run rows."""
    try:
        data = json.loads(Path(report).read_text())
        summary = {k: v for k, v in data.items() if k not in ("runs_compared", "missing_committed")}
        if summary.get("sample"):
            raise ValueError("it is a sampled reproduction (--sample), which retrained only some runs and decided "
                             "no claim; record a whole one: `companion reproduce --record`")
        summary.update({"note": note} if note else {})
        name = summary_name(summary)
        summary["claims"], summary["ok"]  # noqa: B018  (the keys the page reads)
    except (OSError, ValueError, KeyError, AttributeError) as err:
        raise ValueError(f"{report} is not a reproduction report ({err}); `companion reproduce` writes one to "
                         f"{REPORT_DIR}/report.json.") from None
    record_dir.mkdir(parents=True, exist_ok=True)
    (record_dir / name).write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return record_dir / name


def _cmd(args) -> int:
    root = repo_root()
    if args.note and not args.record_report:
        return fail("reproduce", "--note is kept with --record-report; add it, or drop --note")
    if args.record_report and (args.chapters or args.sample or args.record or args.resume or args.scratch
                               or args.jobs is not None or args.since is not None or args.sample_seed is not None):
        return fail("reproduce", "--record-report retrains nothing, so it takes no chapters and no other option but "
                                 "--note; run the two separately")
    if args.record_report:
        try:
            path = record_report(args.record_report, root / RECORDS_DIR, args.note)
        except ValueError as err:
            print(f"companion reproduce: error: {err}", file=sys.stderr)
            return 2
        print(f"recorded {path.relative_to(root)}; `companion scoreboard` regenerates the Reproductions page")
        return 0
    try:
        if args.sample and args.record:
            raise ValueError("--record keeps a whole reproduction for the Reproductions page; a --sample is not one "
                             "(drop one of the two)")
        report = reproduce(args.chapters or None, jobs=args.jobs, scratch=args.scratch, resume=args.resume,
                           progress=sys.stderr.isatty(), root=root, sample=args.sample, since=args.since,
                           sample_seed=args.sample_seed)
    except (ValueError, LookupError) as err:
        return fail("reproduce", err)
    except (StoreError, RuntimeError) as err:
        print(f"companion reproduce: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted: the runs retrained so far are kept; `companion reproduce --resume` continues.",
              file=sys.stderr)
        return 130
    paths = write(report, root / REPORT_DIR, root / RECORDS_DIR if args.record else None)
    s = report.summary()
    for n in report.notes:
        print(f"reproduce: {n}")
    if report.sample:
        d = report.sample
        print(f"reproduce: a sample of {d['groups']} of {d['of_groups']} groups ({d['runs']} of {d['of_runs']} runs): "
              f"one of every experiment, seed {d['seed']}, and the groups of {d['changed_runs']} records changed "
              f"since {d['base']}; the claims are read from the committed records")
    print(f"reproduce: {s['runs']} runs retrained in {s['train_seconds'] / 60:.1f} min on {s['host_summary']}; "
          f"{s['bitwise_equal']} equal to the bit ({s['same_host_runs']} from a host like the records'); "
          + ("the verdicts are not retrained in a sample." if report.sample else
             f"verdicts equal {s['verdicts_equal']} of {len(s['claims'])}."))
    for problem in report.problems:
        print(f"  problem: {problem}", file=sys.stderr)
    print(f"report: {', '.join(str(p.relative_to(root)) for p in paths)}")
    return 0 if report.ok else 1


def add_commands(sub) -> None:
    """Register `companion reproduce` on the command line."""
    p = sub.add_parser("reproduce", help="retrain the committed ci records cold and compare run by run and claim by claim",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("chapters", nargs="*", metavar="CHAPTER", help="chapters to retrain, e.g. 03 (default: all)")
    p.add_argument("--jobs", type=positive_int, default=None, help="training processes (default: all cores)")
    p.add_argument("--scratch", type=Path, default=None,
                   help=f"where to retrain (default {REPORT_DIR}/runs): a new or empty folder, which reproduce "
                        "marks as its own, or one it marked before; it removes its own records there, nothing else")
    p.add_argument("--resume", action="store_true", help="keep what the scratch store holds (a killed reproduce)")
    p.add_argument("--sample", action="store_true",
                   help="retrain a sample: one training group of every experiment, drawn afresh for each commit, "
                        "plus every run whose record changed since --since (companion/book/reproduce_sample.py)")
    p.add_argument("--since", default=None, metavar="COMMIT",
                   help="with --sample: the commit whose records count as unchanged (default HEAD~1)")
    p.add_argument("--sample-seed", type=nonnegative_int, default=None, metavar="N",
                   help="with --sample: draw with this seed instead of the commit's")
    p.add_argument("--record", action="store_true",
                   help=f"also keep the report's summary in {RECORDS_DIR}/ (the book's Reproductions page)")
    p.add_argument("--note", default="", help="with --record-report: a sentence the Reproductions page shows "
                                              "under the host (what was special about it)")
    p.add_argument("--record-report", type=existing_file, default=None, metavar="REPORT",
                   help=f"retrain nothing: keep the summary of a finished reproduction's report.json (e.g. "
                        f"{REPORT_DIR}/report.json after `make test`) in {RECORDS_DIR}/")
    p.set_defaults(func=_cmd)
