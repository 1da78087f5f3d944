"""The subnormal probe (companion.cost.subnormals): a constructed score matrix gives the count worked out
by hand, the causal rule and the row sample are honoured, GOAT's ALiBi-seeded lanes produce the
subnormals their slopes predict, and random scores produce none."""

from __future__ import annotations

import math

import pytest
import torch

from companion.cost.measure import Case
from companion.cost.subnormals import LOWEST, TINY, count, probe, sample_rows
from companion.positions import ALiBi

# exp(−95) ≈ 5.5e-42 is a float32 subnormal; exp(−120) ≈ 7.7e-53 rounds to 0; exp(−10) is normal
SUBNORMAL, ZERO, NORMAL = -95.0, -120.0, -10.0


def _constructed(L: int = 7) -> torch.Tensor:
    """Scores (L, L): 0 on the diagonal (each row's largest), below it SUBNORMAL, ZERO, NORMAL in
    turn by (i + j) % 3, and above it SUBNORMAL everywhere (keys the causal rule hides)."""
    s = torch.full((L, L), SUBNORMAL)
    for i in range(L):
        for j in range(i):
            s[i, j] = (SUBNORMAL, ZERO, NORMAL)[(i + j) % 3]
        s[i, i] = 0.0
    return s


def test_a_constructed_matrix_gives_the_count_worked_out_by_hand():
    s = _constructed()
    below = [(i, j) for i in range(7) for j in range(i)]
    expect = sum((i + j) % 3 == 0 for i, j in below)  # 7 of the 21 entries below the diagonal
    zeros = sum((i + j) % 3 == 1 for i, j in below)
    assert (expect, zeros) == (7, 7)
    # the same from the definition: exp of (score − the row's logsumexp) within (2^-150, 2^-126)
    lse = [math.log(sum(math.exp(float(s[i, j])) for j in range(i + 1))) for i in range(7)]
    by_hand = sum(LOWEST < math.exp(float(s[i, j]) - lse[i]) < TINY for i in range(7) for j in range(i + 1))
    assert by_hand == expect
    c = count(s)
    assert c["entries"] == 28  # 7 · 8 / 2 causal entries, the diagonal included
    assert (c["exp_subnormal"], c["prob_subnormal"], c["prob_zero"]) == (expect, expect, zeros)
    assert c["prob_fraction"] == pytest.approx(7 / 28)


def test_keys_above_the_diagonal_count_only_without_the_causal_rule():
    s = _constructed()
    full = count(s, causal=False)
    assert full["entries"] == 49 and full["exp_subnormal"] == 7 + 21  # the 21 hidden keys are SUBNORMAL
    assert count(s)["exp_subnormal"] == 7


def test_a_sample_of_rows_reads_the_rows_it_names():
    s = _constructed()
    rows = torch.tensor([2, 5, 6])
    part = count(s[rows], rows)
    whole = [count(s[r:r + 1], torch.tensor([r])) for r in (2, 5, 6)]
    assert part["entries"] == 3 + 6 + 7 and part["exp_subnormal"] == sum(w["exp_subnormal"] for w in whole)
    assert sample_rows(4096, 512).tolist() == list(range(7, 4096, 8))  # every 8th row, ending at the last
    assert sample_rows(300, 512).tolist() == list(range(300))
    with pytest.raises(ValueError, match="rows has shape"):
        count(s, torch.arange(3))


def _alibi_prediction(L: int, H: int) -> float:
    """The share of causal probabilities that ALiBi's recency alone makes subnormal: key j of row i
    sits slope·(i − j) below the row's top, subnormal for a distance within (−log 2^-126, −log 2^-150) / slope."""
    lo, hi = -math.log(TINY), -math.log(LOWEST)
    hits = 0
    for slope in ALiBi(H).slopes.tolist():
        hits += sum(max(0, min(i, math.floor(hi / slope)) - math.ceil(lo / slope) + 1) for i in range(L))
    return hits / (H * L * (L + 1) / 2)


def test_goat_lanes_at_512_make_the_subnormals_their_slopes_predict_and_random_scores_none():
    # GOAT seeded as the benchmark seeds it: recency slopes at ALiBi's values (2^-1 … 2^-8 for 8 heads).
    # At L = 512 the slopes 1/2 and 1/4 put keys 175–207 and 350–415 positions back into the subnormal
    # band; the other heads' bands lie beyond the sequence: about 1.8 % of all causal probabilities.
    L, H = 512, 8
    predicted = _alibi_prediction(L, H)
    assert 0.015 < predicted < 0.021
    goat = Case("goat-lanes", L, "fwd", B=1, H=H, D=64, device="cpu", dtype=torch.float32, seed=0)
    got = probe(goat.var, goat.q, goat.k)
    # the content scores (about N(0, 1)) and the perturbed spectral and sink terms move the band's edges by a
    # few keys, so the measured share is the prediction to within a tenth of itself
    assert got["prob_fraction"] == pytest.approx(predicted, rel=0.1)
    assert got["rows"] == L and got["row_stride"] == 1
    assert [f > 0 for f in got["heads"]] == [True, True] + [False] * 6  # the two steepest heads only
    # plain attention on random q, k: scores within a few units of each other, no exponential near 2^-126
    plain = Case("sdpa", L, "fwd", B=1, H=H, D=64, device="cpu", dtype=torch.float32, seed=0)
    none = probe(plain.var, plain.q, plain.k)
    assert none["prob_subnormal"] == 0 and none["exp_subnormal"] == 0 and none["prob_zero"] == 0


def test_every_goat_path_and_the_materialised_prior_count_alike():
    # goat-chunked and eager-goat compute GOAT's function too: their scores, and so their counts, agree
    # with the lanes' up to float32 rounding at the band's edges
    L = 256
    counts = {}
    for v in ("goat-lanes", "goat-chunked", "eager-goat", "flex"):
        case = Case(v, L, "fwd", B=1, H=8, D=64, device="cpu", dtype=torch.float32, seed=0, compile_flex=False)
        counts[v] = probe(case.var, case.q, case.k)["prob_subnormal"]
    assert counts["goat-lanes"] > 0 and counts["goat-chunked"] == counts["goat-lanes"]
    for v in ("eager-goat", "flex"):  # flex scales over all D dims, not the content dims: close, not equal
        assert counts[v] == pytest.approx(counts["goat-lanes"], rel=0.02)
