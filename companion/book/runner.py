"""The chapter runner: execute chapter sources with papermill into the book, in `_toc.yml` order.

`notebooks/NN_name.ipynb` (no outputs, a `parameters` cell) → papermill with `profile` →
`book/chapters/NN_name.ipynb` with outputs kept and volatile metadata (timestamps, durations, paths)
stripped. A chapter is skipped when it was executed *in this checkout* from the same inputs: the
source, the profile, the package code, the claims ledger and the committed results (`input_hash`,
kept in the executed copy's metadata and in a local stamp under `_build/`). A fresh clone therefore
executes every chapter once; a second run with nothing changed skips them all. Afterwards the
scoreboard is regenerated.

Before executing, `train_runs` makes every run the chapters to execute will read and the store lacks
(`companion.experiments.chapters.chapter_runs`) in one sweep: one pool of workers for the whole book,
so each worker's start-up (spawning, importing torch) is paid once rather than once per chapter, and
the groups go longest first, so that no core idles at the end of each chapter while the other
finishes a long group. The chapters then read their runs from the store; they train nothing, so a run
this list missed stops its chapter with `companion.reading.MissingRuns` (a test keeps the two equal).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
import yaml

from companion.book import scoreboard
from companion.book.site.edition import build_edition
from companion.book.paper_status import paper_store
from companion.cli.paper import estimate_total, group_label, relative_cost
from companion.executors import plan_groups
from companion.experiments.chapters import CHAPTERS, chapter_runs, recorded_runs
from companion.identity import code_version, run_id
from companion.paths import repo_root
from companion.store import RunStore
from companion.reading import stored_record
from companion.sweep import run_missing

__all__ = ["toc_chapters", "input_hash", "strip_volatile", "run_chapters", "source_outputs", "train_runs",
           "relative_cost", "prune_records", "execute_into", "train_paper"]

PROFILES = ("ci", "paper")
CHAPTER_DIR = Path("book") / "chapters"
STAMP_DIR = Path("_build") / ".chapters"
SOURCE_DIR = Path("notebooks")
_CELL_VOLATILE = ("papermill", "execution", "ExecuteTime")
_PAPERMILL_KEEP = ("parameters", "default_parameters")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+(?=>)")


def toc_chapters(root: Path) -> list[str]:
    """Names of the executable chapters, in the order `_toc.yml` lists them."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    names: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            f = node.get("file")
            if isinstance(f, str) and Path(f).parent == CHAPTER_DIR:
                names.append(Path(f).stem)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(toc)
    return names


def _files_digest(h, base: Path, paths) -> None:
    for p in sorted(paths):
        h.update(str(p.relative_to(base)).encode())
        h.update(p.read_bytes())


def input_hash(root: Path, name: str, profile: str) -> str:
    """What an executed chapter depends on: its source, the profile, the package, the ledger and the
    committed data a chapter reads (the run records in results/, the scale ladder's and the decisive
    searches' included, the benchmarks in benchmarks/results/)."""
    h = hashlib.sha256()
    h.update(profile.encode())
    src = root / SOURCE_DIR / f"{name}.ipynb"
    h.update(json.dumps(_code_and_markdown(json.loads(src.read_text())), sort_keys=True).encode())
    h.update(code_version(everything=True).encode())
    data = [root / "book" / "claims.yml", *(root / "benchmarks" / "results").rglob("*.json"),
            *(root / "results" / "ci").glob("*.json"), *(root / "results" / "paper").rglob("*.json"),
            *(root / "results" / "ladder").glob("*.json"), *(root / "results" / "decisive").glob("*.json")]
    _files_digest(h, root, [p for p in data if p.is_file()])
    return h.hexdigest()


def _code_and_markdown(nb: dict) -> list:
    """What of a source the page shows: each cell's type, source and metadata (tags, and the captions
    and names of figures and tables, so that a caption edited in the source re-executes the chapter)."""
    return [(c["cell_type"], "".join(c.get("source", "")), c.get("metadata", {})) for c in nb["cells"]]


