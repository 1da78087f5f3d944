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

from companion.book import ch09_extrapolation as ch
from companion.config import ModelConfig, TaskConfig
from companion.experiments.copy_mixture import prior_model
from companion.goat import sink_profiles as core_sink_profiles
from companion.model import Transformer
from companion.positions import alibi_slopes
from companion.priors import Prior
from companion.tasks import TaskSpec, make_task

matplotlib.use("Agg")

SPEC = TaskSpec(inputs="tokens", output="lm", vocab_size=11, seq_len=8)
BASE = ModelConfig(arch="decoder", d_model=16, n_layers=2, n_heads=2, d_head=8, d_ff=32)
SEEDS = (0, 1)


def _model(method, spec=SPEC, seed=0):
    return Transformer(prior_model(BASE, method, rank=2), spec, generator=torch.Generator().manual_seed(seed)).eval()


def _interpolating(model):
    return [m for m in model.modules() if isinstance(m, Prior) and m.interpolates]


# ---------------------------------------------------------------- readings and the interpolation switch

def test_interpolation_changes_long_inputs_only_and_is_undone():
    model = _model("rope")
    assert len(_interpolating(model)) == BASE.n_layers  # one RoPE per layer, found through the protocol
    short, long = torch.randint(0, 11, (2, 8)), torch.randint(0, 11, (2, 24))
    with torch.no_grad():
        before_short, before_long = model(short), model(long)
        with ch.interpolated(model, 8) as m:
            assert m is model and all(p.interpolate == 8 for p in _interpolating(model))
            torch.testing.assert_close(model(short), before_short)
            assert not torch.allclose(model(long), before_long)
        assert all(p.interpolate == 0 for p in _interpolating(model))
        torch.testing.assert_close(model(long), before_long)
    for method in ("alibi", "goat", "sinusoidal"):
        with pytest.raises(ValueError, match="no prior that interpolates"):
            with ch.interpolated(_model(method), 8):
                pass


def test_interpolation_is_undone_when_the_block_raises():
    model = _model("rope")
    with pytest.raises(RuntimeError):
        with ch.interpolated(model, 8):
            raise RuntimeError
    assert all(p.interpolate == 0 for p in _interpolating(model))


def test_rope_is_read_twice_and_everything_else_once():
    runs = {"goat": [SimpleNamespace(seed=0), SimpleNamespace(seed=1)], "rope": [SimpleNamespace(seed=0)]}
    models = {"goat": ["g0", "g1"], "rope": ["r0"]}
    assert list(ch.readings(runs, models)) == [("goat", 0, "g0", False), ("goat", 1, "g1", False),
                                               ("rope", 0, "r0", False), ("rope-pi", 0, "r0", True)]


def _record(method, seed, task=None, wall_time=1.0):
    config = SimpleNamespace(experiment="charlm", profile="ci", method=method, seed=seed, task=task)
    return SimpleNamespace(config=config, seed=seed, run_id=f"{method}-{seed}", wall_time=wall_time,
                           metrics={"test": {"ppl": 1.0}})


def test_load_reads_the_extrapolation_grid_by_method_in_seed_order(monkeypatch):
    calls = []

    def fake_grid(name, profile, seeds, *, jobs=None, weights=False):
        calls.append((name, profile, tuple(seeds), jobs, weights))
        return {e: [_record(m, s) for s in (1, 0) for m in ("rope", "goat")] for e in ("charlm", "passkey")}

    monkeypatch.setattr(ch, "ensure_grid", fake_grid)
    loaded = ch.load("ci", [0, 1], jobs=3)
    assert calls == [("extrapolation", "ci", (0, 1), 3, True)]
    assert list(loaded) == ["charlm", "passkey"]
    runs = loaded["charlm"]
    assert list(runs) == ["goat", "goat-uniform", "rope", "alibi", "sinusoidal"]
    assert [r.run_id for r in runs["goat"]] == ["goat-0", "goat-1"] and runs["alibi"] == []
    monkeypatch.setattr(ch, "trained_models", lambda recs: [r.run_id.upper() for r in recs])
    assert ch.models({"rope": runs["rope"]}) == {"rope": ["ROPE-0", "ROPE-1"]}


def test_run_summary_counts_every_run_of_both_experiments():
    loaded = {"charlm": {"goat": [_record("goat", 0, wall_time=1.0), _record("goat", 1, wall_time=2.0)]},
              "passkey": {"rope": [_record("rope", 0, wall_time=3.0), _record("rope", 1, wall_time=4.0)]}}
    assert ch.run_summary(loaded) == "4 runs; mean wall time per run 2.5 s"


# ---------------------------------------------------------------- setup

