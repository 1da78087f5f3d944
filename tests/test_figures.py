"""One figure system: every figure in a chapter source is numbered, captioned and described, and a
method's colour comes only from `companion.book.labels`."""

import json
import re
from pathlib import Path

import pytest

from companion.book import labels

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks").glob("*.ipynb"))
HEX = re.compile(r"#[0-9a-fA-F]{6}\b|color=[\"']C\d[\"']")


def _figure_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code" and "plt.show()" in "".join(c["source"])]


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_every_figure_has_a_numbered_caption_and_alt_text(path):
    nb = json.loads(path.read_text())
    for cell in _figure_cells(nb):
        meta = cell["metadata"].get("mystnb", {})
        fig = meta.get("figure", {})
        head = "".join(cell["source"])[:80]
        assert fig.get("caption", "").strip(), f"{path.name}: a figure without a caption: {head}"
        assert re.fullmatch(r"fig-ch\d+-[a-z0-9-]+", fig.get("name", "")), f"{path.name}: name it fig-chN-…: {head}"
        assert meta.get("image", {}).get("alt", "").strip(), f"{path.name}: no alt text (run tools/tag_cells.py)"
        assert "/" not in meta["image"]["alt"].split()[0], "alt text must describe the figure, not its file"


def test_figure_names_are_unique_across_the_book():
    names = [c["metadata"]["mystnb"]["figure"]["name"] for p in SOURCES for c in _figure_cells(json.loads(p.read_text()))
             if "figure" in c["metadata"].get("mystnb", {})]
    assert len(names) == len(set(names))


def test_no_chapter_picks_its_own_colours():
    modules = sorted((ROOT / "companion" / "book" / "chapters").glob("ch[0-9][0-9]_*.py"))
    for path in modules:
        assert not HEX.search(path.read_text()), f"{path.name} sets a colour; use labels.colour"
    for path in SOURCES:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                assert not HEX.search("".join(cell["source"])), f"{path.name} sets a colour; use labels.colour"


def test_a_method_keeps_one_colour_and_its_variants_share_it():
    methods = list(labels.METHODS)
    assert len({labels.colour(m) for m in methods}) == len(methods), "two methods share a colour"
    assert labels.colour("goat-lanes") == labels.colour("goat")
    assert labels.colour("mask-sdpa") == labels.colour("mask")
    assert labels.colour("alibi-sdpa") == labels.colour("alibi")
    assert all(m in labels.MARKERS for m in methods)


# ---------------------------------------------------------------- the figures themselves, on the page
# Each chapter's figure functions (companion.book.chapters.figures) are drawn from small made-up inputs of the
# shapes the chapters pass, with the methods each chapter draws together (its experiments' method lists), and
# `figure_checks.layout_problems` must find nothing: text ≥ 9 pt at the column's width, legends outside every axes'
# data, a colour bar on every heat map whose scale holds the map's data, two or more labels on every log axis;
# nor `figure_checks.colour_problems`: every two colours drawn in one axes or shown in one legend at least
# `colours.MIN_APART` apart, and `colours.MIN_APART_CVD` to a protanope and a deuteranope. The made-up maps
# reach the values the chapters' do (attention rows that put almost all their weight on one key, a causal prior
# down to the readout's 1e-12 floor), so that a scale stopping short of them fails here.

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from companion.book.chapters import plots  # noqa: E402
from companion.book.chapters import figure_checks  # noqa: E402
from companion.book.chapters.figures import ch01 as f01, ch02 as f02, ch03 as f03, ch04 as f04, ch05 as f05  # noqa: E402
from companion.book.chapters.figures import ch06 as f06, ch07 as f07, ch08 as f08, ch09 as f09, ch10 as f10  # noqa: E402


def _rng():
    return np.random.default_rng(0)


def _curves(methods, y="value", steps=(0, 50, 100), seeds=(0, 1, 2), **extra):
    rng = _rng()
    return pd.DataFrame([{"method": m, "seed": s, "step": t, y: float(rng.uniform(0, 100)), **extra}
                         for m in methods for s in seeds for t in steps])


def _maps(methods, per_row):
    """Attention maps whose rows sum to 1, some with nearly all of a row on one key (as trained maps have)."""
    rng = _rng()
    return [(f"{labels.label(m)}: layer {i + 1}, end", rng.dirichlet(np.full(16, 0.05), 16)) for m in methods for i in range(per_row)]


