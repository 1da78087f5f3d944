"""Priors on attention: modules whose `forward(i, j)` returns an additive bias (h, i, j).

- `LearnableMask` (arXiv 2608.00418): bias = log σ(M), M initialised from a boolean open pattern
  (open → +10, closed → −10 by default), trainable or fixed, per head or shared.
- `sinusoidal_positions`: the absolute encoding of Vaswani et al. (2017), added to embeddings
  rather than to scores; kept here with the other ways of telling attention where a token sits.
- `GoatPrior` (arXiv 2601.15380, in `companion.goat`): spectral relative prior κ_h(i − j) plus a
  key-only sink u_h(j), as a bias (h, i, j) or folded into SDPA lanes.
- `ALiBi` and `RotaryEmbedding` (in `companion.positions`): the fixed positional baselines, a
  linear distance bias (h, i, j) and a rotation of q and k.

Notable choices: log σ(M) ≤ 0, so a mask can only down-weight keys; zero initialisation gives a
constant shift −log 2 that softmax ignores, so it equals no mask in the forward pass while still
receiving gradient σ(0) = ½.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["LearnableMask", "sinusoidal_positions", "GoatPrior", "ALiBi", "RotaryEmbedding"]


class LearnableMask(nn.Module):
    """Additive mask log σ(M) with M of shape (h, n, n); h = 1 means shared by all heads.

    Args:
        logits: initial M, shape (n, n) or (h, n, n).
        trainable: M is an `nn.Parameter` if True, else a buffer (the "fixed mask").
    """

    def __init__(self, logits: Tensor, *, trainable: bool = True):
        super().__init__()
        if logits.dim() == 2:
            logits = logits[None]
        if logits.dim() != 3 or logits.shape[-1] != logits.shape[-2]:
            raise ValueError(
                f"mask logits have shape {tuple(logits.shape)}; expected (n, n) or (heads, n, n)."
            )
        if not torch.isfinite(logits).all():
            raise ValueError(
                "mask logits must be finite: log σ(M) already maps M = −10 to a near-closed entry; "
                "use a large negative finite value instead of -inf."
            )
        logits = logits.detach().clone().float()
        self.trainable = trainable
        if trainable:
            self.logits = nn.Parameter(logits)
        else:
            self.register_buffer("logits", logits)

    @classmethod
    def from_pattern(
        cls,
        open_: Tensor,
        *,
        heads: int | None = None,
        open_value: float = 10.0,
        closed_value: float = -10.0,
        trainable: bool = True,
    ) -> "LearnableMask":
        """Mask from a boolean pattern (True = open), (n, n) or (h, n, n).

        `heads` repeats a 2-D pattern into independent per-head copies; None shares one M.
        """
        if open_.dtype != torch.bool:
            raise ValueError(f"the open pattern must be a bool tensor, got {open_.dtype}.")
        m = torch.where(open_, torch.tensor(open_value), torch.tensor(closed_value)).float()
        if heads is not None:
            if m.dim() != 2:
                raise ValueError("`heads` repeats a 2-D pattern; pass an (n, n) pattern with it.")
            m = m.expand(heads, -1, -1)
        return cls(m, trainable=trainable)

    @classmethod
    def zeros(cls, n: int, *, heads: int | None = None, trainable: bool = True) -> "LearnableMask":
        """The all-zero mask of the ablation: log σ(0) = −log 2 everywhere."""
        return cls(torch.zeros(heads or 1, n, n), trainable=trainable)

    @property
    def size(self) -> int:
        return self.logits.shape[-1]

    @property
    def heads(self) -> int:
        return self.logits.shape[0]

    def forward(self, i: int, j: int | None = None) -> Tensor:
        """Bias log σ(M[:, :i, :j]) of shape (h, i, j); sequences shorter than n use a slice."""
        j = i if j is None else j
        if i > self.size or j > self.size:
            raise ValueError(
                f"the mask covers {self.size} positions but the sequence needs ({i}, {j}); "
                "build the mask for the longest sequence the model will see."
            )
        return F.logsigmoid(self.logits[:, :i, :j])

    def extra_repr(self) -> str:
        return f"heads={self.heads}, n={self.size}, trainable={self.trainable}"


def sinusoidal_positions(n: int, d: int, *, base: float = 10000.0, dtype=torch.float32) -> Tensor:
    """PE[p, 2r] = sin(p / base^(2r/d)), PE[p, 2r+1] = cos(p / base^(2r/d)); shape (n, d)."""
    if d % 2:
        raise ValueError(f"sinusoidal positions pair sin and cos, so the width must be even (got {d}).")
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe.to(dtype)


# Re-exports resolved on first use: companion.positions imports this module (for
# sinusoidal_positions), so importing it back here at load time would be circular.
_ELSEWHERE = {"GoatPrior": "companion.goat", "ALiBi": "companion.positions",
              "RotaryEmbedding": "companion.positions"}


def __getattr__(name):
    if name in _ELSEWHERE:
        import importlib

        return getattr(importlib.import_module(_ELSEWHERE[name]), name)
    raise AttributeError(f"module 'companion.priors' has no attribute {name!r}")
