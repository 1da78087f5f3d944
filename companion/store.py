"""The run store: a folder of `<run_id>.json` records (one per finished run), weights beside them.

Writes are atomic (temp file in the same folder, flush, fsync, `os.replace`), so a reader sees a
whole record or none. A record is trusted only when it is what the store itself wrote: valid JSON of
a readable schema, named by the hash of its config and numerics version, its contents matching the
checksum written with them, and its numbers consistent with each other and with its config
(`companion.validate.record_problem`: finite metrics, every split, curves of the run's length, the
config's seed). A file that fails is reported in one line, set aside under a name that never
overwrites another (`<run_id>.json.corrupt`, then `<run_id>.json.2.corrupt`, …) and treated as
missing, so a sweep reruns it: never half-read. A record that fails the same checks is never written
(`save` raises), so a run whose loss went to NaN is a failed run, not a stored one.

Faults, and what the store does about them:
- a store opened `read_only` (what `companion list` uses) never writes: an unusable file is reported
  and left where it is;
- `check_writable` says what is wrong (not a folder, no permission, a read-only file system) before
  a sweep trains anything it could not save;
- a full disk (or quota) raises `StoreFull` at the first write that fails, saying how many bytes the
  write needed; the partial file is removed, so nothing half-written stays;
- a write killed between its temporary file and the rename leaves `.companion-<id>-<pid>-<writer>-*.tmp`;
  `remove_stale_temporaries` (run when a sweep starts) deletes those alone (never a file whose name the
  store does not make): whose writer process is gone (same machine and pid namespace) or that are older
  than `STALE_AGE_S` (any other writer);
- files get the mode 0o666 minus the umask (a store shared by a group stays shared), not the 0o600
  of a bare temporary file.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import socket
import tempfile
import time
from pathlib import Path

import torch

from companion.config import RunConfig
from companion.config import PROFILES
from companion.identity import run_id
from companion.model import build_model
from companion.paths import repo_root
from companion.notice import StoreWarning, warn
from companion.runs import READABLE_SCHEMAS, RECORD_KEYS, SCHEMA_VERSION, Record, stream
from companion.tasks import make_task
from companion.validate import record_problem

__all__ = ["RunStore", "StoreError", "StoreFull", "default_store_root", "record_checksum", "STALE_AGE_S",
           "RESULTS_DIR", "TEMP_PREFIX"]

# A temporary file older than this is a dead write whoever made it: an atomic write takes seconds.
STALE_AGE_S = 3600.0
# Every temporary file the store makes is named `.companion-<stem>-<pid>-<writer>-<random>.tmp`; the
# clean-up removes files of that form alone, so a user's `.notes.tmp` in the folder is never touched.
TEMP_PREFIX = ".companion-"
_TEMP = re.compile(r"^\.companion-(?P<stem>[0-9A-Za-z_]{1,12})-(?P<pid>\d+)-(?P<writer>[0-9a-f]{8})-[0-9A-Za-z_]+\.tmp$")
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_RUN_ID = re.compile(r"^[0-9a-f]{64}$")


class StoreError(RuntimeError):
    """The store cannot do what was asked (it is not a folder, or cannot be written)."""


class StoreFull(StoreError):
    """A write failed for want of space (a full disk or a quota). `needed` is the bytes of the write
    that failed; nothing of it was left on disk."""

    def __init__(self, message: str, needed: int = 0):
        super().__init__(message)
        self.needed = needed

    def __reduce__(self):  # crosses from a pool worker to the sweep with its byte count
        return (type(self), (str(self), self.needed))


class _Unreadable(Exception):
    """A record this process may not read (permissions): reported, never set aside as corrupt."""


def _writer_tag() -> str:
    """8 hex digits naming this machine and pid namespace: pids written under the same tag are
    comparable with this process's (another node of a cluster, or another container, has another tag)."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return hashlib.sha256(f"{socket.gethostname()}/{namespace}".encode()).hexdigest()[:8]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (/proc/self/status); elsewhere
    set and restored at once (a thread creating a file in between would get 0o022)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


RESULTS_DIR = Path("results")  # the committed records: results/ci/, results/paper/


