"""Character-level language modelling on a text corpus (GOAT, arXiv 2601.15380, Figure 2a/2b at small scale).

Corpora:
- "pydoc" (offline default): the documentation topics that ship with CPython (`pydoc_data.topics`,
  about 465,000 characters of English prose with code examples, one document per topic), as CPython
  3.11.7 ships them, from a snapshot in the package (`tasks/data/pydoc-topics.json.gz`, PSF License):
  every Python release rewrites some topics, so reading the running interpreter's own would make the
  corpus, and every record trained on it, depend on the Python version. It stands in for C4 (the
  source's corpus) and TinyStories, neither of which can be downloaded here.
- a path to a `.txt` file whose documents are separated by `<|endoftext|>` (TinyStories' release
  format; a file without the separator is one document), or to a `.jsonl` file with one
  {"text": …} object per line.
- "tinystories" or "tinystories:ROOT": TinyStories (Eldan & Li 2023) as its Hugging Face repository
  `roneneldan/TinyStories` ships it, `TinyStoriesV2-GPT4-train.txt` / `-valid.txt` (or the older
  `TinyStories-train.txt` / `-valid.txt`), stories separated by `<|endoftext|>`, in ROOT or in a
  `tinystories/` folder of the data roots (`companion.paths.data_roots`). Its own train / valid
  split is kept (valid is the test split); `max_documents` caps how many stories are read from each
  file (the training file holds about 2.7 million), reading only as far as needed.

Tokens are characters: id 0 ends a document (EOT), id 1 stands for a character never seen in the
training split (UNK), then the training split's characters in code-point order. The documents are
shuffled once (`data_seed`) and the last `test_fraction` of the characters, by whole documents,
is the test split; both splits are one stream with EOT between documents.

Training examples are windows of `seq_len` + 1 tokens at offsets drawn from the run's generator
(fresh windows every epoch of `n_train`). The test split is read as non-overlapping windows that tile
it, so every length in `ce_at(model, length)` scores (nearly) the same characters, with contexts as
long as the window; that is how extrapolation is measured (train at L, read at 2L … 8L).
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.masks import causal_local_pattern, parse_local
from companion.paths import data_roots
from companion.priors import interpolated
from companion.readouts import option_int, parse_ints, register_readout, sample_positions, split_arg
from companion.tasks import TaskSpec, model_device, register_task

__all__ = ["CharCorpusTask", "load_documents", "tinystories_files", "read_stories", "EOT", "UNK", "SEPARATOR",
           "lm_lengths", "lm_positions", "moving_mean"]

EOT, UNK = 0, 1
SEPARATOR = "<|endoftext|>"
TINYSTORIES = (("TinyStoriesV2-GPT4-train.txt", "TinyStoriesV2-GPT4-valid.txt"),
               ("TinyStories-train.txt", "TinyStories-valid.txt"))


def tinystories_files(root: str = "") -> tuple[Path, Path]:
    """The (train, valid) text files of TinyStories in `root`, or in `tinystories/` under the data roots.

    Raises ValueError naming every folder searched and how to provide the files."""
    folders = [Path(root).expanduser()] if root else [r / "tinystories" for r in data_roots()]
    for folder in folders:
        for train, valid in TINYSTORIES:
            if (folder / train).is_file() and (folder / valid).is_file():
                return folder / train, folder / valid
    names = " or ".join(f"{t} + {v}" for t, v in TINYSTORIES)
    raise ValueError(f"TinyStories not found; looked in: {', '.join(map(str, folders))}. To provide it, put {names} "
                     "(from the Hugging Face dataset roneneldan/TinyStories) in one of those folders, or name the "
                     "folder as corpus 'tinystories:PATH'.")


def read_stories(path: Path, max_documents: int = 0, chunk: int = 1 << 20) -> list[str]:
    """The stories of a TinyStories text file (separated by `SEPARATOR`), the first `max_documents`
    only if > 0, read in chunks so that a cap stops the reading early."""
    docs, tail = [], ""
    with open(path, encoding="utf-8") as f:
        while True:
            block = f.read(chunk)
            parts = (tail + block).split(SEPARATOR)
            tail = parts.pop() if block else ""
            docs.extend(d.strip() for d in parts if d.strip())
            if not block or (max_documents and len(docs) >= max_documents):
                break
    if tail.strip():
        docs.append(tail.strip())
    return docs[:max_documents] if max_documents else docs


PYDOC_SNAPSHOT = Path(__file__).parent / "data" / "pydoc-topics.json.gz"


def pydoc_topics() -> dict[str, str]:
    """The "pydoc" corpus: topic → text, as CPython 3.11.7's `pydoc_data.topics` holds them."""
    with gzip.open(PYDOC_SNAPSHOT, "rt", encoding="utf-8") as f:
        return json.load(f)["topics"]


