"""Chapter 3's Figure 5 (S2-12): how much of its starting pattern each method's attention keeps after training, the mask
against the Structured (SVD) initialisation, at `ci` and where Structured (SVD) fits (a decisive search)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from companion.book.chapter import Decision, Measure
from companion.book.chapters import decisive
from companion.book.chapters.frames import map_panels, open_mass_frame
from companion.book.chapters.gotu_table1 import FIT, frame_of
from companion.book.claims import in_words
from companion.book.labels import label, task_title
from companion.book.prose import num
from companion.experiments.decisive import SEARCHES

__all__ = ["SHOWN", "figure5_panels", "map_summary", "persistence", "PERSISTENCE", "retention", "FIGURE5",
           "figure5_numbers", "retention_decided"]


SHOWN = ("default", "structured-svd", "mask")  # the methods of Figure 5


def figure5_panels(records: Sequence, seed: int, methods: Sequence[str] = SHOWN) -> list[tuple[str, list]]:
    """Figure 5's panels (`frames.map_panels`), a row per method: first and last layer's map, at start and end."""
    return map_panels(records, seed, methods, (("init", 0), ("final", 0), ("init", -1), ("final", -1)))


def map_summary(records: dict[str, Sequence], masks: dict[str, torch.Tensor], methods: Sequence[str] = SHOWN,
                row: int | None = 0) -> pd.DataFrame:
    """Share of attention on the mask's open keys (of query `row`, 0 = CLS; every query averaged when
    None), one row per task × method × seed × layer: columns init and final."""
    return open_mass_frame(records, masks, methods, key="task", row=row)


def persistence(maps: pd.DataFrame) -> pd.DataFrame:
    """Task rows; (at the start | at the end) × method columns: the share of the CLS token's attention
    on the open keys, averaged over seeds and layers, two decimals."""
    table = maps.groupby(["task", "method"])[["init", "final"]].mean().unstack("method")
    table = table.rename(index=task_title).rename(columns=label, level="method").round(2)
    table = table.rename(columns=PERSISTENCE, level=0)
    table.index.name, table.columns.names = "Task", [None, None]
    return table


PERSISTENCE = {"init": "Open share at the start", "final": "Open share at the end"}


def _open_share(maps: pd.DataFrame, method: str, when: str) -> float:
    return float(maps[maps.method == method][when].mean())


def _keep(maps: pd.DataFrame) -> float:
    """The open share at the end, mask minus Structured (SVD), over tasks, seeds and layers."""
    return _open_share(maps, "mask", "final") - _open_share(maps, "structured-svd", "final")


def _chance(masks: dict[str, torch.Tensor], row: int = 0) -> dict[str, float]:
    """The open share of uniform attention on query `row`: its open keys over all keys, per task."""
    return {fn: float(m[row].float().mean()) for fn, m in masks.items()}


def retention(maps: pd.DataFrame, frame: pd.DataFrame, masks: dict[str, torch.Tensor], tasks: Sequence[str],
              fit: float = FIT) -> dict:
    """How much of its initial pattern each method keeps (S2-12): mean(final − chance) / mean(init − chance)
    over runs and layers, chance being uniform attention's open share; 1 keeps the pattern, 0 washes back to
    uniform. On `tasks` (where the mask gains) less those whose CLS row is all open (uniform attention already
    scores 1.0 there), runs that fit the seen set only. Returns {"mask", "structured-svd": retention (NaN
    without runs), "runs": {method: runs used}, "tasks": the tasks used}."""
    chance = _chance(masks)
    used = [fn for fn in tasks if chance[fn] < 1.0]
    seen = frame.set_index(["task", "method", "seed"])["seen.acc"]
    out: dict = {"runs": {}, "tasks": used}
    for m in ("mask", "structured-svd"):
        rows = maps[(maps.method == m) & maps.task.isin(used)]
        rows = rows[np.array([seen.get((t, m, s), 0.0) >= fit for t, s in zip(rows.task, rows.seed)], dtype=bool)]
        base = rows.task.map(chance)
        start, end = float((rows["init"] - base).mean()), float((rows["final"] - base).mean())
        out[m] = end / start if len(rows) and start > 0 else float("nan")
        out["runs"][m] = len(rows[["task", "seed"]].drop_duplicates())
    return out


# Figure 5, over `retention`: S2-12, the mask's retention minus Structured (SVD)'s, 4 decimals; the tasks left (mask
# gains, CLS row not all open) and the fitted Structured (SVD) runs on them.
FIGURE5 = (Measure("S2-12", lambda ret: round(ret["mask"] - ret["structured-svd"], 4),
                   {"mask-gains": lambda ret: len(ret["tasks"]),
                    "structured-fits": lambda ret: int(ret["runs"]["structured-svd"])}),)


def figure5_numbers(maps: pd.DataFrame, seed: int, ret: dict | None = None, results: Sequence = ()) -> dict:
    """Figure 5 prose: the seed shown, Structured (SVD)'s open share at start and end, the mask's at the end and
    their difference; with `ret` (`retention`) each retention and its tasks and runs; S2-12's verdict."""
    out = {}
    if ret is not None:
        out = {"ch3_ret_mask": num(ret["mask"]), "ch3_ret_svd": num(ret["structured-svd"]),
               "ch3_ret_tasks": ", ".join(map(task_title, ret["tasks"])) or "none",
               "ch3_ret_svd_runs": str(ret["runs"]["structured-svd"])}
    out |= {f"ch3_verdict_{r.id}": r.verdict for r in results if r.id == "S2-12"}
    return out | {"ch3_fig5_seed": seed, "ch3_keep": num(_keep(maps)),
            "ch3_svd_start": num(_open_share(maps, "structured-svd", "init")),
            "ch3_svd_end": num(_open_share(maps, "structured-svd", "final")),
            "ch3_mask_end": num(_open_share(maps, "mask", "final"))}


