"""Attention as entropic transport (Chapter 7): the optimiser's solution equals softmax (Props 2.2, 3.1);
Theorem 5.1 and Figure 2c read from the records' readouts equal what the chapter computed from the
trained models before; the chapter's tables, claim measures, prose numbers, `load` and `decide`. (The
measurements on models themselves are tested in tests/test_transport.py.)"""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from companion.book.chapter import details, measures, preconditions
from companion.book.chapters import ch07_transport as ch
from companion.book.chapters import transport_bounds as bounds7
from companion.book.claims import record_all
from companion.book.chapters.entropic import objective, solve_entropic
from companion.config import ModelConfig, PriorConfig, TaskConfig
from companion.model import Transformer, init_weights_
from companion.measuring import measure_readouts
from companion.tasks import make_task
from companion.transport import attention_internals, collapse_bounds, matched_bins, sink_vs_signal

G = torch.Generator().manual_seed(0)


def test_uniform_prior_gives_softmax_and_a_prior_shifts_it():
    for tau in (0.3, 1.0, 2.5):
        s = torch.randn(7, 33, generator=G, dtype=torch.float64) * 3
        log_pi = torch.randn(7, 33, generator=G, dtype=torch.float64) * 2
        torch.testing.assert_close(solve_entropic(s, tau=tau), torch.softmax(s / tau, -1), rtol=0, atol=1e-12)
        p = solve_entropic(s, log_pi, tau)
        torch.testing.assert_close(p, torch.softmax(s / tau + log_pi, -1), rtol=0, atol=1e-12)
        # optimal among simplex points: no random point does better
        other = torch.distributions.Dirichlet(torch.ones(33, dtype=torch.float64)).sample((7, 200)).transpose(0, 1)
        assert (objective(other, s, log_pi, tau) >= objective(p, s, log_pi, tau) - 1e-12).all()
        assert not torch.allclose(p, torch.softmax(s / tau, -1), atol=1e-3)  # the prior matters


# ---------------------------------------------------------------- the chapter module

def test_propositions_meet_the_closed_forms_and_are_reproducible():
    eot = ch.propositions((4, 16), (0.5, 2.0), rows=8, points=16)
    assert list(eot.index) == [(4, 0.5), (4, 2.0), (16, 0.5), (16, 2.0)]
    assert eot[[ch.PROP22, ch.PROP31, ch.EQ3]].to_numpy().max() < 1e-12 and (eot[ch.BETTER] == 0).all()
    pd.testing.assert_frame_equal(eot, ch.propositions((4, 16), (0.5, 2.0), rows=8, points=16))
    assert ch.proposition_checks(eot) == {"closed forms met to 1e-12": True, "random points better": 0}
    shown = ch.propositions_table(eot)
    assert shown.iloc[0, 0] == "< 1e-13" and shown[ch.BETTER].tolist() == [0, 0, 0, 0]  # rounding, as a bound


def test_psi_and_margin_follow_definitions_5_2_and_5_3_exactly():
    # z = (ln 4, 0, 0): p = (2/3, 1/6, 1/6), Ψ = 1/3, margin ln 4, and the cap (L−1)/(e^m + L−1) = 2/6 is attained
    z = torch.tensor([[math.log(4.0), 0.0, 0.0], [0.0, 1.0, -1.0]], dtype=torch.float64)
    sink = torch.tensor([0, 2])
    psi, gap = bounds7.psi_of(z, sink), bounds7.sink_gap(z, sink)
    assert abs(psi[0] - 1 / 3) < 1e-15 and abs(gap[0] - math.log(4.0)) < 1e-15
    assert abs(2 / (gap[0].exp() + 2) - psi[0]) < 1e-15
    # a key that is not the largest has a negative margin, and Ψ is everything but its own weight
    assert abs(gap[1] - (-2.0)) < 1e-15 and abs(psi[1] - (1 - torch.softmax(z[1], -1)[2])) < 1e-15


