"""Run `make test`'s steps one after another and say what each cost: `make test` calls this.

    python3 tools/steps.py install unit sources ...   # each name is a make target

Each step is `make <target>` (the variables given to the calling make reach it through MAKEFLAGS); after
each one a line gives its minutes and the running total against CI's 90-minute limit, and at the end (or
at the first step that fails, which stops the run as make would) a table of every step. The table is
also written to _build/steps.json ({"steps": [{"step", "minutes", "ok"}], "total_minutes", ...}), so a
clean clone's costs can be read back into the README's cost table (which tests/test_cost_table.py checks
against the steps named here).

Runs on any Python 3, so it needs nothing from .venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

LIMIT_MINUTES = 90.0  # what CI allows `.ci/run`
OUT = Path("_build") / "steps.json"


def run(steps: list[str], make: str = "make", out: Path = OUT, limit: float = LIMIT_MINUTES) -> int:
    rows, start, status = [], time.monotonic(), 0
    for step in steps:
        t0 = time.monotonic()
        code = subprocess.call([make, "--no-print-directory", step])
        minutes = (time.monotonic() - t0) / 60
        rows.append({"step": step, "minutes": round(minutes, 2), "ok": code == 0})
        total = (time.monotonic() - start) / 60
        print(f"== step {step}: {minutes:.1f} min ({'passed' if code == 0 else 'FAILED'}); "
              f"{total:.1f} min so far of the {limit:.0f} CI allows", flush=True)
        if code != 0:
            status = code
            break
    total = (time.monotonic() - start) / 60
    _table(rows, total, limit)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"steps": rows, "total_minutes": round(total, 2), "limit_minutes": limit,
                               "ok": status == 0, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                              indent=1) + "\n")
    return status


def _table(rows: list[dict], total: float, limit: float) -> None:
    width = max([len(r["step"]) for r in rows] + [5])
    print(f"\n{'step':<{width}}  minutes")
    for r in rows:
        print(f"{r['step']:<{width}}  {r['minutes']:7.1f}{'' if r['ok'] else '  FAILED'}")
    print(f"{'total':<{width}}  {total:7.1f}  ({limit - total:.1f} min of headroom to the {limit:.0f}-minute limit)",
          flush=True)


def main(argv: list[str]) -> int:
    if not argv or any(a.startswith("-") for a in argv):
        print("usage: python3 tools/steps.py TARGET [TARGET ...]  (make targets, run in order)", file=sys.stderr)
        return 2
    return run(argv, os.environ.get("MAKE", "make"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