def load_documents(corpus: str) -> list[str]:
    """The documents of `corpus` ("pydoc", or a .txt / .jsonl path; module docstring), empty ones dropped."""
    if corpus == "pydoc":
        topics = pydoc_topics()
        docs = [topics[key] for key in sorted(topics)]
    else:
        path = Path(corpus)
        if not path.is_file():
            raise ValueError(f"corpus {corpus!r} is neither 'pydoc' nor an existing file; give a .txt "
                             f"(documents separated by {SEPARATOR}) or .jsonl ({{\"text\": …}} per line) path.")
        if path.suffix == ".jsonl":
            docs = []
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    docs.append(json.loads(line)["text"])
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise ValueError(f"{path}:{n} is not a JSON object with a 'text' field; each line of a "
                                     ".jsonl corpus must be one {\"text\": …} object.") from None
        elif path.suffix == ".txt":
            docs = path.read_text(encoding="utf-8").split(SEPARATOR)
        else:
            raise ValueError(f"corpus file {path.name!r} must end in .txt or .jsonl.")
    docs = [d.strip() for d in docs if d.strip()]
    if not docs:
        raise ValueError(f"corpus {corpus!r} holds no text.")
    return docs


def _stream(docs: list[str], index: dict[str, int]) -> Tensor:
    ids = []
    for d in docs:
        ids.extend(index.get(c, UNK) for c in d)
        ids.append(EOT)
    return torch.tensor(ids, dtype=torch.long)


