"""A ViT trained at one resolution and read at larger ones (GOAT's Figure 5, Chapter 9's S3-19).

Experiment `vit-resolution` (task `images`, the 8×8 digits in 2-pixel patches: a 4 × 4 grid), three ways
for a patch to know where it sits, the rest of the model the same:

- learned: learned absolute positions (the source's baseline), resampled bicubically to a larger grid;
- sincos-2d: fixed 2-D sin-cos positions (Zheng et al.'s and MAE's), computed for the larger grid;
- goat-2d: no absolute positions, a 2-D GOAT prior in every layer (`companion.goat2d`), uniform at the start
  as in the source, rank 6 (3 frequencies per axis, base `GOAT_BASE`), trained at a learning rate of its own
  (`GOAT_PRIOR_LR`); goat-2d-shared: the same at the model's learning rate.

Each run reads its test accuracy at 12 and 16 pixels (6 × 6 and 8 × 8 grids): the digits resized (readout
"resolution", the source's protocol) and unchanged on a larger blank canvas (readout "canvas", only the grid
new); a GOAT run also its learned prior at every offset (readout "goat_grid", first and last layer).

`ci` only: a ViT of 2 layers, width 64, 2 heads of 32 (so that GOAT's 13 lanes leave 19 content channels,
about the share the source's ViT-S keeps: 31 of 64), FF 128; the training of Chapter 5's ViT (AdamW 3e-3,
weight decay 0.05, batch 64, cosine with 10 % warm-up, 300 updates), seeds 0–5 in one group. The source's
setting, a ViT-S/16 trained 300 epochs on ImageNet-1k at 224 and read at 384 and 512, needs data and a GPU.
"""

from __future__ import annotations

from dataclasses import replace

from companion.config import ModelConfig, PriorConfig, RunConfig, TaskConfig, TrainConfig
from companion.experiments import Experiment, register_experiment

__all__ = ["METHODS", "SIDES", "GOAT_RANK", "GOAT_BASE", "GOAT_PRIOR_LR", "CI_STEPS", "configs"]

METHODS = ("learned", "sincos-2d", "goat-2d", "goat-2d-shared")
SIDES = (12, 16)  # the image sides read after training (trained at 8)
GOAT_RANK = 6
# Periods of 6.3, 25 and 100 patches per axis: every frequency turns visibly over the 4 × 4 grid it trains
# on and the 8 × 8 it is read at (GOAT's 1e4 leaves only the first, which comes back open 6 patches away).
GOAT_BASE = 16.0
CI_STEPS = 300
# GOAT's prior at a learning rate of its own, ten times the model's: Adam's step cap over the 300 cosine updates
# is then 4.5 per weight instead of 0.45, room for a prior of a few nats to form from its uniform start (the
# source's prior had 300 ImageNet epochs). "goat-2d-shared" trains it at the model's rate, as a control.
GOAT_PRIOR_LR = 0.03


def configs(profile: str) -> dict[str, RunConfig]:
    """method → RunConfig (seed 0) of the resolution experiment (`ci` only)."""
    model = ModelConfig(arch="vit", d_model=64, n_layers=2, n_heads=2, d_ff=128, pool="mean", patch_size=2)
    task = TaskConfig.of("images", dataset="digits", patch_size=2, eval_points=500)
    train = TrainConfig(optimizer="adamw", lr=3e-3, weight_decay=0.05, batch_size=64, steps=CI_STEPS,
                        schedule="cosine", warmup=0.1, eval_every=CI_STEPS // 5)
    sides = ",".join(map(str, SIDES))
    reads = (f"resolution:{sides}", f"canvas:{sides}")
    base = RunConfig("vit-resolution", "learned", profile, 0, model, task, train, readouts=reads, stack=6)
    goat = replace(base, method="goat-2d", readouts=reads + ("goat_grid:0", "goat_grid:-1"),
                   model=replace(model, positions="none",
                                 prior=PriorConfig(kind="goat-2d", goat_rank=GOAT_RANK, goat_base=GOAT_BASE)))
    return {"learned": base,
            "sincos-2d": replace(base, method="sincos-2d", model=replace(model, positions="sincos-2d")),
            "goat-2d": replace(goat, train=replace(train, prior_lr=GOAT_PRIOR_LR)),
            "goat-2d-shared": replace(goat, method="goat-2d-shared")}


register_experiment(Experiment("vit-resolution", "digits ViT trained at 8 px, read at 12 and 16: learned, 2-D "
                               "sin-cos or 2-D GOAT positions (GOAT Figure 5)", configs, profiles=("ci",)))
