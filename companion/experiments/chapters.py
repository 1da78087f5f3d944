"""Which runs each chapter reads, and in what order a GPU window should make them at `paper`.

A chapter reads the cells of one or more grids or experiments with its default seeds (the seeds in
its notebook's parameters cell). `chapter_runs(chapter, profile)` lists those configs, so that
`companion paper CHAPTER` knows what a chapter needs, the book can say how many of them exist at a
profile ("12 of 60 runs"), and a test checks each chapter module asks for exactly these.

`PAPER_FIRST` orders a chapter's paper runs by the questions worth a GPU first (a 15-minute window
rarely finishes a whole chapter): for Chapter 3 the default and the mask on 2Parity, Cyclic3 and
Majority; `PAPER_EXTRA` adds runs no chapter table reads yet but that decide what the chapter
describes and the `ci` profile fixes (the mask's layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from companion.config import RunConfig
from companion.experiments import Request, get_grid
from companion.experiments.plan import plan
from companion.runs import group_configs

__all__ = ["Block", "CHAPTERS", "SEED_TEST_CELLS", "MOVABLE_TEST_CELLS", "PAPER_FIRST", "PAPER_EXTRA", "chapter_key", "chapter_requests", "chapter_runs",
           "recorded_runs", "paper_runs"]


@dataclass(frozen=True)
class Block:
    """Runs a chapter reads: the cells of `grid` (all, or only `cells`), or one `request`, with `seeds`;
    at the `profiles` given (None: every profile)."""

    seeds: tuple[int, ...]
    grid: str | None = None
    cells: tuple | None = None
    request: Request | None = None
    profiles: tuple[str, ...] | None = None

    def requests(self, profile: str) -> list[Request]:
        if self.profiles is not None and profile not in self.profiles:
            return []
        if self.grid is None:
            return [self.request]
        cells = get_grid(self.grid).cells(profile)
        return [r for k, r in cells.items() if self.cells is None or k in self.cells]


FIVE = (0, 1, 2, 3, 4)
TEN = tuple(range(10))
# R-05, the referees' multi-seed test, at the ten seeds the referee asked for: the correct ±10 mask and no mask;
# and M-09 there too: the misspecified ±10 mask at the model's learning rate and at its own
SEED_TEST_CELLS = tuple((task, placement, contrast) for task in ("2parity", "maj3")
                        for placement, contrast in (("correct", 10.0), ("no mask", 0.0), ("misspecified", 10.0)))
MOVABLE_TEST_CELLS = tuple((task, "misspecified", "own lr") for task in ("2parity", "maj3"))

# chapter number → (notebook name, blocks). Chapters 1, 2, 10 and 11 train nothing.
CHAPTERS: dict[str, tuple[str, tuple[Block, ...]]] = {
    "01": ("01_masks_and_positions", ()),
    "02": ("02_prior_in_the_mask", ()),
    "03": ("03_boolean_extrapolation", (Block(FIVE, grid="gotu"), Block(TEN, grid="symmetry", profiles=("ci",)))),
    "04": ("04_arithmetic", (Block(FIVE, grid="arithmetic"),)),
    "05": ("05_images_and_language", (Block((0, 1, 2, 3, 4, 5), grid="images-and-language",
                                            cells=("digits", "cifar10", "cifar100")),
                                      Block(tuple(range(12)), grid="images-and-language", cells=("text",)),
                                      Block((0, 1, 2, 3, 4, 5), grid="images-and-language",
                                            cells=("digits-movable", "digits-sincos"), profiles=("ci",)),
                                      Block(tuple(range(12)), grid="images-and-language",
                                            cells=("text-sinusoidal", "text-matched"), profiles=("ci",)))),
    "06": ("06_what_the_referees_asked", (Block(FIVE, grid="referee"), Block(FIVE, grid="qk-norm"),
                                          Block(FIVE, grid="mask-moves", profiles=("ci",)),
                                          Block(TEN, grid="referee", cells=SEED_TEST_CELLS, profiles=("ci",)),
                                          Block(TEN, grid="mask-moves", cells=MOVABLE_TEST_CELLS, profiles=("ci",)))),
    "07": ("07_transport", (Block((0, 1, 2), request=Request("copymix")),
                            Block((0, 1), request=Request("charlm", ("goat", "rope", "alibi"))))),
    "08": ("08_copy_mixture", (Block((0, 1, 2), request=Request("copymix")),)),
    "09": ("09_extrapolation", (Block((0, 1), grid="extrapolation"),
                                Block((0, 1, 2, 3, 4, 5), request=Request("vit-resolution"), profiles=("ci",)))),
    "10": ("10_cost", ()),
    "11": ("11_your_own_model", ()),
}

# Asked first at `paper` (issue order: the comparisons whose `ci` verdicts may be scale effects).
PAPER_FIRST: dict[str, tuple[Request, ...]] = {
    "03": tuple(Request(f"gotu-{fn}", ("default", "mask")) for fn in ("2parity", "cyclic3", "maj3")),
    "04": (Request("arith-mul"),),
    "09": (Request("passkey"),),
}

# Made at `paper` after the chapter's own runs: the mask layouts Chapter 3 describes but `ci` fixes
# (the mask on the support with CLS open to it, one monomial per token, per-head masks, the first
# layer only), on the task whose `ci` verdict is in doubt.
PAPER_EXTRA: dict[str, tuple[Request, ...]] = {
    "03": (Request("gotu-2parity", ("mask",), ("model.prior.variant=per-token", "model.pool=mean")),
           Request("gotu-2parity", ("mask",), ("model.prior.per_head=true",)),
           Request("gotu-2parity", ("mask",), ("model.prior.layers=first",))),
}


def chapter_key(chapter: str) -> str:
    """"3", "03", "03_boolean_extrapolation" → "03"; a ValueError lists the chapters otherwise."""
    text = str(chapter).strip()
    head = text.split("_", 1)[0]
    key = head.zfill(2) if head.isdigit() else head
    if key not in CHAPTERS or (not text.isdigit() and "_" in text and text != CHAPTERS[key][0]):
        valid = ", ".join(f"{k} ({name})" for k, (name, _) in CHAPTERS.items())
        raise ValueError(f"unknown chapter {chapter!r}; valid: {valid}.")
    return key


def chapter_requests(chapter: str, profile: str) -> list[tuple[Request, tuple[int, ...]]]:
    """(request, seeds) of every run the chapter reads at `profile`, in the chapter's order."""
    _, blocks = CHAPTERS[chapter_key(chapter)]
    return [(r, b.seeds) for b in blocks for r in b.requests(profile)]


