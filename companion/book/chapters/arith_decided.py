"""Chapter 4's claims decided beyond the `ci` budget: S2-24 where the mask can move (a learning rate of its own, the
`ci` grid's own-rate cell) and S2-16 where some method learns multiplication (the decisive search's first holding rung)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from companion.book.chapter import Decision
from companion.book.chapters import decisive
from companion.book.chapters.arith_table8 import cell, interval_points, percent, signed_points
from companion.book.chapters.stats import paired, summarize
from companion.book.chapters.step_cap import method_caps, own_rate_glue
from companion.book.claims import in_words, requirement_threshold
from companion.book.prose import num, pct
from companion.experiments import get_experiment
from companion.experiments.arithmetic import MOVABLE_LR, TABLE8_FRACTION
from companion.experiments.decisive import SEARCHES

__all__ = ["movable", "MOVABLE_NUMBERS", "movable_numbers", "mul_gain", "multiplication_decided"]


def movable(frame: pd.DataFrame, records: Mapping) -> dict | None:
    """S2-24 where the mask can move (its ledger's `decided`): the learnable mask on addition at 0.4 % with its
    own learning rate (`MOVABLE_LR`, the grid's "movable" cell, `ci` only) against the fixed mask and the default
    of the same seeds at the stated budget. {"measures", "preconditions", "details"} as
    `Decision.decided_claims` takes them, and under "numbers" what the prose cites; None without the cell."""
    add = TABLE8_FRACTION["add"]
    key = ("add", add, "movable")
    if key not in records:
        return None
    own = cell(frame, "add", add, "movable")
    mask = dict(zip(own.seed, 100 * own["test.seq_acc"]))
    base = {m: dict(zip(g.seed, 100 * g["test.seq_acc"])) for m, g in cell(frame, "add", add).groupby("method")}
    learn, gain = paired(mask, base["fixed-mask"]), paired(mask, base["default"])
    cap = method_caps(records[key], ("mask",))["mask"]
    return {"measures": {"S2-24": round(learn.mean_diff / 100, 4)},
            "preconditions": {"S2-24": {"mask-gains": round(gain.mean_diff / 100, 4), "mask-can-move": cap}},
            "details": {"S2-24": "learnable mask at its own rate − fixed, " + interval_points(learn)},
            "numbers": {"ch4_movable_lr": f"{MOVABLE_LR:g}", "ch4_movable_cap": num(cap, 2),
                        "ch4_movable_mask": percent(summarize(list(mask.values())).mean),
                        "ch4_movable_learn": f"{signed_points(learn.mean_diff)} ({interval_points(learn)})"}}


MOVABLE_NUMBERS = ("ch4_movable_lr", "ch4_movable_cap", "ch4_movable_mask", "ch4_movable_learn")


def movable_numbers(moves: dict | None, decided: Sequence) -> dict[str, str]:
    """The prose's numbers of the movable cell and S2-24's decided verdict ("—" each without the cell)."""
    return own_rate_glue(moves, decided, "S2-24", "ch4_S224_decided", MOVABLE_NUMBERS)


def mul_gain(records) -> float:
    """S2-16's measure on a search rung's records: the mean paired gain of the mask over the default in test
    sequence accuracy (fraction), paired by seed."""
    by = {m: {r.seed: r.metrics["test"]["seq_acc"] for r in records if r.config.method == m} for m in ("mask", "default")}
    return paired(by["mask"], by["default"]).mean_diff


def multiplication_decided(d: Decision, profile: str) -> dict[str, str]:
    """S2-16 decided at the first budget of its search (`companion.book.chapters.decisive`) where some method
    learns multiplication (best mean test sequence accuracy ≥ 5 %), at `ci`; the glue "ch4_S216_search", the
    search's outcome as a clause: where it held and the verdict there, or what was tried; "ch4_S216_factors", the
    multiples of the updates it tries, in words ("—" at other profiles)."""
    if profile != "ci":
        return {"ch4_S216_search": "—", "ch4_S216_factors": "—"}
    *head, last = [str(f) for f in SEARCHES["S2-16"].factors]
    return {"ch4_S216_factors": f"{', '.join(head)} and {last}"} | _multiplication_search(d, profile)


def _multiplication_search(d: Decision, profile: str) -> dict[str, str]:
    found = decisive.decided("S2-16", mul_gain)
    if found is None:
        words = decisive.search_words("S2-16") + ", so S2-16 stays inconclusive"
        learns = requirement_threshold("S2-16", "a-method-learns")
        need = decisive.needed_factor("S2-16", learns)
        if need is not None:
            steps = need * get_experiment("arith-mul").configs(profile)["default"].train.steps
            words += (f"; by the trend of its rungs (a power law through the better method's accuracy on each) some "
                      f"method would reach {pct(learns, 0)} at about {need:.0f}× the updates ({round(steps, -2):,.0f})")
        return {"ch4_S216_search": words}
    r = d.decided_claims(found["measures"], preconditions=found["preconditions"], details=found["details"])[0]
    best = found["preconditions"]["S2-16"]["a-method-learns"]
    return {"ch4_S216_search": f"finds it at {decisive.search_words('S2-16')}, where the better method reaches "
                               f"{pct(best)}; there the mask gains {signed_points(100 * r.measure)} over the default, "
                               f"and S2-16, decided at that budget, is {in_words(r)}"}
