"""Trainable priors (Chapters 7–8): small causal LMs that differ only in how attention knows positions.

Methods:
- goat: no position embeddings; a GOAT prior (spectral relative κ + key-only sink u, `goat_rank`
  frequencies, uniform initialisation: the prior starts flat) in every layer, run as SDPA lanes.
- rope: rotary positions on every head's queries and keys, no prior.
- alibi: no position embeddings; ALiBi's fixed linear recency bias.
- sinusoidal: fixed sinusoidal absolute positions added to the embeddings (Chapter 9 only).

Every method has the same heads (GOAT carves its 2R + 1 prior lanes out of each head's channels, as
the authors' code does), optimiser and budget.

Profiles for `copymix` (copy-mixture, Figure 1 and Figure 2c):
- `ci`: 1 layer, width 64, 4 heads of 24, FF 128, R = 6 (13 lanes, 11 content channels); AdamW lr 3e-3
  (β = 0.9, 0.98, weight decay 0.01, none on the prior), cosine with 5 % warm-up, batch 64, `CI_STEPS`.
- `paper`: 2 layers, width 128, 4 heads of 32, R = 6; 6,000 updates (the source gives no setting
  for this toy; this is a larger, longer reading for a GPU).
"""

from __future__ import annotations

from dataclasses import replace

from companion.config import ModelConfig, PriorConfig, RunConfig, TaskConfig, TrainConfig
from companion.experiments import Experiment, register_experiment

__all__ = ["METHODS", "CI_STEPS", "READOUTS", "GOAT_READOUTS", "prior_model", "copymix_configs"]

METHODS = ("goat", "rope", "alibi")
CI_STEPS = 1500
# What Chapter 7 (Theorem 5.1 on the first layer, Figure 2c on the last: `companion.transport`) and
# Chapter 8 (GOAT's first-layer prior: `companion.goat.prior_readout`) read from the trained models,
# stored in each record, so that records made elsewhere need no weights.
READOUTS = ("collapse_bounds", "sink_curve")
GOAT_READOUTS = (*READOUTS, "goat_prior")


def prior_model(base: ModelConfig, method: str, *, rank: int = 6) -> ModelConfig:
    """The model of one method (see the module docstring)."""
    models = {
        "goat": replace(base, positions="none", prior=PriorConfig(kind="goat", goat_rank=rank)),
        "rope": replace(base, positions="rope"),
        "alibi": replace(base, positions="none", prior=PriorConfig(kind="alibi")),
        "sinusoidal": replace(base, positions="sinusoidal"),
    }
    if method not in models:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(models)}.")
    return models[method]


def copymix_configs(profile: str) -> dict[str, RunConfig]:
    """method → RunConfig (seed 0) of the copy-mixture experiment."""
    if profile == "paper":
        model = ModelConfig(arch="decoder", d_model=128, n_layers=2, n_heads=4, d_head=32, d_ff=256)
        steps = 6000
    else:
        model = ModelConfig(arch="decoder", d_model=64, n_layers=1, n_heads=4, d_head=24, d_ff=128)
        steps = CI_STEPS
    task = TaskConfig.of("copy-mixture")
    train = TrainConfig(optimizer="adamw", lr=3e-3, weight_decay=0.01, betas=(0.9, 0.98), batch_size=64,
                        steps=steps, schedule="cosine", warmup=0.05, clip_norm=1.0, eval_every=steps // 10)
    # Chapter 7 reads seeds 0-2 and Chapter 8 seeds 0-1: one group of three (the recipe, `RunConfig.stack`)
    base = RunConfig("copymix", "goat", profile, 0, model, task, train, stack=3)
    return {m: replace(base, method=m, model=prior_model(model, m), readouts=GOAT_READOUTS if m == "goat" else READOUTS)
            for m in METHODS}


register_experiment(Experiment(
    "copymix", "copy-mixture LM: GOAT's learned prior vs RoPE and ALiBi (GOAT Fig. 1, Fig. 2c)", copymix_configs))