def test_setup_reads_both_experiments_at_their_own_lengths():
    s = ch.setup("ci", 8)
    assert s.L == 64 and s.lengths == [64, 128, 256, 512] and s.pk_lengths == [64, 128, 256, 512]
    assert ch.reading_lengths(128, 8) == [128, 256, 512, 1024] and ch.reading_lengths(5, 1) == [5]
    b = ch.budget(s, SEEDS)["ci"]
    assert (b["layers"], b["heads"], b["steps (char LM)"], b["steps (passkey)"], b["seeds"]) == (2, 4, 400, 500, 2)
    numbers = ch.setup_numbers(s, 16384)
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
    assert ch.lm_claims(lm, L, FAR) == {"S3-08": 2.5, "S3-09": 1.5, "S3-10": 1.05}
    assert ch.lm_claim_details(lm, L, FAR) == {"S3-08": "per seed 3.00, 2.00", "S3-09": "per seed 1.50, 1.50",
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

    fig, ax = plt.subplots()
    ch.length_axis(ax, [4, 8, 16], 4)
    assert ax.get_xscale() == "log" and list(ax.get_xticks()) == [4, 8, 16]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "8", "16"]
    assert list(ax.lines[0].get_xdata()) == [4, 4]
    plt.close(fig)


class _FakeText:
    seq_len = 4

    def ce_at(self, model, length, limit=None):
        return {"per_position": torch.arange(length, dtype=torch.float64) * model}


def test_per_position_is_a_moving_mean_of_the_loss_at_each_position():
    pos = ch.per_position(_FakeText(), 2.0, 10, window=4)  # loss 2t at position t: means of 4 consecutive
    np.testing.assert_allclose(pos, 2.0 * (np.arange(7) + 1.5))


def test_lm_lengths_read_rope_with_interpolation_only_past_the_training_length():
    task_cfg = TaskConfig.of("char-lm", seq_len=8)
    spec = make_task(task_cfg).spec
    runs = {m: [_record(m, 0, task=task_cfg)] for m in ("goat", "rope")}
    models = {m: [_model(m, spec)] for m in runs}
    lm = ch.lm_lengths(runs, models, [8, 32], tokens=256)
    assert list(lm.reading) == ["goat", "goat", "rope", "rope", "rope-pi", "rope-pi"]
    np.testing.assert_allclose(lm.ppl, np.exp(lm.ce))
    np.testing.assert_allclose(lm.bpc, lm.ce / math.log(2))
    by = lm.set_index(["reading", "length"]).ce
    assert by["rope", 8] == by["rope-pi", 8] and by["rope", 32] != by["rope-pi", 32]
    curves = ch.position_curves(make_task(task_cfg), {**models, "goat-uniform": models["goat"],
                                                      "alibi": models["goat"], "sinusoidal": models["goat"]},
                                32, window=4, tokens=256)
    assert list(curves) == list(ch.READINGS)
    x, ce = curves["rope-pi"]
    assert list(x) == list(range(2, 31)) and len(ce) == 29
    np.testing.assert_array_equal(curves["goat"][1], ch.per_position(make_task(task_cfg), models["goat"][0], 32,
                                                                     window=4, tokens=256))
    np.testing.assert_array_equal(curves["rope-pi"][1], ch.per_position(make_task(task_cfg), models["rope"][0], 32,
                                                                        interpolate=True, window=4, tokens=256))
    assert not np.allclose(curves["rope"][1], curves["rope-pi"][1])


# ---------------------------------------------------------------- Figure 2b

def _profiles():
    def zeros():
        return np.zeros((2, 2, 16))

    g0, g1, u0, u1 = zeros(), zeros(), zeros(), zeros()
    g0[1, 0, 0], g0[1, 0, 1], g0[0, 0, 7] = 3.0, 0.5, 0.3  # spike 2.5, rise 0.3
    g1[:, :, 1] = 1.0  # every u(0) − u(1) is −1: the spike is clamped at 0
    u0[0, 1, 7], u0[0, 0, 0] = 0.6, 1.3  # rise 0.6, spike 1.3
    u1[1, 1, 7] = 0.5  # rise 0.5: not more than half a nat
    return {"goat": {0: g0, 1: g1}, "goat-uniform": {0: u0, 1: u1}}


def test_sink_structure_claims_and_numbers():
    structure = ch.sink_structure(_profiles(), 8)
    assert structure.loc["goat", "spike"].tolist() == [2.5, 0.0]
    assert structure.loc["goat", "rise"].tolist() == [0.3, 0.0]
    assert structure.loc["goat-uniform", "spike"].tolist() == [1.3, 0.0]
    assert structure.loc["goat-uniform", "rise"].tolist() == [0.6, 0.5]
    assert ch.sink_claims(structure) == {"S3-11": 0.5, "S3-12": 0.5}
    assert ch.sink_claim_details(structure) == {"S3-11": "largest spike per seed: 2.5, 0.0",
                                                "S3-12": "largest rise per seed (uniform start): 0.60, 0.50"}
    assert ch.sink_numbers(structure) == {"ch9_spike_seeds": "1 of 2", "ch9_spike_max": "2.5",
                                          "ch9_spike_uniform": "1.3", "ch9_rise_seeds": "1 of 2"}
    table = ch.structure_table(structure)
    assert list(table.index) == [0, 1] and table.index.name == "seed"
    assert table[("GOAT", "largest spike u(0) − u(1)")].tolist() == [2.5, 0.0]
    assert table[("GOAT (uniform start)", "largest rise over the last L/8")].tolist() == [0.6, 0.5]


