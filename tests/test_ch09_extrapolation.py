"""Chapter 9's module: position interpolation through the prior protocol, every reading, and each claim
measure, table and prose number on small synthetic tables with exact values."""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch

from companion.book.chapter import details, measures
from companion.book.chapters import ch09_extrapolation as ch
from companion.book.chapter import Runs, claims
from companion.config import ModelConfig, TaskConfig
from companion.experiments.copy_mixture import prior_model
from companion.experiments.extrapolation import METHODS, readout_specs
from companion.goat import sink_profiles as core_sink_profiles
from companion.model import Transformer
from companion.positions import alibi_slopes
from companion.measuring import measure_readouts
from companion.tasks import TaskSpec, make_task

matplotlib.use("Agg")

SPEC = TaskSpec(inputs="tokens", output="lm", vocab_size=11, seq_len=8)
BASE = ModelConfig(arch="decoder", d_model=16, n_layers=2, n_heads=2, d_head=8, d_ff=32)
SEEDS = (0, 1)


def _model(method, spec=SPEC, seed=0):
    return Transformer(prior_model(BASE, method, rank=2), spec, generator=torch.Generator().manual_seed(seed)).eval()


# ---------------------------------------------------------------- records and their readouts

LM_SPECS, PK_SPECS = readout_specs("charlm", "ci"), readout_specs("passkey", "ci")


def _record(method, seed, task=None, wall_time=1.0, readouts=None, experiment="charlm"):
    config = SimpleNamespace(experiment=experiment, profile="ci", method=method, seed=seed, task=task)
    return SimpleNamespace(config=config, seed=seed, run_id=f"{method}-{seed}", wall_time=wall_time,
                           metrics={"test": {"ppl": 1.0}}, readouts=readouts or {})


def test_rope_is_read_twice_and_everything_else_once():
    specs = {"lengths": "a", "lengths-pi": "a;pi"}
    runs = {"goat": [_record("goat", 0, readouts={"a": 1}), _record("goat", 1, readouts={"a": 2})],
            "rope": [_record("rope", 0, readouts={"a": 3, "a;pi": 4})]}
    got = [(reading, rec.run_id, value) for reading, rec, value in ch.readings(runs, specs, "lengths")]
    assert got == [("goat", "goat-0", 1), ("goat", "goat-1", 2), ("rope", "rope-0", 3), ("rope-pi", "rope-0", 4)]
    runs["rope"] = [_record("rope", 0, readouts={"a": 3})]
    with pytest.raises(ValueError, match="has no readout 'a;pi'.*rerun"):
        list(ch.readings(runs, specs, "lengths"))


def test_load_reads_the_stored_records_of_the_extrapolation_grid_by_method_in_seed_order():
    loaded = ch.load("ci", [1, 0])  # the committed store, which holds records and no weights
    assert isinstance(loaded, Runs) and (loaded.profile, loaded.seeds) == ("ci", (1, 0))
    assert list(loaded.blocks) == ["charlm", "passkey", "resolution"]
    # the digits ViT of S3-19 at its own seeds, whatever the chapter's
    assert {m: [r.seed for r in recs] for m, recs in loaded["resolution"].items()} == {
        m: list(range(6)) for m in ("learned", "sincos-2d", "goat-2d", "goat-2d-shared")}
    for block in ("charlm", "passkey"):
        runs = loaded[block]
        assert list(runs) == ["goat", "goat-uniform", "rope", "alibi", "sinusoidal"]
        for method, records in runs.items():
            assert [(r.config.experiment, r.config.method, r.seed) for r in records] == [
                (block, method, 0), (block, method, 1)]
    assert ch.load("ci").seeds == ch.SEEDS == (0, 1)  # the notebook's default seeds


def test_run_summary_counts_every_run_of_both_experiments():
    loaded = {"charlm": {"goat": [_record("goat", 0, wall_time=1.0), _record("goat", 1, wall_time=2.0)]},
              "passkey": {"rope": [_record("rope", 0, wall_time=3.0), _record("rope", 1, wall_time=4.0)]}}
    assert ch.run_summary(loaded) == "4 runs; mean wall time per run 2.5 s"


# ---------------------------------------------------------------- setup

