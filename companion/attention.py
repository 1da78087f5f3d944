"""Scaled dot-product attention with an additive prior: one entry point, two paths.

`attend` is the single place where every prior in the book meets the softmax. It has an eager
reference path (explicit scores, returns the weights) and a fused path through
`torch.nn.functional.scaled_dot_product_attention` (SDPA); both compute

    weights = softmax(q kᵀ · scale + bias),   out = weights v

Notable choices:
- a float `bias` is added to the scores; a boolean `bias` marks *allowed* keys (True = visible),
  the convention of SDPA's boolean `attn_mask`;
- `causal=True` lets query i read keys j ≤ i (top-left aligned, as SDPA's `is_causal`); with
  `q_start` = s the queries are the positions s … s + i − 1 of the sequence the keys span (the last
  rows of a self-attention, say), and query i reads keys j ≤ s + i;
- every input is checked before any arithmetic (`check=True`, the default): a row with no visible key
  has no distribution to normalise, so it is an error that names the rows instead of a silent NaN
  (see "Bad input" below);
- the fused path names the SDPA kernels it allows (`sdpa_backends`). On CUDA a float bias that needs
  a gradient (a learnable mask) goes to the memory-efficient kernel, the one fused kernel that
  differentiates its mask (flash takes no mask; cuDNN and CPU flash refuse a mask that requires
  grad), with MATH only as the fallback for inputs that kernel rejects. On CPU no fused kernel
  differentiates a mask, so such a bias runs MATH (benchmarks/attention.py measures what that costs).

Shapes: b batch, h heads, i query positions, j key positions, d head dim (q, k), e value dim.

Bad input: the contract.
- On every call and every backend, whatever `check` says, the arguments' types and the tensors'
  metadata (no element is read, nothing waits for a GPU). `causal` must be a bool and `scale` a real
  number (int or float, not a bool: True would read as 1) or None; anything else is a TypeError that
  names the argument and the type received. A `scale` that is not finite and > 0, q, k, v and bias
  on more than one device, q, k, v of different dtypes, or a bias neither bool nor floating is a
  ValueError naming each tensor's device or dtype and the fix, raised before a kernel fails.
- The bias's dtype (`_bias_as`, the one place): a bool bias keeps its meaning (True = visible) for every
  q. A floating bias of another dtype than q is cast to q's dtype before either path adds it: the
  scores are computed, and the output returned, in q's dtype. Its gradient comes back in the bias's
  own dtype. The package relies on this cast for mixed precision: a prior holds float32 parameters
  (`LearnableMask`, `GoatPrior`) while the attention runs in bfloat16 or float16 (the eager-bias,
  mask-attend and eager-goat variants of `companion.cost.variants` at --dtype bfloat16,
  `GoatPrior.attend(backend="eager")` on 16-bit inputs). What the cast can lose in 16 bits is what
  "Precision" below warns about.
- `check=True` (the default of `attend`, and of the analysis path that asks for weights): nothing
  undefined reaches a kernel. q, k and v must be 4-D floating tensors of one dtype, finite (no NaN,
  no ±inf), with matching batch, heads and head dim, at least one key and a head dim of at least 1;
  a float bias may hold -inf (a blocked key) but no NaN and no +inf; every query row must keep a
  visible key. Each violation is a ValueError that names the tensor, the first offending index and
  the fix.
- `check=False` (the training path, `companion.model`, where inputs are finite by construction): no
  check and no extra work. For input that `check=True` accepts, every backend computes the same
  function (to rounding). For input it rejects, each backend returns what its kernel returns, and
  they differ (tests/test_attention.py pins this on the CPU):
    * a query row holding NaN: eager gives NaN for that row; SDPA with a bias NaN; SDPA without a
      bias NaN or 0, by the number of keys: the fused CPU kernel's scalar tail loses the NaN from
      its running maximum and then takes the row for a blocked one, so a row whose keys do not fill
      one SIMD vector comes out 0 (fewer than 8 float64 or 16 float32 keys with AVX-512), a longer
      one NaN;
    * a row whose every key is blocked: eager NaN, SDPA 0;
    * NaN in a key hidden by the causal rule: eager NaN in every row (the rule adds -inf to the NaN
      score), SDPA without a bias only in the rows that see that key;
    * NaN in a key or a value that a row sees, or ±inf anywhere in q, k, v: NaN (or inf) in that
      row on every backend;
    * no keys at all (j = 0): zeros on every backend.
  Making SDPA return NaN for every NaN query row costs one more pass over q per call (+30 % on a CPU
  forward + backward of the attention at the smoke experiment's shape, +9 % at batch 64, 4 heads,
  128 positions, 32 channels), which the training path does not pay: a NaN there shows in the loss.

Precision (q in bfloat16 or float16, `check=True`). The bias is added to scores of order 1 in q's
dtype. From `BIAS_LIMIT[dtype]` = 1/eps on (bfloat16 2⁷ = 128, float16 2¹⁰ = 1024) adjacent values of
the dtype are 1 or more apart, so a bias entry that large keeps no fraction, and on the eager path
neither does a score added to it: the O(1) differences that set the weights are rounded away. (The
causal GOAT sink u(j) ∋ s·j reaches 128 at s = 1/2, j = 256, the length from which its bfloat16
lanes fail the cost gate; `companion.goat`.) Softmax ignores a constant per row, and entries far
below their row's largest get no weight whatever their rounding (a -1e4 "soft block", ALiBi's
distant keys), so what counts is each query row's largest visible entry, rounded to q's dtype: if
any has magnitude ≥ the limit (or overflows to ±inf), attend warns with `PrecisionWarning` (one
masked amax over the bias). The fix: shift each row so that its largest visible entry is 0 (softmax
is unchanged), rescale the bias, or compute in float32. The limit is where everything is lost, not
where nothing is: below it a logit still rounds by up to |bias|·eps/2 (0.25 at 64 in bfloat16).
float32 and float64 are never checked, nor are the scores q·k themselves (that would be a second
attention).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from companion import kernel
from companion.notice import CompanionWarning

__all__ = ["attend", "per_sample", "check_qkv", "check_scale", "check_placement", "visible_keys", "sdpa_backends",
           "BACKENDS", "BIAS_LIMIT", "PrecisionWarning"]

BACKENDS = ("auto", "eager", "sdpa", "kernel")
Backend = Literal["auto", "eager", "sdpa", "kernel"]

# The magnitude from which a 16-bit dtype spaces its values 1 or more apart, 1/eps (module docstring,
# "Precision"): a row's largest visible bias entry at or beyond it draws a PrecisionWarning.
BIAS_LIMIT = {dtype: 1.0 / torch.finfo(dtype).eps for dtype in (torch.bfloat16, torch.float16)}


class PrecisionWarning(CompanionWarning):
    """A bias too large for the 16-bit dtype attention runs in (module docstring, "Precision")."""


def _shape(t: Tensor) -> str:
    return "(" + ", ".join(str(s) for s in t.shape) + ")"


def check_scale(scale: float) -> float:
    """`scale` as a float: TypeError unless it is a real number (int or float, not a bool: `True` would
    read as 1), ValueError unless it is finite and > 0."""
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale={scale!r} is not a number (got {type(scale).__name__}); pass a float > 0, "
                        "or None for 1/√d.")
    value = float(scale)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"scale={value} multiplies every score: it must be finite and > 0 (a NaN scale makes every row "
            "undefined, 0 makes attention uniform, a negative one inverts it). Pass None for 1/√d."
        )
    return value


def _default_scale(d: int) -> float:
    if d == 0:
        raise ValueError("q and k have head dim 0: the default scale 1/√d does not exist and q·k is "
                         "always 0. Give the heads at least one channel.")
    return 1.0 / math.sqrt(d)


_NON_FINITE_WHY = {
    "q": "a query row with a non-finite entry has no defined attention (SDPA may return 0 for it)",
    "k": "a non-finite key makes every score against it undefined",
    "v": "a non-finite value poisons every output row that reads it",
}


def _check_finite(name: str, t: Tensor) -> None:
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        first = bad.nonzero()[0].tolist()
        x = t[tuple(first)].item()
        kind = "NaN" if math.isnan(x) else ("+inf" if x > 0 else "-inf")
        raise ValueError(
            f"{name} holds {int(bad.sum())} non-finite entries (first: {kind} at index {first}); "
            f"{_NON_FINITE_WHY[name]}. Find where it became non-finite (a diverged model: lower train.lr "
            "or set train.clip_norm) and pass finite values."
        )


def check_placement(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None) -> None:
    """q, k, v (and the bias) on one device, q, k and v of one dtype, the bias bool or floating.
    Reads metadata only (no element, no GPU wait), so `attend` runs it on every call.

    Raises:
        ValueError: naming each tensor's device or dtype and the fix.
    """
    named = (("q", q), ("k", k), ("v", v)) + ((("bias", bias),) if bias is not None else ())
    if len({t.device for _, t in named}) > 1:
        where = ", ".join(f"{name} on {t.device}" for name, t in named)
        raise ValueError(f"{where}: attention reads them together, so they must be on one device. Move "
                         "them to q's, e.g. k.to(q.device).")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"q, k and v have dtypes {q.dtype}, {k.dtype}, {v.dtype}; attention needs one "
                         "dtype. Cast them to one, e.g. k.to(q.dtype).")
    if bias is not None and bias.dtype != torch.bool and not bias.is_floating_point():
        raise ValueError(f"bias has dtype {bias.dtype}; use a float tensor (additive) or a bool tensor "
                         "(True = key visible).")


def _check_causal(causal: bool) -> None:
    if not isinstance(causal, bool):
        raise TypeError(f"causal={causal!r} has type {type(causal).__name__}; pass True or False "
                        "(e.g. bool(causal)).")


def check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    """Validate q, k, v for attention (module docstring, "Bad input"): 4-D floating tensors of one
    dtype, matching batch, heads and head dim, at least one key and channel, every entry finite.

    Raises:
        ValueError: naming the tensor, what is wrong and the fix.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(
                f"{name} has shape {_shape(t)}; attend expects 4-D tensors (batch, heads, seq, dim). "
                "Add the missing axes with unsqueeze, e.g. x[None, None] for a single head."
            )
        if not t.is_floating_point():
            raise ValueError(f"{name} has dtype {t.dtype}; attention needs floating-point q, k and v. "
                             "Cast with .float().")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"head dims differ: q has d={q.shape[-1]} but k has d={k.shape[-1]}; queries and keys "
            "must share a head dim for q·k to exist. Project both to the same width."
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k has {k.shape[-2]} keys but v has {v.shape[-2]} values; each key needs exactly one value."
        )
    for name, t in (("k", k), ("v", v)):
        if t.shape[:2] != q.shape[:2]:
            raise ValueError(
                f"{name} has batch/heads {tuple(t.shape[:2])} but q has {tuple(q.shape[:2])}; "
                "repeat or reshape so that batch and head axes agree."
            )
    check_placement(q, k, v)
    if k.shape[-2] == 0:
        raise ValueError(
            f"k has shape {_shape(k)}: no keys, so every query row would normalise over an empty set, "
            "which is undefined (SDPA returns zeros). Pass at least one key, or skip attention for an "
            "empty context."
        )
    _default_scale(q.shape[-1])
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_finite(name, t)


