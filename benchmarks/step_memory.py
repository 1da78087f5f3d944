"""Peak memory and time of one training step of a whole decoder per position scheme (GOAT Fig. 4b).

Each method runs in its own process (`companion.cost.step`); ratios are to RoPE, as in the source.

    python benchmarks/step_memory.py                              # shape "ci" on the CPU
    python benchmarks/step_memory.py --shape paper --device cuda --tag h200
    python benchmarks/step_memory.py --methods rope,goat --out /tmp/step.json
    python benchmarks/step_memory.py --methods rope,goat --no-flush-denormal   # what subnormals cost here

Every process computes with flush-to-zero on all its threads (companion/cost/ftz.py) unless
--no-flush-denormal.

JSON (schema 1): {benchmark, schema, tag, started, finished, machine{...}, versions{...},
settings{device, threads, dtype, optimizer, shape{...}, flush_denormal}, results: [{method, status,
peak_bytes, memory_method, time_s, times_s[], params, flush_denormal{on, flushed_share}}],
ratios_vs_rope: {method: {memory, time}}}.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from companion.cost.records import write_result
from companion.cost.step import SHAPES, run_steps


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--methods", default="rope,goat,alibi,sinusoidal")
    p.add_argument("--shape", default="ci", choices=sorted(SHAPES))
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--no-flush-denormal", action="store_true",
                   help="leave flush-to-zero off (torch's default) to see what subnormal floats cost here")
    p.add_argument("--tag", default=None)
    p.add_argument("--out", default=None, help="JSON path (default benchmarks/results/step-memory-<tag or device>.json)")
    args = p.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    result = run_steps(methods, args.shape, device=args.device, threads=args.threads, tag=args.tag,
                       flush_denormal=not args.no_flush_denormal)
    out = Path(args.out or Path(__file__).parent / "results" / f"step-memory-{args.tag or args.device}.json")
    write_result(out, result)
    for r in result["results"]:
        extra = f"{r['peak_bytes'] / 2**20:9.1f} MiB  {r['time_s']:.3f} s" if r.get("status") == "ok" else r.get("reason", "")
        print(f"{r['method']:<12} {r.get('status', '?'):<6} {extra}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
