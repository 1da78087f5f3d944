"""The run store: a folder of `<run_id>.json` records (one per finished run), weights beside them.

Writes are atomic (temp file in the same folder, flush, fsync, `os.replace`), so a reader sees a
whole record or none. A file that fails to load (not JSON, wrong schema, missing keys, hash
mismatch) is reported, set aside as `<run_id>.json.corrupt` and treated as missing: never half-read.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path

import torch

from companion.config import RunConfig
from companion.identity import run_id
from companion.paths import repo_root
from companion.runs import RECORD_KEYS, SCHEMA_VERSION, Record, stream

__all__ = ["RunStore", "default_store_root"]


def default_store_root() -> Path:
    """`$COMPANION_RUNS` if set, else `<repo root>/runs` (gitignored)."""
    env = os.environ.get("COMPANION_RUNS")
    return Path(env) if env else repo_root() / "runs"


class RunStore:
    """A folder of `<run_id>.json` records, each with the trained weights beside it in `<run_id>.pt`.

    Writes are atomic (temp file in the same folder, flush, fsync, `os.replace`), so a reader sees a
    whole record or none; the weights are written before the record, so a record's presence means its
    run finished. A file that fails to load (not JSON, wrong schema, missing keys, hash mismatch) is
    reported with a warning, renamed to `<run_id>.json.corrupt` and treated as missing. Weights are
    read with `torch.load(weights_only=True)` (no code runs); missing or unreadable weights make
    `load_model` raise, and `ensure_runs(..., weights=True)` reruns such runs.
    """

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else default_store_root()

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    def path(self, cfg_or_id: RunConfig | str) -> Path:
        rid = cfg_or_id if isinstance(cfg_or_id, str) else run_id(cfg_or_id)
        return self.root / f"{rid}.json"

    def ids(self) -> set[str]:
        """Ids of the files present (not validated)."""
        return {p.stem for p in self.root.glob("*.json")} if self.root.is_dir() else set()

    def weights_path(self, rid: str) -> Path:
        return self.root / f"{rid}.pt"

    def _atomic_write(self, final: Path, write) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{final.stem[:12]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def save(self, record: Record, state: dict[str, torch.Tensor] | None = None) -> Path:
        """Write the weights `state` (if given), then `record`, each atomically; returns the record's path."""
        self.root.mkdir(parents=True, exist_ok=True)
        if state is not None:
            cpu = {k: v.detach().cpu() for k, v in state.items()}
            self._atomic_write(self.weights_path(record.run_id), lambda fh: torch.save(cpu, fh))
        text = json.dumps(record.to_dict(), indent=1, sort_keys=True, allow_nan=True)
        final = self.path(record.run_id)
        self._atomic_write(final, lambda fh: fh.write(text.encode("utf-8")))
        return final

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
        from companion.model import build_model
        from companion.tasks import make_task

        state = self._load_state(record.run_id)
        model = build_model(record.config.model, make_task(record.config.task), generator=stream(0, "init"))
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise ValueError(f"weights of run {record.run_id[:12]} do not fit its model: {err}") from None
        return model.to(device).eval()

    def _problem(self, path: Path) -> tuple[Record | None, str]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            return None, f"not readable JSON ({err}); probably a partial write"
        if not isinstance(data, dict):
            return None, "not a JSON object"
        if data.get("schema_version") != SCHEMA_VERSION:
            return None, f"schema_version {data.get('schema_version')!r}, expected {SCHEMA_VERSION}"
        missing = [k for k in RECORD_KEYS if k not in data]
        if missing:
            return None, f"missing keys {missing}"
        if data["run_id"] != path.stem:
            return None, f"run_id {data['run_id']!r} does not match the file name"
        if not isinstance(data["config"], dict) or run_id(data["config"], data["code_version"]) != path.stem:
            return None, "the hash of the stored config and code version does not match the file name"
        try:
            return Record.from_dict(data), ""
        except (TypeError, ValueError, KeyError) as err:
            return None, f"config does not parse ({err})"

    def load(self, cfg_or_id: RunConfig | str) -> Record | None:
        """The stored record, or None if missing or corrupt (corrupt files are moved aside)."""
        path = self.path(cfg_or_id)
        if not path.is_file():
            return None
        record, problem = self._problem(path)
        if record is None:
            aside = path.with_name(path.name + ".corrupt")
            try:
                os.replace(path, aside)
            except FileNotFoundError:  # another process moved it aside first
                pass
            warnings.warn(f"run store: {path} is unusable: {problem}. Moved aside to {aside.name}; "
                          "the run counts as missing and will be rerun.", stacklevel=2)
        return record

    def has(self, cfg: RunConfig) -> bool:
        """Whether a loadable record exists (validates, so a corrupt file answers False)."""
        return self.load(cfg) is not None
