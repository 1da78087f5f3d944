"""Task structure → open/closed attention patterns (True = open), rows are queries.

Boolean tasks (arXiv 2608.00418, App. E / Table 7, as read here; the paper's exact layout is not
public, so each reading is a named variant):

- "support": every token reads itself; two bit tokens read each other when some monomial of the
  target contains both; the CLS token reads every bit that appears in a monomial.
- "per-token": one monomial per token: the token of a monomial's first coordinate reads all of
  that monomial (Cyclic3: token i reads i, i+1, i+2); meant for mean pooling; a CLS token, if any,
  reads the anchor tokens.
- "pair:A-B" (or "group:A-B-C…"): the support pattern of the single monomial x_A x_B (x_A x_B x_C …),
  whatever the target (used for deliberately misplaced masks).

Token positions: with a CLS token it sits at 0 and bit i at i + 1; without, bit i at i.

Arithmetic tasks (a causal decoder reads `a op b = c`; see `companion.tasks.arithmetic`):
`digit_pattern` opens, on top of the causal mask, every token to itself, each digit of b to the digit
of a with the same significance, and the query that predicts answer digit c_s (the token just before
it) to the operand digits c_s depends on:

- "window": addition a_s, b_s and a_{s−1}, b_{s−1} (the carry); multiplication every a_i, b_j with
  i + j ∈ {s, s−1} (two anti-diagonals of the digit-product table).
- "chain": every operand digit of significance ≤ s (addition) or every a_i, b_j with i + j ≤ s
  (multiplication): the whole carry chain, which an answer written most-significant digit first needs.

Images (a ViT reads a grid of patches, row-major; `companion.tasks.images`): `patch_pattern` opens each
patch to the patches within Chebyshev distance `radius` on the grid ("local:R", the 3×3
neighbourhood for R = 1, as Zheng et al.'s impulse targets use), itself included; a CLS token, if
any, reads every patch and is read by every patch (its row and column are open). `impulse_patterns`
("impulse") is one pattern per offset of that neighbourhood, each patch reading the one patch at
that offset (Zheng et al. 2025's impulse targets, one per head in their head order).

Causal language models (`companion.tasks.text`): `causal_local_pattern` opens the last `window` keys
of each query (itself included), a band under the diagonal ("local:W").
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["support_pattern", "per_token_pattern", "pattern_for", "MASK_VARIANTS", "digit_pattern", "DIGIT_VARIANTS",
           "patch_pattern", "impulse_patterns", "IMPULSE_ORDER", "causal_local_pattern", "parse_local"]

MASK_VARIANTS = ("support", "per-token", "pair:A-B", "group:A-B-C")


def _interacting(monomials) -> list[tuple[int, ...]]:
    return [tuple(m) for m in monomials if len(m) >= 1]


def support_pattern(monomials, n_bits: int, *, cls: bool) -> Tensor:
    """Open pairs within each monomial's support; CLS → all covered bits; diagonal open."""
    off = int(cls)
    pattern = torch.eye(n_bits + off, dtype=torch.bool)
    for mono in _interacting(monomials):
        idx = torch.tensor(mono) + off
        pattern[idx[:, None], idx[None, :]] = True
        if cls:
            pattern[0, idx] = True
    return pattern


def per_token_pattern(monomials, n_bits: int, *, cls: bool) -> Tensor:
    """Token of each monomial's first coordinate reads the whole monomial; diagonal open."""
    off = int(cls)
    pattern = torch.eye(n_bits + off, dtype=torch.bool)
    for mono in _interacting(monomials):
        anchor = mono[0] + off
        pattern[anchor, torch.tensor(mono) + off] = True
        if cls:
            pattern[0, anchor] = True
    return pattern


def pattern_for(variant: str, monomials, n_bits: int, *, cls: bool) -> Tensor:
    """Dispatch a variant name (see MASK_VARIANTS) to its builder."""
    if variant == "support":
        return support_pattern(monomials, n_bits, cls=cls)
    if variant == "per-token":
        return per_token_pattern(monomials, n_bits, cls=cls)
    if variant.startswith(("pair:", "group:")):
        kind, _, spec = variant.partition(":")
        try:
            bits = tuple(int(t) for t in spec.split("-"))
        except ValueError:
            raise ValueError(f"mask variant {variant!r}: write bits as '{kind}:A-B', e.g. 'pair:0-2' or 'group:0-1-3'.") from None
        if (kind == "pair" and len(bits) != 2) or len(bits) < 2 or len(set(bits)) != len(bits) \
                or not all(0 <= b < n_bits for b in bits):
            raise ValueError(f"mask variant {variant!r}: bits must be distinct, in [0, {n_bits - 1}], and a pair has two.")
        return support_pattern([bits], n_bits, cls=cls)
    raise ValueError(f"unknown mask variant {variant!r}; valid: {', '.join(MASK_VARIANTS)}.")


