"""The ways of giving attention a prior that the mask-initialisation chapters compare, as model configs.

- default: no prior; PyTorch-style initialisation.
- mimetic: W_Q W_Kᵀ ≈ α·Z + β·I (Trockman & Kolter 2023); no task structure.
- structured-svd / structured-opt: the task's open pattern written into W_Q W_Kᵀ at initialisation.
- mask: learnable log σ(M), open +10 / closed −10, shared by the heads, in every layer.
- fixed-mask: the same mask as a buffer (never trained).
- zero-mask: a learnable M initialised to 0 (the all-zero ablation of Table 4).
- impulse (vision only): structured-svd with Zheng et al.'s impulse targets, one offset of the 3×3
  neighbourhood per head (the mask paper's "Impulse" baseline); the task's pattern variant "impulse".
- impulse-mask (vision only): a learnable mask of one M per head, head h open on the h-th impulse offset
  (the per-head reading of the image mask, research notes §6.1).
"""

from __future__ import annotations

from dataclasses import replace

from companion.config import ModelConfig, PriorConfig

__all__ = ["ALL_METHODS", "method_model"]

ALL_METHODS = ("default", "mimetic", "structured-svd", "structured-opt", "mask", "fixed-mask", "zero-mask", "impulse",
               "impulse-mask")


def method_model(base: ModelConfig, method: str, *, variant: str = "default") -> ModelConfig:
    """The model of one method: which query-key init and which prior (pattern `variant` of the task; the
    impulse methods always read the task's "impulse" patterns)."""
    if method not in ALL_METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(ALL_METHODS)}.")
    mask = PriorConfig(kind="mask", variant=variant)
    return {
        "default": base,
        "mimetic": replace(base, qk_init="mimetic"),
        "structured-svd": replace(base, qk_init="structured-svd", prior=PriorConfig(variant=variant)),
        "structured-opt": replace(base, qk_init="structured-opt", prior=PriorConfig(variant=variant)),
        "mask": replace(base, prior=mask),
        "fixed-mask": replace(base, prior=replace(mask, trainable=False)),
        "zero-mask": replace(base, prior=replace(mask, init="zero")),
        "impulse": replace(base, qk_init="structured-svd", prior=PriorConfig(variant="impulse")),
        "impulse-mask": replace(base, prior=PriorConfig(kind="mask", variant="impulse", per_head=True)),
    }[method]
