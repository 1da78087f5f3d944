"""Figure helpers shared by the chapters: one style, small functions that draw onto given axes.

Colours and labels come from `companion.book.labels` (a method has one colour in every chapter); `mean_interval`
is the one way a chapter draws a quantity's mean over seeds with its interval.

A figure is drawn at the width of the text column (`COLUMN_IN`, via `panels`) so that its text keeps its point
size on the page (a wider figure is shrunk, its text with it). Legends sit outside the data (`legend_below`,
`legend_right`), heat maps carry a colour bar (`shared_colorbar` for panels on one scale) whose scale holds
all of the map's data, and a log axis labels its ticks (`log_ticks`). `figure_checks` holds every drawn figure to
these rules and to colours a reader can tell apart.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from companion.book.labels import colour, label

__all__ = ["use_style", "heatmap", "map_grid", "grouped_bars", "mean_interval", "binary_map", "swatches", "PALETTE", "INK", "COLUMN_IN", "MIN_PT", "panels",
           "mosaic", "picture", "legend_below", "legend_right", "shared_colorbar", "log_ticks", "SEQUENCE"]

# The cycle for things that are not methods (placements, heads, symbols…): neighbours differ in lightness as well
# as hue, and each is at least `colours.MIN_APART` from every method's colour.
PALETTE = ("#1010c8", "#a87860", "#004808", "#a888f8", "#780840", "#006860")
INK = "#8c8c8c"  # strokes that carry no meaning of their own: lines joining a seed's pair, grids
SEED_LW, SEED_ALPHA, MEAN_LW = 0.6, 0.35, 2.0  # one seed's line, and the mean over seeds drawn over them
COLUMN_IN = 7.0  # width of the book's text column in inches: a wider figure is shrunk to it
MIN_PT = 9.0  # the smallest text on the page, in points, after that shrinking
SEQUENCE = "sequence"  # the gid of lines drawn in shades of one colour map on purpose (an ordered set, not categories)


# Every text size of the style, in points: none below MIN_PT at the column's width.
_FONTS = {"font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "xtick.labelsize": 9, "ytick.labelsize": 9,
          "legend.fontsize": 9, "legend.title_fontsize": 9, "figure.titlesize": 10}


def use_style() -> None:
    """The book's figure and table style (call once per chapter): tables show whole cells."""
    pd.set_option("display.max_colwidth", None)
    _retina()
    plt.rcParams.update({
        "figure.dpi": 110, "savefig.dpi": 110, "figure.figsize": (COLUMN_IN, 3.6),
        "axes.spines.top": False, "axes.spines.right": False, "axes.grid": False,
        "axes.prop_cycle": plt.cycler(color=PALETTE), **_FONTS, "legend.frameon": False,
    })


