"""How far Adam lets a mask move, and what the mask does where it can move (Chapter 6, claims M-07 … M-09
and R-01; the `mask-can-move` precondition of S2-10, S2-23, S2-24 and S2-28).

Adam scales each coordinate's step by the running size of its own gradient, so an entry of a mask
moves by about one learning rate per update, whatever its gradient: after t updates
|M_t − M_0| ≲ Σ_{s≤t} lr_s, the cap (`companion.train.prior_lr_sum`), and never more than
(1 − β₁)/√(1 − β₂) times it (`companion.train.adam_step_bound`, Kingma & Ba 2015 §2.1). Every
record of a model with a mask holds the largest move of one entry at each evaluation
(`drift["mask_step"]`, `companion.drift.DriftTracker`). The `mask-moves` grid (`companion.experiments.referee`)
gives the mask a learning rate of its own, at which its cap passes the 20 between a closed and an open ±10 entry.
Nothing here trains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import pandas as pd

from companion.book.chapter import Measure
from companion.book.chapters.frames import flat_records
from companion.book.chapters.stats import Paired, paired
from companion.book.claims import in_words
from companion.book.labels import task_title
from companion.book.prose import num, pct, signed
from companion.config import TrainConfig
from companion.experiments.gotu import FUNCTIONS, gotu_configs
from companion.experiments.referee import MOVABLE, MOVABLE_LR, TASKS
from companion.tasks import make_task
from companion.train import adam_step_bound, lr_curve, prior_lr_sum, total_steps

__all__ = ["CROSSING", "cumulative_lr", "cap", "largest_move", "step_ratio", "learnable", "cap_precondition",
           "method_caps", "cap_glue", "movable_frame", "movable_table", "measures", "CLAIMS",
           "step_cap_numbers", "decided_claims", "own_rate_glue", "paper_caps", "paper_cap_numbers",
           "placeholder_measures"]

CROSSING = 20.0  # the distance between a closed (−10) and an open (+10) entry of a ±10 mask
FIT = 0.99  # a run fits the seen set at this seen accuracy (Chapter 6's FIT)
GAIN = 0.02  # the correct mask matters on a task when it is this far above no mask in cube accuracy (Chapter 6)


@lru_cache(maxsize=64)
def cumulative_lr(train: TrainConfig, total: int) -> tuple[float, ...]:
    """Σ_{s≤t} of the prior's learning rate (`prior_lr`, or `lr`, under the schedule) for t = 1 … `total`, exactly
    as the run stepped it."""
    scale = (train.prior_lr or train.lr) / train.lr
    return tuple(float(v) * scale for v in np.cumsum(np.asarray(lr_curve(train, total), dtype=np.float64)))


def _total(record) -> int:
    """The run's number of updates: its config's `steps`, or the last evaluation of an epoch-based run."""
    return record.config.train.steps or int(record.curves["steps"][-1])


def cap(record) -> float:
    """The step cap of a run: Σ_t of its prior's learning rate over all its updates."""
    return cumulative_lr(record.config.train, _total(record))[-1]


def _moves(record) -> list[tuple[int, float]]:
    """(step, largest |M_t − M_0| over layers, heads and entries) at each evaluation after step 0."""
    step = record.drift.get("mask_step")
    if not step:
        raise ValueError(f"run {record.run_id} ({record.config.experiment}/{record.config.method}) holds no "
                         "`mask_step` drift: it has no mask, or its record predates the measure (retrain it).")
    layers = list(step.values())
    return [(t, max(max(layer[i]) for layer in layers)) for i, t in enumerate(record.drift["steps"]) if t > 0]


def largest_move(records: Sequence) -> float:
    """The largest |M_t − M_0| of one entry, over the runs, their evaluations, layers and heads."""
    return max(m for r in records for _, m in _moves(r))


def step_ratio(record) -> float:
    """max over the evaluations t of the largest |M_t − M_0| over Σ_{s≤t} lr_s: at most about 1 under
    Adam, and at most `adam_step_bound` (3.16 at the default betas) in any case."""
    cum = cumulative_lr(record.config.train, _total(record))
    return max(m / cum[t - 1] for t, m in _moves(record))


def learnable(records: Sequence) -> list:
    """The runs whose mask is trained (a learnable mask prior)."""
    return [r for r in records if r.config.model.prior.kind == "mask" and r.config.model.prior.trainable]


def cap_precondition(records: Sequence) -> float:
    """The `mask-can-move` precondition's value: the smallest cap over the learnable-mask runs (4 digits)."""
    return round(min(cap(r) for r in learnable(records)), 4)