def _ch01():
    from companion import sinusoidal_positions
    from companion.book.chapters import ch01_foundations as ch

    tokens = ["grid", "load", "rises"]
    q, k, v = ch.random_qkv(3, 4, 0)
    gaps = ch.equivariance_trials(6, 8, 5, generator=torch.Generator().manual_seed(0))
    return [f01.causal(tokens, (ch.causal_visibility(tokens) == "Allowed").to_numpy(), ch.causal_weights(q, k, v)),
            f01.blocking(ch.blocking_weights(ch.blocking_cases([2.0, 1.0, 0.5]), tokens), tokens),
            f01.equivariance(gaps), f01.encoding(sinusoidal_positions(64, 32))]


def _ch02():
    from companion.book.chapters import ch02_mechanism as ch

    scales, contrasts = [0.1, 0.5, 1, 3, 10, 30], [0.5, 1, 2, 5, 10]
    sweep = ch.norm_sweep(scales, n=8, d=16, draws=3, m=0.0, generator=torch.Generator().manual_seed(0))
    a = torch.randn(8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sat = ch.saturation(contrasts, a=a, open_=torch.tensor([True, True] + [False] * 6))
    return [f02.norms(scales, sweep), f02.saturation(contrasts, sat)]


def _ch03():
    from companion.experiments.gotu import METHODS

    tasks = ("2parity", "cyclic3", "maj3", "threesym")
    rng = _rng()
    patterns = {fn: rng.integers(0, 2, (16, 16)) for fn in tasks}
    y = "full-cube accuracy (%)"
    curves = {fn: _curves(METHODS, y=y) for fn in tasks}
    points = pd.DataFrame([{"task": fn, "method": m, "seed": s, "split": split, "accuracy": float(rng.uniform(0, 100))}
                           for fn in tasks for split in ("unseen", "seen") for m in METHODS for s in range(3)])
    nearest = {fn: {"unseen": 0.5, "seen": 1.0} for fn in tasks}
    return [f03.masks(patterns, tasks), f03.by_seed(points, nearest), f03.curves(curves, {fn: 60.0 for fn in tasks}),
            f03.maps(_maps(("default", "structured-svd", "mask"), 4))]


def _ch04():
    from companion.book.chapters import ch04_arithmetic as ch
    from companion.experiments.arithmetic import FIGURE2_METHODS, METHODS as methods

    points = pd.DataFrame([{"method": m, "x": i + 0.1 * k, "mean": 50.0, "below": 5.0, "above": 7.0}
                           for k, m in enumerate(FIGURE2_METHODS) for i in range(4)])
    seeds = pd.DataFrame([{"method": m, "x": i + 0.1 * k, "value": 40.0 + s}
                          for k, m in enumerate(FIGURE2_METHODS) for i in range(4) for s in range(3)])
    ticks = (list(range(4)), ["0.1 %\n(1,000 pairs)", "0.2 %\n(2,000 pairs)", "0.4 %\n(4,000 pairs)", "1 %\n(10,000 pairs)"])
    digits = pd.DataFrame([{"method": m, "seed": s, "digit": f"c{d}", "value": 90.0 - d - s}
                           for m in methods for s in range(3) for d in range(6)])
    dashes = {m: "" for m in methods} | {"fixed-mask": (4, 2)}
    return [f04.masks({op: ch.mask_panel(op) for op in ("add", "mul")}), f04.figure2(points, seeds, ticks),
            f04.curves(_curves(methods), dashes=dashes), f04.curves(_curves(methods[:3])), f04.digits(digits)]


def _ch05():
    from companion.book.chapters import ch05_images as ch
    from companion.book.chapters.stats import summarize

    rng = _rng()
    order = tuple(m for m in ch.METHODS if m != "default")
    diffs = pd.DataFrame([{"dataset": "digits", "method": m, "seed": s, "difference": float(rng.normal())}
                          for m in order for s in range(5)])
    pairs = pd.DataFrame({"seed": range(5), "default": rng.uniform(3, 4, 5), "mask": rng.uniform(3, 4, 5)})
    pairs["relative change"] = pairs["mask"] / pairs["default"] - 1
    return [f05.digits(rng.uniform(0, 255, (10, 8, 8)), list(range(10)), ch.image_pattern(4)),
            f05.paired(diffs, order), f05.curves(_curves(("default", *order), y="test accuracy (%)"), "digits", ("default", *order), ),
            f05.maps(_maps(("default", "structured-svd", "mask"), 3)), f05.band(np.tril(np.ones((32, 32))), 32, 8),
            f05.perplexity(pairs, summarize(pairs["relative change"]))]


def _ch06():
    rng = _rng()
    contrasts = (0.5, 1.0, 2.0, 5.0, 10.0)
    placements = ("correct", "misspecified", "falsifier")
    runs = {t: pd.DataFrame([{"placement": p, "contrast": c, "seed": s, "acc": float(rng.uniform(50, 100))}
                             for p in placements for c in contrasts for s in range(3)]) for t in ("maj3", "cyclic3")}
    baselines = {t: {"no mask": 70.0, "all-zero": 65.0} for t in runs}
    drift = {kind: pd.DataFrame([{"placement": p, "contrast": c, "seed": s, "step": t, "drift": float(rng.uniform(0, 2))}
                                 for p in placements for c in ("±10", "±1") for s in range(3) for t in (0, 50, 100)])
             for kind in ("mask", "attention")}
    for frame in drift.values():
        frame["contrast"] = pd.Categorical(frame["contrast"], ["±10", "±1"])
    qk = {(t, kind): pd.DataFrame([{"method": m, "QK": q, "seed": s, "step": st, "drift": float(rng.uniform(0, 1))}
                                   for m in ("default", "mask") for q in ("none", "QK norm") for s in range(3)
                                   for st in (0, 50, 100)]) for t in ("maj3", "cyclic3") for kind in ("qk", "attention")}
    from companion.book.chapters.ch06_referees import DRIFT_TITLES as titles
    return [f06.contrast(runs, baselines, contrasts), f06.drift(drift, titles), f06.qk_drift(qk, titles)]


def _ch07():
    rng = _rng()

    def curve(scale):
        return pd.DataFrame([{"run": r, "bin": b, "omega": scale * 1.3 ** b, "p0": float(rng.uniform(0, 0.5))}
                             for r in range(3) for b in range(8)]).set_index(["run", "bin"])

    from companion.experiments.copy_mixture import METHODS as methods

    return [f07.sink({m: curve(0.4) for m in methods}, {m: curve(1.1) for m in methods})]


def _ch08():
    from companion.book.chapters.entropic import prior_views
    from companion.experiments.copy_mixture import METHODS

    rng = _rng()
    gaps = _curves(METHODS, steps=(0, 100, 200, 400))
    gaps["value"] = gaps["value"] / 400 + 0.002
    views = prior_views(rng.normal(size=(4, 32)), rng.normal(size=(4, 32)))
    panels = {**views, "limit": np.nanmax(np.abs(views["centred"]), axis=(1, 2))}
    return [f08.gap(gaps, METHODS), f08.figure1(panels, lag=3)]


def _ch09():
    from companion.book.chapters import ch09_extrapolation as ch

    rng = _rng()
    lengths, train_len = [64, 128, 256, 512], 64
    lm = pd.DataFrame([{"reading": r, "seed": s, "length": n, "ppl": float(rng.uniform(3, 40)), "span_acc": float(rng.uniform())}
                       for r in ch.READINGS for s in range(3) for n in lengths])
    positions = {r: (np.arange(8, 512), rng.uniform(1.2, 2.4, 504)) for r in ch.READINGS}
    profiles = {m: {s: {"j": np.arange(0, 512, 8.0), "u": rng.normal(size=(4, 8, 64))} for s in range(2)}
                for m in ch.GOAT_READINGS}
    bins = [f"{a:.2f}–{a + 0.2:.2f}" for a in np.arange(0, 1, 0.2)]
    grid = pd.DataFrame(rng.uniform(size=(len(ch.READINGS) * 4, 5)), columns=bins,
                        index=pd.MultiIndex.from_product([ch.READINGS, lengths], names=["reading", "length"]))
    i = np.linspace(0, 2047, 24).round()
    future = np.triu(np.ones((24, 24), dtype=bool), 1)  # NaN in the readout's centred prior, 0 in its causal one
    centred = np.where(future, np.nan, rng.normal(size=(8, 24, 24)))
    prior = np.where(future, 0.0, 10.0 ** -rng.uniform(0, 14, (8, 24, 24)))  # far keys underflow to 0
    head = {"i": i, "centred": centred, "limit": np.nanmax(np.abs(centred), axis=(1, 2)),
            "log_causal": np.log10(prior + 1e-12)}
    return [f09.ppl_length(ch.length_curves(lm, "ppl"), lengths, train_len, ch.READINGS),
            f09.position_ce(positions, train_len), f09.key_prior(ch.key_prior_lines(profiles), train_len),
            f09.passkey(ch.length_curves(lm, "span_acc"), lengths, train_len, ch.READINGS),
            f09.depth({r: ch.depth_panel(grid, r) for r in ch.DEPTH_SHOWN}), f09.head_prior(head)]


def _ch10():
    from companion.book.chapters import ch10_cost as cr
    from companion.cost import records
    from companion.paths import repo_root

    lengths = [256, 512, 1024, 2048, 4096]
    # the variants of the committed CPU sweep the chapter draws
    variants = tuple(dict.fromkeys(cr.frame(records.load(repo_root() / cr.RESULTS / f"{cr.CPU_RESULT}.json")).variant))
    curves = {mode: {v: pd.DataFrame({"L": lengths, "time_ms": [0.1 * i * (n / 256) ** 2 for n in lengths],
                                      "iqr_ms": [0.01] * len(lengths)}) for i, v in enumerate(variants, 1)}
              for mode in ("fwd", "fwd+bwd")}
    mem = pd.DataFrame([[2.0 * i * (n / 256) ** 2 for n in lengths] for i in range(1, 4)], index=variants[:3], columns=lengths)
    return [f10.time(curves, lengths), f10.memory(mem, mem.loc["mask-sdpa"].to_numpy(), lengths)]


CHAPTER_FIGURES = {"ch01": _ch01, "ch02": _ch02, "ch03": _ch03, "ch04": _ch04, "ch05": _ch05, "ch06": _ch06,
                   "ch07": _ch07, "ch08": _ch08, "ch09": _ch09, "ch10": _ch10}


@pytest.mark.parametrize("chapter", list(CHAPTER_FIGURES))
def test_chapter_figures_keep_the_layout_rules_on_the_page(chapter):
    plots.use_style()
    try:
        for i, fig in enumerate(CHAPTER_FIGURES[chapter]()):
            assert figure_checks.layout_problems(fig) == [], f"{chapter} figure {i + 1}"
            assert fig.get_figwidth() <= plots.COLUMN_IN + 1e-9
    finally:
        plt.close("all")


@pytest.mark.parametrize("chapter", list(CHAPTER_FIGURES))
def test_chapter_figures_draw_colours_a_reader_tells_apart(chapter):
    plots.use_style()
    try:
        for i, fig in enumerate(CHAPTER_FIGURES[chapter]()):
            assert figure_checks.colour_problems(fig) == [], f"{chapter} figure {i + 1}"
    finally:
        plt.close("all")


def test_colour_problems_names_close_colours_in_an_axes_and_a_legend():
    """Not vacuous: RoPE's green beside ALiBi's old olive (16 apart to a trichromat, 7 to a deuteranope), two
    near-oranges, and a legend that gathers two panels' near-reds each fail; the same colours in separate
    panels without a shared legend, lines marked `SEQUENCE`, and colour-mapped dots do not."""
    plots.use_style()
    fig, (a, b, c) = plt.subplots(1, 3)
    a.plot([0, 1], [0, 1], color="#2ca02c", label="RoPE")
    a.plot([0, 1], [1, 0], color="#6b7f00", label="ALiBi, once")
    b.bar([0, 1], [1, 2], color=["#e07b39", "#d95f02"])
    problems = " | ".join(figure_checks.colour_problems(fig))
    assert "#2ca02c and #6b7f00 are 6.8 apart to a red-green dichromat" in problems
    assert "#d95f02 and #e07b39" in problems and "(ΔE00 < 15.0)" in problems
    plt.close(fig)

    fig, (a, b) = plt.subplots(1, 2)
    a.plot([0, 1], [0, 1], color="#c0392b", label="mask")
    b.plot([0, 1], [0, 1], color="#c43c30", label="near-red")
    assert figure_checks.colour_problems(fig) == []
    plots.legend_below(fig)
    assert any(p.startswith("the legend (mask, near-red") for p in figure_checks.colour_problems(fig))
    plt.close(fig)

    fig, ax = plt.subplots()
    for k, tone in enumerate(plt.cm.viridis(np.linspace(0, 0.9, 12))):
        ax.plot([0, 1], [k, k], color=tone, gid=plots.SEQUENCE, label=f"head {k}")
    ax.scatter([0, 1, 2], [0, 1, 2], c=[0.0, 0.01, 0.02])
    plots.legend_right(ax)
    assert figure_checks.colour_problems(fig) == []
    plt.close(fig)


def test_a_heat_map_whose_scale_stops_inside_its_data_is_named():
    """Chapter 3's attention maps once stopped at 0.6 while the weights reached 1: a value beyond the scale is
    drawn as its end. The check names such a map, accepts one whose scale holds its data, and ignores
    NaN cells (drawn blank) and values less than one colour step beyond an end (log10 of 1 + 1e-12 above 0;
    a readout rounded to two decimals, 80.31, over a limit of 80.3089)."""
    plots.use_style()
    fig, (a, b, c, d) = plots.panels(1, 4, height=2.5)
    weights = np.array([[0.2, 0.8], [1.0, 0.0]])
    plots.heatmap(a, weights, vmin=0, vmax=0.6, title="stops at 0.6")
    plots.heatmap(b, weights, vmin=0, vmax=1, title="0 to 1")
    plots.heatmap(c, [[np.nan, np.log10(1 + 1e-12)], [-12.0, -3.0]], vmin=-12, vmax=0, title="log10")
    plots.heatmap(d, [[80.31, -2.0], [0.0, -80.0]], cmap="RdBu_r", vmin=-80.3089, vmax=80.3089, title="rounded")
    problems = figure_checks.layout_problems(fig)
    plt.close(fig)
    assert problems == ["the heat map in axes 'stops at 0.6' clips its data: its values span 0…1, its colour scale 0…0.6"]


def test_attention_map_grids_scale_to_their_largest_weight():
    """`map_grid` without a `vmax` puts the largest weight of any panel at the top of its one scale."""
    plots.use_style()
    panels_ = [("a: start", [[0.1, 0.9], [0.5, 0.5]]), ("b: end", [[0.3, 0.7], [0.97, 0.03]])]
    fig = plots.map_grid(panels_, columns=2, panel_height=1.8)
    assert {image.get_clim() for ax in fig.axes for image in ax.images} == {(0.0, 0.97)}
    assert figure_checks.layout_problems(fig) == []
    plt.close(fig)


def test_layout_problems_names_each_broken_rule():
    """The checker is not vacuous: a 12-inch figure with 10 pt text (≈ 5.8 pt on the page), a legend
    over the data, a heat map without a colour bar and a log axis with one labelled tick each fail."""
    plots.use_style()
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4))
    a.plot([1, 2], [1, 2], label="line")
    a.legend(loc="center")
    b.imshow(np.eye(3))
    a.set_yscale("log")
    a.set_ylim(2, 8)
    a.yaxis.set_major_locator(matplotlib.ticker.FixedLocator([5]))
    a.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    problems = " | ".join(figure_checks.layout_problems(fig))
    plt.close(fig)
    assert "pt on the page" in problems
    assert "legend (line" in problems
    assert "no colour bar" in problems
    assert re.search(r"log y axis .* shows [01] labelled tick", problems)