def test_sensitivity_holds_is_attained_and_is_reproducible():
    sens = ch.sensitivity((4, 16), rows=8)
    assert list(sens.index) == [4, 16]
    assert sens[ch.SENS].max() <= 1e-12 and sens[ch.SENS].max() < 0  # random perturbations stay strictly inside
    assert sens[[ch.SENS_TIGHT, ch.SINK_TIGHT]].to_numpy().max() < 1e-14
    assert sens[ch.UNIFORM].tolist() == [0.0, 0.0]  # 1/4 and 1/16 are exact in binary
    assert sens[ch.SINK].max() < 0 and sens[ch.MARGIN].max() <= 1e-12
    assert sens[ch.PSI_UNIFORM].tolist() == [0.75, 15 / 16] and sens[ch.PSI_LOG_L].tolist() == [3 / 7, 15 / 31]
    pd.testing.assert_frame_equal(sens, ch.sensitivity((4, 16), rows=8))
    assert all(ch.sensitivity_checks(sens).values()) and len(ch.sensitivity_checks(sens)) == 6
    shown = ch.sensitivity_table(sens)
    assert shown[ch.SENS].iloc[0] == f"{sens[ch.SENS].iloc[0]:.0e}".replace("-", "−", 1)  # negative: a true minus
    assert shown[ch.PSI_LOG_L].iloc[0] == 0.429


def test_sensitivity_measures_details_and_numbers():
    sens = pd.DataFrame({ch.SENS: [-1e-4, 2e-13], ch.SENS_TIGHT: [1e-16, 3e-15], ch.UNIFORM: [0.0, 1e-16],
                         ch.SINK: [-0.03, -0.001], ch.SINK_TIGHT: [2e-16, 4e-15], ch.MARGIN: [-2e-5, 5e-16],
                         ch.PSI_UNIFORM: [0.75, 1023 / 1024], ch.PSI_LOG_L: [3 / 7, 1023 / 2047]},
                        index=pd.Index([4, 1024], name="L"))
    assert measures(ch.SENSITIVITY, sens) == {"S3-20": 2e-13, "S3-23": 5e-16}
    assert details(ch.SENSITIVITY, sens) == {"S3-20": "aligned perturbations attain it to < 1e-13",
                                            "S3-23": "the extremal prior attains the sink bound to < 1e-13"}
    assert ch.sensitivity_numbers(sens) == {"ch7_sens_worst": "2e-13", "ch7_sens_tight": "< 1e-13",
                                            "ch7_limit_worst": "< 1e-13", "ch7_sink_tight": "< 1e-13",
                                            "ch7_sens_lmax": "1,024", "ch7_psi_uniform_lmax": "0.999",
                                            "ch7_psi_logl_lmax": "0.500"}
    # a violation of 2e-13 ε is within rounding; the null's 0.1 is not
    assert ch.sensitivity_checks(sens)[r"\(\lVert\Delta o\rVert \le \varepsilon\Psi(C)\) everywhere (to 1e-12)"]
    assert not ch.sensitivity_checks(sens.assign(**{ch.SENS: [0.1, 0.0]}))[r"\(\lVert\Delta o\rVert \le \varepsilon\Psi(C)\) everywhere (to 1e-12)"]


TASK = TaskConfig.of("copy-mixture", vocab=9, seq_len=13, n_train=8, n_test=24)
BASE = ModelConfig(arch="decoder", d_model=32, n_layers=2, n_heads=2, d_head=16, d_ff=32, positions="none")
GOAT = replace(BASE, prior=PriorConfig(kind="goat", goat_rank=3, goat_init="seeded"))
ALIBI = replace(BASE, prior=PriorConfig(kind="alibi"))


def _model(cfg, seed=1):
    g = torch.Generator().manual_seed(seed)
    return init_weights_(Transformer(cfg, make_task(TASK).spec, generator=g), g)


def _record(method, seed, model=None, readouts=None):
    """A stored run as the chapter reads it: its config, seed and the readouts measured on `model`."""
    if readouts is None:
        readouts = measure_readouts((ch.BOUNDS, ch.SINK_CURVE), model, make_task(TASK))
    cfg = SimpleNamespace(experiment="copymix", profile="ci", method=method, seed=seed, task=TASK)
    return SimpleNamespace(config=cfg, seed=seed, run_id=f"{method}{seed}" * 8, readouts=readouts)


def _runs_and_models():
    models = {"goat": [_model(GOAT), _model(replace(GOAT, d_ff=16))], "alibi": [_model(ALIBI), _model(ALIBI, 2)]}
    runs = {m: [_record(m, s, model) for s, model in zip((3, 5), ms)] for m, ms in models.items()}
    return runs, models


