"""The host a run was computed on, stated exactly enough to say when two runs must agree to the bit.

A float32 run is a long chain of sums whose order the kernels choose, and the kernels are chosen by
the processor, its instruction set, the BLAS and its reproducibility mode, the torch build and the
threads. On one host the same config gives the same bits every time (`tests/test_faults.py`); on
another CPU family the last bits differ from the first matrix product on and a trained run ends
elsewhere (measured: an AMD EPYC and an Intel Xeon, both AVX-512, give 62.4 % and 62.7 % for the
same claim). So every record states its host (`describe`), and a comparison of two records is
bitwise exactly when their `numerics_key`s are equal, and by verdict otherwise (`companion.reproduce`).

MKL's conditional-reproducibility switch (`MKL_CBWR`) is recorded but not set: measured on Chapter
3's 120 runs, it makes the runs of one Intel host independent of how seeds are grouped but does not
give the bits of another CPU family (`MKL_CBWR=SSE4_2`: 0.6254 on AMD EPYC, 0.6249 on Intel Xeon), and
it costs 1.2× (AMD, `COMPATIBLE`) to 1.9× (Intel, `SSE4_2`) in training time; README, "One id, one
result".
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from companion import kernel

__all__ = ["describe", "numerics_key", "same_numerics", "summary", "machine", "ENV_SWITCHES"]

# Environment variables that change which kernels run (and so the last bits of a result).
ENV_SWITCHES = ("COMPANION_KERNEL", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "MKL_DEBUG_CPU_TYPE", "ATEN_CPU_CAPABILITY",
                "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# CPU flags that decide kernel dispatch (vector widths, fused multiply-add, matrix units).
_ISA_FLAG = re.compile(r"^(sse\d.*|ssse3|avx.*|amx.*|fma|f16c)$")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out.setdefault(key.strip(), value.strip())
    return out


def _blas() -> str:
    """"mkl 2024.2" (or what torch's build reports), from `torch.__config__.show()`."""
    shown = torch.__config__.show()
    m = re.search(r"Math Kernel Library Version ([0-9.]+)", shown)
    if m:
        return f"mkl {m.group(1)}"
    m = re.search(r"BLAS_INFO=(\w+)", shown)
    return m.group(1) if m else "unknown"


@lru_cache(maxsize=8)
def _cpu() -> dict[str, Any]:
    info = _cpuinfo()
    flags = sorted(f for f in info.get("flags", "").split() if _ISA_FLAG.match(f))
    return {
        "model": info.get("model name") or platform.processor() or platform.machine() or "unknown",
        "vendor": info.get("vendor_id", "unknown"),
        "family": info.get("cpu family", "?"), "model_number": info.get("model", "?"),
        "isa_flags": hashlib.sha256(" ".join(flags).encode()).hexdigest()[:12],
        "avx512": "avx512f" in flags, "amx": any(f.startswith("amx") for f in flags),
        "cores": os.cpu_count() or 0,
    }


def _gpu(device: str) -> dict[str, Any] | None:
    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        return None
    try:
        props = torch.cuda.get_device_properties(torch.device(device))
        return {"name": props.name, "capability": f"{props.major}.{props.minor}",
                "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    except Exception:  # noqa: BLE001  (provenance is best effort)
        return {"name": "cuda (unreadable)"}


@lru_cache(maxsize=8)
def _describe(device: str, threads: int, env: tuple, flush: bool) -> dict[str, Any]:
    return {
        "cpu": _cpu(), "isa": torch.backends.cpu.get_cpu_capability(), "blas": _blas(),
        "env": dict(env), "torch": torch.__version__, "torch_git": (torch.version.git_version or "")[:12],
        "threads": threads, "flush_denormal": flush, "gpu": _gpu(device), "python": platform.python_version(),
        "system": f"{platform.system()} {platform.machine()}",
        "kernel": kernel.status() if torch.device(device).type == "cpu" else "unused",
    }


def describe(device: str = "cpu", threads: int | None = None, flush_denormal: bool = False) -> dict[str, Any]:
    """The host as a record states it: CPU (model, vendor, family and model numbers, a digest of its
    ISA flags, cores), the ISA torch dispatches to, the BLAS, the kernel switches set in the
    environment, torch's version and build, the run's threads and whether subnormals were flushed,
    the GPU (CUDA runs), Python, and on the CPU the small-map attention kernel (`companion.kernel.status`:
    its source digest, compiler and flags, or "off (why)")."""
    env = tuple((k, os.environ[k]) for k in ENV_SWITCHES if k in os.environ)
    return _describe(str(device), int(threads if threads is not None else torch.get_num_threads()), env,
                     bool(flush_denormal))


def numerics_key(host: dict[str, Any] | None) -> dict[str, Any] | None:
    """What decides a run's bits: the host without what does not (cores, Python, system). None for a
    record that states no host."""
    if not host:
        return None
    cpu = {k: v for k, v in host.get("cpu", {}).items() if k != "cores"}
    return {"cpu": cpu, **{k: host.get(k) for k in ("isa", "blas", "env", "torch", "torch_git", "threads",
                                                     "flush_denormal", "gpu", "kernel")}}


def same_numerics(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two hosts compute the same config to the same bits (equal `numerics_key`s)."""
    ka, kb = numerics_key(a), numerics_key(b)
    return ka is not None and ka == kb


def machine(host: dict[str, Any] | None, device: str = "cpu") -> str:
    """What computed a run, in a few words: the GPU's name ("NVIDIA H200"), else the processor and its
    cores ("AMD EPYC, 2 cores"); `device` when the host is not stated."""
    if not host:
        return device
    if host.get("gpu"):
        return host["gpu"].get("name", "cuda")
    cpu = host.get("cpu", {})
    return f"{cpu.get('model', 'cpu')}, {cpu.get('cores', '?')} cores"


def summary(host: dict[str, Any] | None) -> str:
    """One line: "AMD EPYC (AuthenticAMD 25/17, AVX512), mkl 2024.2, torch 2.14.1, 1 thread"."""
    if not host:
        return "host not stated"
    cpu = host.get("cpu", {})
    switches = ", ".join(f"{k}={v}" for k, v in host.get("env", {}).items())
    gpu = f"{host['gpu']['name']}, " if host.get("gpu") else ""
    threads = host.get("threads")
    numbers = f" {cpu['family']}/{cpu['model_number']}" if cpu.get("family", "?") != "?" else ""
    return (f"{gpu}{cpu.get('model', '?')} ({cpu.get('vendor', '?')}{numbers}, {host.get('isa', '?')}), "
            f"{host.get('blas', '?')}"
            f"{' [' + switches + ']' if switches else ''}, torch {host.get('torch', '?')}, "
            f"{threads} thread{'s' if threads != 1 else ''}")
