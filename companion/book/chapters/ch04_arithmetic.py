"""Chapter 4's analysis of the arithmetic runs: Table 8, Figure 2, learning curves, digit accuracies.

Reads stored records of the `arithmetic` grid (`companion.experiments.arithmetic`, via `companion.reading`); nothing
trains. The grid's cells, keyed (op, fraction, budget):
- Table 8: addition, every method of `METHODS` at 0.4 % (budget "base"); multiplication, `MUL_METHODS` at 3 %.
- Figure 2: `FIGURE2_METHODS` on addition at each fraction of `FRACTIONS` (0.4 % shared with Table 8).
- The budget check: `FIGURE2_METHODS` on addition at 0.4 % with `LONG_BUDGET` times the updates (budget "long").

`load` and `decide` follow `companion.book.chapter`. Table 8 and the paired gains are `arith_table8`, Figure 2, the
first reach and the digits `arith_curves`, S2-24 where the mask moves and S2-16 where a method learns `arith_decided`; this module declares the claims (`CLAIMS`), gives the prose its numbers and
re-exports what the notebook reads. Accuracies in tables and prose are in %; claim measures are fractions, rounded to
4 decimals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.chapters.arith_decided import movable, movable_numbers, multiplication_decided
from companion.book.chapters.arith_curves import (FIRST_STEP, MASK_GAP, REACH, budget_gap_table, digit_frame,
                                                  digit_table, figure2_data, figure2_seeds, figure2_table,
                                                  fraction_ticks, reached, steps_to, updates_of)
from companion.book.chapters.arith_table8 import (MINUS_DEFAULT, STRUCTURED, TABLE8, best_other, fraction_label, held_at_both, held_low, interval_points,
                                                  interval_text, long_default, mean_margins, paired_against, paired_gain,
                                                  paired_table8, partly_line, percent, points_text, seed_gains,
                                                  summary, table8)
from companion.book.chapters.budget import budget as run_budget
from companion.book.chapters.frames import records_frame
from companion.book.chapters.stats import Paired
from companion.book.chapters.step_cap import cap_glue, method_caps
from companion.book.labels import label, task_title
from companion.book.parameters import check_parameters
from companion.book.prose import num, pct
from companion.experiments import get_experiment
from companion.experiments.arithmetic import (FRACTIONS, LONG_BUDGET, METHODS, MUL_METHODS, TABLE8_FRACTION)
from companion.reading import read_grid
from companion.tasks.arithmetic import ArithmeticTask, decode

__all__ = ["REACH", "fraction_label", "load", "runs_frame", "examples", "mask_panel", "budget_table",
           "table8", "paired_against", "paired_table8", "summary", "paired_gain", "analysis", "CLAIMS",
           "table8_caps", "verdict_numbers", "figure2_data", "figure2_seeds",
           "fraction_ticks", "figure2_table", "held_at_both", "steps_to", "budget_gap_table", "digit_frame", "digit_table", "prose_numbers",
           "seed_gains", "held_low", "interval_numbers",
           "SEEDS", "decide", "FIRST_STEP", "MASK_GAP", "MINUS_DEFAULT", "TABLE8"]

SEEDS = (0, 1, 2, 3, 4)  # the chapter's seeds: what `load` reads when the notebook's `seeds` is None


def runs_frame(records: Mapping[tuple[str, float, str], Sequence]) -> pd.DataFrame:
    """The long frame of the grid's records: columns op, fraction, budget, steps, then `records_frame`'s."""
    parts = []
    for (op, fraction, budget), recs in records.items():
        frame = records_frame(recs)
        frame.insert(0, "op", op)
        frame.insert(1, "fraction", fraction)
        frame.insert(2, "budget", budget)
        frame.insert(3, "steps", [r.config.train.steps for r in recs])
        parts.append(frame)
    return pd.concat(parts, ignore_index=True)


def load(profile: str, seeds: Sequence[int] | None = None, *, store=None) -> Runs:
    """All runs of the chapter (run when missing): block "arithmetic", the grid's records {(op, fraction,
    budget): [Record]}; `seeds` None means `SEEDS`; `store` as in `companion.reading.read_grid`."""
    seeds = list(SEEDS if seeds is None else seeds)
    check_parameters(profile, seeds)
    records = read_grid("arithmetic", profile, seeds, store=store)
    return Runs(profile, seeds, {"arithmetic": records})


def examples(per_op: int = 2, n_test: int = 1000) -> pd.DataFrame:
    """The first test pairs of each operation at Table 8's fraction, with their tokens as the model reads them."""
    rows = []
    for op in ("add", "mul"):
        task = ArithmeticTask(op=op, fraction=TABLE8_FRACTION[op], n_test=n_test)
        a, b = task.operands["test"]
        for k in range(per_op):
            rows.append({"Operation": task_title(op), "a": int(a[k]), "b": int(b[k]),
                         EXAMPLE_TOKENS: decode(task.sequences["test"][k:k + 1])[0],
                         "Training pairs": task.n_train, "All pairs": task.universe})
    return pd.DataFrame(rows).set_index("Operation")