def test_setup_reads_both_experiments_at_their_own_lengths():
    s = ch.setup("ci")
    assert s.far == 8 and s.eval_tokens == 16384 and s.lm_specs == LM_SPECS and s.pk_specs == PK_SPECS
    assert s.L == 64 and s.lengths == [64, 128, 256, 512] and s.pk_lengths == [64, 128, 256, 512]
    assert ch.reading_lengths(128, 8) == [128, 256, 512, 1024] and ch.reading_lengths(5, 1) == [5]
    b = ch.budget(s, SEEDS)["ci"]
    assert (b["Layers"], b["Heads"], b["Updates (char LM)"], b["Updates (passkey)"], b["Seeds"]) == (2, 4, 400, 500, 2)
    assert (b["Model width"], b["Head width"], b["Batch size"]) == (64, 24, 32)
    numbers = ch.setup_numbers(s)
    assert numbers["ch9_L"] == "64" and numbers["ch9_far_len"] == "512" and numbers["ch9_eval_tokens"] == "16,384"
    assert numbers["ch9_digits"] == "5" and numbers["ch9_steps_lm"] == "400" and numbers["ch9_steps_pk"] == "500"
    assert numbers["ch9_train_chars"] == f"{len(s.lm_task.streams['train']):,}"
    assert (numbers["ch9_layers"], numbers["ch9_d_model"]) == ("2", "64")
    example = ch.passkey_example(s)
    # L inputs and the last target: the key hidden in the filler, the prompt, the key again
    assert len(example) == 65 and example[-6] == "=" and example[-5:].isdigit() and example[-5:] in example[:-6]


def test_verdict_numbers_glue_each_verdict_and_the_seeds():
    results = [SimpleNamespace(id="S3-08", verdict="reproduced"), SimpleNamespace(id="S3-09", verdict="partly")]
    assert ch.verdict_numbers(results, [0, 1]) == {"ch9_verdict_S3-08": "reproduced", "ch9_verdict_S3-09": "partly",
                                                   "ch9_n_seeds": "2"}


# ---------------------------------------------------------------- Figure 2a

L, FAR = 4, 16
PPL = {  # reading → {length: [seed 0, seed 1]}
    "goat": {4: [5.0, 6.0], 8: [5.0, 6.0], 16: [5.0, 6.6]},
    "goat-uniform": {4: [5.0, 5.0], 8: [5.0, 5.0], 16: [5.5, 4.5]},
    "rope": {4: [4.0, 5.0], 8: [6.0, 7.0], 16: [12.0, 10.0]},
    "rope-pi": {4: [4.0, 5.0], 8: [9.0, 9.0], 16: [20.0, 22.0]},
    "alibi": {4: [6.5, 7.5], 8: [6.5, 7.5], 16: [6.5, 7.5]},
    "sinusoidal": {4: [9.0, 9.0], 8: [18.0, 18.0], 16: [27.0, 27.0]},
}


def _lm_table():
    return pd.DataFrame([{"reading": r, "seed": s, "length": n, "ppl": v[s], "ce": math.log(v[s])}
                         for r, by_len in PPL.items() for n, v in by_len.items() for s in SEEDS])


def test_lm_claims_are_the_ratios_and_gap_of_the_mean_over_seeds():
    lm = _lm_table()
    assert measures(ch.LM, {"lm": lm, "L": L, "far": FAR}) == {"S3-08": 2.5, "S3-09": 1.5, "S3-10": 1.05}
    assert details(ch.LM, {"lm": lm, "L": L, "far": FAR}) == {"S3-08": "per seed 3.00, 2.00", "S3-09": "per seed 1.50, 1.50",
                                               "S3-10": "per seed 1.000, 1.100"}


def test_lm_numbers():
    n = ch.lm_numbers(_lm_table(), L, FAR)
    assert (n["ch9_ppl_L_goat"], n["ch9_ppl_far_goat"], n["ch9_ppl_far_rope"], n["ch9_ppl_far_rope-pi"]) == \
        ("5.50", "5.80", "11.00", "21.00")
    assert n["ch9_ppl_L_sinusoidal"] == "9.00" and n["ch9_ppl_far_alibi"] == "7.00"
    assert n["ch9_alibi_gap"] == "1.50" and n["ch9_pi_word"] == "higher"
    assert n["ch9_ratio_goat"] == "1.050" and n["ch9_ratio_goat-uniform"] == "1.000"
    assert {k for k in n if k.startswith("ch9_ppl_")} == {f"ch9_ppl_{w}_{r}" for w in ("L", "far") for r in ch.READINGS}
    lower = _lm_table()
    lower.loc[(lower.reading == "rope-pi") & (lower.length == FAR), "ppl"] = 1.0
    assert ch.lm_numbers(lower, L, FAR)["ch9_pi_word"] == "lower"


