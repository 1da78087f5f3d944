"""Readouts of Chapter 9's runs (`companion.readouts`, `companion.tasks.text`, `companion.tasks.passkey`):
each equals the direct computation on the same model, the RoPE readings with position interpolation
differ only beyond the training length, and the spec helpers parse and reject exactly."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from companion.book.chapters.entropic import prior_panels
from companion.config import ModelConfig, TaskConfig
from companion.experiments import get_experiment
from companion.experiments.copy_mixture import prior_model
from companion.experiments.extrapolation import METHODS, method_readouts, readout_specs
from companion.experiments.extrapolation import CONTROL_READOUTS
from companion.goat import sink_profiles
from companion.model import Transformer
from companion.priors import interpolated
from companion.measuring import check_readouts, measure_readouts
from companion.readouts import option_int, rounded, sample_positions, split_arg
from companion.tasks import make_task

BASE = ModelConfig(arch="decoder", d_model=16, n_layers=2, n_heads=2, d_head=8, d_ff=32)


def _model(method, task, seed=0):
    return Transformer(prior_model(BASE, method, rank=2), task.spec, generator=torch.Generator().manual_seed(seed)).eval()


@pytest.fixture(scope="module")
def text():
    return make_task(TaskConfig.of("char-lm", seq_len=8))


@pytest.fixture(scope="module")
def passkey():
    return make_task(TaskConfig.of("passkey", seq_len=16, n_train=8, n_test=48))


# ---------------------------------------------------------------- spec helpers

def test_split_arg_and_options():
    assert split_arg("64,128;tokens=16384;pi", "x", ("tokens", "pi")) == ("64,128", {"tokens": "16384", "pi": ""})
    assert split_arg("512", "x", ()) == ("512", {})
    for bad in ("64;bins=5", "64;pi;pi"):
        with pytest.raises(ValueError, match="unknown or repeated"):
            split_arg(bad, "x", ("pi",))
    assert option_int({"tokens": "12"}, "tokens", None, "x") == 12 and option_int({}, "tokens", 7, "x") == 7
    for bad in ("0", "-3", "a"):
        with pytest.raises(ValueError, match="positive integer"):
            option_int({"tokens": bad}, "tokens", None, "x")


def test_sample_positions_and_rounding():
    assert sample_positions(5, 8) == [0, 1, 2, 3, 4]
    assert sample_positions(10, 4) == [0, 3, 6, 9]
    assert sample_positions(10, 4, keep=(1, 12)) == [0, 1, 3, 6, 9]
    assert sample_positions(10, 1) == [0]
    assert rounded(torch.tensor([[1 / 3, math.nan], [-123456.789, 2.0]], dtype=torch.float64), 4) == \
        [[0.3333, None], [-123500.0, 2.0]]


def test_every_extrapolation_run_lists_registered_readouts_and_rope_reads_twice():
    for experiment in ("charlm", "passkey"):
        for profile in ("ci", "paper"):
            configs = get_experiment(experiment).configs(profile)
            specs = readout_specs(experiment, profile)
            for m in METHODS:
                assert configs[m].readouts == method_readouts(experiment, profile, m)
                check_readouts(configs[m].readouts, configs[m].task.name)
            control = set(CONTROL_READOUTS.get(experiment, ()))  # Chapter 7's Figure 2c control reads charlm too
            assert set(configs["rope"].readouts) == control | {v for k, v in specs.items() if k in (
                "lengths", "lengths-pi", "positions", "positions-pi")}
    assert readout_specs("charlm", "ci")["lengths-pi"] == "lm_lengths:64,128,256,512;tokens=16384;pi"
    assert readout_specs("passkey", "paper")["head"] == "head_prior:1024;points=16"
    assert "sink_profile:512;points=128;tail=8" in method_readouts("charlm", "ci", "goat-uniform")
    assert not any(s.startswith("head_prior") for s in method_readouts("passkey", "ci", "goat-uniform"))


# ---------------------------------------------------------------- character LM

def test_lm_lengths_is_ce_at_on_the_first_tokens_and_pi_changes_only_long_reads(text):
    model = _model("rope", text)
    out = measure_readouts(["lm_lengths:8,32;tokens=256", "lm_lengths:8,32;tokens=256;pi", "lm_lengths:16"], model, text)
    plain, pi, whole = out.values()
    for n in (8, 32):
        direct = text.ce_at(model, n, limit=256 // n)
        assert plain[str(n)] == {k: direct[k] for k in ("ce", "ppl", "bpc", "windows")}
        with interpolated(model, 8):
            assert pi[str(n)]["ce"] == text.ce_at(model, n, limit=256 // n)["ce"]
    assert plain["8"] == pi["8"] and plain["32"]["ce"] != pi["32"]["ce"]
    assert whole["16"]["ce"] == text.ce_at(model, 16)["ce"] and whole["16"]["windows"] == len(text.windows(16))
    assert all(p.interpolate == 0 for p in model.modules() if getattr(p, "interpolates", False))
    with pytest.raises(ValueError, match="interpolates"):
        measure_readouts(["lm_lengths:8;pi"], _model("goat", text), text)


def test_lm_positions_is_the_moving_mean_of_the_per_position_loss(text):
    model = _model("goat", text)
    out = measure_readouts(["lm_positions:32;tokens=256;window=4", "lm_positions:32;tokens=256;window=4;points=5"],
                           model, text)
    full, few = out.values()
    per = text.ce_at(model, 32, limit=8)["per_position"].numpy()
    expected = np.convolve(per, np.ones(4) / 4, mode="valid")
    assert full["x"] == list(range(2, 31)) and full["ce"] == expected.tolist()
    assert few["x"] == [2, 9, 16, 23, 30] and few["ce"] == expected[[0, 7, 14, 21, 28]].tolist()
    with pytest.raises(ValueError, match="char-lm task"):
        measure_readouts(["lm_positions:32"], model, make_task(TaskConfig.of("passkey", seq_len=16, n_train=8)))


# ---------------------------------------------------------------- passkey

def test_passkey_lengths_is_accuracy_at_with_depth_bin_counts(passkey):
    model = _model("rope", passkey)
    plain, pi = measure_readouts(["passkey_lengths:16,32;bins=4", "passkey_lengths:16,32;bins=4;pi"], model,
                                 passkey).values()
    assert plain["depth_edges"] == pytest.approx([0, 0.2, 0.4, 0.6, 0.8], abs=1e-12)
    for n in (16, 32):
        r, cell = passkey.accuracy_at(model, n), plain["lengths"][str(n)]
        assert (cell["span_acc"], cell["strict_acc"], cell["ce"]) == (r["span_acc"], r["strict_acc"], r["ce"])
        assert sum(cell["keys"]) == 48 and sum(cell["digits"]) == int(r["correct"].sum())
        bins = np.clip(np.searchsorted(np.linspace(0, 0.8, 5), r["depth"].numpy(), side="right") - 1, 0, 3)
        assert cell["keys"] == np.bincount(bins, minlength=4).tolist()
        assert cell["digits"][0] == int(r["correct"][torch.from_numpy(bins == 0)].sum())
    assert plain["lengths"]["16"] == pi["lengths"]["16"] and plain["lengths"]["32"] != pi["lengths"]["32"]
    json.dumps(plain)  # plain JSON (numpy counts became lists of ints)


# ---------------------------------------------------------------- GOAT's priors

def test_sink_profile_keeps_spike_and_rise_exact_and_draws_the_lines(text):
    model = _model("goat", text, seed=3)
    with torch.no_grad():
        for p in model.modules():  # a trained-looking prior: random sink weights
            if hasattr(p, "sink_w2"):
                p.sink_w2.normal_(generator=torch.Generator().manual_seed(1))
                p.sink_bump.normal_(generator=torch.Generator().manual_seed(2))
    value = measure_readouts(["sink_profile:40;points=6;tail=4"], model, text)["sink_profile:40;points=6;tail=4"]
    with torch.no_grad():
        u = sink_profiles(model, 40)
    assert value["j"] == [0, 1, 8, 16, 23, 31, 39]
    np.testing.assert_array_equal(value["spike"], (u[:, :, 0] - u[:, :, 1]).numpy())
    np.testing.assert_array_equal(value["rise"], (u[:, :, 7] - u[:, :, 5]).numpy())  # L = 8, last 8 // 4 keys
    np.testing.assert_allclose(value["u"], u[:, :, value["j"]].numpy(), rtol=1e-5, atol=1e-12)
    with pytest.raises(ValueError, match="GOAT runs only"):
        measure_readouts(["sink_profile:40"], _model("alibi", text), text)
    with pytest.raises(ValueError, match="training length"):
        measure_readouts(["sink_profile:4"], model, text)


def test_head_prior_is_the_last_layers_panels_at_the_drawn_positions(text):
    model = _model("goat", text, seed=2)
    with torch.no_grad():
        for p in model.modules():
            if hasattr(p, "alpha"):
                p.alpha.normal_(generator=torch.Generator().manual_seed(4))
    value = measure_readouts(["head_prior:20;points=5"], model, text)["head_prior:20;points=5"]
    panels = prior_panels(model.blocks[-1].attn.prior, 20)
    i = value["i"]
    assert i == [0, 5, 10, 14, 19]
    centred = np.array(value["centred"], dtype=float)
    expected = panels["centred"][:, i][:, :, i]
    np.testing.assert_array_equal(np.isnan(centred), np.isnan(expected))  # above the diagonal: None
    np.testing.assert_allclose(centred, expected, rtol=1e-3, atol=1e-12)
    np.testing.assert_allclose(value["log_causal"], np.log10(panels["causal"] + 1e-12)[:, i][:, :, i], rtol=1e-3)
    assert value["limit"] == [float(np.nanmax(np.abs(c))) for c in panels["centred"]]