X = make_task(TASK).sequences["test"][:64, :-1]  # the probe batch of every run (`companion.transport.probe_batch`)


def test_theorem_reads_each_record_as_the_chapter_computed_it_from_the_model():
    runs, models = _runs_and_models()
    thm = ch.theorem(runs)
    assert list(thm.index) == [("GOAT", 3), ("GOAT", 5), ("ALiBi", 3), ("ALiBi", 5)]
    for (m, ms) in models.items():
        for seed, model in zip((3, 5), ms):
            d = attention_internals(model, X, 0)  # what `theorem` computed before, from the model
            z = (d["content"] + d["prior"]).masked_fill(~d["visible"], float("-inf"))
            b = collapse_bounds(d)
            row = thm.loc[({"goat": "GOAT", "alibi": "ALiBi"}[m], seed)]
            assert row["recomputed vs forward"] == float((torch.softmax(z, -1) - d["weights"]).abs().max())
            assert (row["max violation"], row["tightness"], row["checked"]) == (b["max_violation"], b["max_tightness"],
                                                                                b["checked"])
    assert (thm["checked"] == 24 * 2 * 78).all()  # batch × heads × visible (i, j ≤ i) of 12 positions
    assert thm["max violation"].max() <= 1e-9 and thm["recomputed vs forward"].max() <= 1e-12
    assert ch.theorem_checks(thm) == {"bound holds everywhere (violation ≤ 1e-9)": True,
                                      "recomputation equals the forward pass (≤ 1e-12)": True,
                                      "entries checked": 4 * 24 * 2 * 78}
    shown = ch.theorem_table(thm)
    assert shown["max violation"].iloc[0] == f"{thm['max violation'].iloc[0]:.0e}"


def test_a_record_without_the_readout_is_a_clear_error():
    record = _record("goat", 0, readouts={})
    with pytest.raises(ValueError, match="has no readout 'collapse_bounds'.*must list it in `readouts`"):
        ch.theorem({"goat": [record]})
    with pytest.raises(ValueError, match="has no readout 'sink_curve'"):
        ch.sink_curves({"goat": [record]})
    with pytest.raises(ValueError, match="has no readout 'sink_curve'"):
        ch.sink_heads({"goat": [record]})
    with pytest.raises(ValueError, match="has no readout 'sink_curve'"):
        ch.pooled_shed([record])


def test_matched_curve_ranks_within_each_position_and_averages_over_positions():
    # two positions, four sequences, two bins: position 0 has ω 4, 1, 3, 2 and position 1 has 10, 30, 20, 40
    omega = np.array([[4.0, 10.0], [1.0, 30.0], [3.0, 20.0], [2.0, 40.0]])
    p0 = np.array([[0.1, 0.5], [0.9, 0.2], [0.3, 0.4], [0.7, 0.0]])
    c = ch.matched_curve(omega, p0, bins=2)
    # position 0: low bin = sequences 1, 3 (ω 1, 2; p0 .9, .7), high = 0, 2 (ω 4, 3; p0 .1, .3)
    # position 1: low bin = sequences 0, 2 (ω 10, 20; p0 .5, .4), high = 1, 3 (ω 30, 40; p0 .2, 0)
    assert np.allclose(c["omega"], [(1.5 + 15) / 2, (3.5 + 35) / 2], rtol=0, atol=1e-12)
    assert np.allclose(c["p0"], [(0.8 + 0.45) / 2, (0.2 + 0.1) / 2], rtol=0, atol=1e-12)
    # pooling without matching would put all of position 0 in the low bin: a different curve
    with pytest.raises(ValueError, match="cannot fill 8 bins"):
        ch.matched_curve(omega, p0, bins=8)