def test_ppl_table_is_the_ratio_summary_in_chapter_order_with_labels():
    table = ch.ppl_table(_lm_table(), L, FAR)
    assert list(table.index) == ["GOAT", "GOAT (uniform start)", "RoPE", "RoPE + PI", "ALiBi", "sinusoidal"]
    assert list(table.columns) == [("ppl at L", "mean"), ("ppl at L", "std"), ("ppl at 4L", "mean"),
                                   ("ppl at 4L", "std"), ("ratio", "mean"), ("ratio", "std")]
    assert table.loc["RoPE", ("ratio", "mean")] == 2.5
    assert table.loc["RoPE", ("ratio", "std")] == round(math.sqrt(0.5), 3)
    assert table.loc["ALiBi", ("ppl at 4L", "mean")] == 7.0


def test_length_curves_name_the_reading_as_the_method_hue():
    curves = ch.length_curves(_lm_table(), "ppl")
    assert list(curves.columns) == ["method", "seed", "length", "ppl"]
    assert len(curves) == 6 * 3 * 2 and set(curves.method) == set(ch.READINGS)


def test_length_axis_is_a_log_axis_ticked_at_the_lengths():
    import matplotlib.pyplot as plt

    from companion.book.chapters.figures import ch09 as draw

    fig, ax = plt.subplots()
    draw._length_axis(ax, [4, 8, 16], 4)
    assert ax.get_xscale() == "log" and list(ax.get_xticks()) == [4, 8, 16]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "8", "16"]
    assert list(ax.lines[0].get_xdata()) == [4, 4]
    plt.close(fig)


def _lm_runs():
    """Records whose readouts hold the perplexities of PPL at lengths 64 (L), 128 and 512 (8L)."""
    at = dict(zip((L, 8, FAR), (64, 128, 512)))

    def value(reading, seed):
        return {str(at[n]): {"ce": math.log(v[seed]), "ppl": v[seed], "bpc": math.log(v[seed]) / math.log(2),
                             "windows": 1} for n, v in PPL[reading].items()}

    runs = {}
    for m in METHODS:
        runs[m] = []
        for seed in SEEDS:
            readouts = {LM_SPECS["lengths"]: value(m, seed)}
            readouts[LM_SPECS["positions"]] = {"x": [8, 9, 10], "ce": [seed + 1.0, 2.0, 3.0]}
            if m == "rope":
                readouts[LM_SPECS["lengths-pi"]] = value("rope-pi", seed)
                readouts[LM_SPECS["positions-pi"]] = {"x": [8, 9, 10], "ce": [seed + 5.0, 6.0, 7.0]}
            runs[m].append(_record(m, seed, readouts=readouts))
    return runs


def test_lm_lengths_read_the_records_and_give_the_claims_of_the_same_table():
    lm = ch.lm_lengths(_lm_runs(), LM_SPECS)
    assert list(lm.columns) == ["reading", "seed", "length", "ce", "ppl", "bpc"]
    assert list(dict.fromkeys(lm.reading)) == ["goat", "goat-uniform", "rope", "rope-pi", "alibi", "sinusoidal"]
    expected = _lm_table().replace({"length": {L: 64, 8: 128, FAR: 512}})
    merged = lm.merge(expected, on=["reading", "seed", "length"], suffixes=("", "_table"))
    assert len(merged) == len(lm) == 6 * 3 * 2 and (merged.ppl == merged.ppl_table).all()
    assert measures(ch.LM, {"lm": lm, "L": 64, "far": 512}) == measures(ch.LM, {"lm": _lm_table(), "L": L, "far": FAR}) == {"S3-08": 2.5, "S3-09": 1.5, "S3-10": 1.05}


