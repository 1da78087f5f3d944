"""Chapter 9's reading of the digits ViT at larger sizes (companion.book.chapters.resolution), on synthetic
records whose accuracies and priors are known: the measures, the preconditions and the glued numbers."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from companion.book.chapter import measures, preconditions
from companion.book.chapters import resolution as res

SIDES = ",".join(map(str, res.SIDES))
R = np.arange(-3, 4)
LOCAL_MAP = -np.hypot(R[:, None], R[None, :])  # falls with distance in every direction
FLAT = np.zeros((7, 7))


def _record(method: str, seed: int, acc: dict[str, list[float]], prior: np.ndarray | None = None):
    readouts = {f"{reading}:{SIDES}": {"side": [8, *res.SIDES], "acc": acc[reading], "ce": [0.0] * 3}
                for reading in res.READINGS}
    if prior is not None:
        for layer in ("0", "-1"):
            readouts[f"goat_grid:{layer}"] = {"offsets": np.stack([prior, prior]).tolist()}  # two equal heads
    return SimpleNamespace(seed=seed, readouts=readouts, run_id=f"{method}-{seed}",
                           config=SimpleNamespace(experiment="vit-resolution", method=method))


def _runs(goat_far=(0.30, 0.32, 0.34), goat_maps=(LOCAL_MAP,) * 3):
    """Learned positions keep 0.40 at 16 px on every seed; GOAT `goat_far`; both 0.93 at 8 px."""
    out = {}
    for method in res.LABELS:
        recs = []
        for seed in range(3):
            far = goat_far[seed] if method.startswith("goat") else 0.40
            acc = {"resolution": [0.93, 0.5, far], "canvas": [0.93, 0.2, far - 0.2]}
            prior = (goat_maps[seed] if method == "goat-2d" else FLAT + 0.1 * LOCAL_MAP) if method.startswith("goat") else None
            recs.append(_record(method, seed, acc, prior))
        out[method] = recs
    return out


def test_locality_is_one_for_a_prior_falling_with_distance_and_minus_one_for_its_opposite():
    maps = np.stack([LOCAL_MAP, -LOCAL_MAP, LOCAL_MAP + 5.0])
    np.testing.assert_allclose(res.locality(maps), [1.0, -1.0, 1.0], atol=1e-12)
    # a larger map (an 8 × 8 grid's offsets) is read on the training grid's offsets only
    r = np.arange(-7, 8)
    big = -np.hypot(r[:, None], r[None, :])
    big[0, 0] = 100.0  # an offset outside |Δ| ≤ 3 does not count
    assert res.locality(big[None])[0] == pytest.approx(1.0)


def test_measures_preconditions_and_numbers_on_known_records():
    runs = _runs()
    df = res.frame(runs)
    assert len(df) == 4 * 3 * 2 * 3 and set(df.reading) == {"resolution", "canvas"}
    maps = res.prior_maps(runs)
    assert maps.shape == (3, 7, 7)
    m = measures(res.CLAIMS, {"df": df, "maps": maps})
    # GOAT − learned at 16 px resized: −0.10, −0.08, −0.06 (mean −0.08, std 0.02)
    half = 4.302652729911275 * 0.02 / 3 ** 0.5
    assert m["S3-19"] == pytest.approx(round(-0.08 - half, 4))
    assert m["S3-24"] == pytest.approx(1.0)  # every seed exactly local: an interval of width 0
    pre = preconditions(res.CLAIMS, {"df": df, "maps": maps})
    assert pre["S3-19"] == {"goat-learns-images": 0.0}
    assert pre["S3-24"]["prior-moved"] == pytest.approx(round(float(LOCAL_MAP.max() - LOCAL_MAP.min()), 3))
    numbers = res.numbers(df, maps, res.prior_maps(runs, layer=-1), res.prior_maps(runs, "goat-2d-shared"))
    assert set(numbers) == set(res.NUMBERS)
    assert numbers["ch9_res_diff"] == f"−8.0 points (95 % interval [{-8.0 - 100 * half:.1f}, {-8.0 + 100 * half:.1f}])".replace("-", "−")
    assert numbers["ch9_res_start"].startswith("0.0 points") and numbers["ch9_res_seeds"] == str(len(res.SEEDS))
    assert numbers["ch9_res_shared_range"] == f"{0.1 * (LOCAL_MAP.max() - LOCAL_MAP.min()):.1f} nats"


def test_the_rule_fails_where_goat_keeps_nothing_more_and_the_prior_has_no_order():
    from companion.book.claims import load_ledger, verdict

    ledger = load_ledger()
    runs = _runs(goat_far=(0.40, 0.41, 0.39),
                 goat_maps=(LOCAL_MAP, -LOCAL_MAP, np.random.default_rng(0).normal(size=(7, 7))))
    df, maps = res.frame(runs), res.prior_maps(runs)
    m = measures(res.CLAIMS, {"df": df, "maps": maps})
    rule19, rule24 = ledger["S3-19"].rule, ledger["S3-24"].rule
    assert verdict(rule19, m["S3-19"]) == "not reproduced"  # level with the baseline: no gain
    assert verdict(rule24, m["S3-24"]) == "not reproduced"
    assert verdict(rule19, 0.06) == "reproduced" and verdict(rule24, 0.6) == "reproduced"


def test_without_the_runs_every_number_is_a_dash_and_a_table_reads_by_side():
    empty = res.numbers()
    assert set(empty) == set(res.NUMBERS) | {"ch9_verdict_S3-19", "ch9_verdict_S3-24"}
    assert set(empty.values()) == {"—"}
    assert res.load("paper") == {}
    table = res.table(res.frame(_runs()))
    assert list(table.index) == list(res.LABELS.values())
    assert list(table.columns) == ["8 px (trained at)", "12 px (resized)", "16 px (resized)",
                                   "12 px (on a larger canvas)", "16 px (on a larger canvas)"]
    assert table.loc[res.LABELS["learned"], "16 px (resized)"].startswith("40.0 ± 0.0")