def test_sink_profiles_are_the_core_profiles_of_every_goat_prior():
    model = _model("goat")
    prof = ch.sink_profiles(model, 20)
    assert isinstance(prof, np.ndarray) and prof.shape == (2, 2, 20) and prof.dtype == np.float64
    with torch.no_grad():
        np.testing.assert_array_equal(prof, core_sink_profiles(model, 20).numpy())
        np.testing.assert_allclose(prof[1], model.blocks[1].attn.prior.sink(torch.arange(20)).double().numpy())
    with pytest.raises(ValueError, match="no GOAT prior"):
        ch.sink_profiles(_model("rope"), 4)
    runs = {m: [SimpleNamespace(seed=3), SimpleNamespace(seed=5)] for m in ch.GOAT_READINGS}
    models = {m: [_model("goat", seed=1), _model("goat", seed=2)] for m in ch.GOAT_READINGS}
    profiles = ch.goat_profiles(runs, models, 12)
    assert list(profiles) == ["goat", "goat-uniform"] and list(profiles["goat"]) == [3, 5]
    np.testing.assert_array_equal(profiles["goat"][5], ch.sink_profiles(models["goat"][1], 12))


def test_key_prior_lines_draw_the_first_seed_and_the_seeded_start():
    lines = ch.key_prior_lines(_profiles())
    trained = lines[lines.line == "trained"]
    assert len(trained) == 2 * 2 * 2 * 16 and len(lines) == len(trained) + 2 * 2 * 16
    assert set(lines[lines.line == "seeded start"].reading) == {"GOAT"}
    u = trained[(trained.reading == "GOAT") & (trained.layer == 1) & (trained["head"] == "head 0")].u.tolist()
    assert u == _profiles()["goat"][0][1, 0].tolist()
    start = lines[(lines.line == "seeded start") & (lines.layer == 0) & (lines["head"] == "head 1")]
    np.testing.assert_allclose(start.u, alibi_slopes(2)[1].item() * np.arange(16))


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
    assert ch.passkey_claims(pk, grid, 4) == {"S3-13": 0.125, "S3-14": 0.09}
    assert ch.passkey_claim_details(pk, 4) == {
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


def test_passkey_lengths_pool_depth_bins_and_read_rope_twice():
    task_cfg = TaskConfig.of("passkey", seq_len=16, n_train=8, n_test=48)
    spec = make_task(task_cfg).spec
    runs = {m: [_record(m, s, task=task_cfg) for s in SEEDS] for m in ("alibi", "rope")}
    models = {m: [_model(m, spec, seed=s) for s in SEEDS] for m in runs}
    pk, grid = ch.passkey_lengths(runs, models, [16, 32], depth_bins=4)
    assert len(pk) == 3 * 2 * 2 and list(grid.columns) == ["0.00–0.20", "0.20–0.40", "0.40–0.60", "0.60–0.80"]
    assert list(grid.index) == [(r, n) for r in ("alibi", "rope", "rope-pi") for n in (16, 32)]
    at = pk.set_index(["reading", "seed", "length"])
    for s in SEEDS:  # interpolation changes nothing at the training length
        assert at.loc[("rope", s, 16)].tolist() == at.loc[("rope-pi", s, 16)].tolist()
    np.testing.assert_array_equal(grid.loc["rope", 16], grid.loc["rope-pi", 16])
    assert (pk.strict_acc <= pk.span_acc).all()
    # every model reads the same test set: the depth bins, weighted by their sizes, give back the mean
    # span-token accuracy over seeds (an empty bin is NaN and weighs nothing)
    task = make_task(task_cfg)
    for n in (16, 32):
        _, start = task.test_set(n)
        depth = ((start - 1).double() / (n - 1 - 2 * task.digits)).numpy()
        bins = np.clip(np.searchsorted(np.linspace(0, 0.8, 5), depth, side="right") - 1, 0, 3)
        sizes = np.bincount(bins, minlength=4)
        for reading in ("alibi", "rope", "rope-pi"):
            pooled = np.nansum(grid.loc[reading, n].to_numpy() * sizes) / sizes.sum()
            assert pooled == pytest.approx(pk[(pk.reading == reading) & (pk.length == n)].span_acc.mean(), abs=1e-6)


# ---------------------------------------------------------------- Figure 3b

def test_head_prior_panels_of_the_last_layer():
    model = _model("goat")
    panels = ch.head_prior(model, 12)
    assert panels["centred"].shape == (2, 12, 12) and panels["log_causal"].shape == (2, 12, 12)
    for h in range(2):
        assert panels["limit"][h] == np.nanmax(np.abs(panels["centred"][h]))
    causal = 10 ** panels["log_causal"] - 1e-12
    np.testing.assert_allclose(causal.sum(-1), 1.0, atol=1e-9)
    rows = panels["centred"][0]
    np.testing.assert_allclose(np.nanmean(rows, -1), 0.0, atol=1e-9)
