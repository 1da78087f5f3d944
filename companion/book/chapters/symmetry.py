"""Chapter 3's section "Why the mask helps Majority and not 2Parity": the book's own account, its
closed-form predictions, and the runs that decide them (claims M-01 … M-06).

The account: a mask built from a task's structure makes the model (nearly) symmetric in the bits it opens, and
training still prefers low degree, so the model lands on the lowest-degree interpolant of the seen set symmetric
in those bits (`companion.boolean_fourier.min_degree_interpolator` with `symmetric`). `predictions` scores that
interpolant and the unrestricted MDI per task; `measures` turns the `symmetry` grid's runs (default, mask and
exactly symmetric mask, seeds 0–9; loaded by Chapter 3's `load`) into the claims' measures. Nothing here trains.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from companion.boolean_fourier import cube, evaluate, min_degree_interpolator
from companion.book.chapter import Measure
from companion.book.chapters.frames import records_frame
from companion.book.claims import crossed_lines, in_words
from companion.book.labels import label, task_title
from companion.book.chapters.stats import summarize
from companion.book.prose import mean_sd, num, pct, signed
from companion.experiments.symmetry import METHODS, SEEDS
from companion.tasks.boolean import accuracy, make_function

__all__ = ["N_BITS", "SEEDS", "SHOWN", "FIT", "interpolants", "predictions", "prediction_table", "prediction_numbers",
           "frame_of", "measured_table", "measures", "measured", "SYMMETRY", "symmetry_numbers"]

N_BITS = 15
SHOWN = ("2parity", "maj3", "threesym", "2parity-moved")  # the page's order
FIT = 0.99  # a model fits the seen set at this mean seen accuracy
SPLITS = ("cube", "unseen", "seen")


def interpolants(function: str, n: int = N_BITS) -> dict[str, dict | None]:
    """The task's minimum-degree interpolator ("mdi") and the lowest-degree interpolant symmetric in
    its open bits ("symmetric"; None when no interpolant of the seen set is symmetric in them)."""
    fn = make_function(function, n)
    return {"mdi": fn.mdi(n),
            "symmetric": min_degree_interpolator(fn.expansion, fn.unseen, n, frozen=fn.frozen, symmetric=fn.open_bits())}


def _scores(expansion: dict, function: str, n: int) -> dict[str, float]:
    """Accuracy ("nearest" reading) of an expansion on the cube, the unseen and the seen set."""
    fn = make_function(function, n)
    x = cube(n)
    y = evaluate(fn.expansion, x)
    pred = evaluate(expansion, x)
    labels = torch.unique(y)
    u = fn.unseen(x)
    return {"cube": accuracy(pred, y, labels), "unseen": accuracy(pred[u], y[u], labels),
            "seen": accuracy(pred[~u], y[~u], labels)}


def predictions(n: int = N_BITS) -> dict[str, dict[str, dict[str, float] | None]]:
    """{task: {"mdi": accuracies, "symmetric": accuracies or None}}: what the account predicts for the
    mask ("symmetric") and what the default's MDI scores, each on the cube, U and S."""
    out = {}
    for fn in SHOWN:
        parts = interpolants(fn, n)
        out[fn] = {k: (None if e is None else _scores(e, fn, n)) for k, e in parts.items()}
    return out


def _poly(e: dict | None) -> str:
    """An expansion as a polynomial, by degree: "−1 + x0 + x1", "x0·x1"; "none exists" for None."""
    if e is None:
        return "none exists"
    text = ""
    for m, c in sorted(e.items(), key=lambda t: (len(t[0]), t[0])):
        mono = "·".join(f"x{i}" for i in m)
        size = f"{abs(c):g}" if not mono or abs(c) != 1 else ""
        term = f"{size}·{mono}" if size and mono else size or mono
        text += (" − " if c < 0 else " + ") + term if text else ("−" if c < 0 else "") + term
    return text