def test_figure_5_2_draws_the_paired_table_s_interval_for_the_first_image_set_only():
    """The dots' mean and its bar are Chapter 5's table cell (stats.paired against the default, a
    Student-t interval), not a bootstrap; a second image set in the frame is not drawn."""
    from companion.book.chapters import ch05_images as ch
    from companion.book.chapters.stats import paired

    plots.use_style()
    acc = {("digits", "default"): [50.0, 60.0, 55.0, 58.0], ("digits", "mask"): [57.0, 61.0, 64.0, 58.0],
           ("cifar10", "default"): [10.0, 11.0, 12.0, 13.0], ("cifar10", "mask"): [90.0, 91.0, 92.0, 93.0]}
    frame = pd.DataFrame([{"dataset": d, "method": m, "seed": s, "test.acc (%)": v}
                          for (d, m), vals in acc.items() for s, v in enumerate(vals)])
    fig = f05.paired(ch.paired_frame(frame), ["mask"])
    (bar,) = [c for c in fig.axes[0].collections if isinstance(c, matplotlib.collections.LineCollection)]
    (segment,) = bar.get_segments()
    cell = paired(dict(enumerate(acc[("digits", "mask")])), dict(enumerate(acc[("digits", "default")])))
    assert segment[:, 0] == pytest.approx([cell.lo, cell.hi])
    assert cell.mean_diff == pytest.approx(4.25)
    plt.close(fig)


