"""Learned against fixed sinusoidal positions (S1-10), on the two default models of Chapter 5: the character
model with Vaswani et al.'s 1-D encoding instead of its learned position embeddings, added as it is and scaled
to the scale learned embeddings start at ("matched", `companion.positions.MATCHED_SCALE`), and the digits ViT
with the 2-D encoding of its patch grid (`companion.experiments.images.POSITIONS_CELLS`). Same seeds, data and
budget as the default runs they are paired with; nothing here trains.

S1-10 is decided on the language model, the setting of its source (a sequence model, perplexity), with the
encoding on the embeddings' scale, as Vaswani et al. put it (they scale the embeddings up instead): the largest
|end| of the 95 % interval of the relative change of test perplexity, sinusoidal / learned − 1, paired by seed.
The unscaled encoding and the digits are read beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from companion.book.chapter import Measure
from companion.book.chapters.frames import records_frame
from companion.book.chapters.stats import Paired, paired, summarize, summary_table
from companion.book.prose import num, signed
from companion.positions import MATCHED_SCALE

__all__ = ["LABELS", "DECIDING", "NUMBERS", "changes", "CLAIMS", "table", "numbers"]

# block of Chapter 5's runs → the row's label
LABELS = {"learned": "Learned positions (the default)", "matched": "Sinusoidal, on the embeddings' scale",
          "sinusoidal": "Sinusoidal, unscaled", "sincos": "Sinusoidal (2-D), unscaled"}
DECIDING = "matched"  # the block S1-10 reads
NUMBERS = ("ch5_pos_rms", "ch5_pos_std", "ch5_pos_ratio", "ch5_pos_matched", "ch5_pos_unscaled", "ch5_pos_seeds",
           "ch5_pos_image", "ch5_verdict_S1_10")


def _by_seed(frame: pd.DataFrame, column: str) -> dict[int, float]:
    return dict(zip(frame["seed"], frame[column]))


def _relative(text: pd.DataFrame, records: Sequence) -> Paired:
    """Relative change of test perplexity, these records / learned − 1, paired by seed."""
    learned = _by_seed(text[text.method == "default"], "test.ppl")
    other = _by_seed(records_frame(records), "test.ppl")
    s = summarize([other[k] / learned[k] - 1 for k in sorted(set(other) & set(learned))])
    return Paired(s.mean, s.lo, s.hi, math.nan, s.n)


def changes(text: pd.DataFrame, frame: pd.DataFrame, fixed: Mapping[str, Sequence],
            dataset: str = "digits") -> dict[str, Paired]:
    """Against the learned-position defaults (`text`, `frame`: Chapter 5's language and image frames): "matched"
    and "sinusoidal", the relative change of test perplexity; "sincos", test accuracy (fraction) of the 2-D
    encoding minus the default's; all paired by seed."""
    learned = _by_seed(frame[(frame.dataset == dataset) & (frame.method == "default")], "test.acc")
    return {"matched": _relative(text, fixed["matched"]), "sinusoidal": _relative(text, fixed["sinusoidal"]),
            "sincos": paired(_by_seed(records_frame(fixed["sincos"]), "test.acc"), learned)}


# Over {"found": `changes`, "text": the text frame}. S1-10: the largest |end| of the interval of the deciding
# encoding's perplexity change (fraction), if the learned-position model learns the text (its mean test bits per
# character).
CLAIMS = (Measure("S1-10", lambda a: round(max(abs(a["found"][DECIDING].lo), abs(a["found"][DECIDING].hi)), 4),
                  {"default-learns-text": lambda a: round(float(a["text"][a["text"].method == "default"]["test.bpc"].mean()), 4)}),)


def table(text: pd.DataFrame, frame: pd.DataFrame, fixed: Mapping[str, Sequence],
          dataset: str = "digits") -> pd.DataFrame:
    """Both models with learned and with sinusoidal positions: test perplexity (text) and test top-1 accuracy in %
    (images), mean ± std [95 % interval] over the seeds."""
    lm = [text[text.method == "default"].assign(positions=LABELS["learned"])]
    lm += [records_frame(fixed[k]).assign(positions=LABELS[k]) for k in ("matched", "sinusoidal")]
    sc = records_frame(fixed["sincos"])
    vit = [frame[(frame.dataset == dataset) & (frame.method == "default")].assign(positions=LABELS["learned"]),
           sc.assign(positions=LABELS["sincos"], **{"test.acc (%)": 100 * sc["test.acc"]})]
    a = summary_table(pd.concat(lm, ignore_index=True), "positions", ["test.ppl"], digits=3)
    b = summary_table(pd.concat(vit, ignore_index=True), "positions", ["test.acc (%)"], digits=1)
    a, b = a.rename(columns={"test.ppl": "Value"}), b.rename(columns={"test.acc (%)": "Value"})
    a.index = pd.MultiIndex.from_product([["Character model: test perplexity"], a.index])
    b.index = pd.MultiIndex.from_product([["8×8 digits ViT: test top-1 accuracy (%)"], b.index])
    out = pd.concat([a, b]).rename(columns={"n": "Seeds"})
    out.index.names = ["Model", "Positions"]
    return out


def numbers(found: Mapping[str, Paired] | None, verdict: str = "") -> dict[str, str]:
    """What Chapter 5's positions paragraph glues: the encoding's scale against the embeddings', each paired
    change with its interval, and S1-10's `verdict`; "—" each without the runs (the `paper` profile has none)."""
    if found is None:
        return dict.fromkeys(NUMBERS, "—")

    def relative(p: Paired) -> str:
        return f"{signed(100 * p.mean_diff, 1)} % (95 % interval [{signed(100 * p.lo, 1)}, {signed(100 * p.hi, 1)}] %)"

    img = found["sincos"]
    rms = 1 / math.sqrt(2)  # of the encoding's entries, unscaled
    return {"ch5_pos_rms": f"{rms:.2f}", "ch5_pos_std": f"{MATCHED_SCALE * rms:g}",
            "ch5_pos_ratio": f"{1 / MATCHED_SCALE:.0f}", "ch5_pos_matched": relative(found["matched"]),
            "ch5_pos_unscaled": relative(found["sinusoidal"]), "ch5_pos_seeds": str(found["matched"].n),
            "ch5_verdict_S1_10": verdict,
            "ch5_pos_image": f"{signed(100 * img.mean_diff, 1)} points (95 % interval [{num(100 * img.lo, 1)}, "
                             f"{num(100 * img.hi, 1)}], {img.n} seeds)"}