def test_sink_curve_uses_head_means_per_query_and_shed_reads_each_run():
    runs, models = _runs_and_models()
    curve = ch.sink_curve(runs["goat"])
    assert list(curve.index.names) == ["run", "bin"] and len(curve) == 2 * 8
    d = sink_vs_signal(attention_internals(models["goat"][1], X, 1), flat=False)  # the last layer, from the model
    expect = ch.matched_curve(d["omega"].mean(1), d["p0"].mean(1), 8)
    assert curve.loc[1, "p0"].tolist() == expect["p0"].tolist() and curve.loc[1, "omega"].tolist() == expect["omega"].tolist()
    # every bin holds the same number of queries at every position, so the bins' mean is the overall mean
    assert np.isclose(curve.loc[1, "p0"].mean(), d["p0"].mean(1).mean(), rtol=0, atol=1e-12)
    drops = ch.shed(curve)
    assert np.isclose(drops.loc[1], expect["p0"].iloc[0] - expect["p0"].iloc[-1], rtol=0, atol=1e-12)
    assert np.allclose(ch.mean_curve(curve)["p0"], curve["p0"].unstack("run").mean(axis=1), rtol=0, atol=1e-12)
    assert set(ch.sink_curves(runs)) == {"goat", "alibi"}


def test_sink_heads_picks_the_head_with_most_attention_on_key_0():
    model = _model(GOAT)
    for block in model.blocks:
        block.attn.prior.sink_bump.data[1] = 8.0  # head 1 becomes a sink
    heads = ch.sink_heads({"goat": [_record("goat", 0, model)]})
    row = heads.loc[("GOAT", 0)]
    d = sink_vs_signal(attention_internals(model, X, 1), flat=False)
    share = d["p0"].mean((0, 2))
    _, p1 = matched_bins(d["omega"][:, 1], d["p0"][:, 1], 8)
    assert row["head"] == 1 == int(share.argmax()) and row["mean p0"] == float(share[1]) > 0.9
    assert (row["p0, lowest ω bin"], row["p0, highest ω bin"]) == (p1[0], p1[-1])
    assert preconditions(ch.CLAIMS, {"control_heads": heads}) == {"S3-04": {"goat-has-sink": round(row["mean p0"], 3)},
                                             "S3-22": {"goat-has-sink": round(row["mean p0"], 3)}}


def test_pooled_shed_is_the_old_quantile_measure_per_run_averaged_over_runs():
    runs, models = _runs_and_models()
    drops = []
    for model in models["alibi"]:
        d = sink_vs_signal(attention_internals(model, X, 1))
        p0, omega = d["p0"], d["omega"]
        edges = np.quantile(omega, np.linspace(0, 1, 9))
        idx = np.clip(np.searchsorted(edges, omega, side="right") - 1, 0, 7)
        drops.append(p0[idx == 0].mean() - p0[idx == 7].mean())
    assert np.isclose(ch.pooled_shed(runs["alibi"]), np.mean(drops), rtol=0, atol=1e-15)


def _synthetic():
    eot = pd.DataFrame({ch.PROP22: [1e-15, 3e-15], ch.PROP31: [2e-15, 1e-16], ch.EQ3: [0.0, 0.0], ch.BETTER: [0, 2]},
                       index=pd.MultiIndex.from_tuples([(4, 0.25), (4, 1.0)], names=["L", "τ"]))
    thm = pd.DataFrame({"recomputed vs forward": [2e-15, 3e-16], "max violation": [-0.5, 4.4e-15],
                        "tightness": [0.9913, 0.5], "checked": [1000, 2345]},
                       index=pd.MultiIndex.from_tuples([("GOAT", 0), ("RoPE", 0)], names=["model", "seed"]))

    def curve(*runs):  # each run: (p0 in the lowest bin, p0 in the highest); three bins, ω 0.5, 2, 4
        rows = [{"run": r, "bin": b, "omega": w, "p0": p} for r, (lo, hi) in enumerate(runs)
                for b, (w, p) in enumerate(((0.5, lo), (2.0, 0.3), (4.0, hi)))]
        return pd.DataFrame(rows).set_index(["run", "bin"])

    curves = {"goat": curve((0.9, 0.1), (0.8, 0.2)), "rope": curve((0.5, 0.3), (0.5, 0.3)), "alibi": curve((0.2, 0.25), (0.2, 0.25))}
    control = {"goat": curve((0.02, 0.01)), "rope": curve((0.03, 0.01)), "alibi": curve((0.05, 0.02))}
    heads = pd.DataFrame({"head": [0, 2], "mean p0": [0.95, 0.9], "p0, lowest ω bin": [0.96, 0.97],
                          "p0, highest ω bin": [0.94, 0.93]},
                         index=pd.MultiIndex.from_tuples([("GOAT", 0), ("GOAT", 1)], names=["model", "run"]))
    return eot, thm, curves, control, heads