def test_a_binary_map_needs_its_two_swatches_not_a_colour_bar():
    """A 0/1 mask is drawn in two colours; without the legend of both swatches the checker names it,
    with `plots.swatches` it is satisfied, and the swatches are the map's own two colours."""
    plots.use_style()
    pattern = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 1]])
    fig, ax = plots.panels(height=3, width=4)
    image = plots.binary_map(ax, pattern, title="mask")
    assert "the binary map in axes 'mask' has no two-swatch legend" in figure_checks.layout_problems(fig)
    legend = plots.swatches(fig, image)
    assert figure_checks.layout_problems(fig) == []
    shown = {t.get_text(): matplotlib.colors.to_hex(h.get_facecolor()) for t, h in zip(legend.get_texts(), legend.legend_handles)}
    assert shown == {"closed": "#ffffff", "open": "#252525"}
    drawn = image.to_rgba(image.get_array())[..., :3]
    assert np.array_equal(drawn[pattern == 1], np.tile(matplotlib.colors.to_rgb("#252525"), ((pattern == 1).sum(), 1)))
    assert np.array_equal(drawn[pattern == 0], np.ones(((pattern == 0).sum(), 3)))
    plt.close(fig)


def test_seeds_are_thin_lines_under_a_bold_mean():
    """interval="seeds": one thin, faint line per seed and method, and the mean over seeds bold, whose
    points are the seeds' means (two seeds that split apart stay visible as themselves)."""
    plots.use_style()
    data = pd.DataFrame([{"method": m, "seed": s, "step": t, "value": v}
                         for m, base in (("default", 0.0), ("mask", 50.0)) for s, off in ((0, 0.0), (1, 40.0))
                         for t, v in ((0, base + off), (10, base + off + 5))])
    fig, ax = plots.panels(height=3)
    plots.mean_interval(ax, data, x="step", y="value", interval="seeds")
    lines = [line for line in ax.get_lines() if len(line.get_xdata())]
    thin = [line for line in lines if line.get_linewidth() == plots.SEED_LW]
    bold = [line for line in lines if line.get_linewidth() == plots.MEAN_LW]
    assert len(thin) == 4 and all(line.get_alpha() == plots.SEED_ALPHA for line in thin)
    assert sorted(tuple(line.get_ydata()) for line in bold) == [(20.0, 25.0), (70.0, 75.0)]
    assert {matplotlib.colors.to_hex(line.get_color()) for line in bold} == {labels.colour("default"), labels.colour("mask")}
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["Default", "Mask (learnable)"]
    assert not ax.collections, "no band is drawn"
    plt.close(fig)


