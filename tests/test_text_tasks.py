"""Character-corpus LM and passkey retrieval tasks (Chapter 9)."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
import torch

from companion.tasks import IGNORE
from companion.tasks.passkey import BOS, DIGIT0, LETTERS, PROMPT, VOCAB, PasskeyTask, sample_passkey
from companion.tasks.text import EOT, SEPARATOR, UNK, CharCorpusTask, load_documents


def _corpus(tmp_path, docs, kind="txt"):
    if kind == "txt":
        path = tmp_path / "stories.txt"
        path.write_text(f"\n{SEPARATOR}\n".join(docs), encoding="utf-8")
    else:
        path = tmp_path / "stories.jsonl"
        path.write_text("\n".join(json.dumps({"text": d}) for d in docs) + "\n", encoding="utf-8")
    return str(path)


STORIES = [f"Once upon a time there was a cat number {i}. It liked milk and naps." for i in range(40)]


@pytest.mark.parametrize("kind", ["txt", "jsonl"])
def test_a_tinystories_style_file_is_read_as_documents(tmp_path, kind):
    assert load_documents(_corpus(tmp_path, STORIES, kind)) == STORIES


def test_streams_split_whole_documents_and_decode_back(tmp_path):
    task = CharCorpusTask(corpus=_corpus(tmp_path, STORIES), seq_len=16, test_fraction=0.25)
    train, test = task.streams["train"], task.streams["test"]
    assert (train == EOT).sum() + (test == EOT).sum() == len(STORIES)  # one EOT per document, none split
    assert train[-1] == EOT and test[-1] == EOT
    texts = [t for t in task.decode(torch.cat([train, test])).split("\n") if t]
    assert sorted(texts) == sorted(STORIES)
    assert 0.2 < len(test) / (len(train) + len(test)) < 0.35
    assert task.spec.vocab_size == len(set("".join(STORIES))) + 2


def test_unseen_test_characters_become_unk(tmp_path):
    docs = ["aaaa bbbb"] * 9 + ["zzzz"]  # the shuffle may put "zzzz" on either side; find it
    task = CharCorpusTask(corpus=_corpus(tmp_path, docs), seq_len=3, test_fraction=0.1, data_seed=1)
    if "z" not in task.chars:
        assert (task.streams["test"] == UNK).sum() == sum(d.count("z") for d in docs)


def test_windows_tile_the_test_split_and_ce_matches_a_direct_computation(tmp_path):
    task = CharCorpusTask(corpus=_corpus(tmp_path, STORIES), seq_len=8)
    w = task.windows(8)
    s = task.streams["test"]
    assert w.shape == ((len(s) - 1) // 8, 9)
    assert torch.equal(w[1], s[8:17]) and torch.equal(w[0, -1], w[1, 0])  # windows share one boundary token

    torch.manual_seed(0)
    table = torch.randn(task.spec.vocab_size, task.spec.vocab_size)

    class Bigram(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return table[x]

    r = task.ce_at(Bigram(), 8, batch_tokens=24)
    direct = torch.nn.functional.cross_entropy(table[w[:, :-1]].flatten(0, 1), w[:, 1:].flatten())
    assert r["ce"] == pytest.approx(float(direct), rel=1e-6)
    assert r["ppl"] == pytest.approx(math.exp(r["ce"])) and r["per_position"].shape == (8,)
    # a bigram model has no use for context: its CE per position is the same at any window length
    assert task.ce_at(Bigram(), 4)["per_position"].mean() == pytest.approx(
        float(torch.nn.functional.cross_entropy(table[task.windows(4)[:, :-1]].flatten(0, 1),
                                                task.windows(4)[:, 1:].flatten())), rel=1e-6)


def test_training_windows_come_from_the_train_split_in_a_seeded_order(tmp_path):
    task = CharCorpusTask(corpus=_corpus(tmp_path, STORIES), seq_len=8, n_train=20)
    a = list(task.train_batches(8, torch.Generator().manual_seed(3)))
    b = list(task.train_batches(8, torch.Generator().manual_seed(3)))
    assert [len(x) for x, _ in a] == [8, 8, 4]
    assert all(torch.equal(x1, x2) for (x1, _), (x2, _) in zip(a, b))
    x, y = a[0]
    assert torch.equal(x[:, 1:], y[:, :-1])
    train = "".join(task.decode(task.streams["train"]))
    assert task.decode(torch.cat([x[0], y[0, -1:]])) in train


def test_the_offline_corpus_loads_and_bad_corpora_are_named(tmp_path):
    task = CharCorpusTask(seq_len=32)
    assert task.spec.vocab_size > 60 and len(task.streams["test"]) > 10_000
    with pytest.raises(ValueError, match="neither 'pydoc' nor an existing file"):
        CharCorpusTask(corpus=str(tmp_path / "missing.txt"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"body": "no text"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2 is not a JSON object with a 'text' field"):
        CharCorpusTask(corpus=str(bad))
    with pytest.raises(ValueError, match="fewer than one window"):
        CharCorpusTask(corpus=_corpus(tmp_path, ["ab", "cd", "ef"]), seq_len=64)


def test_passkey_sequences_hold_one_key_and_its_copy():
    x, start = sample_passkey(200, 40, 5, 0.8, torch.Generator().manual_seed(0))
    assert x.shape == (200, 41) and (x[:, 0] == BOS).all() and (x[:, 35] == PROMPT).all()
    for row, s in zip(x, start.tolist()):
        key = row[s : s + 5]
        assert ((key >= DIGIT0) & (key < DIGIT0 + 10)).all() and torch.equal(row[-5:], key)
        body = torch.cat([row[1:s], row[s + 5 : 35]])
        assert (body < LETTERS).all()  # letters only, apart from the key
    filler = 40 - 1 - 10
    assert start.min() >= 1 and start.max() <= 1 + int(0.8 * filler)
    with pytest.raises(ValueError, match="use length ≥ 12"):
        sample_passkey(1, 11, 5, 0.8, torch.Generator())


def test_passkey_loss_is_on_the_key_copy_only_and_scoring_is_exact():
    task = PasskeyTask(seq_len=32, digits=4, n_train=8, n_test=10)
    x, y = next(iter(task.train_batches(8, torch.Generator().manual_seed(0))))
    assert (y[:, :-4] == IGNORE).all() and ((y[:, -4:] >= DIGIT0) & (y[:, -4:] < DIGIT0 + 10)).all()
    assert (x[:, -4] == PROMPT).all()
    test, _ = task.test_set(48)
    assert torch.equal(test, task.test_set(48)[0]) and not torch.equal(test[:, :33], task.test_set(32)[0])

    class Oracle(torch.nn.Module):
        """Looks the answer up (cheating), wrong on the 2nd digit of every other test sequence."""

        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.zeros(1))

        def forward(self, inp, outputs=None):
            n, length = inp.shape
            out = torch.zeros(n, length, VOCAB)
            full = {tuple(r[:-1].tolist()): (n, r) for n, r in enumerate(test)}
            for b, row in enumerate(inp):
                index, seq = full[tuple(row.tolist())]
                truth = seq[-4:]
                out[b, torch.arange(length - 4, length), truth] = 10.0
                if index % 2 == 0:
                    out[b, length - 3, truth[1]] = -10.0
            return out if outputs is None else out[:, outputs]

    r = task.accuracy_at(Oracle(), 48, batch=3)
    assert r["span_acc"] == pytest.approx(1 - 0.5 / 4) and r["strict_acc"] == pytest.approx(0.5)
    assert r["correct"].shape == (10, 4) and ((r["depth"] >= 0) & (r["depth"] <= 0.8)).all()


def test_passkey_read_as_a_language_model_scores_every_next_token_on_the_same_sequences():
    """loss="all" (the sink control of Chapter 7): the same training sequences, every next token a target (none
    ignored), the whole output read by the loss; the metrics still read the key's copy; BOS is key 0 of every
    probe sequence; an unknown loss names the two there are."""
    key, lm = (PasskeyTask(seq_len=32, digits=4, n_train=8, n_test=10, loss=loss) for loss in ("key", "all"))
    assert torch.equal(key.train[0], lm.train[0]) and key.outputs == slice(-4, None) and lm.outputs is None
    full = torch.cat([lm.train[0], lm.train[1][:, -1:]], 1)  # inputs and the last target: the sequences themselves
    assert torch.equal(lm.train[1], full[:, 1:]) and (lm.train[1] != IGNORE).all()
    assert torch.equal(key.train[1][:, -4:], lm.train[1][:, -4:]) and (key.train[1][:, :-4] == IGNORE).all()
    probe = lm.probe_sequences(6)
    assert torch.equal(probe, lm.test_set(32)[0][:6, :-1]) and (probe[:, 0] == BOS).all()
    assert torch.equal(lm.probe_inputs(), lm.probe_sequences(16)) and torch.equal(key.probe_inputs(), lm.probe_inputs())

    class Reads:  # what a model is asked for: only the key's copy, whatever the loss
        asked = []

        def __call__(self, inp, outputs=None):
            self.asked.append(outputs)
            return torch.zeros(inp.shape[0], 4, VOCAB)

        def parameters(self):
            return iter([torch.zeros(1)])

    lm.accuracy_at(Reads(), 32)
    assert Reads.asked and all(a == slice(-4, None) for a in Reads.asked)
    with pytest.raises(ValueError, match="not 'every'.*\"all\" for the sequences read as a language model"):
        PasskeyTask(seq_len=32, loss="every")


def test_the_pydoc_corpus_is_the_same_text_on_every_python():
    """The offline corpus comes from the package's snapshot, not from the running interpreter, whose
    `pydoc_data.topics` changes between Python releases (3.13's differs from 3.11's)."""
    import platform

    from companion.tasks.text import PYDOC_SNAPSHOT, load_documents, pydoc_topics

    topics = pydoc_topics()
    assert len(topics) == 79 and sum(map(len, topics.values())) == 464_970
    assert hashlib.sha256(PYDOC_SNAPSHOT.read_bytes()).hexdigest() == \
        "835ecdd624fcc3ce32884d1832013ddad1b9313a0937008890d248b708979f24"
    assert load_documents("pydoc") == [t.strip() for _, t in sorted(topics.items()) if t.strip()]
    from pydoc_data.topics import topics as running

    if platform.python_version() == "3.11.7":  # the release the snapshot was taken from
        assert running == topics
    elif platform.python_version_tuple()[:2] == ("3", "13"):
        assert running != topics  # why the snapshot exists
