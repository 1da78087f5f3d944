"""Chapter 5 (the mask on images and on language): Tables 3, 5 and 6 read back from stored runs.

The `images-and-language` grid (`companion.experiments.images`) has one cell per image set (the digits at `ci`,
CIFAR-10 and CIFAR-100 at `paper`) with the six methods of `METHODS`, and the cell "text": the same character
decoder with and without a causal local mask (`LM_METHODS`). `load` and `decide` have the shape every chapter
module shares (`companion.book.chapter`). Tables 3 and 5 and what their claims read are `vision_tables`, the masks
and attention maps `vision_maps`, learned against sinusoidal positions `positions`; this module keeps Table 6, the
claims' declarations, the own-rate cell, the prose numbers, load and decide, and re-exports what the notebook reads.

Accuracies in tables and prose are in %; claim measures are fractions, rounded to 4 decimals. Nothing here trains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.claims import crossed_lines
from companion.book.chapters import positions as pos
from companion.book.chapters.budget import budget as run_budget
from companion.book.chapters.vision_maps import (accuracy_curves, digit_examples, image_pattern, map_frame,
                                                map_panels, mask_movement, open_share, patterns, text_mask,
                                                text_pattern)
from companion.book.chapters.vision_tables import (HEADERS, MARGIN, OTHERS, TABLE3, TABLE5, fixed_vs_learnable,
                                                  for_page, inconsistency, paired_frame, paired_vs_default, reading,
                                                  seed_values, table3, table3_measures, table5)
from companion.book.chapters.frames import records_frame
from companion.book.chapters.stats import Paired, paired, summarize, summary_table
from companion.book.chapters.step_cap import cap_glue, method_caps, own_rate_glue
from companion.book.labels import label, task_title
from companion.book.missing import gather
from companion.book.parameters import check_parameters
from companion.book.prose import num, pct, signed
from companion.experiments import get_experiment, get_grid
from companion.experiments.images import LM_METHODS, METHODS, MOVABLE_CELL, MOVABLE_LR, WINDOW
from companion.reading import read_many

__all__ = ["BLOCKS", "METHODS", "TABLE3", "TABLE5", "OTHERS", "MARGIN", "load", "image_frame", "text_frame", "budget", "image_pattern",
           "patterns", "digit_examples", "paired_frame", "text_pattern", "text_mask", "table3", "table5", "paired_vs_default", "table3_measures", "fixed_vs_learnable",
           "inconsistency", "reading", "map_frame", "open_share", "map_panels", "accuracy_curves", "table6",
           "perplexity_pairs", "perplexity_interval", "mask_movement", "CLAIMS", "image_caps", "prose_numbers",
           "SEEDS", "TEXT_SEEDS", "decide", "HEADERS", "for_page"]

SEEDS = tuple(range(6))  # the image runs' seeds: what `load` reads when `seeds` is None
TEXT_SEEDS = tuple(range(12))  # and of the language models
# the grid's `ci` cells beside the image sets and the text, each read into a block of its own: the mask at its
# own learning rate (S2-28, S2-20) and the defaults with sinusoidal positions (S1-10, `positions`)
BLOCKS = {MOVABLE_CELL: "movable", "digits-sincos": "sincos", "text-sinusoidal": "sinusoidal", "text-matched": "matched"}


def image_frame(records: Mapping[str, Sequence]) -> pd.DataFrame:
    """One row per image run: dataset, then `records_frame`'s columns, and accuracies in % ("test.acc (%)")."""
    parts = [records_frame(recs).assign(dataset=ds) for ds, recs in records.items() if ds != "text"]
    frame = pd.concat(parts, ignore_index=True)
    frame = frame[["dataset", *frame.columns.drop("dataset")]]
    for split in ("train", "test"):
        frame[f"{split}.acc (%)"] = 100 * frame[f"{split}.acc"]
    return frame


def text_frame(records: Sequence) -> pd.DataFrame:
    """One row per language-model run (`records_frame`)."""
    return records_frame(records)


