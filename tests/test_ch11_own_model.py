"""Chapter 11 (companion.book.chapters.ch11_own_model): every path equals attend where the prior is kept and
differs where it is dropped; the difference labels are exact; the traps are what the APIs do; the cost table
reads the committed benchmark and names a refusal."""

from __future__ import annotations

import json
import math

import pytest
import torch

from companion.book.chapters import ch11_own_model as ch
from companion.book.chapters import third_party
from companion.cost.interop import NULL


@pytest.fixture(scope="module")
def found():
    return ch.decide(ch.load("ci"))


def test_every_path_keeps_the_prior_and_the_null_loses_it(found):
    kept = [r for r in found["agreement"] + found["modules"] if r["path"] != NULL[0]]
    null = [r for r in found["agreement"] if r["path"] == NULL[0]]
    assert len(kept) == 20 and len(null) == 4
    for r in kept:
        assert r["output"] <= ch.TOLERANCE, r
        assert math.isnan(r["gradient"]) or r["gradient"] <= ch.TOLERANCE, r
    assert min(r["output"] for r in null) > 0.1  # the comparison can fail: without the prior it does
    assert found.numbers["ch11_within"] == "True"
    assert found.numbers["ch11_null_smallest"] == ch.bound(min(r["output"] for r in null))


def test_the_difference_labels_are_exact():
    assert [ch.bound(x) for x in (0.0, float("nan"), 4.4e-16, 1e-15, 7.1e-15, 0.2134, 1.528)] == \
        ["0", "—", "< 1e−15", "< 1e−14", "< 1e−14", "0.21", "1.53"]


def test_the_traps_are_what_the_apis_do(found):
    traps = {r["trap"]: r["naive"] for r in found["traps"]}
    assert len(traps) == 8
    assert "100 % of attention on the band in SDPA, 0 % in MultiheadAttention" in traps[
        "a boolean mask: True means attend to SDPA, blocked to nn.MultiheadAttention"]
    assert traps["a float mask and is_causal=True together"].startswith("RuntimeError: ")
    assert traps["a per-head (heads, L, L) mask to nn.MultiheadAttention"].startswith("RuntimeError: ")
    assert traps["a padded query whose causal keys are all padding"].startswith("8 rows of NaN from an explicit")
    kernels = {r["case"]: r["kernel"] for r in found["kernels"]}
    assert kernels["no mask"] == "flash (fused, CPU)"


def test_the_cost_table_reads_the_committed_benchmark_and_names_a_refusal(found):
    full = ch.cost_table(found["cost"], "full")
    assert full.loc["companion.attend", ("learnable mask", "× attend")] == "1.00"
    assert full.loc["FlexAttention score_mod", ("GOAT prior", "ms")] == "refused"
    settings = found["cost"]["settings"]
    assert found.numbers["ch11_cost_shape"] == f"({settings['batch']}, {settings['heads']}, {settings['length']}, " \
                                               f"{settings['d_head']})"


def test_a_corrupt_benchmark_file_is_refused_by_name(tmp_path, monkeypatch):
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    bad = tmp_path / "benchmarks" / "results" / f"{ch.COST_RESULT}.json"
    bad.write_text(json.dumps({"machine": {}, "results": []}))  # an interrupted file: no settings, ratios, finished
    monkeypatch.setattr(ch, "repo_root", lambda: tmp_path)
    with pytest.raises(ValueError, match=rf"{ch.COST_RESULT}.json lacks \['settings', 'ratios', 'finished'\]"):
        ch.load("ci")


def test_the_stand_in_modules_two_mask_forms_give_one_output():
    """The trap the adapter guards: the same padding as SDPA's boolean mask and as eager's additive mask."""
    torch.manual_seed(0)
    sdpa = third_party.ThirdPartyAttention(16, 2, attn_implementation="sdpa", dtype=torch.float64)
    eager = third_party.ThirdPartyAttention(16, 2, attn_implementation="eager", dtype=torch.float64)
    eager.load_state_dict(sdpa.state_dict())
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    padding = torch.tensor([[True] * 5, [True, True, True, False, False]])
    # eager's softmax runs in float32 (as the models it imitates do), so float64 agrees to float32's precision
    assert torch.allclose(sdpa(x, padding), eager(x, padding), atol=1e-6, rtol=0)
    assert not torch.allclose(sdpa(x, padding), eager(x, ~padding), atol=1e-3)  # the other meaning: not the same
    with pytest.raises(ValueError, match="register it in ATTENTION_FUNCTIONS first"):
        third_party.ThirdPartyAttention(16, 2, attn_implementation="goat")
