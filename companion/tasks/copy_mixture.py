"""Copy-mixture (GOAT, arXiv 2601.15380, Figure 1): a language whose every token is a mixture of a
global copy (the first token), a local copy (the token `lag` places back) and noise.

x_0 ~ U(V); for t ≥ 1, independently: x_t = x_0 with probability `p_global`, x_t = x_{t−lag} with
probability `p_local` (only when t ≥ lag; before that this share goes to noise), and otherwise a
uniform draw from the V symbols. The source gives only this description; V = 32, T = 64 and lag 2
follow the pilot in the reference notes. With lag 1 the local copy is the query's own token, which
the residual stream already carries, so attention would have nothing local to learn; lag 2 makes
the query at i need the key at i − 1.

A causal decoder reads x_0 … x_{T−2} and predicts x_1 … x_{T−1} (cross-entropy on every position).
Because the process is known, the Bayes-optimal predictive distribution of each token given its past
is known exactly:

    P(x_t = v | x_<t) = p_global·[v = x_0] + p_local·[v = x_{t−lag}]·[t ≥ lag] + p_noise(t) / V,

and `evaluate` reports the model's cross-entropy beside the Bayes-optimal one on the same test
sequences (the gap is what is left to learn).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.tasks import TaskSpec, epoch_batches, model_device, register_task

__all__ = ["CopyMixtureTask", "sample_copy_mixture", "bayes_log_probs"]


def sample_copy_mixture(n: int, length: int, vocab: int, p_global: float, p_local: float, lag: int,
                        generator: torch.Generator) -> Tensor:
    """n sequences (n, length) of the copy-mixture process, drawn from `generator`."""
    x = torch.empty(n, length, dtype=torch.long)
    x[:, 0] = torch.randint(0, vocab, (n,), generator=generator)
    u = torch.rand(n, length, generator=generator)
    noise = torch.randint(0, vocab, (n, length), generator=generator)
    for t in range(1, length):
        local = x[:, t - lag] if t >= lag else noise[:, t]
        x[:, t] = torch.where(u[:, t] < p_global, x[:, 0],
                              torch.where((u[:, t] < p_global + p_local) & (t >= lag), local, noise[:, t]))
    return x


def bayes_log_probs(x: Tensor, vocab: int, p_global: float, p_local: float, lag: int) -> Tensor:
    """log P(x_t | x_<t) under the true process for t = 1 … T−1: shape (n, T−1)."""
    n, length = x.shape
    t = torch.arange(1, length)
    target = x[:, 1:]
    has_local = (t >= lag).to(torch.float64)
    p = p_global * (target == x[:, :1]).double()
    local_src = x[:, (t - lag).clamp_min(0)]
    p = p + p_local * has_local * (target == local_src).double()
    p = p + (1 - p_global - p_local * has_local) / vocab
    return p.log()


@register_task("copy-mixture")
class CopyMixtureTask:
    """Next-token prediction on the copy-mixture process (module docstring).

    Args:
        vocab: symbols V. seq_len: tokens per sequence T (the model reads T − 1).
        p_global, p_local: copy probabilities (noise takes the rest). lag: distance of the local copy.
        n_train: training sequences (a fixed set, reshuffled every epoch). n_test: test sequences.
        data_seed: seed of the sequences (task-level, independent of the run seed).
    """

    def __init__(self, vocab: int = 32, seq_len: int = 64, p_global: float = 0.3, p_local: float = 0.4,
                 lag: int = 2, n_train: int = 16384, n_test: int = 512, data_seed: int = 0):
        if not (0 <= p_global and 0 <= p_local and p_global + p_local <= 1):
            raise ValueError(f"p_global={p_global} and p_local={p_local} must be ≥ 0 with a sum ≤ 1.")
        if not 1 <= lag < seq_len - 1:
            raise ValueError(f"lag must be in [1, seq_len − 2] = [1, {seq_len - 2}], got {lag}.")
        if vocab < 2 or n_train < 1 or n_test < 1:
            raise ValueError("copy-mixture needs vocab ≥ 2 and at least one training and one test sequence.")
        self.vocab, self.p_global, self.p_local, self.lag = vocab, p_global, p_local, lag
        g = torch.Generator().manual_seed(data_seed)
        args = (seq_len, vocab, p_global, p_local, lag, g)
        self.sequences = {"train": sample_copy_mixture(n_train, *args), "test": sample_copy_mixture(n_test, *args)}
        self.n_train = n_train
        self.spec = TaskSpec(inputs="tokens", output="lm", vocab_size=vocab, seq_len=seq_len - 1)

    def train_batches(self, batch_size: int, generator: torch.Generator):
        x = self.sequences["train"]
        return epoch_batches(x[:, :-1], x[:, 1:], batch_size, generator)

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(output.flatten(0, 1), target.flatten())

    def bayes_ce(self, split: str = "test") -> float:
        """Mean Bayes-optimal cross-entropy (nats per token) on a split's sequences."""
        x = self.sequences[split]
        return float(-bayes_log_probs(x, self.vocab, self.p_global, self.p_local, self.lag).mean())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, *, final: bool = True) -> dict[str, dict[str, float]]:
        """Test cross-entropy (nats per token), the Bayes-optimal value, their gap and next-token accuracy."""
        x = self.sequences["test"]
        logits = model(x[:, :-1].to(model_device(model))).float().cpu()
        ce = float(self.loss(logits, x[:, 1:]))
        bayes = self.bayes_ce()
        acc = float((logits.argmax(-1) == x[:, 1:]).float().mean())
        return {"test": {"ce": ce, "bayes_ce": bayes, "gap": ce - bayes, "acc": acc}}

    def mask_pattern(self, variant: str, *, cls: bool) -> Tensor:
        """Causal "global + local" pattern (every query reads key 0, itself and the key `lag − 1` back)."""
        if cls:
            raise ValueError("copy-mixture is read by a causal decoder, which has no CLS token.")
        if variant not in ("default", "copy"):
            raise ValueError(f"unknown mask variant {variant!r} for copy-mixture; valid: default, copy.")
        n = self.spec.seq_len
        p = torch.eye(n, dtype=torch.bool)
        p[:, 0] = True
        idx = torch.arange(self.lag - 1, n)
        p[idx, idx - (self.lag - 1)] = True
        return p & torch.ones(n, n, dtype=torch.bool).tril()

    def probe_inputs(self) -> Tensor:
        return self.probe_sequences(16)

    def probe_sequences(self, n: int) -> Tensor:
        """The first n test sequences, inputs only (the last token dropped)."""
        return self.sequences["test"][:n, :-1]

    @property
    def uniform_ce(self) -> float:
        """Cross-entropy of a model that knows nothing: log V."""
        return math.log(self.vocab)
