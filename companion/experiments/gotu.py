"""GOTU Boolean extrapolation (Chapter 3): one experiment per task, six ways to give the prior.

Methods (arXiv 2608.00418, Table 1 and Table 4):
- default: no prior; PyTorch-style initialisation.
- structured-svd / structured-opt: the task's open pattern written into W_Q W_Kᵀ at initialisation.
- mask: learnable log σ(M), open +10 / closed −10, shared by the heads, in every layer.
- fixed-mask: the same mask as a buffer (never trained).
- zero-mask: a learnable M initialised to 0 (the all-zero ablation of Table 4).

Profiles: `paper` is GOTU's own model and optimiser (d 256, 12 layers, 6 heads of 64, FF 256, Adam
with L2 1e-3, batch 256, task-specific learning rate and epochs, the whole seen set); `ci` is a
small model for a laptop CPU (2 layers of width 32, 4 heads of 8, FF 64) trained with Adam (lr 3e-3,
L2 1e-3, batch 64) for 250 steps on a fixed 4,096-point subsample of the seen set; the budget is the
same for every method and task.
"""

from __future__ import annotations

import math
from dataclasses import replace

from companion.config import ModelConfig, RunConfig, TaskConfig, TrainConfig
from companion.experiments import Experiment, Grid, Request, register_experiment, register_grid
from companion.experiments.methods import method_model
from companion.tasks.boolean import FUNCTIONS

__all__ = ["METHODS", "PAPER_SCHEDULE", "method_model", "gotu_configs", "FUNCTIONS"]

METHODS = ("default", "structured-svd", "structured-opt", "mask", "fixed-mask", "zero-mask")
# GOTU's script.sh: (learning rate, epochs) per task; seen-set sizes give the steps per epoch.
PAPER_SCHEDULE = {"2parity": (1e-5, 20), "cyclic3": (2e-5, 80), "maj3": (1e-5, 30), "threesym": (2e-5, 40),
                  "2parity-moved": (1e-5, 20)}  # the book's own variant (Chapter 3's account): 2Parity's schedule
SEEN = {"2parity": 24576, "cyclic3": 28672, "maj3": 24576, "threesym": 16384, "2parity-moved": 24576}
CI_TRAIN_POINTS = 4096
CI_STEPS = 250
# What Chapter 3 (function space, S2-05) and Chapter 6 (the misspecified mask's drift) read from
# the trained models: stored in each record, so that records made elsewhere need no weights.
READOUTS = ("mdi_distance", "log_mask")


def gotu_configs(function: str, profile: str) -> dict[str, RunConfig]:
    """method → RunConfig (seed 0) for one task and profile."""
    if profile == "paper":
        lr, epochs = PAPER_SCHEDULE[function]
        model = ModelConfig(d_model=256, n_layers=12, n_heads=6, d_head=64, d_ff=256)
        task = TaskConfig.of("boolean", function=function, n_bits=15, eval_points=4096)
        per_epoch = math.ceil(SEEN[function] / 256)
        train = TrainConfig(optimizer="adam", lr=lr, weight_decay=1e-3, batch_size=256, epochs=epochs, steps=0,
                            eval_every=per_epoch)
    else:
        model = ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64)
        task = TaskConfig.of("boolean", function=function, n_bits=15, n_train=CI_TRAIN_POINTS, eval_points=1024)
        train = TrainConfig(optimizer="adam", lr=3e-3, weight_decay=1e-3, batch_size=64, steps=CI_STEPS,
                            eval_every=CI_STEPS // 5)
    # Chapters 3 and 6 read seeds 0-4: one group of five (the recipe, `RunConfig.stack`)
    base = RunConfig(f"gotu-{function}", "default", profile, 0, model, task, train, readouts=READOUTS, stack=5)
    return {m: replace(base, method=m, model=method_model(model, m, variant="support")) for m in METHODS}


for _fn in FUNCTIONS:
    register_experiment(Experiment(
        f"gotu-{_fn}", f"GOTU {_fn}: extrapolation with the prior in QK or in the mask (Tables 1, 4)",
        lambda profile, fn=_fn: gotu_configs(fn, profile)))

register_grid(Grid("gotu", "Chapter 3: every GOTU task × method (Tables 1, 4 and 7, Figure 5)",
                   lambda profile: {fn: Request(f"gotu-{fn}") for fn in FUNCTIONS}))
