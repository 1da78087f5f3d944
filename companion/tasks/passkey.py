"""Passkey retrieval (GOAT, arXiv 2601.15380, Figure 3a/3c at small scale).

A sequence of `seq_len` + 1 tokens: BOS, random letters a–z (the filler) with a key of `digits`
random digits placed once at a uniform depth in [0, `max_depth`] of the filler, then the prompt
token "=" and the key again. The model reads all but the last token; the loss is on the key's copy
only (span-only loss: the filler is noise, it carries nothing to learn). Metrics, teacher-forced:
span-token accuracy (the share of key digits predicted) and strict accuracy (every digit right;
with teacher forcing this equals greedy decoding of the whole key, since a greedy decoder that is
right at every step sees exactly the teacher's inputs).

`loss="all"` scores every next token instead (the same sequences read as a language model): the filler
and the key's first copy are noise, so most queries have nothing in the context to read, and the BOS at
key 0 is the same token in every sequence. Chapter 7 reads GOAT's attention sink on it (the sink
control of `companion.experiments.sink_control`); the metrics stay those of the key's copy.

Following the source's synthetic script as the reference notes describe it (letters filler, digits
key, uniform depth up to 0.8, span-token accuracy), with a shorter key (5 digits by default, as the
notes suggest for models this small) and training length L = `seq_len`. `accuracy_at(model, length)`
reads fresh sequences of any length, so retrieval is measured beyond the training window; each
length has its own fixed test set (seeded by `data_seed` and the length).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.priors import interpolated
from companion.readouts import option_int, parse_ints, register_readout, split_arg
from companion.tasks import IGNORE, TaskSpec, epoch_batches, model_device, register_task

__all__ = ["PasskeyTask", "sample_passkey", "passkey_lengths", "LETTERS", "DIGIT0", "BOS", "PROMPT", "VOCAB", "LOSSES"]

LETTERS, DIGIT0 = 26, 26          # ids 0–25: a–z; 26–35: digits 0–9
BOS, PROMPT, VOCAB = 36, 37, 38   # begin-of-sequence, the "=" prompt, vocabulary size
_SYMBOLS = "abcdefghijklmnopqrstuvwxyz0123456789^="
LOSSES = ("key", "all")  # what the loss scores: the key's copy only, or every next token


def sample_passkey(n: int, length: int, digits: int, max_depth: float, generator: torch.Generator):
    """n sequences (n, length + 1) and the start index of each key (n,); see the module docstring."""
    filler = length - 1 - 2 * digits  # BOS + filler + key + prompt + key = length + 1
    if filler < 1:
        raise ValueError(f"a passkey sequence of {length} tokens cannot hold BOS, two copies of a "
                         f"{digits}-digit key and the prompt; use length ≥ {2 * digits + 2}.")
    x = torch.randint(0, LETTERS, (n, length + 1), generator=generator)
    key = DIGIT0 + torch.randint(0, 10, (n, digits), generator=generator)
    depth = torch.rand(n, generator=generator) * max_depth
    start = 1 + (depth * filler).long().clamp_max(filler)  # key starts after `start − 1` filler letters
    cols = start[:, None] + torch.arange(digits)
    x[:, 0] = BOS
    x.scatter_(1, cols, key)
    x[:, length - digits] = PROMPT
    x[:, length - digits + 1 :] = key
    return x, start


@register_task("passkey")
class PasskeyTask:
    """Passkey retrieval as next-token prediction (module docstring).

    Args:
        seq_len: tokens the model reads in training (L). digits: key length. max_depth: largest key
            depth as a fraction of the filler. n_train: training sequences (a fixed set, reshuffled
            each epoch). n_test: test sequences per length. data_seed: task-level seed. loss: "key" (the
            key's copy only) or "all" (every next token; module docstring).
    """

    def __init__(self, seq_len: int = 64, digits: int = 5, max_depth: float = 0.8, n_train: int = 16384,
                 n_test: int = 256, data_seed: int = 0, loss: str = "key"):
        if digits < 1 or n_train < 1 or n_test < 1:
            raise ValueError("passkey needs digits ≥ 1 and at least one training and one test sequence.")
        if not 0 <= max_depth <= 1:
            raise ValueError(f"max_depth is a fraction of the filler in [0, 1], got {max_depth}.")
        if loss not in LOSSES:
            raise ValueError(f"passkey's loss scores {' or '.join(map(repr, LOSSES))} tokens, not {loss!r}: \"key\" "
                             "for retrieval (the key's copy), \"all\" for the sequences read as a language model.")
        self.seq_len, self.digits, self.max_depth, self.n_test, self.data_seed = seq_len, digits, max_depth, n_test, data_seed
        self.key = slice(-digits, None)  # the key's copy: what the metrics read
        x, _ = sample_passkey(n_train, seq_len, digits, max_depth, torch.Generator().manual_seed(data_seed))
        self.train = (x[:, :-1], self._targets(x) if loss == "key" else x[:, 1:].clone())
        self.n_train = n_train
        self.outputs = self.key if loss == "key" else None  # the positions the loss reads (None: all)
        self.spec = TaskSpec(inputs="tokens", output="lm", vocab_size=VOCAB, seq_len=seq_len)

    def _targets(self, x: Tensor) -> Tensor:
        y = torch.full_like(x[:, 1:], IGNORE)
        y[:, self.key] = x[:, self.key]
        return y

    @staticmethod
    def decode(ids: Tensor) -> str:
        return "".join(_SYMBOLS[i] for i in ids.tolist())

    def test_set(self, length: int) -> tuple[Tensor, Tensor]:
        """The fixed test sequences (n_test, length + 1) of `length` and their key starts."""
        g = torch.Generator().manual_seed(1_000_003 * (self.data_seed + 1) + length)
        return sample_passkey(self.n_test, length, self.digits, self.max_depth, g)

    def train_batches(self, batch_size: int, generator: torch.Generator):
        return epoch_batches(*self.train, batch_size, generator)

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(output.flatten(0, 1), target.flatten(), ignore_index=IGNORE)

    @torch.no_grad()
    def accuracy_at(self, model: nn.Module, length: int, *, batch: int = 64) -> dict:
        """Teacher-forced retrieval on the `length` test set: {"span_acc", "strict_acc", "ce", and per
        sequence "correct" (n, digits) bool and "depth" (n,): the filler letters before the key as a
        share of all filler letters (0 = the key opens the sequence, 1 = it closes the filler)}."""
        x, start = self.test_set(length)
        dev, hits, ces = model_device(model), [], []
        for b in range(0, len(x), batch):
            xb = x[b : b + batch]
            logits = model(xb[:, :-1].to(dev), outputs=self.key).float().cpu()
            truth = xb[:, -self.digits :]
            hits.append(logits.argmax(-1) == truth)
            ces.append(F.cross_entropy(logits.transpose(1, 2), truth, reduction="none"))
        correct = torch.cat(hits)
        return {"span_acc": float(correct.float().mean()), "strict_acc": float(correct.all(1).float().mean()),
                "ce": float(torch.cat(ces).mean()), "correct": correct,
                "depth": (start - 1).double() / (length - 1 - 2 * self.digits)}

    @torch.no_grad()
    def evaluate(self, model: nn.Module, *, final: bool = True) -> dict[str, dict[str, float]]:
        """Retrieval at the training length."""
        r = self.accuracy_at(model, self.seq_len)
        return {"test": {k: r[k] for k in ("span_acc", "strict_acc", "ce")}}

    def mask_pattern(self, variant: str, *, cls: bool) -> Tensor:
        raise ValueError("passkey has no mask pattern: its priors are positional (GOAT, ALiBi, RoPE, sinusoidal).")

    def probe_inputs(self) -> Tensor:
        return self.probe_sequences(16)

    def probe_sequences(self, n: int) -> Tensor:
        """The first n test sequences at the training length, inputs only (the last token dropped)."""
        return self.test_set(self.seq_len)[0][:n, :-1]


@register_readout("passkey_lengths")
def passkey_lengths(model: nn.Module, task, arg: str) -> dict:
    """Retrieval at each length, read beyond the training length without further training (the
    length's fixed test set, `PasskeyTask.accuracy_at`); arg "n1,n2,…[;bins=B][;pi]" (B default 5;
    `pi`: position interpolation to the training length, RoPE).

    Returns {"depth_edges": the B + 1 edges of equal bins of key depth over [0, max_depth],
    "lengths": {str(n): {"span_acc", "strict_acc", "ce", "digits": correct key digits per depth bin,
    "keys": test sequences per depth bin}}}: bin counts, so that runs pool into Figure 3c's grid."""
    head, opts = split_arg(arg, "readout 'passkey_lengths'", ("bins", "pi"))
    lengths, bins = parse_ints(head, "readout 'passkey_lengths' (lengths)"), option_int(opts, "bins", 5, "passkey_lengths")
    if not isinstance(task, PasskeyTask):
        raise ValueError(f"readout 'passkey_lengths' needs a passkey task, not {type(task).__name__}.")
    edges = np.linspace(0, task.max_depth, bins + 1)
    out = {}
    for n in lengths:
        if "pi" in opts:
            with interpolated(model, task.seq_len):
                r = task.accuracy_at(model, n)
        else:
            r = task.accuracy_at(model, n)
        b = np.clip(np.searchsorted(edges, r["depth"].numpy(), side="right") - 1, 0, bins - 1)
        digits = np.zeros(bins, dtype=np.int64)
        np.add.at(digits, b, r["correct"].sum(1).numpy())
        out[str(n)] = {"span_acc": r["span_acc"], "strict_acc": r["strict_acc"], "ce": r["ce"], "digits": digits,
                       "keys": np.bincount(b, minlength=bins)}
    return {"depth_edges": edges, "lengths": out}