def _retina() -> None:
    """In IPython, show figures as retina PNGs (twice the pixels), sharp on dense screens and in print."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is not None:
        set_matplotlib_formats("retina")


def heatmap(ax, values, *, xlabels=None, ylabels=None, cmap="Blues", vmin=None, vmax=None,
            annotate: str | None = None, title: str = "", xlabel: str = "", ylabel: str = "", colorbar=True):
    """Matrix as an image, rows top to bottom; `annotate` formats cell text, e.g. "{:.2f}" ("—" where no value)."""
    values = np.asarray(values, dtype=float)
    im = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if xlabels is not None:
        ax.set_xticks(range(len(xlabels)), xlabels)
    if ylabels is not None:
        ax.set_yticks(range(len(ylabels)), ylabels)
    if annotate:  # white text on dark cells, black on light ones, whichever end of the colour map is dark
        for (r, c), v in np.ndenumerate(values):
            red, green, blue, _ = im.cmap(im.norm(v)) if np.isfinite(v) else (1, 1, 1, 1)
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
            ax.text(c, r, annotate.format(v) if np.isfinite(v) else "—", ha="center", va="center", fontsize=MIN_PT, color="white" if dark else "black")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return im


def grouped_bars(ax, groups: dict[str, list[float]], labels: list[str], *, ylabel: str = "", title: str = "",
                 annotate: str = "{:.3f}"):
    """One cluster of bars per label, one bar per group (dict order), values written on top."""
    n = len(groups)
    width = 0.8 / n
    x = np.arange(len(labels))
    for g, (name, vals) in enumerate(groups.items()):
        bars = ax.bar(x + (g - (n - 1) / 2) * width, vals, width, label=name, color=PALETTE[g % len(PALETTE)])
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), annotate.format(v), ha="center", va="bottom", fontsize=MIN_PT)
    ax.set_xticks(x, labels)
    ax.set(ylabel=ylabel, title=title)
    legend_right(ax)


def mean_interval(ax, data, *, x: str, y: str, hue: str = "method", interval: str = "ci",
                  hue_order: Sequence[str] | None = None, labels: dict | None = None, units: str = "seed", **kwargs):
    """Mean of `y` over seeds against `x`, one line per `hue` value, with its spread: `interval` "seeds" (each seed
    a thin line, the mean bold: seeds that split into groups stay visible) or "ci" (95 % bootstrap interval of the
    mean, fixed seed; for quantities whose seeds do not split). `data` is long form (`frames.long_curves`; `units`
    names its seed column); methods get the book's colours and labels, `labels` overrides a hue's legend text; a
    `style` column's legend entries are drawn in `INK` (their dashes, not a colour, tell them apart)."""
    import seaborn as sns

    if interval not in ("seeds", "ci"):
        raise ValueError(f"interval={interval!r}: draw the seeds (\"seeds\") or a 95 % interval of the mean (\"ci\").")
    order = list(hue_order) if hue_order is not None else list(dict.fromkeys(data[hue]))
    palette = {h: colour(h) if hue == "method" else PALETTE[i % len(PALETTE)] for i, h in enumerate(order)}
    if interval == "seeds":
        thin = {k: v for k, v in kwargs.items() if k not in ("marker", "err_style")}
        sns.lineplot(data=data, x=x, y=y, hue=hue, hue_order=order, palette=palette, units=units, estimator=None,
                     lw=SEED_LW, alpha=SEED_ALPHA, legend=False, ax=ax, **thin)
        sns.lineplot(data=data, x=x, y=y, hue=hue, hue_order=order, palette=palette, errorbar=None, lw=MEAN_LW,
                     ax=ax, **kwargs)
    else:
        sns.lineplot(data=data, x=x, y=y, hue=hue, hue_order=order, palette=palette, errorbar=("ci", 95),
                     seed=0, ax=ax, **kwargs)
    names = {h: (labels or {}).get(h, label(h) if hue == "method" else str(h)) for h in order}
    handles, texts = ax.get_legend_handles_labels()
    if kwargs.get("style") not in (None, hue):  # a line style's entry has no colour of its own: ink, not a method's grey
        levels = {str(v) for v in data[kwargs["style"]].unique()}
        for handle, text in zip(handles, texts):
            if text in levels:
                handle.set_color(INK)
    if handles:
        ax.legend(handles, [names.get(t, t) for t in texts])
    return ax


@contextlib.contextmanager
def fixed_jitter(seed: int = 0):
    """NumPy's global generator seeded inside (seaborn's strip plots jitter their dots with it), the
    caller's state restored afterwards: a figure with jittered dots is the same image every time."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def panels(nrows: int = 1, ncols: int = 1, *, height: float, width: float = COLUMN_IN, **kwargs):
    """`plt.subplots` at the column's width with constrained layout (room for legends and colour bars outside)."""
    return plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kwargs)


def mosaic(layout, *, height: float, width: float = COLUMN_IN, **kwargs):
    """`plt.figure().subplot_mosaic` at the column's width with constrained layout: (figure, {name: axes})."""
    fig = plt.figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplot_mosaic(layout, **kwargs)


def picture(ax, image, **kwargs):
    """An image that is a picture (a digit, a photograph), not a heat map: no colour bar, no ticks."""
    shown = ax.imshow(image, **kwargs)
    shown.set_gid("picture")
    ax.set_xticks([]); ax.set_yticks([])
    return shown


def _entries(axes) -> tuple[list, list]:
    """Each legend entry of `axes` once (first axes wins), their own legends removed. An axes that
    already has a legend gives its entries as shown (labels set by `mean_interval` stay)."""
    seen: dict[str, object] = {}
    for ax in np.atleast_1d(axes).flat:
        legend = ax.get_legend()
        if legend is not None:
            entries = zip(legend.legend_handles, [t.get_text() for t in legend.get_texts()])
        else:
            entries = zip(*ax.get_legend_handles_labels())
        for handle, text in entries:
            if not text.startswith("_"):
                seen.setdefault(text, handle)
        if legend is not None:
            legend.remove()
    return list(seen.values()), list(seen)


def legend_below(fig, axes=None, *, ncols: int | None = None, title: str | None = None, labels: dict | None = None):
    """One legend below the panels: each entry of `axes` (default all) once; `labels` renames entries."""
    handles, texts = _entries(fig.axes if axes is None else axes)
    if not handles:
        return None
    texts = [(labels or {}).get(t, t) for t in texts]
    ncols = ncols or min(len(handles), 4)
    return fig.legend(handles, texts, loc="outside lower center", ncols=ncols, title=title)


