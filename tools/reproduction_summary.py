#!/usr/bin/env python3
"""A reproduction summary (results/reproductions/) for a retraining made where `companion reproduce`
did not run: from the scoreboard the book committed and the scoreboard the retrained book wrote.

Used for the retrainings of commit 14ce3bd (before run records were committed): its committed
scoreboard against the one `make book` wrote on another host. Claims are compared as
`companion reproduce` compares them (verdict, difference, margin); runs, when two record folders
of the same code are given, are compared one by one by `compare_records`.

    python tools/reproduction_summary.py --committed old.json --retrained new.json --host host.json \\
        --date 2026-12-02 --commit 14ce3bd --note "…" --out results/reproductions/NAME.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from companion.book.claims import load_ledger  # noqa: E402
from companion.book.reproduce import compare_records, margin  # noqa: E402
from companion.host import summary  # noqa: E402

CHAPTERS_THAT_TRAIN = ("03", "04", "05", "06", "07", "08", "09")


def claims(committed: dict, retrained: dict) -> list[dict]:
    ledger = load_ledger()
    new = {c["id"]: c for c in retrained["claims"]}
    out = []
    for c in committed["claims"]:
        chapter = c.get("chapter", "").removeprefix("chapters/")
        if c["profile"] != "ci" or chapter[:2] not in CHAPTERS_THAT_TRAIN or c["id"] not in new or c["id"] not in ledger:
            continue
        old_m, m = c["ours"], new[c["id"]]["ours"]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old_m, m))
        out.append({"id": c["id"], "chapter": chapter, "committed_measure": old_m, "measure": m,
                    "difference": (m - old_m) if numeric else None, "margin": margin(ledger[c["id"]].rule, old_m),
                    "committed_verdict": c["verdict"], "verdict": new[c["id"]]["verdict"]})
    return out


def runs(committed_dir: Path, retrained_dir: Path) -> list[dict]:
    """Records of the same ids in two folders (any schema: read as plain JSON, compared by their numbers)."""
    from types import SimpleNamespace

    def load(path: Path):
        d = json.loads(path.read_text())
        cfg = SimpleNamespace(experiment=d["config"]["experiment"], method=d["config"]["method"])
        return SimpleNamespace(run_id=d["run_id"], seed=d["seed"], config=cfg, host=d.get("host"), metrics=d["metrics"],
                               curves=d["curves"], drift=d["drift"], readouts=d.get("readouts", {}))

    out = []
    for path in sorted(committed_dir.glob("*.json")):
        other = retrained_dir / path.name
        if other.is_file():
            out.append(compare_records(load(path), load(other)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--committed", type=Path, required=True, help="the scoreboard.json the book committed")
    ap.add_argument("--retrained", type=Path, required=True, help="the scoreboard.json of the retrained book")
    ap.add_argument("--host", type=Path, required=True, help="JSON: the retraining host, as companion.host.describe")
    ap.add_argument("--runs", type=Path, nargs=2, metavar=("COMMITTED_DIR", "RETRAINED_DIR"),
                    help="two folders of records of the same ids, compared one by one")
    ap.add_argument("--date", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--train-seconds", type=float, default=0.0)
    ap.add_argument("--note", default="")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    host = json.loads(args.host.read_text())
    rows = claims(json.loads(args.committed.read_text()), json.loads(args.retrained.read_text()))
    compared = runs(*args.runs) if args.runs else None
    data = {"date": args.date, "commit": args.commit, "host": host, "host_summary": summary(host),
            "chapters": sorted({c["chapter"] for c in rows}), "train_seconds": args.train_seconds,
            "runs": len(compared) if compared is not None else None,
            "same_host_runs": sum(r["same_host"] for r in compared) if compared is not None else None,
            "bitwise_equal": sum(r["bitwise"] for r in compared) if compared is not None else None,
            "largest_rel": max((r["largest_rel"] for r in compared), default=0.0) if compared else None,
            "claims": rows, "verdicts_equal": sum(c["verdict"] == c["committed_verdict"] for c in rows),
            "ok": all(c["verdict"] == c["committed_verdict"] for c in rows), "problems": [], "note": args.note}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {data['verdicts_equal']} of {len(rows)} verdicts equal"
          + (f", {data['bitwise_equal']} of {data['runs']} runs equal to the bit" if compared is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
