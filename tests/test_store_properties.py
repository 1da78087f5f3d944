"""Property: whatever interleaving of writes, killed writes, damage and reads, the store never hands out
a partial or unverified record, and never loses a whole one.

A hypothesis state machine drives one store folder with four records of one run (seeds 0 to 3). It
saves records (atomic replace), leaves what a killed write leaves (a part of a record in a temporary
file, from a writer that is gone), damages a stored file (cut short, a byte flipped, a number edited
with or without a fresh checksum), sweeps temporaries up and reads. The model is the last record saved
under each id and whether its file has been damaged since. Every read must return exactly that record
when the file is whole, and None (the file set aside, never overwriting an earlier set-aside copy) when
it is damaged; files the store did not make are never removed.
"""

import json
import shutil
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from companion.config import apply_overrides
from companion.experiments import get_experiment
from companion.identity import run_id
from companion.notice import StoreWarning
from companion.runs import execution_note, run
from companion.store import RunStore, _writer_tag, record_checksum

TINY = ["train.steps=4", "train.eval_every=2"]
BASE = apply_overrides(get_experiment("smoke").config("ci", "mask", 0), TINY)
SEEDS = range(4)


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture(scope="module")
def records():
    """Two versions of a record for each of four ids (the second with other wall time and timestamps:
    a rerun), all valid."""
    made = run(BASE)
    out = {}
    for s in SEEDS:
        cfg = replace(BASE, seed=s)
        one = replace(made, config=cfg, run_id=run_id(cfg), execution=execution_note([s]))
        out[s] = (one, replace(one, wall_time=one.wall_time + 1.0, finished_at="2026-12-02T00:00:00+00:00"))
    return out


DAMAGE = ("truncate", "flip", "edit-no-checksum", "edit-fresh-checksum", "nan-fresh-checksum")


def _damage(path: Path, how: str, at: float) -> bool:
    """Damage the record at `path`; whether its data changed (a flipped 'e' in 1e-05 reads the same)."""
    raw = path.read_bytes()
    _write(path, raw, how, at)
    try:
        return json.loads(path.read_bytes()) != json.loads(raw)
    except ValueError:
        return True


def _write(path: Path, raw: bytes, how: str, at: float) -> None:
    if how == "truncate":
        path.write_bytes(raw[: int(at * (len(raw) - 1))])
    elif how == "flip":
        i = int(at * (len(raw) - 1))
        path.write_bytes(raw[:i] + bytes([raw[i] ^ 0x20]) + raw[i + 1:])
    else:
        data = json.loads(raw)
        value = float("nan") if how.startswith("nan") else data["metrics"]["test"]["mse"] * (1 + at) + 1e-3
        data["metrics"]["test"]["mse"] = value
        if how.endswith("fresh-checksum"):
            data["checksum"] = record_checksum(data)
        path.write_text(json.dumps(data, allow_nan=True))


def test_interleavings_never_yield_a_partial_or_unverified_record(records):
    dead = _dead_pid()

    class StoreMachine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.root = Path(tempfile.mkdtemp(prefix="store-props-"))
            self.store = RunStore(self.root)
            self.saved: dict[int, object] = {}  # seed -> the record last saved
            self.damaged: set[int] = set()
            self.aside = 0
            (self.root / ".notes.tmp").write_text("a user's file")  # never the store's to remove

        def teardown(self):
            shutil.rmtree(self.root, ignore_errors=True)

        @rule(seed=st.sampled_from(list(SEEDS)), version=st.integers(0, 1))
        def save(self, seed, version):
            record = records[seed][version]
            self.store.save(record)
            self.saved[seed] = record
            self.damaged.discard(seed)

        @rule(seed=st.sampled_from(list(SEEDS)), cut=st.floats(0, 1))
        def killed_write(self, seed, cut):
            record = records[seed][0]
            data = record.to_dict()
            data["checksum"] = record_checksum(data)
            text = json.dumps(data).encode()
            name = f".companion-{record.run_id[:12]}-{dead}-{_writer_tag()}-k{int(cut * 1e6)}.tmp"
            (self.root / name).write_bytes(text[: int(cut * len(text))])

        @precondition(lambda self: bool(set(self.saved) - self.damaged))
        @rule(data=st.data(), how=st.sampled_from(DAMAGE), at=st.floats(0.05, 0.95))
        def damage(self, data, how, at):
            seed = data.draw(st.sampled_from(sorted(set(self.saved) - self.damaged)))
            if _damage(self.store.path(self.saved[seed].run_id), how, at):
                self.damaged.add(seed)

        @rule()
        def sweep_temporaries(self):
            self.store.remove_stale_temporaries()
            assert not list(self.root.glob(".companion-*.tmp"))  # each writer here is gone

        @rule(seed=st.sampled_from(list(SEEDS)))
        def read(self, seed):
            rid = records[seed][0].run_id
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = self.store.load(rid)
            if seed not in self.saved:
                assert got is None and not caught
            elif seed in self.damaged:
                assert got is None
                assert [w.category for w in caught] == [StoreWarning]
                self.aside += 1
                del self.saved[seed]
                self.damaged.discard(seed)
            else:
                assert got == self.saved[seed] and not caught

        @invariant()
        def nothing_lost(self):
            assert len(list(self.root.glob("*.corrupt"))) == self.aside  # no set-aside copy overwritten
            assert (self.root / ".notes.tmp").read_text() == "a user's file"
            assert {p.name for p in self.root.glob("*.json")} == {f"{self.saved[s].run_id}.json" for s in self.saved}

    StoreMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None,
                                              suppress_health_check=[HealthCheck.too_slow])
    StoreMachine.TestCase().runTest()
