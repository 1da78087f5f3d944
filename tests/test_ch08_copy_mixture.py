"""Chapter 8, copy-mixture: what each GOAT head learned (sink strength, κ's peak) read off the
`goat_prior` readout of a small model whose prior is set by hand, Figure 1's panels (equal to those
drawn from the model itself), and the chapter's tables, claim measures, prose numbers and `claims`."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from companion.book.chapter import details, measures
from companion.book.chapters import ch08_copy_mixture as ch
from companion.book.chapters.entropic import prior_panels
from companion.config import ModelConfig, PriorConfig
from companion.model import Transformer, init_weights_
from companion.measuring import measure_readouts
from companion.tasks import TaskSpec

SPEC = TaskSpec(inputs="tokens", output="lm", vocab_size=9, seq_len=12)
CFG = ModelConfig(arch="decoder", d_model=32, n_layers=1, n_heads=3, d_head=16, d_ff=32, positions="none",
                  prior=PriorConfig(kind="goat", goat_rank=3))


def _goat(bump: float = 5.0) -> Transformer:
    """A GOAT model from a uniform start (κ ≡ 0, u ≡ 0), then: head 0 gets a first-token bump u(0) =
    `bump`, head 1 κ(Δ) = cos(Δ − 1) (α, β on the first frequency, ω_0 = 1 rad), head 2 stays flat."""
    g = torch.Generator().manual_seed(0)
    model = init_weights_(Transformer(CFG, SPEC, generator=g), g)
    prior = model.blocks[0].attn.prior
    with torch.no_grad():
        prior.sink_bump[0] = bump
        prior.alpha[1, 0], prior.beta[1, 0] = math.cos(1.0), math.sin(1.0)
    return model


def _prior(model) -> dict:
    """The model's `goat_prior` readout, as its record stores it."""
    return measure_readouts((ch.PRIOR,), model, None)[ch.PRIOR]


def _goat_record(model, seed: int = 0, method: str = "goat"):
    cfg = SimpleNamespace(experiment="copymix", profile="ci", method=method, seed=seed)
    return SimpleNamespace(config=cfg, seed=seed, run_id=f"{method}{seed}" * 8, readouts={ch.PRIOR: _prior(model)})


def test_head_structure_reads_the_sink_and_the_peak_of_kappa_exactly():
    s = ch.head_structure(_prior(_goat()), lag=2)
    assert list(s.index) == [0, 1, 2]
    assert s["sink strength"].tolist() == pytest.approx([5.0, 0.0, 0.0], abs=1e-6)
    assert s["κ peak at Δ"].tolist() == [0, 1, 0]  # a flat κ peaks at its first offset
    # cos(Δ − 1) over Δ = 0 … 8 peaks at 1; its median is cos(1)
    assert s["κ peak height"].tolist() == pytest.approx([0.0, 1 - math.cos(1.0), 0.0], abs=1e-6)
    assert s[ch.LOCAL].tolist() == [False, True, False]
    assert ch.head_structure(_prior(_goat()), lag=3)[ch.LOCAL].tolist() == [False, False, False]
    # a window of 0 reads only Δ = 0
    assert ch.head_structure(_prior(_goat()), lag=2, window=0)["κ peak at Δ"].tolist() == [0, 0, 0]


def test_head_structure_of_the_readout_equals_what_the_chapter_read_from_the_model():
    model = _goat()
    with torch.no_grad():  # a prior with structure in every head
        prior = model.blocks[0].attn.prior
        for p in (prior.alpha, prior.beta, prior.sink_gain, prior.sink_bump, prior.sink_w1, prior.sink_w2):
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    panels = prior_panels(model.blocks[0].attn.scores_prior, model.n_positions)  # the chapter's old reading
    s = ch.head_structure(_prior(model), lag=2)
    for h in range(3):
        u, kappa = panels["sink"][h], panels["kappa"][h][:9]
        assert s.loc[h, "sink strength"] == float(u[0] - np.median(u[1:]))
        assert s.loc[h, "κ peak at Δ"] == int(np.argmax(kappa))
        assert s.loc[h, "κ peak height"] == float(kappa.max() - np.median(kappa))


