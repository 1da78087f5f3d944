"""Chapter 1's worked examples (equivariance as a property test, and where it fails), its claim
measures and the numbers its prose cites."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from companion import sinusoidal_positions
from companion.book.chapters.ch01_foundations import (
    SETTINGS, Projections, attend_error, blocking_cases, blocking_table, blocking_weights, causal_visibility,
    causal_weights, claim_measures, equivariance_trials, gap_summary, matches_source, permutation_gap, prose_numbers,
    random_qkv, renormalisation, renormalisation_gap, single_query_weights, source_comparison, stated_pe2,
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


TOKENS = ["grid", "load", "rises"]


def _gaps(equivariant, causal, positions):
    return dict(zip(SETTINGS, (equivariant, causal, positions)))


def test_the_source_table_matches_cell_by_cell_and_a_changed_cell_does_not():
    table = causal_visibility(TOKENS)
    assert matches_source(table) and source_comparison(table).to_numpy().all()
    table.iloc[0, 1] = "Allowed"
    assert not matches_source(table)
    assert source_comparison(table).to_numpy().sum() == 8 and not source_comparison(table).iloc[0, 1]


def test_blocking_cases_are_the_closed_form_softmax_rows():
    e = [math.exp(s) for s in (2.0, 1.0, 0.5)]
    cases = blocking_cases([2.0, 1.0, 0.5])
    torch.testing.assert_close(cases.open, torch.tensor(e, dtype=torch.float64) / sum(e), rtol=1e-15, atol=0)
    assert float(cases.zero[0]) == pytest.approx(1 / (1 + e[1] + e[2]), rel=1e-15)
    assert float(cases.blocked[0]) == 0.0
    table = blocking_table(cases, TOKENS)
    assert table.index.tolist() == ["all open", "grid's score set to 0", "grid blocked"]
    assert table.columns.tolist() == TOKENS and table.loc["grid blocked", "grid"] == 0.0
    assert blocking_weights(cases, TOKENS)["all open"] == cases.open.tolist()


def test_renormalisation_divides_every_survivor_by_one_minus_the_blocked_weight():
    cases = blocking_cases([2.0, 1.0, 0.5])
    ratios, factor = renormalisation(cases)
    e = [math.exp(s) for s in (2.0, 1.0, 0.5)]
    assert float(factor) == pytest.approx(sum(e) / (e[1] + e[2]), rel=1e-15)
    torch.testing.assert_close(ratios, torch.full((2,), float(factor), dtype=torch.float64))
    assert renormalisation_gap(cases) < 1e-15


def test_attend_names_the_row_with_nothing_to_read():
    q, k, v = random_qkv(3, 4, 0)
    allowed = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    error = attend_error(q, k, v, allowed)
    assert error.startswith("ValueError") and "rows [1]" in error
    assert attend_error(q, k, v, torch.ones(3, 3, dtype=torch.bool)) == "no error raised"


def test_causal_weights_are_zero_above_the_diagonal_and_rows_sum_to_one():
    w = causal_weights(*random_qkv(3, 4, 0))
    assert (w[np.triu_indices(3, 1)] == 0).all()
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=0, atol=1e-15)


def test_gap_summary_writes_rounding_as_a_bound_and_small_gaps_in_e_notation():
    """Gaps that rounding alone makes differ from processor to processor: they read "< 1e-13" on every
    one; a gap above that floor but small is in e-notation, a real one to three places."""
    summary = gap_summary(_gaps([1e-16, 3e-15], [0.5, 0.2164], [0.1776, 0.9]))
    assert summary.loc[SETTINGS[0]].tolist() == ["< 1e-13", "< 1e-13"]
    assert summary.loc[SETTINGS[1]].tolist() == ["0.500", "0.216"]
    assert gap_summary(_gaps([2e-12, 0.0], [0.5], [0.2])).loc[SETTINGS[0]].tolist() == ["2.0e-12", "< 1e-13"]


def test_claim_measures_of_the_chapter_example():
    table, cases = causal_visibility(TOKENS), blocking_cases([2.0, 1.0, 0.5])
    pe2 = sinusoidal_positions(2, 2, dtype=torch.float64)
    gaps = _gaps([1e-16, 3e-15], [0.5, 0.2164], [0.1776, 0.9])
    m = claim_measures(table, cases, "ValueError: rows [1] of the mask allow no key", gaps, pe2)
    assert list(m) == [f"S1-0{i}" for i in range(1, 10)]
    assert m["S1-01"] is True and m["S1-05"] is True
    assert m["S1-02"] == 0.0 and m["S1-03"] == float(cases.zero[0])
    assert m["S1-04"] == renormalisation_gap(cases)
    assert (m["S1-06"], m["S1-07"], m["S1-08"]) == (3e-15, 0.2164, 0.1776)
    assert m["S1-09"] == float((pe2 - stated_pe2()).abs().max()) < 1e-15
    assert claim_measures(table, cases, "no error raised", gaps, pe2)["S1-05"] is False


def test_prose_numbers_of_the_chapter_example():
    table, cases = causal_visibility(TOKENS), blocking_cases([2.0, 1.0, 0.5])
    gaps = _gaps([1e-16, 3e-15], [0.5, 0.2164], [0.1776, 0.9])
    text = prose_numbers(table, cases, gaps, sinusoidal_positions(2, 2, dtype=torch.float64))
    e = [math.exp(s) for s in (2.0, 1.0, 0.5)]
    assert text == {
        "ch1_n_allowed": "6", "ch1_n_cells": "9",
        "ch1_w_grid_zero": str(round(1 / (1 + e[1] + e[2]), 4)), "ch1_w_grid_blocked": "0.0",
        "ch1_w_grid_open_pct": str(round(100 * e[0] / sum(e), 1)),
        "ch1_renorm_factor": str(round(sum(e) / (e[1] + e[2]), 4)),
        "ch1_load_before": str(round(e[1] / sum(e), 4)), "ch1_load_after": str(round(e[1] / (e[1] + e[2]), 4)),
        "ch1_trials": "2", "ch1_gap_equivariant": "< 1e-13", "ch1_gap_causal_min": "0.216",
        "ch1_gap_positions_min": "0.178", "ch1_pe1_sin": "0.8415", "ch1_pe1_cos": "0.5403",
    }
    assert text["ch1_w_grid_zero"] == "0.1863" and text["ch1_w_grid_open_pct"] == "62.9"
    assert text["ch1_renorm_factor"] == "2.692"


def test_the_encoding_table_shows_sin_and_cos_of_each_position():
    from companion.book.chapters.ch01_foundations import encoding_table

    table = encoding_table(sinusoidal_positions(2, 2, dtype=torch.float64))
    assert table.loc[1].tolist() == [f"{math.sin(1):.4f}", f"{math.cos(1):.4f}"]
    assert table.loc[0].tolist() == ["0.0000", "1.0000"] and table.index.name == "position p"