def test_log_ticks_label_at_least_two_ticks_on_a_short_range():
    plots.use_style()
    fig, ax = plots.panels(height=3)
    ax.plot([2, 7], [2, 7])
    ax.set(xscale="log", yscale="log")
    plots.log_ticks(ax)
    assert figure_checks.layout_problems(fig) == []
    plt.close(fig)


@pytest.mark.parametrize("lo, hi", [(2.0, 7.0), (1.1, 1.9), (0.31, 0.48), (3.2, 4.6), (1e-3, 1e2)])
def test_log_ticks_label_at_least_two_ticks_between_the_1_2_5_steps(lo, hi):
    """A view with no two of 1, 2, 5 × 10^k in it (1.1–1.9, 3.2–4.6) is labelled at every integer step."""
    plots.use_style()
    fig, ax = plots.panels(height=3)
    ax.plot([lo, hi], [lo, hi])
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi))
    plots.log_ticks(ax)
    assert figure_checks.layout_problems(fig) == []
    fig.canvas.draw()
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text() and lo <= t.get_position()[0] <= hi]
    assert len(shown) >= 2
    plt.close(fig)


def test_annotated_heat_map_text_contrasts_with_its_cell_whichever_end_is_dark():
    """White text on dark cells and black on light ones, for a map dark at the top (Blues) and one dark
    at the bottom (viridis); an empty cell reads "—", not "nan"."""
    plots.use_style()
    fig, (a, b) = plots.panels(1, 2, height=2.5)
    values = [[0.0, 1.0, np.nan]]
    plots.heatmap(a, values, cmap="Blues", vmin=0, vmax=1, annotate="{:.1f}", colorbar=False)
    plots.heatmap(b, values, cmap="viridis", vmin=0, vmax=1, annotate="{:.1f}", colorbar=False)
    colours = {ax: [(t.get_text(), matplotlib.colors.to_hex(t.get_color())) for t in ax.texts] for ax in (a, b)}
    assert colours[a] == [("0.0", "#000000"), ("1.0", "#ffffff"), ("—", "#000000")]
    assert colours[b] == [("0.0", "#ffffff"), ("1.0", "#000000"), ("—", "#000000")]
    plt.close(fig)