def load(profile: str, seeds: Sequence[int] | None = None, *, text_seeds: Sequence[int] | None = None,
         store=None) -> Runs:
    """Block "images", {image set: [Record]} of the grid's image cells at `seeds`, and block "text", [Record] of its
    "text" cell at `text_seeds` (a paired interval of a small perplexity change needs more seeds). Read-only
    (`store` as in `companion.reading.read_many`); one `MissingRuns` counts what both lack (`gather`).
    `seeds` None means `SEEDS`; `text_seeds` None means `TEXT_SEEDS`, or `seeds` when they are given."""
    text_seeds = list(text_seeds if text_seeds is not None else TEXT_SEEDS if seeds is None else seeds)
    seeds = list(SEEDS if seeds is None else seeds)
    check_parameters(profile, seeds)
    check_parameters(profile, text_seeds)
    cells = get_grid("images-and-language").cells(profile)
    images = [k for k in cells if k not in ("text", *BLOCKS)]
    extra = [k for k in BLOCKS if k in cells and cells[k].experiment != "lm-local"]  # read at the image seeds
    text_extra = [k for k in BLOCKS if k in cells and cells[k].experiment == "lm-local"]  # at the text seeds

    def some(keys: Sequence[str], at: Sequence[int]):
        return lambda: read_many([cells[k] for k in keys], profile, at, store=store) if keys else []

    blocks, text, more, more_text = gather(some(images, seeds), some(["text"], text_seeds), some(extra, seeds),
                                           some(text_extra, text_seeds))
    named = dict(zip(extra, more)) | dict(zip(text_extra, more_text))
    return Runs(profile, seeds, {"images": dict(zip(images, blocks)), "text": text[0],
                                 **{block: named.get(cell, []) for cell, block in BLOCKS.items()}})


def budget(profile: str, datasets: Sequence[str]) -> pd.DataFrame:
    """Budget of every image set's model and the language model (rows as in `chapters.budget`, + patch/window, data)."""
    cols = {}
    for name in [f"vit-{ds}" for ds in datasets] + ["lm-local"]:
        cfg = get_experiment(name).configs(profile)["default"]
        m, task = cfg.model, cfg.task.kwargs
        cols[name] = {**run_budget(cfg, ("Architecture", "Model width", "Layers", "Heads")),
                      "Patch / window": m.patch_size if m.arch == "vit" else WINDOW[profile],
                      **run_budget(cfg, ("Optimiser", "Learning rate", "Batch size", "Updates")),
                      "Data": task.get("dataset") or task.get("corpus", "pydoc")}
    return pd.DataFrame(cols)