def _configs(pairs, profile: str) -> list[RunConfig]:
    out, seen = [], set()
    for request, seeds in pairs:
        for cfg in plan(request.experiment, profile, seeds, request.methods, request.overrides):
            if cfg not in seen:
                seen.add(cfg)
                out.append(cfg)
    return out


def chapter_runs(chapter: str, profile: str, seeds: Sequence[int] | None = None) -> list[RunConfig]:
    """The distinct configs the chapter reads at `profile` (its default seeds, or `seeds` for every block)."""
    pairs = chapter_requests(chapter, profile)
    if seeds is not None:
        pairs = [(r, tuple(seeds)) for r, _ in pairs]
    return _configs(pairs, profile)


def recorded_runs(chapters: Sequence[str] | None = None, profile: str = "ci") -> list[RunConfig]:
    """Every config whose record the chapters need at `profile` (default: all chapters): what they read,
    in whole groups (`companion.runs.group_configs`: a group trains and stores every member), each once."""
    out, seen = [], set()
    for chapter in (chapters if chapters is not None else list(CHAPTERS)):
        for cfg in chapter_runs(chapter, profile):
            for member in group_configs(cfg):
                if member not in seen:
                    seen.add(member)
                    out.append(member)
    return out


def paper_runs(chapter: str, seeds: Sequence[int] | None = None, *, extra: bool = True) -> list[RunConfig]:
    """The chapter's `paper` configs in the order a GPU window makes them: `PAPER_FIRST`, then the rest
    of what the chapter reads, then (with `extra`) `PAPER_EXTRA`; each config once."""
    key = chapter_key(chapter)
    reads = chapter_requests(key, "paper")
    if seeds is not None:
        reads = [(r, tuple(seeds)) for r, _ in reads]
    default = tuple(seeds) if seeds is not None else (reads[0][1] if reads else FIVE)
    first = [(r, default) for r in PAPER_FIRST.get(key, ())]
    later = [(r, default) for r in PAPER_EXTRA.get(key, ())] if extra else []
    return _configs(first + reads + later, "paper")
