"""Chapter 3 (extrapolating Boolean functions): the GOTU runs read back as tables, claims and figures.

Section by section, as the chapter reads:
- the tasks: `tasks_table`, `references` / `reference_table` (the minimum-degree interpolator, MDI),
  `patterns` (the masks), `recovered_monomials` and `mask_claims` (the masks equal the Fourier support);
- the budget: `budget`, `budget_numbers`;
- the runs: `load` (the `gotu` grid and its per-run frame);
- Tables 1 and 4: `table`, `table1`, `table4`, `table1_measures`, `table_claims`, `table_claim_details`,
  `table_preconditions`, `table_numbers`; the headline pairing: `paired_against`, `headline`, `headline_numbers`;
- the learning curves: `accuracy_curves`;
- Figure 5: `figure5_panels`, `map_summary`, `persistence`, `figure5_claims`, `figure5_numbers`.

A `*_claims` function returns {claim id: measure} for `record_all`; a `*_numbers` function returns
{glue name: text} for `glue_all`. Everything here reads stored runs; nothing trains.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from companion.boolean_fourier import cube, evaluate
from companion.book.frames import long_curves, open_mass, records_frame
from companion.book.labels import label, task_title
from companion.book.prose import num, pct
from companion.book.stats import paired_table, summary_table
from companion.experiments import get_experiment
from companion.experiments.gotu import METHODS
from companion.masks import support_pattern
from companion.sweep import ensure_grid
from companion.tasks.boolean import FUNCTIONS, BooleanTask, make_function

__all__ = ["NAMED", "READINGS", "SHOWN", "tasks_table", "references", "reference_table", "reference_numbers",
           "patterns", "recovered_monomials", "mask_claims", "budget", "budget_numbers", "load", "table",
           "table1", "table4", "table1_measures", "table_claims", "table_claim_details", "table_preconditions",
           "table_numbers",
           "paired_against", "headline", "headline_numbers", "accuracy_curves", "figure5_panels", "map_summary",
           "persistence", "figure5_claims", "figure5_numbers"]

N_BITS = 15
NAMED = ("2parity", "cyclic3", "maj3")  # the tasks whose rows the paper's Table 1 reports
READINGS = ("nearest", "sign", "tolerance")  # accuracy readings of a real-valued prediction
SHOWN = ("default", "structured-svd", "mask")  # the methods of Figure 5
MASK_CLAIMS = {"2parity": "S2-06", "cyclic3": "S2-07", "maj3": "S2-08"}  # learnable mask, Table 1
UNSEEN = {"2parity": "x0 = x1 = −1", "cyclic3": "x0 = x1 = x2 = −1", "maj3": "x0 = x1 = −1",
          "threesym": "x0·x1·x2 = −1"}


def tasks_table() -> pd.DataFrame:
    """Per task: its unseen set, |S|, |U| and the MDI's monomials of degree ≤ 2."""
    rows = []
    for fn in FUNCTIONS:
        task = BooleanTask(fn, n_bits=N_BITS)
        mdi = sorted(make_function(fn, N_BITS).mdi(N_BITS).items(), key=lambda t: len(t[0]))
        rows.append({"task": task_title(fn), "unseen set": UNSEEN[fn], "|S|": len(task.splits["seen"][0]),
                     "|U|": len(task.splits["unseen"][0]),
                     "MDI (monomials of degree ≤ 2 shown)": " + ".join(
                         f"{c:g}·x{''.join(map(str, m)) or '∅'}" for m, c in mdi if len(m) <= 2)})
    return pd.DataFrame(rows).set_index("task")


def references(readings: Sequence[str] = READINGS) -> dict[str, dict[str, dict[str, float]]]:
    """The MDI's accuracy per reading and task: {reading: {task: {"cube", "unseen", "seen"}}}."""
    return {r: {fn: BooleanTask(fn, n_bits=N_BITS, metric=r).reference() for fn in FUNCTIONS} for r in readings}


