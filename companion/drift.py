"""How far the prior, the query-key forms and the attention maps move from their initial values.

`DriftTracker` is a training callback (`companion.train.train(..., callbacks=[tracker])`); its first
call (step 0) snapshots the model, each later call on its schedule records per layer and head:
mask drift (absolute), query-key drift (relative) and attention drift on a fixed probe batch.
`curve`, `final` and `mask_scale` read a recorded drift (a run record's `drift`) back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["DriftTracker", "qk_forms", "mask_biases", "mask_logits", "attention_maps", "keeps_maps", "curve", "final",
           "mask_scale"]


def keeps_maps(model_cfg) -> bool:
    """Whether a run keeps its mean attention maps in its record: encoders and ViTs (Chapters 3, 5
    and 6 read their maps); a decoder's chapters read attention through readouts, and its n × n maps
    at the paper profile's lengths would make a record megabytes."""
    return model_cfg.arch != "decoder"


def qk_forms(model: nn.Module) -> dict[int, Tensor]:
    """{layer: (h, d_model, d_model)} bilinear forms W_Q^(h) W_K^(h)ᵀ = W_q[h]ᵀ W_k[h] of each head."""
    out = {}
    for l, block in enumerate(model.blocks):
        a = block.attn
        wq = a.q_proj.weight.detach().float().view(a.n_heads, a.d_head, -1)  # (h, r, d)
        wk = a.k_proj.weight.detach().float().view(a.n_heads, a.d_head, -1)
        out[l] = wq.transpose(1, 2) @ wk  # (h, d, d)
    return out


def mask_logits(model: nn.Module) -> dict[int, Tensor]:
    """{layer: (h or 1, n, n)} the logits M of the layers whose prior holds a mask (`Prior.mask_logits`)."""
    out = {}
    for l, block in enumerate(model.blocks):
        prior = block.attn.prior
        logits = prior.mask_logits() if prior is not None else None
        if logits is not None:
            out[l] = logits.detach().float()
    return out


def mask_biases(model: nn.Module) -> dict[int, Tensor]:
    """{layer: (h or 1, n, n)} log σ(M) of the layers that hold a mask prior."""
    return {l: F.logsigmoid(m) for l, m in mask_logits(model).items()}


@torch.no_grad()
def attention_maps(model: nn.Module, probe: Tensor) -> list[Tensor]:
    """[(b, h, i, j) attention weights per layer] on `probe`, in eval mode (mode restored)."""
    was = model.training
    model.eval()
    try:
        _, maps = model(probe, return_attention=True)
    finally:
        model.train(was)
    return [m.detach().float() for m in maps]


