"""Chapter 1's worked examples: equivariance as a property test, and where it fails."""

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.book.ch01_foundations import (
    Projections, causal_visibility, equivariance_trials, permutation_gap, single_query_weights,
)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 9), d=st.integers(1, 8), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_all_visible_attention_is_permutation_equivariant(n, d, seed, data):
    perm = torch.tensor(data.draw(st.permutations(list(range(n)))))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    proj = Projections.random(d, generator=g)
    assert permutation_gap(x, perm, proj) < 1e-10


def test_causal_mask_and_positions_break_equivariance():
    gaps = equivariance_trials(5, 4, 30, generator=torch.Generator().manual_seed(3))
    equivariant, causal, positions = gaps.values()
    assert max(equivariant) < 1e-12
    assert min(causal) > 1e-6 and min(positions) > 1e-6


def test_order_preserving_permutation_keeps_causal_output():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=g, dtype=torch.float64)
    proj = Projections.random(3, generator=g)
    assert permutation_gap(x, torch.arange(4), proj, causal=True) == 0.0


def test_causal_table_and_single_query_weights():
    table = causal_visibility(["a", "b", "c"])
    assert table.to_numpy().tolist() == [["Allowed", "Blocked", "Blocked"],
                                         ["Allowed", "Allowed", "Blocked"],
                                         ["Allowed", "Allowed", "Allowed"]]
    w = single_query_weights([2.0, 1.0, 0.5], blocked=(0,))
    z = math.exp(1.0) + math.exp(0.5)
    torch.testing.assert_close(w, torch.tensor([0.0, math.exp(1.0) / z, math.exp(0.5) / z], dtype=torch.float64))
