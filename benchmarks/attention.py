"""Cost of one attention layer with a prior vs sequence length L: time and peak memory per backend.

Variants (all causal; B batch, H heads, D head dim; every prior is trainable in fwd+bwd):
- sdpa         plain `F.scaled_dot_product_attention(q, k, v, is_causal=True)`, no prior: the speed of
               light, the denominator of every ratio;
- goat-lanes   `GoatPrior.lanes(q, k)` then the same unmasked SDPA call; building the lanes is timed and
               the gradient reaches every prior parameter (α, β, sink MLP, gain, bump, recency);
- mask-sdpa    learnable float mask log σ(M), M an (L, L) `LearnableMask` shared by the heads, causal
               part folded in as −inf, passed as `attn_mask`; gradient to M;
- eager-bias   the same log σ(M) through `companion.attention.attend(..., backend="eager")`: explicit
               scores + materialised bias + softmax;
- flex         `flex_attention` with a causal BlockMask and a `score_mod` adding the captured GOAT tables
               κ_h(i − j) (an (H, 2L − 1) table) and u_h(j) (H, L): softmax(q·k/√D + K) over all D
               dims; compiled with `torch.compile` (compile time excluded from timing). On CPU torch
               2.14 supports its forward only: fwd+bwd records the error string as the data point;
- eager-goat   the GOAT prior materialised as an (H, L, L) Toeplitz gather of the same tables, through
               `attend(..., backend="eager")`: the function goat-lanes computes, without the lanes.
Optional (`--variants`): alibi-sdpa (a frozen ALiBi float mask, no gradient: the "b′" case of the
notes), mask-sdpa-math (mask-sdpa pinned to the MATH backend: the CUDA reference for EFFICIENT).

Protocol (research notes `goat-and-kernels.md` B9):
- correctness first: before timing a (variant, L, mode), its output and the gradients of q, k, v and
  of the prior's parameters are compared with a float64 eager reference (`attend(..., backend="eager")`
  with the prior materialised by the package's own code) at min(L, --gate-len); a variant that fails
  is not timed. At the timed L the profiled call's output and gradients must be finite;
- modes: "fwd" is inference (`torch.no_grad`, nothing requires grad, so a frozen mask may take a
  fused kernel); "fwd+bwd" is a training step's attention: forward, then backward of a fixed random
  upstream gradient, grads reset to None before each call;
- timing: a first call (compiles flex; reported as first_call_s), one call under the profiler (backend
  detection, finiteness), further warm-up calls up to --warmup, then --repeats samples with the
  variants interleaved in a rotating order, so background load hits all alike; median and IQR;
  CPU: `time.perf_counter`, CUDA: events + synchronize.
  Ratios to `sdpa` come from the same run: median/median and the median of per-repeat ratios;
- memory: a fresh subprocess per (variant, L, mode) (--memory subprocess). CUDA: max_memory_allocated
  minus memory_allocated before the call. CPU: peak RSS over the RSS before the call, the peak reset
  by writing 5 to /proc/self/clear_refs (VmHWM), with glibc's mmap threshold fixed at 64 KiB so that
  freed blocks leave the RSS (fallback: ru_maxrss delta, a lower bound). The first call (compile,
  thread pools, one-time buffers) is reported apart from the steady-state calls. The probe doubles as
  the OOM guard on CPU: it runs under RLIMIT_AS, so a config that does not fit fails there, not here;
- stopping: after an OOM, or a first call slower than --max-call-s, larger L are not tried for that
  (variant, mode); on CUDA the default lengths double from 1024 to --max-len (OOM is a data point).

    python benchmarks/attention.py                          # full sweep on the default device
    python benchmarks/attention.py --quick --out /tmp/attention-quick.json   # smoke run
    python benchmarks/attention.py --device cuda --dtype bfloat16 --memory inprocess --tag h200
    python benchmarks/attention.py --variants sdpa,goat-lanes,flex --lengths 1024 4096 --modes fwd+bwd

JSON (schema 1): {benchmark, schema, tag, host, started, finished, argv, machine{...}, versions{...},
settings{...}, notes{...}, results: [record], ratios: {mode: {variant: {L: {median_ratio,
paired_median}}}}}; record = {variant, L, mode, status ("ok" | "gate-failed" | "error" | "oom" |
"not-finite" | "too-slow" | "skipped"), reason, gate{L, passed, status, tol, errors{name: max abs err},
scales{name: max abs ref}, reason}, backend{sdp_choice[], sdp_choice_names[], profiler_ops[], kind},
first_call_s, time_s{median, q1, q3, iqr, samples[]}, ratio_vs_sdpa{median_ratio, paired_median,
per_repeat[]}, memory{status, method, setup_bytes, first_call_peak_bytes, peak_bytes,
steady_peaks_bytes[], ...}}. Timings on a loaded or shared machine are indicative only.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import math
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.attention import attend
from companion.goat import GoatPrior
from companion.positions import ALiBi
from companion.priors import LearnableMask

SCHEMA = 1
MODES = ("fwd", "fwd+bwd")
DEFAULT_VARIANTS = ("sdpa", "goat-lanes", "mask-sdpa", "eager-bias", "flex", "eager-goat")
CPU_LENGTHS = (256, 512, 1024, 2048, 4096, 8192)
QUICK_LENGTHS = (256, 512)
# Gate tolerance per run dtype: pass if max|got − ref| ≤ tol · max(1, max|ref|) for every tensor.
TOLERANCES = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}
SDP_NAMES = {-1: "ERROR", 0: "MATH", 1: "FLASH", 2: "EFFICIENT", 3: "CUDNN", 4: "OVERRIDEABLE"}
# profiler op name fragment → backend (most specific first)
PROFILER_BACKENDS = (
    ("_scaled_dot_product_flash_attention_for_cpu", "FLASH (CPU)"),
    ("_scaled_dot_product_flash_attention", "FLASH"),
    ("_scaled_dot_product_efficient_attention", "EFFICIENT"),
    ("_scaled_dot_product_cudnn_attention", "CUDNN"),
    ("_scaled_dot_product_attention_math", "MATH"),
    ("_flash_attention_forward", "FLASH"),
    ("_efficient_attention_forward", "EFFICIENT"),
)
PROFILER_KEYS = ("scaled_dot_product", "flash", "efficient", "cudnn", "fmha", "flex", "softmax", "Torch-Compiled")
PROBE_TAG = "PROBE_RESULT "

NOTES = {
    "sdpa_backends_B1": (
        "torch 2.14 source (notes B1): CPU dispatch order flash → math; a float attn_mask that requires grad "
        "disqualifies CPU-flash, so a learnable mask runs on MATH on CPU (materialises L×L). CUDA: FLASH never "
        "accepts a mask; cuDNN accepts a float mask only if it does not require grad; EFFICIENT accepts a float "
        "mask with gradient (mask padded to a multiple of 16 keys); MATH always. On sm90/sm10x with runtime cuDNN "
        "> 9.15 cuDNN is first in priority (the default on H100/H200). Known pitfalls: cuDNN NaN grad_q with a mask "
        "when L % 128 == 64 (pytorch #196678), fp32 mask with bf16 q misread by cuDNN (PR #191612; masks are cast "
        "to q's dtype here)."
    ),
    "sdp_choice": ("torch._fused_sdp_choice(q, k, v, attn_mask, ...) at each SDPA call of the profiled first call: "
                   "MATH=0, FLASH=1, EFFICIENT=2, CUDNN=3; profiler_ops lists the aten ops/kernels that ran."),
    "modes": ("fwd = inference under torch.no_grad (nothing requires grad; a frozen mask may take CPU-flash); "
              "fwd+bwd = forward + backward of a fixed upstream gradient, q, k, v and the prior's parameters "
              "require grad, grads reset to None (not zeroed) before each call, their allocation is timed."),
    "flex": ("flex_attention on CPU (torch 2.14) is forward-only: any q/k/v requiring grad raises "
             "NotImplementedError, recorded as the data point. Compiled flex lowers to a C++ template on CPU "
             "(inference only) and Triton on CUDA (captured-buffer gradients by atomic adds). Compile time is in "
             "first_call_s and first_call_peak_bytes, not in time_s / peak_bytes."),
    "memory_cpu": ("peak RSS delta in a fresh subprocess: VmHWM after the call minus VmRSS before it, the high-water "
                   "mark reset through /proc/self/clear_refs; MALLOC_MMAP_THRESHOLD_=65536 so every block ≥ 64 KiB "
                   "is mmapped and returned on free. Limits: counts touched pages (4 KiB), includes allocator and "
                   "thread-pool overhead, cannot see memory reused from an earlier call's freed heap, and is not "
                   "comparable to CUDA numbers; ru_maxrss fallback is a lower bound. Inputs and parameters are in "
                   "setup_bytes, not in the call's peak; grads allocated by the call are in it."),
    "memory_cuda": ("torch.cuda.max_memory_allocated() minus memory_allocated() before the call (caching-allocator "
                    "bytes, exact; excludes the CUDA context and cached-but-free blocks)."),
    "goat": ("GoatPrior(init='seeded') with α, β and the sink MLP/gain/bump perturbed by N(0, 0.3²) so no gradient "
             "is trivially zero; recency keeps its ALiBi init (settings.goat_recency = 'alibi') or is 0 ('zero'). "
             "With ALiBi slopes the sink lane holds u(j) ≈ s_h·j (up to ~L/2), which bf16 rounds to steps of "
             "~s_h·j/128: the lanes then miss the gate in bf16 (a numerics finding, not a cost one). "
             "The gradient of the sink MLP's output bias is exactly 0 (a shift softmax ignores); the gate "
             "judges it on the scale of the prior's whole gradient (gate.invariant_params). goat-lanes and "
             "eager-goat attend over the "
             "d_c = D − (2R + 1) content dims (scale 1/√d_c); flex over all D dims (scale 1/√D)."),
    "mask": ("LearnableMask with N(0, 1) logits (σ not saturated, so M's gradient is not ~0), one (L, L) M for "
             "all heads."),
}


# --------------------------------------------------------------------------------------------- variants


GOAT_RECENCY = {"value": "alibi"}  # "alibi" (the seeded init) or "zero"; set by --goat-recency


def _goat_prior(L: int, H: int, D: int, rank: int, seed: int, device) -> GoatPrior:
    g = torch.Generator().manual_seed(seed)
    prior = GoatPrior(H, D, train_len=L, rank=rank, causal=True, init="seeded", generator=g)
    with torch.no_grad():
        for name, p in prior.named_parameters():
            if name != "recency":
                p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype))
        if GOAT_RECENCY["value"] == "zero":
            prior.recency.zero_()
    return prior.to(device)


def goat_tables(prior: GoatPrior, L: int) -> tuple[Tensor, Tensor]:
    """κ_h(Δ) for Δ = −(L−1)..L−1, (H, 2L − 1) (index Δ + L − 1), and u_h(j), (H, L)."""
    dev = prior.alpha.device
    return prior.kappa(torch.arange(-(L - 1), L, device=dev)), prior.sink(torch.arange(L, device=dev))


class Variant:
    """One way of computing causal attention; `forward` is the timed work.

    `module` holds the trainable prior (or None); `reference` recomputes the same function with a
    float64 copy of that module through the eager reference path.
    """

    name = ""
    module: nn.Module | None = None

    def __init__(self, L: int, *, H: int, D: int, device, dtype, seed: int = 1, rank: int = 4,
                 compile_flex: bool = True):
        self.L, self.H, self.D, self.device, self.dtype = L, H, D, torch.device(device), dtype

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        raise NotImplementedError

    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return self.forward(q, k, v)

    def reference(self, q: Tensor, k: Tensor, v: Tensor, module64: nn.Module | None) -> Tensor:
        """float64 eager attention of the same function (module64: float64 copy of `module`)."""
        return attend(q, k, v, causal=True, backend="eager")

    def params(self) -> dict[str, Tensor]:
        return {} if self.module is None else dict(self.module.named_parameters())

    def kind(self) -> str:
        return "sdpa"


class Sdpa(Variant):
    name = "sdpa"

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class GoatLanes(Variant):
    name = "goat-lanes"

    def __init__(self, L, *, H, D, device, dtype, seed=1, rank=4, compile_flex=True):
        super().__init__(L, H=H, D=D, device=device, dtype=dtype)
        self.module = _goat_prior(L, H, D, rank, seed, device)

    def forward(self, q, k, v):
        q2, k2 = self.module.lanes(q, k)
        return F.scaled_dot_product_attention(q2, k2, v, is_causal=True)

    def reference(self, q, k, v, module64):
        dc = module64.content_dim
        return attend(q[..., :dc], k[..., :dc], v, bias=module64(self.L, self.L), causal=True, backend="eager")


class MaskSdpa(Variant):
    name = "mask-sdpa"

    def __init__(self, L, *, H, D, device, dtype, seed=1, rank=4, compile_flex=True):
        super().__init__(L, H=H, D=D, device=device, dtype=dtype)
        dev = torch.device(device)
        g = torch.Generator(device=dev).manual_seed(seed)
        self.module = LearnableMask(torch.randn(L, L, generator=g, device=dev))
        self.blocked = ~torch.ones(L, L, dtype=torch.bool, device=dev).tril()  # causal part, built once

    def mask(self, dtype) -> Tensor:
        return self.module(self.L)[0].masked_fill(self.blocked, -math.inf).to(dtype)  # (L, L)

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask(q.dtype))

    def reference(self, q, k, v, module64):
        return attend(q, k, v, bias=module64(self.L), causal=True, backend="eager")


class MaskSdpaMath(MaskSdpa):
    name = "mask-sdpa-math"

    def forward(self, q, k, v):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([SDPBackend.MATH]):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask(q.dtype))


class EagerBias(MaskSdpa):
    name = "eager-bias"

    def __init__(self, L, *, H, D, device, dtype, seed=1, rank=4, compile_flex=True):
        super().__init__(L, H=H, D=D, device=device, dtype=dtype, seed=seed)
        self.blocked = None  # attend folds the causal rule in itself

    def forward(self, q, k, v):
        return attend(q, k, v, bias=self.module(self.L), causal=True, backend="eager", check=False)

    def kind(self):
        return "eager"


class AlibiSdpa(Variant):
    name = "alibi-sdpa"

    def __init__(self, L, *, H, D, device, dtype, seed=1, rank=4, compile_flex=True):
        super().__init__(L, H=H, D=D, device=device, dtype=dtype)
        self.alibi = ALiBi(H).to(device)
        blocked = ~torch.ones(L, L, dtype=torch.bool, device=device).tril()
        self.frozen = self.alibi(L).masked_fill(blocked, -math.inf).to(dtype)  # built once: a fixed mask

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.frozen)

    def reference(self, q, k, v, module64):
        return attend(q, k, v, bias=self.alibi(self.L).double(), causal=True, backend="eager")


class EagerGoat(GoatLanes):
    name = "eager-goat"

    def forward(self, q, k, v):
        kap, u = goat_tables(self.module, self.L)
        # Toeplitz expansion without an (L, L) index: rev[h, t] = κ_h(L − 1 − t), windows
        # rev[h, i' : i' + L] = κ_h(L − 1 − i' − j) for row i' = L − 1 − i, then flip the rows.
        toeplitz = kap.flip(-1).unfold(-1, self.L, 1).flip(-2)  # (H, L, L): κ_h(i − j)
        bias = toeplitz + u[:, None, :]  # + key-only sink
        dc = self.module.content_dim
        return attend(q[..., :dc], k[..., :dc], v, bias=bias, causal=True, backend="eager", check=False)

    def kind(self):
        return "eager"


_FLEX_COMPILED = None


def _flex_fn(compiled: bool):
    """flex_attention with the GOAT score_mod; compiled once per process (recompiles per shape)."""
    global _FLEX_COMPILED
    from torch.nn.attention.flex_attention import flex_attention

    def flex_goat(q, k, v, kap, u, block_mask):
        n = q.shape[-2]

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + kap[h, q_idx - kv_idx + n - 1] + u[h, kv_idx]

        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)

    if not compiled:
        return flex_goat
    if _FLEX_COMPILED is None:
        from torch import _dynamo

        _dynamo.config.recompile_limit = 64  # one graph per (L, dtype, grad mode)
        _dynamo.config.fail_on_recompile_limit_hit = True  # never fall back to eager silently
        _FLEX_COMPILED = torch.compile(flex_goat, dynamic=False)
    return _FLEX_COMPILED


class Flex(Variant):
    name = "flex"

    def __init__(self, L, *, H, D, device, dtype, seed=1, rank=4, compile_flex=True):
        super().__init__(L, H=H, D=D, device=device, dtype=dtype)
        from torch.nn.attention.flex_attention import create_block_mask

        self.module = _goat_prior(L, H, D, rank, seed, device)
        self.compiled = compile_flex
        self.fn = _flex_fn(compile_flex)
        self.block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None, L, L,
                                            device=self.device)  # built once, as a model would cache it

    def forward(self, q, k, v):
        kap, u = goat_tables(self.module, self.L)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
            tab = torch.float64 if q.dtype == torch.float64 else torch.float32  # tables stay ≥ fp32
            return self.fn(q, k, v, kap.to(tab), u.to(tab), self.block_mask)

    def reference(self, q, k, v, module64):
        return attend(q, k, v, bias=module64(self.L, self.L), causal=True, backend="eager")

    def kind(self):
        return "flex (compiled)" if self.compiled else "flex (eager, unfused)"


VARIANTS: dict[str, type[Variant]] = {
    c.name: c for c in (Sdpa, GoatLanes, MaskSdpa, EagerBias, Flex, EagerGoat, AlibiSdpa, MaskSdpaMath)
}


def _variant_cls(variant) -> type[Variant]:
    return VARIANTS[variant] if isinstance(variant, str) else variant


def build(variant, L: int, *, H: int, D: int, device, dtype, seed: int = 1, rank: int = 4,
          compile_flex: bool = True) -> Variant:
    """Instantiate a variant; prior parameters are float32 (mixed precision), float64 in a float64 run."""
    var = _variant_cls(variant)(L, H=H, D=D, device=device, dtype=dtype, seed=seed, rank=rank,
                                compile_flex=compile_flex)
    if dtype == torch.float64 and var.module is not None:
        var.module.double()
    return var


# --------------------------------------------------------------------------------------------- gate


def _inputs(B, H, L, D, seed, dtype=torch.float64) -> list[Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, L, D, generator=g, dtype=dtype) for _ in range(4)]  # q, k, v, upstream grad


def gate(variant, L: int, *, mode: str = "fwd+bwd", B: int = 1, H: int = 8, D: int = 64, device="cpu",
         dtype=torch.float32, seed: int = 0, rank: int = 4, compile_flex: bool = True,
         tol: float | None = None) -> dict:
    """Compare a variant with the float64 eager reference at length L: output, and in fwd+bwd the
    gradients of q, k, v and of every prior parameter. Never raises for the variant's own failures.

    The reference sees the run-dtype inputs and parameters cast to float64, so the gate measures the
    kernel, not the rounding of the inputs. Returns {L, mode, passed, status, tol, errors, scales, reason}.
    """
    cls = _variant_cls(variant)
    tol = TOLERANCES.get(dtype, 1e-4) if tol is None else tol
    res = {"L": L, "mode": mode, "dtype": str(dtype).replace("torch.", ""), "tol": tol, "passed": False,
           "status": "failed", "errors": {}, "scales": {}, "reason": ""}
    backward = mode == "fwd+bwd"
    q, k, v, do = [t.to(device, dtype) for t in _inputs(B, H, L, D, seed)]
    try:
        var = build(cls, L, H=H, D=D, device=device, dtype=dtype, seed=seed + 1, rank=rank,
                    compile_flex=compile_flex)
        params = var.params()
        if backward:
            q, k, v = [t.requires_grad_(True) for t in (q, k, v)]
            out = var(q, k, v)
            out.backward(do)
        else:
            with torch.no_grad():
                out = var(q, k, v)
    except Exception as e:  # the variant cannot run here: that is the data point
        res.update(status="error", reason=f"{type(e).__name__}: {e}".strip()[:2000])
        if _FLEX_COMPILED is not None:
            # a compile that raised leaves dynamo's cache for the flex wrapper in a state where later
            # calls ran ~5× slower (unfused) on CPU: start compiling afresh
            from torch import _dynamo

            _dynamo.reset()
        return res
    # float64 reference on the same (rounded) inputs and a float64 copy of the prior
    module64 = None if var.module is None else copy.deepcopy(var.module).double()
    ref_in = [t.detach().double().requires_grad_(backward) for t in (q, k, v)]
    ref = var.reference(*ref_in, module64)
    got = {"out": out.detach()}
    want = {"out": ref.detach()}
    if backward:
        ref.backward(do.double())
        for name, t, r in zip("qkv", (q, k, v), ref_in):
            got[f"d{name}"], want[f"d{name}"] = t.grad, r.grad
        params64 = dict(module64.named_parameters()) if module64 is not None else {}
        for name, p in params.items():
            got[f"d{name}"] = p.grad
            r = params64[name].grad
            want[f"d{name}"] = torch.zeros_like(params64[name]) if r is None else r
    problems = []
    # A parameter whose exact gradient is 0 (a shift of every key's score, e.g. the sink MLP's output bias:
    # softmax ignores it) only shows rounding noise summed over L² terms; judge it on the scale of the
    # prior's whole gradient instead of max(1, 0).
    pnames = [f"d{n}" for n in params] if backward else []
    group = max([float(want[n].abs().max()) for n in pnames if want[n].numel()] or [0.0])
    for name, w in want.items():
        g_ = got[name]
        if g_ is None:
            if bool((w != 0).any()):
                problems.append(f"no gradient reached {name[1:]}")
            res["errors"][name] = None
            continue
        g64 = g_.detach().double()
        if not bool(torch.isfinite(g64).all()):
            problems.append(f"{name} is not finite")
            res["errors"][name] = float("nan")
            continue
        err = float((g64 - w).abs().max()) if w.numel() else 0.0
        scale = float(w.abs().max()) if w.numel() else 0.0
        if name in pnames and scale <= 1e-9 * group:
            scale = group
            res.setdefault("invariant_params", []).append(name[1:])
        res["errors"][name], res["scales"][name] = err, scale
        if err > tol * max(1.0, scale):
            problems.append(f"{name}: max |err| {err:.3g} > {tol:g}·max(1, {scale:.3g})")
    res["worst"] = _worst(res)
    res["passed"] = not problems
    res["status"] = "passed" if not problems else "failed"
    res["reason"] = "; ".join(problems)
    return res


# --------------------------------------------------------------------------------------------- running


class Case:
    """Inputs and a built variant for one (variant, L, mode); `call()` is one timed unit of work."""

    def __init__(self, variant, L, mode, *, B, H, D, device, dtype, seed=0, rank=4, compile_flex=True):
        dev = torch.device(device)
        g = torch.Generator(device=dev).manual_seed(seed)
        shape = (B, H, L, D)
        self.backward = mode == "fwd+bwd"
        self.q, self.k, self.v, self.do = [torch.randn(shape, generator=g, device=dev, dtype=dtype) for _ in range(4)]
        if self.backward:
            for t in (self.q, self.k, self.v):
                t.requires_grad_(True)
        self.var = build(variant, L, H=H, D=D, device=dev, dtype=dtype, seed=seed + 1, rank=rank,
                         compile_flex=compile_flex)
        self.leaves = [self.q, self.k, self.v, *self.var.params().values()] if self.backward else []

    def call(self, check: bool = False):
        for t in self.leaves:
            t.grad = None
        if self.backward:
            out = self.var(self.q, self.k, self.v)
            out.backward(self.do)
        else:
            with torch.no_grad():
                out = self.var(self.q, self.k, self.v)
        if check:
            bad = [n for n, t in [("out", out), *[(f"grad{i}", t.grad) for i, t in enumerate(self.leaves)]]
                   if t is not None and not bool(torch.isfinite(t).all())]
            return bad
        return None


def detect_backend(fn, device) -> dict:
    """Run fn once under the profiler with a spy on F.scaled_dot_product_attention recording
    torch._fused_sdp_choice for each call; returns the choices and the attention-related op names."""
    from torch.profiler import ProfilerActivity, profile

    choices = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        try:
            choices.append(int(torch._fused_sdp_choice(*args, **kwargs)))
        except Exception as e:  # pragma: no cover - private API
            choices.append(f"{type(e).__name__}: {e}"[:200])
        return real(*args, **kwargs)

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.device(device).type == "cuda" else [])
    torch.nn.functional.scaled_dot_product_attention = spy
    try:
        with profile(activities=acts) as prof:
            result = fn()
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()
    finally:
        torch.nn.functional.scaled_dot_product_attention = real
    names = sorted({e.key for e in prof.key_averages() if any(s.lower() in e.key.lower() for s in PROFILER_KEYS)})
    found = []
    for n in names:  # each op counts once, for its most specific fragment
        b = next((b for frag, b in PROFILER_BACKENDS if frag in n), None)
        if b is not None:
            found.append(b)
    return {"sdp_choice": choices, "sdp_choice_names": [SDP_NAMES.get(c, str(c)) for c in choices],
            "profiler_ops": names[:40], "profiler_backends": sorted(set(found)), "result": result}


def _status_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak(fn, device) -> tuple[int, str]:
    """Peak extra bytes of fn() and the method used."""
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base, "cuda.max_memory_allocated"
    if _reset_hwm():
        base = _status_kb("VmRSS")
        fn()
        return (_status_kb("VmHWM") - base) * 1024, "VmHWM-after-clear_refs"
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024, "ru_maxrss-delta (lower bound)"


def _is_oom(e: BaseException) -> bool:
    msg = str(e)
    return isinstance(e, (torch.OutOfMemoryError, MemoryError)) or "can't allocate memory" in msg \
        or "out of memory" in msg.lower()


def measure_memory(variant, L, mode, *, B, H, D, device, dtype, seed=0, rank=4, compile_flex=True,
                   mem_limit_bytes: int | None = None) -> dict:
    """Peak memory of one call (first and steady state); meant to run in a fresh process."""
    dev = torch.device(device)
    out = {"status": "ok"}
    try:
        if dev.type == "cpu" and mem_limit_bytes:
            vm = (_status_kb("VmSize") or 0) * 1024
            limit = vm + mem_limit_bytes
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            out["rlimit_as_bytes"] = limit
        if dev.type == "cuda":
            before = torch.cuda.memory_allocated()
        else:
            before = (_status_kb("VmRSS") or 0) * 1024
        case = Case(variant, L, mode, B=B, H=H, D=D, device=dev, dtype=dtype, seed=seed, rank=rank,
                    compile_flex=compile_flex)
        if dev.type == "cuda":
            torch.cuda.synchronize()
            out["setup_bytes"] = torch.cuda.memory_allocated() - before
        else:
            out["setup_bytes"] = (_status_kb("VmRSS") or 0) * 1024 - before
        out["first_call_peak_bytes"], out["method"] = _peak(case.call, dev)
        steady = [_peak(case.call, dev)[0] for _ in range(2)]
        out["steady_peaks_bytes"] = steady
        out["peak_bytes"] = max(steady)
    except Exception as e:
        out["status"] = "oom" if _is_oom(e) else "error"
        out["reason"] = f"{type(e).__name__}: {e}"[:2000]
    return out


def probe_subprocess(variant, L, mode, *, B, H, D, device, dtype, seed, rank, compile_flex, threads,
                     mem_limit_bytes, timeout) -> dict:
    spec = dict(variant=variant, L=L, mode=mode, B=B, H=H, D=D, device=str(device),
                dtype=str(dtype).replace("torch.", ""), seed=seed, rank=rank, compile_flex=compile_flex,
                threads=threads, mem_limit_bytes=mem_limit_bytes, goat_recency=GOAT_RECENCY["value"])
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS=str(threads))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--probe", json.dumps(spec)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=str(Path(__file__).resolve().parent.parent))
    except subprocess.TimeoutExpired:
        return {"status": "error", "reason": f"memory probe timed out after {timeout} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(PROBE_TAG):
            r = json.loads(line[len(PROBE_TAG):])
            r["isolation"] = "subprocess"
            return r
    if p.returncode < 0:
        sig = -p.returncode
        return {"status": "oom" if sig == 9 else "error",
                "reason": f"probe killed by signal {sig}" + (" (likely the OOM killer)" if sig == 9 else "")}
    return {"status": "error", "reason": f"probe exited {p.returncode}: {p.stderr.strip()[-1500:]}"}


def _probe_main(spec_json: str) -> None:
    s = json.loads(spec_json)
    torch.set_num_threads(s["threads"])
    GOAT_RECENCY["value"] = s.get("goat_recency", "alibi")
    r = measure_memory(s["variant"], s["L"], s["mode"], B=s["B"], H=s["H"], D=s["D"], device=s["device"],
                       dtype=DTYPES[s["dtype"]], seed=s["seed"], rank=s["rank"], compile_flex=s["compile_flex"],
                       mem_limit_bytes=s["mem_limit_bytes"])
    print(PROBE_TAG + json.dumps(r), flush=True)


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_call(case: Case, device) -> float:
    if torch.device(device).type == "cuda":
        for t in case.leaves:
            t.grad = None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        case.call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0
    for t in case.leaves:
        t.grad = None
    t0 = time.perf_counter()
    case.call()
    return time.perf_counter() - t0


def _worst(g: dict) -> float:
    """Largest max|err| / max(1, max|ref|) over the gate's tensors (pass: ≤ tol)."""
    return max((e / max(1.0, g["scales"].get(n, 0.0)) for n, e in g["errors"].items() if e is not None),
               default=0.0)


