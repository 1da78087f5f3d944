"""How many of an attention call's exponentials are float32 subnormals: why a host's timings may differ.

A float32 number below `torch.finfo(torch.float32).tiny` (2⁻¹²⁶ ≈ 1.2e-38) and above 0 is subnormal.
Attention computes exp(s − m) for every causal score s of a row: where a prior pushes scores more than
about 87 below the row's largest, the result is subnormal, and on some CPUs every operation that
touches it is several times slower (unless flush-to-zero is on, `companion.cost.ftz`). GOAT's sink
lane does this: its recency term s_h·j grows with the key's position, so far keys fall behind by
s_h·(i − j). No FLOP count sees it; this probe counts it.

`count(logits, rows)` takes scores (..., r, L), the query rows `rows` against every key, and counts
over their causal entries (key j ≤ row i):
- `exp`: e = exp(s − max_j s), the unnormalised weights of a fused forward (it computes them block by
  block against a running maximum, which is at most the row's, so its own values are at least these);
- `prob`: p = exp(s − logsumexp_j s), the probabilities a fused backward recomputes;
each counted subnormal when it would round to a nonzero float32 below tiny (2⁻¹⁵⁰ < x < 2⁻¹²⁶), and
`prob_zero` the probabilities that round to 0 (at most 2⁻¹⁵⁰: zeros cost nothing). The test is on the
exponent, log x = s − m or s − logsumexp, against log 2⁻¹⁵⁰ and log 2⁻¹²⁶: no subnormal is ever
computed, so the count does not depend on the flush-to-zero state of the thread that runs it (a value
within float32 rounding of either bound may fall on either side).

`probe(variant, q, k)` counts one variant's scores (`Variant.logits`), head by head, once, outside any
timed loop. Above `max_rows` query rows it counts every `row_stride`-th row (ending at the last), so the
fractions are those of an even sample of rows, and the counts are the sample's.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["TINY", "LOWEST", "MAX_ROWS", "count", "sample_rows", "probe"]

TINY = torch.finfo(torch.float32).tiny  # 2⁻¹²⁶, the smallest normal float32
LOWEST = 2.0 ** -150  # half the smallest subnormal: a float32 result at or below it rounds to 0
LOG_TINY, LOG_LOWEST = math.log(TINY), math.log(LOWEST)  # −87.34 and −103.97
MAX_ROWS = 512  # query rows a head's probe reads at most (about 0.2 s a head at L = 4096 on 2 cores)
_KEYS = ("entries", "exp_subnormal", "prob_subnormal", "prob_zero")


def _fractions(counts: dict) -> dict:
    n = max(counts["entries"], 1)
    return {**counts, "exp_fraction": counts["exp_subnormal"] / n, "prob_fraction": counts["prob_subnormal"] / n,
            "prob_zero_fraction": counts["prob_zero"] / n}


@torch.no_grad()
def count(logits: Tensor, rows: Tensor | None = None, causal: bool = True) -> dict:
    """Subnormal counts of scores (..., r, L) at query rows `rows` (default 0 … r − 1), module
    docstring: entries, exp_subnormal, prob_subnormal, prob_zero, and each as a fraction of the entries.
    `causal`: only keys j ≤ i count (and take part in the row's maximum and sum); else every key."""
    if logits.dim() < 2:
        raise ValueError(f"count needs scores (..., rows, L), got shape {tuple(logits.shape)}.")
    r, L = logits.shape[-2:]
    rows = torch.arange(r) if rows is None else torch.as_tensor(rows)
    if rows.shape != (r,):
        raise ValueError(f"rows has shape {tuple(rows.shape)}, the scores have {r} rows.")
    keep = torch.ones(r, L, dtype=torch.bool, device=logits.device)
    if causal:
        keep = torch.arange(L, device=logits.device)[None, :] <= rows.to(logits.device)[:, None]
    s = logits.float().masked_fill(~keep, float("-inf"))
    log_e = s - s.amax(-1, keepdim=True)
    log_p = s - torch.logsumexp(s, -1, keepdim=True)

    def subnormal(x):
        return int(((x > LOG_LOWEST) & (x < LOG_TINY)).sum())

    counts = {"entries": int(keep.sum()) * (s.numel() // (r * L)), "exp_subnormal": subnormal(log_e),
              "prob_subnormal": subnormal(log_p), "prob_zero": int(((log_p <= LOG_LOWEST) & keep).sum())}
    return _fractions(counts)


def sample_rows(L: int, max_rows: int | None = MAX_ROWS) -> Tensor:
    """The query rows a probe reads: all L, or every ⌈L / max_rows⌉-th row ending at row L − 1."""
    stride = 1 if not max_rows or L <= max_rows else math.ceil(L / max_rows)
    return torch.arange(L - 1, -1, -stride).flip(0)


@torch.no_grad()
def probe(variant, q: Tensor, k: Tensor, max_rows: int | None = MAX_ROWS) -> dict:
    """`count` of a variant's scores (`Variant.logits`) for inputs q, k (B, H, L, D), over every head at
    the rows `sample_rows` picks; with `rows` and `row_stride` (what was read) and `heads`: each
    head's fraction of subnormal probabilities."""
    L = q.shape[-2]
    rows = sample_rows(L, max_rows).to(q.device)
    total, heads = dict.fromkeys(_KEYS, 0), []
    for h in range(q.shape[1]):
        part = count(variant.logits(q.detach(), k.detach(), h, rows), rows)
        heads.append(part["prob_fraction"])
        total = {key: total[key] + part[key] for key in _KEYS}
    stride = int(rows[1] - rows[0]) if len(rows) > 1 else 1
    return {**_fractions(total), "rows": len(rows), "row_stride": stride, "heads": heads}
