"""The scale ladder read back (`companion.experiments.ladder`): each headline claim's measure and verdict
on every rung that has all its records, against the training compute of the rung.

A rung's measure is the chapter's own measure on the rung's runs, at the rung's one budget: S2-06 and
S2-08 the learnable mask's full-cube accuracy over its runs that fit the seen set (precondition: at
least half fit), S2-13 the default's test sequence accuracy on addition at 0.4 %, S2-14 the mask's
gain over it paired by seed, S3-13 GOAT's margin over the best of RoPE, RoPE + PI and sinusoidal
beyond the training length, S3-14 GOAT's worst depth bin at 8L. S2-13 and S2-14 are decided in their
chapter at two budgets (the stated one and twice the updates); here each rung is its own budget, so
the rule is applied to the rung's one measure. The verdict follows the ledger's rule for the claim
(`companion.book.claims.assess`), so a rung can move a verdict only by moving its measure.

The `ci` rung is read from the chapter's records (`results/ci`), the others from `results/ladder`; a
rung with records missing is left out and counted (`missing`), never filled in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import pandas as pd

from companion.book.chapter import measures
from companion.book.chapters import ch09_extrapolation as ch09
from companion.book.claims import assess, load_ledger
from companion.book.chapters.frames import by_method, records_frame
from companion.experiments.ladder import FAMILIES, Family, Rung, paper_configs, rung_configs
from companion.paths import ladder_root
from companion.store import RunStore
from companion.reading import MissingRuns, read_configs
from companion.tasks import make_task
from companion.train import total_steps

__all__ = ["FIT", "rung_records", "train_flops", "gotu_measures", "arith_measures", "passkey_measures", "made", "missing", "ladder_table",
           "ladder_frame", "verdict_moves", "ladder_numbers"]

FIT = 0.99  # a run fits the seen set at this seen accuracy (Chapter 3's FIT)


PAPER = "paper"  # the rung name of the paper point: the family's runs at the sources' settings
PAPER_WHAT = "the sources' settings (paper profile, on a GPU)"


def paper_records(family: Family, store: RunStore | None = None):
    """The family's paper-profile records (`paper_configs`), or None while any is missing."""
    store = store or RunStore(profile="paper", read_only=True)
    try:
        records = read_configs(paper_configs(family.name), store)
    except MissingRuns:
        return None
    return records


def rung_records(family: Family, rung: Rung, store: RunStore | None = None, ci_store: RunStore | None = None):
    """The records of one rung in config order, or None when any is missing (read only, any device)."""
    cfgs = rung_configs(family.name, rung.name)
    if rung.name == "ci":
        store = ci_store or RunStore(profile="ci", read_only=True)
    else:
        store = store or RunStore(ladder_root(), read_only=True)
    try:
        records = read_configs(cfgs, store)
    except MissingRuns:
        return None
    return records


@lru_cache(maxsize=None)
def _task(task_cfg):
    return make_task(task_cfg)


def train_flops(cfg) -> float:
    """Training compute of one run, 6 · N · D: N the parameters of the attention and feed-forward
    blocks (embeddings and readout left out), D the tokens seen (updates × batch × tokens per example,
    CLS included for an encoder)."""
    m = cfg.model
    n = m.n_layers * (4 * m.d_model * m.n_heads * m.head_dim + 2 * m.d_model * m.d_ff)
    task = _task(cfg.task)
    tokens = task.spec.seq_len + (1 if m.arch == "encoder" else 0)
    return 6.0 * n * total_steps(task, cfg.train) * cfg.train.batch_size * tokens


def gotu_measures(records: Sequence) -> dict[str, tuple[float, dict, str]]:
    """S2-06 (2Parity) and S2-08 (Majority): {claim: (mean cube accuracy of the mask's runs that fit the
    seen set, or of all its runs when none does; {"mask-fits-seen": share that fit}; detail)}."""
    frame = records_frame([r for r in records if r.config.method == "mask"])
    out = {}
    for experiment, cid in (("gotu-2parity", "S2-06"), ("gotu-maj3", "S2-08")):
        runs = frame[frame.experiment == experiment]
        fitted = runs[runs["seen.acc"] >= FIT]
        value = float((fitted if len(fitted) else runs)["cube.acc"].mean())
        out[cid] = (round(value, 4), {"mask-fits-seen": round(len(fitted) / len(runs), 4)},
                    f"{len(fitted)} of {len(runs)} mask runs fit the seen set")
    return out


def arith_measures(records: Sequence) -> dict[str, tuple[float, dict, str]]:
    """S2-13 (mean test sequence accuracy of the default) and S2-14 (mean paired gain of the mask over
    it), fractions, on addition at 0.4 % at the rung's one budget."""
    frame = records_frame(records)
    by = {m: dict(zip(g.seed, g["test.seq_acc"])) for m, g in frame.groupby("method")}
    default = sum(by["default"].values()) / len(by["default"])
    gains = [by["mask"][s] - by["default"][s] for s in by["default"]]
    gain = sum(gains) / len(gains)
    return {"S2-13": (round(default, 4), {}, f"default {100 * default:.1f} %"),
            "S2-14": (round(gain, 4), {}, f"mask {100 * (default + gain):.1f} %, {len(gains)} seeds")}


def passkey_measures(records: Sequence) -> dict[str, tuple[float, dict, str]]:
    """S3-13 and S3-14 by Chapter 9's own functions on the rung's runs."""
    s = ch09.setup(records[0].config.profile)
    pk, grid = ch09.passkey_lengths(by_method(records), s.pk_specs, s.pk_task.digits)
    values = measures(ch09.PASSKEY, {"pk": pk, "grid": grid, "L": s.pk_task.seq_len})
    return {cid: (v, {}, "") for cid, v in values.items()}