def _stats(samples: list[float]) -> dict:
    s = sorted(samples)
    if len(s) >= 2:
        q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
    else:
        q1 = q3 = s[0]
    return {"median": statistics.median(s), "q1": q1, "q3": q3, "iqr": q3 - q1, "samples": samples}


# --------------------------------------------------------------------------------------------- machine


def machine_info(device) -> tuple[dict, dict]:
    cpu_model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, val = line.split(":", 1)
            if key in ("MemTotal", "MemAvailable"):
                mem[key] = int(val.split()[0]) * 1024
    except OSError:
        pass
    machine = {"host": socket.gethostname(), "platform": platform.platform(), "cpu_model": cpu_model,
               "cpu_count": os.cpu_count(),
               "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
               "mem_total_bytes": mem.get("MemTotal"), "mem_available_bytes": mem.get("MemAvailable"),
               "load_avg_at_start": os.getloadavg()}
    versions = {"torch": torch.__version__, "python": platform.python_version(), "cuda": torch.version.cuda}
    if torch.device(device).type == "cuda":
        props = torch.cuda.get_device_properties(device)
        machine.update(gpu_name=props.name, gpu_capability=f"{props.major}.{props.minor}",
                       gpu_memory_bytes=props.total_memory)
        versions["cudnn"] = torch.backends.cudnn.version()
    try:
        import triton

        versions["triton"] = triton.__version__
    except Exception:
        versions["triton"] = None
    return machine, versions


