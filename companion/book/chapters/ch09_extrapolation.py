"""Chapter 9: models trained at one length, read at longer ones (character LM and passkey retrieval).

The runs are the two cells of the `extrapolation` grid ("charlm", "passkey"), read from their records only: every
model reading (losses and retrieval at lengths never trained on, the per-position loss, GOAT's key prior, one
layer's prior at 8L) is a readout measured at the end of each run (`companion.experiments.extrapolation.readout_specs`,
`companion.readouts`), so records made on any machine carry what the chapter reads. RoPE is read twice: as trained,
and with position interpolation ("rope-pi": positions squeezed into the training range, an evaluation-time switch
that changes no weight, `companion.priors.interpolated`).

`load` and `decide` have the shape every chapter module shares (`companion.book.chapter`); the rest of `__all__`
builds tables, figures and claim readings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from companion.book.chapter import Decision, Findings, Measure, Runs
from companion.book.chapters import resolution
from companion.book.chapters.budget import MODEL, budget as run_budget
from companion.book.chapters.frames import by_method, readout, run_summary
from companion.book.labels import label
from companion.book.missing import gather
from companion.book.parameters import check_parameters
from companion.experiments import get_experiment
from companion.experiments.extrapolation import EVAL_TOKENS, EXPERIMENTS, FAR, METHODS, reading_lengths, readout_specs
from companion.positions import alibi_slopes
from companion.sweep import ensure_grid
from companion.tasks import make_task

__all__ = ["SEEDS", "READINGS", "GOAT_READINGS", "DEPTH_SHOWN", "BASELINES", "Setup", "reading_lengths", "setup", "budget", "passkey_example",
           "setup_numbers", "load", "run_summary", "readings", "lm_lengths",
           "length_curves", "ratio_summary", "ppl_table", "LM", "lm_numbers",
           "position_curves", "goat_profiles", "key_prior_lines",
           "sink_structure", "structure_table", "SINKS", "sink_numbers",
           "passkey_lengths", "passkey_table", "depth_panel", "PASSKEY",
           "passkey_numbers", "head_prior", "verdict_numbers", "decide"]

SEEDS = (0, 1)  # the chapter's seeds: what `load` reads when the notebook's `seeds` is None

# Every reading of the runs, in the order of the chapter's tables and legends ("rope-pi" reads the rope runs).
READINGS = ("goat", "goat-uniform", "rope", "rope-pi", "alibi", "sinusoidal")
GOAT_READINGS = ("goat", "goat-uniform")
# The readings of the depth × length grid (Figure 3c), and the baselines of Figure 3a GOAT is scored against.
DEPTH_SHOWN = ("goat", "goat-uniform", "rope", "alibi")
BASELINES = ("rope", "rope-pi", "sinusoidal")
SPIKE_NATS, RISE_NATS = 2.0, 0.5  # what counts as a first-token spike and as a learned rise (claims S3-11, S3-12)


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

def load(profile: str, seeds: Sequence[int] | None = None, *, jobs: int | None = None, store=None,
         train: bool = True) -> Runs:
    """Blocks "charlm" and "passkey", each {method: [Record in seed order]}; `seeds` None means `SEEDS`; and
    "resolution", the digits ViT of S3-19 at its own seeds (`companion.book.chapters.resolution`, `ci` only: {}
    at another profile). `train=False` reads stored records and raises one `companion.sweep.MissingRuns` when
    some are absent."""
    seeds = list(SEEDS if seeds is None else seeds)
    check_parameters(profile, seeds, jobs)
    cells, images = gather(lambda: ensure_grid("extrapolation", profile, seeds, store=store, jobs=jobs, train=train),
                           lambda: resolution.load(profile, store=store, jobs=jobs, train=train))
    return Runs(profile, seeds, {**{e: by_method(cells[e], METHODS) for e in EXPERIMENTS}, "resolution": images})


def readings(runs: Mapping[str, Sequence], specs: Mapping[str, str],
             name: str) -> Iterator[tuple[str, object, object]]:
    """(reading, record, value) of readout `name` (`specs[name]`) for every record, RoPE twice: as trained,
    then "rope-pi" (readout `name`-pi, the same reading with position interpolation)."""
    for method, recs in runs.items():
        for rec in recs:
            yield method, rec, readout(rec, specs[name])
            if method == "rope":
                yield "rope-pi", rec, readout(rec, specs[f"{name}-pi"])


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


def _labelled(table: pd.DataFrame) -> pd.DataFrame:
    """The table with its reading index shown by the readings' labels."""
    return table.rename(index=label).rename_axis("reading")


