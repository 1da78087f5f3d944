"""Length extrapolation and retrieval (Chapter 9): GOAT against RoPE, ALiBi and sinusoidal positions.

Two experiments with the same four models (`companion.experiments.copy_mixture.prior_model`; all four read
inputs of any length, RoPE also with position interpolation at evaluation). GOAT starts as the
authors' language models do (`goat_init="seeded"`: recency slopes at ALiBi's values, small random
spectral and sink weights); `goat-uniform` is the same model started from the uniform prior of
Chapters 7–8 (no recency at step 0), which separates what GOAT learns from what its start gives it:
- `charlm`: character language model on the offline corpus (`char-lm`, CPython's documentation),
  trained at L = 64 and read at L … 8L (GOAT Figure 2a, 2b).
- `passkey`: a 5-digit key hidden in random letters, trained at L = 64 and read at L … 8L (GOAT
  Figure 3a, and the depth × length grid of Figure 3c).

Profiles:
- `ci`: 2 layers, width 64, 4 heads of 24, FF 128, GOAT R = 6; AdamW lr 3e-3 (β = 0.9, 0.98, weight
  decay 0.01), cosine with 5 % warm-up, clip 1, batch 32, `CI_STEPS[experiment]` updates.
- `paper`: 4 layers, width 256, 8 heads of 32, FF 1024; L = 256 (charlm) and 128 (passkey); lr 1e-3,
  batch 32, 6,000 updates (the source trains 125M models on 4B C4 tokens at L = 2048, and 12 × 512
  models at L = 1024 for the passkey; this is the largest reading that fits the GPU budget here).
"""

from __future__ import annotations

from dataclasses import replace


from companion.config import ModelConfig, RunConfig, TaskConfig, TrainConfig
from companion.experiments import Experiment, Grid, Request, register_experiment, register_grid
from companion.experiments.copy_mixture import prior_model

__all__ = ["METHODS", "CI_STEPS", "TRAIN_LEN", "CONTROL_READOUTS", "READINGS", "EXPERIMENTS", "extrapolation_configs"]

METHODS = ("goat", "goat-uniform", "rope", "alibi", "sinusoidal")
CI_STEPS = {"charlm": 400, "passkey": 500}
TRAIN_LEN = {("charlm", "ci"): 64, ("passkey", "ci"): 64, ("charlm", "paper"): 256, ("passkey", "paper"): 128}
# Chapter 7 reads Figure 2c off the charlm runs too (a control where key 0 carries no task information).
CONTROL_READOUTS = {"charlm": ("sink_curve",)}


def extrapolation_configs(experiment: str, profile: str) -> dict[str, RunConfig]:
    """method → RunConfig (seed 0) of `charlm` or `passkey`."""
    if experiment not in CI_STEPS:
        raise ValueError(f"unknown experiment {experiment!r}; valid: {', '.join(CI_STEPS)}.")
    length = TRAIN_LEN[experiment, profile]
    if profile == "paper":
        model = ModelConfig(arch="decoder", d_model=256, n_layers=4, n_heads=8, d_head=32, d_ff=1024)
        steps, lr = 6000, 1e-3
    else:
        model = ModelConfig(arch="decoder", d_model=64, n_layers=2, n_heads=4, d_head=24, d_ff=128)
        steps, lr = CI_STEPS[experiment], 3e-3
    task = (TaskConfig.of("char-lm", seq_len=length) if experiment == "charlm"
            else TaskConfig.of("passkey", seq_len=length))
    train = TrainConfig(optimizer="adamw", lr=lr, weight_decay=0.01, betas=(0.9, 0.98), batch_size=32,
                        steps=steps, schedule="cosine", warmup=0.05, clip_norm=1.0, eval_every=steps // 8)
    base = RunConfig(experiment, "goat", profile, 0, model, task, train, readouts=CONTROL_READOUTS.get(experiment, ()))
    models = {m: prior_model(model, m.removesuffix("-uniform")) for m in METHODS}
    models["goat"] = replace(models["goat"], prior=replace(models["goat"].prior, goat_init="seeded"))
    return {m: replace(base, method=m, model=models[m]) for m in METHODS}


# Evaluation-time readings of the runs above (no runs of their own): what `companion list` shows.
READINGS = (("rope-pi", "the rope runs read with position interpolation to the training length"),)
EXPERIMENTS = ("charlm", "passkey")

for _name, _what in (("charlm", "character LM trained at L, read up to 8L (GOAT Fig. 2a, 2b)"),
                     ("passkey", "passkey retrieval trained at L, read up to 8L (GOAT Fig. 3a)")):
    register_experiment(Experiment(_name, _what, lambda profile, e=_name: extrapolation_configs(e, profile),
                                   readings=READINGS))

register_grid(Grid("extrapolation", "Chapter 9: both experiments, every method (one worker pool)",
                   lambda profile: {e: Request(e) for e in EXPERIMENTS}))