def strip_volatile(nb: dict) -> dict:
    """Drop timestamps, durations, machine paths and objects' addresses in plain-text reprs
    ("<…Styler at 0x7f…>"); keep outputs, glue data, tags and parameters; tag papermill's
    injected-parameters cell `remove-cell` so the page does not show it."""
    meta = nb.setdefault("metadata", {})
    pm = meta.get("papermill")
    if pm is not None:
        meta["papermill"] = {k: pm[k] for k in _PAPERMILL_KEEP if k in pm}
    meta.pop("widgets", None)
    for cell in nb.get("cells", []):
        cm = cell.get("metadata", {})
        for key in _CELL_VOLATILE:
            cm.pop(key, None)
        for out in cell.get("outputs", []):  # an object's address in its plain-text repr changes every run
            plain = out.get("data", {}).get("text/plain")
            if isinstance(plain, (str, list)):
                text = "".join(plain)
                fixed = _ADDRESS.sub("", text)
                if fixed != text:
                    out["data"]["text/plain"] = fixed
        if "injected-parameters" in cm.get("tags", []):
            cell["id"] = "injected-parameters"  # papermill draws a random id for the cell it inserts
            if "remove-cell" not in cm["tags"]:
                cm["tags"] = [*cm["tags"], "remove-cell"]  # machinery: executed and checked, not shown
    return nb


def source_outputs(root: Path) -> list[str]:
    """Chapter sources that carry outputs or execution counts (they must not)."""
    bad = []
    for p in sorted((root / SOURCE_DIR).glob("*.ipynb")):
        nb = json.loads(p.read_text())
        if any(c.get("outputs") or c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code"):
            bad.append(str(p.relative_to(root)))
    return bad


def _kernel_name() -> str:
    from jupyter_client.kernelspec import KernelSpecManager

    return "companion" if "companion" in KernelSpecManager().find_kernel_specs() else "python3"


def execute_into(root: Path, name: str, out_dir: Path, parameters: dict, kernel: str | None = None,
                 meta: dict | None = None) -> float:
    """Execute the chapter source `name` with papermill `parameters` into `out_dir/<name>.ipynb`, volatile
    metadata stripped (`strip_volatile`) and `meta` kept under `metadata.companion`; returns the seconds
    it took. A failed chapter's partial notebook is kept in `_build/failed/`."""
    import papermill as pm

    src = root / SOURCE_DIR / f"{name}.ipynb"
    dst = out_dir / f"{name}.ipynb"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{name}.ipynb"
        t0 = time.perf_counter()
        try:
            pm.execute_notebook(
                str(src), str(out), parameters=parameters, kernel_name=kernel or _kernel_name(),
                cwd=str(root), progress_bar=False, log_output=False, request_save_on_cell_execute=False,
            )
        except Exception:
            failed = root / "_build" / "failed" / f"{name}.ipynb"
            failed.parent.mkdir(parents=True, exist_ok=True)
            if out.exists():
                shutil.copy(out, failed)
            print(f"  {name}: FAILED; the partial notebook is at {failed.relative_to(root)}", file=sys.stderr)
            raise
        elapsed = time.perf_counter() - t0
        nb = strip_volatile(json.loads(out.read_text()))
        nb["metadata"]["companion"] = meta or {"profile": parameters.get("profile")}
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp_dst = dst.with_suffix(".ipynb.tmp")
        tmp_dst.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        tmp_dst.replace(dst)
    return elapsed


def _execute(root: Path, name: str, profile: str, digest: str, kernel: str) -> float:
    elapsed = execute_into(root, name, root / CHAPTER_DIR, {"profile": profile}, kernel,
                           {"profile": profile, "input_hash": digest})
    stamp = _stamp(root, name, profile)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest + "\n")
    return elapsed


def _stamp(root: Path, name: str, profile: str) -> Path:
    return root / STAMP_DIR / f"{name}.{profile}.sha256"


def _is_current(root: Path, name: str, profile: str, digest: str) -> bool:
    """The executed copy was made from `digest`, and made here (the local stamp says so)."""
    path, stamp = root / CHAPTER_DIR / f"{name}.ipynb", _stamp(root, name, profile)
    if not path.is_file() or not stamp.is_file() or stamp.read_text().strip() != digest:
        return False
    try:
        return json.loads(path.read_text())["metadata"]["companion"]["input_hash"] == digest
    except (KeyError, ValueError):
        return False


def train_runs(names: list[str], profile: str, *, jobs: int | None = None, store=None, progress: bool = False) -> int:
    """Make, in one sweep, every run the chapters `names` read at `profile` that the store lacks
    (see the module docstring); returns how many runs were trained. Raises RuntimeError naming the
    runs that failed (the others are stored)."""
    keys = [k for k, (notebook, _) in CHAPTERS.items() if notebook in names]
    cfgs: list = []
    for key in keys:
        cfgs += [c for c in chapter_runs(key, profile) if c not in cfgs]
    if not cfgs:
        return 0
    cost: dict = {}
    for c in cfgs:  # a group's cost: its runs' costs, summed over the seeds that train together
        group = replace(c, seed=0)
        cost[group] = cost.get(group, 0.0) + relative_cost(c)
    ordered = sorted(cfgs, key=lambda c: -cost[replace(c, seed=0)])  # stable: seeds keep their order
    store = store if isinstance(store, RunStore) else RunStore(store, profile=profile)
    _, ran = run_missing(ordered, store, "local", progress, {"jobs": jobs})
    return ran


