"""Run configuration: frozen dataclasses and dotted string overrides.

A run is `RunConfig(experiment, method, profile, seed, model, task, train, device)`; its identity is
the hash of all of it (`companion.identity.run_id`). The named presets per profile (`ci`: CPU
minutes, `paper`: the sources' settings) live in `companion.experiments`. Overrides such as
`train.lr=1e-4` are type-checked against the dataclass fields.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, Literal, Mapping, Sequence

__all__ = [
    "ModelConfig", "PriorConfig", "TaskConfig", "TrainConfig", "RunConfig",
    "PROFILES", "MAX_STACK",
    "apply_overrides", "override_keys", "config_to_dict", "config_from_dict", "canonical_json",
]

PROFILES = ("ci", "paper")
# Field metadata: a field added after records were made; at its default it is left out of
# `config_to_dict`, so the runs made before it existed keep their ids (`companion.identity`).
OMIT_DEFAULT = "omit_default"
MAX_STACK = 16  # the most seeds one group trains together (memory grows with it)
Scalar = int | float | str | bool


def _non_finite(value) -> bool:
    """Whether `value` is, or holds (in tuples, at any depth), a float that is NaN or ±inf."""
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, tuple) and any(_non_finite(v) for v in value)


class _Checked:
    """Mixin: coerce ints given for float fields, lists for tuples; call `_validate`; then refuse any
    float that is not finite (NaN or ±inf is never a setting, and a run id, canonical JSON, cannot
    hold it)."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            value, kind = getattr(self, f.name), hints[f.name]
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, f.name, float(value))
            elif typing.get_origin(kind) is Literal and value not in typing.get_args(kind):
                raise ValueError(
                    f"{type(self).__name__}.{f.name}={value!r} is not one of {typing.get_args(kind)}."
                )
        self._validate()
        for f in fields(self):
            if _non_finite(getattr(self, f.name)):
                raise ValueError(f"{type(self).__name__}.{f.name}={getattr(self, f.name)!r} is not finite; "
                                 "every number in a config must be finite (NaN and inf are not settings).")

    def _validate(self) -> None:
        pass


def _positive(obj, *names: str) -> None:
    for name in names:
        if getattr(obj, name) <= 0:
            raise ValueError(f"{type(obj).__name__}.{name} must be > 0, got {getattr(obj, name)!r}.")


@dataclass(frozen=True)
class PriorConfig(_Checked):
    """The attention prior. kind "mask": bias log σ(M) with M from the task's open pattern.

    Attributes:
        kind: a name in `companion.priors.PRIORS`, or "none": "mask" (`companion.priors.LearnableMask`), "goat" (trainable
            spectral relative prior + key-only sink, `companion.goat.GoatPrior`, computed as SDPA
            lanes carved out of each head) or "alibi" (fixed linear recency bias,
            `companion.positions.ALiBi`).
        trainable: M is learned (True) or a fixed buffer (the "fixed mask" ablation).
        open_value, closed_value: initial M on open / closed entries of the pattern.
        init: "pattern" (open/closed values) or "zero" (M = 0, the neutral ablation).
        per_head: one M per head (True) or one M shared by the heads of a layer.
        layers: a separate mask in every layer ("all") or in the first layer only ("first").
        variant: name passed to `task.mask_pattern(variant, cls=...)`.
        goat_rank: R spectral frequencies of a GOAT prior (2R + 1 lanes of each head); a "goat-2d" prior
            gives R − R // 2 of them to the rows and R // 2 to the columns of the patch grid.
        goat_base: the geometric base of the frequencies, ω_r = base^(−r/(R − 1)) (GOAT's 1e4; a small
            grid of patches wants a smaller one, `companion.goat2d`).
        goat_init: "uniform" (the prior starts flat: plain attention) or "seeded" (small random
            spectral weights, ALiBi recency slopes), as in `GoatPrior`.
    """

    kind: str = "none"
    trainable: bool = True
    open_value: float = 10.0
    closed_value: float = -10.0
    init: Literal["pattern", "zero"] = "pattern"
    per_head: bool = False
    layers: Literal["all", "first"] = "all"
    variant: str = "default"
    goat_rank: int = 4
    goat_init: Literal["uniform", "seeded"] = "uniform"
    goat_base: float = field(default=1e4, metadata={OMIT_DEFAULT: True})

    def _validate(self) -> None:
        _positive(self, "goat_rank")
        if not self.goat_base > 1:
            raise ValueError(f"PriorConfig.goat_base must be > 1 (frequencies from 1 down to 1/base), got {self.goat_base}.")
        from companion.priors import PRIORS  # late: priors imports torch

        if self.kind != "none" and self.kind not in PRIORS:
            raise ValueError(f"PriorConfig.kind={self.kind!r} is not one of none, {', '.join(PRIORS)} "
                             "(the registry `companion.priors.PRIORS`).")


