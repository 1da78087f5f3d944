"""The Reproductions page: every host on which the book's runs were retrained, and what came out.

Reads the summaries in `results/reproductions/*.json` (written by `companion reproduce --record` or
`--record-report`, or assembled from a retraining made elsewhere, with its provenance in `note`) and writes
`book/reproductions.md`: per host the CPU, its ISA, the BLAS, torch, the date and commit, how many runs
were retrained and how many equal the committed records to the bit, how many verdicts are equal, and
the claims whose measure moved most, each against its margin (the distance from the committed measure
to the nearest threshold of its rule). `companion scoreboard` writes it with the scoreboard;
`--check` fails when the committed page is stale.
"""

from __future__ import annotations

import json
from pathlib import Path

from companion.book.display import number
from companion.paths import repo_root

__all__ = ["PAGE", "SUMMARIES", "load_summaries", "build_page"]

PAGE = Path("book") / "reproductions.md"
SUMMARIES = Path("results") / "reproductions"
LARGEST = 5  # claims shown per host, by the share of its margin a difference used


def load_summaries(root: Path | None = None) -> list[dict]:
    """The reproduction summaries, oldest first; a file that is not a summary raises ValueError naming it."""
    root = root or repo_root()
    out = []
    for path in sorted((root / SUMMARIES).glob("*.json")):
        try:
            data = json.loads(path.read_text())
            data["host_summary"], data["claims"], data["date"]  # noqa: B018  (the keys the page needs)
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path} is not a reproduction summary ({err}); write it with `companion reproduce "
                             "--record`.") from None
        out.append({**data, "file": path.name})
    return sorted(out, key=lambda d: (d["date"], d["file"]))


def _share(c: dict) -> float:
    """How much of its margin a claim's difference used (0 when it did not move; inf past the margin)."""
    d, m = c.get("difference"), c.get("margin")
    if not d:
        return 0.0
    return abs(d) / m if m else float("inf")


def _num(v) -> str:
    return "—" if v is None else number(v).replace("-", "−")


def _host_section(s: dict) -> list[str]:
    host = s["host_summary"]
    runs = (f"{s['bitwise_equal']} of {s['runs']} runs equal to the committed records to the bit"
            if s.get("runs") is not None else "runs not compared one by one")
    if s.get("runs") is not None and s.get("same_host_runs") == 0:
        runs += " (another host: compared by verdict)"
    verdicts = f"{s['verdicts_equal']} of {len(s['claims'])} verdicts equal"
    lines = [f"### {s['date']}: {host}", "",
             f"Commit `{(s.get('commit') or 'unknown')[:7]}`; chapters {', '.join(c[:2] for c in s['chapters'])}; "
             f"{runs}; {verdicts}"
             + (f"; training took {s['train_seconds'] / 60:.1f} min" if s.get("train_seconds") else "") + ".", ""]
    if s.get("note"):
        lines += [s["note"], ""]
    moved = sorted((c for c in s["claims"] if c.get("difference")), key=_share, reverse=True)[:LARGEST]
    if moved:
        lines += ["| claim | verdict | committed | retrained | difference | margin |", "|---|---|---|---|---|---|"]
        for c in moved:
            verdict = c["verdict"] if c["verdict"] == c["committed_verdict"] else f"{c['committed_verdict']} → {c['verdict']}"
            lines.append(f"| {c['id']} | {verdict} | {_num(c['committed_measure'])} | {_num(c['measure'])} | "
                         f"{_num(c['difference'])} | {_num(c['margin'])} |")
        lines.append("")
    elif s["claims"]:
        lines += ["Every claim's measure equal to the committed one.", ""]
    return lines


def build_page(root: Path | None = None) -> str:
    """The page's Markdown (module docstring)."""
    summaries = load_summaries(root)
    lines = ["(reproductions)=", "# Reproductions", "",
             "Every number of the book comes from the committed run records in `results/ci/`, so the book "
             "reads the same on any machine. Whether those records can be made again is checked here: "
             "`make reproduce` (part of `make test`, so of every continuous-integration run) retrains every "
             "run the chapters read, from nothing, and compares run by run and claim by claim.", "",
             "A record states the host that computed it: the processor, the instruction set torch dispatched "
             "to, the BLAS and its switches, the torch build and the threads. Where a host computes like the "
             "one that made the records, every number must come out equal to the last bit, and any difference "
             "fails. Elsewhere the order of float sums differs from the first matrix product on, a trained "
             "run ends somewhere else near where it ended before, and the comparison is by verdict: every "
             "verdict must be equal. The tables show, per host, the claims whose measure moved most, each "
             "beside its margin (the distance from the committed measure to the nearest threshold of its "
             "rule; a difference inside the margin cannot change the verdict).", "",
             "Anyone can add a host: `make reproduce` (or `make test`), then `companion reproduce "
             "--record-report _build/reproduce/report.json` keeps its summary in `results/reproductions/`.", ""]
    if not summaries:
        return "\n".join(lines + ["No reproduction has been recorded yet.", ""])
    lines += ["## Hosts", "", "| date | host | runs equal to the bit | verdicts equal |", "|---|---|---|---|"]
    for s in summaries:
        bits = f"{s['bitwise_equal']} of {s['runs']}" if s.get("runs") is not None else "—"
        lines.append(f"| {s['date']} | {s['host_summary']} | {bits} | {s['verdicts_equal']} of {len(s['claims'])} |")
    lines += ["", "## By host", ""]
    for s in summaries:
        lines += _host_section(s)
    return "\n".join(lines).rstrip() + "\n"
