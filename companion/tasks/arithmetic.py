"""Low-data arithmetic (arXiv 2608.00418, Figure 2 and Table 8): n-digit addition and multiplication
learned by a causal decoder from a small fraction of all operand pairs.

Reading of "all 3-digit pairs" (the paper's text is not public): the ordered pairs (a, b) with
0 ≤ a, b < 10^n, zero-padded to n digits, so 10^6 pairs for n = 3 and 0.4 % is 4,000 training
pairs (`operands="padded"`); `operands="proper"` uses 10^(n−1) ≤ a, b < 10^n instead (810,000 pairs,
0.4 % = 3,240). One permutation of the universe, drawn from the task-level `data_seed`, fixes the
split: the training set is its first ⌊fraction · |U|⌉ pairs and the test set its last `n_test` pairs,
so the test set is the same for every fraction and a smaller training set is a subset of a larger one.

Sequence (one token per character, fixed length):

    a_digits  op  b_digits  =  c_digits  EOS          e.g. reversed: 321+654=9750<eos> for 123+456

The answer c has n+1 digits for addition and 2n for multiplication, zero-padded. `reverse=True`
writes every number least-significant digit first (McLeish et al. 2024), so each answer digit comes
after the digits it depends on; `reverse=False` writes them most-significant first. The model reads
the sequence without its last token and is trained with next-token cross-entropy on the answer
digits and EOS only (targets elsewhere are `IGNORE`), so the model computes its last layer at those
positions only (`outputs`). The metric is exact match of all answer digits under greedy decoding
("seq_acc"), with the per-digit accuracy under teacher forcing beside it. Greedy decoding needs no
decoding loop to be scored: a causal model's prediction at a position depends only on the tokens
before it, so a greedy decoder that is right at every digit so far sees exactly the teacher's
inputs, and its answer is right exactly when every teacher-forced answer digit is (`generate` still
decodes, for display and for the test of this equivalence).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.masks import DIGIT_VARIANTS, digit_pattern
from companion.tasks import IGNORE, TaskSpec, epoch_batches, model_device, register_task

__all__ = ["ArithmeticTask", "VOCAB", "encode", "decode", "OPERAND_READINGS"]

VOCAB = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "+", "*", "=", "<eos>")
PLUS, TIMES, EQUALS, EOS = 10, 11, 12, 13
OPS = {"add": PLUS, "mul": TIMES}
OPERAND_READINGS = ("padded", "proper")


def _digits(x: Tensor, width: int) -> Tensor:
    """(N,) non-negative ints → (N, width) digits, least significant first."""
    return torch.stack([(x // 10**s) % 10 for s in range(width)], dim=1)


def encode(a: Tensor, b: Tensor, *, op: str, n_digits: int, reverse: bool) -> Tensor:
    """Full token sequences (N, L) of `a op b = c EOS` (see the module docstring)."""
    if op not in OPS:
        raise ValueError(f"unknown operation {op!r}; valid: {', '.join(OPS)}.")
    c = a + b if op == "add" else a * b
    width = n_digits + 1 if op == "add" else 2 * n_digits
    parts = [_digits(a, n_digits), _digits(b, n_digits), _digits(c, width)]
    if not reverse:
        parts = [p.flip(1) for p in parts]
    n = len(a)
    col = lambda tok: torch.full((n, 1), tok, dtype=torch.long)  # noqa: E731
    return torch.cat([parts[0], col(OPS[op]), parts[1], col(EQUALS), parts[2], col(EOS)], dim=1)


def decode(tokens: Tensor) -> list[str]:
    """Token rows → strings ("<eos>" for EOS), for display and tests."""
    return ["".join(VOCAB[t] for t in row.tolist()) for row in tokens]


@register_task("arithmetic")
class ArithmeticTask:
    """a op b for n-digit operands, trained on a fraction of all pairs (module docstring).

    Args:
        op: "add" or "mul".
        n_digits: operand digits (3 in the paper).
        fraction: share of the operand universe used for training (0.004 = 0.4 %).
        n_test: held-out pairs in the test set (the last pairs of the permutation).
        operands: "padded" (0 … 10^n − 1) or "proper" (10^(n−1) … 10^n − 1).
        reverse: numbers written least-significant digit first.
        data_seed: seed of the permutation that fixes the split.
        eval_points: pairs per split for intermediate evaluations (0 = all); the final evaluation
            of a run uses the whole test set and the whole training set.
    """

    def __init__(self, op: str = "add", n_digits: int = 3, fraction: float = 0.004, n_test: int = 5000,
                 operands: str = "padded", reverse: bool = True, data_seed: int = 0, eval_points: int = 1000):
        if op not in OPS:
            raise ValueError(f"unknown operation {op!r}; valid: {', '.join(OPS)}.")
        if operands not in OPERAND_READINGS:
            raise ValueError(f"unknown operand reading {operands!r}; valid: {', '.join(OPERAND_READINGS)}.")
        if not 1 <= n_digits <= 4:
            raise ValueError(f"n_digits must be in 1…4 (the universe has 10^(2n) pairs), got {n_digits}.")
        lo, hi = (0 if operands == "padded" else 10 ** (n_digits - 1)), 10**n_digits
        size = (hi - lo) ** 2
        n_train = round(fraction * size)
        if n_train < 1 or n_train + n_test > size:
            raise ValueError(
                f"fraction {fraction} gives {n_train} training pairs and n_test is {n_test}, but the universe "
                f"has {size} pairs: choose fraction > 0 with n_train + n_test ≤ {size}."
            )
        self.op, self.n_digits, self.reverse, self.fraction = op, n_digits, reverse, fraction
        self.universe = size
        perm = torch.randperm(size, generator=torch.Generator().manual_seed(data_seed))
        pairs = {"train": perm[:n_train], "test": perm[size - n_test:]}
        self.operands = {k: (lo + v // (hi - lo), lo + v % (hi - lo)) for k, v in pairs.items()}
        self.sequences = {k: encode(a, b, op=op, n_digits=n_digits, reverse=reverse)
                          for k, (a, b) in self.operands.items()}
        self.answer_width = n_digits + 1 if op == "add" else 2 * n_digits
        self.answer_start = 2 * n_digits + 2  # position of the first answer digit
        self.seq_len = self.answer_start + self.answer_width  # tokens the model reads (EOS dropped)
        self.n_train, self.eval_points = n_train, eval_points
        self.spec = TaskSpec(inputs="tokens", output="lm", vocab_size=len(VOCAB), seq_len=self.seq_len)
        # the positions the loss reads: the one before each answer digit, and the last (→ EOS)
        self.outputs = slice(self.answer_start - 1, None)

    # --- data -------------------------------------------------------------------------------
    def inputs_targets(self, seqs: Tensor) -> tuple[Tensor, Tensor]:
        """(inputs, targets) of full sequences: targets are the next tokens, `IGNORE` before '='."""
        x, y = seqs[:, :-1], seqs[:, 1:].clone()
        y[:, : self.answer_start - 1] = IGNORE
        return x, y

    def train_batches(self, batch_size: int, generator: torch.Generator):
        return epoch_batches(*self.inputs_targets(self.sequences["train"]), batch_size, generator)

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(output.flatten(0, 1), target.flatten(), ignore_index=IGNORE)

    # --- evaluation -----------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, model: nn.Module, seqs: Tensor, batch: int = 1024) -> Tensor:
        """Greedy answers (N, answer_width): the prompt up to '=' is given, each answer digit is the
        argmax of the model's prediction from the tokens before it (its own earlier digits included).
        Positions after the one being predicted hold a placeholder that the causal mask hides."""
        dev, out = model_device(model), []
        lo, hi = self.answer_start, self.answer_start + self.answer_width
        for i in range(0, len(seqs), batch):
            x = seqs[i:i + batch, : self.seq_len].clone().to(dev)
            x[:, lo:] = 0
            for p in range(lo, hi):
                x[:, p] = model(x[:, :p], outputs=slice(p - 1, p))[:, 0].argmax(-1)
            out.append(x[:, lo:hi].cpu())
        return torch.cat(out)

    @torch.no_grad()
    def teacher_forced(self, model: nn.Module, seqs: Tensor, batch: int = 1024) -> tuple[Tensor, Tensor]:
        """Logits at the loss positions (`outputs`: N, answer_width + 1, vocab) and their targets."""
        dev = model_device(model)
        x, y = self.inputs_targets(seqs)
        logits = torch.cat([model(x[i:i + batch].to(dev), outputs=self.outputs).float().cpu()
                            for i in range(0, len(x), batch)])
        return logits, y[:, self.outputs]

    @torch.no_grad()
    def _split_metrics(self, model: nn.Module, seqs: Tensor) -> dict[str, float]:
        logits, y = self.teacher_forced(model, seqs)
        w = self.answer_width
        digit_ok = logits[:, :w].argmax(-1) == y[:, :w]  # (N, width), in written order
        # greedy decoding is right exactly where every teacher-forced digit is (module docstring)
        exact = digit_ok.all(dim=1)
        by_significance = digit_ok.float().mean(0) if self.reverse else digit_ok.float().mean(0).flip(0)
        return {
            "loss": float(self.loss(logits, y)),
            "digit_acc": float(digit_ok.float().mean()),
            "seq_acc": float(exact.float().mean()),
            **{f"digit{s}_acc": float(v) for s, v in enumerate(by_significance)},
        }

    def evaluate(self, model: nn.Module, *, final: bool = True) -> dict[str, dict[str, float]]:
        """Loss, teacher-forced digit accuracy (overall and per significance, `digit{s}_acc`, s = 0
        for units) and greedy sequence accuracy, on train and test.

        Intermediate evaluations use the first `eval_points` pairs of each split. The final one uses
        the whole test set and the first `len(test)` training pairs (all of them when fewer)."""
        out = {}
        n_test = len(self.sequences["test"])
        for split, seqs in self.sequences.items():
            if self.eval_points and not final:
                seqs = seqs[: self.eval_points]
            elif split == "train":
                seqs = seqs[:n_test]
            out[split] = self._split_metrics(model, seqs)
        return out

    # --- structure ----------------------------------------------------------------------------
    def digit_positions(self) -> tuple[list[int], list[int], list[int]]:
        """Positions of a, b and c digits, each list indexed by significance (0 = units)."""
        n, w = self.n_digits, self.answer_width
        order = (lambda start, k: [start + s for s in range(k)]) if self.reverse else \
            (lambda start, k: [start + k - 1 - s for s in range(k)])
        return order(0, n), order(n + 1, n), order(self.answer_start, w)

    def mask_pattern(self, variant: str, *, cls: bool) -> Tensor:
        """Digit-aligned open pattern (seq_len, seq_len), causal; "default" is "window" for reversed
        numbers and "chain" for numbers written most-significant digit first."""
        if cls:
            raise ValueError("arithmetic tasks are read by a causal decoder, which has no CLS token.")
        if variant == "default":
            variant = "window" if self.reverse else "chain"
        if variant not in DIGIT_VARIANTS:
            raise ValueError(f"unknown mask variant {variant!r} for arithmetic; valid: default, "
                             f"{', '.join(DIGIT_VARIANTS)}.")
        a, b, c = self.digit_positions()
        return digit_pattern(a, b, c, n=self.seq_len, op=self.op, variant=variant)

    def probe_inputs(self) -> Tensor:
        return self.sequences["test"][:32, : self.seq_len]