def reference_table(refs: dict[str, dict[str, dict[str, float]]]) -> pd.DataFrame:
    """Task rows, one column per split (cube, unseen) and reading, in percent to one decimal."""
    table = pd.DataFrame({f"{split} ({r})": {task_title(fn): refs[r][fn][split] for fn in FUNCTIONS}
                          for r in refs for split in ("cube", "unseen")})
    return (100 * table).round(1)


def reference_numbers(refs: dict[str, dict[str, dict[str, float]]]) -> dict[str, str]:
    """ch3_mdi_<task>: the MDI's full-cube accuracy under the "nearest" reading."""
    return {f"ch3_mdi_{fn}": pct(refs["nearest"][fn]["cube"]) for fn in FUNCTIONS}


def patterns() -> dict[str, torch.Tensor]:
    """Each task's mask pattern (Fourier support, CLS row and column included): bool (16, 16)."""
    return {fn: BooleanTask(fn, n_bits=N_BITS).mask_pattern("support", cls=True) for fn in FUNCTIONS}


def walsh_expansion(values: torch.Tensor, coords: tuple[int, ...]) -> dict[tuple[int, ...], float]:
    """The Fourier expansion of a function given by its values on `cube(len(coords))` (rows in
    `cube` order), by the fast Walsh–Hadamard transform: c_S = mean_x f(x) Π_{i∈S} x_i for every S
    at once in k·2^k additions (the direct sum over the 2^k subsets costs 4^k). Zero coefficients
    (|c| ≤ 1e-12) are dropped; monomials are named by the labels `coords`."""
    k = len(coords)
    t = values.to(torch.float64).reshape((2,) * k)  # axis i: coordinate i at −1 (index 0) or +1 (1)
    for axis in range(k):
        lo, hi = t.select(axis, 0), t.select(axis, 1)
        t = torch.stack([lo + hi, lo - hi], dim=axis)  # index 1 along `axis`: −Σ x_i f(x)
    t = t / 2 ** k
    out = {}
    for idx in torch.nonzero(t.abs() > 1e-12).tolist():
        subset = tuple(i for i in range(k) if idx[i])
        out[tuple(coords[i] for i in subset)] = float(t[tuple(idx)]) * (-1) ** len(subset)
    return out


def recovered_monomials(function: str, n: int = N_BITS) -> list[tuple[int, ...]]:
    """The target's non-constant monomials recovered from its values by a Fourier transform.

    Independent of the hand-written expansion's keys: the values on the sub-cube of the coordinates
    the target uses are transformed back to coefficients (`walsh_expansion`), and the non-zero ones
    are returned, by degree then label.
    """
    f = make_function(function, n)
    coords = tuple(sorted({i for m in f.expansion for i in m}))
    sub = cube(len(coords), dtype=torch.float64)
    full = torch.zeros(len(sub), n, dtype=torch.float64)
    full[:, list(coords)] = sub
    return sorted((m for m in walsh_expansion(evaluate(f.expansion, full), coords) if m), key=lambda m: (len(m), m))


def mask_claims(masks: dict[str, torch.Tensor]) -> dict[str, bool]:
    """S2-11: every mask equals the pattern rebuilt from the monomials recovered from the target's values."""
    rebuilt = {fn: support_pattern(recovered_monomials(fn), N_BITS, cls=True) for fn in masks}
    return {"S2-11": all(torch.equal(rebuilt[fn], masks[fn]) for fn in masks)}


def budget(profile: str, seeds: Sequence[int]) -> pd.Series:
    """The model, optimiser and training budget every method and task shares at `profile`."""
    cfg = get_experiment("gotu-2parity").configs(profile)["default"]
    return pd.Series({
        "d_model": cfg.model.d_model, "layers": cfg.model.n_layers, "heads": cfg.model.n_heads,
        "d_head": cfg.model.head_dim, "FF": cfg.model.d_ff, "optimiser": cfg.train.optimizer,
        "lr": cfg.train.lr, "L2": cfg.train.weight_decay, "batch": cfg.train.batch_size,
        "steps": cfg.train.steps or f"{cfg.train.epochs} epochs",
        "training points": dict(cfg.task.params).get("n_train") or "all of S", "seeds": len(seeds)}, name=profile)