def _write(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------- main


def _lengths(args, device) -> list[int]:
    if args.lengths:
        return [int(x) for part in args.lengths for x in str(part).replace(",", " ").split()]
    if args.quick:
        return list(QUICK_LENGTHS)
    if torch.device(device).type == "cuda":
        out, n = [], 1024
        while n <= args.max_len:
            out.append(n)
            n *= 2
        return out
    return list(CPU_LENGTHS)


def run(args) -> dict:
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype] if args.dtype else (torch.bfloat16 if device.type == "cuda" else torch.float32)
    cuda = device.type == "cuda"
    torch.set_num_threads(args.threads)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}; choose from {sorted(VARIANTS)}.")
    if "sdpa" not in variants:
        variants.insert(0, "sdpa")  # the denominator of every ratio
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if any(m not in MODES for m in modes):
        raise SystemExit(f"unknown mode in {modes}; choose from {MODES}.")
    lengths = _lengths(args, device)
    repeats = args.repeats or (2 if args.quick else (10 if cuda else 5))
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    machine, versions = machine_info(device)
    mem_limit = int(args.mem_limit_gb * 2**30) if args.mem_limit_gb else \
        int(0.8 * (machine.get("mem_available_bytes") or 8 * 2**30))
    tag = args.tag or machine["host"]
    out_path = Path(args.out) if args.out else \
        Path(__file__).parent / "results" / f"attention-{device.type}-{tag}.json"
    B, H, D = args.batch, args.heads, args.head_dim
    kw = dict(B=B, H=H, D=D, device=device, dtype=dtype, seed=args.seed, rank=args.rank,
              compile_flex=not args.no_flex_compile)
    result = {
        "benchmark": "attention", "schema": SCHEMA, "tag": tag, "quick": args.quick,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "argv": sys.argv[1:],
        "machine": machine, "versions": versions,
        "settings": {"device": str(device), "dtype": str(dtype).replace("torch.", ""), "batch": B, "heads": H,
                     "head_dim": D, "goat_rank": args.rank, "goat_content_dim": D - (2 * args.rank + 1),
                     "lengths": lengths, "modes": modes, "variants": variants, "repeats": repeats,
                     "warmup": warmup, "threads": args.threads, "gate_len": args.gate_len,
                     "gate_tol": args.tol if args.tol is not None else TOLERANCES.get(dtype),
                     "memory": args.memory, "mem_limit_bytes": mem_limit if not cuda else None,
                     "max_call_s": args.max_call_s, "goat_recency": GOAT_RECENCY["value"],
                     "flex_compiled": not args.no_flex_compile, "seed": args.seed},
        "notes": NOTES, "results": [], "ratios": {m: {} for m in modes},
    }
    print(f"attention benchmark: {device} {dtype} B={B} H={H} D={D} L={lengths} modes={modes} "
          f"repeats={repeats} → {out_path}", flush=True)
    stopped: dict[tuple[str, str], str] = {}
    gates: dict[tuple[str, int, str], dict] = {}

    for L in lengths:
        for mode in modes:
            recs: dict[str, dict] = {}
            cases: dict[str, Case] = {}
            for v in variants:
                rec = {"variant": v, "L": L, "mode": mode, "status": "ok", "reason": ""}
                result["results"].append(rec)
                if (v, mode) in stopped:
                    rec.update(status="skipped", reason=stopped[(v, mode)])
                    continue
                gl = min(L, args.gate_len)
                if (v, gl, mode) not in gates:
                    gates[(v, gl, mode)] = gate(v, gl, mode=mode, tol=args.tol, **kw)
                g = rec["gate"] = gates[(v, gl, mode)]
                if not g["passed"]:
                    rec.update(status="error" if g["status"] == "error" else "gate-failed",
                               reason=f"gate at L={gl}: {g['reason']}")
                    continue
                if args.memory != "off":
                    if args.memory == "subprocess":
                        if cuda:
                            torch.cuda.empty_cache()
                        m = probe_subprocess(v, L, mode, threads=args.threads, mem_limit_bytes=mem_limit,
                                             timeout=args.probe_timeout, **kw)
                    else:
                        m = measure_memory(v, L, mode, **kw)
                        m["isolation"] = "in-process"
                        gc.collect()
                        if cuda:
                            torch.cuda.empty_cache()
                    rec["memory"] = m
                    if m["status"] == "oom":
                        rec.update(status="oom", reason=m.get("reason", ""))
                        stopped[(v, mode)] = f"OOM at L={L}"
                        continue
                try:
                    case = Case(v, L, mode, **kw)
                    _sync(device)
                    t0 = time.perf_counter()
                    case.call()  # the first call: compiles flex (outside the profiler), builds thread pools
                    _sync(device)
                    first = time.perf_counter() - t0
                    info = detect_backend(lambda c=case: c.call(check=True), device)
                except Exception as e:
                    rec.update(status="oom" if _is_oom(e) else "error", reason=f"{type(e).__name__}: {e}"[:2000])
                    if rec["status"] == "oom":
                        stopped[(v, mode)] = f"OOM at L={L}"
                    case = None
                    gc.collect()
                    if cuda:
                        torch.cuda.empty_cache()
                    continue
                bad = info.pop("result")
                info["kind"] = case.var.kind()
                if info["kind"] == "flex (compiled)" and any("softmax" in n for n in info["profiler_ops"]):
                    info["warning"] = ("softmax ops in the profile of compiled flex: the unfused (materialising) "
                                       "path may have run")
                rec["backend"], rec["first_call_s"] = info, first
                if bad:
                    rec.update(status="not-finite", reason=f"non-finite {bad} at L={L}")
                    continue
                if first > args.max_call_s:
                    rec.update(status="too-slow",
                               reason=f"one call took {first:.1f} s > --max-call-s {args.max_call_s}")
                    stopped[(v, mode)] = f"a call at L={L} took {first:.1f} s"
                    continue
                recs[v], cases[v] = rec, case
            # warm-up, then interleaved repeats; a variant that fails here drops out, the others go on
            samples = {v: [] for v in cases}

            def _drop(v, e):
                recs[v].update(status="oom" if _is_oom(e) else "error",
                               reason=f"timing: {type(e).__name__}: {e}"[:2000])
                if recs[v]["status"] == "oom":
                    stopped[(v, mode)] = f"OOM at L={L}"
                samples.pop(v, None)
                cases.pop(v, None)
                gc.collect()
                if cuda:
                    torch.cuda.empty_cache()

            for v in list(cases):
                try:
                    for _ in range(max(0, warmup - 2) if recs[v]["first_call_s"] < 1.0 else 0):
                        cases[v].call()
                except Exception as e:
                    _drop(v, e)
            for r in range(repeats):
                names = list(cases)
                for v in names[r % max(1, len(names)):] + names[:r % max(1, len(names))]:
                    try:
                        samples[v].append(time_call(cases[v], device))
                    except Exception as e:
                        _drop(v, e)
            for v, s in samples.items():
                recs[v]["time_s"] = _stats(s)
            if "sdpa" in samples:
                base = samples["sdpa"]
                for v, s in samples.items():
                    per = [a / b for a, b in zip(s, base)]
                    ratio = {"median_ratio": statistics.median(s) / statistics.median(base),
                             "paired_median": statistics.median(per), "per_repeat": per}
                    recs[v]["ratio_vs_sdpa"] = ratio
                    result["ratios"][mode].setdefault(v, {})[str(L)] = {
                        k: ratio[k] for k in ("median_ratio", "paired_median")}
            for rec in result["results"]:
                if rec["L"] != L or rec["mode"] != mode:
                    continue
                t = rec.get("time_s", {}).get("median")
                mem = rec.get("memory", {}).get("peak_bytes")
                be = rec.get("backend", {})
                kind = ",".join(be.get("profiler_backends") or []) or be.get("kind", "")
                ratio = rec.get("ratio_vs_sdpa", {}).get("median_ratio")
                if rec["status"] == "ok":
                    print(f"  {rec['variant']:15s} L={L:6d} {mode:7s} {t * 1e3:10.2f} ms"
                          + (f"  ×{ratio:6.2f}" if ratio else "")
                          + (f"  peak {mem / 2**20:8.1f} MiB" if mem is not None else "")
                          + f"  [{kind}]  gate {_worst(rec['gate']):.1e}",
                          flush=True)
                else:
                    print(f"  {rec['variant']:15s} L={L:6d} {mode:7s} {rec['status']}: {rec['reason'][:200]}",
                          flush=True)
            del cases
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
            machine["load_avg_at_end"] = os.getloadavg()
            result["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            _write(out_path, result)
    print(f"wrote {out_path}", flush=True)
    return result


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                    help="run dtype (default float32 on CPU, bfloat16 on CUDA)")
    ap.add_argument("-B", "--batch", type=int, default=1)
    ap.add_argument("-H", "--heads", type=int, default=8)
    ap.add_argument("-D", "--head-dim", type=int, default=64)
    ap.add_argument("--rank", type=int, default=4, help="GOAT spectral rank R (2R + 1 lanes)")
    ap.add_argument("--lengths", nargs="+", default=None,
                    help="sequence lengths (default CPU 256..8192; CUDA 1024 doubling to --max-len)")
    ap.add_argument("--max-len", type=int, default=65536, help="largest default length on CUDA")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                    help=f"comma list from {sorted(VARIANTS)} (sdpa is always added)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--repeats", type=int, default=None, help="timed samples (default CPU 5, CUDA 10)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed calls before the samples, incl. the profiled and the first timed-alone one "
                         "(default 3; 2 once a call takes over 1 s)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads")
    ap.add_argument("--gate-len", type=int, default=256, help="correctness gate at min(L, this)")
    ap.add_argument("--tol", type=float, default=None, help="override the gate tolerance of the dtype")
    ap.add_argument("--memory", choices=("subprocess", "inprocess", "off"), default="subprocess",
                    help="subprocess: a fresh process per config (default); inprocess: exact on CUDA and "
                         "much cheaper there; inaccurate on CPU")
    ap.add_argument("--mem-limit-gb", type=float, default=None,
                    help="CPU memory probe budget (RLIMIT_AS over the baseline); default 80%% of MemAvailable")
    ap.add_argument("--probe-timeout", type=int, default=1800)
    ap.add_argument("--max-call-s", type=float, default=60.0,
                    help="do not time, nor try larger L, once one call takes longer than this")
    ap.add_argument("--goat-recency", choices=("alibi", "zero"), default="alibi",
                    help="GOAT recency slope s_h: 'alibi' (the seeded init) or 'zero'. With 'alibi' the sink "
                         "lane carries u(j) ≈ s·j, which bf16/fp16 cannot hold to the gate's tolerance (the "
                         "cost is the same either way)")
    ap.add_argument("--no-flex-compile", action="store_true", help="run flex eagerly (materialises scores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: L {QUICK_LENGTHS}, 2 repeats, no warm-up beyond the first and profiled calls")
    ap.add_argument("--tag", default=None, help="name in the default output file (default: host name)")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/attention-<device>-<tag>.json)")
    ap.add_argument("--probe", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probe:
        _probe_main(args.probe)
        return
    GOAT_RECENCY["value"] = args.goat_recency
    run(args)


if __name__ == "__main__":
    main()