MEASURES = {"gotu": gotu_measures, "arith": arith_measures, "passkey": passkey_measures}


def ladder_frame(families: Sequence[str] = tuple(FAMILIES), store: RunStore | None = None,
                 ci_store: RunStore | None = None, paper_store: RunStore | None = None) -> pd.DataFrame:
    """One row per (claim, rung) with its records: family, claim, rung, what, runs, flops (the rung's
    mean training compute per run), seconds (mean CPU wall time per run), measure, verdict, failed
    (preconditions, comma-separated), detail; rungs in ladder order. Rungs with records missing get no
    row: `missing(frame)` names them. The paper point (rung "paper", the committed paper-profile records
    of the same runs) follows the rungs when every one of its records exists, and is otherwise absent
    without being counted as missing: a CPU does not make it."""
    ledger = load_ledger()
    rows = []
    for name in families:
        fam = FAMILIES[name]
        rungs = [(rung.name, rung.what, rung_records(fam, rung, store, ci_store)) for rung in fam.rungs]
        rungs.append((PAPER, PAPER_WHAT, paper_records(fam, paper_store)))
        for rung_name, what, records in rungs:
            if records is None:
                if rung_name != PAPER:
                    rows.append({"family": name, "rung": rung_name, "what": what, "claim": None})
                continue
            flops = sum(train_flops(r.config) for r in records) / len(records)
            seconds = sum(r.wall_time for r in records) / len(records)
            for cid, (value, pre, detail) in MEASURES[name](records).items():
                verdict, failed = assess(ledger[cid], value, pre)
                rows.append({"family": name, "claim": cid, "rung": rung_name, "what": what,
                             "runs": len(records), "flops": flops, "seconds": seconds, "measure": value,
                             "verdict": verdict, "failed": ", ".join(failed), "detail": detail,
                             **{f"pre:{k}": v for k, v in pre.items()}})
    return pd.DataFrame(rows)


def made(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of rungs with all their records."""
    return frame[frame.claim.notna()].reset_index(drop=True)


def missing(frame: pd.DataFrame) -> list[str]:
    """"family/rung" of every rung whose records are not all there."""
    return [f"{r.family}/{r.rung}" for r in frame[frame.claim.isna()].itertuples()]


def verdict_moves(frame: pd.DataFrame, claim: str) -> str:
    """In words: whether the claim's `ci` verdict holds on every rung made, or where it changes."""
    rows = made(frame)
    rows = rows[rows.claim == claim]
    if rows.empty or "ci" not in set(rows.rung):
        return f"{claim}: no rung has its records"
    base = rows[rows.rung == "ci"].verdict.iloc[0]
    changed = rows[rows.verdict != base]
    others = len(rows) - 1
    if others == 0:
        return f"{claim} has only its ci rung so far ({base} there)"
    if changed.empty:
        return f"{claim} stays {base} on every rung made above ci ({others} of them)"
    moves = "; ".join(f"{r.rung}: {r.verdict}" for r in changed.itertuples())
    return f"{claim} is {base} on the ci rung and changes on {len(changed)} of the {others} rungs above it ({moves})"


def ladder_numbers(frame: pd.DataFrame, prefix: str) -> dict[str, str]:
    """Glue values, each key starting with `prefix` (the chapter's, e.g. "ch4"): per claim and rung its
    measure (`<prefix>_ladder_<claim>_<rung>`, 3 digits) and verdict, per claim the sentence of
    `verdict_moves`, the rungs made and those still to make."""
    out = {}
    for r in made(frame).itertuples():
        key = f"{prefix}_ladder_{r.claim.replace('-', '')}_{r.rung.replace('-', '_')}"
        out[key] = f"{r.measure:.3f}"
        out[f"{key}_verdict"] = r.verdict
    for cid in sorted(set(made(frame).claim)):
        out[f"{prefix}_ladder_{cid.replace('-', '')}_moves"] = verdict_moves(frame, cid)
    todo = missing(frame)
    out[f"{prefix}_ladder_missing"] = ", ".join(todo) if todo else "none"
    out[f"{prefix}_ladder_made"] = str(len(frame[["family", "rung"]].drop_duplicates()) - len(todo))
    out[f"{prefix}_ladder_rungs"] = str(len(frame[["family", "rung"]].drop_duplicates()))
    return out


def ladder_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The rungs made, for the page: what grows, compute and CPU time per run, and each claim's measure
    with its verdict."""
    rows = made(frame)
    table = rows.pivot_table(index=["rung", "what", "flops", "seconds"], columns="claim",
                             values="measure", sort=False)
    verdicts = rows.pivot_table(index="rung", columns="claim", values="verdict", aggfunc="first", sort=False)
    out = pd.DataFrame({"What grows": [w for _, w, _, _ in table.index],
                        "Compute per run (FLOPs)": [compute_label(f) for _, _, f, _ in table.index],
                        "CPU per run (s)": [f"{s:.0f}" for *_, s in table.index]},
                       index=pd.Index([r for r, *_ in table.index], name="Rung"))
    for cid in table.columns:
        out[cid] = [f"{table.loc[idx, cid]:.3f} ({verdicts.loc[idx[0], cid]})" for idx in table.index]
    return out


def compute_label(flops: float) -> str:
    """FLOPs as a power of ten with one decimal of mantissa, e.g. "3.2e13"."""
    exponent = int(math.floor(math.log10(flops)))
    return f"{flops / 10 ** exponent:.1f}e{exponent}"
