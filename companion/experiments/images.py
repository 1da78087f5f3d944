"""The mask on images and on language (Chapter 5): a ViT per image set (Tables 3 and 5) and a causal
character model with and without a local mask (Table 6).

Image experiments `vit-<dataset>` (task `images`), methods (see `companion.experiments.methods`):
default, mimetic, structured-svd (the pattern written into W_Q W_Kᵀ in closed form, the recipe of
Zheng et al.'s impulse initialisation with the task's pattern as target), mask (learnable), fixed-mask
and zero-mask; the pattern is the 3×3 patch neighbourhood ("local:1"). And the two impulse methods of the
mask paper's Table 3 as read here: impulse (structured-svd with one offset of that neighbourhood per head,
Zheng et al. 2025) and impulse-mask (a learnable mask of one M per head on those offsets). Pooling is the average of the
patch tokens (no CLS), as Zheng et al.'s structured ViTs use.

Profiles:
- `ci`: a ViT of 2 layers, width 32, 4 heads of 8, FF 64, learned positions; AdamW (lr 3e-3, weight
  decay 0.05), batch 64, cosine with 10 % warm-up, `CI_STEPS` updates. Digits at 8×8 in 2-pixel
  patches (16 tokens); CIFAR (when present) at 32 px in 4-pixel patches, 10,000 training images.
- `paper`: ViT-T (width 192, 12 layers, 3 heads of 64, FF 768) at 32 px in 2-pixel patches (256
  tokens, Zheng et al. 2024's `vit_tiny_patch2_32`), AdamW lr 1e-3, weight decay 0.05, batch 512,
  `PAPER_EPOCHS` epochs, cosine with 5 % warm-up, random crop and flip; ImageNet-100 at 224 px in
  16-pixel patches (196 tokens). The mask paper's own vision recipe is not public; this is the most
  faithful reading (reference notes §6.1), and it needs the data (`companion.tasks.images`).

Language experiment `lm-local` (task `char-lm`), methods default and mask (the causal local band
"local:W", learnable, open +10 / closed −10): `ci` is a decoder of 2 layers, width 64, on CPython's
documentation at L = 64 with W = 16, `CI_LM_STEPS` updates; `paper` a decoder of 8 layers, width 512
on TinyStories at L = 256 with W = 64 (needs the data).
"""

from __future__ import annotations

from dataclasses import replace

from companion.config import ModelConfig, RunConfig, TaskConfig, TrainConfig
from companion.experiments import Experiment, Grid, Request, register_experiment, register_grid
from companion.experiments.methods import method_model

__all__ = ["METHODS", "LM_METHODS", "CI_STEPS", "CI_LM_STEPS", "PAPER_EPOCHS", "WINDOW", "MOVABLE_LR", "MOVABLE_CELL",
           "POSITIONS_CELLS", "vit_configs", "lm_configs", "chapter5_cells"]

METHODS = ("default", "mimetic", "structured-svd", "mask", "fixed-mask", "zero-mask", "impulse", "impulse-mask")
LM_METHODS = ("default", "mask")
CI_STEPS = 300
CI_LM_STEPS = 300
PAPER_EPOCHS = 100
WINDOW = {"ci": 16, "paper": 64}
_PROFILES = {"digits": ("ci",), "cifar10": ("ci", "paper"), "cifar100": ("ci", "paper"), "imagenet100": ("paper",)}


def _data_params(dataset: str) -> dict:
    """The data settings a user overrides on the command line (`--set task.root=PATH`,
    `--set task.download=true`): none for the digits, which ship with scikit-learn."""
    if dataset == "digits":
        return {}
    return {"root": ""} | ({"download": False} if dataset != "imagenet100" else {})