def budget_numbers(b: pd.Series) -> dict:
    """ch3_budget_<item> for the items the prose cites (values as they are, e.g. 250 steps, lr 0.003)."""
    return {f"ch3_budget_{k.replace(' ', '_')}": b[k]
            for k in ("d_model", "layers", "steps", "batch", "training points", "lr")}


def load(profile: str, seeds: Sequence[int], *, jobs: int | None = None) -> tuple[dict[str, list], pd.DataFrame]:
    """Records of every task × method × seed (the `gotu` grid, run when missing) and their frame:
    one row per run with a `task` column and each split's accuracy also in percent ("cube.acc (%)")."""
    records = ensure_grid("gotu", profile, seeds, jobs=jobs)
    frame = pd.concat([records_frame(recs).assign(task=fn) for fn, recs in records.items()], ignore_index=True)
    frame = frame[["task", *frame.columns.drop("task")]]
    for split in ("cube", "unseen", "seen"):
        frame[f"{split}.acc (%)"] = 100 * frame[f"{split}.acc"]
    return records, frame


def table(frame: pd.DataFrame, metrics: Sequence[str], *, methods: Sequence[str] = METHODS,
          digits: int = 3) -> pd.DataFrame:
    """Task × method rows, "mean ± std [95% interval]" per metric (the shared table format)."""
    sub = frame[frame["method"].isin(methods)].copy()
    sub["method"] = sub["method"].map(label)
    sub["task"] = sub["task"].map(task_title)
    return summary_table(sub, ["task", "method"], metrics, digits=digits)


def table1(frame: pd.DataFrame, refs: dict[str, dict[str, dict[str, float]]]) -> pd.DataFrame:
    """Table 1: every method's accuracies (percent) and cube mse, with the MDI row ("nearest") per task."""
    t1 = table(frame, ["cube.acc (%)", "unseen.acc (%)", "seen.acc (%)", "cube.mse"], digits=1)
    near = refs["nearest"]
    mdi = pd.DataFrame({f"{split}.acc (%)": {(task_title(fn), "MDI (reference)"): f"{100 * near[fn][split]:.1f}"
                                             for fn in FUNCTIONS} for split in ("cube", "unseen")})
    return pd.concat([t1.astype(str), mdi]).sort_index(level=0, sort_remaining=False).fillna("")


def table4(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 4: default, all-zero mask, fixed mask and learnable mask, cube and unseen accuracy (percent)."""
    return table(frame, ["cube.acc (%)", "unseen.acc (%)"], methods=("default", "zero-mask", "fixed-mask", "mask"),
                 digits=1)


def table1_measures(frame: pd.DataFrame, refs: dict[str, dict[str, float]], fit: float = 0.99) -> dict:
    """The quantities behind the Table 1 and Table 4 claims, from the per-run frame.

    `refs` is one reading's {task: MDI accuracies}. Returns a dict with: `means` (task × method mean
    accuracies), `fits` (task → default fits S), `mdi_gap` (largest |default − MDI| cube accuracy over
    NAMED tasks where the default fits S), `unfit` (tasks where it does not), `structured_gain` and
    `zero_gain` (largest mean gain over default of a structured QK init / of the all-zero mask, over
    all tasks), and `svd_fit` ((runs of Structured (SVD) that fit S, all its runs)).
    """
    means = frame.groupby(["task", "method"])[["cube.acc", "unseen.acc", "seen.acc"]].mean()
    tasks = list(dict.fromkeys(frame["task"]))
    fits = {fn: bool(means.loc[(fn, "default"), "seen.acc"] >= fit) for fn in tasks}
    gaps = [abs(means.loc[(fn, "default"), "cube.acc"] - refs[fn]["cube"]) for fn in NAMED if fn in tasks and fits[fn]]

    def gain(method: str, fn: str) -> float:
        return means.loc[(fn, method), "cube.acc"] - means.loc[(fn, "default"), "cube.acc"]

    svd = frame[frame.method == "structured-svd"]
    return {
        "means": means, "fits": fits, "mdi_gap": max(gaps, default=float("nan")),
        "unfit": [fn for fn in tasks if not fits[fn]],
        "structured_gain": max(gain(m, fn) for fn in tasks for m in ("structured-svd", "structured-opt")),
        "zero_gain": max(gain("zero-mask", fn) for fn in tasks),
        "svd_fit": (int((svd["seen.acc"] >= fit).sum()), len(svd)),
    }


def table_claims(tm: dict) -> dict[str, float]:
    """S2-05 (MDI gap), S2-06–S2-08 (the mask's cube accuracy on the named tasks), S2-09 (structured
    gain) and S2-10 (all-zero mask gain), from `table1_measures`, rounded to 4 decimals."""
    means = tm["means"]
    return {"S2-05": round(tm["mdi_gap"], 4),
            **{cid: round(means.loc[(fn, "mask"), "cube.acc"], 4) for fn, cid in MASK_CLAIMS.items()},
            "S2-09": round(tm["structured_gain"], 4), "S2-10": round(tm["zero_gain"], 4)}


def table_claim_details(tm: dict) -> dict[str, str]:
    """S2-05's detail: the tasks left out because the default model did not fit the seen set."""
    return {"S2-05": f"not fitted: {tm['unfit'] or 'none'}"}


