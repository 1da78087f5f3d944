"""The sink control (Chapter 7, S3-04 and S3-22): a setting where a small model grows an attention sink on a key that
carries no task information.

GOAT's Figure 2c reads sink mass against the content signal in a 125M language model on C4, where key 0 is a
place to park attention. The book's own character models (`charlm`) grow no sink at `ci`, nor at 4 or 16 times
its updates (the decisive search, `companion.experiments.decisive`), so there is nothing to shed. `passkey-lm`
reads Chapter 9's passkey sequences as a language model (`passkey` with `loss="all"`: every next token scored):
the filler letters and the key's first copy are noise, so most queries have nothing in their context to read;
only the key's copy after the prompt has something to find. Key 0 is the BOS token, the same in every sequence,
so attention parked there carries nothing. The models and training are Chapter 9's passkey ones (the same
GOAT, seeded as the authors' language models start, RoPE and ALiBi); seeds 0-2 train as one group, and every
run reads the last layer's sink curve (`sink_curve`, `companion.transport`).
"""

from __future__ import annotations

from dataclasses import replace

from companion.config import RunConfig, TaskConfig
from companion.experiments import Experiment, register_experiment
from companion.experiments.extrapolation import extrapolation_configs

__all__ = ["METHODS", "sink_control_configs"]

METHODS = ("goat", "rope", "alibi")


def sink_control_configs(profile: str) -> dict[str, RunConfig]:
    """method → RunConfig (seed 0) of `passkey-lm`: Chapter 9's passkey config of `profile` with every next
    token scored, the sink curve read, seeds 0-2 in one group."""
    passkey = extrapolation_configs("passkey", profile)
    out = {}
    for m in METHODS:
        cfg = passkey[m]
        task = TaskConfig.of("passkey", loss="all", **cfg.task.kwargs)
        out[m] = replace(cfg, experiment="passkey-lm", task=task, readouts=("sink_curve",), stack=3)
    return out


register_experiment(Experiment("passkey-lm", "passkey sequences read as a language model: the sink control of "
                                             "Chapter 7 (GOAT Fig. 2c)", sink_control_configs))
