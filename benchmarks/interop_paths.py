"""What each way of putting a prior into attention costs on this machine (Chapter 11's cost table).

For each prior (a per-head learnable mask, GOAT's prior) and each path of `companion.cost.interop.PATHS` (the
book's `attend`, SDPA's float `attn_mask`, FlexAttention's `score_mod` run eagerly, the Hugging Face-style attention
function), plus the same attention without a prior: the median time of one forward and backward, the bias built
from the prior inside each call as a model would, in two modes: `full` (gradients to q, k, v and the prior's
parameters: training a model with a prior) and `prior only` (q, k, v frozen: training the prior alone; there the
attention without a prior has nothing to train and is not timed). On a CPU,
FlexAttention refuses a backward to inputs that require a gradient (torch 2.14: "does not support backward on
CPU"); that refusal is recorded as the path's status in `full` mode, while its backward to the captured bias runs. The calls
run round-robin, `--repeats` rounds after `--warmup`, so that drift of the machine lands on every path alike;
ratios are to `attend` within this run.

    python benchmarks/interop_paths.py                      # the committed CPU shape
    python benchmarks/interop_paths.py --length 1024 --out /tmp/x.json

JSON (schema 1): {benchmark, schema, started, finished, machine{...}, versions{...}, settings{batch, heads,
length, d_head, dtype, threads, warmup, repeats}, results: [{prior, mode, path, status, median_s, times_s[],
reason}], ratios: {mode: {prior: {path: median / attend's median}}}}.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from companion import GoatPrior, LearnableMask
from companion.cost.interop import NULL, PATHS
from companion.cost.machine import machine_info
from companion.cost.records import write_result


def priors(heads: int, length: int, d_head: int, generator: torch.Generator) -> dict:
    """The two priors of Chapter 11, float32, bidirectional."""
    return {"learnable mask": LearnableMask(torch.randn(heads, length, length, generator=generator)),
            "GOAT prior": GoatPrior(heads, d_head, train_len=length, rank=4, causal=False, init="seeded",
                                    init_scale=0.5, generator=generator)}


MODES = ("full", "prior only")


def one_call(path, prior, q, k, v) -> float:
    """Seconds for one forward and backward through `path`."""
    for p in (q, k, v, *prior.parameters()):
        p.grad = None
    start = time.perf_counter()
    path(prior, q, k, v, False).sum().backward()
    return time.perf_counter() - start


def refusal(path, prior, q, k, v) -> str | None:
    """The error a path raises on these inputs (its first line), or None when it runs."""
    try:
        one_call(path, prior, q, k, v)
    except (NotImplementedError, RuntimeError) as err:
        return str(err).splitlines()[0]
    return None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--d-head", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "interop-paths-cpu.json"))
    args = ap.parse_args(argv)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    g = torch.Generator().manual_seed(0)
    base = [torch.randn(args.batch, args.heads, args.length, args.d_head, generator=g) for _ in range(3)]
    paths = dict(PATHS) | {NULL[0]: NULL[1]}
    results = []
    for name, prior in priors(args.heads, args.length, args.d_head, g).items():
        for mode in MODES:
            q, k, v = (t.clone().requires_grad_(mode == "full") for t in base)
            run = {n: p for n, p in paths.items() if mode == "full" or n != NULL[0]}  # no prior: nothing to train
            refused = {n: refusal(path, prior, q, k, v) for n, path in run.items()}
            times: dict[str, list[float]] = {n: [] for n in run if refused[n] is None}
            for rnd in range(args.warmup + args.repeats):
                for path_name in times:
                    t = one_call(run[path_name], prior, q, k, v)
                    if rnd >= args.warmup:
                        times[path_name].append(t)
            for path_name in run:
                ts = times.get(path_name, [])
                results.append({"prior": name, "mode": mode, "path": path_name,
                                "status": "ok" if ts else "refused", "median_s": statistics.median(ts) if ts else None,
                                "times_s": ts, "reason": refused[path_name]})
    ratios: dict = {}
    for r in results:
        if r["status"] == "ok":
            attend_s = next(x["median_s"] for x in results if (x["prior"], x["mode"], x["path"])
                            == (r["prior"], r["mode"], "companion.attend"))
            ratios.setdefault(r["mode"], {}).setdefault(r["prior"], {})[r["path"]] = r["median_s"] / attend_s
    machine, versions = machine_info("cpu")
    result = {"benchmark": "interop_paths", "schema": 1, "started": started, "machine": machine, "versions": versions,
              "settings": {"batch": args.batch, "heads": args.heads, "length": args.length, "d_head": args.d_head,
                           "dtype": "float32", "threads": torch.get_num_threads(), "warmup": args.warmup,
                           "repeats": args.repeats},
              "results": results, "ratios": ratios,
              "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    out = write_result(args.out, result)
    for r in results:
        cost = (f"{1e3 * r['median_s']:8.2f} ms  x{ratios[r['mode']][r['prior']][r['path']]:.2f}"
                if r["status"] == "ok" else f"refused: {r['reason']}")
        print(f"{r['prior']:<15} {r['mode']:<10} {r['path']:<24} {cost}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