def test_figure1_panels_of_the_readout_equal_the_panels_of_the_model():
    model = _goat()
    p = ch.figure1_panels(_goat_record(model))
    old = prior_panels(model.blocks[0].attn.scores_prior, model.n_positions)
    for key in ("sink", "kappa", "centred", "causal"):
        np.testing.assert_array_equal(p[key], old[key])  # bit for bit: K is summed as the model sums it


def test_figure1_panels_are_the_prior_with_centred_rows_and_a_causal_softmax():
    p = ch.figure1_panels(_goat_record(_goat()))
    assert p["sink"].shape == (3, 12) and p["kappa"].shape == (3, 12) and p["centred"].shape == (3, 12, 12)
    assert np.allclose(np.nanmean(p["centred"], axis=-1), 0, atol=1e-6)
    assert np.isnan(p["centred"][:, 0, 1:]).all()  # above the diagonal: not a key of a causal query
    assert np.allclose(p["causal"].sum(-1), 1) and np.allclose(np.triu(p["causal"], 1), 0)
    assert np.allclose(p["limit"], np.nanmax(np.abs(p["centred"]), axis=(1, 2)))
    assert p["causal"][0, 5, 0] == pytest.approx(math.exp(5) / (math.exp(5) + 5))  # the bump on key 0, row 5


def _heads(strengths: dict[int, list[float]], local: dict[int, list[bool]]) -> pd.DataFrame:
    frames = {seed: pd.DataFrame({"sink strength": v, ch.LOCAL: local[seed]}).rename_axis("head")
              for seed, v in strengths.items()}
    return pd.concat(frames, names=["seed"])


def test_structure_is_one_row_per_seed_and_head():
    records = [_goat_record(_goat(5.0), 4), _goat_record(_goat(1.0), 7)]
    heads = ch.structure(records, lag=2)
    assert list(heads.index) == [(4, 0), (4, 1), (4, 2), (7, 0), (7, 1), (7, 2)]
    per = ch.per_seed(heads)
    assert per["sink"].tolist() == pytest.approx([5.0, 1.0], abs=1e-6) and per["local"].tolist() == [True, True]


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"method": ["goat", "goat", "goat", "rope", "rope", "rope"], "seed": [0, 1, 2] * 2,
                         "test.ce": [1.85, 1.86, 1.84, 1.9, 1.88, 1.86], "test.gap": [0.0141, 0.0145, 0.0138, 0.03, 0.02, 0.022],
                         "test.acc": [0.55, 0.554, 0.556, 0.5, 0.52, 0.54], "wall_time": [60.0, 70.0, 62.0, 50.0, 40.0, 45.0]})


def test_claim_measures_and_details():
    heads = _heads({0: [23.8, -1.0], 1: [1.9, 0.5], 2: [-3.0, 2.0]}, {0: [False, True], 1: [False, False], 2: [True, False]})
    frame = _frame()
    assert measures(ch.CLAIMS, {"frame": frame, "heads": heads}) == {"S3-07": 0.0141, "S3-05": 0.667, "S3-06": 0.667}
    assert details(ch.CLAIMS, {"frame": frame, "heads": heads}) == {"S3-07": "±0.0004 over 3 seeds",
                                              "S3-05": "largest u(0) − median u per seed: 23.8, 1.9, 2.0"}


def test_prose_numbers():
    heads = _heads({0: [23.8, -1.0], 1: [1.9, 0.5]}, {0: [False, True], 1: [True, False]})
    task = SimpleNamespace(bayes_ce=lambda: 1.83912, uniform_ce=math.log(32))
    cfg = ch.goat_config("ci")
    assert ch.prose_numbers(task, cfg, _frame(), heads) == {
        "ch8_bayes": "1.839", "ch8_uniform": "3.466", "ch8_steps": 1500, "ch8_heads": 4, "ch8_d_head": 24,
        "ch8_gap_goat": "0.014", "ch8_gap_rope": "0.024", "ch8_sink_seeds": "1 of 2", "ch8_local_seeds": "2 of 2",
        "ch8_sink_max": "23.8"}


