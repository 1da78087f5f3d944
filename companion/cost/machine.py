"""What machine a result came from: CPU, memory, load, GPU and library versions (`machine`, `versions`)."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

import torch


def machine_info(device) -> tuple[dict, dict]:
    """(machine, versions): host, CPU model and count, memory, load average; GPU and cuDNN on CUDA."""
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