def default_store_root(profile: str = "ci") -> Path:
    """`$COMPANION_RUNS` if set, else the committed records of `profile`, `<repo root>/results/<profile>`."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid: {', '.join(PROFILES)}.")
    env = os.environ.get("COMPANION_RUNS")
    return Path(env) if env else repo_root() / RESULTS_DIR / profile


def record_checksum(data: dict) -> str:
    """sha256 of a record's JSON (sorted keys, compact) without its `checksum` key: written with every
    record, so a record edited by hand or damaged on disk is detected when read."""
    body = {k: v for k, v in data.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()).hexdigest()


class RunStore:
    """A folder of `<run_id>.json` records, each with the trained weights beside it in `<run_id>.pt`.

    Writes are atomic (temp file in the same folder, flush, fsync, `os.replace`), so a reader sees a
    whole record or none; the weights are written before the record, so a record's presence means its
    run finished. A file that fails to load (not JSON, wrong schema, missing keys, hash mismatch) is
    reported with a warning, renamed to `<run_id>.json.corrupt` and treated as missing. Weights are
    read with `torch.load(weights_only=True)` (no code runs); missing or unreadable weights make
    `load_model` raise, and `ensure_runs(..., weights=True)` reruns such runs.

    Args:
        root: the folder (default `default_store_root(profile)`); created by the first write.
        profile: whose committed records are the default folder (`results/<profile>`).
        read_only: never write (`save` raises StoreError, unusable files are reported and left in
            place): for readers such as `companion list`.
    """

    def __init__(self, root: str | os.PathLike | None = None, *, read_only: bool = False, profile: str = "ci"):
        self.root = Path(root) if root is not None else default_store_root(profile)
        self.read_only = read_only

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r}{', read_only=True' if self.read_only else ''})"

    def problem(self) -> str | None:
        """Why the store cannot be read, or None (a folder that does not exist yet is an empty store)."""
        if not self.root.exists():
            return None
        if not self.root.is_dir():
            return f"{self.root} is not a folder (it is a file); no run can be stored there"
        try:
            with os.scandir(self.root):
                pass
        except OSError as err:
            return f"{self.root} cannot be listed ({err.strerror or err})"
        return None

    def check_writable(self) -> None:
        """Raise StoreError, saying what is wrong and what to do, unless records can be written here:
        creates the folder if needed and writes and removes a probe file (permissions, a read-only
        file system and a quota all show)."""
        fix = "Point --store (or $COMPANION_RUNS) at a writable folder, or fix this one's permissions."
        if self.read_only:
            raise StoreError(f"run store {self.root} was opened read-only; open it with RunStore(root) to write.")
        problem = self.problem()
        if problem:
            raise StoreError(f"run store {problem}. {fix}")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=self.root, prefix=self._temp_prefix("probe"), suffix=".tmp")
            os.close(fd)
            os.unlink(probe)
        except OSError as err:
            raise StoreError(f"run store {self.root} is not writable ({err.strerror or err}): a sweep would "
                             f"train runs it cannot save. {fix}") from None

    @staticmethod
    def _temp_prefix(stem: str) -> str:
        return f"{TEMP_PREFIX}{stem[:12]}-{os.getpid()}-{_writer_tag()}-"

    def remove_stale_temporaries(self, max_age_s: float = STALE_AGE_S) -> list[str]:
        """Delete the temporary files of killed writes: those whose writer (same machine and pid
        namespace, named in the file) is no longer running, and any older than `max_age_s`. Returns
        the names removed. Only names of the store's own form (`TEMP_PREFIX`…) are candidates: records,
        weights, `.corrupt` files and anything else in the folder are never touched."""
        if self.read_only or not self.root.is_dir():
            return []
        removed, here, now = [], _writer_tag(), time.time()
        for path in self.root.glob(f"{TEMP_PREFIX}*.tmp"):
            m = _TEMP.match(path.name)
            if m is None:  # not a name the store makes
                continue
            try:
                if not path.is_file() or path.is_symlink():
                    continue
                dead = m["writer"] == here and not _pid_alive(int(m["pid"]))
                if dead or now - path.stat().st_mtime > max_age_s:
                    path.unlink()
                    removed.append(path.name)
            except FileNotFoundError:  # its writer finished (renamed it) or another sweep removed it
                continue
            except OSError:  # not ours to remove (a sticky folder): its owner's next sweep will
                continue
        return removed

    def path(self, cfg_or_id: RunConfig | str) -> Path:
        rid = cfg_or_id if isinstance(cfg_or_id, str) else run_id(cfg_or_id)
        return self.root / f"{rid}.json"

    def ids(self) -> set[str]:
        """Ids of the files present (not validated)."""
        return {p.stem for p in self.root.glob("*.json")} if self.root.is_dir() else set()

    def own_records(self) -> list[str]:
        """Ids of the records here that this store wrote and would read (sorted): files named
        `<run id>.json` (64 hex digits) that pass every check `load` makes, read without moving anything.
        What a command may remove as a record; any other file in the folder (a note, a hidden file, a
        damaged or foreign record, a set-aside copy) is not the store's to delete."""
        own = []
        for path in sorted(self.root.glob("*.json")) if self.root.is_dir() else ():
            if not _RUN_ID.match(path.stem) or not path.is_file() or path.is_symlink():
                continue
            try:
                record, _, _ = self._problem(path)
            except _Unreadable:
                continue
            if record is not None:
                own.append(path.stem)
        return own

    def remove(self, rid: str) -> None:
        """Delete the record `rid` and its weights; only a record `own_records` names (ValueError else)."""
        if self.read_only:
            raise StoreError(f"run store {self.root} was opened read-only; open it with RunStore(root) to remove.")
        path = self.path(rid)
        if not _RUN_ID.match(rid) or self._problem(path)[0] is None:
            raise ValueError(f"{path} is not a record this store wrote; it is left as it is.")
        path.unlink()
        self.weights_path(rid).unlink(missing_ok=True)

    def weights_path(self, rid: str) -> Path:
        return self.root / f"{rid}.pt"

    def _atomic_write(self, final: Path, payload: bytes) -> None:
        """Write `payload` to `final` atomically; StoreFull (nothing left behind) when space runs out."""
        try:
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=self._temp_prefix(final.stem), suffix=".tmp")
        except OSError as err:
            self._raise_full(err, final, len(payload))
            raise
        try:
            with os.fdopen(fd, "wb") as fh:
                os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0o600; a record gets what open() would give
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except BaseException as err:
            Path(tmp).unlink(missing_ok=True)
            if isinstance(err, OSError):
                self._raise_full(err, final, len(payload))
            raise

    def _raise_full(self, err: OSError, final: Path, size: int) -> None:
        if err.errno in _NO_SPACE:
            raise StoreFull(f"no space left in {self.root} ({err.strerror}) writing {final.name} "
                            f"({size:,} bytes); nothing of it was kept", size) from None

    def save(self, record: Record, state: dict[str, torch.Tensor] | None = None) -> Path:
        """Write the weights `state` (if given), then `record`, each atomically; returns the record's path.
        StoreError if the store is read-only."""
        if self.read_only:
            raise StoreError(f"run store {self.root} was opened read-only; open it with RunStore(root) to save.")
        data = record.to_dict()
        problem = record_problem(data)
        if problem:  # checked before anything is written: a record that could not be read back is not kept
            raise ValueError(f"run {record.run_id[:12]} was not saved: {problem}.")
        self.root.mkdir(parents=True, exist_ok=True)
        # compact: a record is read by programs, and half the bytes of an indented one (records are committed)
        data["checksum"] = record_checksum(data)
        payload = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True).encode("utf-8")
        weights = self._weights_bytes(state) if state is not None else b""
        final = self.path(record.run_id)
        try:
            if state is not None:
                self._atomic_write(self.weights_path(record.run_id), weights)
            self._atomic_write(final, payload)
        except StoreFull as err:  # the run needs both files written again: say their sum
            if state is None:
                raise
            raise StoreFull(f"{err}; the run needs {len(weights) + len(payload):,} bytes in all (its weights "
                            f"{len(weights):,}, its record {len(payload):,})", len(weights) + len(payload)) from None
        return final

    @staticmethod
    def _weights_bytes(state: dict[str, torch.Tensor]) -> bytes:
        buffer = io.BytesIO()  # serialised first: a full disk then fails in our write, not inside torch
        torch.save({k: v.detach().cpu() for k, v in state.items()}, buffer)
        return buffer.getvalue()

    def save_weights(self, rid: str, state: dict[str, torch.Tensor]) -> Path:
        """Write the weights of the stored run `rid` atomically (its record stays as it is)."""
        if self.read_only:
            raise StoreError(f"run store {self.root} was opened read-only; open it with RunStore(root) to save.")
        self._atomic_write(self.weights_path(rid), self._weights_bytes(state))
        return self.weights_path(rid)

    def has_weights(self, rid: str) -> bool:
        """Whether a weights file exists and loads (validates)."""
        try:
            self._load_state(rid)
            return True
        except (FileNotFoundError, ValueError):
            return False

    def _load_state(self, rid: str) -> dict[str, torch.Tensor]:
        path = self.weights_path(rid)
        if not path.is_file():
            raise FileNotFoundError(f"no weights for run {rid[:12]} in {self.root}; rerun it with "
                                    "ensure_runs(..., weights=True) (runs are deterministic).")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001  (any unreadable file is reported the same way)
            raise ValueError(f"weights file {path} is unreadable ({type(err).__name__}); delete it and rerun "
                             "with ensure_runs(..., weights=True).") from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise ValueError(f"weights file {path} does not hold a state dict; delete it and rerun.")
        return state

    def load_model(self, record: Record, device: str = "cpu"):
        """The trained model of `record`: rebuilt from its config, weights loaded (strict), eval mode."""
        state = self._load_state(record.run_id)
        model = build_model(record.config.model, make_task(record.config.task), generator=stream(0, "init"))
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise ValueError(f"weights of run {record.run_id[:12]} do not fit its model: {err}") from None
        return model.to(device).eval()

    def _problem(self, path: Path) -> tuple[Record | None, str, tuple | None]:
        """(record, "", identity) for a trusted record, else (None, why, identity): `identity` is the
        (device, inode, size, mtime) of the file that was read, None when it could not be opened."""
        try:
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                raw = fh.read()
        except PermissionError as err:
            raise _Unreadable(f"run store: {path} cannot be read ({err.strerror}); the run counts as missing. "
                              "Ask its owner to make it readable (records are written with the umask's "
                              "mode, so a group-shared store wants a umask such as 0o002).") from None
        except FileNotFoundError:  # set aside or replaced by another process meanwhile
            return None, "", None
        except OSError as err:
            return None, f"not readable ({err.strerror or err})", None
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            return None, f"not readable JSON ({err}); probably a partial write", identity
        return (*self._check(data, path.stem), identity)

    @staticmethod
    def _check(data, stem: str) -> tuple[Record | None, str]:
        if not isinstance(data, dict):
            return None, "not a JSON object"
        version = data.get("schema_version")
        if not isinstance(version, int) or version not in READABLE_SCHEMAS:
            return None, (f"schema_version {version!r}, expected {SCHEMA_VERSION} (readable: "
                          f"{', '.join(map(str, sorted(READABLE_SCHEMAS)))})")
        missing = [k for k in RECORD_KEYS if k not in data and k not in READABLE_SCHEMAS[version]]
        if missing:
            return None, f"missing keys {missing}"
        if data.get("checksum") != record_checksum(data):
            return None, "its contents do not match the checksum written with them (edited or damaged)"
        if data["run_id"] != stem:
            return None, f"run_id {data['run_id']!r} does not match the file name"
        if not isinstance(data["config"], dict) or not isinstance(data["numerics"], int) \
                or run_id(data["config"], data["numerics"]) != stem:
            return None, "the hash of the stored config and numerics version does not match the file name"
        problem = record_problem(data)
        if problem:
            return None, problem
        try:
            return Record.from_dict(data), ""
        except (TypeError, ValueError, KeyError) as err:
            return None, f"config does not parse ({err})"

    def load(self, cfg_or_id: RunConfig | str) -> Record | None:
        """The stored record, or None if missing or unusable. An unusable file is reported in one line
        (a `StoreWarning`) and set aside (`_set_aside`: a name that overwrites nothing), unless the store
        is read-only (or refuses the rename), where it stays and the line says so."""
        path = self.path(cfg_or_id)
        if not path.is_file():
            return None
        try:
            record, problem, identity = self._problem(path)
        except _Unreadable as err:  # not damaged, only not ours to read: never moved aside
            warn(str(err), StoreWarning)
            return None
        if record is None and problem:
            warn(f"run store: {path} is unusable: {problem}. {self._set_aside(path, identity)}", StoreWarning)
        return record

    def _set_aside(self, path: Path, identity: tuple | None) -> str:
        """Move the unusable record `path` (the file read, `identity`) aside to `<name>.corrupt`, or
        `<name>.<n>.corrupt` with the first n that names no file (unless read-only); returns what
        happened, in words. The move never overwrites a file, and never moves a file other than the
        one that was read (another sweep may have replaced it by a good record meanwhile)."""
        if self.read_only:
            return "Left in place (read-only); a sweep will set it aside and rerun the run."
        for n in range(1, 10_000):
            aside = path.with_name(f"{path.name}.corrupt" if n == 1 else f"{path.name}.{n}.corrupt")
            try:
                os.link(path, aside)  # fails if `aside` exists: never overwrites
            except FileExistsError:
                continue
            except FileNotFoundError:  # another process moved it aside first
                return "Another process set it aside; the run counts as missing and will be rerun."
            except OSError as err:
                return (f"It could not be set aside ({err.strerror or err}); the run counts as missing, and "
                        "the store must be writable to rerun it.")
            st = os.stat(aside)
            if identity is not None and (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != identity:
                os.unlink(aside)  # the name now holds another file (rewritten meanwhile): leave it be
                return "It was replaced meanwhile; the new file is read next time."
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            return f"Set aside as {aside.name}; the run counts as missing and will be rerun."
        return "It could not be set aside (10,000 set-aside copies already); the run counts as missing."

    def has(self, cfg: RunConfig) -> bool:
        """Whether a loadable record exists (validates, so a corrupt file answers False)."""
        return self.load(cfg) is not None