def _check_bias(bias: Tensor, b: int, h: int, i: int, j: int) -> None:
    want = f"(…, {i}, {j})"
    if bias.dim() < 2 or bias.dim() > 4 or tuple(bias.shape[-2:]) != (i, j):
        raise ValueError(
            f"bias has shape {_shape(bias)} but the scores are (batch={b}, heads={h}, i={i}, j={j}); "
            f"the bias must end in {want} and its leading axes must broadcast to ({b}, {h}). "
            "Slice a longer bias to the current lengths, e.g. bias[..., :i, :j]."
        )
    lead = tuple(bias.shape[:-2])
    full = (b, h)[2 - len(lead):] if lead else ()
    for got, need in zip(lead, full):
        if got not in (1, need):
            raise ValueError(
                f"bias has shape {_shape(bias)}; its leading axes {lead} do not broadcast to the "
                f"(batch, heads) = ({b}, {h}) of q. Use 1 or the full size on each leading axis."
            )
    if bias.dtype != torch.bool:  # floating (`check_placement`)
        bad_nan = torch.isnan(bias)
        if bool(bad_nan.any()):
            where = bad_nan.nonzero()[0].tolist()
            raise ValueError(
                f"bias contains NaN (first at index {where}); a NaN score poisons the whole row. "
                "Fix the computation that produced the bias."
            )
        bad_inf = torch.isposinf(bias)
        if bool(bad_inf.any()):
            where = bad_inf.nonzero()[0].tolist()
            raise ValueError(
                f"bias contains +inf (first at index {where}); +inf makes the softmax undefined. "
                "Use a large finite value to favour a key, and -inf (or a False boolean entry) to block one."
            )


