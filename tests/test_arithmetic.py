"""Arithmetic tasks: encoding, splits, digit masks, loss mask and greedy exact-match scoring."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from companion.experiments import EXPERIMENTS, load_experiments
from companion.experiments.arithmetic import METHODS
from companion.runs import run
from companion.tasks import IGNORE
from companion.tasks.arithmetic import EOS, EQUALS, VOCAB, ArithmeticTask, decode, encode


def test_encoding_examples_in_both_orders():
    a, b = torch.tensor([123, 7]), torch.tensor([456, 995])
    assert decode(encode(a, b, op="add", n_digits=3, reverse=True)) == ["321+654=9750<eos>", "700+599=2001<eos>"]
    assert decode(encode(a, b, op="add", n_digits=3, reverse=False)) == ["123+456=0579<eos>", "007+995=1002<eos>"]
    assert decode(encode(a, b, op="mul", n_digits=3, reverse=True)) == ["321*654=880650<eos>", "700*599=569600<eos>"]


def _read(digits: torch.Tensor, reverse: bool) -> torch.Tensor:
    d = digits if reverse else digits.flip(1)
    return (d * 10 ** torch.arange(d.shape[1])).sum(1)


@pytest.mark.parametrize("op", ["add", "mul"])
@pytest.mark.parametrize("reverse", [True, False])
def test_encoding_round_trip(op, reverse):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randint(0, 1000, (500,), generator=g), torch.randint(0, 1000, (500,), generator=g)
    seq = encode(a, b, op=op, n_digits=3, reverse=reverse)
    width = 4 if op == "add" else 6
    assert seq.shape == (500, 3 + 1 + 3 + 1 + width + 1)
    assert torch.equal(_read(seq[:, 0:3], reverse), a) and torch.equal(_read(seq[:, 4:7], reverse), b)
    c = _read(seq[:, 8:8 + width], reverse)
    assert torch.equal(c, a + b if op == "add" else a * b)
    assert (seq[:, 7] == EQUALS).all() and (seq[:, -1] == EOS).all()


def test_split_sizes_disjointness_and_nesting():
    small = ArithmeticTask(fraction=0.004, n_test=5000, data_seed=3)
    big = ArithmeticTask(fraction=0.01, n_test=5000, data_seed=3)
    assert small.n_train == 4000 and big.n_train == 10000 and small.universe == 10**6

    def keys(task, split):
        a, b = task.operands[split]
        return set((a * 1000 + b).tolist())

    tr, te = keys(small, "train"), keys(small, "test")
    assert len(tr) == 4000 and len(te) == 5000 and not tr & te
    assert te == keys(big, "test") and tr <= keys(big, "train") and not keys(big, "train") & te
    proper = ArithmeticTask(fraction=0.004, operands="proper", n_test=100)
    a, b = proper.operands["train"]
    assert proper.n_train == 3240 and proper.universe == 810_000 and a.min() >= 100 and b.max() <= 999
    assert keys(ArithmeticTask(fraction=0.004, n_test=10, data_seed=4), "train") != tr


def test_loss_is_on_answer_tokens_only():
    task = ArithmeticTask(fraction=0.001, n_test=10)
    x, y = task.inputs_targets(task.sequences["train"][:5])
    assert x.shape == (5, 12) and task.spec.seq_len == 12
    assert ((y != IGNORE).sum(1) == 5).all()  # four answer digits and EOS
    assert torch.equal(y[:, 7:], task.sequences["train"][:5, 8:]) and (y[:, :7] == IGNORE).all()


def test_addition_mask_opens_aligned_digits_and_carry():
    task = ArithmeticTask(fraction=0.001, n_test=10)
    m = task.mask_pattern("default", cls=False)
    assert m.shape == (12, 12) and m.diagonal().all() and not m.triu(1).any()
    # reversed: a_s at s, b_s at 4 + s, c_s at 8 + s (predicted by the query at 7 + s)
    assert set(m[7].nonzero().flatten().tolist()) == {0, 4, 7}
    assert set(m[8].nonzero().flatten().tolist()) == {0, 1, 4, 5, 8}
    assert set(m[10].nonzero().flatten().tolist()) == {2, 6, 10}  # c_3 is the carry of a_2 + b_2
    assert set(m[5].nonzero().flatten().tolist()) == {1, 5}
    chain = task.mask_pattern("chain", cls=False)
    assert set(chain[9].nonzero().flatten().tolist()) == {0, 1, 2, 4, 5, 6, 9}
    msb = ArithmeticTask(fraction=0.001, n_test=10, reverse=False)
    # most-significant first: c_3 at 8 (predicted at 7) reads every operand digit; c_0 at 11
    assert set(msb.mask_pattern("default", cls=False)[7].nonzero().flatten().tolist()) == {0, 1, 2, 4, 5, 6, 7}
    assert set(msb.mask_pattern("default", cls=False)[10].nonzero().flatten().tolist()) == {2, 6, 10}


def test_multiplication_mask_opens_anti_diagonals():
    task = ArithmeticTask(op="mul", fraction=0.0001, n_test=10)
    m = task.mask_pattern("window", cls=False)
    assert m.shape == (14, 14) and not m.triu(1).any()
    assert set(m[7].nonzero().flatten().tolist()) == {0, 4, 7}  # c_0 = a_0 b_0
    assert set(m[8].nonzero().flatten().tolist()) == {0, 1, 4, 5, 8}  # i + j ∈ {0, 1}
    assert set(m[11].nonzero().flatten().tolist()) == {1, 2, 5, 6, 11}  # i + j ∈ {3, 4}
    with pytest.raises(ValueError, match="no CLS token"):
        task.mask_pattern("window", cls=True)
    with pytest.raises(ValueError, match="valid: default, window, chain"):
        task.mask_pattern("diagonal", cls=False)


class _Oracle(nn.Module):
    """Predicts the true next token of each prompt; answers of `wrong` rows get their units digit + 1."""

    def __init__(self, task: ArithmeticTask, seqs: torch.Tensor, wrong: torch.Tensor):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))
        self.task, self.table = task, {tuple(s[:7].tolist()): s for s in seqs}
        self.wrong = {tuple(s[:7].tolist()) for s in seqs[wrong]}

    def forward(self, x, outputs=None):
        out = torch.full((*x.shape, len(VOCAB)), -1.0)
        for r, row in enumerate(x):
            key = tuple(row[:7].tolist())
            full = self.table[key].clone()
            if key in self.wrong:
                full[8] = (full[8] + 1) % 10
            out[r, torch.arange(x.shape[1]), full[1:x.shape[1] + 1]] = 1.0
        return out if outputs is None else out[:, outputs]


def test_greedy_scoring_counts_exact_matches():
    task = ArithmeticTask(fraction=0.0001, n_test=40)
    seqs = task.sequences["test"]
    wrong = torch.zeros(40, dtype=torch.bool)
    wrong[::4] = True
    model = _Oracle(task, seqs, wrong)
    metrics = task._split_metrics(model, seqs)
    assert metrics["seq_acc"] == pytest.approx(0.75) and metrics["digit_acc"] == pytest.approx(1 - 0.25 / 4)


class _Successor(nn.Module):
    """Next token = (current token + 1) mod 10: greedy decoding must feed its own outputs back."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, x, outputs=None):
        out = torch.nn.functional.one_hot((x + 1) % 10, len(VOCAB)).float()
        return out if outputs is None else out[:, outputs]