def test_claim_measures_details_and_prose_numbers():
    eot, thm, curves, control, heads = _synthetic()
    # GOAT sheds 0.8/0.9 and 0.6/0.8 (mean 0.81944…); RoPE 0.2/0.5 = 0.4; ALiBi −0.05/0.2 = −0.25:
    # GOAT's lead over the better one is 0.41944…
    assert measures(ch.CLAIMS, {"eot": eot, "thm": thm, "control": curves}) == {"S3-01": 3e-15, "S3-02": 2e-15, "S3-03": 4.4e-15,
                                                   "S3-04": 0.819, "S3-22": 0.419}
    # the chapter decides on the control's curves: GOAT 0.5, RoPE 0.667, ALiBi 0.6 → lead −0.167
    assert measures(ch.CLAIMS, {"eot": eot, "thm": thm, "control": control})["S3-04"] == 0.5 and measures(ch.CLAIMS, {"eot": eot, "thm": thm, "control": control})["S3-22"] == -0.167
    both = ("share of sink mass shed, char-LM (decides): GOAT +0.500, RoPE +0.667, ALiBi +0.600; "
            "copy-mixture: GOAT +0.819, RoPE +0.400, ALiBi -0.250")
    assert details(ch.CLAIMS, {"eot": eot, "thm": thm, "curves": curves, "control": control}) == {"S3-02": "random simplex points better: 2",
                                                           "S3-03": "3,345 (query, key, head) triples",
                                                           "S3-04": both, "S3-22": both}
    with_heads = details(ch.CLAIMS, {"eot": eot, "thm": thm, "curves": curves, "control": control, "heads": heads})["S3-04"]
    assert with_heads == both + "; copy-mixture's GOAT puts 0.90 of one head's attention on key 0, a token it copies"
    assert preconditions(ch.CLAIMS, {"control_heads": heads}) == {"S3-04": {"goat-has-sink": 0.9}, "S3-22": {"goat-has-sink": 0.9}}
    control_heads = heads.assign(**{"mean p0": [0.018, 0.017]})
    numbers = ch.prose_numbers(eot, thm, curves, control, heads, 0.8634, control_heads)
    assert numbers == {
        "ch7_prop22": "< 1e-13", "ch7_prop31": "< 1e-13", "ch7_thm_worst": "4.4e-15", "ch7_thm_checked": "3,345",
        "ch7_thm_recompute": "2e-15", "ch7_thm_tight": "0.99", "ch7_pooled_goat": "0.86",
        "ch7_p0_low_goat": "0.850", "ch7_p0_high_goat": "0.150", "ch7_drop_goat": "+0.700", "ch7_share_goat": "+82%",
        "ch7_p0_low_rope": "0.500", "ch7_p0_high_rope": "0.300", "ch7_drop_rope": "+0.200", "ch7_share_rope": "+40%",
        "ch7_p0_low_alibi": "0.200", "ch7_p0_high_alibi": "0.250", "ch7_drop_alibi": "-0.050",
        "ch7_share_alibi": "-25%",
        "ch7_ctl_p0_low_goat": "0.020", "ch7_ctl_p0_high_goat": "0.010", "ch7_ctl_drop_goat": "+0.010",
        "ch7_ctl_share_goat": "+50%",
        "ch7_ctl_p0_low_rope": "0.030", "ch7_ctl_p0_high_rope": "0.010", "ch7_ctl_drop_rope": "+0.020",
        "ch7_ctl_share_rope": "+67%",
        "ch7_ctl_p0_low_alibi": "0.050", "ch7_ctl_p0_high_alibi": "0.020", "ch7_ctl_drop_alibi": "+0.030",
        "ch7_ctl_share_alibi": "+60%",
        "ch7_sinkhead_low": "0.96", "ch7_sinkhead_high": "0.94", "ch7_sinkhead_min": "0.90",
        "ch7_ctl_sinkhead": "0.018"}
    table = ch.sink_table(curves, control)
    assert list(table.index) == [("copy-mixture", "GOAT"), ("copy-mixture", "RoPE"), ("copy-mixture", "ALiBi"),
                                 ("char-LM control", "GOAT"), ("char-LM control", "RoPE"), ("char-LM control", "ALiBi")]
    assert table.loc[("copy-mixture", "GOAT"), "drop"] == 0.7 and table.loc[("char-LM control", "ALiBi"), "p0, lowest ω bin"] == 0.05
    assert table.loc[("copy-mixture", "GOAT"), "share shed"] == 0.819