def visible_keys(
    bias: Tensor | None, i: int, j: int, *, causal: bool = False, device=None, q_start: int = 0
) -> Tensor:
    """Boolean map of visible keys, shape broadcastable to (b, h, i, j).

    A key is visible when the causal rule allows it (key ≤ q_start + query if `causal`) and the bias
    does not block it (a False boolean entry or a -inf float entry).
    """
    dev = bias.device if bias is not None else device
    allowed = torch.ones(i, j, dtype=torch.bool, device=dev)
    if causal:
        allowed = torch.ones(i, j, dtype=torch.bool, device=dev).tril(q_start)
    if bias is not None:
        allowed = allowed & (bias if bias.dtype == torch.bool else ~torch.isneginf(bias))
    return allowed


def _check_rows(allowed: Tensor) -> None:
    empty = ~allowed.any(dim=-1)  # (..., i)
    if bool(empty.any()):
        idx = empty.nonzero().tolist()
        rows = sorted({r[-1] for r in idx})
        lead = ""
        if empty.dim() > 1:
            first = idx[0][:-1]
            lead = f" (first seen at leading index {tuple(first)})"
        shown = rows if len(rows) <= 10 else rows[:10] + ["…"]
        raise ValueError(
            f"query rows {shown} have every key blocked{lead}: softmax over an empty set of keys "
            "is undefined. Open at least one key per row (for example the diagonal), or drop those "
            "query positions before calling attend."
        )