def ratio_summary(table: pd.DataFrame, value: str, train_len: int, far: int) -> pd.DataFrame:
    """Per reading: mean and std over seeds of `value` at L and at `far`, and of the per-seed ratio far / L."""
    wide = _wide(table, value)
    ratio = wide[far] / wide[train_len]
    out = pd.DataFrame({f"{value} at L": wide[train_len], f"{value} at {far // train_len}L": wide[far],
                        "ratio": ratio}).groupby("reading", sort=False).agg(["mean", "std"])
    return out.reindex([r for r in READINGS if r in out.index])


def ppl_table(lm: pd.DataFrame, train_len: int, far: int) -> pd.DataFrame:
    """Perplexity at L and at the farthest length, and their ratio (mean, std over seeds), 3 digits."""
    return _labelled(ratio_summary(lm, "ppl", train_len, far).round(3))


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

def goat_profiles(runs: Mapping[str, Sequence], spec: str) -> dict[str, dict[int, dict]]:
    """{GOAT reading: {seed: key prior}} (readout `spec`, `companion.goat.sink_profile`), arrays "j", "u" (layers,
    heads, keys) and the exact "spike" and "rise" (layers, heads)."""
    return {m: {rec.seed: {k: np.asarray(v, dtype=float) for k, v in readout(rec, spec).items()} for rec in runs[m]}
            for m in GOAT_READINGS}


def key_prior_lines(profiles: Mapping[str, Mapping[int, Mapping]]) -> pd.DataFrame:
    """Figure 2b's lines for each GOAT reading's first seed, long form: reading (label), layer, head ("head h"), j, u,
    line: "trained", and for the seeded GOAT "seeded start" (ALiBi's slope of the head times j)."""
    frames = []
    for method, by_seed in profiles.items():
        p = by_seed[min(by_seed)]
        j, u = p["j"], p["u"]
        layers, heads, _ = u.shape
        slopes = alibi_slopes(heads).double().numpy()
        for layer in range(layers):
            for h in range(heads):
                lines = [("trained", u[layer, h])]
                if method == "goat":
                    lines.append(("seeded start", slopes[h] * j))
                frames += [pd.DataFrame({"reading": label(method), "layer": layer, "head": f"head {h}",
                                         "j": j.astype(int), "u": v, "line": what}) for what, v in lines]
    return pd.concat(frames, ignore_index=True)


def sink_structure(profiles: Mapping[str, Mapping[int, Mapping]]) -> pd.DataFrame:
    """Per GOAT reading and seed, over layers and heads: "spike", the largest max(u(0) − u(1), 0), and "rise", the
    largest rise of u over the window's last L/8 keys (L/8 is the experiment's `SINK_TAIL`)."""
    rows = [{"reading": m, "seed": seed, "spike": float(max(p["spike"].max(), 0)), "rise": float(p["rise"].max())}
            for m, by_seed in profiles.items() for seed, p in by_seed.items()]
    return pd.DataFrame(rows).set_index(["reading", "seed"])


def structure_table(structure: pd.DataFrame) -> pd.DataFrame:
    """Spike and rise per seed (rows), per GOAT reading (column groups), 2 digits."""
    names = {"spike": "largest spike u(0) − u(1)", "rise": "largest rise over the last L/8"}
    out = pd.DataFrame({(label(m), names[what]): structure.loc[m, what]
                        for m in structure.index.unique("reading") for what in names})
    return out.rename_axis("seed").round(2)


def _counts(structure: pd.DataFrame) -> tuple[int, int, int]:
    """(seeds with a spike ≥ 2 nats in the seeded GOAT, uniform-start seeds with a rise > 0.5 nats, seeds)."""
    spikes = int(sum(v >= SPIKE_NATS for v in structure.loc["goat", "spike"]))
    rises = int(sum(v > RISE_NATS for v in structure.loc["goat-uniform", "rise"]))
    return spikes, rises, len(structure.loc["goat"])


