"""The one table of names, labels and colours the chapters use: every method, task and benchmark variant.

A method keeps its label and its colour in every chapter and figure (Chapter 3's learnable mask is the
same red as Chapter 4's; GOAT the same blue in Part IV and in Chapter 10).
"""

from __future__ import annotations

__all__ = ["METHODS", "TASKS", "VARIANTS", "COLOURS", "MARKERS", "label", "colour", "task_title"]

METHODS = {
    "default": "Default", "structured-svd": "Structured (SVD)", "structured-opt": "Structured (Opt)",
    "mimetic": "Mimetic", "mask": "Mask (learnable)", "fixed-mask": "Fixed mask", "zero-mask": "All-zero mask",
    "sym-mask": "Mask, exactly symmetric", "impulse": "Impulse", "impulse-mask": "Impulse mask, per head (learnable)",
    "goat": "GOAT", "goat-uniform": "GOAT (uniform start)", "rope": "RoPE", "rope-pi": "RoPE + PI",
    "alibi": "ALiBi", "sinusoidal": "sinusoidal",
}
TASKS = {"2parity": "2Parity", "cyclic3": "Cyclic3", "maj3": "3-bit Majority", "threesym": "3-symmetric (f1)",
         "add": "addition", "mul": "multiplication", "charlm": "character LM", "passkey": "passkey retrieval",
         "copymix": "copy mixture", "digits": "8×8 digits", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "2parity-moved": "2Parity, U moved",
         "imagenet100": "ImageNet-100"}
# Benchmark variants (Chapter 10): how attention with a prior is computed.
VARIANTS = {"sdpa": "SDPA, no prior", "goat-lanes": "GOAT lanes (SDPA)",
            "goat-sdpa": "GOAT, companion path (16-bit → float32 lanes)",
            "goat-chunked": "GOAT lanes, a few heads at a time (CPU kernel)", "mask-sdpa": "learnable mask (SDPA)",
            "mask-sdpa-math": "learnable mask (SDPA, math kernel)", "eager-bias": "eager, materialised bias",
            "mask-attend": "learnable mask (companion.attend)", "mask-flex": "learnable mask (FlexAttention)",
            "alibi-sdpa": "ALiBi bias (SDPA)",
            "eager-goat": "GOAT, eager", "flex": "GOAT (FlexAttention)"}

# Every method's colour is at least `colours.MIN_APART` (CIEDE2000) from every other method's, from
# the categorical cycle `plots.PALETTE` and from the ink grey `plots.INK` (tests/test_colours.py). The
# methods a chapter draws together are also `colours.MIN_APART_CVD` apart as a protanope or a
# deuteranope sees them, and every figure is checked as drawn (`figure_checks.colour_problems`): so Part II's
# mimetic start is a dark brown (the lighter one turned into the mask's red for a dichromat), its
# optimised structured start an azure (its gold and the SVD start's orange were one yellow), and ALiBi
# a magenta (its olive and RoPE's green were two greens a reader could not tell apart in Figure 8.1).
_BASE = {"default": "#4d4d4d", "structured-svd": "#e08214", "structured-opt": "#3399ff", "mimetic": "#552211",
         "mask": "#c0392b", "fixed-mask": "#7d5ba6", "zero-mask": "#00a6a6", "sym-mask": "#e377c2",
         "goat": "#1b6ca8", "goat-uniform": "#9ecae1", "rope": "#2ca02c", "rope-pi": "#98df8a",
         "alibi": "#b8008a", "sinusoidal": "#f08880", "impulse": "#ff0070", "impulse-mask": "#d600ff"}
# A variant that computes a method keeps its colour; the others are shades of it, each distinct from
# every other variant (Chapter 10 draws them together; FlexAttention's GOAT a dark purple, which a
# dichromat tells from the GOAT lanes' blue by its lightness).
_VARIANT_COLOUR = {"sdpa": "#4d4d4d", "goat-lanes": _BASE["goat"], "goat-sdpa": "#4292c6", "goat-chunked": "#0b2f5e",
                   "mask-sdpa": _BASE["mask"],
                   "mask-sdpa-math": "#e6550d", "eager-bias": "#969696", "mask-attend": "#fc9272", "mask-flex": "#67000d",
                   "alibi-sdpa": _BASE["alibi"], "eager-goat": "#9ecae1", "flex": "#3f007d"}
COLOURS = {**_BASE, **_VARIANT_COLOUR}
MARKERS = {"default": "o", "structured-svd": "s", "structured-opt": "D", "mimetic": "v", "mask": "^",
           "fixed-mask": "P", "zero-mask": "X", "sym-mask": "*", "goat": "o", "goat-uniform": "s", "rope": "^", "rope-pi": "v",
           "alibi": "D", "sinusoidal": "X", "impulse": "h", "impulse-mask": "d"}


def label(name: str) -> str:
    """The reader's name of a method or benchmark variant (the name itself if it has none)."""
    return METHODS.get(name) or VARIANTS.get(name) or name


def colour(name: str) -> str:
    """The colour of a method or variant in every figure (grey for an unknown name)."""
    return COLOURS.get(name, "#8c8c8c")


def task_title(name: str) -> str:
    return TASKS.get(name, name)