def train_paper(names: list[str], profile: str = "paper", *, yes: bool = False, estimate=None) -> int:
    """Train the runs the chapters `names` read at `profile` and `results/<profile>/` lacks, a group at a
    time with a line per group. Without a GPU it first says what that would cost (the first group probed
    as `companion paper` probes it, the others scaled by their size, `relative_cost`) and what to do
    instead, and goes on only with `yes`. Returns an exit code."""
    store = paper_store()
    keys = [k for k, (notebook, _) in CHAPTERS.items() if notebook in names]
    missing = [c for k in keys for c in chapter_runs(k, profile) if stored_record(store, c, any_device=True) is None]
    groups = plan_groups(list(dict.fromkeys(missing)))
    if not groups:
        print(f"every run these chapters read at {profile!r} is stored: nothing to train")
        return 0
    gpu = torch.cuda.is_available()
    runs = len(set(missing))
    if not gpu and not yes:
        total, first = estimate_total(groups, estimate)
        print(f"{runs} runs in {len(groups)} groups are missing at profile {profile!r}. This machine has no GPU: "
              f"they would train for about {total / 3600:,.1f} hours here (the first group, {group_label(groups[0])}, "
              f"probed at {first:,.0f} s; the others scaled by their size). Instead, make them on a GPU with "
              f"`companion paper {' '.join(sorted(keys))}` (a window at a time, resumable) or on a Slurm cluster "
              f"(`companion sweep … --profile {profile} --executor slurm`). To train here anyway, repeat the "
              "command with --yes.", file=sys.stderr)
        return 2
    device = "cuda" if gpu else "cpu"
    target = RunStore(store.root)
    for i, group in enumerate(groups, 1):
        t0 = time.perf_counter()
        print(f"  [{i}/{len(groups)}] {group_label(group)} on {device} …", flush=True)
        run_missing([replace(c, device=device) for c in group], target, "local", False, {"jobs": 1})
        print(f"  [{i}/{len(groups)}] done in {time.perf_counter() - t0:,.0f} s", flush=True)
    return 0


def prune_records(root: Path, profile: str = "ci") -> list[str]:
    """Remove from the committed records of `profile` (results/<profile>) every record, and its weights,
    that no chapter needs (`recorded_runs`): what a numerics or preset change left behind. Returns the
    names removed. Only what the store recognises as its own is touched (`RunStore.own_records`: a file
    named by a run id that holds that run's record); any other file there (a note, a hidden file, a record
    that does not read) is left as it is. Only `ci`: paper-profile records are made on borrowed GPUs and
    never removed here."""
    if profile != "ci":
        raise ValueError("only the ci records are pruned; paper-profile records are kept whatever reads them.")
    store = RunStore(root / "results" / profile)
    keep = {run_id(c) for c in recorded_runs(None, profile)}
    removed = []
    for rid in store.own_records():
        if rid not in keep:
            store.remove(rid)
            removed.append(f"{rid}.json")
    return removed


