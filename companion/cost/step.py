"""One training step of a whole decoder, per way of knowing positions: peak memory and time.

The GOAT paper's Figure 4b reports the peak CUDA memory of a genome language model's training step
falling from 2.86 GB with RoPE to 1.83 GB with GOAT (−36 %), at comparable throughput. This measures
the same comparison for the package's decoder: one `StepShape`, the model built as the book's
presets build it (`companion.experiments.copy_mixture.prior_model`; GOAT with the authors' seeded start) and
trained with AdamW. Per method, in a fresh process (`python -m companion.cost.step SPEC`): build the
model and optimiser, take `warmup` steps (the optimiser's state then exists), then record the peak
memory of one more step (forward, backward, optimiser step) above the memory held before it, and the
median time of `repeats` steps. Memory is `torch.cuda.max_memory_allocated` on CUDA and the process's
resident-set high-water mark on CPU (as in `measure`). Each process computes with flush-to-zero on
every thread unless `flush_denormal` is False (`companion.cost.ftz`; a GOAT decoder at 1,024 positions
meets subnormal exponentials, which some CPUs price at several times a normal number's).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone

import torch
import torch.nn.functional as F

from companion.config import ModelConfig
from companion.cost.ftz import set_flush_denormal
from companion.cost.machine import machine_info
from companion.cost.measure import PROBE_TAG, REPO_ROOT, _peak, _sync
from companion.experiments.copy_mixture import prior_model
from companion.model import Transformer, init_weights_
from companion.tasks import TaskSpec

__all__ = ["StepShape", "SHAPES", "step_once", "measure_step", "run_steps"]


@dataclass(frozen=True)
class StepShape:
    """A decoder and its batch: widths, depth, heads, sequence length, batch, vocabulary, GOAT rank."""

    d_model: int
    n_layers: int
    n_heads: int
    d_head: int
    d_ff: int
    seq_len: int
    batch: int
    vocab: int = 8
    goat_rank: int = 2


# "paper": the source's genome model (8 layers of width 512, 8 heads, 1,024 bases, batch 8);
# "ci": the same depth-to-width pattern at a size a 2-core CPU steps through in about a second.
SHAPES = {"paper": StepShape(512, 8, 8, 64, 2048, 1024, 8), "ci": StepShape(256, 4, 8, 32, 1024, 1024, 2)}


def _model(method: str, shape: StepShape, device):
    base = ModelConfig(arch="decoder", d_model=shape.d_model, n_layers=shape.n_layers, n_heads=shape.n_heads,
                       d_head=shape.d_head, d_ff=shape.d_ff)
    cfg = prior_model(base, method, rank=shape.goat_rank)
    if method == "goat":
        cfg = replace(cfg, prior=replace(cfg.prior, goat_init="seeded"))
    spec = TaskSpec(inputs="tokens", output="lm", vocab_size=shape.vocab, seq_len=shape.seq_len)
    g = torch.Generator().manual_seed(0)
    model = Transformer(cfg, spec, generator=g)
    init_weights_(model, g)
    return model.to(device)


def step_once(method: str, shape: StepShape, *, device="cpu", warmup: int = 2, repeats: int = 3) -> dict:
    """Peak memory of one training step and the median step time, in this process (module docstring)."""
    dev = torch.device(device)
    model = _model(method, shape, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, shape.vocab, (shape.batch, shape.seq_len + 1), generator=g).to(dev)

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(x[:, :-1])
        F.cross_entropy(logits.flatten(0, 1).float(), x[:, 1:].flatten()).backward()
        opt.step()

    for _ in range(warmup):
        step()
    peak, how = _peak(step, dev)
    times = []
    for _ in range(repeats):
        _sync(dev)
        t0 = time.perf_counter()
        step()
        _sync(dev)
        times.append(time.perf_counter() - t0)
    return {"method": method, "peak_bytes": peak, "memory_method": how, "time_s": statistics.median(times),
            "times_s": times, "params": sum(p.numel() for p in model.parameters())}


def measure_step(method: str, shape: StepShape, *, device="cpu", threads: int = 2, timeout: int = 1800,
                 flush_denormal: bool = True) -> dict:
    """`step_once` in a fresh process, so that no other method's freed memory hides this one's peak, with
    flush-to-zero on its every thread as `flush_denormal` says."""
    spec = json.dumps({"method": method, "shape": asdict(shape), "device": str(device), "threads": threads,
                       "flush_denormal": flush_denormal})
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS=str(threads),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p))
    try:
        p = subprocess.run([sys.executable, "-m", "companion.cost.step", spec], capture_output=True, text=True,
                           timeout=timeout, env=env, cwd=str(REPO_ROOT))
    except subprocess.TimeoutExpired:
        return {"method": method, "status": "error", "reason": f"step probe timed out after {timeout} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(PROBE_TAG):
            return {"status": "ok", **json.loads(line[len(PROBE_TAG):])}
    return {"method": method, "status": "error", "reason": f"step probe exited {p.returncode}: {p.stderr.strip()[-1500:]}"}


def _ratio(value: float, reference: float) -> float | None:
    """value / reference; None when the reference is 0 (a step too small to raise the process's peak
    memory above what it already holds: no ratio can be measured at that shape)."""
    return value / reference if reference else None


def run_steps(methods=("rope", "goat", "alibi", "sinusoidal"), shape: StepShape | str = "ci", *, device="cpu",
              threads: int = 2, tag: str | None = None, flush_denormal: bool = True) -> dict:
    """Every method at one shape, each in its own process: {machine, versions, settings, results,
    ratios_vs_rope {method: {memory, time}}} (a ratio is None where RoPE's value is 0); settings say
    whether flush-to-zero was on (`flush_denormal`), each result what its process measured of it."""
    shape = SHAPES[shape] if isinstance(shape, str) else shape
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    machine, versions = machine_info(device)
    results = [measure_step(m, shape, device=device, threads=threads, flush_denormal=flush_denormal) for m in methods]
    ok = {r["method"]: r for r in results if r.get("status") == "ok"}
    ratios = {}
    if "rope" in ok:
        rope = ok["rope"]
        for m, r in ok.items():
            ratios[m] = {"memory": _ratio(r["peak_bytes"], rope["peak_bytes"]), "time": _ratio(r["time_s"], rope["time_s"])}
    return {"benchmark": "train_step_memory", "schema": 1, "tag": tag, "started": started,
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine,
            "versions": versions, "settings": {"device": str(device), "threads": threads, "dtype": "float32",
                                               "optimizer": "AdamW", "shape": asdict(shape),
                                               "flush_denormal": flush_denormal},
            "results": results, "ratios_vs_rope": ratios}


def main(spec_json: str) -> None:
    s = json.loads(spec_json)
    torch.set_num_threads(s["threads"])
    ftz = set_flush_denormal(s.get("flush_denormal", True))
    r = step_once(s["method"], StepShape(**s["shape"]), device=s["device"])
    r["flush_denormal"] = {"on": ftz["on"], "flushed_share": ftz["flushed_share"]}
    print(PROBE_TAG + json.dumps(r), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