EXAMPLE_TOKENS = "Tokens as the model reads them"


def mask_panel(op: str) -> tuple[np.ndarray, list[str]]:
    """The digit-aligned mask of an operation (query × key, 1 = open) and the name of each position
    (a0…, the operator, b0…, "=", c0…)."""
    task = ArithmeticTask(op=op, fraction=TABLE8_FRACTION[op], n_test=10)
    a_pos, b_pos, c_pos = task.digit_positions()
    names = {p: f"a{s}" for s, p in enumerate(a_pos)} | {p: f"b{s}" for s, p in enumerate(b_pos)} \
        | {p: f"c{s}" for s, p in enumerate(c_pos)}
    names |= {task.n_digits: "+" if op == "add" else "×", 2 * task.n_digits + 1: "="}
    return task.mask_pattern("default", cls=False).numpy(), [names[p] for p in range(task.seq_len)]


def budget_table(profile: str, seeds: Sequence[int] | None = None) -> pd.DataFrame:
    """Model and training budget of each operation (columns Addition, Multiplication), rows as
    `chapters.budget` names them, with the test pairs and the number of seeds (None: `SEEDS`)."""
    rows = ("Model width", "Layers", "Heads", "Feed-forward width", "Optimiser", "Learning rate", "Weight decay",
            "Batch size", "Learning-rate schedule", "Updates")
    columns = {}
    for op in ("add", "mul"):
        cfg = get_experiment(f"arith-{op}").configs(profile)["default"]
        columns[task_title(op).capitalize()] = {**run_budget(cfg, rows), "Test pairs": dict(cfg.task.params)["n_test"],
                                                "Seeds": len(SEEDS if seeds is None else seeds)}
    return pd.DataFrame(columns)


def analysis(frame: pd.DataFrame, profile: str, gains: Mapping | None = None,
             caps: Mapping[str, float] | None = None) -> dict:
    """What the chapter's claims read: the runs' `frame`, the `profile`, the paired seed `gains` (`seed_gains`; of
    `frame` when None) and the mask's step `caps` (`table8_caps`; {} when None)."""
    return {"frame": frame, "profile": profile, "gains": seed_gains(frame, profile) if gains is None else gains,
            "caps": dict(caps or {})}


_ADD, _MUL = TABLE8_FRACTION["add"], TABLE8_FRACTION["mul"]
_LONG = f"{LONG_BUDGET}× the updates"


def _s2_13(a: dict) -> float:
    default = summary(a["frame"], "add", _ADD, "default").mean / 100
    return round(held_at_both(default, long_default(a["frame"]) / 100, partly_line("S2-13"), larger=False), 4)


def _s2_15(a: dict) -> float:
    f = a["frame"]
    return round(held_at_both(best_other(f)[1] / 100, best_other(f, "long")[1] / 100, partly_line("S2-15"), larger=False), 4)


def _structured(a: dict) -> list[str]:
    return [m for m in STRUCTURED if m in MUL_METHODS[a["profile"]]]


def _best_mul(a: dict) -> float:
    return round(max(summary(a["frame"], "mul", _MUL, m).mean for m in MUL_METHODS[a["profile"]]) / 100, 4)