def method_caps(records, methods: Sequence[str] = ("mask", "zero-mask")) -> dict[str, float]:
    """{method: `cap_precondition`} for each of `methods` with a learnable mask in `records` (nested to any depth)."""
    runs = flat_records(records)
    return {m: cap_precondition(rs) for m in methods
            if (rs := learnable([r for r in runs if r.config.method == m]))}


def cap_glue(chapter: str, caps: Mapping[str, float]) -> dict[str, str]:
    """{"ch<chapter>_cap": the learnable mask's cap, 2 decimals}, cited beside the `mask-can-move` precondition."""
    return {f"ch{chapter}_cap": num(caps["mask"], 2)}


def movable_frame(runs: Mapping[tuple[str, str, str], Sequence]) -> pd.DataFrame:
    """One row per run of the `mask-moves` grid: task, placement, learning rate of the mask, seed,
    cube and seen accuracy, the cap and the largest move (0 for a mask that is not trained)."""
    rows = []
    for (task, placement, rate), records in runs.items():
        for r in records:
            trained = bool(learnable([r]))
            rows.append({"task": task, "placement": placement, "rate": rate, "seed": r.seed,
                         "cube.acc": r.metrics["cube"]["acc"], "seen.acc": r.metrics["seen"]["acc"],
                         "cap": cap(r) if trained else 0.0, "move": largest_move([r]) if trained else 0.0,
                         "ratio": step_ratio(r) if trained else float("nan")})
    return pd.DataFrame(rows)


