"""The cost of attention with a prior: time and peak memory of attention variants vs sequence length L.

One concept a module: `variants` (the ways of computing causal attention with a prior; `flex`, the
compiled flex_attention behind one of them), `gate` (the float64 correctness gate a variant passes
before it is timed), `measure` (one case: backend, time, memory; `worker`, the fresh process that
measures memory), `machine` (where a result came from), `notes` (what the numbers mean), `ftz`
(flush-to-zero on every thread that computes), `subnormals` (how many of a variant's exponentials are
float32 subnormals), `lengths` (the loop over L, mode and variant, and its JSON result), `records` (reading those JSON
results back, checked, as frames: what Chapter 10 reads). `benchmarks/attention.py` is the command
line over `run_benchmark`; a notebook can call it directly, e.g.

    run_benchmark(variants="sdpa,goat-lanes", lengths=[256], modes="fwd", memory="inprocess")
"""

from __future__ import annotations

from companion.cost.ftz import flush_denormal, flushed_share, set_flush_denormal
from companion.cost.gate import TOLERANCES, gate
from companion.cost.machine import machine_info
from companion.cost.measure import (MODES, Case, detect_backend, measure_memory, native_output_silenced,
                                    memory_in_subprocess, time_call)
from companion.cost.notes import NOTES
from companion.cost.subnormals import probe as probe_subnormals
from companion.cost.lengths import CPU_LENGTHS, QUICK_LENGTHS, SCHEMA, default_lengths, parse_choices, run_benchmark
from companion.cost.variants import (DEFAULT_VARIANTS, DTYPES, GOAT_RECENCY, VARIANTS, AlibiSdpa, EagerBias,
                                     EagerGoat, Flex, GoatLanes, MaskAttend, MaskFlex, MaskSdpa, MaskSdpaMath, Sdpa,
                                     Variant,
                                     build, goat_tables)

__all__ = [
    "run_benchmark", "parse_choices", "default_lengths", "gate", "Case", "detect_backend", "measure_memory",
    "memory_in_subprocess", "time_call", "native_output_silenced", "machine_info", "build", "goat_tables", "Variant", "Sdpa", "GoatLanes",
    "MaskSdpa", "MaskSdpaMath", "EagerBias", "MaskAttend", "AlibiSdpa", "EagerGoat", "Flex", "MaskFlex", "VARIANTS",
    "DEFAULT_VARIANTS", "MODES", "DTYPES", "TOLERANCES", "GOAT_RECENCY", "NOTES", "SCHEMA", "CPU_LENGTHS",
    "QUICK_LENGTHS", "set_flush_denormal", "flush_denormal", "flushed_share", "probe_subnormals",
]