def table_preconditions(tm: dict) -> dict[str, dict[str, float]]:
    """The preconditions of the Table 1 claims (book/claims.yml, `default-fits-seen`): the default's mean
    seen accuracy on the task of S2-06–S2-08, and for S2-05 the highest over the named tasks, 4 decimals."""
    seen = {fn: round(float(tm["means"].loc[(fn, "default"), "seen.acc"]), 4)
            for fn in NAMED if (fn, "default") in tm["means"].index}
    out = {"S2-05": {"default-fits-seen": max(seen.values(), default=0.0)}}
    return out | {cid: {"default-fits-seen": seen[fn]} for fn, cid in MASK_CLAIMS.items() if fn in seen}


def table_numbers(tm: dict, results: Sequence) -> dict[str, str]:
    """The Table 1 and Table 4 prose: MDI gap, unfitted tasks, default and mask accuracies per named
    task with the verdict of its claim (from the recorded `results`), structured and all-zero gains."""
    means = tm["means"]
    verdicts = {r.id: r.verdict for r in results}
    out = {"ch3_mdi_gap": num(100 * tm["mdi_gap"], 1),
           "ch3_default_unfit": ", ".join(task_title(fn) for fn in tm["unfit"]) or "none",
           "ch3_threesym_default": pct(means.loc[("threesym", "default"), "cube.acc"])}
    for fn, cid in MASK_CLAIMS.items():
        out[f"ch3_mask_{fn}"] = pct(means.loc[(fn, "mask"), "cube.acc"])
        out[f"ch3_default_{fn}"] = pct(means.loc[(fn, "default"), "cube.acc"])
        out[f"ch3_verdict_{fn}"] = verdicts[cid]
    out["ch3_structured_gain"] = num(100 * tm["structured_gain"], 1)
    out["ch3_svd_fit"] = "{} of {}".format(*tm["svd_fit"])
    out["ch3_zero_gain"] = num(100 * tm["zero_gain"], 1)
    return out


def paired_against(frame: pd.DataFrame, metric: str, baseline: str = "default", digits: int = 3) -> pd.DataFrame:
    """Per task, each method minus `baseline` paired by seed, with its 95% interval and p-value
    (rows: method labels; a `task` column with the task's title)."""
    parts = []
    for fn, sub in frame.groupby("task", sort=False):
        t = paired_table(sub, "method", "seed", metric, baseline, digits=digits)
        t.insert(0, "task", task_title(fn))
        parts.append(t)
    out = pd.concat(parts)
    out.index = out.index.map(label)
    return out