def test_shed_share_is_scale_free():
    # one sink head of four that sheds fully: head-mean 0.25 → 0, a drop of 0.25 but a share of 1
    curve = pd.DataFrame({"run": [0, 0], "bin": [0, 1], "omega": [0.5, 4.0], "p0": [0.25, 0.0]}).set_index(["run", "bin"])
    assert ch.shed(curve).tolist() == [0.25] and ch.shed_share(curve).tolist() == [1.0]


def test_load_reads_the_control_from_charlm_goat_rope_alibi_records_only(monkeypatch):
    calls = []

    def fake(experiment, profile, seeds, *, methods=None, store=None):
        calls.append((experiment, profile, tuple(seeds), methods and tuple(methods), store))
        return [SimpleNamespace(config=SimpleNamespace(method=m), seed=s) for s in (0, 1) for m in methods or ("goat",)]

    monkeypatch.setattr(ch, "read_runs", fake)
    runs = ch.load("ci", store="somewhere")
    assert calls[1] == ("charlm", "ci", ch.CONTROL_SEEDS, ("goat", "rope", "alibi"), "somewhere")
    assert list(runs["control"]) == ["goat", "rope", "alibi"]
    calls.clear()
    ch.load("ci", control_seeds=[3])
    assert calls[1][:3] == ("charlm", "ci", (3,))
    with pytest.raises(ValueError, match="seeds"):
        ch.load("ci", control_seeds=[])


def test_run_summary_counts_every_run():
    cfg = lambda m, s: SimpleNamespace(experiment="copymix", profile="ci", method=m, seed=s)  # noqa: E731
    runs = {m: [SimpleNamespace(config=cfg(m, s), run_id=f"{m}{s}", wall_time=t, metrics={}) for s, t in ((0, 1.0), (1, 2.0))]
            for m in ("goat", "rope")}
    assert ch.run_summary(runs) == "4 runs; mean wall time per run 1.5 s"


def test_load_reads_the_stored_records_by_method_and_the_control_at_its_own_seeds():
    runs = ch.load("ci", [1, 0])  # the committed store
    assert (runs.profile, runs.seeds, list(runs.blocks)) == ("ci", (1, 0), ["copymix", "control"])
    for block, experiment, seeds in (("copymix", "copymix", [0, 1]), ("control", "charlm", list(ch.CONTROL_SEEDS))):
        assert list(runs[block]) == ["goat", "rope", "alibi"]
        for method, records in runs[block].items():
            assert [(r.config.experiment, r.config.method, r.seed) for r in records] == [
                (experiment, method, s) for s in seeds]
    assert [r.seed for r in ch.load("ci", [2], control_seeds=[1])["control"]["rope"]] == [1]