def test_greedy_decoding_reads_its_own_previous_digits():
    task = ArithmeticTask(fraction=0.0001, n_test=3)
    answers = task.generate(_Successor(), task.sequences["test"])
    assert answers.tolist() == [[(EQUALS + 1) % 10 + k for k in range(4)]] * 3


class _Causal(nn.Module):
    """A causal model that is right on some answer digits and not others: its prediction after
    position p reads the tokens 0 … p only: the correct next token unless a hash of that prefix is
    a multiple of 5 and the next token an answer digit, then (truth + 1) mod 10. Greedy
    decoding feeds its own digits back, so where it errs the prefixes part from the teacher's."""

    def __init__(self, task: ArithmeticTask, seqs: torch.Tensor):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))
        self.start, self.table = task.answer_start, {tuple(s[:7].tolist()): s for s in seqs}

    def forward(self, x, outputs=None):
        out = torch.zeros((*x.shape, len(VOCAB)))
        for r, row in enumerate(x):
            truth = self.table[tuple(row[:7].tolist())]
            for p in range(x.shape[1]):
                nxt = int(truth[p + 1])
                if p + 1 >= self.start and hash(tuple(row[: p + 1].tolist())) % 5 == 0 and nxt < 10:
                    nxt = (nxt + 1) % 10
                out[r, p, nxt] = 1.0
        return out if outputs is None else out[:, outputs]


@pytest.mark.parametrize("op", ["add", "mul"])
def test_teacher_forced_exact_match_is_greedy_exact_match(op):
    """seq_acc is scored by teacher forcing; it must be what greedy decoding gets, sequence by sequence."""
    task = ArithmeticTask(op=op, fraction=0.0001, n_test=60)
    seqs = task.sequences["test"]
    model = _Causal(task, seqs)
    greedy = (task.generate(model, seqs) == seqs[:, task.answer_start:task.answer_start + task.answer_width]).all(1)
    logits, y = task.teacher_forced(model, seqs)
    forced = (logits[:, :task.answer_width].argmax(-1) == y[:, :task.answer_width]).all(1)
    assert 0.1 < greedy.float().mean() < 0.9  # a mix, so the comparison can fail
    assert torch.equal(forced, greedy)
    assert task._split_metrics(model, seqs)["seq_acc"] == pytest.approx(float(greedy.float().mean()))


def test_bad_parameters_name_the_fix():
    with pytest.raises(ValueError, match="n_train \\+ n_test"):
        ArithmeticTask(fraction=0.999, n_test=5000)
    with pytest.raises(ValueError, match="unknown operation 'sub'"):
        ArithmeticTask(op="sub")
    with pytest.raises(ValueError, match="valid: padded, proper"):
        ArithmeticTask(operands="all")


TINY = ["train.steps=3", "train.eval_every=0", "task.n_test=50", "task.eval_points=20"]


def test_every_method_trains_a_few_steps():
    load_experiments()
    exp = EXPERIMENTS["arith-add"]
    for method in METHODS:
        rec = run(exp.config("ci", method, 0, TINY))
        assert 0.0 <= rec.metrics["test"]["seq_acc"] <= 1.0 and rec.metrics["train"]["loss"] > 0
        assert set(rec.metrics["test"]) >= {"loss", "digit_acc", "seq_acc", "digit0_acc", "digit3_acc"}
