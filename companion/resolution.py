"""A ViT read at a resolution it never trained at (GOAT's Figure 5a, arXiv 2601.15380).

`at_resolution(model, side)` rebuilds a trained ViT for side × side images with the same weights: the
patch size stays, so the grid of patches grows (8 × 8 digits in 2-pixel patches: a 4 × 4 grid; at 16
pixels an 8 × 8 one). What carries over depends on how the model knows where a patch sits:

- learned absolute positions: the trained table, a 4 × 4 grid of vectors, resampled bicubically to the
  new grid (the baseline of the source, as timm's `resample_abs_pos_embed` does; without it the model
  could not read the image at all);
- fixed 2-D sin-cos positions: computed for the new grid;
- a 2-D GOAT prior (`companion.goat2d`): the same α and β at every offset of the larger grid; the model
  has no absolute positions.

Masks are built for one grid of patches and do not carry; a ValueError says so. The readout
"resolution:12,16" stores the test accuracy and cross-entropy at each side (`ImageTask.test_at`, scored by
`ImageTask.score`); the
readout "canvas:12,16" the same with each image unchanged in the centre of a blank canvas of that side,
which keeps the patches as trained and changes only the grid (resizing changes both: a 2-pixel patch of
an upsampled digit holds a quarter of what it held).
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.goat2d import grid_side
from companion.priors import needs_pattern
from companion.readouts import parse_ints, register_readout

__all__ = ["resample_positions", "at_resolution", "resolution_readout", "canvas_readout"]


def resample_positions(table: Tensor, side: int) -> Tensor:
    """A learned position table (n, d) of a square grid, resampled bicubically to side × side, (side², d)."""
    old = grid_side(table.shape[0])
    grid = table.T.reshape(1, table.shape[1], old, old)
    out = F.interpolate(grid, size=(side, side), mode="bicubic", align_corners=False)
    return out.reshape(table.shape[1], side * side).T.contiguous()


@torch.no_grad()
def at_resolution(model: nn.Module, side: int) -> nn.Module:
    """The trained ViT `model` rebuilt for side × side images, weights shared as the module docstring says,
    in eval mode on the model's device. ValueError for a model that is not a ViT, a side its patch size does
    not divide, or a prior that does not carry to another grid."""
    from companion.model import Transformer  # late: model imports the priors this module's readers use

    cfg = model.cfg
    if cfg.arch != "vit" or cfg.pool != "mean":
        raise ValueError(f"a resolution readout reads a ViT that pools its patches by mean, got arch={cfg.arch!r}, "
                         f"pool={cfg.pool!r}.")
    if side % cfg.patch_size:
        raise ValueError(f"the image side {side} is not a multiple of the patch size {cfg.patch_size}.")
    if needs_pattern(cfg.prior):
        raise ValueError(f"a {cfg.prior.kind!r} prior is built from the task's pattern over the grid it trained on "
                         "and does not carry to another resolution; read a model whose prior is none or 'goat-2d'.")
    c = model.spec.image_shape[0]
    spec = replace(model.spec, image_shape=(c, side, side))
    net = Transformer(cfg, spec, generator=torch.Generator().manual_seed(0))
    state = dict(model.state_dict())
    if cfg.positions == "learned":
        state["pos_emb"] = resample_positions(state["pos_emb"], side // cfg.patch_size)
    tied = [k for k, v in net.state_dict().items() if k in state and state[k].shape != v.shape]
    if tied:
        raise ValueError(f"{', '.join(tied)} hold one entry per position of the grid the model trained on and do "
                         "not carry to another resolution; read a model whose prior is none or 'goat-2d'.")
    net.load_state_dict(state)
    dev = next(model.parameters()).device
    return net.to(dev).eval()


def _accuracy_at(model: nn.Module, task, sides, *, canvas: bool) -> dict[str, list]:
    trained = model.spec.image_shape[-1]
    out = {"side": [], "acc": [], "ce": []}
    for side in [trained, *sides]:
        x, y = task.test_at(side, canvas=canvas)
        found = task.score(model if side == trained else at_resolution(model, side), x.__getitem__, y)
        out["side"].append(side)
        out["acc"].append(found["acc"])
        out["ce"].append(found["ce"])
    return out


@register_readout("resolution")
@torch.no_grad()
def resolution_readout(model: nn.Module, task, arg: str) -> dict[str, list]:
    """Test top-1 accuracy and cross-entropy of a ViT with its test images resized to each side of arg
    ("12,16"), the model rebuilt by `at_resolution`: {"side": [...], "acc": [...], "ce": [...]}, the
    training side first. The source's protocol: the same picture in more pixels, so more patches."""
    return _accuracy_at(model, task, parse_ints(arg, "readout 'resolution' (image sides)"), canvas=False)


@register_readout("canvas")
@torch.no_grad()
def canvas_readout(model: nn.Module, task, arg: str) -> dict[str, list]:
    """As `resolution_readout`, with each test image unchanged in the centre of a blank canvas of each side:
    the patches the model trained on, on a larger grid, so only where a patch sits is new."""
    return _accuracy_at(model, task, parse_ints(arg, "readout 'canvas' (canvas sides)"), canvas=True)