def test_claims_are_the_notebooks_measures_from_records(monkeypatch):
    """`claims` (`decide` on `load`) reads the copy-mixture records and the char-LM control's (default
    seeds and store passed on) and decides S3-01 … S3-04, S3-22, S3-20 and S3-23 with the
    notebook's functions."""
    from companion.book.chapter import claims

    sink = _model(GOAT)
    for block in sink.blocks:
        block.attn.prior.sink_bump.data[0] = 8.0
    models = {"goat": sink, "rope": _model(replace(BASE, positions="rope")), "alibi": _model(ALIBI)}
    runs = {m: [_record(m, s, model) for s in (0, 1, 2)] for m, model in models.items()}
    # the control's GOAT has no sink: the sink claims are decided on it, not on the runs' sink head
    control = {m: [_record(m, s, _model(GOAT) if m == "goat" else model) for s in (0, 1)] for m, model in models.items()}
    stored, calls = {"copymix": runs, "charlm": control}, []

    def fake(experiment, profile, seeds, *, methods=None, **kw):
        calls.append((experiment, profile, list(seeds), kw))
        return [r for rs in stored[experiment].values() for r in rs]

    monkeypatch.setattr(ch, "read_runs", fake)
    results = claims(ch, store="there")
    assert [c[:3] for c in calls] == [("copymix", "ci", [0, 1, 2]), ("charlm", "ci", [0, 1])]
    assert calls[0][3] == calls[1][3] == {"store": "there"}
    assert [r.id for r in results] == ["S3-01", "S3-02", "S3-03", "S3-04", "S3-22", "S3-20", "S3-23", "S3-21"]
    eot, thm, curves = ch.propositions(), ch.theorem(runs), ch.sink_curves(control)
    expect = {**measures(ch.CLAIMS, {"eot": eot, "thm": thm, "control": curves}), **measures(ch.SENSITIVITY, ch.sensitivity()),
              "S3-21": ch.bochner.measure(ch.bochner.goat_checks())}
    stored = record_all(expect, preconditions=preconditions(ch.CLAIMS, {"control_heads": ch.sink_heads(control)}))
    assert [(r.id, r.measure, r.verdict) for r in results] == [(r.id, r.measure, r.verdict) for r in stored]
    assert results[3].preconditions == preconditions(ch.CLAIMS, {"control_heads": ch.sink_heads(control)})["S3-04"]
    assert results[3].preconditions["goat-has-sink"] < 0.5 < preconditions(ch.CLAIMS, {"control_heads": ch.sink_heads(runs)})["S3-04"]["goat-has-sink"]
    assert results[3].verdict == results[4].verdict == "inconclusive"
    with pytest.raises(ValueError, match="seeds"):
        claims(ch, seeds=[])


def test_decide_glues_every_number_the_text_cites_once():
    """`decide` on records: the parts the notebook shows, and every glue name its text cites (but the
    paper-status line its closing cell glues)."""
    import json
    import re
    from pathlib import Path

    from companion.book.chapter import Runs

    models = {"goat": _model(GOAT), "rope": _model(replace(BASE, positions="rope")), "alibi": _model(ALIBI)}
    runs = {m: [_record(m, s, model) for s in (0, 1)] for m, model in models.items()}
    found = ch.decide(Runs("ci", (0, 1), {"copymix": runs, "control": runs}))
    assert [r.id for r in found.results] == ["S3-01", "S3-02", "S3-03", "S3-04", "S3-22", "S3-20", "S3-23", "S3-21"]
    assert set(found.parts) == {"eot", "thm", "curves", "control", "heads", "control_heads", "sink_control", "sens",
                                "bochner", "outside"}
    cells = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "07_transport.ipynb").read_text())["cells"]
    cited = {name for c in cells if c["cell_type"] == "markdown"
             for name in re.findall(r"\{glue:[a-z]+\}`([^`]+)`", "".join(c["source"]))}
    assert cited and cited - {"ch7_paper_status"} <= set(found.numbers)


def _control(shares: dict[str, list[float]]) -> dict:
    """A sink control whose runs' curves start at p0 = 0.8 and end at 0.8 · (1 − share), so each run sheds `share`."""
    import pandas as pd

    curves = {}
    for m, ss in shares.items():
        frames = [pd.DataFrame({"bin": range(8), "omega": np.linspace(1, 8, 8), "run": r,
                                "p0": np.linspace(0.8, 0.8 * (1 - s), 8)}) for r, s in enumerate(ss)]
        curves[m] = pd.concat(frames).set_index(["run", "bin"])
    return {"factor": 4, "steps": 2000, "holds": True, "sink": 0.61, "sinks": len(shares["goat"]),
            "curves": curves, "heads": None,
            "key": {m: [1.0] * len(ss) for m, ss in shares.items()}}


def test_the_sink_control_s_spread_is_goat_s_t_interval_and_welch_s_interval_of_its_lead():
    """GOAT's share shed over seeds with its Student-t interval, and its lead over the baseline that sheds more on
    average with Welch's interval (scipy's `ttest_ind(equal_var=False)` gives the same)."""
    from scipy import stats as st

    from companion.book.chapters.sink_search import spread

    shares = {"goat": [0.9, 0.1, 0.5, 0.7], "rope": [0.2, 0.3, 0.25, 0.1], "alibi": [0.0, 0.1, 0.05, 0.05]}
    goat, lead = spread(_control(shares))
    assert goat.mean == pytest.approx(0.55) and goat.n == 4
    half = st.t.ppf(0.975, 3) * np.std(shares["goat"], ddof=1) / 2
    assert (goat.lo, goat.hi) == pytest.approx((0.55 - half, 0.55 + half))
    ci = st.ttest_ind(shares["goat"], shares["rope"], equal_var=False).confidence_interval()
    assert lead.mean == pytest.approx(0.55 - 0.2125) and (lead.lo, lead.hi) == pytest.approx((ci.low, ci.high))