def movable_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per task and placement, in the grid's order: the mask's learning rate, cap, largest move of one entry (mean
    and max over seeds) and mean cube accuracy (%)."""
    rows = []
    for (task, placement, rate), g in frame.groupby(["task", "placement", "rate"], sort=False):
        trained = g["cap"].iloc[0] > 0
        rows.append({"Task": task_title(task), "Mask": placement,
                     "Mask learning rate": f"{MOVABLE_LR:g}" if rate == "own lr" else "the model's",
                     "Cap Σ lr": num(g["cap"].iloc[0], 3) if trained else "—",
                     "Largest |ΔM|, mean (max)": f"{num(g['move'].mean(), 3)} ({num(g['move'].max(), 3)})" if trained else "—",
                     "Cube accuracy (%)": f"{100 * g['cube.acc'].mean():.1f}"})
    return pd.DataFrame(rows).set_index(["Task", "Mask"])


def _mean(frame: pd.DataFrame, task: str, placement: str) -> float:
    return float(frame[(frame["task"] == task) & (frame["placement"] == placement)]["cube.acc"].mean())


def _by_seed(frame: pd.DataFrame, task: str, placement: str) -> dict[int, float]:
    g = frame[(frame["task"] == task) & (frame["placement"] == placement)]
    return dict(zip(g["seed"], g["cube.acc"]))


def measures(frame: pd.DataFrame, ratios: Sequence[float], recover: Mapping[str, Paired],
             drifts: Mapping[str, float], model_lr_drifts: Mapping[str, float], model_run,
             fitted: Mapping[str, tuple[int, int]] | None = None) -> dict:
    """Everything the claims read. `ratios`: `step_ratio` of every learnable-mask run the chapter reads;
    `recover`: {task: `Paired`, the misspecified ±10 mask at its own learning rate minus at the model's, by seed}
    (M-09);
    `drifts` / `model_lr_drifts`: {task: R-01's separating drift} at the mask's own / the model's learning rate;
    `model_run`: a run at the model's rate (its cap, rate and updates); `fitted`: {task: (runs of the
    misspecified ±10 mask at the model's rate that fit the seen set, runs)}."""
    matters = [t for t in TASKS if _mean(frame, t, "correct") - _mean(frame, t, "no mask") >= GAIN]
    learn = {t: paired(_by_seed(frame, t, "correct"), _by_seed(frame, t, "fixed")) for t in TASKS}
    own = frame[frame["rate"] == "own lr"]
    mis = own[own["placement"] == "misspecified"]
    fits_own = {t: (int((g["seen.acc"] >= FIT).sum()), len(g)) for t, g in mis.groupby("task")}
    return {"fits": {t: {"model": (fitted or {}).get(t, (0, 0)), "own": fits_own.get(t, (0, 0))} for t in TASKS},
            "ratio": max(ratios), "n_runs": len(ratios), "over_one": sum(r > 1 for r in ratios), "bound": adam_step_bound(TrainConfig()),
            "own_cap": float(own["cap"].min()), "model_cap": cap(model_run),
            "model_lr": model_run.config.train.lr, "updates": _total(model_run), "matters": matters,
            "learn": learn, "recover": recover, "drifts": dict(drifts), "model_lr_drifts": dict(model_lr_drifts),
            "moves": {(t, p): float(frame[(frame["task"] == t) & (frame["placement"] == p)]["move"].max())
                      for t in TASKS for p in MOVABLE},
            "accuracy": {(t, p): _mean(frame, t, p) for t in TASKS for p in (*MOVABLE, "fixed", "no mask")}}


def _gains(pairs) -> str:
    return "; ".join(f"{task_title(t)} {signed(100 * p.mean_diff)} points, 95% interval [{100 * p.lo:.1f}, {100 * p.hi:.1f}]"
                     for t, p in pairs)


def _recover(ms: dict) -> str:
    return "; ".join(f"{task_title(t)} {signed(100 * p.mean_diff)} points, 95% interval [{100 * p.lo:.1f}, "
                     f"{100 * p.hi:.1f}] over {p.n} seeds (to {pct(ms['accuracy'][(t, 'misspecified')])}; "
                     f"correct mask {pct(ms['accuracy'][(t, 'correct')])})" for t, p in ms["recover"].items())


def _drifts(ms: dict) -> str:
    model = ", ".join(f"{task_title(t)} {v:.4f}" for t, v in ms["model_lr_drifts"].items())
    return (", ".join(f"{task_title(t)} {v:.4f}" for t, v in ms["drifts"].items())
            + f" (at the model's learning rate, cap {ms['model_cap']:.2f}: {model})")


_CAN = {"mask-can-move": lambda ms: round(ms["own_cap"], 4)}
_MATTERS = _CAN | {"mask-matters": lambda ms: len(ms["matters"])}

# Over `measures`. R-01: largest separating drift at its own rate over 2Parity and the tasks where the correct mask
# matters. M-07: largest ratio to the cap (2 digits). M-08: largest mean paired gain of the correct mask at its own
# learning rate over the fixed one. M-09: the largest upper end of the 95 % interval of the misspecified mask's gain
# at its own rate over the model's, paired by seed, on the tasks where the correct mask matters. M-08, M-09 and R-01
# (4 digits) are decided where the mask can move (its cap ≥ 20); M-09 and R-01 also need a task where it matters.
CLAIMS = (
    Measure("R-01", lambda ms: round(max(ms["drifts"][t] for t in dict.fromkeys(["2parity", *ms["matters"]])), 4),
            _MATTERS, _drifts),
    Measure("M-07", lambda ms: round(ms["ratio"], 2),
            detail=lambda ms: f"over {ms['n_runs']} runs with a learnable mask; Adam's hard bound {ms['bound']:.2f}"),
    Measure("M-08", lambda ms: round(max(p.mean_diff for p in ms["learn"].values()), 4), _CAN,
            lambda ms: _gains(ms["learn"].items())),
    Measure("M-09", lambda ms: round(max((ms["recover"][t].hi for t in ms["matters"]), default=0.0), 4), _MATTERS,
            _recover),
)


def decided_claims(ms: dict) -> dict[str, dict]:
    """S2-10 and S2-23 where the mask can move (their ledger's `decided`): inconclusive at the model's learning
    rate, whose cap keeps a ±10 entry from crossing, they are measured on the `mask-moves` runs by their own
    rules and preconditions. S2-10: largest mean gain of the all-zero mask at its own rate over no mask, over
    2Parity and 3-bit Majority. S2-23: largest mean paired gain of the correct mask at its own rate over the
    fixed one, on the tasks where that mask is ≥ 2 points above no mask (`matters`, chosen by rule).
    {"measures", "details", "preconditions"} as `Decision.decided_claims` takes them; 4 digits."""
    zero = {t: ms["accuracy"][(t, "all-zero")] - ms["accuracy"][(t, "no mask")] for t in TASKS}
    can = {"mask-can-move": round(ms["own_cap"], 4)}
    gains = [ms["learn"][t].mean_diff for t in ms["matters"]]
    return {
        "measures": {"S2-10": round(max(zero.values()), 4), "S2-23": round(max(gains, default=0.0), 4)},
        "details": {"S2-10": "; ".join(f"{task_title(t)} {signed(100 * v)} points (to {pct(ms['accuracy'][(t, 'all-zero')])})"
                                       for t, v in zero.items()),
                    "S2-23": _gains((t, p) for t, p in ms["learn"].items() if t in ms["matters"])
                    or "no task where the mask gains"},
        "preconditions": {"S2-10": can, "S2-23": can | {"mask-gains": len(ms["matters"])}},
    }


def own_rate_glue(moves: dict | None, decided: Sequence, claim: str, verdict_name: str,
                  names: Sequence[str]) -> dict[str, str]:
    """The prose's numbers of a chapter's own-rate cell (`moves["numbers"]`, as its `movable` gives them) and
    `claim`'s decided verdict in words under `verdict_name`; "—" for each of `names` and `verdict_name` where the
    chapter has no such cell (a profile without it)."""
    if moves is None:
        return {k: "—" for k in (*names, verdict_name)}
    r = next(r for r in decided if r.id == claim)
    return dict(moves["numbers"]) | {verdict_name: in_words(r)}


def step_cap_numbers(ms: dict) -> dict[str, str]:
    """The section's numbers by glue name (ch6_cap_*; the verdicts are glued with the chapter's, as ch6_M07 …)."""
    out = {"ch6_cap_ratio": num(ms["ratio"], 2), "ch6_cap_runs": str(ms["n_runs"]), "ch6_cap_bound": num(ms["bound"], 2),
           "ch6_cap_over": str(ms["over_one"]), "ch6_cap_lr": f"{ms['model_lr']:g}",
           "ch6_cap_updates": str(ms["updates"]),
           "ch6_cap_model": num(ms["model_cap"], 2), "ch6_cap_own": num(ms["own_cap"], 2),
           "ch6_cap_rate": f"{MOVABLE_LR:g}"}
    for (t, p), v in ms["moves"].items():
        out[f"ch6_cap_move_{t}_{p}"] = num(v, 2)
    for (t, p), v in ms["accuracy"].items():
        out[f"ch6_cap_acc_{t}_{p.replace(' ', '_')}"] = pct(v)
    for t in TASKS:
        out[f"ch6_cap_sep_{t}"] = pct(ms["drifts"][t], 1)
        out[f"ch6_cap_learn_{t}"] = signed(100 * ms["learn"][t].mean_diff)
        rec = ms["recover"][t]
        out[f"ch6_cap_recover_{t}"] = signed(100 * rec.mean_diff)
        out[f"ch6_cap_recover_ci_{t}"] = f"[{signed(100 * rec.lo)}, {signed(100 * rec.hi)}]"
    seeds = max((ms["recover"][t].n for t in TASKS), default=0)
    out["ch6_cap_recover_seeds"] = str(seeds) if seeds else "—"
    out["ch6_cap_r01_max"] = pct(ms["model_cap"] / CROSSING, 2)
    for t in TASKS:
        for rate in ("model", "own"):
            k, n = ms["fits"][t][rate]
            out[f"ch6_cap_fit_{rate}_{t}"] = f"{k} of {n}"
    return out


def placeholder_measures() -> dict:
    """`measures`' shape with NaN values: the glue names of a profile that has no `mask-moves` runs."""
    nan = float("nan")
    return {"fits": {t: {"model": (0, 0), "own": (0, 0)} for t in TASKS}, "ratio": nan, "n_runs": 0, "over_one": 0, "model_lr": nan, "updates": 0, "bound": nan, "own_cap": nan, "model_cap": nan, "matters": [],
            "learn": {t: Paired(nan, nan, nan, nan, 0) for t in TASKS},
            "recover": {t: Paired(nan, nan, nan, nan, 0) for t in TASKS},
            "drifts": {t: nan for t in TASKS}, "model_lr_drifts": {t: nan for t in TASKS},
            "moves": {(t, p): nan for t in TASKS for p in MOVABLE},
            "accuracy": {(t, p): nan for t in TASKS for p in (*MOVABLE, "fixed", "no mask")}}


def paper_caps() -> dict[str, dict[str, float]]:
    """{task: {"lr", "updates", "cap"}} of the GOTU `paper` presets' learnable mask, from the configs: what Adam
    lets an entry move at the sources' own learning rates and epochs."""
    out = {}
    for fn in FUNCTIONS:
        cfg = gotu_configs(fn, "paper")["mask"]
        updates = total_steps(make_task(cfg.task), cfg.train)
        out[fn] = {"lr": cfg.train.lr, "updates": updates, "cap": prior_lr_sum(cfg.train, updates)}
    return out


def paper_cap_numbers(caps: Mapping[str, Mapping[str, float]]) -> dict[str, str]:
    """The paper caps' range as the prose cites it (glue names ch6_cap_paper_*)."""
    lrs = [c["lr"] for c in caps.values()]
    ups = [c["updates"] for c in caps.values()]
    cs = [c["cap"] for c in caps.values()]
    sci = lambda x: f"{x:.0e}".replace("e-0", "e-")
    return {"ch6_cap_paper_lr": f"{sci(min(lrs))} to {sci(max(lrs))}",
            "ch6_cap_paper_updates": f"{min(ups):,} to {max(ups):,}",
            "ch6_cap_paper": f"{num(min(cs), 2)} to {num(max(cs), 2)}"}
