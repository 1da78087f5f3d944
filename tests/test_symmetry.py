"""The exactly symmetric model (`ModelConfig.symmetric`, `companion.symmetry`) and the closed-form
predictions of Chapter 3's symmetry account (`min_degree_interpolator(..., symmetric=...)`)."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from companion.book.chapters import symmetry as sym
from companion.boolean_fourier import min_degree_interpolator
from companion.config import ModelConfig, PriorConfig, RunConfig, config_from_dict, config_to_dict
from companion.experiments import get_experiment
from companion.identity import run_id
from companion.model import build_model
from companion.symmetry import symmetrise, tied_index
from companion.tasks.boolean import BooleanTask, make_function

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the config field and run ids


def test_the_field_at_its_default_leaves_every_committed_id_unchanged():
    files = sorted((ROOT / "results" / "ci").glob("*.json"))
    earlier = 0
    for path in files:
        data = json.loads(path.read_text())["config"]
        cfg = config_from_dict(RunConfig, data)
        if not data["experiment"].startswith("symmetry-"):  # every record made before the field existed
            earlier += 1
            assert "symmetric" not in data["model"] and cfg.model.symmetric == ()
        assert config_to_dict(cfg) == data and run_id(cfg) == path.stem, path.name
    assert earlier >= 414


def test_a_symmetric_model_has_its_own_id_and_round_trips():
    base = get_experiment("symmetry-2parity-moved").configs("ci")
    mask, tied = base["mask"], base["sym-mask"]
    assert tied.model.symmetric == (0, 1) and mask.model.symmetric == ()
    assert config_to_dict(tied)["model"]["symmetric"] == [0, 1]
    assert config_from_dict(RunConfig, config_to_dict(tied)) == tied
    assert run_id(tied) != run_id(replace(tied, method="mask", model=mask.model))


@pytest.mark.parametrize("kw, says", [
    ({"symmetric": (0,)}, "at least two"), ({"symmetric": (1, 1)}, "at least two"),
    ({"symmetric": (0, 1), "positions": "rope", "d_model": 32}, "learned"),
    ({"symmetric": (0, 1), "prior": PriorConfig(kind="alibi")}, "prior"),
])
def test_a_symmetric_set_the_model_cannot_honour_is_refused(kw, says):
    with pytest.raises(ValueError, match=says):
        ModelConfig(**kw)


# ---------------------------------------------------------------- exact symmetry


def test_symmetrise_is_an_exact_invariant_projection():
    g = torch.Generator().manual_seed(0)
    m = torch.randn(2, 7, 7, generator=g, dtype=torch.float64)
    orbit = (1, 3, 4)
    s = symmetrise(m, orbit)
    for perm in itertools.permutations(orbit):
        p = list(range(7))
        for a, b in zip(orbit, perm):
            p[a] = b
        assert torch.equal(s[..., p, :][..., :, p], s)  # bitwise invariant
    assert torch.allclose(symmetrise(s, orbit), s, rtol=0, atol=1e-15)  # a projection
    rest = [i for i in range(7) if i not in orbit]
    assert torch.equal(s[..., rest, :][..., :, rest], m[..., rest, :][..., :, rest])
    assert torch.allclose(s[..., 1, 1], m[..., list(orbit), list(orbit)].mean(-1))
    assert tied_index(5, (2, 4)) == [0, 1, 2, 3, 2]


def _model(method: str, function: str = "2parity-moved", seed: int = 0):
    cfg = get_experiment(f"symmetry-{function}").configs("ci")[method]
    task = BooleanTask(function, n_bits=15)
    model = build_model(cfg.model, task, generator=torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():  # move every parameter off its symmetric start, as training would
        for p in model.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=g))
    return model.double().eval(), task  # float64: what remains of a gap is rounding, about 1e-15


@pytest.mark.parametrize("function, pair", [("2parity-moved", (0, 1)), ("maj3", (0, 2)), ("maj3", (1, 2))])
def test_swapping_two_open_bits_leaves_the_symmetric_model_unchanged_and_not_the_plain_one(function, pair):
    x = torch.randint(0, 2, (512, 15), generator=torch.Generator().manual_seed(1))
    swapped = x.clone()
    swapped[:, list(pair)] = x[:, list(pair[::-1])]
    moved = (x[:, pair[0]] != x[:, pair[1]])
    for method, symmetric in (("sym-mask", True), ("mask", False)):
        model, _ = _model(method, function)
        with torch.no_grad():
            a, b = model(x).squeeze(-1), model(swapped).squeeze(-1)
        gap = float((a - b).abs().max())
        if symmetric:
            assert gap <= 1e-12, (method, gap)
        else:
            assert float((a - b)[moved].abs().min()) > 1e-4, (method, gap)


# ---------------------------------------------------------------- the account's closed forms


def test_the_symmetric_interpolants_are_the_account_s():
    parity = sym.interpolants("2parity")
    assert parity["symmetric"] == parity["mdi"] == {(): -1.0, (0,): 1.0, (1,): 1.0}  # x0 + x1 − 1
    moved = sym.interpolants("2parity-moved")
    assert moved["mdi"] == {(): 1.0, (0,): 1.0, (1,): -1.0}  # 1 + x0 − x1
    assert moved["symmetric"] == {(0, 1): 1.0}  # the target itself
    maj = sym.interpolants("maj3")["symmetric"]  # −1/2 + Σ x_i − ½ Σ x_i x_j: q(s) = ¼ + s − s²/4
    assert maj == pytest.approx({(): -0.5, (0,): 1.0, (1,): 1.0, (2,): 1.0, (0, 1): -0.5, (0, 2): -0.5, (1, 2): -0.5})
    assert sym.interpolants("threesym")["symmetric"] is None  # the seen values differ within an orbit


def test_the_predictions_in_accuracy():
    p = sym.predictions()
    assert p["2parity"]["symmetric"] == p["2parity"]["mdi"] == {"cube": 0.75, "unseen": 0.0, "seen": 1.0}
    assert p["2parity-moved"]["mdi"] == {"cube": 0.75, "unseen": 0.0, "seen": 1.0}
    assert p["2parity-moved"]["symmetric"] == {"cube": 1.0, "unseen": 1.0, "seen": 1.0}
    assert p["maj3"]["mdi"] == {"cube": 0.875, "unseen": 0.5, "seen": 1.0}
    assert p["maj3"]["symmetric"] == {"cube": 1.0, "unseen": 1.0, "seen": 1.0}
    assert p["threesym"]["symmetric"] is None and p["threesym"]["mdi"]["cube"] == 0.625
    numbers = sym.prediction_numbers(p)
    assert numbers["ch3_sym_pred_2parity_moved_unseen"] == "100.0 %" and numbers["ch3_sym_pred_threesym_cube"] == "none"


def test_the_symmetric_search_agrees_with_the_unrestricted_one_on_a_small_cube():
    for key in ("2parity", "2parity-moved", "maj3"):
        f = make_function(key, 5)
        a = min_degree_interpolator(f.expansion, f.unseen, 5, frozen=f.frozen, symmetric=f.open_bits())
        b = min_degree_interpolator(f.expansion, f.unseen, 5, frozen=f.frozen, symmetric=f.open_bits(), restrict=False)
        assert a == pytest.approx(b), key


def test_the_moved_quadrant_is_where_the_task_says():
    t = BooleanTask("2parity-moved", n_bits=6)
    x, y = t.splits["unseen"]
    assert len(x) == 16 and (x[:, 0] == 1).all() and (x[:, 1] == 0).all() and (y == -1).all()
