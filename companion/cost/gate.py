"""The float64 correctness gate: a variant is timed only once it computes the right function.

Before timing a (variant, L, mode), its output and, in fwd+bwd, the gradients of q, k, v and of the
prior's parameters are compared with a float64 eager reference (`attend(..., backend="eager")` with
the prior materialised by the package's own code, `Variant.reference`) at a small length (the sweep
uses min(L, gate_len)). A variant that fails is not timed. Pass: max|got − ref| ≤ tol · max(1, max|ref|)
for every tensor, tol from the run dtype (`TOLERANCES`).
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor

from companion.cost.flex import reset_flex_compile
from companion.cost.variants import _variant_cls, build

# Gate tolerance per run dtype: pass if max|got − ref| ≤ tol · max(1, max|ref|) for every tensor.
TOLERANCES = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}


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
        if getattr(var, "kernel_attempts", None):  # flex on CUDA: the Triton tiles tried before the call
            res["kernel_attempts"] = var.kernel_attempts
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
        reset_flex_compile()
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


def _worst(g: dict) -> float:
    """Largest max|err| / max(1, max|ref|) over the gate's tensors (pass: ≤ tol)."""
    return max((e / max(1.0, g["scales"].get(n, 0.0)) for n, e in g["errors"].items() if e is not None),
               default=0.0)