def vit_configs(dataset: str, profile: str) -> dict[str, RunConfig]:
    """method → RunConfig (seed 0) of the ViT on `dataset` at `profile`."""
    if profile not in _PROFILES[dataset]:
        raise ValueError(f"vit-{dataset} has no {profile!r} profile; valid: {', '.join(_PROFILES[dataset])}.")
    if profile == "paper":
        patch, size = (16, 224) if dataset == "imagenet100" else (2, 0)
        model = ModelConfig(arch="vit", d_model=192, n_layers=12, n_heads=3, d_ff=768, pool="mean", patch_size=patch)
        task = TaskConfig.of("images", dataset=dataset, patch_size=patch, image_size=size, augment=True,
                             eval_points=2000, **_data_params(dataset))
        train = TrainConfig(optimizer="adamw", lr=1e-3, weight_decay=0.05, batch_size=512, epochs=PAPER_EPOCHS,
                            steps=0, schedule="cosine", warmup=0.05, clip_norm=1.0, eval_every=1000)
    else:
        patch = 2 if dataset == "digits" else 4
        model = ModelConfig(arch="vit", d_model=32, n_layers=2, n_heads=4, d_ff=64, pool="mean", patch_size=patch)
        params = {"n_train": 10000} if dataset != "digits" else {}
        task = TaskConfig.of("images", dataset=dataset, patch_size=patch, eval_points=500, **params,
                             **_data_params(dataset))
        train = TrainConfig(optimizer="adamw", lr=3e-3, weight_decay=0.05, batch_size=64, steps=CI_STEPS,
                            schedule="cosine", warmup=0.1, eval_every=CI_STEPS // 5)
    # Chapter 5 reads seeds 0-5: one group of six (the recipe, `RunConfig.stack`)
    base = RunConfig(f"vit-{dataset}", "default", profile, 0, model, task, train, stack=6)
    return {m: replace(base, method=m, model=method_model(model, m, variant="local:1")) for m in METHODS}


def lm_configs(profile: str) -> dict[str, RunConfig]:
    """method → RunConfig (seed 0) of the character model with and without the causal local mask."""
    if profile == "paper":
        model = ModelConfig(arch="decoder", d_model=512, n_layers=8, n_heads=8, d_ff=2048)
        task = TaskConfig.of("char-lm", corpus="tinystories", seq_len=256, max_documents=200000)
        train = TrainConfig(optimizer="adamw", lr=1e-3, weight_decay=0.01, betas=(0.9, 0.98), batch_size=64,
                            steps=6000, schedule="cosine", warmup=0.05, clip_norm=1.0, eval_every=1000)
    else:
        model = ModelConfig(arch="decoder", d_model=64, n_layers=2, n_heads=4, d_ff=128)
        task = TaskConfig.of("char-lm", seq_len=64)
        train = TrainConfig(optimizer="adamw", lr=3e-3, weight_decay=0.01, betas=(0.9, 0.98), batch_size=32,
                            steps=CI_LM_STEPS, schedule="cosine", warmup=0.05, clip_norm=1.0,
                            eval_every=CI_LM_STEPS // 4)
    # Chapter 5 reads seeds 0-11: two groups of six (the recipe, `RunConfig.stack`)
    base = RunConfig("lm-local", "default", profile, 0, model, task, train, stack=6)
    return {m: replace(base, method=m, model=method_model(model, m, variant=f"local:{WINDOW[profile]}"))
            for m in LM_METHODS}


for _ds, _what in (("digits", "8×8 digits (offline stand-in)"), ("cifar10", "CIFAR-10 (needs the data)"),
                   ("cifar100", "CIFAR-100 (needs the data)"), ("imagenet100", "ImageNet-100 (needs the data)")):
    register_experiment(Experiment(f"vit-{_ds}", f"ViT on {_what}: prior in QK or in a patch mask (Tables 3, 5)",
                                   lambda profile, ds=_ds: vit_configs(ds, profile), profiles=_PROFILES[_ds]))

register_experiment(Experiment("lm-local", "character LM with and without a causal local mask (Table 6)", lm_configs))


# The learnable patch mask's own learning rate in the "digits-movable" cell (`ci` only): under the cosine
# schedule over the ci budget's 300 updates its step cap is 25.7, past the 20 between a closed and an open ±10
# entry, as Chapter 6 gives the Boolean masks; at the model's 3e-3 the cap is 0.45 and learnable equals fixed
# by construction (S2-28).
MOVABLE_LR = 0.17
MOVABLE_CELL = "digits-movable"
# The default models with fixed sinusoidal positions instead of learned ones (`ci` only, S1-10 and the
# positions rows): the ViT with the 2-D encoding of its 4×4 patch grid, the character model with the 1-D
# encoding of Vaswani et al., as is and scaled to the learned embeddings' starting scale ("matched",
# `companion.positions.MATCHED_SCALE`); same seeds, data and budget.
POSITIONS_CELLS = {"digits-sincos": ("vit-digits", "sincos-2d"), "text-sinusoidal": ("lm-local", "sinusoidal"),
                   "text-matched": ("lm-local", "sinusoidal-matched")}


def chapter5_cells(profile: str) -> dict[str, Request]:
    """Image set or "text" → Request: the digits at `ci`, CIFAR-10 and CIFAR-100 at `paper`, and the
    language model at both; at `ci` also `MOVABLE_CELL`, the digits' learnable mask at `MOVABLE_LR`."""
    images = ("digits",) if profile == "ci" else ("cifar10", "cifar100")
    cells = {**{ds: Request(f"vit-{ds}") for ds in images}, "text": Request("lm-local")}
    if profile == "ci":
        cells[MOVABLE_CELL] = Request("vit-digits", ("mask",), (f"train.prior_lr={MOVABLE_LR}",))
        for cell, (experiment, positions) in POSITIONS_CELLS.items():
            cells[cell] = Request(experiment, ("default",), (f"model.positions={positions}",))
    return cells


register_grid(Grid("images-and-language", "Chapter 5: ViT methods per image set (Tables 3, 5) and the "
                   "local-mask LM (Table 6)", chapter5_cells))