def retention_decided(d: Decision, profile: str, masks: dict[str, torch.Tensor], tasks: Sequence[str]) -> dict[str, str]:
    """S2-12 decided at the first budget of its search (`companion.book.chapters.decisive`) where three of
    Structured (SVD)'s runs fit the seen set of the task the search trains (3-bit Majority), at `ci`, when that task
    is the one `tasks` (the `ci` gain tasks) leave; the glue "ch3_S212_search", the search's outcome as a clause:
    where it held, the retentions there and the verdict, or what was tried ("—" at other profiles)."""
    if profile != "ci":
        return {"ch3_S212_search": "—"}
    fn = SEARCHES["S2-12"].experiment.removeprefix("gotu-")
    if [t for t in tasks if _chance(masks)[t] < 1.0] != [fn]:
        return {"ch3_S212_search": f"is not read: it trains {task_title(fn)}, not the tasks the rule leaves here"}

    def kept(records) -> dict:  # `retention` on the search's task
        by_task = {fn: list(records)}
        return retention(map_summary(by_task, masks), frame_of(by_task), masks, [fn])

    def measure(records) -> float:
        ret = kept(records)
        return ret["mask"] - ret["structured-svd"]

    found = decisive.decided("S2-12", measure)
    if found is None:
        return {"ch3_S212_search": decisive.search_words("S2-12") + ", so S2-12 stays inconclusive"}
    found["preconditions"]["S2-12"]["mask-gains"] = 1  # the task, chosen by the rule at `ci`
    _, _, records = decisive.rungs("S2-12")
    rets = kept(records)
    fit = [r for r in records if r.metrics["seen"]["acc"] >= FIT]
    loo = [measure([r for r in records if r is not out]) for out in fit]  # each fitted run left out in turn
    detail = f"{found['details']['S2-12']}; leaving out any one fitted run, {num(min(loo))} to {num(max(loo))}"
    r = d.decided_claims(found["measures"], preconditions=found["preconditions"], details={"S2-12": detail})[0]
    fits = found["preconditions"]["S2-12"]["structured-fits"]
    return {"ch3_S212_search": f"finds it at {decisive.search_words('S2-12')}, where {fits} of Structured (SVD)'s "
                               f"runs fit; there the mask keeps {num(rets['mask'])} of its pattern and Structured (SVD) "
                               f"{num(rets['structured-svd'])}, a difference of {num(r.measure)}, and S2-12, decided "
                               f"at that budget, is {in_words(r)}. With only {fits} fitting runs the difference is "
                               f"fragile: leaving out any one fitted run moves it from {num(min(loo))} to "
                               f"{num(max(loo))}"}
