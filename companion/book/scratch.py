"""The scratch store `companion reproduce` retrains into: a folder it makes, marks, and empties of its
own records only.

`reproduce` starts from an empty store so that every run is trained cold. Emptying a folder the user
named is where data gets lost (`--scratch results/ci` once meant deleting the committed records), so:

- a scratch folder is one this command made: it does not exist yet (it is created and marked with
  `MARK`), or it is empty (it is marked), or it carries the mark of an earlier `reproduce`;
- the checkout, any folder above it, and the committed records (`results/` and everything under it)
  are never a scratch folder, marked or not;
- emptying a marked folder removes what the store wrote there and nothing else: its records
  (`RunStore.own_records`) with their weights, and the temporary files of killed writes
  (`RunStore.remove_stale_temporaries`); a file of any other kind stays where it is;
- `--resume` trains into a marked folder without removing anything (it also takes a new or empty one).

The default folder, `_build/reproduce/runs`, made by versions of this command that did not mark it, is
adopted when it holds nothing but files of the store's own forms.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path

from companion.store import TEMP_PREFIX, RunStore

__all__ = ["MARK", "check_scratch", "prepare_scratch"]

MARK = ".companion-reproduce"
_STORE_FILE = re.compile(r"^([0-9a-f]{64}\.(json|pt)|[0-9a-f]{64}\.json(\.[0-9]+)?\.corrupt|"
                         + re.escape(TEMP_PREFIX) + r".*\.tmp)$")


def _mark(folder: Path) -> None:
    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    (folder / MARK).write_text(json.dumps({"made_by": "companion reproduce", "since": stamp}) + "\n")


def _refuse(scratch: Path, why: str) -> ValueError:
    return ValueError(f"--scratch {scratch}: {why}. Name a new or empty folder (reproduce makes and marks it), or "
                      f"leave --scratch out for the default")


def check_scratch(scratch: Path, root: Path, default: Path) -> None:
    """ValueError, naming the folder and the fix, unless `scratch` is one `prepare_scratch` may use.
    Reads only."""
    where, checkout, results = scratch.resolve(), root.resolve(), (root / "results").resolve()
    if where == checkout or where in checkout.parents:
        raise _refuse(scratch, "it is the checkout or holds it")
    if where == results or results in where.parents:
        raise _refuse(scratch, "it is inside results/, the committed records, which reproduce never writes to")
    if where.exists() and not where.is_dir():
        raise _refuse(scratch, "it is a file")
    if where.is_dir() and not (where / MARK).is_file():
        entries = [p.name for p in where.iterdir()]
        foreign = [n for n in entries if not _STORE_FILE.match(n)]
        if entries and (where != default.resolve() or foreign):
            shown = ", ".join(sorted(foreign or entries)[:3])
            raise _refuse(scratch, f"it holds {len(entries)} entries that reproduce did not make there ({shown}"
                                   f"{', …' if len(entries) > 3 else ''}), and it empties its scratch folder first")


def prepare_scratch(scratch: Path, root: Path, default: Path, resume: bool) -> list[str]:
    """Make `scratch` ready to retrain into (see the module docstring); returns the names it removed.
    ValueError (`check_scratch`), before anything is touched, when the folder is not one this command
    may use."""
    check_scratch(scratch, root, default)
    where = scratch.resolve()
    if not where.exists():
        where.mkdir(parents=True)
    if not (where / MARK).is_file():
        _mark(where)  # new, empty, or the default folder of an earlier version holding store files only
    if resume:
        return []
    store, removed = RunStore(where), []
    for rid in store.own_records():
        store.remove(rid)  # the record and its weights
        removed.append(f"{rid}.json")
    return removed + store.remove_stale_temporaries()  # the store's own rule: dead writers' files only
