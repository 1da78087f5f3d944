"""Numbers and small tables for the page (companion.book.prose)."""

import numpy as np
import pandas as pd

from companion.book.prose import checks_table, num, page_table, pct, signed


def test_checks_table_reads_like_a_table_not_a_dict():
    t = checks_table({"bound holds": True, "violations": 0, "worst ratio": 2.6923076, "numpy flag": np.bool_(False)})
    assert t.index.name == "check" and list(t.columns) == ["result"]
    assert t["result"].tolist() == ["yes", 0, "2.692", "no"]
    assert checks_table({"a": 1.0}, column="factor").columns.tolist() == ["factor"]


def test_numbers_have_no_negative_zero_and_a_dash_for_missing():
    assert num(-0.001) == "0.00" and signed(-0.04) == "0.0" and signed(0.26) == "+0.3"
    assert pct(0.873) == "87.3 %" and pct(float("nan")) == "—" and num(None) == "—"


def test_page_table_labels_rounds_and_dashes_missing_cells():
    f = pd.DataFrame({256: [1.0, np.nan], 512: [-0.001, 1.234]}, index=["sdpa", "flex"])
    t = page_table(f)
    assert t.index.tolist() == ["SDPA, no prior", "GOAT (FlexAttention)"]
    assert t.loc["GOAT (FlexAttention)"].tolist() == ["—", "1.23"] and t.loc["SDPA, no prior", 512] == "0.00"


def test_table_cells_for_seeds_differences_and_p_values():
    from companion.book.prose import diff_interval, mean_sd, p_text

    assert mean_sd([50.0, 60.0, 70.0]) == "60.0 ± 10.0" and mean_sd([0.5], 2) == "0.50"
    assert mean_sd([]) == "—" and mean_sd([float("nan")]) == "—" and mean_sd([-0.01, 0.01]) == "0.0 ± 0.0"
    assert diff_interval(10.06, 3.44, 16.8) == "+10.1 [3.4, 16.8]"
    assert diff_interval(-0.04, -0.12, 0.04) == "0.0 [−0.1, 0.0]" and diff_interval(float("nan"), 0, 0) == "—"
    assert p_text(0.0004) == "< 0.001" and p_text(0.005) == "0.0050" and p_text(0.0736) == "0.074"
    assert p_text(0.5) == "0.50" and p_text(1.0) == "1.0" and p_text(0.00123) == "0.0012"
    assert p_text(float("nan")) == "—"


def test_a_check_gap_is_a_bound_under_the_floor_and_a_negative_gap_has_a_true_minus():
    from companion.book.prose import below

    assert below(0.0) == "< 1e-13" and below(-5e-14) == "< 1e-13"
    assert below(2e-4, fmt=".0e") == "2e-04"
    assert below(-2e-4, fmt=".0e") == "\u22122e-04"  # the sign is the page's minus; e-notation keeps its exponent