def headline(frame: pd.DataFrame) -> pd.DataFrame:
    """The mask and the two structured initialisations minus default, in points of cube accuracy."""
    paired = paired_against(frame, "cube.acc (%)", digits=1)
    return paired[paired.index.isin([label(m) for m in ("mask", "structured-svd", "structured-opt")])]


def headline_numbers(hl: pd.DataFrame) -> dict[str, str]:
    """ch3_hl_<task>: mask minus default, "diff [lo, hi]" in points, per task."""
    col = "cube.acc (%) − default"
    return {f"ch3_hl_{fn}": hl[hl.task == task_title(fn)].loc[label("mask"), col] for fn in FUNCTIONS}


def accuracy_curves(records: Sequence) -> pd.DataFrame:
    """Full-cube accuracy (percent) during training, long form: method, seed, step, "full-cube accuracy (%)"."""
    return long_curves(records, "cube", "acc", scale=100).rename(columns={"value": "full-cube accuracy (%)"})


def figure5_panels(records: Sequence, seed: int, methods: Sequence[str] = SHOWN) -> list[tuple[str, list]]:
    """Figure 5's panels, row by row (one row per method of the run with `seed`): the first and the
    last layer's attention map, each at the start and at the end of training, as (title, map)."""
    runs = {r.config.method: r for r in records if r.seed == seed}
    panels = []
    for m in methods:
        maps = runs[m].drift["maps"]
        last = len(maps["init"]) - 1
        for when, layer in (("init", 0), ("final", 0), ("init", last), ("final", last)):
            title = f"{label(m)}: layer {layer + 1}, {'start' if when == 'init' else 'end'}"
            panels.append((title, maps[when][layer]))
    return panels


def map_summary(records: dict[str, Sequence], masks: dict[str, torch.Tensor], methods: Sequence[str] = SHOWN,
                row: int | None = 0) -> pd.DataFrame:
    """Share of attention on the mask's open keys (of query `row`, 0 = CLS; every query averaged when
    None), one row per task × method × seed × layer: columns init and final."""
    rows = []
    for fn, recs in records.items():
        for rec in recs:
            if rec.config.method not in methods:
                continue
            maps = rec.drift["maps"]
            for layer in range(len(maps["init"])):
                rows.append({"task": fn, "method": rec.config.method, "seed": rec.seed, "layer": layer,
                             "init": open_mass(maps["init"][layer], masks[fn], row),
                             "final": open_mass(maps["final"][layer], masks[fn], row)})
    return pd.DataFrame(rows)


def persistence(maps: pd.DataFrame) -> pd.DataFrame:
    """Task rows; (init | final) × method columns: the open share averaged over seeds and layers."""
    table = maps.groupby(["task", "method"])[["init", "final"]].mean().unstack("method")
    return table.rename(index=task_title).rename(columns=label, level="method").round(2)


def _open_share(maps: pd.DataFrame, method: str, when: str) -> float:
    return float(maps[maps.method == method][when].mean())


def _keep(maps: pd.DataFrame) -> float:
    """The open share at the end, mask minus Structured (SVD), over tasks, seeds and layers."""
    return _open_share(maps, "mask", "final") - _open_share(maps, "structured-svd", "final")


def figure5_claims(maps: pd.DataFrame) -> dict[str, float]:
    """S2-12: the open share at the end, mask minus Structured (SVD), rounded to 4 decimals."""
    return {"S2-12": round(_keep(maps), 4)}


def figure5_numbers(maps: pd.DataFrame, seed: int) -> dict:
    """The Figure 5 prose: the seed shown, Structured (SVD)'s open share at the start and the end,
    the mask's at the end, and their difference at the end."""
    return {"ch3_fig5_seed": seed, "ch3_keep": num(_keep(maps)),
            "ch3_svd_start": num(_open_share(maps, "structured-svd", "init")),
            "ch3_svd_end": num(_open_share(maps, "structured-svd", "final")),
            "ch3_mask_end": num(_open_share(maps, "mask", "final"))}