@dataclass(frozen=True)
class ModelConfig(_Checked):
    """Transformer shape. Vocabulary, length and outputs come from the task (`TaskSpec`).

    Attributes:
        arch: "encoder" (bidirectional, pooled head), "decoder" (causal LM) or "vit" (patches).
        d_model: residual width. n_layers: blocks. n_heads: heads per block.
        d_head: width of each head; 0 means d_model // n_heads (inner width n_heads·d_head may
            differ from d_model, as in GOTU's 6 × 64 = 384 at d_model 256).
        d_ff: hidden width of the feed-forward block (GELU).
        pool: "cls" (a learned CLS token at position 0 is read out) or "mean" (no CLS token,
            mean over positions). Ignored by the decoder.
        patch_size: side of the square image patches (vit only).
        qk_init: name in `companion.init.QK_INITS` applied to the query/key projections.
        attn_backend: `companion.attention.attend` backend ("auto", "eager", "sdpa").
        qk_norm: LayerNorm each head's queries and keys before the scores (QK normalisation).
        positions: how tokens learn where they sit: "learned" (a trained embedding per position,
            the model then reads at most the task's length), "sinusoidal" (Vaswani et al., added to
            the embeddings; "sinusoidal-matched" scaled to the learned embeddings' starting scale),
            "sincos-2d" (their 2-D form for a ViT's square grid of patches), "rope" (rotary, applied
            to each head's queries and keys) or "none" (only the prior or the causal mask tells
            positions apart); see `companion.priors.POSITIONS`.
        prior: the attention prior.
        symmetric: bit positions (token indices without the CLS token) over which the model is made
            exactly symmetric (`companion.symmetry`): their tokens share one position embedding and a
            mask prior's logits are averaged over their permutations. Empty (the default): no such
            tie. An encoder with learned or no positions and no prior or a mask only. Added after the
            first records: at its default it is left out of the config's dict, so every earlier run
            keeps its id (`config_to_dict`).
    """

    arch: Literal["encoder", "decoder", "vit"] = "encoder"
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_head: int = 0
    d_ff: int = 128
    pool: Literal["cls", "mean"] = "cls"
    patch_size: int = 4
    qk_init: str = "default"
    attn_backend: Literal["auto", "eager", "sdpa"] = "auto"
    qk_norm: bool = False
    positions: str = "learned"
    prior: PriorConfig = field(default_factory=PriorConfig)
    symmetric: tuple[int, ...] = field(default=(), metadata={OMIT_DEFAULT: True})

    def _validate(self) -> None:
        _positive(self, "d_model", "n_layers", "n_heads", "d_ff", "patch_size")
        object.__setattr__(self, "symmetric", tuple(self.symmetric))
        if self.symmetric:
            bits = self.symmetric
            if len(bits) < 2 or len(set(bits)) != len(bits) or any(not isinstance(b, int) or b < 0 for b in bits):
                raise ValueError(f"ModelConfig.symmetric must name at least two distinct bit positions >= 0, got {bits}.")
            if self.arch != "encoder" or self.positions not in ("learned", "none") or self.prior.kind not in ("none", "mask"):
                raise ValueError(
                    "ModelConfig.symmetric ties positions of an encoder with learned (or no) positions and no "
                    f"prior or a mask; got arch={self.arch!r}, positions={self.positions!r}, prior={self.prior.kind!r}.")
        if self.d_head < 0:
            raise ValueError(f"ModelConfig.d_head must be >= 0 (0 = d_model // n_heads), got {self.d_head}.")
        if self.d_head == 0 and self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                "set d_head explicitly (e.g. model.d_head=64)."
            )
        from companion.init import QK_INITS  # late: init imports torch
        from companion.priors import POSITIONS  # late: priors imports torch (a config stays torch-free)

        if self.positions not in ("learned", "none", *POSITIONS):
            raise ValueError(f"ModelConfig.positions={self.positions!r} is not one of learned, none, "
                             f"{', '.join(POSITIONS)} (the registry `companion.priors.POSITIONS`).")

        if self.qk_init not in QK_INITS:
            raise ValueError(f"ModelConfig.qk_init={self.qk_init!r} is not one of {sorted(QK_INITS)}.")
        if self.qk_init.startswith("structured") and self.positions != "learned":
            raise ValueError(
                f"qk_init {self.qk_init!r} writes the pattern through the learned position embeddings; "
                f"it needs positions='learned' (got {self.positions!r})."
            )
        if self.positions == "sincos-2d" and (self.arch != "vit" or self.pool != "mean" or self.d_model % 4):
            raise ValueError(
                "positions 'sincos-2d' encode a square grid of patches with a quarter of the width per axis "
                f"and sine: they need arch='vit', pool='mean' (no CLS token) and d_model a multiple of 4; got "
                f"arch={self.arch!r}, pool={self.pool!r}, d_model={self.d_model}."
            )
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(f"RoPE rotates pairs of channels: d_head must be even, got {self.head_dim}.")
        if self.prior.kind == "goat-2d" and (self.arch != "vit" or self.pool != "mean" or self.prior.goat_rank < 2):
            raise ValueError(
                "a 'goat-2d' prior reads a square grid of patches, split its frequencies between rows and columns "
                f"and has no CLS token to sit on: it needs arch='vit', pool='mean' and goat_rank >= 2; got "
                f"arch={self.arch!r}, pool={self.pool!r}, goat_rank={self.prior.goat_rank}."
            )
        if self.prior.kind in ("goat", "goat-2d") and self.head_dim <= 2 * self.prior.goat_rank + 1:
            raise ValueError(
                f"a GOAT prior of rank {self.prior.goat_rank} takes {2 * self.prior.goat_rank + 1} lanes of each "
                f"head, but d_head is {self.head_dim}; lower model.prior.goat_rank or widen the heads."
            )

    @property
    def head_dim(self) -> int:
        """d_head, or d_model // n_heads when d_head is 0."""
        return self.d_head or self.d_model // self.n_heads


