"""Property tests: no input makes `attend` or the override parser raise anything but a clear
ValueError, and every input they accept gets the right answer.

- `attend`, on every backend and dtype, against a float64 softmax written out, over random shapes,
  causal or not, no bias / an additive bias with -inf entries / a boolean mask, with leading axes of
  every broadcastable form, a random scale, and now and then a NaN or inf planted in q, k, v, the bias
  or the scale. An independent oracle says whether the input is valid; valid input must match the
  reference (and `check=False` must give the same bits), invalid input must raise ValueError.
- `apply_overrides`, over every override key and random text: a config, or a ValueError; an
  accepted value is the one written, and the config hashes and round-trips.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from companion.attention import attend
from companion.config import RunConfig, apply_overrides, config_from_dict, config_to_dict, override_keys
from companion.experiments import get_experiment
from companion.identity import run_id

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}
TOL = {torch.float64: 1e-9, torch.float32: 2e-4, torch.bfloat16: 6e-2}  # |out − ref| ≤ TOL·(1 + |ref|)

# ---------------------------------------------------------------- attend


@st.composite
def cases(draw):
    b, h = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    i, j = draw(st.integers(0, 6)), draw(st.integers(1, 7))
    d, e = draw(st.integers(1, 8)), draw(st.integers(1, 5))
    bias_kind = draw(st.sampled_from(["none", "float", "bool"]))
    lead = draw(st.sampled_from([(), (1,), (h,), (1, 1), (1, h), (b, 1), (b, h)]))
    return dict(
        shape=(b, h, i, j, d, e), bias_kind=bias_kind, lead=lead,
        causal=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)),
        closed=draw(st.sampled_from([0.0, 0.2, 0.6])),  # share of keys a mask blocks
        scale=draw(st.sampled_from([None, None, 0.3, 2.0, 0.0, -1.0, math.nan, math.inf])),
        plant=draw(st.sampled_from([None] * 6 + ["q", "k", "v", "bias"])),
        planted=draw(st.sampled_from([math.nan, math.inf, -math.inf])),
        dtype=DTYPES[draw(st.sampled_from(sorted(DTYPES)))],
        backend=draw(st.sampled_from(["auto", "eager", "sdpa"])),
        weights=draw(st.booleans()),
    )


def _inputs(c):
    b, h, i, j, d, e = c["shape"]
    g = torch.Generator().manual_seed(c["seed"])
    q, k, v = (torch.randn(b, h, n, w, generator=g, dtype=torch.float64)
               for n, w in ((i, d), (j, d), (j, e)))
    bias = None
    if c["bias_kind"] != "none":
        blocked = torch.rand(*c["lead"], i, j, generator=g) < c["closed"]
        if c["bias_kind"] == "bool":
            bias = ~blocked
        else:
            bias = (2 * torch.randn(*c["lead"], i, j, generator=g, dtype=torch.float64)).masked_fill(blocked, -math.inf)
    tensors = {"q": q, "k": k, "v": v, "bias": bias}
    target = tensors[c["plant"]] if c["plant"] else None
    if target is not None and target.numel() and target.is_floating_point():
        target.view(-1)[int(torch.randint(target.numel(), (1,), generator=g))] = c["planted"]
    dt = c["dtype"]
    q, k, v = (t.to(dt) for t in (q, k, v))
    if bias is not None and bias.is_floating_point():
        bias = bias.to(dt)
    return q, k, v, bias


def _visible(bias, i, j, causal):
    allowed = torch.ones(i, j, dtype=torch.bool)
    if causal:
        allowed = allowed.tril()
    if bias is not None:
        allowed = allowed & (bias if bias.dtype == torch.bool else ~torch.isneginf(bias))
    return allowed


def _valid(q, k, v, bias, causal, scale) -> bool:
    """The contract of `attend(check=True)`, written independently of it."""
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        return False
    if not all(bool(torch.isfinite(t).all()) for t in (q, k, v)):
        return False
    if bias is not None and bias.is_floating_point() and bool((bias.isnan() | torch.isposinf(bias)).any()):
        return False
    return bool(_visible(bias, q.shape[-2], k.shape[-2], causal).any(-1).all())


def _reference(q, k, v, bias, causal, scale):
    """Softmax over the visible keys, in float64, from the (rounded) inputs."""
    q, k, v = (t.double() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if bias is not None and bias.is_floating_point():
        s = s + torch.where(torch.isneginf(bias), 0.0, bias.double())
    allowed = _visible(bias, q.shape[-2], k.shape[-2], causal).expand_as(s)
    s = s.masked_fill(~allowed, -math.inf)
    w = torch.softmax(s, dim=-1)
    return w @ v, w


@SETTINGS
@given(cases())
def test_attend_is_right_or_refuses_on_every_backend(c):
    q, k, v, bias = _inputs(c)
    kw = dict(bias=bias, causal=c["causal"], scale=c["scale"], backend=c["backend"])
    weights = c["weights"] and c["backend"] != "sdpa"
    if not _valid(q, k, v, bias, c["causal"], c["scale"]):
        with pytest.raises(ValueError):
            attend(q, k, v, return_weights=weights, **kw)
        return
    got = attend(q, k, v, return_weights=weights, **kw)
    out, w = got if weights else (got, None)
    ref, ref_w = _reference(q, k, v, bias, c["causal"], c["scale"])
    tol = TOL[c["dtype"]]
    assert out.dtype == c["dtype"] and out.shape == ref.shape
    assert bool(((out.double() - ref).abs() <= tol * (1 + ref.abs())).all())
    if weights:
        assert bool(((w.double() - ref_w).abs() <= tol).all())
    unchecked = attend(q, k, v, check=False, return_weights=weights, **kw)
    assert torch.equal(unchecked[0] if weights else unchecked, out)  # the checks change no number


# ---------------------------------------------------------------- override parser

BASE = get_experiment("smoke").config("ci", "mask", 0)
KEYS = override_keys(BASE)


def _get(cfg, key: str):
    obj = cfg
    for part in key.split("."):
        obj = obj.kwargs[part] if hasattr(obj, "kwargs") and part != "name" else getattr(obj, part)
    return obj


def _numbers():
    floats = st.floats(allow_nan=True, allow_infinity=True).map(repr)
    return st.one_of(floats, st.integers(-10**6, 10**6).map(str), st.integers().map(str),
                     st.sampled_from(["nan", "inf", "-inf", "NaN", "Infinity", "1e400", "1e-4", "0", "-0.0"]))


WORDS = st.sampled_from(["true", "false", "yes", "off", "maybe", "cls", "mean", "adamw", "goat", "mask", "rope",
                         "uniform", "none", ""])
ANY_VALUE = st.one_of(_numbers(), WORDS, st.tuples(_numbers(), _numbers()).map(",".join), st.text(max_size=12))


@st.composite
def overrides(draw):
    """(key, value): mostly a real key with a value of about its type, sometimes anything at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(st.sampled_from(KEYS).map(lambda k: k + ".x"), st.text(max_size=12))), draw(ANY_VALUE)
    key = draw(st.sampled_from(KEYS))
    kind = type(_get(BASE, key))
    typed = {float: _numbers(), int: st.integers(-3, 300).map(str), bool: WORDS, tuple: ANY_VALUE,
             str: WORDS}.get(kind, ANY_VALUE)
    return key, draw(st.one_of(typed, typed, ANY_VALUE))


@SETTINGS
@given(st.lists(overrides(), min_size=1, max_size=2), st.integers(0, 9))
def test_overrides_give_a_valid_config_or_one_clear_error(items, malformed):
    texts = [f"{key}={value}" for key, value in items] + ([items[0][0]] if malformed == 0 else [])  # no "="
    try:
        cfg = apply_overrides(BASE, texts)
    except ValueError as err:
        message = str(err)
        assert message.startswith(("override ", "unknown override key ")) and "\n" not in message
        return
    assert isinstance(cfg, RunConfig)
    assert config_from_dict(RunConfig, config_to_dict(cfg)) == cfg
    assert len(run_id(cfg)) == 64  # canonical JSON: no NaN, no inf
    key, value = items[-1]  # the last override of its key: its value is in the config
    kind, got = type(_get(BASE, key.strip())), _get(cfg, key.strip())
    if kind is float:
        assert got == float(value) and math.isfinite(got)
    elif kind is int:
        assert got == int(value)
