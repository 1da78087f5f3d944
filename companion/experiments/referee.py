"""The referees' grids (Chapter 6), all made of GOTU runs (`companion.experiments.gotu`) under overrides.

- `referee`: the skeptic's mask placements (correct, misspecified, falsifier) × contrasts ±c, plus
  the all-zero mask and the default (contrast 0), on 2Parity and on 3-bit Majority (its analogues
  on Majority's support {0, 1, 2}), and a widened falsifier at ±10 (`WIDENED`: the relevant bits and
  as many unused ones), a wrong mask that can still fit the seen set.
- `qk-norm`: Default and Structured (SVD) without and with QK normalisation, and Structured (Opt)
  without.
- `mask-moves`: the correct and misspecified ±10 masks and the all-zero mask with a learning rate of
  their own, `MOVABLE_LR` (the rest of the model keeps GOTU's), beside the fixed mask and the default.
  Under Adam an entry of M moves about one learning rate per update, so at the model's 3e-3 over 250
  updates a ±10 mask can travel about 0.75 and "learnable" equals "fixed" by construction; at 0.1 it
  can travel 25, past the 20 between a closed and an open entry, so learning is tested at all.

The correct mask at ±10, the all-zero mask and the structured initialisations are the very runs of
Chapter 3 (same experiment, method and config), so the store holds them once.
"""

from __future__ import annotations

from companion.experiments import Grid, Request, register_grid

__all__ = ["PLACEMENTS", "WIDENED", "CONTRASTS", "TASKS", "QK_CELLS", "MOVABLE_LR", "MOVABLE", "mask_overrides", "placement_cells",
           "qk_norm_cells", "movable_cells"]

TASKS = ("2parity", "maj3")
# The skeptic's placements on 2Parity, and their analogues on 3-bit Majority (support {0, 1, 2}).
PLACEMENTS = {
    "2parity": {"correct": "support", "misspecified": "pair:0-2", "falsifier": "pair:1-2"},
    "maj3": {"correct": "support", "misspecified": "group:0-1-3", "falsifier": "group:3-4-5"},
}
# A falsifier that can fit the seen set: the task's relevant bits and as many it does not use, open
# together at ±10. The shape-only falsifier above cuts the relevant bits off from the CLS token (it
# fits only part of the seen set), so it cannot show whether a wrong mask collapses to the default.
WIDENED = {"2parity": "group:0-1-2-3", "maj3": "group:0-1-2-3-4-5"}
CONTRASTS = (1.0, 2.0, 5.0, 10.0)
MOVABLE_LR = 0.1  # the mask's own learning rate in `mask-moves`: 25 over the ci profile's 250 updates
MOVABLE = ("correct", "misspecified", "all-zero")  # the placements trained at MOVABLE_LR
QK_CELLS = (("default", False), ("structured-svd", False), ("structured-opt", False),
            ("default", True), ("structured-svd", True))


def mask_overrides(variant: str, contrast: float) -> tuple[str, ...]:
    """Overrides turning the GOTU "mask" method into a mask at ±contrast on `variant`'s pattern."""
    return (f"model.prior.variant={variant}", f"model.prior.open_value={contrast}",
            f"model.prior.closed_value={-contrast}")


def placement_cells(profile: str) -> dict[tuple[str, str, float], Request]:
    """(task, placement, contrast) → Request; "all-zero" and "no mask" sit at contrast 0."""
    cells = {}
    for task in TASKS:
        exp = f"gotu-{task}"
        for placement, variant in PLACEMENTS[task].items():
            for c in CONTRASTS:
                cells[(task, placement, c)] = Request(exp, ("mask",), mask_overrides(variant, c))
        cells[(task, "widened", 10.0)] = Request(exp, ("mask",), mask_overrides(WIDENED[task], 10.0))
        cells[(task, "all-zero", 0.0)] = Request(exp, ("zero-mask",))
        cells[(task, "no mask", 0.0)] = Request(exp, ("default",))
    return cells


def qk_norm_cells(profile: str) -> dict[tuple[str, str, bool], Request]:
    """(task, method, qk_norm) → Request."""
    return {(task, method, norm): Request(f"gotu-{task}", (method,), ("model.qk_norm=true",) if norm else ())
            for task in TASKS for method, norm in QK_CELLS}


def movable_cells(profile: str) -> dict[tuple[str, str, str], Request]:
    """(task, placement, "own lr" | "model lr") → Request: the placements of `MOVABLE` with the mask's
    own learning rate; the fixed ±10 mask and the default beside them at the model's."""
    own = (f"train.prior_lr={MOVABLE_LR}",)
    cells = {}
    for task in TASKS:
        exp = f"gotu-{task}"
        for placement in MOVABLE:
            if placement == "all-zero":
                cells[(task, placement, "own lr")] = Request(exp, ("zero-mask",), own)
            else:
                cells[(task, placement, "own lr")] = Request(exp, ("mask",), mask_overrides(PLACEMENTS[task][placement], 10.0) + own)
        cells[(task, "fixed", "model lr")] = Request(exp, ("fixed-mask",))
        cells[(task, "no mask", "model lr")] = Request(exp, ("default",))
    return cells


register_grid(Grid("referee", "Chapter 6: mask placement × contrast on 2Parity and Majority", placement_cells))
register_grid(Grid("qk-norm", "Chapter 6: query–key initialisations with and without QK normalisation",
                   qk_norm_cells))
register_grid(Grid("mask-moves", "Chapter 6: the mask with a learning rate of its own, where it can cross ±10",
                   movable_cells))