# ---------------------------------------------------------------- cross-references the build checks
# Chapters whose prose names its own figures only through {numref} (the build numbers them and fails
# on a wrong name) and names a table or figure by number only when it is the source's ("the paper's
# Table 1"). Every chapter source is listed.
CROSS_REFERENCED = ["01_masks_and_positions", "02_prior_in_the_mask", "03_boolean_extrapolation", "04_arithmetic",
                    "05_images_and_language", "06_what_the_referees_asked", "07_transport", "08_copy_mixture",
                    "09_extrapolation", "10_cost"]
SOURCE_NAME = re.compile(r"(paper's|its|source's|dossier's)\b[^.]{0,25}$")


@pytest.mark.parametrize("stem", CROSS_REFERENCED)
def test_prose_refers_to_its_figures_by_numref_and_types_no_number_of_its_own(stem):
    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())
    prose = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for cell in _figure_cells(nb):
        name = cell["metadata"]["mystnb"]["figure"]["name"]
        assert f"{{numref}}`{name}`" in prose, f"{stem}: no {{numref}} to {name}"
    for m in re.finditer(r"\b(Figures?|Tables?|Fig\.)\s+\d+", prose):
        before = prose[max(0, m.start() - 40):m.start()]
        assert SOURCE_NAME.search(before), f"{stem}: a typed number the build does not check: …{before}{m.group(0)}"