def _margin_phrase(a: dict) -> str:
    gains, fractions = a["gains"], FRACTIONS[a["profile"]]
    return (f"paired margins over {next(iter(gains.values())).n} seeds at the stated budget: "
            + ", ".join(f"{fraction_label(f)} {interval_text(gains[f, 'base'])}" for f in fractions) + f"; at {_LONG}: "
            + ", ".join(f"{fraction_label(f)} {interval_text(gains[f, 'long'])}" for f in fractions))


def _best_phrase(a: dict) -> str:
    best, best_long = best_other(a["frame"]), best_other(a["frame"], "long")
    return f"{label(best[0])} {percent(best[1])} at the stated budget, {label(best_long[0])} {percent(best_long[1])} at {_LONG}"


def _mask_gain(a: dict, task: str, fraction: float, baseline: str = "default") -> Paired:
    return paired_gain(a["frame"], task, fraction, "mask", baseline=baseline)


# Table 8, Figure 2 and the budget check, over `analysis`: S2-13 (default on addition at 0.4 %), S2-14 / S2-16 (paired
# mask gain on addition / multiplication), S2-15 (best other initialisation on addition), S2-17 (best structured
# initialisation on multiplication, where the profile runs one), S2-18 (smallest mean mask − default margin over
# Figure 2's fractions), S2-24 (paired learnable − fixed mask gain on addition at 0.4 %); fractions, 4 decimals.
# S2-13, S2-14, S2-15 and S2-18 are decided at both budgets (`held_at_both`, with the claim's partly level from the
# ledger); S2-14 and S2-18 on the lower ends of the paired intervals of the gains.
CLAIMS = (
    Measure("S2-13", _s2_13, detail=lambda a: f"{percent(summary(a['frame'], 'add', _ADD, 'default').mean)} at the "
                                              f"stated budget, {percent(long_default(a['frame']))} at {_LONG}"),
    Measure("S2-14", lambda a: round(held_low(a["gains"], [_ADD], partly_line("S2-14")), 4),
            detail=lambda a: f"{points_text(a['gains'][_ADD, 'base'])} at the stated budget, "
                             f"{points_text(a['gains'][_ADD, 'long'])} at {_LONG}, over {next(iter(a['gains'].values())).n} seeds"),
    Measure("S2-15", _s2_15, detail=_best_phrase),
    Measure("S2-16", lambda a: round(_mask_gain(a, "mul", _MUL).mean_diff / 100, 4), {"a-method-learns": _best_mul},
            lambda a: interval_points(_mask_gain(a, "mul", _MUL))),
    Measure("S2-17", lambda a: round(max(summary(a["frame"], "mul", _MUL, m).mean for m in _structured(a)) / 100, 4),
            when=lambda a: bool(_structured(a))),
    Measure("S2-18", lambda a: round(held_low(a["gains"], FRACTIONS[a["profile"]], partly_line("S2-18")), 4), detail=_margin_phrase),
    Measure("S2-24", lambda a: round(_mask_gain(a, "add", _ADD, "fixed-mask").mean_diff / 100, 4),
            {"mask-gains": lambda a: round(_mask_gain(a, "add", _ADD).mean_diff / 100, 4),
             "mask-can-move": lambda a: a["caps"].get("mask")},
            lambda a: "learnable − fixed, " + interval_points(_mask_gain(a, "add", _ADD, "fixed-mask"))),
)


def table8_caps(records: Mapping) -> dict[str, float]:
    """S2-24's `mask-can-move` value: Adam's step cap of the learnable mask on addition at Table 8's
    fraction, stated budget (`companion.book.chapters.step_cap.method_caps`)."""
    return method_caps(records[("add", TABLE8_FRACTION["add"], "base")], ("mask",))


def verdict_numbers(results: Sequence) -> dict[str, str]:
    """{"ch4_verdict_<claim id>": verdict} of recorded claims (`companion.book.claims.ClaimResult`)."""
    return {f"ch4_verdict_{r.id}": r.verdict for r in results}


