"""Colour distances (CIEDE2000 against the published test pairs) and the book's palette: no two
meanings share a colour."""

import itertools

import pytest

from companion.book import colours, labels
from companion.book.chapters import plots

# Sharma, Wu & Dalal (2005), Table 1: (L*, a*, b*) pairs and their ΔE₀₀ to four decimals, chosen to
# exercise the hue rotation near blue, the mean hue across 0°, and large differences.
SHARMA = [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 3.1571, -77.2803), (50.0, 0.0, -82.7485), 2.8615),
    ((50.0, 2.8361, -74.0200), (50.0, 0.0, -82.7485), 3.4412),
    ((50.0, -1.3802, -84.2814), (50.0, 0.0, -82.7485), 1.0000),
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((50.0, 2.5, 0.0), (61.0, -5.0, 29.0), 22.8977),
    ((50.0, 2.5, 0.0), (56.0, -27.0, -3.0), 31.9030),
    ((50.0, 2.5, 0.0), (58.0, 24.0, 15.0), 19.4535),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
]


@pytest.mark.parametrize("first, second, expected", SHARMA)
def test_ciede2000_matches_the_published_pairs_both_ways(first, second, expected):
    assert colours.delta_e(first, second) == pytest.approx(expected, abs=5e-5)
    assert colours.delta_e(second, first) == pytest.approx(expected, abs=5e-5)


def test_lab_of_white_black_and_srgb_red():
    assert colours.lab("#ffffff") == pytest.approx((100.0, 0.0, 0.0), abs=1e-3)
    assert colours.lab("#000000") == pytest.approx((0.0, 0.0, 0.0), abs=1e-9)
    assert colours.lab("#ff0000") == pytest.approx((53.24, 80.09, 67.20), abs=0.02)  # CIE 15 with D65
    assert colours.delta_e("#123456", "#123456") == 0.0


def test_a_colour_that_is_not_six_hex_digits_is_named_in_the_error():
    with pytest.raises(ValueError, match="'#abc'"):
        colours.lab("#abc")


def test_closest_pair_finds_the_pair_a_reader_confuses():
    # the two near-oranges the book once gave Structured (SVD) and RoPE, among clearly other colours
    d, a, b = colours.closest_pair({"svd": "#e07b39", "rope": "#d95f02", "goat": "#1b6ca8", "default": "#4d4d4d"})
    assert {a, b} == {"svd", "rope"} and d < colours.MIN_APART


def test_every_meaning_has_its_own_colour():
    """Methods, positions (methods of Part IV), the categorical cycle (placements, heads, symbols)
    and the ink grey: every pair at least MIN_APART apart."""
    meanings = {**{m: labels.colour(m) for m in labels.METHODS},
                **{f"cycle {i}": c for i, c in enumerate(plots.PALETTE)}, "ink": plots.INK}
    distance, a, b = colours.closest_pair(meanings)
    assert distance >= colours.MIN_APART, f"{a} and {b} are {distance:.1f} apart (< {colours.MIN_APART})"


def test_variants_drawn_together_are_apart_and_a_variant_of_a_method_keeps_its_colour():
    variants = {v: labels.colour(v) for v in labels.VARIANTS}
    distinct = {c: v for v, c in variants.items()}  # a variant that computes a method shares its colour
    distance, a, b = colours.closest_pair({v: c for c, v in distinct.items()})
    assert distance >= colours.MIN_APART - 1, f"{a} and {b} are {distance:.1f} apart"
    assert len(distinct) == len(variants), "two variants share a colour"


# ColorAide's test suite (facelessuser/coloraide, tests/test_cvd.py): CSS colours through Machado et al.'s
# severity-1.0 matrices in linear sRGB, as sRGB 0…255 before clipping; `simulate` clips to the gamut.
MACHADO = [("#ff0000", "deuteranopia", (163.22, 144.28, -28.312)), ("#ff0000", "protanopia", (108.79, 95.027, -12.596)),
           ("#008000", "deuteranopia", (119.39, 106.36, 24.233)), ("#ffa500", "deuteranopia", (216.62, 192.97, 13.854)),
           ("#ee82ee", "protanopia", (120.65, 161.38, 241.7)), ("#0000ff", "protanopia", (-124.94, 88.706, 260.74))]


@pytest.mark.parametrize("colour, deficiency, published", MACHADO)
def test_dichromat_simulation_matches_the_published_values(colour, deficiency, published):
    seen = colours.simulate(colour, deficiency)
    channels = [int(seen[i:i + 2], 16) for i in (1, 3, 5)]
    assert channels == pytest.approx([min(255.0, max(0.0, v)) for v in published], abs=0.51)


def test_a_dichromat_sees_greys_as_greys_and_an_unknown_deficiency_is_named():
    for grey in ("#000000", "#4d4d4d", "#8c8c8c", "#ffffff"):
        assert all(colours.delta_e(colours.simulate(grey, d), grey) < 0.5 for d in colours.DEFICIENCIES)
    with pytest.raises(ValueError, match="'tritanopia'.*protanopia, deuteranopia"):
        colours.simulate("#ff0000", "tritanopia")


def test_the_methods_a_chapter_draws_together_stay_apart_to_a_dichromat():
    """Each chapter's methods (its experiments' lists) and Chapter 10's variants that compute a prior differently,
    with the black of reference lines: at least MIN_APART to a trichromat and MIN_APART_CVD to a protanope and a
    deuteranope (ALiBi's olive was 6.8 from RoPE's green to a deuteranope; the mimetic start's brown 1.8 from
    the mask's red to a protanope)."""
    from companion.book.chapters import ch10_cost as cr
    from companion.book.chapters.ch09_extrapolation import READINGS
    from companion.cost import records
    from companion.experiments import arithmetic, copy_mixture, gotu, images
    from companion.paths import repo_root

    cpu = cr.frame(records.load(repo_root() / cr.RESULTS / f"{cr.CPU_RESULT}.json"))  # the sweep Chapter 10 draws
    groups = {"gotu": gotu.METHODS, "arithmetic": arithmetic.METHODS, "images": images.METHODS,
              "copy-mixture": copy_mixture.METHODS, "extrapolation": READINGS, "cost (CPU)": tuple(set(cpu.variant))}
    for group, names in groups.items():
        drawn = {n: labels.colour(n) for n in names} | {"black": "#000000"}
        for (a, first), (b, second) in itertools.combinations(drawn.items(), 2):
            assert colours.delta_e(first, second) >= colours.MIN_APART, f"{group}: {a} and {b}"
            assert colours.dichromat_delta_e(first, second) >= colours.MIN_APART_CVD, f"{group}: {a} and {b} to a dichromat"