@register_task("char-lm")
class CharCorpusTask:
    """Next-character prediction on a corpus (module docstring).

    Args:
        corpus: "pydoc", "tinystories[:ROOT]" or a file path. seq_len: tokens the model reads in training (L).
        n_train: training windows per epoch. test_fraction: share of characters held out (a
            TinyStories corpus keeps its own valid split instead).
        eval_windows: test windows scored by intermediate evaluations (the final one reads all).
        max_documents: stories read from each TinyStories file (0: all).
        data_seed: seed of the document shuffle (task-level).

    Mask pattern ("local:W"): every query reads its last W tokens, itself included (a causal band,
    `companion.masks.causal_local_pattern`); "default" is local:seq_len/4.
    """

    def __init__(self, corpus: str = "pydoc", seq_len: int = 64, n_train: int = 8192, test_fraction: float = 0.1,
                 eval_windows: int = 64, max_documents: int = 0, data_seed: int = 0):
        if seq_len < 2 or n_train < 1 or eval_windows < 1 or max_documents < 0:
            raise ValueError("char-lm needs seq_len ≥ 2, n_train ≥ 1, eval_windows ≥ 1 and max_documents ≥ 0.")
        if not 0 < test_fraction < 1:
            raise ValueError(f"test_fraction is a share of the corpus in (0, 1), got {test_fraction}.")
        if corpus == "tinystories" or corpus.startswith("tinystories:"):
            train_file, valid_file = tinystories_files(corpus.partition(":")[2])
            docs = read_stories(train_file, max_documents)
            cut = len(docs)
            docs += read_stories(valid_file, max_documents)
        else:
            docs = load_documents(corpus)
            if len(docs) < 2:
                raise ValueError(f"corpus {corpus!r} has one document; the split is by documents, so give at least two.")
            g = torch.Generator().manual_seed(data_seed)
            docs = [docs[i] for i in torch.randperm(len(docs), generator=g).tolist()]
            total, cut, seen = sum(len(d) for d in docs), len(docs), 0
            for n, d in enumerate(docs):
                if seen >= (1 - test_fraction) * total:
                    cut = n
                    break
                seen += len(d)
            cut = min(max(cut, 1), len(docs) - 1)
        self.chars = sorted(set("".join(docs[:cut])))
        index = {c: i + 2 for i, c in enumerate(self.chars)}
        self.streams = {"train": _stream(docs[:cut], index), "test": _stream(docs[cut:], index)}
        for split, s in self.streams.items():
            if len(s) < seq_len + 1:
                raise ValueError(f"the {split} split has {len(s)} tokens, fewer than one window of "
                                 f"seq_len + 1 = {seq_len + 1}; use a larger corpus or a shorter seq_len.")
        self.seq_len, self.n_train, self.eval_windows = seq_len, n_train, eval_windows
        self.spec = TaskSpec(inputs="tokens", output="lm", vocab_size=len(self.chars) + 2, seq_len=seq_len)

    def decode(self, ids: Tensor) -> str:
        """Text of a 1-D id tensor (EOT as a newline, UNK as U+FFFD)."""
        table = ["\n", "\ufffd"] + self.chars
        return "".join(table[i] for i in ids.tolist())

    def train_batches(self, batch_size: int, generator: torch.Generator):
        s, span = self.streams["train"], self.seq_len + 1
        starts = torch.randint(0, len(s) - span + 1, (self.n_train,), generator=generator)
        for b in range(0, self.n_train, batch_size):
            w = s[starts[b : b + batch_size, None] + torch.arange(span)]
            yield w[:, :-1], w[:, 1:]

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(output.flatten(0, 1), target.flatten())

    def windows(self, length: int, split: str = "test", limit: int | None = None) -> Tensor:
        """Non-overlapping windows (n, length + 1) that tile a split from its start (the tail shorter
        than one window is dropped); at most `limit` of them."""
        s = self.streams[split]
        n = (len(s) - 1) // length
        if n < 1:
            raise ValueError(f"the {split} split ({len(s)} tokens) is shorter than one window of {length + 1}.")
        n = n if limit is None else min(n, limit)
        return s[: n * length + 1].unfold(0, length + 1, length)[:n] if n else s[:0]

    @torch.no_grad()
    def ce_at(self, model: nn.Module, length: int, *, limit: int | None = None, batch_tokens: int = 32768) -> dict:
        """Cross-entropy (nats per character) of `model` reading test windows of `length` tokens.

        Returns {"ce", "ppl", "bpc", "windows", "per_position"}: per_position[t] is the mean CE of
        the prediction made after reading t + 1 tokens (a float64 tensor of `length`).
        """
        w = self.windows(length, limit=limit)
        dev, total = model_device(model), torch.zeros(length, dtype=torch.float64)
        per_batch = max(1, batch_tokens // length)
        for b in range(0, len(w), per_batch):
            x = w[b : b + per_batch]
            logits = model(x[:, :-1].to(dev)).float().cpu()
            ce = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")
            total += ce.double().sum(0)
        per_position = total / len(w)
        ce = float(per_position.mean())
        return {"ce": ce, "ppl": math.exp(ce), "bpc": ce / math.log(2), "windows": len(w),
                "per_position": per_position}

    @torch.no_grad()
    def evaluate(self, model: nn.Module, *, final: bool = True) -> dict[str, dict[str, float]]:
        """Test cross-entropy at the training length (all windows if final, else `eval_windows`)."""
        r = self.ce_at(model, self.seq_len, limit=None if final else self.eval_windows)
        return {"test": {"ce": r["ce"], "ppl": r["ppl"], "bpc": r["bpc"]}}

    def mask_pattern(self, variant: str, *, cls: bool) -> Tensor:
        """Causal local band (seq_len, seq_len): query i reads keys i − W + 1 … i ("local:W")."""
        if cls:
            raise ValueError("char-lm is read by a causal decoder, which has no CLS token.")
        window = parse_local(variant, what="window of keys each query reads", default=max(1, self.seq_len // 4))
        return causal_local_pattern(self.seq_len, window)

    def probe_inputs(self) -> Tensor:
        return self.probe_sequences(16)

    def probe_sequences(self, n: int) -> Tensor:
        """The first n test windows at the training length, inputs only (the last token dropped)."""
        return self.windows(self.seq_len)[:n, :-1]


def _char_task(task, name: str) -> CharCorpusTask:
    if not isinstance(task, CharCorpusTask):
        raise ValueError(f"readout {name!r} needs a char-lm task, not {type(task).__name__}.")
    return task


def _ce(model: nn.Module, task: CharCorpusTask, length: int, tokens: int | None, pi: bool) -> dict:
    """`task.ce_at` on the first `tokens` test characters (as tokens // length windows; all when None),
    with position interpolation to the training length when `pi` (`companion.priors.interpolated`)."""
    limit = None if tokens is None else max(1, tokens // length)
    if not pi:
        return task.ce_at(model, length, limit=limit)
    with interpolated(model, task.seq_len):
        return task.ce_at(model, length, limit=limit)


@register_readout("lm_lengths")
def lm_lengths(model: nn.Module, task, arg: str) -> dict[str, dict[str, float]]:
    """Test cross-entropy at each length, read beyond the training length without further training;
    arg "n1,n2,…[;tokens=T][;pi]": with `tokens`, every length reads the same first T characters of the
    test split (as T // n windows), else the whole split; `pi` reads with position interpolation to the
    training length (RoPE). Returns {str(n): {"ce", "ppl", "bpc", "windows"}}."""
    head, opts = split_arg(arg, "readout 'lm_lengths'", ("tokens", "pi"))
    lengths, tokens = parse_ints(head, "readout 'lm_lengths' (lengths)"), option_int(opts, "tokens", None, "lm_lengths")
    task = _char_task(task, "lm_lengths")
    out = {}
    for n in lengths:
        r = _ce(model, task, n, tokens, "pi" in opts)
        out[str(n)] = {k: r[k] for k in ("ce", "ppl", "bpc", "windows")}
    return out


def moving_mean(values, window: int) -> np.ndarray:
    """Means of `window` consecutive values (len(values) − window + 1 of them), as numpy's convolution."""
    return np.convolve(np.asarray(values, dtype=np.float64), np.ones(window) / window, mode="valid")


@register_readout("lm_positions")
def lm_positions(model: nn.Module, task, arg: str) -> dict[str, list]:
    """Cross-entropy by position in test windows of n tokens, smoothed; arg "n[;tokens=T][;window=W]
    [;points=P][;pi]" (W default 16, P default 512; tokens and pi as in `lm_lengths`).

    Returns {"x": characters read, "ce": the moving mean over W positions of the per-position CE
    (`CharCorpusTask.ce_at`), at x = its first position + W // 2}: every point of the curve when it
    has at most P, else P evenly spaced ones (a few KB at any n)."""
    head, opts = split_arg(arg, "readout 'lm_positions'", ("tokens", "window", "points", "pi"))
    (n,) = parse_ints(head, "readout 'lm_positions' (length)")
    tokens = option_int(opts, "tokens", None, "lm_positions")
    window, points = option_int(opts, "window", 16, "lm_positions"), option_int(opts, "points", 512, "lm_positions")
    if window > n:
        raise ValueError(f"readout 'lm_positions': window {window} is longer than the length {n}.")
    ce = moving_mean(_ce(model, _char_task(task, "lm_positions"), n, tokens, "pi" in opts)["per_position"].numpy(), window)
    keep = sample_positions(len(ce), points)
    return {"x": [k + window // 2 for k in keep], "ce": ce[keep]}
