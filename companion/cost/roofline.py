"""A roofline for attention: the time no kernel can beat on a given machine.

A call that performs F floating-point operations and must move at least Q bytes to and from main
memory cannot finish faster than max(F / P, Q / W), with P the machine's peak arithmetic rate and W
its memory bandwidth (Williams, Waterman and Patterson 2009). Here P and W are measured, not taken
from a data sheet: P as the best rate of a large float32 matrix product with the threads the
benchmark used, W as the best rate of a large tensor copy (read + write).

Operation counts for causal attention over B × H heads of length L and head dim D (one multiply-add
= 2 operations; the causal half of the score matrix only, L(L + 1)/2 entries):
- forward: Q Kᵀ and P V, 2 × 2·D per visible entry, so F_fwd = 4·D·B·H·L(L + 1)/2;
- backward: the scores recomputed, dP = dO Vᵀ, dV = Pᵀ dO, dQ = dS K, dK = dSᵀ Q: 5 products, F_bwd = 2.5·F_fwd.
Bytes: a fused kernel needs only q, k, v and the output (and their gradients in the backward) in
elements of `itemsize` bytes; a materialised (L, L) bias adds its L² entries (read in the forward,
its gradient written in the backward). Softmax exponentials and the like are not counted: the bound
is a floor, not a model.
"""

from __future__ import annotations

import time

import torch

__all__ = ["measure_peak", "attention_flops", "attention_bytes", "bound_s"]


def _best_rate(fn, work: float, repeats: int) -> float:
    fn()  # warm-up: allocations, thread pools
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return work / best


def measure_peak(*, threads: int | None = None, n: int = 1536, copy_mib: int = 256, repeats: int = 5) -> dict:
    """Measured peak float32 rate (FLOP/s, n×n matmul) and memory bandwidth (B/s, copy of `copy_mib`
    MiB, counting the read and the write) on the CPU, with `threads` threads (default: torch's)."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        out = torch.empty(n, n)
        flops = _best_rate(lambda: torch.mm(a, b, out=out), 2.0 * n**3, repeats)
        src = torch.ones(copy_mib * 2**20 // 4)
        dst = torch.empty_like(src)
        bandwidth = _best_rate(lambda: dst.copy_(src), 2.0 * src.numel() * 4, repeats)
    finally:
        torch.set_num_threads(before)
    return {"peak_flops": flops, "bandwidth_bytes_s": bandwidth, "threads": threads or before,
            "matmul_n": n, "copy_mib": copy_mib}


def attention_flops(L: int, *, B: int, H: int, D: int, mode: str, causal: bool = True) -> float:
    """Floating-point operations of attention (module docstring); mode "fwd" or "fwd+bwd"."""
    entries = L * (L + 1) / 2 if causal else float(L * L)
    fwd = 4.0 * D * B * H * entries
    return fwd if mode == "fwd" else 3.5 * fwd


def attention_bytes(L: int, *, B: int, H: int, D: int, mode: str, itemsize: int = 4, bias_heads: int = 0) -> float:
    """Least bytes a call must move: q, k, v, out (and dout, dq, dk, dv in fwd+bwd), plus an (L, L)
    bias per `bias_heads` (0: none) read in the forward and its gradient written in the backward."""
    tensors = 4 if mode == "fwd" else 8
    bias = bias_heads * L * L * (1 if mode == "fwd" else 2)
    return float(itemsize * (tensors * B * H * L * D + bias))


def bound_s(flops: float, nbytes: float, peak: dict) -> float:
    """max(F / P, Q / W): the roofline time floor of a call."""
    return max(flops / peak["peak_flops"], nbytes / peak["bandwidth_bytes_s"])