# Figure 2b, over `sink_structure`, 3 digits. S3-11: share of seeded-GOAT seeds with a first-token spike of at least
# 2 nats; S3-12: share of uniform-start seeds whose u rises by more than 0.5 nats over the last L/8 keys.
SINKS = (
    Measure("S3-11", lambda st: round(_counts(st)[0] / _counts(st)[2], 3),
            detail=lambda st: f"largest spike per seed: {', '.join(f'{v:.1f}' for v in st.loc['goat', 'spike'])}"),
    Measure("S3-12", lambda st: round(_counts(st)[1] / _counts(st)[2], 3),
            detail=lambda st: "largest rise per seed (uniform start): "
                              f"{', '.join(f'{v:.2f}' for v in st.loc['goat-uniform', 'rise'])}"),
)


def sink_numbers(structure: pd.DataFrame) -> dict[str, str]:
    """The Figure 2b numbers the text cites."""
    spikes, rises, n = _counts(structure)
    return {"ch9_spike_seeds": f"{spikes} of {n}", "ch9_spike_max": f"{structure.loc['goat', 'spike'].max():.1f}",
            "ch9_spike_uniform": f"{structure.loc['goat-uniform', 'spike'].max():.1f}",
            "ch9_rise_seeds": f"{rises} of {n}"}


# ---------------------------------------------------------------- Figures 3a, 3c: passkey retrieval

