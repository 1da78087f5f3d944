"""Theorem 1 / Corollary 1 closed forms against autograd and finite differences (float64), and
Chapter 2's claim measures and prose numbers."""

import math

import pandas as pd
import pytest
import torch

from companion.book.chapters.ch02_mechanism import (
    autograd_jacobian, central_difference, claim_measures, contrast_sweep, corollary1_worst_ratio, dp_dk, dp_dm,
    dp_dq, grad_at, key_growth, log_sigmoid_values, mask_probs, norm_sweep, peak_scale, prose_numbers, qk_gaps,
    saturation, theorem1_gaps, within_rounding, growth_share, content_sweep, adam_first_step,
)


@pytest.mark.parametrize("seed", range(5))
def test_theorem1_matches_autograd_and_finite_differences(seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(6, generator=g, dtype=torch.float64)
    m = 4 * torch.randn(6, generator=g, dtype=torch.float64)
    closed = dp_dm(a, m)
    fn = lambda x: mask_probs(a, x)  # noqa: E731
    torch.testing.assert_close(closed, autograd_jacobian(fn, m), rtol=0, atol=1e-14)
    torch.testing.assert_close(closed, central_difference(fn, m), rtol=0, atol=1e-8)


def test_qk_derivatives_match_autograd():
    g = torch.Generator().manual_seed(7)
    q = torch.randn(5, generator=g, dtype=torch.float64)
    k = torch.randn(4, 5, generator=g, dtype=torch.float64)
    torch.testing.assert_close(dp_dq(q, k), autograd_jacobian(lambda x: torch.softmax(k @ x / math.sqrt(5), -1), q))
    torch.testing.assert_close(dp_dk(q, k), autograd_jacobian(lambda x: torch.softmax(x @ q / math.sqrt(5), -1), k))


def test_corollary1_bound_and_its_tightness():
    # Two equal dominant scores give p_i = p_j = 1/2, where |p_i p_j| = 1/4 attains the bound.
    a = torch.tensor([50.0, 50.0, 0.0], dtype=torch.float64)
    m = torch.zeros(3, dtype=torch.float64)
    ratio = dp_dm(a, m).abs() / (torch.sigmoid(-m) / 4)
    assert ratio.max().item() == pytest.approx(1.0, abs=1e-12)
    g = torch.Generator().manual_seed(0)
    for _ in range(100):
        a, m = 5 * torch.randn(5, generator=g, dtype=torch.float64), 3 * torch.randn(5, generator=g, dtype=torch.float64)
        assert (dp_dm(a, m).abs() <= torch.sigmoid(-m) / 4 + 1e-15).all()


def test_sweeps_show_saturation_and_growth():
    sat = contrast_sweep([1.0, 10.0], a=torch.zeros(4, dtype=torch.float64), open_=torch.tensor([True, False, False, False]))
    assert sat["grad_open"][1] < 1e-4 < sat["grad_open"][0]
    assert sat["sigma_open"][1] == pytest.approx(1 / (1 + math.exp(10)))
    sweep = norm_sweep([0.1, 3.0], n=8, d=16, draws=10, m=0.0, generator=torch.Generator().manual_seed(0))
    assert sweep["key"][1] > 10 * sweep["key"][0]
    assert max(sweep["mask"]) <= sweep["bound_mask"][0]


SWEEP = {"scale": [0.1, 3, 5, 10], "key": [0.01, 0.5, 0.8, 0.2]}
SAT = pd.DataFrame({"contrast": [1, 10], "closed_mass": [0.3, 5.3e-5], "grad_open": [0.07, 1e-5],
                    "grad_closed": [0.05, 1.94e-5], "sigma_open": [0.27, 4.5e-5]}).set_index("contrast")
CONTENT = pd.DataFrame({"spread": [0.5, 1.0, 4.0], "open, max": [1.1e-5, 1.13e-5, 1.1e-5],
                        "closed, max": [1e-4, 1.53e-3, 0.25], "closed, median": [4e-5, 7.13e-5, 1.6e-3],
                        "closed weight": [1e-4, 2e-4, 0.07]}).set_index("spread")


def test_open_and_closed_entries_shift_a_score_by_log_sigmoid():
    values = log_sigmoid_values((10.0, 0.0, -10.0))
    assert values[0.0] == pytest.approx(-math.log(2), rel=1e-15)
    assert values[10.0] == pytest.approx(-math.log1p(math.exp(-10)), rel=1e-15)
    assert values[-10.0] == pytest.approx(-10 - math.log1p(math.exp(-10)), rel=1e-15)
    text = prose_numbers(values, 200, {"autograd": 0.0, "finite differences": 0.0}, 1.0, SWEEP, SAT, CONTENT)
    assert (text["ch2_open"], text["ch2_closed"], text["ch2_ratio"]) == ("-4.54e-05", "-10.0000454", "4.54e-05")


def test_the_chapter_checks_draw_one_stream_in_order():
    g = torch.Generator().manual_seed(0)
    gaps = theorem1_gaps(20, g)
    worst = corollary1_worst_ratio(20, g)
    # the same draws by hand: 20 pairs (a, 3 m), then 20 pairs (5 a, 3 m)
    h = torch.Generator().manual_seed(0)
    fd = 0.0
    for _ in range(20):
        a = torch.randn(5, generator=h, dtype=torch.float64)
        m = 3 * torch.randn(5, generator=h, dtype=torch.float64)
        fd = max(fd, float((dp_dm(a, m) - central_difference(lambda x: mask_probs(a, x), m)).abs().max()))
    ratio = 0.0
    for _ in range(20):
        a = 5 * torch.randn(5, generator=h, dtype=torch.float64)
        m = 3 * torch.randn(5, generator=h, dtype=torch.float64)
        ratio = max(ratio, float((dp_dm(a, m).abs() / (torch.sigmoid(-m) / 4)).max()))
    assert gaps["finite differences"] == fd and worst == ratio
    assert gaps["autograd"] < 1e-15 and 1e-13 < fd < 1e-8 and 0.5 < worst <= 1.0


def test_query_and_key_closed_forms_agree_within_rounding():
    gaps = qk_gaps(torch.Generator().manual_seed(0))
    assert list(gaps) == ["∂p/∂q vs autograd", "∂p/∂k vs autograd", "∂p/∂k vs finite differences"]
    assert within_rounding(gaps) == dict.fromkeys(gaps, True)
    assert within_rounding({"off": 1e-7, "on": 9e-9}) == {"off": False, "on": True}


def test_growth_peak_and_saturation_readouts():
    assert key_growth(SWEEP) == 50.0 and peak_scale(SWEEP) == 5
    assert grad_at(SAT, 10) == 1.94e-5 and grad_at(SAT, 1) == 0.07
    open_ = torch.tensor([True, False, False, False])
    sat = saturation([1.0, 10.0], a=torch.zeros(4, dtype=torch.float64), open_=open_)
    assert sat.index.tolist() == [1.0, 10.0]
    assert sat.loc[10.0, "closed_mass"] == pytest.approx(3 * math.exp(-10) / (1 + 3 * math.exp(-10)), rel=1e-6)


def test_claim_measures_and_prose_numbers():
    gaps = {"autograd": 5.6e-17, "finite differences": 1.7e-10}
    # SWEEP grows from 0.1 to 3 and 3 to 5, then falls to 10: log(50)/log(100) of the range
    assert claim_measures(gaps, 0.999995, SWEEP, SAT, CONTENT) == {
        "S2-01": 1.7e-10, "S2-02": 0.999995, "S2-03": round(math.log(50) / math.log(100), 3), "S2-04": 1.53e-3}
    text = prose_numbers(log_sigmoid_values(), 200, gaps, 0.999995, SWEEP, SAT, CONTENT)
    assert {k: v for k, v in text.items() if k not in ("ch2_open", "ch2_closed", "ch2_ratio", "ch2_adam_step")} == {
        "ch2_draws": "200", "ch2_gap_autograd": "< 1e-13", "ch2_gap_fd": "< 1e-09", "ch2_worst_ratio": "1.0",
        "ch2_key_growth": "50.0", "ch2_peak_scale": "5", "ch2_grow_share": "85%", "ch2_scale_min": "0.1",
        "ch2_scale_max": "10", "ch2_key_at_max": "2.0e-01", "ch2_grad_at_10": "1.9e-05", "ch2_grad_at_1": "0.07",
        "ch2_closed_mass_10": "5.3e-05", "ch2_unit_open": "1.1e-05", "ch2_unit_closed_max": "1.5e-03",
        "ch2_unit_closed_median": "7.1e-05", "ch2_spread_big": "4",
    }
    assert text["ch2_adam_step"] == f"{adam_first_step(1.94e-5):.2e}"


def test_growth_share_reads_the_whole_range():
    assert growth_share({"scale": [1, 10, 100], "key": [1.0, 2.0, 3.0]}) == 1.0
    assert growth_share({"scale": [1, 10, 100], "key": [1.0, 1.0, 1.0]}) == 0.0  # the null: no dependence on norms
    assert growth_share({"scale": [1, 10, 100], "key": [1.0, 2.0, 0.5]}) == pytest.approx(0.5, abs=1e-15)


def test_content_sweep_open_entries_are_capped_and_closed_ones_follow_the_content():
    open_ = torch.tensor([True, True, False, False])
    table = content_sweep([0.0, 1.0], contrast=10.0, open_=open_, draws=3, generator=torch.Generator().manual_seed(0))
    # spread 0: every draw has equal scores; the same Jacobian as the closed form at a = 0
    jac = dp_dm(torch.zeros(4, dtype=torch.float64), torch.tensor([10.0, 10.0, -10.0, -10.0], dtype=torch.float64)).abs()
    assert table.loc[0.0, "open, max"] == float(jac[:, :2].max()) and table.loc[0.0, "closed, max"] == float(jac[:, 2:].max())
    assert table.loc[0.0, "closed, median"] == table.loc[0.0, "closed, max"]
    assert (table["open, max"] <= 1 / (4 * (1 + math.exp(10)))).all()  # σ(−10)/4 caps every open entry
    g = torch.Generator().manual_seed(0)
    torch.randn(3, 4, generator=g, dtype=torch.float64)  # spread 0 consumed the first draws
    a = torch.randn(3, 4, generator=g, dtype=torch.float64)
    m = torch.tensor([10.0, 10.0, -10.0, -10.0], dtype=torch.float64)
    assert table.loc[1.0, "closed, max"] == max(float(dp_dm(r, m).abs()[:, 2:].max()) for r in a)


def test_a_tiny_gradient_is_a_full_adam_step():
    assert adam_first_step(4.5e-5) == pytest.approx(1e-3 * 4.5e-5 / (4.5e-5 + 1e-8), rel=1e-12)
    assert adam_first_step(1.0, lr=0.01) == pytest.approx(0.01 / (1 + 1e-8), rel=1e-12)


def test_sweep_table_pairs_each_derivative_with_its_bound():
    from companion.book.chapters import ch02_mechanism as ch

    sweep = ch.norm_sweep([0.5, 2.0], n=4, d=8, draws=3, m=0.0, generator=torch.Generator().manual_seed(0))
    t = ch.sweep_table(sweep)
    assert t.index.name == "query and key norm c" and t.index.tolist() == [0.5, 2.0]
    assert list(t.columns) == ["largest |∂p/∂m|", "bound on |∂p/∂m|", "largest ‖∂p/∂q‖", "bound on ‖∂p/∂q‖",
                               "largest ‖∂p/∂k‖", "bound on ‖∂p/∂k‖"]
    assert (t["largest |∂p/∂m|"] <= t["bound on |∂p/∂m|"]).all()  # Corollary 1 holds row by row


def test_the_saturation_table_names_its_columns_for_readers():
    from companion.book.chapters.ch02_mechanism import SATURATION_COLUMNS, saturation_table

    table = saturation_table(SAT)
    assert list(table.columns) == list(SATURATION_COLUMNS.values()) and table.index.name == "mask contrast c"
    assert table.loc[10, "weight on closed keys"] == "5.3e-05" and table.loc[1, "σ(−c), an open entry's ∂ log σ/∂m"] == "0.27"
