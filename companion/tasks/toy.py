"""Toy task for the engine's smoke experiment: y = x0·x1 on x ∈ {±1}^n, read out from a CLS token.

The 2^n inputs are split once by a task-level seed (`data_seed`) into `n_train` training points and the
rest as test; tokens are bits (x+1)/2 at positions 1..n after the CLS token. Regression with MSE.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.tasks import TaskSpec, epoch_batches, model_device, register_task

__all__ = ["ToyProduct"]


@register_task("toy")
class ToyProduct:
    """y = x0·x1 over all of {±1}^n_bits; `n_train` points train, the others test.

    Mask variants (`mask_pattern`): "default" opens the diagonal, CLS → x0, x1 and x0 ↔ x1 (the
    structure of the target); "diagonal" opens the diagonal only.
    """

    VARIANTS = ("default", "diagonal")

    def __init__(self, n_bits: int = 6, n_train: int = 48, data_seed: int = 0):
        if n_bits < 2:
            raise ValueError(f"the toy task needs n_bits >= 2 (y uses x0 and x1), got {n_bits}.")
        total = 2**n_bits
        if not 0 < n_train < total:
            raise ValueError(f"n_train must be in [1, {total - 1}] for n_bits={n_bits}, got {n_train}.")
        x = torch.tensor(list(itertools.product((-1.0, 1.0), repeat=n_bits)))  # (2^n, n)
        order = torch.randperm(total, generator=torch.Generator().manual_seed(data_seed))
        tokens = ((x + 1) / 2).long()
        y = x[:, 0] * x[:, 1]
        self.splits = {
            "train": (tokens[order[:n_train]], y[order[:n_train]]),
            "test": (tokens[order[n_train:]], y[order[n_train:]]),
        }
        self.n_bits, self.n_train = n_bits, n_train
        self.spec = TaskSpec(inputs="tokens", output="regression", vocab_size=2, seq_len=n_bits, n_outputs=1)

    def train_batches(self, batch_size: int, generator: torch.Generator):
        return epoch_batches(*self.splits["train"], batch_size, generator)

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(output.squeeze(-1), target)

    def evaluate(self, model: nn.Module, *, final: bool = True) -> dict[str, dict[str, float]]:
        """mse and sign accuracy on each split."""
        dev, out = model_device(model), {}
        for split, (x, y) in self.splits.items():
            pred = model(x.to(dev)).squeeze(-1).cpu()
            out[split] = {
                "mse": float(F.mse_loss(pred, y)),
                "acc": float((torch.sign(pred) == y).float().mean()),
            }
        return out

    def mask_pattern(self, variant: str, *, cls: bool) -> Tensor:
        """Bool (n, n) open pattern over [CLS], x0, …, x_{n-1} (rows = queries)."""
        if variant not in self.VARIANTS:
            raise ValueError(
                f"unknown mask variant {variant!r} for task 'toy'; valid: {', '.join(self.VARIANTS)}."
            )
        off = 1 if cls else 0
        n = self.n_bits + off
        pattern = torch.eye(n, dtype=torch.bool)
        if variant == "default":
            a, b = off, off + 1  # positions of x0, x1
            pattern[a, b] = pattern[b, a] = True
            if cls:
                pattern[0, a] = pattern[0, b] = True
        return pattern

    def probe_inputs(self) -> Tensor:
        return self.splits["test"][0][:16]
