"""How far apart two colours look: CIELAB coordinates and the CIEDE2000 colour difference.

The book gives each meaning its own colour (a method, a way of knowing positions, a placement, a
head); `closest_pair` finds the two colours of a set that a reader is most likely to confuse, and the
figure tests require every pair drawn together to stay at least `MIN_APART` apart. ΔE₀₀ ≈ 1 is the
smallest difference an observer sees side by side; 15 keeps two lines apart at a glance in a legend.

About one man in twelve sees with two kinds of cone where most see with three, red and green the
pair he confuses. `simulate` shows a colour as a protanope or a deuteranope sees it, and
`dichromat_delta_e` is the smaller difference of the two views; colours drawn together keep at least
`MIN_APART_CVD` of it (smaller than `MIN_APART`: two cone types leave a plane of colours, not a space).

References: CIE 15:2004 (sRGB D65 → XYZ → L*a*b*); G. Sharma, W. Wu, E. Dalal, "The CIEDE2000
color-difference formula", Color Research & Application 30 (2005), whose test pairs the tests use;
G. M. Machado, M. M. Oliveira, L. A. F. Fernandes, "A physiologically-based model for simulation of
color vision deficiency", IEEE Transactions on Visualization and Computer Graphics 15 (2009), whose
severity-1.0 matrices `simulate` applies to linear sRGB.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

__all__ = ["lab", "delta_e", "closest_pair", "simulate", "dichromat_delta_e", "DEFICIENCIES", "MIN_APART",
           "MIN_APART_CVD"]

MIN_APART = 15.0
MIN_APART_CVD = 8.0
_WHITE = (0.95047, 1.0, 1.08883)  # D65, Y = 1
_SRGB_TO_XYZ = ((0.4124564, 0.3575761, 0.1804375), (0.2126729, 0.7151522, 0.0721750), (0.0193339, 0.1191920, 0.9503041))


# Machado, Oliveira & Fernandes (2009), severity 1.0: linear sRGB → linear sRGB as the dichromat sees it.
_MACHADO = {"protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
            "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881))}
DEFICIENCIES = tuple(_MACHADO)


def _linear(colour: str) -> list[float]:
    """Linear sRGB (0…1) of "#rrggbb"."""
    text = colour.lstrip("#")
    if len(text) != 6:
        raise ValueError(f"colour {colour!r} is not '#rrggbb'; write it as six hexadecimal digits")
    rgb = [int(text[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    return [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]


def _encoded(c: float) -> float:
    return 12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055


def simulate(colour: str, deficiency: str) -> str:
    """`colour` ("#rrggbb") as a dichromat sees it, `deficiency` one of `DEFICIENCIES`; clipped to the gamut."""
    if deficiency not in _MACHADO:
        raise ValueError(f"deficiency {deficiency!r} is not simulated; choose one of {', '.join(DEFICIENCIES)}")
    linear = _linear(colour)
    seen = [min(1.0, max(0.0, sum(m * c for m, c in zip(row, linear)))) for row in _MACHADO[deficiency]]
    return "#" + "".join(f"{round(255 * _encoded(c)):02x}" for c in seen)


def dichromat_delta_e(first: str, second: str) -> float:
    """The smaller CIEDE2000 difference of two colours seen by a protanope and by a deuteranope."""
    return min(delta_e(simulate(first, d), simulate(second, d)) for d in DEFICIENCIES)


def lab(colour: str) -> tuple[float, float, float]:
    """CIELAB (L*, a*, b*) of an sRGB colour written "#rrggbb" (D65 white)."""
    linear = _linear(colour)
    xyz = [sum(m * c for m, c in zip(row, linear)) / w for row, w in zip(_SRGB_TO_XYZ, _WHITE)]
    f = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def _hue(b: float, a: float) -> float:
    return math.degrees(math.atan2(b, a)) % 360 if (a or b) else 0.0


def delta_e(first: Sequence[float] | str, second: Sequence[float] | str) -> float:
    """CIEDE2000 difference between two colours, given as "#rrggbb" or as CIELAB triples."""
    (l1, a1, b1), (l2, a2, b2) = (lab(c) if isinstance(c, str) else c for c in (first, second))
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar ** 7 / (c_bar ** 7 + 25 ** 7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1, h2 = _hue(b1, a1), _hue(b2, a2)
    dl, dc = l2 - l1, c2 - c1
    dh = 0.0 if c1 * c2 == 0 else h2 - h1
    dh = dh - 360 if dh > 180 else dh + 360 if dh < -180 else dh
    dh_big = 2 * math.sqrt(c1 * c2) * math.sin(math.radians(dh / 2))
    l_bar, c_bar = (l1 + l2) / 2, (c1 + c2) / 2
    if c1 * c2 == 0:
        h_bar = h1 + h2
    elif abs(h1 - h2) <= 180:
        h_bar = (h1 + h2) / 2
    else:
        h_bar = (h1 + h2 + 360) / 2 if h1 + h2 < 360 else (h1 + h2 - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(h_bar - 30)) + 0.24 * math.cos(math.radians(2 * h_bar))
         + 0.32 * math.cos(math.radians(3 * h_bar + 6)) - 0.20 * math.cos(math.radians(4 * h_bar - 63)))
    rotation = 30 * math.exp(-(((h_bar - 275) / 25) ** 2))
    r_c = 2 * math.sqrt(c_bar ** 7 / (c_bar ** 7 + 25 ** 7))
    s_l = 1 + 0.015 * (l_bar - 50) ** 2 / math.sqrt(20 + (l_bar - 50) ** 2)
    s_c, s_h = 1 + 0.045 * c_bar, 1 + 0.015 * c_bar * t
    r_t = -math.sin(math.radians(2 * rotation)) * r_c
    return math.sqrt((dl / s_l) ** 2 + (dc / s_c) ** 2 + (dh_big / s_h) ** 2 + r_t * (dc / s_c) * (dh_big / s_h))


def closest_pair(colours: Mapping[str, str]) -> tuple[float, str, str]:
    """(ΔE₀₀, name, name) of the two named colours that are closest; a ValueError for fewer than two."""
    if len(colours) < 2:
        raise ValueError(f"closest_pair needs at least two colours, got {len(colours)}")
    points = {name: lab(c) for name, c in colours.items()}
    return min((delta_e(points[a], points[b]), a, b) for a, b in itertools.combinations(points, 2))
