"""GOTU Boolean tasks: exact labels, split sizes, minimum-degree interpolators, mask patterns."""

import pytest
import torch

from companion.boolean_fourier import cube, degree_profile, evaluate, fourier_coefficients, min_degree_interpolator
from companion.masks import pattern_for, per_token_pattern, support_pattern
from companion.tasks.boolean import FUNCTIONS, BooleanTask, accuracy, make_function


def _x(*bits, n=15):
    x = torch.ones(1, n)
    x[0, : len(bits)] = torch.tensor(bits, dtype=torch.float32)
    return x


def test_exact_labels():
    assert evaluate(make_function("2parity", 15).expansion, _x(1, -1)).item() == -1
    assert evaluate(make_function("cyclic3", 15).expansion, torch.ones(1, 15)).item() == 15
    # flipping x0 flips the three triples that contain it: 15 - 2*3
    assert evaluate(make_function("cyclic3", 15).expansion, _x(-1)).item() == 9
    maj = make_function("maj3", 15).expansion
    for bits in cube(3):
        assert evaluate(maj, _x(*bits.tolist())).item() == (1 if bits.sum() > 0 else -1)
    ts = make_function("threesym", 15).expansion
    assert evaluate(ts, _x(-1, 1, 1)).item() == pytest.approx(-1 - 1.25 - 1.5)


@pytest.mark.parametrize("key, seen, unseen", [
    ("2parity", 24576, 8192), ("cyclic3", 28672, 4096), ("maj3", 24576, 8192), ("threesym", 16384, 16384),
])
def test_split_sizes(key, seen, unseen):
    task = BooleanTask(key)
    assert len(task.splits["seen"][0]) == seen == task.n_train
    assert len(task.splits["unseen"][0]) == unseen
    assert len(task._cube) == 2**15
    small = BooleanTask(key, n_train=1000, data_seed=3)
    assert small.n_train == 1000 and len(set(map(tuple, small.splits["train"][0].tolist()))) == 1000
    seen_set = set(map(tuple, task.splits["seen"][0].tolist()))
    assert set(map(tuple, small.splits["train"][0].tolist())) <= seen_set


def test_known_interpolators():
    assert make_function("2parity", 15).mdi(15) == {(): -1.0, (0,): 1.0, (1,): 1.0}
    assert make_function("maj3", 15).mdi(15) == {(0,): 0.5, (1,): 0.5, (2,): 1.0, (0, 2): -0.5, (1, 2): -0.5}
    assert make_function("threesym", 15).mdi(15) == {(0,): -1.25, (1,): 1.5, (2,): 1.0}
    cyc = make_function("cyclic3", 15)
    mdi = cyc.mdi(15)
    f = {tuple(sorted(m)): c for m, c in cyc.expansion.items()}
    diff = {m: mdi.get(m, 0.0) - f.get(m, 0.0) for m in set(mdi) | set(f)}
    assert {m: c for m, c in diff.items() if abs(c) > 1e-9} == {
        (): 1.0, (0,): -1.0, (1,): -1.0, (2,): -1.0, (0, 1): 1.0, (0, 2): 1.0, (1, 2): 1.0, (0, 1, 2): -1.0}


@pytest.mark.parametrize("key", FUNCTIONS)
def test_mdi_interpolates_and_restriction_is_exact(key):
    n = 6
    fn = make_function(key, n)
    x = cube(n, dtype=torch.float64)
    seen = ~fn.unseen(x)
    restricted = fn.mdi(n)
    full = min_degree_interpolator(fn.expansion, fn.unseen, n, frozen=fn.frozen, restrict=False)
    torch.testing.assert_close(evaluate(restricted, x)[seen], evaluate(fn.expansion, x)[seen])
    torch.testing.assert_close(evaluate(restricted, x), evaluate(full, x))
    assert degree_profile(restricted, n)[-1] <= degree_profile(fn.expansion, n)[-1] + 1e-12


