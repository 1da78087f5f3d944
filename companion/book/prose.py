"""Numbers for the prose: a chapter module formats them, `glue_all` glues them, the text cites them.

Every number in a chapter's text is glued from an executed cell (`{glue:text}` in the markdown). A
chapter module returns the numbers its prose cites as a {name: text} dict, formatted as the text
reads them; the notebook glues them in one line. The helpers here format the usual kinds.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["glue_all", "pct", "num", "signed"]


def glue_all(values: dict[str, Any]) -> None:
    """Glue every {name: value} without displaying it (`myst_nb.glue(name, value, display=False)`)."""
    from myst_nb import glue

    for name, value in values.items():
        glue(name, value, display=False)


def pct(x: float, digits: int = 1, *, sign: bool = False) -> str:
    """A share in [0, 1] as a percentage: 0.873 → "87.3 %" ("—" for NaN or None)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{100 * x:{'+' if sign else ''}.{digits}f} %"


def num(x: float, digits: int = 2) -> str:
    """A number with fixed digits, no negative zero ("—" for NaN or None)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def signed(x: float, digits: int = 1) -> str:
    """A difference with its sign: +3.2, −0.5 (0 without a sign; "—" for NaN or None)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text
