"""Flush-to-zero where a benchmark computes: the calling thread and every thread of torch's OpenMP pool.

A float32 result below the smallest normal number (`torch.finfo(torch.float32).tiny`, 2⁻¹²⁶) is
subnormal; some CPUs compute on subnormals several times more slowly than on normal numbers, others
(AMD EPYC, where the book is measured) barely notice. With flush-to-zero such results become 0 and
such inputs count as 0 (the FTZ and DAZ bits of x86's MXCSR).

`torch.set_flush_denormal(on)` sets those bits on the calling thread only. Threads of torch's intra-op
pool that already exist keep theirs; a thread created later copies its creator's. `set_flush_denormal`
here therefore also runs torch's switch inside one parallel region of the OpenMP runtime torch loaded
(`GOMP_parallel`, which GNU libgomp, LLVM's libomp and Intel's libiomp5 all export), on as many threads
as `torch.get_num_threads()`: the same pool torch's kernels, MKL and oneDNN use from this thread.
`flushed_share()` measures the result instead of trusting it: the share of a parallel product's
subnormal results that came out as 0 (1.0: every thread flushes; 0.0: none; between: some threads).
"""

from __future__ import annotations

import ctypes
from contextlib import contextmanager
from pathlib import Path

import torch

__all__ = ["set_flush_denormal", "flushed_share", "flush_denormal", "openmp_runtime"]

_RUNTIMES = ("libgomp", "libiomp5", "libomp")
_BODY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def openmp_runtime() -> str | None:
    """Path of the OpenMP runtime torch computes with: of the runtimes loaded in this process (libgomp,
    libiomp5, libomp in /proc/self/maps), the one inside torch's own package (`torch/lib`, or the
    wheel's `torch.libs`), else the first; None where there is none or no /proc. Other packages bring
    their own copies (scikit-learn's `scikit_learn.libs/libgomp-….so`, loaded first when it is imported
    first), whose thread pools are not torch's."""
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return None
    found = list(dict.fromkeys(line.split()[-1] for line in lines
                               if line.split() and Path(line.split()[-1]).name.startswith(_RUNTIMES)))
    home = Path(torch.__file__).resolve().parent
    own = [p for p in found if Path(p).resolve().parent in (home / "lib", home.parent / "torch.libs")]
    return (own or found or [None])[0]


def _on_every_pool_thread(fn) -> str | None:
    """Run fn() once on each of `torch.get_num_threads()` threads of this thread's OpenMP pool (the
    calling thread included); None on success, else why not (then fn has run on no thread)."""
    path = openmp_runtime()
    if path is None:
        return "no OpenMP runtime loaded"
    try:
        parallel = ctypes.CDLL(path).GOMP_parallel  # CDLL releases the GIL; each thread's callback takes it
    except (OSError, AttributeError) as err:
        return f"{Path(path).name} has no GOMP_parallel ({err})"
    parallel.argtypes = [_BODY, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    parallel.restype = None
    body = _BODY(lambda _: fn())
    parallel(body, None, max(1, torch.get_num_threads()), 0)
    return None


def flushed_share(per_thread: int = 1 << 17) -> float:
    """The share of a parallel elementwise product's subnormal results that are 0 on this thread's
    pool: 2⁻¹²⁰ · 2⁻¹⁰ is 2⁻¹³⁰, subnormal in float32, so it stays 2⁻¹³⁰ on a thread without
    flush-to-zero and becomes 0 on a thread with it. `per_thread` elements per torch thread, above
    torch's grain size, so that every thread gets a share of the work."""
    n = per_thread * max(1, torch.get_num_threads())
    out = torch.full((n,), 2.0 ** -120, dtype=torch.float32) * (2.0 ** -10)
    return float((out == 0).sum()) / n


def set_flush_denormal(on: bool) -> dict:
    """Turn flush-to-zero on or off on the calling thread and every thread of its OpenMP pool;
    returns what was done, for a result's JSON: {"on": requested, "supported": whether this CPU has
    the switch (`torch.set_flush_denormal`'s answer), "pool": "every thread" or why only the calling
    thread, "threads": torch's thread count, "flushed_share": `flushed_share()` measured afterwards}."""
    supported = bool(torch.set_flush_denormal(on))
    why = _on_every_pool_thread(lambda: torch.set_flush_denormal(on)) if supported else "not supported by this CPU"
    pool = "every thread" if why is None else f"calling thread only: {why}"
    return {"on": bool(on), "supported": supported, "pool": pool, "threads": torch.get_num_threads(),
            "flushed_share": flushed_share()}


@contextmanager
def flush_denormal(on: bool = True):
    """Within the block, flush-to-zero `on` (or off) on every thread (`set_flush_denormal`; the block
    gets its record); afterwards torch's default, off, on every thread again."""
    try:
        yield set_flush_denormal(on)
    finally:
        set_flush_denormal(False)
