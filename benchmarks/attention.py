"""Cost of one attention layer with a prior vs sequence length L: time and peak memory per backend.

The command line over `companion.cost.run_benchmark`. What is measured and how lives with the code:
variants (sdpa, goat-lanes, mask-sdpa, eager-bias, flex, eager-goat, mask-attend; optional alibi-sdpa,
mask-sdpa-math) in companion/cost/variants.py, the float64 correctness gate in gate.py, backend
detection, timing and memory (a fresh `python -m companion.cost.worker` process per config) in
measure.py, the protocol (gate, warm-up, interleaved repeats, ratios to sdpa, stopping) in lengths.py.

    python benchmarks/attention.py                          # full sweep on the default device
    python benchmarks/attention.py --quick --out /tmp/attention-quick.json   # smoke run
    python benchmarks/attention.py --device cuda --dtype bfloat16 --memory inprocess --tag h200
    python benchmarks/attention.py --variants sdpa,goat-lanes,flex --lengths 1024 4096 --modes fwd+bwd
    python benchmarks/attention.py --variants sdpa,goat-lanes --lengths 4096 --modes fwd+bwd --no-flush-denormal

Flush-to-zero is on, on every thread that computes (companion/cost/ftz.py), unless --no-flush-denormal:
that shows what subnormal floats cost on the machine. Each record's `subnormals` says how many of its
exponentials are subnormal (companion/cost/subnormals.py), so a result from another host says why it
differs.

JSON (schema 1): {benchmark, schema, tag, host, started, finished, argv, machine{...}, versions{...},
settings{..., flush_denormal, flush_denormal_check{supported, pool, threads, flushed_share}}, notes{...},
results: [record], ratios: {mode: {variant: {L: {median_ratio, paired_median}}}}, subnormals: {variant:
{L: prob_fraction}}}; record = {variant, L, mode, status ("ok" | "gate-failed" | "error" | "oom" |
"not-finite" | "too-slow" | "skipped"), reason, gate{L, passed, status, tol, errors{name: max abs err},
scales{name: max abs ref}, reason}, backend{sdp_choice[], sdp_choice_names[], profiler_ops[], kind},
subnormals{status, entries, exp_subnormal, prob_subnormal, prob_zero, exp_fraction, prob_fraction,
prob_zero_fraction, rows, row_stride, heads[]}, first_call_s, time_s{median, q1, q3, iqr, samples[]},
ratio_vs_sdpa{median_ratio, paired_median, per_repeat[]}, memory{status, method, setup_bytes,
first_call_peak_bytes, peak_bytes, steady_peaks_bytes[], ...}}. Timings on a loaded or shared machine are indicative only.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

import torch

from companion.cost import DEFAULT_VARIANTS, DTYPES, MODES, QUICK_LENGTHS, VARIANTS, parse_choices, run_benchmark

RESULTS = Path(__file__).resolve().parent / "results"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                    help="run dtype (default float32 on CPU, bfloat16 on CUDA)")
    ap.add_argument("-B", "--batch", type=int, default=1)
    ap.add_argument("-H", "--heads", type=int, default=8)
    ap.add_argument("-D", "--head-dim", type=int, default=64)
    ap.add_argument("--rank", type=int, default=4, help="GOAT spectral rank R (2R + 1 lanes)")
    ap.add_argument("--lengths", nargs="+", default=None,
                    help="sequence lengths (default CPU 256..8192; CUDA 1024 doubling to --max-len)")
    ap.add_argument("--max-len", type=int, default=65536, help="largest default length on CUDA")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                    help=f"comma list from {sorted(VARIANTS)} (sdpa is always added)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--repeats", type=int, default=None, help="timed samples (default CPU 5, CUDA 10)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed calls before the samples, incl. the profiled and the first timed-alone one "
                         "(default 3; 2 once a call takes over 1 s)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads")
    ap.add_argument("--gate-len", type=int, default=256, help="correctness gate at min(L, this)")
    ap.add_argument("--tol", type=float, default=None, help="override the gate tolerance of the dtype")
    ap.add_argument("--memory", choices=("subprocess", "inprocess", "off"), default="subprocess",
                    help="subprocess: a fresh process per config (default); inprocess: exact on CUDA and "
                         "much cheaper there; inaccurate on CPU")
    ap.add_argument("--mem-limit-gb", type=float, default=None,
                    help="CPU memory probe budget (RLIMIT_AS over the baseline); default 80%% of MemAvailable")
    ap.add_argument("--probe-timeout", type=int, default=1800)
    ap.add_argument("--max-call-s", type=float, default=60.0,
                    help="do not time, nor try larger L, once one call takes longer than this")
    ap.add_argument("--goat-recency", choices=("alibi", "zero"), default="alibi",
                    help="GOAT recency slope s_h: 'alibi' (the seeded init) or 'zero'. With 'alibi' the sink "
                         "lane carries u(j) ≈ s·j, which bf16/fp16 cannot hold to the gate's tolerance (the "
                         "cost is the same either way)")
    ap.add_argument("--no-flex-compile", action="store_true", help="run flex eagerly (materialises scores)")
    ap.add_argument("--no-flush-denormal", action="store_true",
                    help="leave flush-to-zero off (torch's default), to see what subnormal floats cost here; by "
                         "default it is on, on every thread that computes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: L {QUICK_LENGTHS}, 2 repeats, no warm-up beyond the first and profiled calls")
    ap.add_argument("--tag", default=None, help="name in the default output file (default: host name)")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/attention-<device>-<tag>.json)")
    return ap


def run(args: argparse.Namespace, argv: list[str] | None = None) -> dict:
    """The sweep the parsed arguments ask for, written to --out or benchmarks/results/."""
    try:
        parse_choices(args.variants, args.modes)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    tag = args.tag or socket.gethostname()  # the host name, as the sweep's default tag
    out = args.out or RESULTS / f"attention-{torch.device(args.device).type}-{tag}.json"
    return run_benchmark(variants=args.variants, lengths=args.lengths, modes=args.modes, device=args.device,
                     dtype=args.dtype, B=args.batch, H=args.heads, D=args.head_dim, rank=args.rank,
                     repeats=args.repeats, warmup=args.warmup, threads=args.threads, gate_len=args.gate_len,
                     tol=args.tol, memory=args.memory, mem_limit_gb=args.mem_limit_gb,
                     probe_timeout=args.probe_timeout, max_call_s=args.max_call_s, max_len=args.max_len,
                     goat_recency=args.goat_recency, compile_flex=not args.no_flex_compile, seed=args.seed,
                     flush_denormal=not args.no_flush_denormal,
                     quick=args.quick, out=out, tag=tag, argv=sys.argv[1:] if argv is None else list(argv))


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    run(args, argv)


if __name__ == "__main__":
    main()