def table6(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 6: test perplexity and bits per character of the decoder without and with the local mask."""
    sub = frame[frame.method.isin(LM_METHODS)].copy()
    sub["method"] = sub["method"].map({"default": "Default", "mask": "Causal local mask (learnable)"})
    return summary_table(sub, "method", ["test.ppl", "test.bpc"], digits=3)


def perplexity_pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """Per seed: "default" and "mask" test perplexity and "relative change" (mask / default − 1)."""
    a = dict(zip(frame[frame.method == "mask"]["seed"], frame[frame.method == "mask"]["test.ppl"]))
    b = dict(zip(frame[frame.method == "default"]["seed"], frame[frame.method == "default"]["test.ppl"]))
    seeds = sorted(set(a) & set(b))
    return pd.DataFrame({"seed": seeds, "default": [b[s] for s in seeds], "mask": [a[s] for s in seeds],
                         "relative change": [a[s] / b[s] - 1 for s in seeds]})


def perplexity_interval(pairs: pd.DataFrame) -> Paired:
    """The mean relative change of perplexity (mask / default − 1) with its 95 % interval over seeds."""
    s = summarize(pairs["relative change"])
    return Paired(s.mean, s.lo, s.hi, float("nan"), s.n)


def _learns_images(a: dict) -> float:
    return round(min(v["means"]["default"] for v in a["t3m"].values()), 4)


def _learns_text(a: dict) -> float:
    return round(float(a["text"][a["text"].method == "default"]["test.bpc"].mean()), 4)


_IMAGES, _TEXT = {"default-learns-images": _learns_images}, {"default-learns-text": _learns_text}

# Tables 3, 5 and 6, over {"t3m": `table3_measures`, "fixed": `fixed_vs_learnable`, "ppl": `perplexity_interval`,
# "text": `text_frame`, "caps": `image_caps`}, 4 decimals. S2-27: the lowest lower end of the mask's lead (fraction,
# 95 % interval over seeds) over the best other initialisation over image sets (on the interval, not the mean: its
# interval crosses the claim's lines); S2-19: the same against the best of default, mimetic and impulse; S2-28: the
# largest |end| of the fixed-minus-learnable interval; S2-29, S2-30: the perplexity interval's upper end. Each needs
# the default to learn the images (its lowest mean test accuracy over image sets) or the text (its mean test bits
# per character); S2-28 also that Adam lets the mask move. R-08 (Tables 3 and 5 printing one run alike) is
# reported, not rebuilt: here both tables read the same records, so it could not fail; `inconsistency` still gives
# the gap and spread the prose cites.
CLAIMS = (
    Measure("S2-27", lambda a: round(min(v["lead"].lo for v in a["t3m"].values()), 4), _IMAGES),
    Measure("S2-19", lambda a: round(min(v["impulse_lead"].lo for v in a["t3m"].values()), 4), _IMAGES),
    Measure("S2-28", lambda a: round(max(max(abs(p.lo), abs(p.hi)) for p in a["fixed"].values()), 4),
            _IMAGES | {"mask-can-move": lambda a: a["caps"].get("mask")}),
    Measure("S2-29", lambda a: round(a["ppl"].hi, 4), _TEXT),
    Measure("S2-30", lambda a: round(a["ppl"].hi, 4), _TEXT),
)


def image_caps(records: Mapping) -> dict[str, float]:
    """S2-28's `mask-can-move` value: Adam's step cap of the learnable mask over the image runs (`method_caps`)."""
    return method_caps({k: v for k, v in records.items() if k != "text"}, ("mask",))


def prose_numbers(t3m: dict, fixed: dict[str, Paired], inc: dict, ppl: Paired, shares: pd.DataFrame,
                  masks: Mapping[str, np.ndarray], moved: float, results: Sequence,
                  dataset: str = "digits") -> dict[str, str]:
    """The "ch5_*" numbers the prose cites for `dataset`: accuracies, leads, readings, the inconsistency check, the
    open shares, the perplexity interval and the verdicts."""
    m = t3m[dataset]
    lead, fx = m["lead"], fixed[dataset]
    verdicts = {r.id: r.verdict for r in results}
    title = task_title(dataset)

    def share(method: str, when: str) -> str:
        return num(float(shares.loc[(title, label(method)), when]))

    def interval(p: Paired, scale: float = 100, digits: int = 1) -> str:
        return f"{signed(scale * p.mean_diff, digits)} [{signed(scale * p.lo, digits)}, {signed(scale * p.hi, digits)}]"

    out = {f"ch5_acc_{k.replace('-', '_')}": pct(v) for k, v in m["means"].items()}
    out |= {"ch5_best_impulse": label(m["best_impulse"]), "ch5_impulse_lead": interval(m["impulse_lead"]),
            "ch5_impulse_reading": reading(m["impulse_lead"]), "ch5_per_head": interval(m["per_head"]),
            "ch5_per_head_reading": reading(m["per_head"])}
    out |= {"ch5_best_other": label(m["best_other"]), "ch5_lead": interval(lead),
            "ch5_lead_crossed": crossed_lines("S2-27", lead.lo, lead.hi, lambda t: f"{signed(100 * t, 1)}-point"),
            "ch5_lead_reading": reading(lead), "ch5_fixed": interval(fx), "ch5_fixed_reading": reading(fx),
            "ch5_gap": num(inc["gap"], 2), "ch5_spread": num(inc["spread"], 2),
            "ch5_ppl_change": interval(ppl, digits=2), "ch5_ppl_reading": reading(ppl, higher_is_better=False),
            "ch5_margin": pct(MARGIN, 0),
            "ch5_share_default_end": share("default", "end"), "ch5_share_svd_start": share("structured-svd", "start"),
            "ch5_share_svd_end": share("structured-svd", "end"), "ch5_share_mask_end": share("mask", "end"),
            "ch5_share_uniform": num(float(masks[dataset].mean())), "ch5_mask_moved": pct(moved, 1),
            "ch5_zero": interval(m["zero"])}
    out |= {f"ch5_verdict_{cid.replace('-', '_')}": v for cid, v in verdicts.items()}
    return out


def movable(frame: pd.DataFrame, records: Sequence) -> dict | None:
    """S2-28 where the mask can move (its ledger's `decided`): on the digits, the fixed mask minus the learnable
    mask with its own learning rate (`MOVABLE_LR`, the grid's `MOVABLE_CELL`, `ci` only), paired by seed, its
    interval's largest |end|, as the claim's rule reads it. {"measures", "preconditions", "details", "numbers"}
    (as `Decision.decided_claims` takes the first three); None without the cell."""
    if not records:
        return None
    own = records_frame(records)
    mask = dict(zip(own.seed, own["test.acc"]))
    diff = paired(seed_values(frame, "digits", "fixed-mask"), mask)
    learns = round(float(frame[(frame.dataset == "digits") & (frame.method == "default")]["test.acc"].mean()), 4)
    cap = method_caps(list(records), ("mask",))["mask"]
    return {"diff": diff, "measures": {"S2-28": round(max(abs(diff.lo), abs(diff.hi)), 4)},
            "preconditions": {"S2-28": {"default-learns-images": learns, "mask-can-move": cap}},
            "details": {"S2-28": f"fixed − learnable at its own rate, 8×8 digits: {signed(100 * diff.mean_diff, 1)} points, "
                                 f"95 % interval [{num(100 * diff.lo, 1)}, {num(100 * diff.hi, 1)}]"},
            "numbers": {"ch5_movable_lr": f"{MOVABLE_LR:g}", "ch5_movable_cap": num(cap, 2),
                        "ch5_movable_mask": pct(float(np.mean(list(mask.values())))),
                        "ch5_movable_diff": f"{signed(100 * diff.mean_diff, 1)} points (95 % interval "
                                            f"[{num(100 * diff.lo, 1)}, {num(100 * diff.hi, 1)}])"}}


MOVABLE_NUMBERS = ("ch5_movable_lr", "ch5_movable_cap", "ch5_movable_mask", "ch5_movable_diff")


def direction(moves: dict) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """S2-20 on the movable cell (`movable`): the measure, the lower end of the fixed-minus-learnable interval
    (fraction; the fixed mask matches or beats the learnable one when it is above −1 point), and S2-28's
    preconditions there, as `Decision.claims` takes them."""
    return {"S2-20": round(moves["diff"].lo, 4)}, {"S2-20": moves["preconditions"]["S2-28"]}


def movable_numbers(moves: dict | None, decided: Sequence) -> dict[str, str]:
    """The prose's numbers of the movable cell and S2-28's decided verdict ("—" each without the cell)."""
    return own_rate_glue(moves, decided, "S2-28", "ch5_S228_decided", MOVABLE_NUMBERS)


def decide(runs: Runs) -> Findings:
    """Every claim of Tables 3, 5 and 6 with its verdict, and the numbers the prose cites (for the first image set,
    with Adam's step cap). Parts: `frame`, `text`, `dataset` (the first image set), `masks` (`patterns`), `t3`,
    `t5`, `t3m` (`table3_measures`), `fixed` (`fixed_vs_learnable`), `shares` (`open_share`), `pairs`, `ppl`
    (`perplexity_interval`), `inc` (`inconsistency`), `caps` (`image_caps`), `moved` (`mask_movement`)."""
    images, text = runs["images"], text_frame(runs["text"])
    frame, masks = image_frame(images), patterns(images)
    first = next(iter(images))
    t3, t5 = table3(frame), table5(frame)
    t3m, fixed = table3_measures(frame), fixed_vs_learnable(frame)
    shares = open_share(map_frame(images, masks))
    pairs = perplexity_pairs(text)
    ppl = perplexity_interval(pairs)
    inc = inconsistency(t3, t5, frame)
    caps = image_caps(images)  # how far Adam lets the mask move (Chapter 6)
    moved = mask_movement(images, masks)
    d = Decision()
    results = d.measure(CLAIMS, {"t3m": t3m, "fixed": fixed, "ppl": ppl, "text": text, "caps": caps})
    moves = movable(frame, runs.blocks.get("movable", [])) if "digits" in images else None  # S2-28 where it moves
    decided = d.decided_claims(**{k: v for k, v in moves.items() if k not in ("numbers", "diff")}) if moves else []
    s220 = []
    if moves:  # S2-20, the source's direction, where the mask moves
        measure, pre = direction(moves)
        s220 = d.claims(measure, preconditions=pre)
    d.glue({"ch5_verdict_S2_20": s220[0].verdict if s220 else "—"})
    positions, fixed_pos = None, {k: runs.blocks.get(k, []) for k in ("sinusoidal", "matched", "sincos")}
    if all(fixed_pos.values()):  # S1-10: learned against sinusoidal positions
        changes = pos.changes(text, frame, fixed_pos)
        s110 = d.measure(pos.CLAIMS, {"found": changes, "text": text})
        d.glue(pos.numbers(changes, s110[0].verdict))
        positions = pos.table(text, frame, fixed_pos)
    else:
        d.glue(pos.numbers(None))
    d.glue(prose_numbers(t3m, fixed, inc, ppl, shares, masks, moved, results, dataset=first)
           | {"ch5_dataset": "8×8 digits" if first == "digits" else task_title(first)} | cap_glue("5", caps)
           | movable_numbers(moves, decided))
    return d.done(frame=frame, text=text, dataset=first, masks=masks, t3=t3, t5=t5, t3m=t3m, fixed=fixed,
                  shares=shares, pairs=pairs, ppl=ppl, inc=inc, caps=caps, moved=moved, positions=positions)