def prediction_table(preds: dict, n: int = N_BITS) -> pd.DataFrame:
    """Task rows: the open bits, the MDI and the symmetric interpolant as polynomials, and each one's
    full-cube and unseen accuracy (%), one decimal ("—" where no symmetric interpolant exists)."""
    rows = {}
    for fn in SHOWN:
        parts = interpolants(fn, n)
        f = make_function(fn, n)
        rows[task_title(fn)] = {
            "Open bits": ", ".join(f"x{i}" for i in f.open_bits()),
            "MDI": _poly(parts["mdi"]), "MDI: cube (%)": num(100 * preds[fn]["mdi"]["cube"], 1),
            "MDI: U (%)": num(100 * preds[fn]["mdi"]["unseen"], 1),
            "Symmetric interpolant": _poly(parts["symmetric"]),
            **{f"Symmetric: {'cube' if s == 'cube' else 'U'} (%)":
               ("—" if preds[fn]["symmetric"] is None else num(100 * preds[fn]["symmetric"][s], 1))
               for s in ("cube", "unseen")}}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "Task"
    return out


def prediction_numbers(preds: dict) -> dict[str, str]:
    """ch3_sym_pred_<task>_<split> (the symmetric interpolant's accuracy, "none" where none exists) and
    ch3_sym_mdi_<task>_<split> (the MDI's), split cube or unseen; task keys with '-' as '_'."""
    out = {}
    for fn in SHOWN:
        key = fn.replace("-", "_")
        for s in ("cube", "unseen"):
            sym = preds[fn]["symmetric"]
            out[f"ch3_sym_pred_{key}_{s}"] = "none" if sym is None else pct(sym[s])
            out[f"ch3_sym_mdi_{key}_{s}"] = pct(preds[fn]["mdi"][s])
    return out


def frame_of(records: dict[str, Sequence]) -> pd.DataFrame:
    """One row per run of {task: [Record]}: task, method, seed and the final metrics ("cube.acc", …)."""
    if not any(records.values()):
        return pd.DataFrame(columns=["task", "method", "seed"])
    frame = pd.concat([records_frame(recs).assign(task=fn) for fn, recs in records.items() if recs], ignore_index=True)
    return frame[["task", *frame.columns.drop("task")]]


def measured_table(frame: pd.DataFrame) -> pd.DataFrame:
    """(Task, method) rows; per split the mean ± standard deviation over seeds and the lowest and
    highest seed, accuracy in %, one decimal."""
    rows = {}
    for fn in SHOWN:
        for m in METHODS:
            runs = frame[(frame.task == fn) & (frame.method == m)]
            if not len(runs):
                continue
            row = {}
            for s in SPLITS:
                v = 100 * runs[f"{s}.acc"]
                row[f"{s.capitalize()} (%)"] = mean_sd(v)
                row[f"{s.capitalize()} min–max"] = f"{num(v.min(), 1)}–{num(v.max(), 1)}"
            row["Seeds"] = len(runs)
            rows[(task_title(fn), label(m))] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=["Task", "Method"])
    return out


def _mean(frame: pd.DataFrame, task: str, method: str, col: str) -> float:
    runs = frame[(frame.task == task) & (frame.method == method)]
    return float(runs[col].mean()) if len(runs) else float("nan")


def _paired(frame: pd.DataFrame, task: str, a: str, b: str, col: str) -> float:
    """Mean over common seeds of a − b in `col`."""
    if col not in frame:
        return float("nan")
    sub = frame[frame.task == task]
    x = dict(zip(sub[sub.method == a].seed, sub[sub.method == a][col]))
    y = dict(zip(sub[sub.method == b].seed, sub[sub.method == b][col]))
    seeds = sorted(set(x) & set(y))
    return float(np.mean([x[s] - y[s] for s in seeds])) if seeds else float("nan")