DIGIT_VARIANTS = ("window", "chain")


def digit_pattern(a_pos, b_pos, c_pos, *, n: int, op: str, variant: str = "window") -> Tensor:
    """Open pattern (n, n) of an arithmetic sequence, rows = queries, causal (lower triangular).

    Args:
        a_pos, b_pos: position of each operand digit, indexed by significance (index 0 = units).
        c_pos: position of each answer digit, indexed by significance; the query at c_pos[s] − 1
            predicts c_s.
        n: positions the model sees.
        op: "add" or "mul".
        variant: one of DIGIT_VARIANTS (see the module docstring).
    """
    if op not in ("add", "mul"):
        raise ValueError(f"digit masks exist for op 'add' and 'mul', got {op!r}.")
    if variant not in DIGIT_VARIANTS:
        raise ValueError(f"unknown digit-mask variant {variant!r}; valid: {', '.join(DIGIT_VARIANTS)}.")
    pattern = torch.eye(n, dtype=torch.bool)
    for s, (pa, pb) in enumerate(zip(a_pos, b_pos)):
        pattern[pb, pa] = True
    digits = range(len(a_pos))
    for s, pc in enumerate(c_pos):
        q = pc - 1
        if q >= n:
            continue
        if op == "add":
            sig = [t for t in digits if (s - 1 <= t <= s if variant == "window" else t <= s)]
            keys = [a_pos[t] for t in sig] + [b_pos[t] for t in sig]
        else:
            pairs = [(i, j) for i in digits for j in range(len(b_pos))
                     if (i + j in (s, s - 1) if variant == "window" else i + j <= s)]
            keys = sorted({a_pos[i] for i, _ in pairs} | {b_pos[j] for _, j in pairs})
        pattern[q, keys] = True
    return pattern & torch.ones(n, n, dtype=torch.bool).tril()


def parse_local(variant: str, *, what: str, default: int) -> int:
    """The integer of a "local:N" variant ("default" gives `default`); ValueError naming the form."""
    if variant == "default":
        return default
    kind, _, spec = variant.partition(":")
    if kind == "local" and spec.isdigit():
        return int(spec)
    raise ValueError(f"unknown mask variant {variant!r}; valid: default (local:{default}) or local:N with N the "
                     f"{what}, e.g. local:{default}.")


def patch_pattern(rows: int, cols: int, radius: int, *, cls: bool) -> Tensor:
    """Open pattern over a `rows` × `cols` grid of patches (row-major), [CLS first]: patch (r, c) reads
    patch (r', c') iff max(|r − r'|, |c − c'|) ≤ radius; the CLS row and column are open."""
    if rows < 1 or cols < 1 or radius < 0:
        raise ValueError(f"a patch grid needs rows, cols >= 1 and radius >= 0, got {rows}, {cols}, {radius}.")
    r, c = torch.arange(rows).repeat_interleave(cols), torch.arange(cols).repeat(rows)
    grid = torch.maximum((r[:, None] - r[None]).abs(), (c[:, None] - c[None]).abs()) <= radius
    if not cls:
        return grid
    n = rows * cols + 1
    pattern = torch.ones(n, n, dtype=torch.bool)
    pattern[1:, 1:] = grid
    return pattern


# the 3×3 offsets k = 0 … 8 ((k // 3 − 1, k % 3 − 1): row, column) in the order Zheng et al. (2025) give them
# to heads: centre, up, right, left, down, then the diagonals (`osiriszjq/structured_initialization`)
IMPULSE_ORDER = (4, 1, 5, 3, 7, 0, 2, 6, 8)


def impulse_patterns(rows: int, cols: int) -> Tensor:
    """Open patterns (9, n, n) over a `rows` × `cols` grid of patches (row-major, no CLS), one per offset
    (dr, dc) of the 3×3 neighbourhood in `IMPULSE_ORDER`: patch (r, c) reads only patch (r + dr, c + dc),
    so a row whose offset leaves the grid is all closed (a patch on the border). Head h of a layer takes
    pattern h mod 9."""
    if rows < 1 or cols < 1:
        raise ValueError(f"a patch grid needs rows, cols >= 1, got {rows}, {cols}.")
    r, c = torch.arange(rows).repeat_interleave(cols), torch.arange(cols).repeat(rows)
    dr, dc = r[None] - r[:, None], c[None] - c[:, None]  # key minus query, (n, n)
    return torch.stack([(dr == k // 3 - 1) & (dc == k % 3 - 1) for k in IMPULSE_ORDER])


def causal_local_pattern(n: int, window: int) -> Tensor:
    """Open pattern (n, n) of a causal decoder: query i reads keys i − window + 1 … i."""
    if n < 1 or window < 1:
        raise ValueError(f"a causal local pattern needs n >= 1 and window >= 1, got n={n}, window={window}.")
    i = torch.arange(n)
    d = i[:, None] - i[None]
    return (d >= 0) & (d < window)
