"""Chapter 9: models trained at one length, read at longer ones (character LM and passkey retrieval).

The runs are the two cells of the `extrapolation` grid ("charlm", "passkey"), read from their records only: every
model reading (losses and retrieval at lengths never trained on, the per-position loss, GOAT's key prior, one
layer's prior at 8L) is a readout measured at the end of each run (`companion.experiments.extrapolation.readout_specs`,
`companion.readouts`), so records made on any machine carry what the chapter reads. RoPE is read twice: as trained,
and with position interpolation ("rope-pi": positions squeezed into the training range, an evaluation-time switch
that changes no weight, `companion.priors.interpolated`).

`load` and `decide` have the shape every chapter module shares (`companion.book.chapter`). What the chapter reads of
its runs is `length_readings`, Figure 2b (the key prior, S3-11, S3-12) `key_prior`, passkey retrieval (Figures 3a-3c,
S3-13, S3-14) `retrieval`; this module keeps the setup, Figure 2a (S3-08 … S3-10), load and decide, and re-exports
what the notebook reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.chapters import resolution
from companion.book.chapters.budget import MODEL, budget as run_budget
from companion.book.chapters.frames import by_method, readout, run_summary
from companion.book.chapters.key_prior import (SINKS, goat_profiles, key_prior_lines, sink_numbers, sink_structure,
                                              structure_table)
from companion.book.chapters.length_readings import (BASELINES, DEPTH_SHOWN, GOAT_READINGS, READINGS, labelled,
                                                     readings)
from companion.book.chapters.retrieval import (PASSKEY, depth_panel, head_prior, passkey_lengths, passkey_numbers,
                                               passkey_table)
from companion.book.missing import gather
from companion.book.parameters import check_parameters
from companion.experiments import get_experiment
from companion.experiments.extrapolation import EVAL_TOKENS, EXPERIMENTS, FAR, METHODS, reading_lengths, readout_specs
from companion.reading import read_grid
from companion.tasks import make_task

__all__ = ["SEEDS", "READINGS", "GOAT_READINGS", "DEPTH_SHOWN", "BASELINES", "Setup", "reading_lengths", "setup", "budget", "passkey_example",
           "setup_numbers", "load", "run_summary", "readings", "lm_lengths",
           "length_curves", "ratio_summary", "ppl_table", "LM", "lm_numbers",
           "position_curves", "goat_profiles", "key_prior_lines",
           "sink_structure", "structure_table", "SINKS", "sink_numbers",
           "passkey_lengths", "passkey_table", "depth_panel", "PASSKEY",
           "passkey_numbers", "head_prior", "verdict_numbers", "decide"]

SEEDS = (0, 1)  # the chapter's seeds: what `load` reads when the notebook's `seeds` is None


# ---------------------------------------------------------------- what is trained

@dataclass(frozen=True)
class Setup:
    """Both experiments at one profile: configs by method, their tasks, and the lengths each is read at
    (its training length L times 1, 2, 4, … up to `far`, the experiment's `FAR`)."""

    profile: str
    lm_configs: dict
    pk_configs: dict
    lm_task: object
    pk_task: object
    far: int

    @property
    def L(self) -> int:
        """The character model's training length."""
        return self.lm_task.seq_len

    @property
    def lengths(self) -> list[int]:
        """The character model's reading lengths L, 2L, … far·L."""
        return reading_lengths(self.lm_task.seq_len, self.far)

    @property
    def pk_lengths(self) -> list[int]:
        """The passkey model's reading lengths (its own L, 2L, … far·L)."""
        return reading_lengths(self.pk_task.seq_len, self.far)

    @property
    def eval_tokens(self) -> int:
        """The test characters every length of the character model reads (the experiment's `EVAL_TOKENS`)."""
        return EVAL_TOKENS[self.profile]

    @property
    def lm_specs(self) -> dict[str, str]:
        """What the chapter reads from the character models' records: name → readout spec."""
        return readout_specs("charlm", self.profile)

    @property
    def pk_specs(self) -> dict[str, str]:
        """What the chapter reads from the passkey models' records: name → readout spec."""
        return readout_specs("passkey", self.profile)


def setup(profile: str) -> Setup:
    """The configs and tasks of both experiments at `profile`, read up to `FAR[profile]` × their training length."""
    lm_cfg, pk_cfg = get_experiment("charlm").configs(profile), get_experiment("passkey").configs(profile)
    return Setup(profile, lm_cfg, pk_cfg, make_task(lm_cfg["goat"].task), make_task(pk_cfg["goat"].task), FAR[profile])


def budget(s: Setup, seeds: Sequence[int] | None = None) -> pd.DataFrame:
    """The shared budget, one column named after the profile, rows as in `chapters.budget` plus GOAT's frequencies,
    both tasks' updates, the training length and the number of seeds (None: `SEEDS`)."""
    c = s.lm_configs["goat"]
    values = {**run_budget(c, MODEL), "GOAT frequencies R": c.model.prior.goat_rank,
              **run_budget(c, ("Optimiser", "Learning rate", "Batch size")), "Updates (char LM)": c.train.steps,
              "Updates (passkey)": s.pk_configs["goat"].train.steps, "Training length L": s.L,
              "Seeds": len(SEEDS if seeds is None else seeds)}
    return pd.Series(values, name=s.profile).to_frame()


def passkey_example(s: Setup) -> str:
    """The first test sequence of the passkey at its training length, as text."""
    return s.pk_task.decode(s.pk_task.test_set(s.pk_task.seq_len)[0][0])


def setup_numbers(s: Setup) -> dict[str, str]:
    """The setup's numbers the text cites: lengths, corpus sizes, key digits, training steps, depth and width."""
    return {"ch9_L": str(s.L), "ch9_far_len": str(s.lengths[-1]),
            "ch9_train_chars": f"{len(s.lm_task.streams['train']):,}",
            "ch9_test_chars": f"{len(s.lm_task.streams['test']):,}",
            "ch9_vocab": str(s.lm_task.spec.vocab_size), "ch9_digits": str(s.pk_task.digits),
            "ch9_eval_tokens": f"{s.eval_tokens:,}", "ch9_steps_lm": str(s.lm_configs["goat"].train.steps),
            "ch9_steps_pk": str(s.pk_configs["goat"].train.steps),
            "ch9_layers": str(s.lm_configs["goat"].model.n_layers), "ch9_d_model": str(s.lm_configs["goat"].model.d_model)}


# ---------------------------------------------------------------- runs

def load(profile: str, seeds: Sequence[int] | None = None, *, store=None) -> Runs:
    """Blocks "charlm" and "passkey", each {method: [Record in seed order]}; `seeds` None means `SEEDS`; and
    "resolution", the digits ViT of S3-19 at its own seeds (`companion.book.chapters.resolution`, `ci` only: {}
    at another profile). Reads stored records and raises one `companion.reading.MissingRuns` when some
    are absent."""
    seeds = list(SEEDS if seeds is None else seeds)
    check_parameters(profile, seeds)
    cells, images = gather(lambda: read_grid("extrapolation", profile, seeds, store=store),
                           lambda: resolution.load(profile, store=store))
    return Runs(profile, seeds, {**{e: by_method(cells[e], METHODS) for e in EXPERIMENTS}, "resolution": images})


def length_curves(table: pd.DataFrame, value: str) -> pd.DataFrame:
    """`value` per reading, seed and length, long form, the reading as "method" (the hue of `plots.mean_interval`)."""
    return table.rename(columns={"reading": "method"})[["method", "seed", "length", value]]


# ---------------------------------------------------------------- Figure 2a: perplexity by length

def lm_lengths(runs: Mapping[str, Sequence], specs: Mapping[str, str]) -> pd.DataFrame:
    """Test loss of every character LM at every length (readouts "lengths", "lengths-pi", `lm_lengths`: every length
    reads the same first test characters): columns reading, seed, length, ce, ppl, bpc."""
    rows = [{"reading": reading, "seed": rec.seed, "length": int(n), "ce": r["ce"], "ppl": r["ppl"], "bpc": r["bpc"]}
            for reading, rec, value in readings(runs, specs, "lengths") for n, r in value.items()]
    return pd.DataFrame(rows, columns=["reading", "seed", "length", "ce", "ppl", "bpc"])


def _wide(table: pd.DataFrame, value: str) -> pd.DataFrame:
    """`value` with index (reading, seed) and one column per length."""
    return table.pivot_table(index=["reading", "seed"], columns="length", values=value)


def ratio_summary(table: pd.DataFrame, value: str, train_len: int, far: int) -> pd.DataFrame:
    """Per reading: mean and std over seeds of `value` at L and at `far`, and of the per-seed ratio far / L."""
    wide = _wide(table, value)
    ratio = wide[far] / wide[train_len]
    out = pd.DataFrame({f"{value} at L": wide[train_len], f"{value} at {far // train_len}L": wide[far],
                        "ratio": ratio}).groupby("reading", sort=False).agg(["mean", "std"])
    return out.reindex([r for r in READINGS if r in out.index])


def ppl_table(lm: pd.DataFrame, train_len: int, far: int) -> pd.DataFrame:
    """Perplexity at L and at the farthest length, and their ratio (mean, std over seeds), 3 digits."""
    return labelled(ratio_summary(lm, "ppl", train_len, far).round(3))


def _lm_ratios(lm: pd.DataFrame, train_len: int, far: int) -> dict[str, pd.Series]:
    """Per seed: RoPE's and GOAT's perplexity far / at L, and ALiBi minus GOAT perplexity at L."""
    wide = _wide(lm, "ppl")
    return {"rope": wide.loc["rope"][far] / wide.loc["rope"][train_len],
            "goat": wide.loc["goat"][far] / wide.loc["goat"][train_len],
            "in_window": wide.loc["alibi"][train_len] - wide.loc["goat"][train_len]}


def _per_seed(key: str, fmt: str):
    return lambda a: f"per seed {', '.join(format(v, fmt) for v in _lm_ratios(a['lm'], a['L'], a['far'])[key])}"


def _lm_mean(key: str):
    return lambda a: round(float(_lm_ratios(a["lm"], a["L"], a["far"])[key].mean()), 3)


# Figure 2a, over {"lm": `lm_lengths`, "L": the training length, "far": the farthest length}; each the mean over seeds
# (3 digits), its per-seed values beside it. S3-08: RoPE's perplexity at `far` over at L; S3-09: ALiBi minus GOAT
# perplexity at L; S3-10: GOAT's perplexity at `far` over at L.
LM = (Measure("S3-08", _lm_mean("rope"), detail=_per_seed("rope", ".2f")),
      Measure("S3-09", _lm_mean("in_window"), detail=_per_seed("in_window", ".2f")),
      Measure("S3-10", _lm_mean("goat"), detail=_per_seed("goat", ".3f")))


def lm_numbers(lm: pd.DataFrame, train_len: int, far: int) -> dict[str, str]:
    """The Figure 2a numbers the text cites: mean perplexity of every reading at L and at `far`, ALiBi's
    in-window gap, whether PI is higher or lower than RoPE at `far`, and GOAT's far / L ratios."""
    wide = _wide(lm, "ppl")
    out = {}
    for reading in READINGS:
        out[f"ch9_ppl_L_{reading}"] = f"{wide.loc[reading][train_len].mean():.2f}"
        out[f"ch9_ppl_far_{reading}"] = f"{wide.loc[reading][far].mean():.2f}"
    out["ch9_alibi_gap"] = f"{_lm_ratios(lm, train_len, far)['in_window'].mean():.2f}"
    far_ppl = wide.xs(far, axis=1).groupby("reading").mean()
    out["ch9_pi_word"] = "higher" if far_ppl["rope-pi"] > far_ppl["rope"] else "lower"
    ratio_by = (wide[far] / wide[train_len]).groupby("reading").mean()
    out["ch9_ratio_goat"] = f"{ratio_by['goat']:.3f}"
    out["ch9_ratio_goat-uniform"] = f"{ratio_by['goat-uniform']:.3f}"
    return out


def position_curves(runs: Mapping[str, Sequence], specs: Mapping[str, str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{reading: (characters read, smoothed CE)} of each reading's first-seed run at the farthest length (readouts
    "positions", "positions-pi", `lm_positions`: a moving mean of the loss, x offset by half the window)."""
    out = {}
    for reading in READINGS:
        method = "rope" if reading == "rope-pi" else reading
        value = readout(runs[method][0], specs["positions-pi" if reading == "rope-pi" else "positions"])
        out[reading] = (np.asarray(value["x"]), np.asarray(value["ce"], dtype=float))
    return out


# ---------------------------------------------------------------- Figure 2b: the key prior u(j)


# ---------------------------------------------------------------- Figures 3a, 3c: passkey retrieval


# ---------------------------------------------------------------- Figure 3b: one head's prior at 8L


def verdict_numbers(results: Sequence, seeds: Sequence[int]) -> dict[str, str]:
    """{"ch9_verdict_<claim id>": verdict} of the recorded claims, and "ch9_n_seeds", the seeds per model."""
    return {f"ch9_verdict_{r.id}": r.verdict for r in results} | {"ch9_n_seeds": str(len(seeds))}


def decide(runs: Runs) -> Findings:
    """Every claim (S3-08 … S3-14, in the notebook's order) and every number the prose cites (setup, Figures 2a, 2b,
    3a and 3c, verdicts, seed count). Parts: `setup`, `lm` (`lm_lengths`), `profiles` (`goat_profiles`),
    `structure` (`sink_structure`), `pk` and `grid` (`passkey_lengths`)."""
    s = setup(runs.profile)
    lm_runs, pk_runs = runs["charlm"], runs["passkey"]
    d = Decision()
    d.glue(setup_numbers(s))
    lm = lm_lengths(lm_runs, s.lm_specs)
    far = s.lengths[-1]
    d.measure(LM, {"lm": lm, "L": s.L, "far": far})
    d.glue(lm_numbers(lm, s.L, far))
    profiles = goat_profiles(lm_runs, s.lm_specs["sink"])
    structure = sink_structure(profiles)
    d.measure(SINKS, structure)
    d.glue(sink_numbers(structure))
    pk, grid = passkey_lengths(pk_runs, s.pk_specs, s.pk_task.digits)
    train_len = s.pk_task.seq_len
    d.measure(PASSKEY, {"pk": pk, "grid": grid, "L": train_len})
    d.glue(passkey_numbers(pk, grid, train_len, s.pk_task.digits))
    images = resolution.decide(d, runs.blocks.get("resolution"))  # S3-19, S3-24: the ViT at larger sizes
    d.glue(verdict_numbers(d.results, runs.seeds))
    return d.done(setup=s, lm=lm, profiles=profiles, structure=structure, pk=pk, grid=grid, images=images)