def test_position_curves_read_the_first_seed_rope_pi_from_its_own_readout():
    curves = ch.position_curves(_lm_runs(), LM_SPECS)
    assert list(curves) == list(ch.READINGS)
    x, ce = curves["rope-pi"]
    assert x.tolist() == [8, 9, 10] and ce.tolist() == [5.0, 6.0, 7.0] and curves["goat"][1].tolist() == [1.0, 2.0, 3.0]


def test_a_tiny_models_readouts_in_a_record_give_the_direct_readings():
    """End to end on real models: what a run stores (`measure_readouts` of its config's specs) read by
    the chapter equals `ce_at` on the same model, with position interpolation for "rope-pi"."""
    from companion.priors import interpolated
    from companion.measuring import measure_readouts

    task_cfg = TaskConfig.of("char-lm", seq_len=8)
    task = make_task(task_cfg)
    specs = {"lengths": "lm_lengths:8,32;tokens=256", "lengths-pi": "lm_lengths:8,32;tokens=256;pi",
             "positions": "lm_positions:32;tokens=256;window=4", "positions-pi": "lm_positions:32;tokens=256;window=4;pi"}
    models = {m: _model(m, task.spec) for m in ("goat", "rope")}
    runs = {m: [_record(m, 0, task=task_cfg, readouts=measure_readouts(
        [v for k, v in specs.items() if m == "rope" or not k.endswith("-pi")], model, task))]
        for m, model in models.items()}
    lm = ch.lm_lengths(runs, specs).set_index(["reading", "length"])
    for n in (8, 32):
        assert lm.ce["goat", n] == task.ce_at(models["goat"], n, limit=256 // n)["ce"]
        assert lm.ce["rope", n] == task.ce_at(models["rope"], n, limit=256 // n)["ce"]
        with interpolated(models["rope"], 8):
            assert lm.ce["rope-pi", n] == task.ce_at(models["rope"], n, limit=256 // n)["ce"]
    np.testing.assert_allclose(lm.ppl, np.exp(lm.ce))
    assert lm.ce["rope", 8] == lm.ce["rope-pi", 8] and lm.ce["rope", 32] != lm.ce["rope-pi", 32]
    runs |= {m: runs["goat"] for m in ("goat-uniform", "alibi", "sinusoidal")}
    x, ce = ch.position_curves(runs, specs)["rope-pi"]
    with interpolated(models["rope"], 8):
        per = task.ce_at(models["rope"], 32, limit=8)["per_position"].numpy()
    assert x.tolist() == list(range(2, 31))
    np.testing.assert_array_equal(ce, np.convolve(per, np.ones(4) / 4, mode="valid"))


# ---------------------------------------------------------------- Figure 2b

def _arrays():
    def zeros():
        return np.zeros((2, 2, 16))

    g0, g1, u0, u1 = zeros(), zeros(), zeros(), zeros()
    g0[1, 0, 0], g0[1, 0, 1], g0[0, 0, 7] = 3.0, 0.5, 0.3  # spike 2.5, rise 0.3
    g1[:, :, 1] = 1.0  # every u(0) − u(1) is −1: the spike is clamped at 0
    u0[0, 1, 7], u0[0, 0, 0] = 0.6, 1.3  # rise 0.6, spike 1.3
    u1[1, 1, 7] = 0.5  # rise 0.5: not more than half a nat
    return {"goat": {0: g0, 1: g1}, "goat-uniform": {0: u0, 1: u1}}


def _sink_value(p, train_len=8, tail=8):
    """What the `sink_profile` readout stores for profile p (every key drawn)."""
    return {"j": list(range(p.shape[-1])), "u": p.tolist(), "spike": (p[:, :, 0] - p[:, :, 1]).tolist(),
            "rise": (p[:, :, train_len - 1] - p[:, :, train_len - 1 - train_len // tail]).tolist()}


def _profiles():
    runs = {m: [_record(m, seed, readouts={LM_SPECS["sink"]: _sink_value(p)}) for seed, p in by_seed.items()]
            for m, by_seed in _arrays().items()}
    return ch.goat_profiles(runs, LM_SPECS["sink"])


def test_sink_structure_claims_and_numbers():
    structure = ch.sink_structure(_profiles())
    assert structure.loc["goat", "spike"].tolist() == [2.5, 0.0]
    assert structure.loc["goat", "rise"].tolist() == [0.3, 0.0]
    assert structure.loc["goat-uniform", "spike"].tolist() == [1.3, 0.0]
    assert structure.loc["goat-uniform", "rise"].tolist() == [0.6, 0.5]
    assert measures(ch.SINKS, structure) == {"S3-11": 0.5, "S3-12": 0.5}
    assert details(ch.SINKS, structure) == {"S3-11": "largest spike per seed: 2.5, 0.0",
                                                "S3-12": "largest rise per seed (uniform start): 0.60, 0.50"}
    assert ch.sink_numbers(structure) == {"ch9_spike_seeds": "1 of 2", "ch9_spike_max": "2.5",
                                          "ch9_spike_uniform": "1.3", "ch9_rise_seeds": "1 of 2"}
    table = ch.structure_table(structure)
    assert list(table.index) == [0, 1] and table.index.name == "seed"
    assert table[("GOAT", "largest spike u(0) − u(1)")].tolist() == [2.5, 0.0]
    assert table[("GOAT (uniform start)", "largest rise over the last L/8")].tolist() == [0.6, 0.5]


def test_goat_profiles_of_a_tiny_models_readout_are_its_core_profiles():
    task = make_task(TaskConfig.of("char-lm", seq_len=8))
    models = {m: _model("goat", task.spec, seed=s) for m, s in (("goat", 1), ("goat-uniform", 2))}
    spec = "sink_profile:20;points=64;tail=8"
    runs = {m: [_record(m, 3, readouts=measure_readouts([spec], model, task))] for m, model in models.items()}
    profiles = ch.goat_profiles(runs, spec)
    assert list(profiles) == ["goat", "goat-uniform"] and list(profiles["goat"]) == [3]
    p, u = profiles["goat"][3], core_sink_profiles(models["goat"], 20).numpy()
    assert p["u"].shape == (2, 2, 20) and p["j"].tolist() == list(range(20))
    np.testing.assert_allclose(p["u"], u, rtol=1e-5, atol=1e-12)
    structure = ch.sink_structure(profiles)
    assert structure.loc[("goat", 3), "spike"] == max(float((u[:, :, 0] - u[:, :, 1]).max()), 0.0)
    assert structure.loc[("goat", 3), "rise"] == float((u[:, :, 7] - u[:, :, 6]).max())
    with pytest.raises(ValueError, match="has no readout"):
        ch.goat_profiles({m: [_record(m, 0)] for m in ch.GOAT_READINGS}, spec)


def test_key_prior_lines_draw_the_first_seed_and_the_seeded_start():
    lines = ch.key_prior_lines(_profiles())
    trained = lines[lines.line == "trained"]
    assert len(trained) == 2 * 2 * 2 * 16 and len(lines) == len(trained) + 2 * 2 * 16
    assert set(lines[lines.line == "seeded start"].reading) == {"GOAT"}
    u = trained[(trained.reading == "GOAT") & (trained.layer == 1) & (trained["head"] == "head 0")].u.tolist()
    assert u == _arrays()["goat"][0][1, 0].tolist()
    start = lines[(lines.line == "seeded start") & (lines.layer == 0) & (lines["head"] == "head 1")]
    np.testing.assert_allclose(start.u, alibi_slopes(2)[1].item() * np.arange(16))
    sparse = {m: {0: {**p[0], "j": p[0]["j"][::5], "u": p[0]["u"][:, :, ::5]}} for m, p in _profiles().items()}
    start = ch.key_prior_lines(sparse).query("line == 'seeded start' and layer == 0 and head == 'head 1'")
    assert start.j.tolist() == [0, 5, 10, 15]  # the keys the readout drew
    np.testing.assert_allclose(start.u, alibi_slopes(2)[1].item() * np.array([0, 5, 10, 15]))


# ---------------------------------------------------------------- Figures 3a, 3c

ACC = {  # reading → {length: [seed 0, seed 1]}; training length 4
    "goat": {4: [1.0, 1.0], 8: [1.0, 0.75], 16: [0.75, 0.5], 32: [0.5, 0.25]},
    "goat-uniform": {4: [1.0, 1.0], 8: [0.5, 0.5], 16: [0.25, 0.25], 32: [0.0, 0.0]},
    "rope": {4: [1.0, 1.0], 8: [0.5, 0.125], 16: [0.5, 0.125], 32: [0.5, 0.125]},
    "rope-pi": {4: [1.0, 1.0], 8: [0.875, 0.0], 16: [0.875, 0.0], 32: [0.875, 0.0]},
    "alibi": {4: [1.0, 1.0], 8: [1.0, 1.0], 16: [1.0, 1.0], 32: [1.0, 1.0]},
    "sinusoidal": {4: [0.125, 0.125], 8: [0.125, 0.125], 16: [0.125, 0.125], 32: [0.125, 0.125]},
}
BINS = ["0.00–0.16", "0.16–0.32", "0.32–0.48", "0.48–0.64", "0.64–0.80"]


def _pk_table():
    return pd.DataFrame([{"reading": r, "seed": s, "length": n, "span_acc": v[s], "strict_acc": v[s] / 2}
                         for r, by_len in ACC.items() for n, v in by_len.items() for s in SEEDS])


def _grid():
    rows = {(r, n): [0.5] * 5 for r in ACC for n in (4, 8, 16, 32)}
    rows["goat", 32] = [0.66, 0.1, 0.13, 0.09, 0.12]
    grid = pd.DataFrame.from_dict(rows, orient="index", columns=BINS)
    grid.index = pd.MultiIndex.from_tuples(grid.index, names=["reading", "length"])
    return grid


def test_passkey_claims_margin_over_the_best_baseline_and_worst_depth():
    pk, grid = _pk_table(), _grid()
    # per seed, beyond L: GOAT 0.75 and 0.5; best baseline 0.875 (RoPE + PI) and 0.125 (RoPE, sinusoidal)
    assert measures(ch.PASSKEY, {"pk": pk, "grid": grid, "L": 4}) == {"S3-13": 0.125, "S3-14": 0.09}
    assert details(ch.PASSKEY, {"pk": pk, "L": 4}) == {
        "S3-13": "GOAT minus the best of RoPE, RoPE + PI, sinusoidal per seed: -0.12, +0.38",
        "S3-14": "GOAT, lowest span-token accuracy over depth bins at 8L"}


def test_passkey_numbers():
    n = ch.passkey_numbers(_pk_table(), _grid(), 4, 5)
    assert (n["ch9_pk_L_goat"], n["ch9_pk_4L_goat"], n["ch9_pk_far_goat"]) == ("1.00", "0.62", "0.38")
    assert (n["ch9_pk_4L_rope"], n["ch9_pk_4L_rope-pi"], n["ch9_pk_far_alibi"]) == ("0.31", "0.44", "1.00")
    assert n["ch9_pk_L_sinusoidal"] == "0.12" and n["ch9_pk_4L_goat-uniform"] == "0.25"
    assert n["ch9_pk_margin"] == "0.12" and n["ch9_margin_word"] == "ahead of"
    assert (n["ch9_goat_rope_word"], n["ch9_goat_pi_word"], n["ch9_alibi_word"]) == ("above", "above", "above")
    # the first depth bin ends at 0.16 of the filler: 0.16 · (32 − 1 − 2·5) = 3.36 → position 4
    assert (n["ch9_niah_min"], n["ch9_niah_first"], n["ch9_niah_rest"], n["ch9_niah_first_end"]) == \
        ("0.09", "0.66", "0.13", "4")
    behind = _pk_table()
    behind.loc[behind.reading == "goat", "span_acc"] = 0.0
    n = ch.passkey_numbers(behind, _grid(), 4, 5)
    assert n["ch9_margin_word"] == "behind" and n["ch9_goat_rope_word"] == "below" and n["ch9_pk_margin"] == "0.50"


def test_passkey_table_and_depth_panel():
    table = ch.passkey_table(_pk_table())
    assert list(table.index) == ["GOAT", "GOAT (uniform start)", "RoPE", "RoPE + PI", "ALiBi", "sinusoidal"]
    assert table.loc["GOAT", ("span-token accuracy", 16)] == 0.625
    assert table.loc["GOAT", ("strict (whole key)", 16)] == round(0.3125, 3)
    panel = ch.depth_panel(_grid(), "goat")
    assert list(panel.columns) == ["0.00", "0.16", "0.32", "0.48", "0.64"] and list(panel.index) == [4, 8, 16, 32]
    assert panel.loc[32].tolist() == [0.66, 0.1, 0.13, 0.09, 0.12]


def test_passkey_lengths_of_tiny_models_pool_depth_bins_and_read_rope_twice():
    task_cfg = TaskConfig.of("passkey", seq_len=16, n_train=8, n_test=48)
    task = make_task(task_cfg)
    specs = {"lengths": "passkey_lengths:16,32;bins=4", "lengths-pi": "passkey_lengths:16,32;bins=4;pi"}
    models = {m: [_model(m, task.spec, seed=s) for s in SEEDS] for m in ("alibi", "rope")}
    runs = {m: [_record(m, s, task=task_cfg, experiment="passkey", readouts=measure_readouts(
        [v for k, v in specs.items() if m == "rope" or k == "lengths"], model, task)) for s, model in zip(SEEDS, ms)]
        for m, ms in models.items()}
    pk, grid = ch.passkey_lengths(runs, specs, task.digits)
    assert len(pk) == 3 * 2 * 2 and list(grid.columns) == ["0.00–0.20", "0.20–0.40", "0.40–0.60", "0.60–0.80"]
    assert list(grid.index) == [(r, n) for r in ("alibi", "rope", "rope-pi") for n in (16, 32)]
    at = pk.set_index(["reading", "seed", "length"])
    for s, model in zip(SEEDS, models["rope"]):  # the records hold `accuracy_at` of the same models
        assert at.loc[("rope", s, 32), "span_acc"] == task.accuracy_at(model, 32)["span_acc"]
        assert at.loc[("rope", s, 16)].tolist() == at.loc[("rope-pi", s, 16)].tolist()
    np.testing.assert_array_equal(grid.loc["rope", 16], grid.loc["rope-pi", 16])
    assert (pk.strict_acc <= pk.span_acc).all()
    # every model reads the same test set: the depth bins, weighted by their sizes, give back the mean
    # span-token accuracy over seeds (an empty bin is NaN and weighs nothing)
    for n in (16, 32):
        _, start = task.test_set(n)
        depth = ((start - 1).double() / (n - 1 - 2 * task.digits)).numpy()
        bins = np.clip(np.searchsorted(np.linspace(0, 0.8, 5), depth, side="right") - 1, 0, 3)
        sizes = np.bincount(bins, minlength=4)
        for reading in ("alibi", "rope", "rope-pi"):
            pooled = np.nansum(grid.loc[reading, n].to_numpy() * sizes) / sizes.sum()
            mean = pk[(pk.reading == reading) & (pk.length == n)].span_acc.mean()
            assert pooled == pytest.approx(mean, abs=1e-6)  # span_acc is a float32 mean, the grid exact


def test_passkey_grid_is_correct_digits_over_key_digits_and_nan_when_empty():
    spec = "passkey_lengths:64;bins=2"
    cell = lambda digits, keys: {"depth_edges": [0, 0.4, 0.8], "lengths": {"64": {  # noqa: E731
        "span_acc": 0.5, "strict_acc": 0.25, "ce": 1.0, "digits": digits, "keys": keys}}}
    runs = {"goat": [_record("goat", 0, readouts={spec: cell([6, 0], [2, 0])}),
                     _record("goat", 1, readouts={spec: cell([3, 0], [2, 0])})]}
    pk, grid = ch.passkey_lengths(runs, {"lengths": spec}, 5)
    assert list(grid.columns) == ["0.00–0.40", "0.40–0.80"]
    assert grid.loc[("goat", 64), "0.00–0.40"] == 9 / 20 and np.isnan(grid.loc[("goat", 64), "0.40–0.80"])


# ---------------------------------------------------------------- Figure 3b

def test_head_prior_reads_the_last_layers_panels_from_the_record():
    from companion.book.chapters.entropic import prior_panels

    task = make_task(TaskConfig.of("char-lm", seq_len=8))
    model = _model("goat", task.spec)
    spec = "head_prior:12;points=12"
    panels = ch.head_prior(_record("goat", 0, readouts=measure_readouts([spec], model, task)), spec)
    full = prior_panels(model.blocks[-1].attn.prior, 12)
    assert panels["centred"].shape == (2, 12, 12) and panels["log_causal"].shape == (2, 12, 12)
    assert panels["i"].tolist() == list(range(12))
    np.testing.assert_array_equal(np.isnan(panels["centred"]), np.isnan(full["centred"]))
    np.testing.assert_allclose(panels["centred"], full["centred"], rtol=1e-3, atol=1e-12)
    for h in range(2):
        assert panels["limit"][h] == np.nanmax(np.abs(full["centred"][h]))
    causal = 10 ** panels["log_causal"] - 1e-12
    np.testing.assert_allclose(causal.sum(-1), 1.0, rtol=1e-3)
    with pytest.raises(ValueError, match="has no readout 'head_prior:12;points=12'"):
        ch.head_prior(_record("goat", 0), spec)


# ---------------------------------------------------------------- claims

def _pk_runs():
    """Passkey records: ACC's span-token accuracy at 64 … 512, GOAT's depth grid of `_grid` at 512."""
    at = dict(zip((4, 8, 16, 32), (64, 128, 256, 512)))
    goat_far = [0.66, 0.1, 0.13, 0.09, 0.12]

    def value(reading, seed):
        lengths = {}
        for n, v in ACC[reading].items():
            acc = goat_far if (reading, n) == ("goat", 32) else [0.5] * 5
            lengths[str(at[n])] = {"span_acc": v[seed], "strict_acc": v[seed] / 2, "ce": 1.0,
                                   "digits": [round(a * 500) for a in acc], "keys": [100] * 5}
        return {"depth_edges": np.linspace(0, 0.8, 6).tolist(), "lengths": lengths}

    return {m: [_record(m, seed, experiment="passkey", readouts={
        PK_SPECS["lengths"]: value(m, seed), **({PK_SPECS["lengths-pi"]: value("rope-pi", seed)} if m == "rope" else {})})
        for seed in SEEDS] for m in METHODS}


def test_claims_decide_every_claim_from_the_records_in_the_notebooks_order(monkeypatch):
    lm_runs, pk_runs = _lm_runs(), _pk_runs()
    for m, by_seed in _arrays().items():
        for rec in lm_runs[m]:
            rec.readouts[LM_SPECS["sink"]] = _sink_value(by_seed[rec.seed])
    grid = {"charlm": [r for recs in lm_runs.values() for r in recs], "passkey": [r for recs in pk_runs.values() for r in recs]}
    monkeypatch.setattr(ch, "read_grid", lambda name, profile, seeds, **kw: grid)
    monkeypatch.setattr(ch.resolution, "load", lambda profile, **kw: {})  # S3-19 and S3-24: tests/test_book_resolution.py
    results = claims(ch, store="records")
    pk = ch.passkey_lengths(pk_runs, PK_SPECS, 5)[0]
    assert [r.id for r in results] == ["S3-08", "S3-09", "S3-10", "S3-11", "S3-12", "S3-13", "S3-14"]
    measures = {r.id: r.measure for r in results}
    assert {k: measures[k] for k in ("S3-08", "S3-09", "S3-10")} == {"S3-08": 2.5, "S3-09": 1.5, "S3-10": 1.05}
    assert (measures["S3-11"], measures["S3-12"]) == (0.5, 0.5)
    assert (measures["S3-13"], measures["S3-14"]) == (0.125, 0.09) and len(pk) == 6 * 4 * 2
    found = ch.decide(ch.load("ci", store="records"))
    assert [(r.id, r.measure, r.verdict) for r in found.results] == [(r.id, r.measure, r.verdict) for r in results]
    assert list(found.parts) == ["setup", "lm", "profiles", "structure", "pk", "grid", "images"]
    n = found.numbers
    assert found["images"] == {} and n["ch9_verdict_S3-19"] == n["ch9_res_diff"] == "—"  # no resolution runs
    assert n["ch9_n_seeds"] == "2" and all(n[f"ch9_verdict_{r.id}"] == r.verdict for r in results)
    assert n["ch9_L"] == "64" and n["ch9_ppl_far_rope"] == "11.00" and n["ch9_spike_seeds"] == "1 of 2"
    assert n["ch9_pk_margin"] == "0.12" and n["ch9_niah_min"] == "0.09"
    assert set(n) >= set(ch.setup_numbers(found["setup"])) | set(ch.sink_numbers(found["structure"]))