def legend_right(ax, *, title: str | None = None, labels: dict | None = None):
    """The axes' legend to the right of its data, top-aligned (outside the axes)."""
    handles, texts = _entries(ax)
    if not handles:
        return None
    texts = [(labels or {}).get(t, t) for t in texts]
    return ax.legend(handles, texts, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, title=title)


def shared_colorbar(fig, image, axes, *, label: str = "", ticks=None, ticklabels=None, **kwargs):
    """One colour bar for heat maps on one scale (same cmap, vmin, vmax): `image` any panel's `heatmap`, `axes` all."""
    bar = fig.colorbar(image, ax=list(np.atleast_1d(axes).flat), label=label, shrink=kwargs.pop("shrink", 0.9), **kwargs)
    if ticks is not None:
        bar.set_ticks(ticks, labels=ticklabels)
    return bar


def binary_map(ax, values, *, labels: tuple[str, str] = ("closed", "open"), title: str = ""):
    """A 0/1 pattern (a mask's closed and open entries), white for 0 and near-black for 1, rows top to bottom; it
    takes a two-swatch legend (`swatches`), not a colour bar."""
    from matplotlib.colors import ListedColormap

    two = ListedColormap(["#ffffff", "#252525"], name="binary-" + "-".join(labels))
    image = heatmap(ax, np.asarray(values, dtype=float), cmap=two, vmin=0, vmax=1, colorbar=False, title=title)
    image.set_gid("binary")
    image.swatch_labels = tuple(labels)
    return image


def swatches(fig, image, *, where: str = "outside right center"):
    """The legend of a `binary_map`: one swatch per value (edged, so that white shows), labelled."""
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=image.cmap(image.norm(v)), edgecolor="k", lw=0.6, label=text)
               for v, text in zip((0, 1), image.swatch_labels)]
    return fig.legend(handles=handles, loc=where, frameon=False)


def map_grid(panels_: Sequence[tuple[str, object]], *, columns: int, panel_height: float, vmax: float | None = None,
             extra_height: float = 0.5):
    """Attention maps as a grid of (title, map) panels, `columns` per row, titled "method\nwhen" (a
    title "method: when" is split at the colon), on one 0…`vmax` scale with one shared colour bar; `vmax`
    None is the largest weight of any panel, so that the scale holds every map."""
    if vmax is None:
        vmax = max(float(np.nanmax(np.asarray(values, dtype=float))) for _, values in panels_) or 1.0
    rows = -(-len(panels_) // columns)
    fig, axes = panels(rows, columns, height=panel_height * rows + extra_height, squeeze=False)
    for ax, (title, values) in zip(axes.flat, panels_):
        image = heatmap(ax, values, vmin=0, vmax=vmax, colorbar=False)
        method, _, where = title.partition(": ")
        ax.set_title(f"{method}\n{where}" if where else title)
        ax.set_xticks([]); ax.set_yticks([])
    shared_colorbar(fig, image, axes, label="attention weight")
    return fig


def _plain(value: float, _pos=None) -> str:
    """A log tick as a number a reader reads at a glance: 0.01, 1, 200; powers of ten beyond 10^±4."""
    if value <= 0:
        return ""
    exponent = np.log10(value)
    if abs(exponent) > 4 and np.isclose(exponent, round(exponent)):
        return f"$10^{{{int(round(exponent))}}}$"
    return f"{value:g}"


def log_ticks(ax, axis: str = "both") -> None:
    """Label a log axis's ticks (call after drawing, once the limits are set): decades when the view
    holds two or more of them, else 1-2-5 steps, so every log axis shows at least two labels."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for name in ("x", "y") if axis == "both" else (axis,):
        part = getattr(ax, f"{name}axis")
        if part.get_scale() != "log":
            continue
        lo, hi = sorted(getattr(ax, f"get_{name}lim")())
        decades = np.floor(np.log10(hi)) - np.ceil(np.log10(lo)) + 1
        subs = (1.0,) if decades >= 2 else (1.0, 2.0, 5.0)
        if decades < 2 and _log_count(lo, hi, subs) < 2:  # a short view between 1-2-5 steps: every integer step
            subs = tuple(float(k) for k in range(1, 10))
        part.set_major_locator(LogLocator(base=10, subs=subs, numticks=12 if len(subs) > 3 else 8))
        part.set_major_formatter(FuncFormatter(_plain))
        part.set_minor_formatter(NullFormatter())


def _log_count(lo: float, hi: float, subs) -> int:
    """How many ticks sub × 10^k (k whole) lie in [lo, hi]."""
    ks = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    return sum(1 for k in ks for s in subs if lo <= s * 10.0 ** k <= hi)


