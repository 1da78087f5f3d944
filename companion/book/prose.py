"""Numbers for the prose: a chapter module formats them, `glue_all` glues them, the text cites them.

Every number in a chapter's text is glued from an executed cell (`{glue:text}` in the markdown). A
chapter module returns the numbers its prose cites as a {name: text} dict, formatted as the text
reads them; the notebook glues them in one line. The helpers here format the usual kinds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from companion.book.labels import label

__all__ = ["glue_all", "pct", "num", "signed", "mean_sd", "diff_interval", "p_text", "checks_table", "page_table"]


# Float64 checks whose exact answer is 0 differ from it by rounding, and rounding differs between
# processors (another summation order, another vector width). Below these floors a gap is written as
# a bound, so the page reads the same on every machine: float64 rounding at this book's sizes stays
# under 1e-14 (measured up to 6e-15), and central differences at ε = 1e-6 are accurate to about 1e-10.
ROUNDOFF, DIFFERENCES = 1e-13, 1e-9


def below(x: float, floor: float = ROUNDOFF, fmt: str = ".1e") -> str:
    """A check's gap as the page writes it: "< 1e-13" under `floor` (0 included), else in `fmt`, a
    negative gap with a true minus ("−2e-04"; the exponent keeps e-notation's hyphen)."""
    if abs(x) < floor:
        return f"< {floor:.0e}"
    text = format(x, fmt)
    return MINUS + text[1:] if text.startswith("-") else text


def glue_all(values: dict[str, Any]) -> None:
    """Glue every {name: value} without displaying it (`myst_nb.glue(name, value, display=False)`)."""
    from myst_nb import glue

    for name, value in values.items():
        glue(name, value, display=False)


def pct(x: float, digits: int = 1, *, sign: bool = False) -> str:
    """A share in [0, 1] as a percentage: 0.873 → "87.3 %" ("—" for NaN or None)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{100 * x:{'+' if sign else ''}.{digits}f} %".replace("-", MINUS)


MINUS = "−"  # U+2212: the page's minus sign, never a hyphen


def num(x: float, digits: int = 2) -> str:
    """A number with fixed digits, a true minus sign and no negative zero ("—" for NaN or None)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    text = f"{x:.{digits}f}"
    if text.startswith("-"):
        return text[1:] if float(text) == 0 else MINUS + text[1:]
    return text


def signed(x: float, digits: int = 1) -> str:
    """A difference with its sign: +3.2, −0.5 (a true minus; 0 without a sign; "—" for NaN or None)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text.replace("-", MINUS)


def mean_sd(values, digits: int = 1) -> str:
    """Values over seeds as a table cell: "62.4 ± 39.7" (mean ± standard deviation, ddof = 1; the mean
    alone for one value; "—" for none), no negative zero."""
    x = np.asarray([v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))], dtype=float)
    if not len(x):
        return "—"
    return num(float(x.mean()), digits) if len(x) == 1 else f"{num(float(x.mean()), digits)} ± {num(float(x.std(ddof=1)), digits)}"


def diff_interval(mean: float, lo: float, hi: float, digits: int = 1) -> str:
    """A difference with its interval as a table cell: "+10.1 [3.4, 16.8]" ("—" when not measured)."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    return f"{signed(mean, digits)} [{num(lo, digits)}, {num(hi, digits)}]"


def p_text(p: float) -> str:
    """A p-value as a table cell: two significant digits (0.074, 0.50), "< 0.001" below that, "—" when
    there is none."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:#.2g}"


def checks_table(checks: dict[str, Any], column: str = "result"):
    """A {check: outcome} dict as a one-column table for the page: booleans read "yes"/"no", floats
    keep 4 significant figures, other values as they are (a table, never a printed dict)."""
    def cell(v):
        if isinstance(v, bool) or (hasattr(v, "dtype") and str(getattr(v, "dtype", "")) == "bool"):
            return "yes" if bool(v) else "no"
        if isinstance(v, float):
            return f"{v:.4g}"
        return v

    frame = pd.DataFrame({column: [cell(v) for v in checks.values()]}, index=list(checks))
    frame.index.name = "check"
    return frame


def page_table(frame, digits: int = 2, *, labelled: bool = True):
    """A numeric frame as the page shows it: numbers to `digits` places as text (no "-0.00"), "—" where
    nothing was measured (NaN/None), and method or variant names in the index replaced by their
    labels (`companion.book.labels.label`)."""
    def cell(v):
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return "—"
        if isinstance(v, (float, int)) and not isinstance(v, bool):
            return num(float(v), digits)
        return v

    out = frame.apply(lambda col: col.map(cell)) if hasattr(frame, "columns") else frame.map(cell)
    if labelled:
        out = out.rename(index=lambda v: label(v) if isinstance(v, str) else v)
    return out