def _budget_numbers(profile: str) -> dict[str, str]:
    out = {}
    for op in ("add", "mul"):
        train = get_experiment(f"arith-{op}").configs(profile)["default"].train
        n_train = ArithmeticTask(op=op, fraction=TABLE8_FRACTION[op], n_test=1).n_train
        out[f"ch4_steps_{op}"] = str(train.steps)
        out[f"ch4_epochs_{op}"] = f"{train.steps * train.batch_size / n_train:.1f}"
    add = run_budget(get_experiment("arith-add").configs(profile)["default"], ("Model width", "Layers", "Batch size"))
    out.update({f"ch4_budget_{k}": str(add[row]) for k, row in zip(("d_model", "layers", "batch"), add)})
    return out


def _table8_numbers(frame: pd.DataFrame, profile: str) -> dict[str, str]:
    add, mul = TABLE8_FRACTION["add"], TABLE8_FRACTION["mul"]
    out = {f"ch4_add_{m}": f"{summary(frame, 'add', add, m).mean:.1f} %" for m in METHODS}
    best, value = best_other(frame)
    out |= {"ch4_best_other": label(best), "ch4_best_other_value": f"{value:.1f} %",
            "ch4_gain_add": interval_text(paired_gain(frame, "add", add, "mask")),
            "ch4_gain_mul": interval_text(paired_gain(frame, "mul", mul, "mask"))}
    out |= {f"ch4_mul_{m}": f"{summary(frame, 'mul', mul, m).mean:.1f} %" for m in MUL_METHODS[profile]}
    base = frame[frame.budget == "base"]
    key = ["op", "fraction", "seed"]
    fixed_vs_mask = (base[base.method == "mask"].set_index(key)["test.seq_acc"]
                     - base[base.method == "fixed-mask"].set_index(key)["test.seq_acc"]).abs().max()
    out["ch4_fixed_vs_mask"] = f"{100 * fixed_vs_mask:.2f}"
    return out


def _figure2_numbers(frame: pd.DataFrame, profile: str) -> dict[str, str]:
    fractions = FRACTIONS[profile]
    margins = mean_margins(frame, profile)
    train = get_experiment("arith-add").configs(profile)["default"].train
    seen = train.steps * train.batch_size  # training examples drawn in the budget
    return {"ch4_fig2_min_margin": f"{min(margins.values()):.1f}",
            "ch4_fig2_min_at": fraction_label(min(margins, key=margins.get)),
            "ch4_fig2_fractions": ", ".join(fraction_label(f) for f in fractions),
            "ch4_passes_hi": f"{seen / round(max(fractions) * 1e6):.1f}",
            "ch4_passes_lo": f"{seen / round(min(fractions) * 1e6):.0f}",
            "ch4_frac_hi": fraction_label(max(fractions)), "ch4_frac_lo": fraction_label(min(fractions))}


def _reach_numbers(records: Sequence) -> dict[str, str]:
    reach = steps_to(records, REACH)
    return {"ch4_mask_reach": reach.loc[label("mask"), reached()],
            "ch4_mask_reach_step": f"{reach.loc[label('mask'), FIRST_STEP]:.0f}",
            "ch4_default_reach": reach.loc[label("default"), reached()]}


def _budget_gap_numbers(frame: pd.DataFrame, profile: str) -> dict[str, str]:
    add = TABLE8_FRACTION["add"]
    out = {"ch4_long_factor": str(LONG_BUDGET), "ch4_n_seeds": str(frame["seed"].nunique())}
    best, value = best_other(frame, "long")
    out |= {"ch4_best_other_long": label(best), "ch4_best_other_long_value": f"{value:.1f} %"}
    margins = mean_margins(frame, profile, "long")
    out["ch4_long_min_margin"] = f"{min(margins.values()):.1f}"
    out["ch4_long_min_at"] = fraction_label(min(margins, key=margins.get))
    for b in ("base", "long"):
        out[f"ch4_{b}_default"] = f"{summary(frame, 'add', add, 'default', budget=b).mean:.1f} %"
        out[f"ch4_{b}_gap"] = interval_text(paired_gain(frame, "add", add, "mask", budget=b))
        out[f"ch4_{b}_steps"] = str(updates_of(frame, b))
    return out


