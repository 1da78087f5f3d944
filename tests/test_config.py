"""Config dataclasses, override parsing and the experiment registry."""

import dataclasses

import pytest

from companion.config import (
    ModelConfig, PriorConfig, RunConfig, TaskConfig, TrainConfig, apply_overrides, config_from_dict, config_to_dict,
    override_keys,
)
from companion.experiments import EXPERIMENTS, get_experiment

BASE = get_experiment("smoke").configs("ci")["mask"]


def test_overrides_parse_and_type_check():
    cfg = apply_overrides(BASE, ["train.lr=1e-4", "model.d_model=64", "model.prior.trainable=false",
                                 "train.betas=0.8,0.9", "task.n_train=32", "model.pool=mean"])
    assert cfg.train.lr == 1e-4 and isinstance(cfg.train.lr, float)
    assert cfg.model.d_model == 64 and cfg.model.prior.trainable is False
    assert cfg.train.betas == (0.8, 0.9)
    assert cfg.task.kwargs == {"n_train": 32}
    assert cfg.model.pool == "mean"
    assert BASE.train.lr == 3e-3  # frozen: the preset is untouched


def test_int_given_for_float_is_coerced_so_hash_json_is_stable():
    assert apply_overrides(BASE, ["train.lr=1"]).train.lr == 1.0
    assert isinstance(TrainConfig(lr=1).lr, float)


@pytest.mark.parametrize("item, expected", [
    ("train.lr=abc", "expected float"),
    ("model.d_model=6.5", "expected int"),
    ("model.prior.trainable=maybe", "expected bool"),
    ("model.pool=max", "one of cls, mean"),
    ("train.betas=0.9", "comma-separated float, float"),
    ("task.n_train=x", "expected int"),
])
def test_bad_type_names_key_and_expected_type(item, expected):
    with pytest.raises(ValueError) as err:
        apply_overrides(BASE, [item])
    assert item.split("=")[0] in str(err.value) and expected in str(err.value)


@pytest.mark.parametrize("key", ["train.lx", "model.prior.open", "seed", "task.missing", "model.prior"])
def test_unknown_key_lists_valid_keys(key):
    with pytest.raises(ValueError) as err:
        apply_overrides(BASE, [f"{key}=1"])
    msg = str(err.value)
    assert repr(key) in msg and "train.lr" in msg and "model.prior.trainable" in msg and "task.n_train" in msg


def test_malformed_override_and_rejected_value():
    with pytest.raises(ValueError, match="key=value"):
        apply_overrides(BASE, ["train.lr"])
    with pytest.raises(ValueError, match="n_heads"):
        apply_overrides(BASE, ["model.n_heads=3"])
    with pytest.raises(ValueError, match="qk_init"):
        apply_overrides(BASE, ["model.qk_init=nope"])


def test_override_keys_cover_every_leaf_field():
    keys = set(override_keys(BASE))
    for cls, prefix in ((ModelConfig, "model."), (TrainConfig, "train."), (PriorConfig, "model.prior.")):
        for f in dataclasses.fields(cls):
            if f.name != "prior":
                assert prefix + f.name in keys
    assert "device" in keys and "task.name" in keys


def test_unknown_experiment_profile_method_list_valid_names():
    with pytest.raises(ValueError, match="valid: .*smoke"):
        get_experiment("nope")
    with pytest.raises(ValueError, match="valid: ci, paper"):
        EXPERIMENTS["smoke"].configs("gpu")
    with pytest.raises(ValueError, match="valid: default, mask"):
        EXPERIMENTS["smoke"].config("ci", "other", 0)


def test_dict_round_trip():
    cfg = apply_overrides(BASE, ["train.betas=0.5,0.6"])
    back = config_from_dict(RunConfig, config_to_dict(cfg))
    assert back == cfg
    with pytest.raises(ValueError, match="no field"):
        config_from_dict(TrainConfig, {"lrr": 1})


def test_validation_messages():
    with pytest.raises(ValueError, match="steps > 0 or epochs > 0"):
        TrainConfig(steps=0, epochs=0)
    with pytest.raises(ValueError, match="d_head"):
        ModelConfig(d_model=256, n_heads=6)
    assert ModelConfig(d_model=256, n_heads=6, d_head=64).head_dim == 64
    assert TaskConfig.of("toy", b=1, a=2).params == (("a", 2), ("b", 1))
    with pytest.raises(ValueError, match="not one of"):
        PriorConfig(kind="rope")


@pytest.mark.parametrize("item", ["train.lr=nan", "train.lr=inf", "train.lr=-Infinity", "train.lr=1e400",
                                  "train.clip_norm=nan", "model.prior.open_value=inf", "train.betas=0.9,nan"])
def test_a_non_finite_float_override_is_refused_by_name(item):
    key, _, text = item.partition("=")
    with pytest.raises(ValueError) as err:
        apply_overrides(BASE, [item])
    assert str(err.value) == (f"override {key}={text!r}: expected a finite float; NaN and inf are not settings "
                              "(give a number such as 1e-4).")


def test_a_malformed_tuple_part_still_names_the_tuple_type():
    with pytest.raises(ValueError, match=r"^override train.betas='0.9,x': expected comma-separated float, float\.$"):
        apply_overrides(BASE, ["train.betas=0.9,x"])


@pytest.mark.parametrize("build, message", [
    (lambda: TrainConfig(lr=float("nan")), "TrainConfig.lr=nan is not finite"),
    (lambda: TrainConfig(clip_norm=float("inf")), "TrainConfig.clip_norm=inf is not finite"),
    (lambda: TrainConfig(warmup=float("nan")), "TrainConfig.warmup"),  # caught by its range check first
    (lambda: PriorConfig(closed_value=float("-inf")), "PriorConfig.closed_value=-inf is not finite"),
    (lambda: TaskConfig.of("toy", noise=float("nan")), "TaskConfig parameter noise=nan is not finite"),
])
def test_a_config_built_in_code_refuses_non_finite_numbers(build, message):
    with pytest.raises(ValueError, match=message):
        build()
