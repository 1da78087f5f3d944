"""The rules every figure of the book is held to, checked on the drawn figure (tests/test_figures.py runs them on every
chapter's figures): `layout_problems` (text size at the column's width, legends off the data, a colour bar for every
heat map, labelled log ticks, colour scales that cover their data) and `colour_problems` (every two colours shown
together told apart, by a reader with full colour vision and by a deuteranope)."""

from __future__ import annotations

import itertools

import numpy as np

from companion.book.chapters.plots import COLUMN_IN, MIN_PT, SEQUENCE
from companion.book.colours import MIN_APART, MIN_APART_CVD, delta_e, dichromat_delta_e

__all__ = ["layout_problems", "colour_problems"]


def _is_colorbar(ax) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def layout_problems(fig, *, column: float = COLUMN_IN, min_pt: float = MIN_PT) -> list[str]:
    """What `fig` breaks of the book's figure rules, in words (empty when none): text under `min_pt` once shrunk to
    `column` inches; a legend over an axes' data; a heat map (imshow) with no colour bar on its scale; a log axis
    with fewer than two labelled ticks; an image whose colour scale stops inside its data's range (a value beyond
the scale is drawn as the scale's end, so the reader reads it wrong). Draws the figure (Agg) to measure it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems: list[str] = []
    scale = min(1.0, column / fig.get_figwidth())
    small = sorted({(round(t.get_fontsize() * scale, 1), t.get_text()) for t in fig.findobj(Text)
                    if t.get_visible() and t.get_text().strip() and t.get_fontsize() * scale < min_pt - 1e-6})
    problems += [f"text {text!r} at {size} pt on the page (< {min_pt})" for size, text in small[:5]]
    data_axes = [ax for ax in fig.axes if not _is_colorbar(ax) and ax.get_visible()]
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in data_axes:
            overlap = box.intersection(box, ax.bbox)
            if overlap is not None and overlap.width > 1 and overlap.height > 1:
                problems.append(f"a legend ({', '.join(t.get_text() for t in legend.get_texts()[:3])}…) "
                                f"lies over the data of axes {ax.get_title()!r}")
    bars = [ax._colorbar.mappable for ax in fig.axes if _is_colorbar(ax)]
    for ax in data_axes:
        for image in ax.images:
            if image.get_gid() == "picture":
                continue
            if image.get_gid() == "binary":
                if not _has_swatches(fig, image):
                    problems.append(f"the binary map in axes {ax.get_title()!r} has no two-swatch legend")
                continue
            if not any(m is image or (m.get_cmap().name == image.get_cmap().name and m.get_clim() == image.get_clim())
                       for m in bars):
                problems.append(f"the heat map in axes {ax.get_title()!r} has no colour bar")
            if (clipped := _clipped(image)) is not None:
                problems.append(f"the heat map in axes {ax.get_title()!r} clips its data: {clipped}")
    for ax in data_axes:
        for name in ("x", "y"):
            if getattr(ax, f"{name}axis").get_scale() not in ("log", "symlog"):
                continue
            # panels sharing the axis are read from the one that carries the labels
            shared = getattr(ax, f"get_shared_{name}_axes")().get_siblings(ax)
            shown = max(_labelled_ticks(a, name) for a in shared)
            if shown < 2:
                problems.append(f"the log {name} axis of {ax.get_title()!r} shows {shown} labelled tick(s)")
    return problems


def _clipped(image) -> str | None:
    """Where the finite values of a colour-mapped image fall outside its norm's limits by more than one of its
    colour map's steps (closer, they take the end colour anyway: a rounded value a hair past a limit), in words;
    None when they do not (an RGB picture has no norm to clip)."""
    values = np.ma.masked_invalid(np.ma.asarray(image.get_array(), dtype=float)).compressed()
    if np.ndim(image.get_array()) != 2 or not values.size:
        return None
    lo, hi = float(values.min()), float(values.max())
    vmin, vmax = image.norm.vmin, image.norm.vmax
    slack = max(abs(vmax - vmin) / image.cmap.N, 1e-9 * max(abs(vmin), abs(vmax), 1e-300))
    if lo >= vmin - slack and hi <= vmax + slack:
        return None
    return f"its values span {lo:.3g}…{hi:.3g}, its colour scale {vmin:.3g}…{vmax:.3g}"


def colour_problems(fig, *, apart: float = MIN_APART, apart_cvd: float = MIN_APART_CVD) -> list[str]:
    """The colours of `fig` a reader could confuse, in words (empty when none): two distinct colours drawn in one
    axes, or shown in one legend, less than `apart` apart (CIEDE2000), or less than `apart_cvd` apart as a
    protanope or a deuteranope sees them (`colours.dichromat_delta_e`). Counted, at full strength (a faint seed
    line is its method's colour): lines and their markers, dots, bars, spans, bands and error bars, reference
    lines in black or grey included. Not counted: colour-mapped images and collections (their scale is a colour
    bar), text, spines and grids, and lines whose gid is `SEQUENCE`, shades of one colour map drawn on purpose as
    an ordered set (heads 0…7), in their axes and in a legend."""
    axes = [ax for ax in fig.axes if not _is_colorbar(ax) and ax.get_visible()]
    sequence = {c for ax in axes for a in _artists(ax) if a.get_gid() == SEQUENCE for c in _colours(a)}
    groups = [(f"axes {ax.get_title()!r}", set().union(*(_colours(a) for a in _artists(ax) if a.get_gid() != SEQUENCE)))
              for ax in axes]
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    groups += [(f"the legend ({', '.join(t.get_text() for t in legend.get_texts()[:3])}…)",
                set().union(*(_colours(h) for h in legend.legend_handles if h is not None)) - sequence)
               for legend in legends]
    problems: list[str] = []
    for where, shown in groups:
        for a, b in itertools.combinations(sorted(shown), 2):
            if (seen := delta_e(a, b)) < apart:
                problems.append(f"{where}: {a} and {b} are {seen:.1f} apart (ΔE00 < {apart})")
            elif (seen := dichromat_delta_e(a, b)) < apart_cvd:
                problems.append(f"{where}: {a} and {b} are {seen:.1f} apart to a red-green dichromat (ΔE00 < {apart_cvd})")
    return list(dict.fromkeys(problems))


def _artists(ax) -> list:
    return [*ax.lines, *ax.collections, *ax.patches]


def _colours(artist) -> set[str]:
    """The colours ("#rrggbb") an artist shows as categories: a line's (and its markers' fill), a patch's fill (its
    edge if unfilled), a collection's fills (a line collection's strokes); none for a colour-mapped collection."""
    from matplotlib.collections import Collection, LineCollection
    from matplotlib.colors import to_hex, to_rgba_array
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if artist is None or not artist.get_visible() or artist.get_alpha() == 0:
        return set()
    if isinstance(artist, Line2D):
        if not len(artist.get_xdata()) or artist.get_linestyle() in ("None", "") and artist.get_marker() in (None, "", "None", " "):
            return set()
        shown = [artist.get_color()]
        if artist.get_marker() not in (None, "", "None", " "):
            shown.append(artist.get_markerfacecolor())
    elif isinstance(artist, Patch):
        shown = [artist.get_facecolor() if artist.get_fill() else artist.get_edgecolor()]
    elif isinstance(artist, Collection):
        if artist.get_array() is not None:
            return set()
        faces = artist.get_facecolor()
        shown = list(artist.get_edgecolor() if isinstance(artist, LineCollection) or not len(faces) else faces)
    else:
        return set()
    rgba = [c for c in to_rgba_array([c for c in shown if not (isinstance(c, str) and c.lower() == "none")]) if c[3] > 0]
    return {to_hex(c[:3]) for c in rgba} - {"#ffffff"}  # white on the white page is no colour (a legend's title entry)


def _has_swatches(fig, image) -> bool:
    """Whether a legend of `fig` shows a swatch of each of `image`'s two colours."""
    from matplotlib.colors import to_hex
    from matplotlib.patches import Patch

    wanted = {to_hex(image.cmap(image.norm(v))) for v in (0, 1)}
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    return any(wanted <= {to_hex(h.get_facecolor()) for h in legend.legend_handles if isinstance(h, Patch)}
               for legend in legends)


def _labelled_ticks(ax, name: str) -> int:
    """How many ticks of one axis carry a visible, non-empty label inside the view limits."""
    part = getattr(ax, f"{name}axis")
    lo, hi = sorted(getattr(ax, f"get_{name}lim")())
    return sum(1 for t, v in zip(part.get_ticklabels(), part.get_ticklocs())
               if t.get_visible() and t.get_text().strip() and lo - 1e-9 * abs(lo) <= v <= hi + 1e-9 * abs(hi))
