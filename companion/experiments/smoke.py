"""The smoke experiment: y = x0·x1 on {±1}^6 (`companion.tasks.toy`), no prior vs the true-structure mask.

It exercises the whole engine in seconds and is what the tests and the README's examples sweep.
"""

from __future__ import annotations

from dataclasses import replace

from companion.config import ModelConfig, PriorConfig, RunConfig, TaskConfig, TrainConfig
from companion.experiments import Experiment, register_experiment

__all__ = ["smoke_configs"]


def smoke_configs(profile: str) -> dict[str, RunConfig]:
    """method → RunConfig (seed 0)."""
    if profile == "ci":
        model = ModelConfig(d_model=32, n_layers=2, n_heads=2, d_ff=64)
        train = TrainConfig(lr=3e-3, batch_size=16, steps=150, eval_every=50)
    else:
        model = ModelConfig(d_model=64, n_layers=4, n_heads=4, d_ff=128)
        train = TrainConfig(lr=1e-3, batch_size=16, steps=2000, schedule="cosine", warmup=0.05, eval_every=100)
    base = RunConfig("smoke", "default", profile, 0, model, TaskConfig.of("toy", n_train=48), train)
    mask = replace(model, prior=PriorConfig(kind="mask"))
    return {"default": base, "mask": replace(base, method="mask", model=mask)}


register_experiment(Experiment("smoke", "toy y = x0·x1: exercises the engine", smoke_configs))
