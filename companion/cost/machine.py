"""What machine a result came from: CPU, memory, load, GPU and library versions (`machine`, `versions`).

`cpu_capability` is the vector instruction set torch's kernels dispatch to (`torch.backends.cpu.
get_cpu_capability()`: DEFAULT, AVX2, AVX512, …) and `cpu_vendor` the CPU's maker (/proc/cpuinfo's
vendor_id): two hosts that differ in either may run different kernels, and price subnormals differently.
"""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

import torch


def _capability() -> str | None:
    try:
        return torch.backends.cpu.get_cpu_capability()
    except Exception:  # pragma: no cover - older torch
        return None


def machine_info(device) -> tuple[dict, dict]:
    """(machine, versions): host, CPU model, vendor, capability and count, memory, load average; GPU and
    cuDNN on CUDA."""
    cpu_model, cpu_vendor = platform.processor() or platform.machine(), None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id") and cpu_vendor is None:
                cpu_vendor = line.split(":", 1)[1].strip()
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
               "cpu_vendor": cpu_vendor, "cpu_capability": _capability(), "cpu_count": os.cpu_count(),
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
