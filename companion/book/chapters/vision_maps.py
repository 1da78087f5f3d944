"""Chapter 5's masks and attention maps: the local image and text patterns, how far the learnable mask moved, and how
much of each method's attention stays on the pattern's open keys."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from companion import drift
from companion.book.chapters import frames
from companion.book.chapters.frames import long_curves, open_mass_frame
from companion.book.labels import label, task_title
from companion.experiments import get_experiment
from companion.experiments.images import METHODS, WINDOW
from companion.masks import causal_local_pattern, patch_pattern
from companion.tasks.images import load_digits_images

__all__ = ["SHOWN", "image_pattern", "patterns", "digit_examples", "text_pattern", "text_mask", "mask_movement",
           "map_frame", "open_share", "map_panels", "accuracy_curves"]


SHOWN = ("default", "structured-svd", "mask")  # the methods of the attention-map figure


def image_pattern(side: int = 4, radius: int = 1) -> np.ndarray:
    """The open pattern of the image mask over a side × side grid of patches (no CLS, mean pooling)."""
    return patch_pattern(side, side, radius, cls=False).numpy()


def patterns(records: Mapping[str, Sequence]) -> dict[str, np.ndarray]:
    """The mask of every image set run, its grid read from the size of the runs' attention maps."""
    out = {}
    for ds, recs in records.items():
        if ds != "text":
            n = len(recs[0].drift["maps"]["init"][0])
            out[ds] = image_pattern(int(round(n ** 0.5)))
    return out


def digit_examples(n: int = 10) -> tuple[np.ndarray, list[int]]:
    """The first test image of each class 0 … n − 1 of the digits (0–255) and their labels."""
    x, y = load_digits_images()["test"]
    idx = [int((y == k).nonzero()[0]) for k in range(n)]
    return x[idx, 0].numpy(), [int(y[i]) for i in idx]


def text_pattern(seq_len: int, window: int) -> np.ndarray:
    """The causal local band of the language model (query × key, True = open)."""
    return causal_local_pattern(seq_len, window).numpy()


def text_mask(profile: str) -> tuple[np.ndarray, int, int]:
    """The language model's mask at `profile` with its length L and window W: (pattern, L, W)."""
    cfg = get_experiment("lm-local").configs(profile)["mask"]
    length, window = cfg.task.kwargs["seq_len"], WINDOW[profile]
    return text_pattern(length, window), length, window


def mask_movement(records: Mapping[str, Sequence], masks: Mapping[str, np.ndarray], method: str = "mask") -> float:
    """How far a mask's bias moved: ‖log σ(M_T) − log σ(M_0)‖_F / ‖log σ(M_0)‖_F at the end (`drift.final`,
    `drift.mask_scale`: M_0 = ±10 on the pattern), averaged over layers, then over seeds and image sets."""
    return float(np.mean([drift.final(rec.drift, "mask") / drift.mask_scale(masks[ds], 10.0)
                          for ds, recs in records.items() if ds != "text" for rec in recs
                          if rec.config.method == method]))


def map_frame(records: Mapping[str, Sequence], patterns: Mapping[str, np.ndarray],
              methods: Sequence[str] = METHODS) -> pd.DataFrame:
    """Share of attention on the mask's open keys (mean over queries) at the start and end of training, one row per
    image set × method × seed × layer."""
    images = {ds: recs for ds, recs in records.items() if ds != "text"}
    return open_mass_frame(images, patterns, methods, key="dataset")


def open_share(maps: pd.DataFrame) -> pd.DataFrame:
    """Image set × method rows; columns "start" and "end": the open share averaged over seeds and layers, 3 decimals."""
    table = maps.groupby(["dataset", "method"], sort=False)[["init", "final"]].mean()
    table = table.rename(columns={"init": "start", "final": "end"})
    table.index = table.index.map(lambda k: (task_title(k[0]), label(k[1])))
    return table.round(3)


def map_panels(records: Sequence, seed: int, methods: Sequence[str] = SHOWN) -> list[tuple[str, list]]:
    """The attention-map figure's panels per method: first layer at start and end, last layer at end."""
    return frames.map_panels(records, seed, methods, (("init", 0), ("final", 0), ("final", -1)))


def accuracy_curves(records: Sequence) -> pd.DataFrame:
    """Test accuracy (%) during training, long form (method, seed, step, "test accuracy (%)")."""
    return long_curves(records, "test", "acc", scale=100).rename(columns={"value": "test accuracy (%)"})
