"""Measuring one (variant, L, mode): the timed call, its SDPA backend, its time and its peak memory.

- modes: "fwd" is inference (`torch.no_grad`, nothing requires grad, so a frozen mask may take a
  fused kernel); "fwd+bwd" is a training step's attention: forward, then backward of a fixed random
  upstream gradient, grads reset to None before each call (`Case.call`);
- backend: `detect_backend` runs one call under the profiler with a spy recording
  `torch._fused_sdp_choice` at each SDPA call, and lists the attention ops that ran;
- timing: `time_call`, CPU `time.perf_counter`, CUDA events + synchronize; `_stats` gives median and IQR;
- memory: CUDA: max_memory_allocated minus memory_allocated before the call. CPU: peak RSS over the
  RSS before the call, the peak reset by writing 5 to /proc/self/clear_refs (VmHWM), with glibc's
  mmap threshold fixed at 64 KiB so that freed blocks leave the RSS (fallback: ru_maxrss delta, a
  lower bound). The first call (compile, thread pools, one-time buffers) is reported apart from the
  steady-state calls. `memory_in_subprocess` runs `measure_memory` in a fresh process
  (`python -m companion.cost.worker`), which doubles as the OOM guard on CPU: it runs under
  RLIMIT_AS, so a config that does not fit fails there, not in the sweep's process.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F

from companion.cost.variants import GOAT_RECENCY, build

MODES = ("fwd", "fwd+bwd")
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
REPO_ROOT = Path(__file__).resolve().parents[2]  # holds the `companion` package the memory worker imports


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


def _free(device) -> None:
    """Return what the last case held: garbage-collect, and empty CUDA's cache."""
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


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


def memory_in_subprocess(variant, L, mode, *, B, H, D, device, dtype, seed, rank, compile_flex, threads,
                     mem_limit_bytes, timeout, flush_denormal: bool = True) -> dict:
    """`measure_memory` in a fresh `python -m companion.cost.worker` process (any working directory),
    with flush-to-zero on its every thread as `flush_denormal` says."""
    spec = dict(variant=variant, L=L, mode=mode, B=B, H=H, D=D, device=str(device),
                dtype=str(dtype).replace("torch.", ""), seed=seed, rank=rank, compile_flex=compile_flex,
                threads=threads, mem_limit_bytes=mem_limit_bytes, goat_recency=GOAT_RECENCY["value"],
                flush_denormal=flush_denormal)
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS=str(threads), PYTHONPATH=path)
    cmd = [sys.executable, "-m", "companion.cost.worker", json.dumps(spec)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(REPO_ROOT))
    except subprocess.TimeoutExpired:
        return {"status": "error", "reason": f"memory worker timed out after {timeout} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(PROBE_TAG):
            r = json.loads(line[len(PROBE_TAG):])
            r["isolation"] = "subprocess"
            return r
    if p.returncode < 0:
        sig = -p.returncode
        return {"status": "oom" if sig == 9 else "error",
                "reason": f"memory worker killed by signal {sig}" + (" (likely the OOM killer)" if sig == 9 else "")}
    return {"status": "error", "reason": f"memory worker exited {p.returncode}: {p.stderr.strip()[-1500:]}"}


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_call(case: Case, device) -> float:
    """Seconds of one `case.call()` (grads reset first, outside the timing)."""
    for t in case.leaves:
        t.grad = None
    if torch.device(device).type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        case.call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0
    t0 = time.perf_counter()
    case.call()
    return time.perf_counter() - t0


def _stats(samples: list[float]) -> dict:
    s = sorted(samples)
    if len(s) >= 2:
        q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
    else:
        q1 = q3 = s[0]
    return {"median": statistics.median(s), "q1": q1, "q3": q3, "iqr": q3 - q1, "samples": samples}


@contextmanager
def native_output_silenced():
    """Within the block, what native code writes to file descriptors 1 and 2 (the profiler's log
    lines) goes to /dev/null; Python's own sys.stdout and sys.stderr objects are flushed first."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)
