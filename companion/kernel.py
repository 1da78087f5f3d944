"""Attention over small maps on one CPU thread: a C kernel for the `ci` models' shapes.

The `ci` models attend over 12 to 64 positions with heads of 8 to 24 channels, thousands of maps per
step. There PyTorch's CPU paths spend their time around the arithmetic, not in it: SDPA's fused
kernel and its MATH fallback (which every learnable mask takes on the CPU, since no fused CPU kernel
differentiates a mask) run such a map at 1 to 15 GFLOP/s, the batched products pay a call per map,
the softmax over 12 keys takes 19 ns an element, and the heads are copied out of the projections'
layout and back (benchmarks/utilisation.py measures each family). `kernel.c` computes a whole map
(scores, bias, causal rule, softmax, weighted values) and its gradients in one pass over buffers that
stay in the first-level cache, reading q, k, v in the projections' own layout and writing the
output in the layout the output projection reads.

Numerics. Each map is computed alone by loops whose order of operations the source fixes (module
docstring of kernel.c): a map's result does not depend on the batch around it, so a seed-stacked
member computes exactly what its run alone computes (tests/test_kernel.py, tests/test_batched.py).
It is not SDPA's rounding: the kernel is part of the numerics version (`companion.identity.NUMERICS`),
and the records state it (`companion.host.describe`: "kernel"), so records made with and without it
are compared by verdict, not bit for bit. The exponential is Cephes' polynomial (about 1 ulp).

Build. The first use compiles kernel.c with the C compiler (`CC`, else cc, gcc, clang) into a
shared library cached under `$COMPANION_KERNEL_CACHE` (default `~/.cache/companion/kernel`), named by
a hash of the source, the compiler's version and the flags, so a changed source or compiler builds
anew and two processes never read a half-written library (each writes its own file, then renames
it). It costs about a second, once per machine. Without a compiler, or with `COMPANION_KERNEL=off`,
`available()` is False and attention takes PyTorch's paths (a `KernelWarning` says so once).

When it is used (`applies`): CPU float32 tensors, gradients or not, no weights requested, one torch
thread (the kernel is single-threaded; with more threads SDPA's parallel kernels are faster), and at
most `MAX_POSITIONS` keys (a map's buffers stay in the cache). A GPU never uses it.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path

import torch
from torch import Tensor

from companion.notice import CompanionWarning

__all__ = ["available", "applies", "small_attention", "status", "KernelWarning", "MAX_POSITIONS", "SOURCE"]

SOURCE = Path(__file__).with_name("kernel.c")
MAX_POSITIONS = 256  # keys per map: J·I floats of scores, 256 KiB at 256, must stay near the cache
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared", "-std=c11", "-Werror=implicit-function-declaration")


class KernelWarning(CompanionWarning):
    """The small-map kernel could not be built; attention runs on PyTorch's paths."""


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cache_dir() -> Path:
    root = os.environ.get("COMPANION_KERNEL_CACHE")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "companion" / "kernel"


def _build(cc: str, version: str) -> Path:
    source = SOURCE.read_bytes()
    tag = hashlib.sha256(source + version.encode() + " ".join(FLAGS).encode()).hexdigest()[:16]
    out = _cache_dir() / f"small_attention-{tag}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        cmd = [cc, *FLAGS, str(SOURCE), "-o", tmp, "-lm"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise OSError(f"{' '.join(cmd)} failed: {res.stderr.strip()[:500]}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


_I64, _F32P = ctypes.c_int64, ctypes.c_void_p


@lru_cache(maxsize=1)
def _library() -> tuple[ctypes.CDLL | None, str]:
    """(the loaded library, a description of it) or (None, why not)."""
    if os.environ.get("COMPANION_KERNEL", "").lower() in ("off", "0", "no", "false"):
        return None, "off (COMPANION_KERNEL)"
    cc = _compiler()
    if cc is None:
        return None, "off (no C compiler: set CC, or install gcc)"
    version = _version(cc)
    try:
        lib = ctypes.CDLL(str(_build(cc, version)))
    except OSError as err:
        return None, f"off (the build failed: {err})"
    strided = [_F32P, _I64, _I64, _I64, _I64]
    lib.small_attention_forward.argtypes = [*strided * 3, _F32P, _I64, _I64, *[_I64] * 7, ctypes.c_int, _I64,
                                            ctypes.c_float, _F32P, _F32P]
    lib.small_attention_backward.argtypes = [*strided * 3, _F32P, *strided, *[_I64] * 7, ctypes.c_int, _I64, ctypes.c_float,
                                             _F32P, _F32P, _F32P, _F32P, _I64, _I64]
    lib.small_attention_forward.restype = lib.small_attention_backward.restype = ctypes.c_int
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return lib, f"kernel.c {digest}, {version}, {' '.join(FLAGS[:3])}"


def status() -> str:
    """What attention over small CPU maps runs on, for a record's host: "kernel.c <digest>, <compiler>,
    <flags>" or "off (why)"."""
    return _library()[1]


_warned = False


def available() -> bool:
    """Whether the kernel is built and loaded (warns once, with the reason, when it is not)."""
    global _warned
    lib, why = _library()
    if lib is None and not _warned and not why.startswith("off (COMPANION_KERNEL"):
        _warned = True
        warnings.warn(f"the small-map attention kernel is {why}; attention uses PyTorch's CPU paths, and "
                      "runs made here differ in the last bits from records made with the kernel.",
                      KernelWarning, stacklevel=3)
    return lib is not None