def test_s3_04_and_s3_22_are_decided_on_the_sink_control_with_their_intervals_in_words(monkeypatch):
    """Where the search holds, both claims are measured there by their own rules (GOAT's mean share; its lead over
    the larger baseline) and their details give the intervals and the lines they cross; at another profile nothing
    is decided and every number is "—"."""
    from companion.book.chapter import Decision
    from companion.book.chapters import sink_search as search

    row = {"experiment": "passkey-lm", "factor": 4, "steps": 2000, "value": 0.61, "holds": True, "found": 12, "total": 12}
    monkeypatch.setattr(search.decisive, "rungs", lambda claim, store=None: ([row], 4, []))
    monkeypatch.setattr(search.decisive, "search_words", lambda claim, store=None: "4× its updates")
    d = Decision()
    glued = search.sink_search(d, "ci", _control({"goat": [0.9, 0.1, 0.5, 0.7], "rope": [0.2, 0.3, 0.25, 0.1],
                                                  "alibi": [0.0, 0.1, 0.05, 0.05]}))
    s304, s322 = d.decided
    assert (s304.id, s304.measure, s304.verdict) == ("S3-04", 0.55, "reproduced")
    assert (s322.id, s322.measure, s322.verdict) == ("S3-22", round(0.55 - 0.2125, 3), "reproduced")
    assert s304.preconditions == s322.preconditions == {"goat-has-sink": 0.61}
    assert "95 % interval" in s304.detail and "the interval crosses the +0.15 and +0.50 lines" in s304.detail
    assert "(Welch)" in s322.detail and "crosses the +0.10 and +0.25 lines" in s322.detail
    assert glued["ch7_sc_share_goat"] == "+55%" and glued["ch7_sc_seeds"] == "4"
    assert glued["ch7_sc_seed_min"] == "+0.10" and glued["ch7_sc_seed_max"] == "+0.90"
    assert "S3-04, decided there, is reproduced, and S3-22 is reproduced" == glued["ch7_sc_outcome"]
    assert set(search.sink_search(Decision(), "paper", None).values()) == {"—"}
    # the null: GOAT sheds nothing, so S3-04 is not reproduced, and a baseline that sheds as much leaves no lead
    d = Decision()
    search.sink_search(d, "ci", _control({"goat": [0.0, 0.01, -0.01], "rope": [0.0, 0.02, -0.02], "alibi": [0.0] * 3}))
    assert [r.verdict for r in d.decided] == ["not reproduced", "not reproduced"]
    # GOAT alone at the holding rung: S3-04 is decided, S3-22 waits for its baselines
    d = Decision()
    glued = search.sink_search(d, "ci", _control({"goat": [0.9, 0.1, 0.5, 0.7]}))
    assert [r.id for r in d.decided] == ["S3-04"] and "S3-22 waits for RoPE and ALiBi" in glued["ch7_sc_outcome"]
    assert glued["ch7_sc_share_rope"] == glued["ch7_sc_lead"] == "—"
    # no rung holds: nothing is decided, and the outcome says so
    d = Decision()
    rows = [dict(row, factor=f, holds=False, value=0.1) for f in (1, 4, 16, 32)]
    monkeypatch.setattr(search.decisive, "rungs", lambda claim, store=None: (rows, None, []))
    monkeypatch.setattr(search.decisive, "needed_factor", lambda *a, **k: None)
    monkeypatch.setattr(search.decisive, "rung_records", lambda *a, **k: [])
    glued = search.sink_search(d, "ci", dict(_control({"goat": [0.9, 0.1]}), holds=False, factor=16))
    assert d.decided == [] and glued["ch7_sc_outcome"].startswith("no rung tried (1×, 4×, 16×, 32× its updates)")
