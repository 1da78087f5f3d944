"""Chapter 3's masks: the source's Table 7 as this book reads it, the monomials each target's values reveal (its Walsh
expansion), and S2-11, that every mask is what both readings give. Nothing here reads a run."""

from __future__ import annotations

import torch

from companion.boolean_fourier import cube, evaluate
from companion.book.chapter import Measure
from companion.book.chapters.interpolator import N_BITS
from companion.masks import support_pattern
from companion.tasks.boolean import FUNCTIONS, BooleanTask, make_function

__all__ = ["patterns", "walsh_expansion", "recovered_monomials", "TABLE7_READING", "table7_patterns", "masks_agree", "MASKS"]


def patterns() -> dict[str, torch.Tensor]:
    """Each task's mask pattern (Fourier support, CLS row and column included): bool (16, 16)."""
    return {fn: BooleanTask(fn, n_bits=N_BITS).mask_pattern("support", cls=True) for fn in FUNCTIONS}


def walsh_expansion(values: torch.Tensor, coords: tuple[int, ...]) -> dict[tuple[int, ...], float]:
    """The Fourier expansion of the function with `values` on `cube(len(coords))` (rows in `cube` order),
    monomials named by the labels `coords`, |c| ≤ 1e-12 dropped. The fast Walsh–Hadamard transform gets
    c_S = mean_x f(x) Π_{i∈S} x_i for every S in k·2^k additions (the direct sum costs 4^k)."""
    k = len(coords)
    t = values.to(torch.float64).reshape((2,) * k)  # axis i: coordinate i at −1 (index 0) or +1 (1)
    for axis in range(k):
        lo, hi = t.select(axis, 0), t.select(axis, 1)
        t = torch.stack([lo + hi, lo - hi], dim=axis)  # index 1 along `axis`: −Σ x_i f(x)
    t = t / 2 ** k
    out = {}
    for idx in torch.nonzero(t.abs() > 1e-12).tolist():
        subset = tuple(i for i in range(k) if idx[i])
        out[tuple(coords[i] for i in subset)] = float(t[tuple(idx)]) * (-1) ** len(subset)
    return out


def recovered_monomials(function: str, n: int = N_BITS) -> list[tuple[int, ...]]:
    """The target's non-constant monomials, by degree then label, recovered by `walsh_expansion` from its values
    on the sub-cube of the coordinates it uses: independent of the hand-written expansion's keys."""
    f = make_function(function, n)
    coords = tuple(sorted({i for m in f.expansion for i in m}))
    sub = cube(len(coords), dtype=torch.float64)
    full = torch.zeros(len(sub), n, dtype=torch.float64)
    full[:, list(coords)] = sub
    return sorted((m for m in walsh_expansion(evaluate(f.expansion, full), coords) if m), key=lambda m: (len(m), m))


# The open sets of the source's Table 7 as this book reads them, besides the diagonal (token 0 is CLS, token i + 1
# is bit x_i): CLS → the bits it reads, and the bit pairs open both ways. The sources held here do not print the
# table's entries: this is a hand-written reading of App. E's construction rule (the project's research notes).
TABLE7_READING = {
    "2parity": {"cls": (0, 1), "pairs": ((0, 1),)},
    "cyclic3": {"cls": tuple(range(N_BITS)), "pairs": tuple((i, (i + d) % N_BITS) for i in range(N_BITS) for d in (1, 2))},
    "maj3": {"cls": (0, 1, 2), "pairs": ((0, 1), (0, 2), (1, 2))},
    "threesym": {"cls": (0, 1, 2), "pairs": ((0, 1), (0, 2), (1, 2))},
}


def table7_patterns(n: int = N_BITS) -> dict[str, torch.Tensor]:
    """`TABLE7_READING`'s masks, bool (n + 1, n + 1), written out entry by entry independently of the mask builder."""
    out = {}
    for fn, spec in TABLE7_READING.items():
        m = torch.eye(n + 1, dtype=torch.bool)
        m[0, [i + 1 for i in spec["cls"]]] = True
        for i, j in spec["pairs"]:
            m[i + 1, j + 1] = m[j + 1, i + 1] = True
        out[fn] = m
    return out


def masks_agree(masks: dict[str, torch.Tensor]) -> bool:
    """Whether every mask equals both the pattern rebuilt from the monomials recovered from the target's values
    and `table7_patterns` (this book's reading of the source's Table 7): S2-11's measure."""
    rebuilt = {fn: support_pattern(recovered_monomials(fn), N_BITS, cls=True) for fn in masks}
    reading = table7_patterns()
    return all(torch.equal(rebuilt[fn], masks[fn]) and torch.equal(reading[fn], masks[fn]) for fn in masks)


MASKS = (Measure("S2-11", masks_agree),)