def measures(frame: pd.DataFrame) -> dict:
    """`means` {(task, method): {split: mean accuracy}}, `seen` {(task, method): mean seen accuracy}, the
    paired mask − default gains `moved_gain` (2Parity moved, on U) and `threesym_gain` (3-symmetric, on the cube),
    and `majority`, the learnable mask's cube accuracy on 3-bit Majority over seeds (`stats.summarize`; M-04)."""
    means = {(fn, m): {s: _mean(frame, fn, m, f"{s}.acc") for s in SPLITS} for fn in SHOWN for m in METHODS}
    majority = frame[(frame.task == "maj3") & (frame.method == "mask")]["cube.acc"] if "cube.acc" in frame else []
    return {"means": means, "seen": {k: v["seen"] for k, v in means.items()},
            "moved_gain": _paired(frame, "2parity-moved", "mask", "default", "unseen.acc"),
            "threesym_gain": _paired(frame, "threesym", "mask", "default", "cube.acc"),
            "majority": summarize(list(majority)) if len(majority) > 1 else None}


def measured(ms: dict) -> bool:
    """Whether `measures` read any run (none at a profile whose grid has no symmetry runs: not run there)."""
    return not all(np.isnan(v["seen"]) for v in ms["means"].values())


def _seen(task: str, method: str):
    return lambda ms: round(ms["seen"][(task, method)], 4)


def _fit(task: str, *methods: str) -> dict:
    """The preconditions of a claim comparing `methods` on `task`: each one's mean seen accuracy (book/claims.yml)."""
    names = {"default": "default-fits-seen", "mask": "mask-fits-seen", "sym-mask": "symmetric-fits-seen"}
    return {names[m]: _seen(task, m) for m in methods}


def _mean_of(task: str, split: str):
    return lambda ms: round(ms["means"][(task, "sym-mask")][split], 4)


def _pair(task: str, split: str, where: str):
    return lambda ms: (f"mask {pct(ms['means'][(task, 'mask')][split])}, default "
                       f"{pct(ms['means'][(task, 'default')][split])} of {where}")


def _majority(ms: dict) -> str:
    m = ms["majority"]
    return (f"mean {pct(m.mean)} over {m.n} seeds, 95 % interval [{pct(m.lo)}, {pct(m.hi)}]"
            + crossed_lines("M-04", m.lo, m.hi, lambda t: pct(t, 0)))


# M-01 … M-06 over `measures` (decided only where `measured`), 4 decimals; M-04 is the lower end of the 95 %
# interval over seeds of the mask's cube accuracy on Majority.
SYMMETRY = (
    Measure("M-01", lambda ms: round(ms["moved_gain"], 4), _fit("2parity-moved", "default", "mask"),
            _pair("2parity-moved", "unseen", "U")),
    Measure("M-02", _mean_of("2parity-moved", "unseen"), _fit("2parity-moved", "sym-mask")),
    Measure("M-03", _mean_of("2parity", "cube"), _fit("2parity", "sym-mask")),
    Measure("M-04", lambda ms: round(ms["majority"].lo, 4), _fit("maj3", "default", "mask"), _majority),
    Measure("M-05", _mean_of("maj3", "cube"), _fit("maj3", "sym-mask")),
    Measure("M-06", lambda ms: round(ms["threesym_gain"], 4), _fit("threesym", "default", "mask"),
            _pair("threesym", "cube", "the cube")),
)


def symmetry_numbers(ms: dict, results: Sequence = ()) -> dict[str, str]:
    """ch3_sym_<task>_<method>_<split> (mean accuracy; '-' in keys as '_'), ch3_sym_maj3_interval (M-04's
    interval over seeds), ch3_sym_moved_gain and
    ch3_sym_threesym_gain (points, signed) and ch3_verdict_M-0k."""
    out = {}
    for (fn, m), v in ms["means"].items():
        for s in SPLITS:
            out[f"ch3_sym_{fn.replace('-', '_')}_{m.replace('-', '_')}_{s}"] = pct(v[s])
    m = ms.get("majority")
    out["ch3_sym_maj3_interval"] = "—" if m is None else f"[{pct(m.lo)}, {pct(m.hi)}]"
    out["ch3_sym_moved_gain"] = signed(100 * ms["moved_gain"])
    out["ch3_sym_threesym_gain"] = signed(100 * ms["threesym_gain"])
    return out | {f"ch3_verdict_{r.id}": in_words(r) for r in results if r.id.startswith("M-")}