def _check_range(bias: Tensor, allowed: Tensor, dtype: torch.dtype) -> None:
    """PrecisionWarning if a query row's largest visible bias entry, rounded to `dtype`, has magnitude
    ≥ BIAS_LIMIT[dtype] (module docstring, "Precision"); nothing for other dtypes or a bool bias."""
    limit = BIAS_LIMIT.get(dtype)
    if limit is None or bias.dtype == torch.bool or bias.numel() == 0:
        return
    top = torch.where(allowed, bias.detach(), -math.inf).amax(dim=-1)  # (..., i): each row's largest
    top = top.masked_fill(torch.isneginf(top), 0)  # a row without a visible key has nothing to weigh
    seen = top.to(dtype).abs()
    if float(seen.amax()) < limit:
        return
    at = int(seen.argmax())
    value = top.flatten()[at].item()
    fate = "overflows to ±inf" if math.isinf(seen.flatten()[at].item()) else "is kept"
    warnings.warn(
        f"bias: a query row's largest visible entry is {value:g}, which {fate} in {dtype}, where values of "
        f"magnitude ≥ {limit:g} are 1 or more apart: the bias keeps no fraction there, nor (eager) do the "
        "scores added to it. Shift each row so its largest visible entry is 0 (softmax is unchanged), "
        "rescale the bias, or compute in float32 (q, k, v .float()).", PrecisionWarning, stacklevel=3)


