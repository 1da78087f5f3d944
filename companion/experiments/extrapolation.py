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

import math
from dataclasses import replace

from companion.config import ModelConfig, RunConfig, TaskConfig, TrainConfig
from companion.experiments import Experiment, Grid, Request, register_experiment, register_grid
from companion.experiments.copy_mixture import prior_model

__all__ = ["METHODS", "CI_STEPS", "TRAIN_LEN", "CONTROL_READOUTS", "FAR", "EVAL_TOKENS", "WINDOW", "DEPTH_BINS",
           "SINK_TAIL", "SINK_POINTS", "HEAD_POINTS", "READINGS", "EXPERIMENTS", "reading_lengths", "readout_specs",
           "method_readouts", "extrapolation_configs"]

METHODS = ("goat", "goat-uniform", "rope", "alibi", "sinusoidal")
CI_STEPS = {"charlm": 400, "passkey": 500}
TRAIN_LEN = {("charlm", "ci"): 64, ("passkey", "ci"): 64, ("charlm", "paper"): 256, ("passkey", "paper"): 128}
# Chapter 7 reads Figure 2c off the charlm runs too (a control where key 0 carries no task information).
CONTROL_READOUTS = {"charlm": ("sink_curve",)}
# What every run measures at its end (`companion.readouts`), which is all Chapter 9 reads: the lengths
# L, 2L, … FAR·L; the first EVAL_TOKENS test characters at every length; the per-position loss
# smoothed over WINDOW positions; retrieval in DEPTH_BINS bins of key depth; GOAT's key prior u(j)
# (its rise over the last 1/SINK_TAIL of the window exact, the lines at SINK_POINTS keys); the last
# layer's prior at FAR·L drawn at HEAD_POINTS × HEAD_POINTS positions (all heads, a few tens of KB).
FAR = {"ci": 8, "paper": 8}
EVAL_TOKENS = {"ci": 16384, "paper": 16384}
WINDOW, DEPTH_BINS, SINK_TAIL = 16, 5, 8
SINK_POINTS = {"ci": 128, "paper": 64}
HEAD_POINTS = {"ci": 24, "paper": 16}


def reading_lengths(train_len: int, far: int) -> list[int]:
    """L · 2^k for k = 0 … log2(far)."""
    return [train_len * 2**k for k in range(int(math.log2(far)) + 1)]


def readout_specs(experiment: str, profile: str) -> dict[str, str]:
    """What Chapter 9 reads from the runs of `experiment` at `profile`, by name → readout spec:
    charlm: "lengths", "positions" (at FAR·L), "sink"; passkey: "lengths", "head"; a name with "-pi"
    is the same reading with position interpolation (the rope runs only; `method_readouts`)."""
    if experiment not in CI_STEPS:
        raise ValueError(f"unknown experiment {experiment!r}; valid: {', '.join(CI_STEPS)}.")
    L = TRAIN_LEN[experiment, profile]
    lengths = reading_lengths(L, FAR[profile])
    listed, far = ",".join(map(str, lengths)), lengths[-1]
    if experiment == "charlm":
        tokens = f"tokens={EVAL_TOKENS[profile]}"
        specs = {"lengths": f"lm_lengths:{listed};{tokens}",
                 "positions": f"lm_positions:{far};{tokens};window={WINDOW};points=512",
                 "sink": f"sink_profile:{far};points={SINK_POINTS[profile]};tail={SINK_TAIL}"}
        pi = ("lengths", "positions")
    else:
        specs = {"lengths": f"passkey_lengths:{listed};bins={DEPTH_BINS}",
                 "head": f"head_prior:{far};points={HEAD_POINTS[profile]}"}
        pi = ("lengths",)
    return specs | {f"{k}-pi": f"{specs[k]};pi" for k in pi}


def method_readouts(experiment: str, profile: str, method: str) -> tuple[str, ...]:
    """The readouts a `method` run of `experiment` lists: every run its lengths (and, for charlm, its
    per-position loss); RoPE both also with position interpolation; GOAT its key prior (charlm, both
    starts) and the seeded GOAT its last layer's prior (passkey)."""
    specs = readout_specs(experiment, profile)
    names = ["lengths", "positions"] if experiment == "charlm" else ["lengths"]
    if method == "rope":
        names += [f"{n}-pi" for n in names]
    if experiment == "charlm" and method in ("goat", "goat-uniform"):
        names.append("sink")
    if experiment == "passkey" and method == "goat":
        names.append("head")
    return tuple(specs[n] for n in names) + CONTROL_READOUTS.get(experiment, ())


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
    # Chapter 7 reads charlm seeds 0-2 and Chapter 9 both experiments' seeds 0-1: groups of three and
    # two (the recipe, `RunConfig.stack`)
    base = RunConfig(experiment, "goat", profile, 0, model, task, train, stack=3 if experiment == "charlm" else 2)
    models = {m: prior_model(model, m.removesuffix("-uniform")) for m in METHODS}
    models["goat"] = replace(models["goat"], prior=replace(models["goat"].prior, goat_init="seeded"))
    return {m: replace(base, method=m, model=models[m], readouts=method_readouts(experiment, profile, m))
            for m in METHODS}


# Evaluation-time readings of the runs above (no runs of their own): what `companion list` shows.
READINGS = (("rope-pi", "the rope runs read with position interpolation to the training length"),)
EXPERIMENTS = ("charlm", "passkey")

for _name, _what in (("charlm", "character LM trained at L, read up to 8L (GOAT Fig. 2a, 2b)"),
                     ("passkey", "passkey retrieval trained at L, read up to 8L (GOAT Fig. 3a)")):
    register_experiment(Experiment(_name, _what, lambda profile, e=_name: extrapolation_configs(e, profile),
                                   readings=READINGS))

register_grid(Grid("extrapolation", "Chapter 9: both experiments, every method (one worker pool)",
                   lambda profile: {e: Request(e) for e in EXPERIMENTS}))
