"""The benchmark over lengths: every (L, mode, variant) gated, probed for memory and timed, written as one JSON result.

Protocol (research notes `goat-and-kernels.md` B9), for each L and mode:
- each variant passes the gate at min(L, gate_len) (`companion.cost.gate`), then its memory is
  probed (`memory`: "subprocess", a fresh process per config; "inprocess"; "off");
- subnormals: once per (variant, L), outside the timed loop, `companion.cost.subnormals.probe` counts
  how many of the exponentials of the timed inputs' scores are float32 subnormals (record
  `subnormals`; `result["subnormals"]` sums them up by variant and L);
- flush-to-zero (`flush_denormal`, default on) is set on every thread that computes, the sweep's own
  pool (`companion.cost.ftz`) and each memory worker's, and what was measured of it is in
  `settings["flush_denormal_check"]`; afterwards it is off again (torch's default);
- timing: a first call (compiles flex; reported as first_call_s), one call under the profiler (backend
  detection; output and gradients must be finite), further warm-up calls up to `warmup`, then `repeats`
  samples with the variants interleaved in a rotating order, so background load hits all alike; median
  and IQR. Ratios to `sdpa` come from the same run: median/median and the median of per-repeat ratios;
- stopping: after an OOM, or a first call slower than max_call_s, larger L are not tried for that
  (variant, mode); on CUDA the default lengths double from 1024 to max_len (OOM is a data point).
Timings on a loaded or shared machine are indicative only.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import torch

from companion.cost.ftz import set_flush_denormal
from companion.cost.gate import TOLERANCES, _worst, gate
from companion.cost.machine import machine_info
from companion.cost.measure import (MODES, Case, _free, _is_oom, _stats, _sync, detect_backend, measure_memory,
                                    memory_in_subprocess, time_call)
from companion.cost.notes import NOTES
from companion.cost.records import write_result
from companion.cost.subnormals import probe
from companion.cost.variants import DEFAULT_VARIANTS, DTYPES, GOAT_RECENCY, VARIANTS

SCHEMA = 1  # `subnormals` and the flush-to-zero settings are additions a reader of an older file finds absent
CPU_LENGTHS = (256, 512, 1024, 2048, 4096, 8192)
QUICK_LENGTHS = (256, 512)


def default_lengths(device, *, quick: bool = False, max_len: int = 65536) -> list[int]:
    """QUICK_LENGTHS; on CUDA 1024 doubling to max_len; else CPU_LENGTHS."""
    if quick:
        return list(QUICK_LENGTHS)
    if torch.device(device).type == "cuda":
        out, n = [], 1024
        while n <= max_len:
            out.append(n)
            n *= 2
        return out
    return list(CPU_LENGTHS)


def parse_choices(variants: Sequence[str] | str, modes: Sequence[str] | str) -> tuple[list[str], list[str]]:
    """Variant and mode names from lists or comma strings, sdpa first if missing; ValueError on unknown names."""
    split = (lambda x: x.split(",")) if isinstance(variants, str) else list
    variants = [v.strip() for v in split(variants) if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; choose from {sorted(VARIANTS)}.")
    if "sdpa" not in variants:
        variants.insert(0, "sdpa")  # the denominator of every ratio
    modes = [m.strip() for m in (modes.split(",") if isinstance(modes, str) else modes) if m.strip()]
    if any(m not in MODES for m in modes):
        raise ValueError(f"unknown mode in {modes}; choose from {MODES}.")
    return variants, modes


def _line(rec: dict) -> str:
    """One printed line for a record."""
    head = f"  {rec['variant']:15s} L={rec['L']:6d} {rec['mode']:7s}"
    if rec["status"] != "ok":
        return f"{head} {rec['status']}: {rec['reason'][:200]}"
    t = rec.get("time_s", {}).get("median")
    mem = rec.get("memory", {}).get("peak_bytes")
    be = rec.get("backend", {})
    kind = ",".join(be.get("profiler_backends") or []) or be.get("kind", "")
    ratio = rec.get("ratio_vs_sdpa", {}).get("median_ratio")
    sub = (rec.get("subnormals") or {}).get("prob_fraction")
    return (f"{head} {t * 1e3:10.2f} ms" + (f"  ×{ratio:6.2f}" if ratio else "")
            + (f"  peak {mem / 2**20:8.1f} MiB" if mem is not None else "")
            + f"  [{kind}]  gate {_worst(rec['gate']):.1e}" + (f"  subnormal {sub:.2%}" if sub is not None else ""))


class _Sweep:
    """The state of one sweep: settings, gate cache and the (variant, mode) pairs stopped so far."""

    def __init__(self, s: dict, kw: dict):
        self.s, self.kw, self.device = s, kw, kw["device"]
        self.stopped: dict[tuple[str, str], str] = {}
        self.gates: dict[tuple[str, int, str], dict] = {}
        self.subnormals: dict[tuple[str, int], dict] = {}

    def count_subnormals(self, v: str, L: int, case: Case) -> dict:
        """`probe` of the case's variant on its inputs, once per (variant, L): every mode times the
        same inputs and prior. A probe that fails is recorded with its reason; the timing goes on."""
        if (v, L) not in self.subnormals:
            try:
                self.subnormals[(v, L)] = {"status": "ok", **probe(case.var, case.q, case.k)}
            except Exception as e:
                self.subnormals[(v, L)] = {"status": "oom" if _is_oom(e) else "error",
                                           "reason": f"{type(e).__name__}: {e}"[:500]}
                _free(self.device)
        return self.subnormals[(v, L)]

    def prepare(self, v: str, L: int, mode: str, rec: dict) -> Case | None:
        """Gate, memory probe, first and profiled calls; the Case to time, or None (rec says why)."""
        s, kw = self.s, self.kw
        if (v, mode) in self.stopped:
            rec.update(status="skipped", reason=self.stopped[(v, mode)])
            return None
        gl = min(L, s["gate_len"])
        if (v, gl, mode) not in self.gates:
            self.gates[(v, gl, mode)] = gate(v, gl, mode=mode, tol=s["tol"], **kw)
        g = rec["gate"] = self.gates[(v, gl, mode)]
        if not g["passed"]:
            rec.update(status="error" if g["status"] == "error" else "gate-failed",
                       reason=f"gate at L={gl}: {g['reason']}")
            return None
        if s["memory"] != "off":
            if s["memory"] == "subprocess":
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
                m = memory_in_subprocess(v, L, mode, threads=s["threads"], mem_limit_bytes=s["mem_limit"],
                                     timeout=s["probe_timeout"], flush_denormal=s["flush_denormal"], **kw)
            else:
                m = measure_memory(v, L, mode, **kw)
                m["isolation"] = "in-process"
                _free(self.device)
            rec["memory"] = m
            if m["status"] == "oom":
                rec.update(status="oom", reason=m.get("reason", ""))
                self.stopped[(v, mode)] = f"OOM at L={L}"
                return None
        try:
            case = Case(v, L, mode, **kw)
            _sync(self.device)
            t0 = time.perf_counter()
            case.call()  # the first call: compiles flex (outside the profiler), builds thread pools
            _sync(self.device)
            first = time.perf_counter() - t0
            info = detect_backend(lambda c=case: c.call(check=True), self.device)
        except Exception as e:
            self.fail(rec, e, "")
            return None
        bad = info.pop("result")
        rec["subnormals"] = self.count_subnormals(v, L, case)
        info["kind"] = case.var.kind()
        if getattr(case.var, "kernel_attempts", None):  # flex on CUDA: the tiles tried, and why each failed
            info["kernel_attempts"] = case.var.kernel_attempts
        if info["kind"].startswith("flex (compiled") and any("softmax" in n for n in info["profiler_ops"]):
            info["warning"] = ("softmax ops in the profile of compiled flex: the unfused (materialising) "
                               "path may have run")
        rec["backend"], rec["first_call_s"] = info, first
        if bad:
            rec.update(status="not-finite", reason=f"non-finite {bad} at L={L}")
            return None
        if first > s["max_call_s"]:
            rec.update(status="too-slow", reason=f"one call took {first:.1f} s > --max-call-s {s['max_call_s']}")
            self.stopped[(v, mode)] = f"a call at L={L} took {first:.1f} s"
            return None
        return case

    def fail(self, rec: dict, e: Exception, where: str) -> None:
        """Record an exception as "oom" (and stop larger L) or "error"; free what the case held."""
        rec.update(status="oom" if _is_oom(e) else "error", reason=f"{where}{type(e).__name__}: {e}"[:2000])
        if rec["status"] == "oom":
            self.stopped[(rec["variant"], rec["mode"])] = f"OOM at L={rec['L']}"
        _free(self.device)

    def time_group(self, recs: dict[str, dict], cases: dict[str, Case]) -> dict[str, list[float]]:
        """Warm-up, then interleaved repeats; a variant that fails here drops out, the others go on."""
        samples = {v: [] for v in cases}

        def _drop(v, e):
            samples.pop(v, None)
            cases.pop(v, None)
            self.fail(recs[v], e, "timing: ")

        for v in list(cases):
            try:
                for _ in range(max(0, self.s["warmup"] - 2) if recs[v]["first_call_s"] < 1.0 else 0):
                    cases[v].call()
            except Exception as e:
                _drop(v, e)
        for r in range(self.s["repeats"]):
            names = list(cases)
            for v in names[r % max(1, len(names)):] + names[:r % max(1, len(names))]:
                try:
                    samples[v].append(time_call(cases[v], self.device))
                except Exception as e:
                    _drop(v, e)
        return samples


def _ratios(samples: dict[str, list[float]], recs: dict[str, dict], into: dict, L: int) -> None:
    """ratio_vs_sdpa of each timed record, and the summary into result["ratios"][mode]."""
    if "sdpa" not in samples:
        return
    base = samples["sdpa"]
    for v, s in samples.items():
        per = [a / b for a, b in zip(s, base)]
        ratio = {"median_ratio": statistics.median(s) / statistics.median(base),
                 "paired_median": statistics.median(per), "per_repeat": per}
        recs[v]["ratio_vs_sdpa"] = ratio
        into.setdefault(v, {})[str(L)] = {k: ratio[k] for k in ("median_ratio", "paired_median")}


def _subnormal_summary(results: list[dict]) -> dict:
    """{variant: {L: fraction of subnormal probabilities}} of every probed record (one per variant and L)."""
    out: dict[str, dict[str, float]] = {}
    for rec in results:
        sub = rec.get("subnormals") or {}
        if sub.get("status") == "ok":
            out.setdefault(rec["variant"], {})[str(rec["L"])] = sub["prob_fraction"]
    return out


def run_benchmark(*, variants: Sequence[str] | str = DEFAULT_VARIANTS, lengths: Sequence[int | str] | None = None,
              modes: Sequence[str] | str = MODES, device="cpu", dtype: str | None = None, B: int = 1, H: int = 8,
              D: int = 64, rank: int = 4, repeats: int | None = None, warmup: int | None = None,
              threads: int | None = None, gate_len: int = 256, tol: float | None = None, memory: str = "subprocess",
              mem_limit_gb: float | None = None, probe_timeout: int = 1800, max_call_s: float = 60.0,
              max_len: int = 65536, goat_recency: str = "alibi", compile_flex: bool = True, seed: int = 0,
              quick: bool = False, out: str | Path | None = None, tag: str | None = None,
              argv: list[str] | None = None, verbose: bool = True, flush_denormal: bool = True) -> dict:
    """Run a sweep and return its result (the dict `benchmarks/attention.py` writes); also written to
    `out` after each (L, mode) if given. Defaults are the CLI's (dtype None: float32 on CPU, bfloat16
    on CUDA; threads None: all CPUs; repeats CPU 5, CUDA 10, quick 2; warmup 3, quick 1). Sets
    torch's thread count, GOAT_RECENCY and flush-to-zero (`flush_denormal`, on every thread) for the
    sweep; restores the first two after it and leaves flush-to-zero off, torch's default."""
    variants, modes = parse_choices(variants, modes)
    device = torch.device(device)
    cuda = device.type == "cuda"
    dtype = DTYPES[dtype] if dtype else (torch.bfloat16 if cuda else torch.float32)
    threads = threads or os.cpu_count()
    lengths = [int(x) for part in lengths for x in str(part).replace(",", " ").split()] if lengths else \
        default_lengths(device, quick=quick, max_len=max_len)
    repeats = repeats or (2 if quick else (10 if cuda else 5))
    warmup = warmup if warmup is not None else (1 if quick else 3)
    saved = torch.get_num_threads(), GOAT_RECENCY["value"]
    torch.set_num_threads(threads)
    GOAT_RECENCY["value"] = goat_recency
    try:
        ftz = set_flush_denormal(flush_denormal)
        machine, versions = machine_info(device)
        mem_limit = int(mem_limit_gb * 2**30) if mem_limit_gb else \
            int(0.8 * (machine.get("mem_available_bytes") or 8 * 2**30))
        tag = tag or machine["host"]
        kw = dict(B=B, H=H, D=D, device=device, dtype=dtype, seed=seed, rank=rank, compile_flex=compile_flex)
        result = {
            "benchmark": "attention", "schema": SCHEMA, "tag": tag, "quick": quick,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "argv": argv,
            "machine": machine, "versions": versions,
            "settings": {"device": str(device), "dtype": str(dtype).replace("torch.", ""), "batch": B, "heads": H,
                         "head_dim": D, "goat_rank": rank, "goat_content_dim": D - (2 * rank + 1),
                         "lengths": lengths, "modes": modes, "variants": variants, "repeats": repeats,
                         "warmup": warmup, "threads": threads, "gate_len": gate_len,
                         "gate_tol": tol if tol is not None else TOLERANCES.get(dtype),
                         "memory": memory, "mem_limit_bytes": mem_limit if not cuda else None,
                         "max_call_s": max_call_s, "goat_recency": GOAT_RECENCY["value"],
                         "flex_compiled": compile_flex, "seed": seed, "flush_denormal": ftz["on"],
                         "flush_denormal_check": {k: v for k, v in ftz.items() if k != "on"}},
            "notes": NOTES, "results": [], "ratios": {m: {} for m in modes}, "subnormals": {},
        }
        say = (lambda msg: print(msg, flush=True)) if verbose else (lambda msg: None)
        say(f"attention benchmark: {device} {dtype} B={B} H={H} D={D} L={lengths} modes={modes} "
            f"repeats={repeats} → {out if out else '(not written)'}")
        sweep = _Sweep(dict(gate_len=gate_len, tol=tol, memory=memory, threads=threads, mem_limit=mem_limit,
                            probe_timeout=probe_timeout, max_call_s=max_call_s, warmup=warmup, repeats=repeats,
                            flush_denormal=ftz["on"]), kw)
        for L in lengths:
            for mode in modes:
                recs: dict[str, dict] = {}
                cases: dict[str, Case] = {}
                for v in variants:
                    rec = {"variant": v, "L": L, "mode": mode, "status": "ok", "reason": ""}
                    result["results"].append(rec)
                    case = sweep.prepare(v, L, mode, rec)
                    if case is not None:
                        recs[v], cases[v] = rec, case
                samples = sweep.time_group(recs, cases)
                for v, s in samples.items():
                    recs[v]["time_s"] = _stats(s)
                _ratios(samples, recs, result["ratios"][mode], L)
                for rec in result["results"]:
                    if rec["L"] == L and rec["mode"] == mode:
                        say(_line(rec))
                cases = case = None  # let the last group's tensors go before the next is built
                _free(device)
                machine["load_avg_at_end"] = os.getloadavg()
                result["subnormals"] = _subnormal_summary(result["results"])
                result["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
                if out:
                    write_result(out, result)
        if out:
            say(f"wrote {out}")
        return result
    finally:
        set_flush_denormal(False)
        torch.set_num_threads(saved[0])
        GOAT_RECENCY["value"] = saved[1]