def _bias_as(bias: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """The bias as both paths add it: a floating bias in q's dtype (cast if it differs: the module
    docstring's rule, applied here only), a bool one unchanged."""
    if bias is None or bias.dtype in (torch.bool, dtype):
        return bias
    return bias.to(dtype)


def _float_bias(bias: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    if bias is None or bias.dtype != torch.bool:
        return bias
    zero = torch.zeros((), dtype=dtype, device=bias.device)
    return torch.where(bias, zero, torch.full_like(zero, -math.inf))


def _with_causal(bias: Tensor | None, i: int, j: int, dtype, device, q_start: int = 0) -> Tensor:
    tril = torch.ones(i, j, dtype=torch.bool, device=device).tril(q_start)
    if bias is None:
        return tril
    if bias.dtype == torch.bool:
        return bias & tril
    return bias.masked_fill(~tril, -math.inf)


def _eager(q, k, v, bias, causal, scale, q_start=0):
    scores = (q @ k.transpose(-2, -1)) * scale  # (b, h, i, j)
    if causal:
        bias = _with_causal(bias, q.shape[-2], k.shape[-2], q.dtype, q.device, q_start)
    fb = _float_bias(bias, scores.dtype)
    if fb is not None:
        scores = scores + fb
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def sdpa_backends(device_type: str, bias: Tensor | None) -> list[SDPBackend] | None:
    """The SDPA kernels `attend` allows, in priority order; None leaves the choice to SDPA.

    A float bias that requires grad on CUDA: [EFFICIENT_ATTENTION, MATH] (module docstring). Every
    other case: None (SDPA's own order already picks the fastest kernel that accepts the inputs).
    """
    if device_type == "cuda" and bias is not None and bias.dtype != torch.bool and bias.requires_grad:
        return [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    return None


def _sdpa(q, k, v, bias, causal, scale, q_start=0):
    allowed = sdpa_backends(q.device.type, bias)
    if allowed is not None:
        with sdpa_kernel(allowed):
            return _sdpa_call(q, k, v, bias, causal, scale, q_start)
    return _sdpa_call(q, k, v, bias, causal, scale, q_start)


def _sdpa_call(q, k, v, bias, causal, scale, q_start=0):
    if bias is None and (not causal or q_start == 0):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    if causal:
        # SDPA refuses attn_mask together with is_causal, and its is_causal is top-left aligned: fold
        # the causal rule (key ≤ q_start + query) into the mask.
        bias = _with_causal(bias, q.shape[-2], k.shape[-2], q.dtype, q.device, q_start)
    # Give the mask all four axes: torch 2.14 sends a 3-D mask to the MATH kernel on CPU, while the
    # same mask as (1, h, i, j) may take the fused one (benchmarks/attention.py, mask-attend).
    bias = bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)


def per_sample(bias: Tensor, batch: int, members: int, heads: int) -> Tensor:
    """A stacked bias (M, h or 1, i, j) given to each member's samples of a member-major batch of
    `batch` (M·B samples, member m owning m·B … m·B + B − 1): (M·B, heads or 1, i, j), by one expand
    per member (so a gradient sums over that member's samples alone, in the order a model alone sums it)."""
    if batch % members:
        raise ValueError(f"a batch of {batch} samples does not split over {members} stacked members; "
                         "give each member the same number of samples, member-major.")
    per = batch // members
    return torch.cat([m.expand(per, heads, *bias.shape[2:]) for m in bias.unbind(0)])


def _kernel_bias(bias: Tensor | None, b: int, h: int, i: int, j: int, members: int):
    """(bias as the kernel takes it, its members), or None where the kernel cannot take this bias: a
    float bias whose last axes are exactly (i, j), its heads 1 or h, its leading axis 1, b or the
    `members` of a stacked bias."""
    if bias is None:
        return None, 0
    if bias.dtype == torch.bool or bias.dim() < 2 or tuple(bias.shape[-2:]) != (i, j):
        return None
    if members:
        return (bias, members) if bias.dim() == 4 and bias.shape[0] == members and bias.shape[1] in (1, h) else None
    four = bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape)) if bias.dim() < 4 else bias
    if four.dim() != 4 or four.shape[1] not in (1, h) or four.shape[0] not in (1, b):
        return None
    return four, (b if four.shape[0] == b and b > 1 else 0)