def run_chapters(names: list[str] | None = None, *, profile: str = "ci", force: bool = False, root: Path | None = None,
                 runs_only: bool = False, prune: bool = False, train: bool = False, yes: bool = False) -> int:
    """Execute chapters (all in toc order by default), after training the runs they read in one
    sweep (`train_runs`); with `runs_only`, train and execute nothing. Returns an exit code.

    At `paper` nothing trains unless `train` is given: the chapters make the paper edition from the
    committed records (`companion.book.site.edition`); with `train`, `train_paper` first (which, without a
    GPU, states its estimate and needs `yes`)."""
    if profile not in PROFILES:
        print(f"companion chapters: error: unknown profile {profile!r}; choose one of {PROFILES}.", file=sys.stderr)
        return 2
    for wrong, why in ((prune and profile != "ci", "--prune removes ci records only (paper records are made on "
                                                   "borrowed GPUs and kept); drop it"),
                       (train and profile == "ci", "--train trains the paper profile; at ci the runs the chapters "
                                                   "read and the records lack always train first: drop it"),
                       (yes and not train, "--yes answers --train's question; add --train, or drop --yes")):
        if wrong:
            print(f"companion chapters: error: {why}", file=sys.stderr)
            return 2
    root = root or repo_root()
    if profile != "ci":  # the paper edition: read from the committed records; trains only when asked

        order = toc_chapters(root)
        unknown = [n for n in names or () if n not in order]
        if unknown:
            print(f"companion chapters: error: unknown chapter(s) {unknown}; the book's chapters are: {', '.join(order)}",
                  file=sys.stderr)
            return 2
        chosen = sorted(names or order, key=order.index)
        if train:
            status = train_paper(chosen, profile, yes=yes)
            if status:
                return status
        return build_edition(chosen, profile, root, execute_into=lambda *a: execute_into(*a))
    order = toc_chapters(root)
    names = names or order
    unknown = [n for n in names if n not in order]
    if unknown:
        print(f"companion chapters: error: unknown chapter(s) {unknown}; the book's chapters are: {', '.join(order)}",
              file=sys.stderr)
        return 2
    missing = [n for n in names if not (root / SOURCE_DIR / f"{n}.ipynb").is_file()]
    if missing:
        print(f"companion chapters: error: no source notebook for {missing} in {SOURCE_DIR}/", file=sys.stderr)
        return 2
    total = time.perf_counter()
    todo = [n for n in sorted(names, key=order.index)
            if runs_only or force or not _is_current(root, n, profile, input_hash(root, n, profile))]
    if todo:
        try:
            ran = train_runs(todo, profile, progress=sys.stderr.isatty())
        except RuntimeError as err:
            print(f"training the chapters' runs failed: {err}", file=sys.stderr)
            return 1
        print(f"runs the chapters read at profile {profile!r}: {ran} trained in {time.perf_counter() - total:.1f} s")
    if prune:
        removed = prune_records(root, profile)
        print(f"records no chapter reads, removed from results/{profile}: {len(removed)}")
    if runs_only:
        return 0
    kernel = _kernel_name()
    status = 0
    print(f"chapters at profile {profile!r} (kernel {kernel}):")
    for name in sorted(names, key=order.index):
        digest = input_hash(root, name, profile)
        if name not in todo:
            print(f"  {name:<40} up to date")
            continue
        try:
            elapsed = _execute(root, name, profile, digest, kernel)
        except Exception as err:  # report every chapter, then fail
            print(f"  {name:<40} failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}", file=sys.stderr)
            status = 1
            continue
        print(f"  {name:<40} {elapsed:7.1f} s")
    print(f"total {time.perf_counter() - total:.1f} s")
    if status == 0:
        scoreboard.main(None)
    return status


def _check_sources(args) -> int:
    root = repo_root()
    bad = source_outputs(root)
    if bad:
        print("chapter sources must carry no outputs (executed copies live in book/chapters/): " + ", ".join(bad), file=sys.stderr)
        return 1
    missing = [n for n in toc_chapters(root) if not (root / SOURCE_DIR / f"{n}.ipynb").is_file()]
    if missing:
        print(f"chapters listed in _toc.yml without a source in notebooks/: {missing}", file=sys.stderr)
        return 1
    print("chapter sources are clean")
    return 0


def add_commands(sub) -> None:
    p = sub.add_parser("chapters", help="execute chapters with papermill into book/chapters/")
    p.add_argument("names", nargs="*", metavar="NAME", help="chapters to run (default: all, in _toc.yml order)")
    p.add_argument("--profile", default="ci", choices=PROFILES, help=f"one of {PROFILES} (default: ci)")
    p.add_argument("--force", action="store_true", help="execute even if the executed copy is current")
    p.add_argument("--runs-only", action="store_true",
                   help="only train (in one sweep) the runs the chapters read and the store lacks; execute nothing")
    p.add_argument("--prune", action="store_true",
                   help="also remove the ci records no chapter reads (left by a numerics or preset change)")
    p.add_argument("--train", action="store_true",
                   help="at paper: train the runs the records lack first (without a GPU it states the cost and "
                        "needs --yes); at ci the runs the records lack always train first")
    p.add_argument("--yes", action="store_true", help="with --train at paper on a machine without a GPU: go on")
    p.set_defaults(func=lambda a: run_chapters(a.names, profile=a.profile, force=a.force, runs_only=a.runs_only,
                                               prune=a.prune, train=a.train, yes=a.yes))
    c = sub.add_parser("check-sources", help="fail if a chapter source carries outputs")
    c.set_defaults(func=_check_sources)
