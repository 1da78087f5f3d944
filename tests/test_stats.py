"""Multi-seed statistics against hand-computed values."""

import math

import pandas as pd
import pytest

from companion.book.chapters.stats import difference_table, format_summary, minus, paired, summarize, summary_table


def test_t_interval_by_hand():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    # mean 2.5, s = √(5/3) = 1.290994, t_{0.975, 3} = 3.182446, half = 3.182446 · 1.290994 / 2 = 2.054260
    assert s.mean == 2.5 and s.n == 4
    assert s.std == pytest.approx(1.290994, abs=1e-6)
    assert s.lo == pytest.approx(0.445740, abs=1e-5) and s.hi == pytest.approx(4.554260, abs=1e-5)
    assert format_summary(s, 3) == "2.500 ± 1.291 [0.446, 4.554]"


def test_single_seed_has_no_interval():
    s = summarize([0.3])
    assert s.mean == 0.3 and math.isnan(s.std) and math.isnan(s.lo)
    assert format_summary(s, 2) == "0.30"
    with pytest.raises(ValueError, match="at least one"):
        summarize([])


def test_paired_by_seed_by_hand():
    # d = (1, 2, 2): mean 5/3, s = 0.57735, t = 5.0 with 2 df; p = 1 − 5/√27 = 0.037750
    p = paired({0: 1.0, 1: 2.0, 2: 3.0, 9: 100.0}, {0: 0.0, 1: 0.0, 2: 1.0})
    assert p.n == 3 and p.mean_diff == pytest.approx(5 / 3)
    assert p.p_value == pytest.approx(1 - 5 / 27**0.5, abs=1e-6)
    half = 4.302653 * 0.5773503 / 3**0.5  # t_{0.975, 2} = 4.302653
    assert p.lo == pytest.approx(5 / 3 - half, abs=1e-5) and p.hi == pytest.approx(5 / 3 + half, abs=1e-5)
    assert paired({0: 1.0, 1: 2.0}, {0: 1.0, 1: 2.0}).p_value == 1.0
    with pytest.raises(ValueError, match="share no seed"):
        paired({0: 1.0}, {1: 1.0})


def test_tables():
    df = pd.DataFrame({"method": ["a"] * 3 + ["b"] * 3, "seed": [0, 1, 2] * 2,
                       "acc": [1.0, 2.0, 3.0, 0.0, 0.0, 1.0]})
    t = summary_table(df, "method", ["acc"], digits=2)
    assert list(t.index) == ["a", "b"] and t.loc["a", "n"] == 3
    assert t.loc["a", "acc"] == "2.00 ± 1.00 [-0.48, 4.48]"
    by = {m: dict(zip(g.seed, g.acc)) for m, g in df.groupby("method")}
    pt = difference_table({"a": (by["a"], by["b"])}, minus("b"), ["Method"], digits=2)
    assert list(pt.columns) == ["Minus b (points) [95 % interval]", "p (paired t-test)", "Seeds"]
    # d = (1, 2, 2): mean 5/3, half-width 4.302653 · 0.5773503 / √3 = 1.434218; p = 0.037750
    assert pt.loc["a"].tolist() == ["+1.67 [0.23, 3.10]", "0.038", 3] and pt.index.name == "Method"
    two = difference_table({("x", "a"): (by["a"], by["b"]), ("x", "b"): (by["b"], by["a"])}, minus("a"), ["Set", "M"])
    assert two.index.names == ["Set", "M"] and two.iloc[1, 0] == "−1.7 [−3.1, −0.2]"
