"""Attention as entropic transport (Chapter 7): the optimiser's solution equals softmax (Props 2.2, 3.1);
measured attention respects Theorem 5.1's bounds; internals recomputed through the prior protocol
equal the forward pass for every kind of prior; the chapter's tables, claim measures and prose numbers."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from companion.book import ch07_transport as ch
from companion.book.transport import attention_internals, collapse_bounds, objective, sink_vs_signal, solve_entropic
from companion.config import ModelConfig, PriorConfig, TaskConfig
from companion.model import Transformer, init_weights_
from companion.tasks import TaskSpec, make_task

G = torch.Generator().manual_seed(0)
SPEC = TaskSpec(inputs="tokens", output="lm", vocab_size=9, seq_len=10)


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


def _model(cfg, spec=SPEC):
    g = torch.Generator().manual_seed(1)
    return init_weights_(Transformer(cfg, spec, generator=g), g)


BASE = ModelConfig(arch="decoder", d_model=32, n_layers=2, n_heads=2, d_head=16, d_ff=32, positions="none")
GOAT = replace(BASE, prior=PriorConfig(kind="goat", goat_rank=3, goat_init="seeded"))
ALIBI = replace(BASE, prior=PriorConfig(kind="alibi"))
ROPE = replace(BASE, positions="rope")


def _check_internals(model, x):
    for layer in range(len(model.blocks)):
        d = attention_internals(model, x, layer)
        z = (d["content"] + d["prior"]).masked_fill(~d["visible"], float("-inf"))
        torch.testing.assert_close(torch.softmax(z, -1), d["weights"], rtol=0, atol=1e-12)
        b = collapse_bounds(d)
        assert b["max_violation"] <= 1e-9 and 0 < b["max_tightness"] <= 1 + 1e-9
    assert next(model.parameters()).dtype == torch.float32  # analysis left the model alone


def test_internals_reproduce_the_forward_pass_and_theorem_5_1_holds():
    x = torch.randint(0, 9, (4, 10), generator=G)
    for cfg in (GOAT, ALIBI, ROPE, replace(GOAT, qk_norm=True), replace(ROPE, qk_norm=True)):
        _check_internals(_model(cfg), x)


def test_internals_of_an_encoder_with_cls_and_a_mask_prior_cover_every_position():
    spec = TaskSpec(inputs="tokens", output="regression", vocab_size=9, seq_len=10, n_outputs=1)
    pattern = torch.rand(11, 11, generator=G) < 0.5
    pattern |= torch.eye(11, dtype=torch.bool)
    cfg = replace(BASE, arch="encoder", pool="cls", positions="learned", prior=PriorConfig(kind="mask", init="pattern"))
    g = torch.Generator().manual_seed(1)
    model = init_weights_(Transformer(cfg, spec, pattern=pattern, generator=g), g)
    x = torch.randint(0, 9, (3, 10), generator=G)
    _check_internals(model, x)
    d = attention_internals(model, x)
    assert d["content"].shape == (3, 2, 11, 11) and bool(d["visible"].all())  # CLS included, nothing hidden
    torch.testing.assert_close(d["prior"], model.blocks[0].attn.prior.bias(11).double().expand(2, 11, 11))


def test_content_is_the_scaled_dot_product_of_the_content_channels_and_no_prior_is_zero():
    x = torch.randint(0, 9, (2, 10), generator=G)
    for cfg, width in ((GOAT, 16 - 7), (replace(BASE, positions="learned"), 16)):
        model = _model(cfg).double()
        d = attention_internals(model, x, 1)
        attn = model.blocks[1].attn
        with torch.no_grad():
            q, k, _ = attn.project(model.blocks[1].ln1(model.blocks[0](model.embed(x))))
        torch.testing.assert_close(d["content"], q[..., :width] @ k[..., :width].transpose(-1, -2) / math.sqrt(width),
                                   rtol=0, atol=1e-12)
    assert not d["prior"].any()  # the model without a prior has a zero log-prior


def test_a_wrong_prior_breaks_the_bound():
    model = _model(replace(BASE, prior=PriorConfig(kind="goat", goat_rank=3)))
    with torch.no_grad():
        for block in model.blocks:
            block.attn.prior.sink_bump.fill_(6.0)  # a strong sink on key 0
    d = attention_internals(model, torch.randint(0, 9, (2, 10), generator=G))
    assert collapse_bounds(d)["max_violation"] <= 1e-9
    d["prior"] = torch.zeros_like(d["prior"])  # pretend there was no prior
    assert collapse_bounds(d)["max_violation"] > 1.0


def test_sink_vs_signal_skips_the_first_query():
    model = _model(ALIBI)
    out = sink_vs_signal(attention_internals(model, torch.randint(0, 9, (3, 10), generator=G)))
    assert out["omega"].shape == out["p0"].shape == (3 * 2 * 9,) and (out["p0"] <= 1).all()


# ---------------------------------------------------------------- the chapter module

def test_propositions_meet_the_closed_forms_and_are_reproducible():
    eot = ch.propositions((4, 16), (0.5, 2.0), rows=8, points=16)
    assert list(eot.index) == [(4, 0.5), (4, 2.0), (16, 0.5), (16, 2.0)]
    assert eot[[ch.PROP22, ch.PROP31, ch.EQ3]].to_numpy().max() < 1e-12 and (eot[ch.BETTER] == 0).all()
    pd.testing.assert_frame_equal(eot, ch.propositions((4, 16), (0.5, 2.0), rows=8, points=16))
    assert ch.proposition_checks(eot) == {"closed forms met to 1e-12": True, "random points better": 0}
    shown = ch.propositions_table(eot)
    assert shown.iloc[0, 0] == f"{eot.iloc[0, 0]:.1e}" and shown[ch.BETTER].tolist() == [0, 0, 0, 0]


def test_psi_and_margin_follow_definitions_5_2_and_5_3_exactly():
    # z = (ln 4, 0, 0): p = (2/3, 1/6, 1/6), Ψ = 1/3, margin ln 4, and the cap (L−1)/(e^m + L−1) = 2/6 is attained
    z = torch.tensor([[math.log(4.0), 0.0, 0.0], [0.0, 1.0, -1.0]], dtype=torch.float64)
    sink = torch.tensor([0, 2])
    psi, gap = ch._psi(z, sink), ch._gap(z, sink)
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
    assert shown[ch.SENS].iloc[0] == f"{sens[ch.SENS].iloc[0]:.0e}" and shown[ch.PSI_LOG_L].iloc[0] == 0.429


def test_sensitivity_measures_details_and_numbers():
    sens = pd.DataFrame({ch.SENS: [-1e-4, 2e-13], ch.SENS_TIGHT: [1e-16, 3e-15], ch.UNIFORM: [0.0, 1e-16],
                         ch.SINK: [-0.03, -0.001], ch.SINK_TIGHT: [2e-16, 4e-15], ch.MARGIN: [-2e-5, 5e-16],
                         ch.PSI_UNIFORM: [0.75, 1023 / 1024], ch.PSI_LOG_L: [3 / 7, 1023 / 2047]},
                        index=pd.Index([4, 1024], name="L"))
    assert ch.sensitivity_measures(sens) == {"S3-20": 2e-13, "S3-23": 5e-16}
    assert ch.sensitivity_details(sens) == {"S3-20": "aligned perturbations attain it to 3e-15",
                                            "S3-23": "the extremal prior attains the sink bound to 4e-15"}
    assert ch.sensitivity_numbers(sens) == {"ch7_sens_worst": "2e-13", "ch7_sens_tight": "3e-15",
                                            "ch7_limit_worst": "5e-16", "ch7_sink_tight": "4e-15",
                                            "ch7_sens_lmax": "1,024", "ch7_psi_uniform_lmax": "0.999",
                                            "ch7_psi_logl_lmax": "0.500"}
    # a violation of 2e-13 ε is within rounding; the null's 0.1 is not
    assert ch.sensitivity_checks(sens)["‖Δo‖ ≤ εΨ(C) everywhere (to 1e-12)"]
    assert not ch.sensitivity_checks(sens.assign(**{ch.SENS: [0.1, 0.0]}))["‖Δo‖ ≤ εΨ(C) everywhere (to 1e-12)"]


def _runs_and_models():
    runs = {m: [SimpleNamespace(seed=s) for s in (3, 5)] for m in ("goat", "alibi")}
    models = {"goat": [_model(GOAT), _model(replace(GOAT, d_ff=16))], "alibi": [_model(ALIBI), _model(ALIBI)]}
    return runs, models


def test_theorem_labels_models_by_record_seed_and_counts_every_visible_entry():
    runs, models = _runs_and_models()
    x = torch.randint(0, 9, (4, 10), generator=G)
    thm = ch.theorem(runs, models, x)
    assert list(thm.index) == [("GOAT", 3), ("GOAT", 5), ("ALiBi", 3), ("ALiBi", 5)]
    assert (thm["checked"] == 4 * 2 * 55).all()  # batch × heads × visible (i, j ≤ i) of 10 positions
    assert thm["max violation"].max() <= 1e-9 and thm["recomputed vs forward"].max() <= 1e-12
    assert ch.theorem_checks(thm) == {"bound holds everywhere (violation ≤ 1e-9)": True,
                                      "recomputation equals the forward pass (≤ 1e-12)": True,
                                      "entries checked": 4 * 440}
    shown = ch.theorem_table(thm)
    assert shown["max violation"].iloc[0] == f"{thm['max violation'].iloc[0]:.0e}"


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
    _, models = _runs_and_models()
    x = torch.randint(0, 9, (8, 10), generator=G)
    curve = ch.sink_curve(models["goat"], x, bins=4)
    assert list(curve.index.names) == ["run", "bin"] and len(curve) == 2 * 4
    d = sink_vs_signal(attention_internals(models["goat"][1], x, 1), flat=False)
    expect = ch.matched_curve(d["omega"].mean(1), d["p0"].mean(1), 4)
    assert np.allclose(curve.loc[1, "p0"].to_numpy(), expect["p0"].to_numpy(), rtol=0, atol=1e-12)
    # every bin holds the same number of queries at every position, so the bins' mean is the overall mean
    assert np.isclose(curve.loc[1, "p0"].mean(), d["p0"].mean(1).mean(), rtol=0, atol=1e-12)
    drops = ch.shed(curve)
    assert np.isclose(drops.loc[1], expect["p0"].iloc[0] - expect["p0"].iloc[-1], rtol=0, atol=1e-12)
    assert np.allclose(ch.mean_curve(curve)["p0"], curve["p0"].unstack("run").mean(axis=1), rtol=0, atol=1e-12)
    assert set(ch.sink_curves(models, x, bins=4)) == {"goat", "alibi"}


def test_sink_heads_picks_the_head_with_most_attention_on_key_0():
    _, models = _runs_and_models()
    for block in models["goat"][0].blocks:
        block.attn.prior.sink_bump.data[1] = 8.0  # head 1 becomes a sink
    x = torch.randint(0, 9, (8, 10), generator=G)
    heads = ch.sink_heads({"goat": models["goat"][:1]}, x, bins=4)
    row = heads.loc[("GOAT", 0)]
    assert row["head"] == 1 and row["mean p0"] > 0.9
    assert ch.claim_preconditions(heads) == {"S3-04": {"goat-has-sink": round(row["mean p0"], 3)},
                                             "S3-22": {"goat-has-sink": round(row["mean p0"], 3)}}


def test_pooled_shed_is_the_old_quantile_measure():
    _, models = _runs_and_models()
    x = torch.randint(0, 9, (3, 10), generator=G)
    pooled = [sink_vs_signal(attention_internals(m, x, 1)) for m in models["goat"]]
    p0, omega = np.concatenate([d["p0"] for d in pooled]), np.concatenate([d["omega"] for d in pooled])
    lo, hi = np.quantile(omega, 0.25), np.quantile(omega, 0.75)
    assert np.isclose(ch.pooled_shed(models["goat"], x, bins=4), p0[omega < lo].mean() - p0[omega >= hi].mean(),
                      rtol=0, atol=1e-12)


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
    assert ch.claim_measures(eot, thm, curves) == {"S3-01": 3e-15, "S3-02": 2e-15, "S3-03": 4.4e-15,
                                                   "S3-04": 0.819, "S3-22": 0.419}
    both = ("share of sink mass shed, copy-mixture: GOAT +0.819, RoPE +0.400, ALiBi -0.250; "
            "char-LM control: GOAT +0.500, RoPE +0.667, ALiBi +0.600")
    assert ch.claim_details(eot, thm, curves, control) == {"S3-02": "random simplex points better: 2",
                                                           "S3-03": "3,345 (query, key, head) triples",
                                                           "S3-04": both, "S3-22": both}
    assert ch.claim_preconditions(heads) == {"S3-04": {"goat-has-sink": 0.9}, "S3-22": {"goat-has-sink": 0.9}}
    numbers = ch.prose_numbers(eot, thm, curves, control, heads, 0.8634)
    assert numbers == {
        "ch7_prop22": "3.0e-15", "ch7_prop31": "2.0e-15", "ch7_thm_worst": "4.4e-15", "ch7_thm_checked": "3,345",
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
        "ch7_sinkhead_low": "0.96", "ch7_sinkhead_high": "0.94"}
    table = ch.sink_table(curves, control)
    assert list(table.index) == [("copy-mixture", "GOAT"), ("copy-mixture", "RoPE"), ("copy-mixture", "ALiBi"),
                                 ("char-LM control", "GOAT"), ("char-LM control", "RoPE"), ("char-LM control", "ALiBi")]
    assert table.loc[("copy-mixture", "GOAT"), "drop"] == 0.7 and table.loc[("char-LM control", "ALiBi"), "p0, lowest ω bin"] == 0.05
    assert table.loc[("copy-mixture", "GOAT"), "share shed"] == 0.819


def test_shed_share_is_scale_free():
    # one sink head of four that sheds fully: head-mean 0.25 → 0, a drop of 0.25 but a share of 1
    curve = pd.DataFrame({"run": [0, 0], "bin": [0, 1], "omega": [0.5, 4.0], "p0": [0.25, 0.0]}).set_index(["run", "bin"])
    assert ch.shed(curve).tolist() == [0.25] and ch.shed_share(curve).tolist() == [1.0]


def test_control_batch_is_the_first_test_windows_at_the_training_length(monkeypatch):
    class Task:
        seq_len = 4

        def windows(self, length):
            return torch.arange(50).reshape(10, 5)[:, : length + 1]

    monkeypatch.setattr(ch, "make_task", lambda cfg: Task())
    x = ch.control_batch(SimpleNamespace(config=SimpleNamespace(task=None)), n=3)
    assert torch.equal(x, torch.arange(50).reshape(10, 5)[:3, :4])


def test_load_control_reads_charlm_goat_rope_alibi_with_weights(monkeypatch):
    calls = []

    def fake(experiment, profile, seeds, *, methods=None, jobs=None, weights=False):
        calls.append((experiment, profile, tuple(seeds), tuple(methods), jobs, weights))
        return [SimpleNamespace(config=SimpleNamespace(method=m), seed=s) for s in (0, 1) for m in methods]

    monkeypatch.setattr(ch, "ensure_runs", fake)
    runs = ch.load_control("ci", [0, 1])
    assert calls == [("charlm", "ci", (0, 1), ("goat", "rope", "alibi"), None, True)]
    assert list(runs) == ["goat", "rope", "alibi"]


def test_fixed_batch_is_the_first_test_inputs_of_the_task():
    task_cfg = TaskConfig.of("copy-mixture", n_train=8, n_test=16, seq_len=12)
    record = SimpleNamespace(config=SimpleNamespace(task=task_cfg))
    x = ch.fixed_batch(record, n=5)
    assert torch.equal(x, make_task(task_cfg).sequences["test"][:5, :-1]) and x.shape == (5, 11)


def test_run_summary_counts_every_run():
    cfg = lambda m, s: SimpleNamespace(experiment="copymix", profile="ci", method=m, seed=s)  # noqa: E731
    runs = {m: [SimpleNamespace(config=cfg(m, s), run_id=f"{m}{s}", wall_time=t, metrics={}) for s, t in ((0, 1.0), (1, 2.0))]
            for m in ("goat", "rope")}
    assert ch.run_summary(runs) == "4 runs; mean wall time per run 1.5 s"


def test_load_reads_copymix_with_weights_by_method(monkeypatch):
    calls = []

    def fake(experiment, profile, seeds, *, jobs=None, weights=False):
        calls.append((experiment, profile, tuple(seeds), jobs, weights))
        return [SimpleNamespace(config=SimpleNamespace(method=m), seed=s) for s in (1, 0) for m in ("alibi", "goat", "rope")]

    monkeypatch.setattr(ch, "ensure_runs", fake)
    runs = ch.load("ci", [1, 0], jobs=2)
    assert calls == [("copymix", "ci", (1, 0), 2, True)]
    assert list(runs) == ["goat", "rope", "alibi"] and [r.seed for r in runs["goat"]] == [0, 1]


@pytest.mark.parametrize("layer", [0, 1])
def test_attention_internals_needs_no_prior_type(layer):
    """The recomputation reads only the protocol: a prior class unknown to the book still works."""
    from companion.priors import Prior

    class Local(Prior):
        def bias(self, i, j=None):
            j = i if j is None else j
            return -0.5 * (torch.arange(i)[:, None] - torch.arange(j)[None]).abs().float()[None]

        def content(self, q, k):
            return q[..., :5], k[..., :5]

    model = _model(BASE)
    for block in model.blocks:
        block.attn.prior = Local()
    x = torch.randint(0, 9, (2, 10), generator=G)
    d = attention_internals(model, x, layer)
    z = (d["content"] + d["prior"]).masked_fill(~d["visible"], float("-inf"))
    torch.testing.assert_close(torch.softmax(z, -1), d["weights"], rtol=0, atol=1e-12)
    assert d["prior"][0, 3, 1] == -1.0