def passkey_lengths(runs: Mapping[str, Sequence], specs: Mapping[str, str],
                    digits: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Retrieval of every passkey model at every length (readouts "lengths", "lengths-pi", `passkey_lengths`;
    `digits`: the key's length). Returns (table, grid): table has columns reading, seed, length, span_acc,
    strict_acc, ce; grid (Figure 3c) is span-token accuracy pooled over seeds (correct digits over digits of the
    keys in the bin; NaN when empty), index (reading, length), one column per equal depth bin of [0, max_depth]."""
    rows, cells, edges = [], [], None
    for reading, rec, value in readings(runs, specs, "lengths"):
        edges = value["depth_edges"]
        for n, r in value["lengths"].items():
            rows.append({"reading": reading, "seed": rec.seed, "length": int(n), "span_acc": r["span_acc"],
                         "strict_acc": r["strict_acc"], "ce": r["ce"]})
            cells += [{"reading": reading, "length": int(n), "bin": k, "hits": hits, "n": keys * digits}
                      for k, (hits, keys) in enumerate(zip(r["digits"], r["keys"]))]
    grid = pd.DataFrame(cells).groupby(["reading", "length", "bin"])[["hits", "n"]].sum()
    grid = (grid["hits"] / grid["n"].where(grid["n"] > 0)).unstack("bin")
    grid.columns = [f"{edges[k]:.2f}–{edges[k + 1]:.2f}" for k in grid.columns]
    columns = ["reading", "seed", "length", "span_acc", "strict_acc", "ce"]
    return pd.DataFrame(rows, columns=columns), grid


def _accuracy(pk: pd.DataFrame, value: str = "span_acc") -> pd.DataFrame:
    """Mean `value` over seeds, one row per reading (chapter order), one column per length."""
    return pk.pivot_table(index="reading", columns="length", values=value).reindex(list(READINGS))


def passkey_table(pk: pd.DataFrame) -> pd.DataFrame:
    """Span-token and strict (whole key) accuracy by reading and length, means over seeds, 3 digits."""
    both = pd.concat({"span-token accuracy": _accuracy(pk), "strict (whole key)": _accuracy(pk, "strict_acc")}, axis=1)
    return _labelled(both.round(3))


def depth_panel(grid: pd.DataFrame, reading: str) -> pd.DataFrame:
    """One reading's depth × length grid: rows the lengths, columns the depth bins by their lower edge."""
    g = grid.loc[reading]
    return g.set_axis([c.split("–")[0] for c in g.columns], axis=1)


def _margin(pk: pd.DataFrame, train_len: int) -> pd.Series:
    """Per seed: GOAT's span-token accuracy minus the best of `BASELINES`, each averaged over lengths beyond L."""
    beyond = [n for n in sorted(pk.length.unique()) if n > train_len]
    per_seed = pk[pk.length.isin(beyond)].groupby(["reading", "seed"])["span_acc"].mean().unstack("seed")
    return per_seed.loc["goat"] - per_seed.loc[list(BASELINES)].max()


def _worst_depth(grid: pd.DataFrame) -> float:
    """GOAT's span-token accuracy in its worst depth bin at the farthest length."""
    goat = grid.loc["goat"]
    return float(goat.loc[goat.index.max()].min())


# Figures 3a and 3c, over {"pk", "grid": `passkey_lengths`, "L": the training length}, 3 digits. S3-13: GOAT minus the
# best of RoPE, RoPE + PI and sinusoidal in span-token accuracy beyond L, mean over seeds (per seed beside it);
# S3-14: GOAT's worst depth bin at the farthest length.
PASSKEY = (
    Measure("S3-13", lambda a: round(float(_margin(a["pk"], a["L"]).mean()), 3),
            detail=lambda a: "GOAT minus the best of RoPE, RoPE + PI, sinusoidal per seed: "
                             + ", ".join(f"{v:+.2f}" for v in _margin(a["pk"], a["L"]))),
    Measure("S3-14", lambda a: round(_worst_depth(a["grid"]), 3),
            detail=lambda a: "GOAT, lowest span-token accuracy over depth bins at 8L"),
)


def passkey_numbers(pk: pd.DataFrame, grid: pd.DataFrame, train_len: int, digits: int) -> dict[str, str]:
    """The Figures 3a and 3c numbers the text cites: accuracy of every reading at L, 4L and the farthest
    length, GOAT's margin and the orderings at 4L, and GOAT's depth grid at the farthest length (the
    last position of its first depth bin counts the key's `digits` and the prompt's)."""
    acc = _accuracy(pk)
    far = int(pk.length.max())
    out = {}
    for reading in READINGS:
        out[f"ch9_pk_L_{reading}"] = f"{acc.loc[reading, train_len]:.2f}"
        out[f"ch9_pk_far_{reading}"] = f"{acc.loc[reading, far]:.2f}"
        out[f"ch9_pk_4L_{reading}"] = f"{acc.loc[reading, 4 * train_len]:.2f}"
    margin = _margin(pk, train_len).mean()
    out["ch9_pk_margin"] = f"{abs(margin):.2f}"
    at4 = acc[4 * train_len]
    out["ch9_goat_rope_word"] = "above" if at4["goat"] > at4["rope"] else "below"
    out["ch9_goat_pi_word"] = "above" if at4["goat"] > at4["rope-pi"] else "below"
    out["ch9_margin_word"] = "ahead of" if margin > 0 else "behind"
    out["ch9_alibi_word"] = "above" if at4["alibi"] > at4["goat"] else "below"
    goat_far = grid.loc["goat"].loc[far]
    out["ch9_niah_min"] = f"{_worst_depth(grid):.2f}"
    out["ch9_niah_first"] = f"{goat_far.iloc[0]:.2f}"
    out["ch9_niah_rest"] = f"{goat_far.iloc[1:].max():.2f}"
    out["ch9_niah_first_end"] = f"{int(float(goat_far.index[0].split('–')[1]) * (far - 1 - 2 * digits)) + 1}"
    return out


# ---------------------------------------------------------------- Figure 3b: one head's prior at 8L

def head_prior(record, spec: str) -> dict[str, np.ndarray]:
    """The last layer's GOAT prior per head at the farthest length (readout `spec`, `companion.goat.head_prior`):
    "i" the positions drawn (the whole n × n matrices would make the record megabytes), "centred" the row-centred
    log-prior at them ((h, P, P), NaN above the diagonal), "limit" its largest magnitude over the whole matrix
    ((h,)) and "log_causal" log10 of the causal prior + 1e-12 ((h, P, P))."""
    return {k: np.asarray(v, dtype=float) for k, v in readout(record, spec).items()}


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