def test_tables():
    frame = _frame()
    final = ch.final_table(frame)
    assert list(final.index) == ["GOAT", "RoPE"]
    assert list(final.columns) == ["test cross-entropy (nats)", "above Bayes-optimal (nats)", "next-token accuracy"]
    assert final.loc["GOAT", "test cross-entropy (nats)"] == "1.850 ± 0.010"
    assert final.loc["RoPE", "above Bayes-optimal (nats)"] == "0.024 ± 0.005"
    assert ch.run_summary(frame) == "6 runs; mean wall time per run 54.5 s"
    budget = ch.budget_table(ch.goat_config("ci"), [0, 1, 2])["ci"]
    assert budget["Updates"] == 1500 and budget["GOAT lanes (of the head width)"] == 13 and budget["Heads"] == 4
    assert budget["Model width"] == 64 and budget["Head width"] == 24 and budget["Learning rate"] == 0.003
    assert budget["Seeds"] == 3 and budget["Layers"] == 1


def _record(method: str, seed: int, gaps: list[float]):
    cfg = SimpleNamespace(experiment="copymix", profile="ci", method=method, seed=seed)
    return SimpleNamespace(config=cfg, seed=seed, run_id=f"{method}{seed}", wall_time=1.0,
                           metrics={"test": {"gap": gaps[-1]}},
                           curves={"steps": [0, 10], "eval": {"test": {"gap": gaps}}})


def test_gap_curves_and_frame_of_read_every_run():
    runs = {"goat": [_record("goat", 0, [1.0, 0.1]), _record("goat", 1, [0.8, 0.2])], "rope": [_record("rope", 0, [1.2, 0.3])]}
    curves = ch.gap_curves(runs)
    assert curves["value"].tolist() == [1.0, 0.1, 0.8, 0.2, 1.2, 0.3] and curves["step"].tolist() == [0, 10] * 3
    assert ch.frame_of(runs)["test.gap"].tolist() == [0.1, 0.2, 0.3]


def test_load_reads_the_stored_copymix_records_by_method_in_seed_order():
    runs = ch.load("ci", [2, 0])  # the committed store
    copymix = runs["copymix"]
    assert (runs.profile, runs.seeds, list(runs.blocks)) == ("ci", (2, 0), ["copymix"])
    assert list(copymix) == ["goat", "rope", "alibi"]
    for method, records in copymix.items():
        assert [(r.config.method, r.seed, r.config.profile) for r in records] == [(method, 0, "ci"), (method, 2, "ci")]
    with pytest.raises(ValueError, match="seeds"):
        ch.load("ci", [])  # checked before anything is fetched


def test_a_record_without_the_readout_is_a_clear_error():
    record = SimpleNamespace(config=SimpleNamespace(experiment="copymix", method="goat"), seed=0, run_id="0" * 64,
                             readouts={})
    with pytest.raises(ValueError, match="has no readout 'goat_prior'.*must list it in `readouts`"):
        ch.figure1_panels(record)
    with pytest.raises(ValueError, match="has no readout 'goat_prior'"):
        ch.structure([record], lag=2)


def test_claims_are_the_notebooks_measures_from_records(monkeypatch):
    """`claims` decides on the records `load` fetches: S3-07, S3-05 and S3-06, with the notebook's
    functions, and `decide` also gives the prose numbers."""
    from companion.book.chapter import claims
    from companion.book.claims import record_all

    goat = [_goat_record(_goat(b), s) for s, b in ((0, 5.0), (1, 1.0), (2, 3.0))]
    for r, gap in zip(goat, (0.0141, 0.0145, 0.0138)):
        r.wall_time, r.metrics = 1.0, {"test": {"gap": gap}}
    monkeypatch.setattr(ch, "read_runs", lambda experiment, profile, seeds, **kw: goat)
    results = claims(ch, store="there")
    runs = {"goat": goat}
    frame, heads = ch.frame_of(runs), ch.structure(goat, lag=2)
    expect = record_all(measures(ch.CLAIMS, {"frame": frame, "heads": heads}), details=details(ch.CLAIMS, {"frame": frame, "heads": heads}))
    assert [(r.id, r.measure, r.verdict, r.detail) for r in results] == [(r.id, r.measure, r.verdict, r.detail)
                                                                         for r in expect]
    assert [r.id for r in results] == ["S3-07", "S3-05", "S3-06"] and results[1].measure == round(2 / 3, 3)
    found = ch.decide(ch.load("ci", store="there"))
    assert found.numbers["ch8_sink_seeds"] == "2 of 3" and found.numbers["ch8_gap_goat"] == "0.014"
    assert list(found["frame"].seed) == [0, 1, 2]