class DriftTracker:
    """Callback recording drift from the step-0 snapshot, per layer and head.

    With l a layer and h a head:

    - mask (absolute; M is often zero-initialised so a relative form is undefined):
      D_mask[l, h](t) = ‖log σ(M_t[l, h]) − log σ(M_0[l, h])‖_F (one "head" when the mask is shared).
    - mask_step, the largest move of one entry of the logits: S[l, h](t) = max_ij |M_t[l, h] − M_0[l, h]|,
      in the units Adam's step cap bounds (`companion.train.prior_lr_sum`); kept only for a model
      that holds a mask.
    - qk (relative): D_qk[l, h](t) = ‖A_t − A_0‖_F / ‖A_0‖_F with A = W_Q^(h) W_K^(h)ᵀ (d × d).
    - attention: D_attn[l, h](t) = (1/B) Σ_b ‖P_t[b, l, h] − P_0[b, l, h]‖_F, P the (i, j) attention
      weights of probe example b.

    Args:
        probe: fixed inputs (e.g. `task.probe_inputs()`); None skips the attention drift.
        every: record only at steps divisible by `every` (0: at every call, i.e. every evaluation).
        maps: keep the mean attention maps of step 0 and the last record (False: "maps" stays {}; the
            attention drift is still measured). A run keeps them for encoders only (`keeps_maps`).

    `result()` → {"steps": [t…], "mask": {l: [[D per head] per step]}, "qk": {…}, "attention": {…},
    "mask_step": {…} (with a mask only), "maps": {"init": [(i, j) per layer], "final": […]}} with layers as string keys: plain JSON. The
    maps are the probe-averaged, head-averaged attention weights at step 0 and at the last record.
    """

    def __init__(self, probe: Tensor | None = None, *, every: int = 0, maps: bool = True):
        self.probe, self.every, self.keep_maps = probe, every, maps
        self._init: dict | None = None
        self.steps: list[int] = []
        self.mask: dict[str, list[list[float]]] = {}
        self.mask_step: dict[str, list[list[float]]] = {}
        self.qk: dict[str, list[list[float]]] = {}
        self.attention: dict[str, list[list[float]]] = {}
        self.maps: dict[str, list] = {}

    def _state(self, model: nn.Module) -> dict:
        probe = None if self.probe is None else self.probe.to(next(model.parameters()).device)
        return {
            "logits": mask_logits(model),
            "qk": qk_forms(model),
            "attention": {} if probe is None else dict(enumerate(attention_maps(model, probe))),
        }

    def __call__(self, step: int, model: nn.Module, metrics: dict | None = None) -> None:
        if self._init is None:
            self._init = {k: {l: t.clone() for l, t in v.items()} for k, v in self._state(model).items()}
        elif self.every and step % self.every:
            return
        now = self._state(model)
        self.steps.append(step)
        for l, m in now["logits"].items():
            m0 = self._init["logits"][l]
            d = (F.logsigmoid(m) - F.logsigmoid(m0)).flatten(1).norm(dim=1)  # (h,)
            self.mask.setdefault(str(l), []).append(d.tolist())
            self.mask_step.setdefault(str(l), []).append((m - m0).abs().flatten(1).amax(dim=1).tolist())
        for l, a in now["qk"].items():
            a0 = self._init["qk"][l]
            d = (a - a0).flatten(1).norm(dim=1) / a0.flatten(1).norm(dim=1).clamp_min(1e-30)
            self.qk.setdefault(str(l), []).append(d.tolist())
        for l, p in now["attention"].items():
            d = (p - self._init["attention"][l]).flatten(2).norm(dim=2).mean(dim=0)  # (h,)
            self.attention.setdefault(str(l), []).append(d.tolist())
        if now["attention"] and self.keep_maps:
            self.maps = {"init": _mean_maps(self._init["attention"]), "final": _mean_maps(now["attention"])}

    def result(self) -> dict:
        """The recorded drift as JSON-able data (see the class docstring)."""
        out = {"steps": list(self.steps), "mask": self.mask, "qk": self.qk, "attention": self.attention,
               "maps": self.maps}
        return out | ({"mask_step": self.mask_step} if self.mask_step else {})


def _mean_maps(maps: dict[int, Tensor]) -> list:
    """Per layer, the attention map averaged over probe examples and heads, (i, j) rounded to 1e-4."""
    return [[[round(v, 4) for v in row] for row in maps[l].mean(dim=(0, 1)).tolist()] for l in sorted(maps)]


def curve(drift: Mapping, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, the `kind` drift averaged over layers and heads) of a recorded drift (`DriftTracker.result`);
    kind is mask, qk or attention; NaN throughout when the run did not track it."""
    steps, layers = np.asarray(drift["steps"]), drift[kind]
    if not layers:
        return steps, np.full(len(steps), np.nan)
    return steps, np.mean([np.mean(layers[layer], axis=1) for layer in sorted(layers, key=int)], axis=0)


def final(drift: Mapping, kind: str) -> float:
    """The last recorded `kind` drift, averaged over layers and heads (NaN if not tracked)."""
    return float(curve(drift, kind)[1][-1])


def mask_scale(pattern, contrast: float) -> float:
    """‖log σ(M_0)‖_F of one layer's mask at ±contrast on a bool pattern: the scale of relative mask drift."""
    n_open = int(np.asarray(pattern, dtype=bool).sum())
    n_closed = int(np.asarray(pattern).size) - n_open
    log_sig = lambda m: -math.log1p(math.exp(-m))  # noqa: E731
    return math.sqrt(n_open * log_sig(contrast) ** 2 + n_closed * log_sig(-contrast) ** 2)