@dataclass(frozen=True)
class TaskConfig(_Checked):
    """A task by registry name plus its parameters as sorted (key, value) pairs of scalars.

    `TaskConfig.of("toy", n_train=48)` builds one; `cfg.kwargs` gives the parameters as a dict.
    """

    name: str = "toy"
    params: tuple[tuple[str, Scalar], ...] = ()

    @classmethod
    def of(cls, name: str, **params: Scalar) -> "TaskConfig":
        return cls(name, tuple(params.items()))

    def _validate(self) -> None:
        pairs = tuple(tuple(p) for p in self.params)
        for pair in pairs:
            if len(pair) != 2 or not isinstance(pair[0], str) or not isinstance(pair[1], Scalar):
                raise ValueError(
                    f"TaskConfig.params entry {pair!r} must be a (name, int|float|str|bool) pair."
                )
        for name, value in pairs:
            if _non_finite(value):
                raise ValueError(f"TaskConfig parameter {name}={value!r} is not finite; every number in a "
                                 "config must be finite (NaN and inf are not settings).")
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"TaskConfig.params has a repeated key: {keys}.")
        object.__setattr__(self, "params", tuple(sorted(pairs)))

    @property
    def kwargs(self) -> dict[str, Scalar]:
        return dict(self.params)


@dataclass(frozen=True)
class TrainConfig(_Checked):
    """Optimisation. `steps` > 0 fixes the number of updates; otherwise `epochs` passes over the data.

    Schedules multiply `lr` by: constant 1 (after linear warm-up); cosine ½(1 + cos πt) after
    warm-up; onecycle = `torch.optim.lr_scheduler.OneCycleLR(max_lr=lr, pct_start=warmup or 0.3)`.
    `warmup` is a fraction of the total steps. `clip_norm` 0 disables clipping. `eval_every` 0
    evaluates only at step 0 and at the end. `prior_lr` > 0 gives the attention prior's parameters a
    learning rate of their own (the schedule multiplies it as it does `lr`); 0 trains them at `lr`.
    """

    optimizer: Literal["adam", "adamw"] = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    batch_size: int = 64
    epochs: int = 0
    steps: int = 100
    schedule: Literal["constant", "cosine", "onecycle"] = "constant"
    warmup: float = 0.0
    clip_norm: float = 0.0
    eval_every: int = 0
    # the attention prior's own learning rate (0: `lr`, as every run before it), so that a ±10 mask can
    # cross its contrast within a budget: under Adam an entry moves about one learning rate per update
    prior_lr: float = field(default=0.0, metadata={OMIT_DEFAULT: True})

    def _validate(self) -> None:
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"TrainConfig.betas must be two numbers in [0, 1), got {self.betas}.")
        _positive(self, "lr", "batch_size")
        if self.epochs < 0 or self.steps < 0 or (self.epochs == 0 and self.steps == 0):
            raise ValueError("TrainConfig needs steps > 0 or epochs > 0 (steps wins when both are set).")
        if not 0 <= self.warmup < 1:
            raise ValueError(f"TrainConfig.warmup is a fraction of the steps in [0, 1), got {self.warmup}.")
        for name in ("weight_decay", "clip_norm", "eval_every", "prior_lr"):
            if getattr(self, name) < 0:
                raise ValueError(f"TrainConfig.{name} must be >= 0, got {getattr(self, name)}.")


