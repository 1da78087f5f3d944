"""No command deletes what it did not make. Each deleting path (reproduce's scratch folder, pruning the
committed records, a store's `remove`) is given a user's file, the committed records and the checkout
itself, and they are found intact; what the command did make is removed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from companion.book import runner
from companion.book.scratch import MARK, prepare_scratch
from companion.cli import main
from companion.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted((ROOT / "results" / "ci").glob("*.json"))[:3]


def _digest(*folders: Path) -> dict:
    out = {}
    for folder in folders:
        for dirpath, _, files in os.walk(folder):
            for name in files:
                path = os.path.join(dirpath, name)
                out[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


@pytest.fixture
def checkout(tmp_path):
    """A small checkout: _toc.yml, three committed records in results/ci, a source file."""
    root = tmp_path / "book"
    (root / "results" / "ci").mkdir(parents=True)
    (root / "_toc.yml").write_text("format: jb-book\n")
    (root / "notes.md").write_text("a page\n")
    for path in COMMITTED:
        shutil.copy(path, root / "results" / "ci" / path.name)
    return root


def _default(root: Path) -> Path:
    return root / "_build" / "reproduce" / "runs"


@pytest.mark.parametrize("where", ["checkout", "above the checkout", "results", "results/ci", "new, under results",
                                   "empty, under results", "a user's folder", "a file"])
def test_a_scratch_folder_that_is_not_its_own_is_refused_and_left_whole(checkout, where, tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "thesis.tex").write_text("months of work\n")
    a_file = tmp_path / "plain"
    a_file.write_text("x\n")
    (checkout / "results" / "empty").mkdir()
    scratch = {"checkout": checkout, "above the checkout": tmp_path, "results": checkout / "results",
               "results/ci": checkout / "results" / "ci", "new, under results": checkout / "results" / "new",
               "empty, under results": checkout / "results" / "empty", "a user's folder": user,
               "a file": a_file}[where]
    before, folders = _digest(tmp_path), sorted(p for p in tmp_path.rglob("*") if p.is_dir())
    for resume in (False, True):
        if where == "a user's folder" and resume:
            continue  # --resume into a folder never removes anything: it is only refused for the others
        with pytest.raises(ValueError, match="--scratch"):
            prepare_scratch(scratch, checkout, _default(checkout), resume)
    assert _digest(tmp_path) == before and sorted(p for p in tmp_path.rglob("*") if p.is_dir()) == folders


def test_the_command_line_refuses_the_committed_records_and_the_checkout_as_scratch(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("COMPANION_ROOT", raising=False)
    before = _digest(ROOT / "results")
    for scratch in ("results/ci", ".", ".."):
        assert main(["reproduce", "--scratch", scratch]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"companion reproduce: error: --scratch {scratch}: ")
    assert _digest(ROOT / "results") == before
    assert (ROOT / "_toc.yml").is_file() and (ROOT / "companion" / "__init__.py").is_file()


def test_its_own_scratch_loses_only_what_the_store_wrote(checkout, tmp_path):
    scratch = tmp_path / "scratch"
    assert prepare_scratch(scratch, checkout, _default(checkout), False) == []
    assert (scratch / MARK).is_file()  # made and marked
    record = COMMITTED[0]
    shutil.copy(record, scratch / record.name)
    (scratch / f"{record.stem}.pt").write_bytes(b"its weights")
    dead = scratch / ".companion-abc-1-deadbeef-x.tmp"  # another writer's, a week old: stale
    dead.write_bytes(b"half a write")
    os.utime(dead, (1e9, 1e9))
    live = scratch / ".companion-abc-1-deadbeef-y.tmp"  # another writer's, just now: may still be writing
    live.write_bytes(b"a write in progress")
    (scratch / "notes.txt").write_text("mine\n")
    (scratch / f"{'0' * 64}.json").write_text('{"not": "a record"}')
    assert prepare_scratch(scratch, checkout, _default(checkout), True) == []  # resume: nothing removed
    removed = prepare_scratch(scratch, checkout, _default(checkout), False)
    assert sorted(removed) == sorted([record.name, dead.name])
    assert sorted(p.name for p in scratch.iterdir()) == sorted([MARK, "notes.txt", f"{'0' * 64}.json", live.name])


def test_an_unmarked_default_scratch_of_store_files_is_adopted_but_not_one_with_a_user_s_file(checkout):
    default = _default(checkout)
    default.mkdir(parents=True)
    shutil.copy(COMMITTED[0], default / COMMITTED[0].name)
    assert prepare_scratch(default, checkout, default, False) == [COMMITTED[0].name]
    assert (default / MARK).is_file() and not (default / COMMITTED[0].name).exists()
    (default / MARK).unlink()
    (default / "keep.txt").write_text("mine\n")
    with pytest.raises(ValueError, match="keep.txt"):
        prepare_scratch(default, checkout, default, False)
    assert (default / "keep.txt").read_text() == "mine\n"


def test_pruning_removes_only_records_the_store_recognises(checkout, monkeypatch):
    folder = checkout / "results" / "ci"
    (folder / "notes.json").write_text('{"a": "note"}')
    (folder / ".hidden.json").write_text("{}")
    (folder / f"{'0' * 64}.json").write_text('{"not": "a record"}')
    damaged = json.loads(COMMITTED[1].read_text())
    damaged["wall_time"] = damaged["wall_time"] + 1.0  # its checksum no longer matches
    (folder / COMMITTED[1].name).write_text(json.dumps(damaged))
    monkeypatch.setattr(runner, "recorded_runs", lambda *a, **k: [])  # no chapter needs any record
    removed = runner.prune_records(checkout, "ci")
    assert sorted(removed) == sorted([COMMITTED[0].name, COMMITTED[2].name])
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["notes.json", ".hidden.json", f"{'0' * 64}.json", COMMITTED[1].name])


def test_a_store_removes_only_its_own_records(tmp_path):
    store = RunStore(tmp_path)
    (tmp_path / "notes.json").write_text("{}")
    with pytest.raises(ValueError, match="not a record this store wrote"):
        store.remove("notes")
    with pytest.raises(ValueError, match="not a record this store wrote"):
        store.remove("0" * 64)
    assert (tmp_path / "notes.json").read_text() == "{}"