def applies(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None) -> bool:
    """Whether `small_attention` serves these inputs (module docstring, "When it is used")."""
    return (q.device.type == "cpu" and q.dtype == torch.float32 and k.dtype == v.dtype == torch.float32
            and (bias is None or bias.dtype == torch.float32) and q.dim() == k.dim() == v.dim() == 4
            and 0 < k.shape[-2] <= MAX_POSITIONS and q.shape[-2] > 0 and torch.get_num_threads() == 1
            and available())


def _padded(n: int) -> int:
    """n rounded up to whole vectors of 8 floats (kernel.c's `W`)."""
    return (n + 7) // 8 * 8


def _strides(t: Tensor) -> list:
    return [t.data_ptr(), *t.stride()]


class _SmallAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bias_t, members, causal, q_start, scale):
        lib = _library()[0]
        R, H, I, Dk = q.shape
        J, Dv = k.shape[-2], v.shape[-1]
        out = torch.empty(R, I, H, Dv)
        need_grad = any(ctx.needs_input_grad[:4])  # (grad mode is off inside forward)
        p = torch.empty(R, H, J, _padded(I)) if need_grad else None
        if bias_t is not None:  # (Mb, 1 or H, J, I): a head stride of 0 when the heads share it
            mb, bs0, bs1 = bias_t.shape[0], bias_t.stride(0), bias_t.stride(1) if bias_t.shape[1] > 1 else 0
            bptr = bias_t.data_ptr()
        else:
            mb, bs0, bs1, bptr = members or 1, 0, 0, None
        rc = lib.small_attention_forward(*_strides(q), *_strides(k), *_strides(v), bptr, bs0, bs1, R, H, I, J, Dk, Dv,
                                         mb, int(causal), q_start, scale, out.data_ptr(),
                                         None if p is None else p.data_ptr())
        if rc:
            raise MemoryError("the small-map attention kernel could not allocate its buffers.")
        ctx.save_for_backward(q, k, v, p, bias_t)
        ctx.args = (mb, causal, q_start, scale)
        return out.transpose(1, 2)  # (R, H, I, Dv), laid out (R, I, H, Dv)

    @staticmethod
    def backward(ctx, g):
        lib = _library()[0]
        q, k, v, p, bias_t = ctx.saved_tensors
        mb, causal, q_start, scale = ctx.args
        R, H, I, Dk = q.shape
        J, Dv = k.shape[-2], v.shape[-1]
        dq, dk, dv = torch.empty(R, I, H, Dk), torch.empty(R, J, H, Dk), torch.empty(R, J, H, Dv)
        db = None
        if bias_t is not None and ctx.needs_input_grad[3]:
            db = torch.zeros(bias_t.shape)
        g = g.float()
        rc = lib.small_attention_backward(*_strides(q), *_strides(k), *_strides(v), p.data_ptr(), *_strides(g),
                                          R, H, I, J, Dk, Dv, mb, int(causal), q_start, scale, dq.data_ptr(), dk.data_ptr(),
                                          dv.data_ptr(), None if db is None else db.data_ptr(),
                                          0 if db is None else db.stride(0),
                                          0 if db is None or db.shape[1] == 1 else db.stride(1))
        if rc:
            raise MemoryError("the small-map attention kernel could not allocate its buffers.")
        return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2), db, None, None, None, None


def small_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None, *, members: int = 0,
                    causal: bool = False, q_start: int = 0, scale: float) -> Tensor:
    """softmax(scale·q kᵀ + bias) v over each map, with gradients: out (R, H, I, Dv), laid out (R, I, H, Dv).

    q (R, H, I, Dk), k (R, H, J, Dk), v (R, H, J, Dv), any strides. `bias`: None; (Hb, I, J) or
    (1, Hb, I, J), one for every sample; or, with `members` = M > 0, (M, Hb, I, J), member m's bias for
    samples m·R/M … (m+1)·R/M − 1 (a seed-stacked model's member-major batch); Hb is 1 (shared by the
    heads) or H. `causal`: query i, at position q_start + i, reads keys j ≤ q_start + i. Call it only
    where `applies` says so.
    """
    bias_t = None
    if bias is not None:
        if bias.dim() == 3:
            bias = bias[None]
        if bias.dim() != 4 or bias.shape[-2:] != (q.shape[-2], k.shape[-2]) or bias.shape[1] not in (1, q.shape[1]):
            raise ValueError(f"bias has shape {tuple(bias.shape)}; small_attention takes (members or 1, heads or 1, "
                             f"{q.shape[-2]}, {k.shape[-2]}).")
        if bias.shape[0] not in (1, members or 1) or (members and q.shape[0] % members):
            raise ValueError(f"bias has {bias.shape[0]} members for {members} stacked members and a batch of "
                             f"{q.shape[0]}; pass one bias per member (or one for all) and a batch that splits.")
        # transposed (key-major) and padded to whole vectors of queries, as kernel.c reads it
        bias_t = torch.nn.functional.pad(bias.transpose(-1, -2), (0, _padded(q.shape[-2]) - q.shape[-2])).contiguous()
    return _SmallAttention.apply(q, k, v, bias_t, members, bool(causal), int(q_start), float(scale))
