#!/usr/bin/env python3
"""Apply the book's cell convention (companion/book/site/cells.py) to every chapter source in notebooks/.

Idempotent: a second run changes nothing. `--check` only reports the sources that do not follow it.
Each notebook is read, planned and written back at once (indent 1, UTF-8, trailing newline), keeping
cell ids, metadata and every tag the convention does not manage.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from companion.book.site.cells import plan  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report sources that do not follow the convention")
    ap.add_argument("names", nargs="*", help="notebook names (default: every notebooks/*.ipynb)")
    args = ap.parse_args(argv)
    paths = [ROOT / "notebooks" / f"{n}.ipynb" for n in args.names] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    off = []
    for path in paths:
        nb = json.loads(path.read_text())
        new = plan(nb, path.stem)
        if new == nb:
            continue
        off.append(path.name)
        if not args.check:
            path.write_text(json.dumps(new, indent=1, ensure_ascii=False) + "\n")
    if args.check:
        if off:
            print("not following the cell convention (run tools/tag_cells.py): " + ", ".join(off), file=sys.stderr)
            return 1
        print("every chapter source follows the cell convention")
        return 0
    print(f"updated {len(off)} source(s): {', '.join(off) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