def interval_numbers(gains: Mapping[tuple[float, str], Paired]) -> dict[str, str]:
    """The prose's numbers of S2-14 and S2-18 at the seeds of `gains` (`seed_gains`): their count, the gain at
    0.4 % at both budgets with its interval, and per budget the lowest lower end over the fractions and where."""
    add = TABLE8_FRACTION["add"]
    out = {"ch4_gain_seeds": str(next(iter(gains.values())).n), "ch4_gain_base_interval": interval_text(gains[add, "base"]),
           "ch4_gain_long_interval": interval_text(gains[add, "long"])}
    for b in ("base", "long"):
        f = min((f for f, budget in gains if budget == b), key=lambda f: gains[f, b].lo)
        out[f"ch4_gain_low_{b}"] = f"{num(gains[f, b].lo, 1)} points (at {fraction_label(f)})"
    return out


def _digit_numbers(frame: pd.DataFrame) -> dict[str, str]:
    digits = digit_table(frame)
    return {"ch4_mul_units": f"{digits.loc[label('default'), 'c0']:.0f} %",
            "ch4_mul_middle": f"{digits.loc[:, ['c2', 'c3']].to_numpy().max():.0f} %"}


def prose_numbers(records: Mapping[tuple[str, float, str], Sequence], frame: pd.DataFrame,
                  profile: str) -> dict[str, str]:
    """Every number the chapter's text cites except the verdicts (`verdict_numbers`), by glue name."""
    curves_at = records[("add", TABLE8_FRACTION["add"], "base")]
    return (_budget_numbers(profile) | _table8_numbers(frame, profile) | _figure2_numbers(frame, profile)
            | _reach_numbers(curves_at) | _budget_gap_numbers(frame, profile) | _digit_numbers(frame))


def decide(runs: Runs) -> Findings:
    """Every claim (Table 8, Figure 2, the budget check) with its verdict and every number the prose cites
    (verdicts and Adam's step cap included); parts: `frame` (`runs_frame` of every run), `caps` (`table8_caps`)."""
    profile, records = runs.profile, runs["arithmetic"]
    frame = runs_frame(records)
    gains = seed_gains(frame, profile)  # S2-14 and S2-18, decided on the lower ends of their intervals
    caps = table8_caps(records)  # how far Adam lets the mask move (Chapter 6)
    d = Decision()
    results = d.measure(CLAIMS, analysis(frame, profile, gains, caps))
    moves = movable(frame, records)  # S2-24 where the mask can move
    decided = d.decided_claims(**{k: v for k, v in moves.items() if k != "numbers"}) if moves else []
    d.glue(prose_numbers(records, frame, profile) | verdict_numbers(results) | cap_glue("4", caps)
           | movable_numbers(moves, decided) | multiplication_decided(d, profile) | interval_numbers(gains))
    return d.done(frame=frame, caps=caps)


def older_paper(frame: pd.DataFrame | None) -> tuple[pd.DataFrame | None, dict]:
    """The older single-seed paper-profile runs (`companion.book.paper_status.older_runs`) as the page shows them,
    and the prose's numbers: the run's updates against the paper profile's budget, its test sequence accuracy."""
    if frame is None:
        return None, {}
    table = pd.DataFrame({"experiment": frame["experiment"], "method": frame["method"].map(label), "seed": frame["seed"],
                          "test sequence accuracy (%)": (100 * frame["test.seq_acc"]).round(2),
                          "train sequence accuracy (%)": (100 * frame["train.seq_acc"]).round(2),
                          "wall time (s)": frame["wall time (s)"], "changed from the profile": frame["changed"]})
    row = frame.iloc[0]
    steps = int(row["changed"].split("train.steps=")[1].split(",")[0]) if "train.steps=" in row["changed"] else None
    budget = get_experiment(row["experiment"]).configs("paper")[row["method"]].train.steps
    numbers = {"ch4_older_seq": pct(float(row["test.seq_acc"]), 2), "ch4_older_budget": f"{budget:,}",
               "ch4_older_steps": f"{steps:,}" if steps else f"{budget:,}"}
    return table, numbers