@dataclass(frozen=True)
class RunConfig(_Checked):
    """One training run: everything that determines its result (the identity of a stored run).

    `stack` is part of the recipe: the run trains seed-stacked beside the other seeds of its block,
    ⌊seed / stack⌋·stack … ⌊seed / stack⌋·stack + stack − 1 (`companion.runs.group_configs`), and
    always so, whatever command asks for it (`--jobs`, the seeds asked for, a resume). 1 trains the
    run alone. Each experiment sets it so that the seeds its chapters read fill whole blocks.
    """

    experiment: str = "smoke"
    method: str = "default"
    profile: str = "ci"
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    device: str = "cpu"
    # measured on the trained model and stored in the record (`companion.readouts`); the names are
    # checked where a run is planned (`Experiment.config`) and before it trains (`runs.run`)
    readouts: tuple[str, ...] = ()
    stack: int = 1

    def _validate(self) -> None:
        if self.seed < 0:
            raise ValueError(f"RunConfig.seed must be >= 0, got {self.seed}.")
        if not 1 <= self.stack <= MAX_STACK:
            raise ValueError(f"RunConfig.stack must be in 1..{MAX_STACK} (the seeds trained together), got "
                             f"{self.stack}; 1 trains each seed alone.")


# ---------------------------------------------------------------------------------------------
# (de)serialisation


def _omit_defaults(obj, data: dict) -> dict:
    """`data` (the dict of dataclass `obj`) without the fields marked `OMIT_DEFAULT` that hold their
    default, at any depth."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.metadata.get(OMIT_DEFAULT) and f.default is not dataclasses.MISSING and value == f.default:
            del data[f.name]
        elif is_dataclass(value) and not isinstance(value, type):
            _omit_defaults(value, data[f.name])
    return data


def config_to_dict(cfg) -> dict[str, Any]:
    """Plain JSON-able dict of a config dataclass (tuples become lists). A field marked `OMIT_DEFAULT`
    is left out while it holds its default, so that adding one keeps every earlier config's dict, and
    with it its run id; `config_from_dict` gives a missing field its default."""
    return _omit_defaults(cfg, json.loads(json.dumps(dataclasses.asdict(cfg))))


def canonical_json(obj) -> str:
    """Sorted keys, no spaces, no NaN: the same bytes for the same content on any machine."""
    if is_dataclass(obj):
        obj = config_to_dict(obj)
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def config_from_dict(cls, data: Mapping[str, Any]):
    """Inverse of `config_to_dict`; unknown or missing keys raise ValueError."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {sorted(unknown)}; valid: {sorted(names)}.")
    kwargs = {}
    for name, value in data.items():
        kind = hints[name]
        if is_dataclass(kind):
            value = config_from_dict(kind, value)
        elif isinstance(value, list):
            value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
        kwargs[name] = value
    return cls(**kwargs)


# ---------------------------------------------------------------------------------------------
# overrides: "train.lr=1e-4", "model.prior.trainable=false", "task.n_train=32"