def test_a_legend_moved_outside_keeps_the_readers_labels():
    """`mean_interval` names methods by their labels; moving its legend below or to the right keeps them."""
    plots.use_style()
    data = _curves(("default", "mask", "fixed-mask"))
    fig, ax = plots.panels(height=3)
    plots.mean_interval(ax, data, x="step", y="value", style="method")
    legend = plots.legend_right(ax)
    assert [t.get_text() for t in legend.get_texts()] == ["Default", "Mask (learnable)", "Fixed mask"]
    tasks = ("2parity", "maj3")
    fig3 = f03.curves({fn: data.rename(columns={"value": "acc"}) for fn in tasks}, {fn: 75.0 for fn in tasks}, y="acc")
    assert "minimum-degree interpolator" in [t.get_text() for t in fig3.legends[0].get_texts()]
    fig2 = f04.curves(data, dashes={"default": "", "mask": "", "fixed-mask": (4, 2)})
    assert [t.get_text() for t in fig2.axes[0].get_legend().get_texts()] == ["Default", "Mask (learnable)", "Fixed mask"]
    plt.close("all")


def test_mean_interval_draws_seeds_or_an_interval_and_names_anything_else():
    """Two ways to show seeds (their lines, or a 95 % interval of their mean); a min-max band over bimodal
    seeds hid the lines, so it is no longer offered, and asking for it says what is."""
    plots.use_style()
    fig, ax = plots.panels(height=3)
    with pytest.raises(ValueError, match="seeds.*ci"):
        plots.mean_interval(ax, _curves(("default",)), x="step", y="value", interval="range")
    plt.close("all")