def _kernel_args(backend, return_weights, q, k, v, bias, members):
    """The kernel's (bias, members) when `attend` takes the small-map kernel, else None; for
    backend "kernel" a ValueError says why it cannot."""
    if backend not in ("auto", "kernel"):
        return None
    why = None
    if return_weights:
        why = "it returns no attention weights"
    elif q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        why = "it takes 4-D q, k, v"
    elif not kernel.applies(q, k, v, None if bias is None or bias.dtype == torch.bool else bias):
        why = (f"it serves float32 CPU tensors on one torch thread with at most {kernel.MAX_POSITIONS} keys, "
               f"built and loaded (status: {kernel.status()})")
    else:
        args = _kernel_bias(bias, q.shape[0], q.shape[1], q.shape[2], k.shape[2], members)
        if args is None:
            why = "it takes a float bias (i, j), (h or 1, i, j) or (b or 1, h or 1, i, j)"
        else:
            return args
    if backend == "kernel":
        raise ValueError(f"backend='kernel' cannot serve this call: {why}. Use backend='auto', which falls back "
                         "to SDPA.")
    return None


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    bias: Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    backend: Backend = "auto",
    return_weights: bool = False,
    check: bool = True,
    q_start: int = 0,
    members: int = 0,
):
    """Attention with an additive prior.

    out_i = Σ_j softmax_j(q_i·k_j · scale + bias_ij) v_j, with scale = 1/√d by default.

    Args:
        q: queries (b, h, i, d).
        k: keys (b, h, j, d).
        v: values (b, h, j, e).
        bias: float (additive, -inf blocks a key) or bool (True = visible); shape (…, i, j) with
            leading axes broadcastable to (b, h). A float bias of another dtype than q is cast to
            q's dtype (module docstring, "Bad input").
        causal: a bool; True lets query i read keys j ≤ i only.
        scale: multiplier of q·k, a real number > 0; 1/√d if None.
        backend: "eager" (explicit scores), "sdpa" (fused kernel), "kernel" (`companion.kernel`,
            small CPU maps; a ValueError where it cannot serve the call) or "auto": the small-map
            kernel where `companion.kernel.applies`, else SDPA; eager when the weights are requested.
        return_weights: also return the (b, h, i, j) attention weights (eager path).
        check: validate q, k, v (shapes, dtypes, finite values, at least one key), the bias (no NaN,
            no +inf) and empty rows; off in the training path (module docstring, "Bad input").
        q_start: the position of the first query among the keys: the queries are positions
            q_start … q_start + i − 1, so the causal rule lets query i read keys j ≤ q_start + i
            (default 0: top-left aligned). Only the causal rule reads it; a bias is already the
            queries' rows.
        members: 0, or M when `bias` is a seed-stacked prior's (M, h or 1, i, j) over a member-major
            batch (member m's bias for samples m·b/M … (m+1)·b/M − 1, `per_sample`).

    Returns:
        out (b, h, i, e), or (out, weights) if `return_weights`.

    Raises:
        TypeError: on a `causal` that is not a bool or a `scale` that is not a real number (or None).
        ValueError: on a scale that is not finite and > 0, an unknown backend, tensors on different
            devices, q, k, v of different dtypes, a bias neither bool nor floating, and (with `check`)
            a bad shape or dtype, mismatched head dims, no keys, a non-finite q, k or v, NaN or +inf in
            the bias, or a query row whose keys are all blocked.

    Warns:
        PrecisionWarning: (with `check`, q in bfloat16 or float16) a query row's largest visible bias
            entry reaches BIAS_LIMIT[q.dtype] in magnitude (module docstring, "Precision").
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}.")
    if isinstance(q_start, bool) or not isinstance(q_start, int) or q_start < 0:
        raise ValueError(f"q_start={q_start!r} is the position of the first query among the keys; pass an "
                         "integer >= 0 (0 when queries and keys start together).")
    _check_causal(causal)
    scale = None if scale is None else check_scale(scale)
    check_placement(q, k, v, bias)
    if members and bias is not None:
        if bias.dim() != 4 or bias.shape[0] != members:
            raise ValueError(f"members={members} means a stacked bias (members, h or 1, i, j); got shape "
                             f"{_shape(bias)}. Pass members=0 for a bias shared by every sample.")
        if _kernel_args(backend, return_weights, q, k, v, _bias_as(bias, q.dtype), members) is None:
            bias, members = per_sample(bias, q.shape[0], members, q.shape[1]), 0
    if check:
        check_qkv(q, k, v)
        b, h, i, _ = q.shape
        j = k.shape[-2]
        if bias is not None:
            full = per_sample(bias, b, members, h) if members else bias
            _check_bias(full, b, h, i, j)
            allowed = visible_keys(full, i, j, causal=causal, q_start=q_start)
            _check_rows(allowed)
            _check_range(full, allowed, q.dtype)
    scale = _default_scale(q.shape[-1]) if scale is None else scale
    bias = _bias_as(bias, q.dtype)
    small = _kernel_args(backend, return_weights, q, k, v, bias, members)
    if small is not None:
        return kernel.small_attention(q, k, v, small[0], members=small[1], causal=causal, q_start=q_start,
                                      scale=scale)
    if return_weights:
        if backend == "sdpa":
            raise ValueError(
                "the fused SDPA kernel does not return attention weights; use backend='eager' "
                "or 'auto' with return_weights=True."
            )
        return _eager(q, k, v, bias, causal, scale, q_start)
    if backend == "eager":
        return _eager(q, k, v, bias, causal, scale, q_start)[0]
    return _sdpa(q, k, v, bias, causal, scale, q_start)