def test_fourier_round_trip():
    f = {(0, 2): 0.5, (1,): -2.0, (): 0.25}
    x = cube(3, dtype=torch.float64)
    back = fourier_coefficients(evaluate(f, x), (0, 1, 2))
    assert back == pytest.approx(f)


@pytest.mark.parametrize("metric, expected", [
    ("nearest", [0.75, 0.875, 0.875, 0.625]), ("tolerance", [0.75, 0.875, 0.75, 0.5]), ("sign", [0.75, None, 0.875, 0.5]),
])
def test_reference_accuracy_of_the_interpolator(metric, expected):
    for key, want in zip(FUNCTIONS, expected):
        ref = BooleanTask(key, metric=metric).reference()
        assert ref["seen"] == 1.0
        if want is not None:
            assert ref["cube"] == pytest.approx(want)


def test_accuracy_readings():
    labels = torch.tensor([-3.75, 0.75, 1.25, 1.75])
    y = torch.tensor([0.75, 0.75, -3.75])
    pred = torch.tensor([0.95, 1.1, -9.0])
    assert accuracy(pred, y, labels, "nearest") == pytest.approx(2 / 3)
    assert accuracy(pred, y, labels, "tolerance") == pytest.approx(1 / 3)
    assert accuracy(pred, y, labels, "sign") == 1.0
    with pytest.raises(ValueError, match="metric"):
        accuracy(pred, y, labels, "exact")


def _open_pairs(p):
    return {(int(i), int(j)) for i, j in p.nonzero().tolist() if i != j}


def test_mask_patterns_per_task():
    assert _open_pairs(BooleanTask("2parity", n_bits=5).mask_pattern("support", cls=True)) == {(0, 1), (0, 2), (1, 2), (2, 1)}
    maj = _open_pairs(BooleanTask("maj3", n_bits=5).mask_pattern("support", cls=False))
    assert maj == {(i, j) for i in range(3) for j in range(3) if i != j}
    cyc = BooleanTask("cyclic3", n_bits=7).mask_pattern("support", cls=False)
    for i in range(7):
        assert {j for j in range(7) if cyc[i, j] and j != i} == {(i + d) % 7 for d in (-2, -1, 1, 2)}
    per = per_token_pattern(make_function("cyclic3", 7).monomials(), 7, cls=False)
    assert {j for j in range(7) if per[6, j]} == {6, 0, 1}
    assert per.sum(1).tolist() == [3] * 7
    assert torch.equal(pattern_for("pair:1-2", [], 4, cls=True), support_pattern([(1, 2)], 4, cls=True))
    with pytest.raises(ValueError, match="valid"):
        pattern_for("stripes", [], 4, cls=True)
    with pytest.raises(ValueError, match="distinct"):
        pattern_for("pair:1-1", [], 4, cls=True)


def test_readouts_reuse_the_final_predictions_only_while_the_model_is_unchanged():
    from companion.config import ModelConfig
    from companion.model import build_model
    from companion.train import evaluate as evaluate_model
    from companion.tasks.boolean import mdi_readout

    task = BooleanTask("2parity", n_bits=6)
    model = build_model(ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=16), task,
                        generator=torch.Generator().manual_seed(0)).eval()
    calls = []
    predict = task.predict
    task.predict = lambda m, x, **kw: calls.append(len(x)) or predict(m, x, **kw)
    evaluate_model(model, task, final=True)
    assert calls == [len(task.splits["seen"][0]), len(task.splits["unseen"][0])]
    reused = mdi_readout(model, task, "")
    assert len(calls) == 2  # read back, not predicted again
    with torch.no_grad():
        model.head.bias.add_(1.0)  # an optimiser step, a copy_ or load_state_dict write in place alike
    moved = mdi_readout(model, task, "")
    assert len(calls) == 3 and moved["mean_pred"] == pytest.approx(reused["mean_pred"] + 1.0, abs=1e-5)
    task.predict = predict
    fresh = mdi_readout(model, BooleanTask("2parity", n_bits=6), "")  # a task that never evaluated it
    assert fresh == pytest.approx(moved)