_FIXED = ("experiment", "method", "profile", "seed")  # set by the sweep, not by overrides
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def override_keys(cfg: RunConfig) -> list[str]:
    """Every dotted key `apply_overrides` accepts for this config."""

    def walk(obj, prefix: str) -> list[str]:
        out = []
        for f in fields(obj):
            value = getattr(obj, f.name)
            if prefix == "" and f.name in _FIXED:
                continue
            if isinstance(value, TaskConfig):
                out += [f"{prefix}{f.name}.name"] + [f"{prefix}{f.name}.{k}" for k, _ in value.params]
            elif is_dataclass(value):
                out += walk(value, f"{prefix}{f.name}.")
            else:
                out.append(prefix + f.name)
        return out

    return walk(cfg, "")


def _type_name(kind) -> str:
    if typing.get_origin(kind) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(kind)))
    if typing.get_origin(kind) is tuple and typing.get_args(kind)[1:] == (Ellipsis,):
        return f"';'-separated {typing.get_args(kind)[0].__name__}s (e.g. a;b:1,2)"
    if typing.get_origin(kind) is tuple:
        return "comma-separated " + ", ".join(a.__name__ for a in typing.get_args(kind))
    return kind.__name__


class _NotFinite(ValueError):
    """A float that parses but is NaN or ±inf."""


def _convert(s: str, kind):
    """`s` as `kind`; ValueError if it is not one, `_NotFinite` for a NaN or infinite float."""
    if typing.get_origin(kind) is Literal:
        for choice in typing.get_args(kind):
            if s == str(choice):
                return choice
    elif kind is bool:
        if s.lower() in _TRUE + _FALSE:
            return s.lower() in _TRUE
    elif kind is int:
        return int(s)
    elif kind is float:
        value = float(s)
        if not math.isfinite(value):
            raise _NotFinite
        return value
    elif kind is str:
        return s
    elif typing.get_origin(kind) is tuple and typing.get_args(kind)[1:] == (Ellipsis,):
        # a list of names that may hold commas themselves (readouts "lm_lengths:64,128"): ";"-separated
        return tuple(_convert(p.strip(), typing.get_args(kind)[0]) for p in s.split(";") if p.strip())
    elif typing.get_origin(kind) is tuple:
        parts = [p.strip() for p in s.strip("()[] ").split(",") if p.strip()]
        args = typing.get_args(kind)
        if len(parts) == len(args):
            return tuple(_convert(p, a) for p, a in zip(parts, args))
    raise ValueError


def _parse(key: str, text: str, kind):
    """Parse `text` as `kind`; raise ValueError naming the key and the expected type (a float must
    be finite)."""
    try:
        return _convert(text.strip(), kind)
    except _NotFinite:
        raise ValueError(f"override {key}={text!r}: expected a finite float; NaN and inf are not "
                         "settings (give a number such as 1e-4).") from None
    except ValueError:
        raise ValueError(f"override {key}={text!r}: expected {_type_name(kind)}.") from None


def _set(obj, path: list[str], text: str, full_key: str):
    name, rest = path[0], path[1:]
    if isinstance(obj, TaskConfig) and name != "name":
        params = obj.kwargs
        if rest or name not in params:
            raise KeyError(full_key)
        value = _parse(full_key, text, type(params[name]))
        params[name] = value
        return replace(obj, params=tuple(params.items()))
    if name not in {f.name for f in fields(obj)}:
        raise KeyError(full_key)
    kind = typing.get_type_hints(type(obj))[name]
    current = getattr(obj, name)
    if is_dataclass(current):
        if not rest:
            raise KeyError(full_key)
        return replace(obj, **{name: _set(current, rest, text, full_key)})
    if rest:
        raise KeyError(full_key)
    return replace(obj, **{name: _parse(full_key, text, kind)})


def apply_overrides(cfg: RunConfig, overrides: Sequence[str]) -> RunConfig:
    """Apply "dotted.key=value" strings in order, type-checked against the dataclass fields.

    Raises:
        ValueError: on a malformed item, an unknown key (the valid keys are listed), a value of the
            wrong type (the expected type is named) or a value the config rejects.
    """
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"override {item!r} is not of the form key=value (e.g. train.lr=1e-4).")
        path = key.split(".")
        try:
            if path[0] in _FIXED:
                raise KeyError(key)
            cfg = _set(cfg, path, text, key)
        except KeyError:
            raise ValueError(
                f"unknown override key {key!r}; valid keys: {', '.join(override_keys(cfg))}."
            ) from None
        except ValueError as err:
            if str(err).startswith("override "):
                raise
            raise ValueError(f"override {item!r} rejected: {err}") from None
    return cfg
