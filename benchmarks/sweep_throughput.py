"""Runs per hour of a sweep, seeds run one by one against seeds trained together (seed-batched).

For each method, the same seeds of the GOTU experiment run twice in this process: one by one (the
configs with `stack=1`, each `companion.runs.run` alone) and as one group (`stack` = the number of
seeds, `companion.runs.run_group`), whole runs each time (build, training, every evaluation, drift tracking), on
`companion.runs.THREADS` torch threads. The two alternate per repeat, so background load hits both
alike; the ratio is runs/hour batched over runs/hour one by one, both measured in this run. Each
record pair is also compared (`identical`: curves, metrics and drift equal to the last bit).

With `--compile`, a third arm per method: the same group with the stacked model's training forward
(and through AOTAutograd its backward) run by `torch.compile` (inductor), evaluation still eager. It
is a measurement of what compiling would buy, not how the package trains: its records are not equal
to the eager ones to the last bit (`max_final_metric_diff_compiled` says by how much), and the first
compiled group, which pays the compile, is timed apart (`compile_first_s`).

With `--eval-arm`, another arm per method: the same group with its members evaluated the other way
than the device's default (`train_stacked(shared_eval=...)`: on CUDA from one stacked forward, on the
CPU one by one), so `eval_arm.ratio_vs_batched` prices `companion.shared_forward` on that device.

With `--pool N` (CPU), the whole request (every method × seed) also goes through the local executor
with N worker processes, once with every run alone (`stack=1`) and once grouped: the figure a
chapter's sweep sees on N cores, worker start-up included.

    python benchmarks/sweep_throughput.py                       # CPU: GOTU ci, default + mask, 5 seeds
    python benchmarks/sweep_throughput.py --experiments arith-add,copymix --methods all --seeds 3 \
        --tag decoders-cpu                                      # several experiments in one run
    python benchmarks/sweep_throughput.py --device cuda --profile paper --seeds 5 \\
        --overrides train.epochs=2                              # GPU: the paper model, shortened
    python benchmarks/sweep_throughput.py --compile --repeats 2 --tag cpu-compile   # + torch.compile arm
    python benchmarks/sweep_throughput.py --device cuda --profile paper --eval-arm --overrides train.epochs=2
    python benchmarks/sweep_throughput.py --experiment charlm --methods goat --seeds 1 --repeats 2 \
        --no-flush-denormal --tag charlm-goat-noftz                 # what subnormals cost in training here

Every run computes as the recipe says (`companion.runs.recipe_context`: `THREADS` threads, subnormals
flushed to zero); `--no-flush-denormal` turns the flushing off for the runs this process trains (not
with `--pool`, whose workers are other processes), to price subnormal floats on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import json
import os
import platform
import socket
import statistics
import tempfile
import time
from pathlib import Path

import torch

from companion.experiments import get_experiment
from companion.runs import THREADS, run, run_group
from companion.train import shares_evaluation


def _computed(record) -> dict:
    """The numbers a run computed (its id and config aside: a run alone and stacked are two recipes)."""
    return {"metrics": record.metrics, "curves": {k: v for k, v in record.curves.items() if k != "wall_time"},
            "drift": record.drift, "readouts": record.readouts}


def _stacked(exp, profile: str, method: str, seeds: list[int], overrides: list[str], stack: int | None = None) -> list:
    """The configs of `seeds` (a block from 0) trained `stack` at a time (default: all together)."""
    return [exp.config(profile, method, s, [*overrides, f"stack={stack or len(seeds)}"]) for s in seeds]


def _max_metric_diff(a, b) -> float:
    return max(abs(a.metrics[s][m] - b.metrics[s][m]) for s in a.metrics for m in a.metrics[s])


@contextlib.contextmanager
def compiled_stacks():
    """While active, every stacked model (`companion.batched.stack`) runs its forward through
    `torch.compile` (inductor, static shapes); the members' eager copies still evaluate."""
    import companion.batched as batched

    real = batched.stack

    def stack(models):
        net = real(models)
        net.forward = torch.compile(net.forward, dynamic=False)
        return net

    batched.stack = stack
    try:
        yield
    finally:
        batched.stack = real


@contextlib.contextmanager
def evaluation(shared: bool):
    """While active, every group's members are evaluated as `shared` says: from one stacked forward
    (`companion.shared_forward`) or one by one, whatever the device's default."""
    import companion.train as train

    real = train.train_stacked
    train.train_stacked = functools.partial(real, shared_eval=shared)
    try:
        yield
    finally:
        train.train_stacked = real


def bench_method(experiment: str, profile: str, method: str, seeds: list[int], overrides: list[str],
                 repeats: int, compiled: bool = False, eval_arm: bool = False) -> dict:
    exp = get_experiment(experiment)
    cfgs = _stacked(exp, profile, method, seeds, overrides)
    alone = _stacked(exp, profile, method, seeds, overrides, stack=1)
    solo_t, batched_t, compiled_t, flipped_t, extra, records = [], [], [], [], {}, None
    default_shared = shares_evaluation(cfgs[0].device)  # train_stacked's default (shared_eval=None)
    if compiled:
        with compiled_stacks():
            start = time.perf_counter()
            run_group(cfgs)  # pays the compile, timed apart
            extra["compile_first_s"] = time.perf_counter() - start
    for _ in range(repeats):  # the arms alternate, so background load hits each alike
        start = time.perf_counter()
        solo = [run(c) for c in alone]
        solo_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        together = run_group(cfgs)
        batched_t.append(time.perf_counter() - start)
        if compiled:
            with compiled_stacks():
                start = time.perf_counter()
                records = run_group(cfgs)
                compiled_t.append(time.perf_counter() - start)
        if eval_arm:
            with evaluation(not default_shared):
                start = time.perf_counter()
                flipped = run_group(cfgs)
                flipped_t.append(time.perf_counter() - start)
    n = len(cfgs)
    if eval_arm:
        rph = 3600 * n / statistics.median(flipped_t)
        extra["eval_arm"] = {
            "shared_eval": not default_shared, "batched_shared_eval": default_shared, "s": flipped_t,
            "runs_per_hour": rph, "ratio_vs_batched": rph / (3600 * n / statistics.median(batched_t)),
            "identical": all(_computed(a) == _computed(b) for a, b in zip(together, flipped)),
            "max_final_metric_diff": max(_max_metric_diff(a, b) for a, b in zip(together, flipped))}
    rph_solo, rph_batched = 3600 * n / statistics.median(solo_t), 3600 * n / statistics.median(batched_t)
    if compiled:
        rph = 3600 * n / statistics.median(compiled_t)
        extra.update(compiled_s=compiled_t, runs_per_hour_compiled=rph, ratio_compiled_vs_batched=rph / rph_batched,
                     ratio_compiled_vs_solo=rph / rph_solo,
                     identical_compiled=all(_computed(a) == _computed(b) for a, b in zip(together, records)),
                     max_final_metric_diff_compiled=max(_max_metric_diff(a, b) for a, b in zip(together, records)))
    return {
        "method": method, "seeds": seeds, "runs": n, "solo_s": solo_t, "batched_s": batched_t,
        "runs_per_hour_solo": rph_solo, "runs_per_hour_batched": rph_batched, "ratio": rph_batched / rph_solo,
        "ratio_per_repeat": [s / b for s, b in zip(solo_t, batched_t)],
        "identical": all(_computed(a) == _computed(b) for a, b in zip(solo, together)),
        "max_final_metric_diff": max(_max_metric_diff(a, b) for a, b in zip(solo, together)),
        "execution": together[0].execution, **extra,
    }


def bench_pool(experiment: str, profile: str, methods: list[str], seeds: list[int], overrides: list[str],
               jobs: int, repeats: int) -> dict:
    from companion.executors import LocalExecutor
    from companion.store import RunStore

    exp = get_experiment(experiment)
    arms = {name: [c for m in methods for c in _stacked(exp, profile, m, seeds, overrides, stack)]
            for name, stack in (("solo", 1), ("batched", len(seeds)))}
    cfgs = arms["batched"]
    out = {"jobs": jobs, "runs": len(cfgs), "solo_s": [], "batched_s": []}
    for _ in range(repeats):  # alternate, so background load hits both alike
        for name in ("solo", "batched"):
            with tempfile.TemporaryDirectory() as root:
                start = time.perf_counter()
                failures = LocalExecutor(jobs=jobs).execute(arms[name], RunStore(root))
                out[f"{name}_s"].append(time.perf_counter() - start)
                if failures:
                    raise RuntimeError("\n".join(failures))
    for name in ("solo", "batched"):
        out[f"runs_per_hour_{name}"] = 3600 * len(cfgs) / statistics.median(out[f"{name}_s"])
    out["ratio"] = out["runs_per_hour_batched"] / out["runs_per_hour_solo"]
    out["ratio_per_repeat"] = [s / b for s, b in zip(out["solo_s"], out["batched_s"])]
    return out


@contextlib.contextmanager
def flushing(on: bool):
    """While active, the runs this process trains flush subnormals to zero as `on` says
    (`companion.runs.FLUSH_DENORMAL`, which `recipe_context` reads at each run), the recipe's value after."""
    import companion.runs as runs

    real = runs.FLUSH_DENORMAL
    runs.FLUSH_DENORMAL = on
    try:
        yield
    finally:
        runs.FLUSH_DENORMAL = real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default="gotu-2parity")
    ap.add_argument("--experiments", default=None,
                    help="comma-separated experiments measured one after another in this run (overrides "
                         "--experiment); each may take its own overrides as name+key=value+key=value")
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--methods", default="default,mask",
                    help="comma-separated methods, 'all' (each experiment's), or experiment:method pairs")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0 … N−1 per method")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--overrides", nargs="*", default=[], help="key=value, e.g. train.epochs=2")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--compile", action="store_true",
                    help="also time each group with the stacked model's forward under torch.compile")
    ap.add_argument("--eval-arm", action="store_true",
                    help="also time each group with its members evaluated the other way than the device's "
                         "default (CPU: from one stacked forward; CUDA: one by one), companion.shared_forward")
    ap.add_argument("--pool", type=int, default=0, help="also time the local executor with N workers (CPU)")
    ap.add_argument("--pool-only", action="store_true", help="time only the local executor (--pool N)")
    ap.add_argument("--no-flush-denormal", action="store_true",
                    help="train with subnormals not flushed to zero (the recipe flushes them), in this process only")
    ap.add_argument("--tag", default=None)
    ap.add_argument("--notes", default="", help="free text stored in the JSON (e.g. the machine's load)")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/sweep_throughput-<tag>.json)")
    args = ap.parse_args()
    if args.no_flush_denormal and args.pool:
        ap.error("--no-flush-denormal applies to the runs this process trains; --pool's workers keep the recipe's "
                 "flushing. Drop one of the two.")
    with flushing(not args.no_flush_denormal):
        _main(args)


def _main(args) -> None:
    tag = args.tag or ("cpu" if args.device == "cpu" else torch.cuda.get_device_name(0).replace(" ", "-").lower())
    overrides = list(args.overrides) + ([f"device={args.device}"] if args.device != "cpu" else [])
    seeds = list(range(args.seeds))
    if args.experiments:
        return _several(args, tag, overrides, seeds)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    result = {
        "benchmark": "sweep_throughput", "schema": 1, "tag": tag,
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
        "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(0),
        "torch": torch.__version__, "threads_per_run": THREADS, "load_avg_at_start": os.getloadavg(),
        "flush_denormal": not args.no_flush_denormal,
        "settings": {"experiment": args.experiment, "profile": args.profile, "methods": methods, "seeds": seeds,
                     "overrides": overrides, "repeats": args.repeats, "compile": args.compile,
                     "eval_arm": args.eval_arm},
        "methods": {},
    }
    short = ["train.steps=2", "train.epochs=0", "train.eval_every=0"]
    warm = _stacked(get_experiment(args.experiment), args.profile, methods[0], [0, 1], overrides + short)
    run_group(warm)
    run(_stacked(get_experiment(args.experiment), args.profile, methods[0], [0], overrides + short)[0])  # one-off imports
    for method in [] if args.pool_only else methods:
        r = bench_method(args.experiment, args.profile, method, seeds, overrides, args.repeats, args.compile,
                         args.eval_arm)
        result["methods"][method] = r
        print(f"{method:15s} one by one {r['runs_per_hour_solo']:8.0f} runs/h   batched ({len(seeds)}) "
              f"{r['runs_per_hour_batched']:8.0f} runs/h   ratio {r['ratio']:.2f}   identical {r['identical']}",
              flush=True)
        if args.compile:
            print(f"{'':15s} compiled {r['runs_per_hour_compiled']:8.0f} runs/h   vs batched "
                  f"{r['ratio_compiled_vs_batched']:.2f}   first group (compiling) {r['compile_first_s']:.1f} s   "
                  f"max final metric diff {r['max_final_metric_diff_compiled']:.2g}", flush=True)
        if args.eval_arm:
            e = r["eval_arm"]
            print(f"{'':15s} evaluation {'shared' if e['shared_eval'] else 'one by one'} {e['runs_per_hour']:8.0f} "
                  f"runs/h   vs batched {e['ratio_vs_batched']:.2f}   identical {e['identical']}", flush=True)
    if result["methods"]:
        total_solo = sum(statistics.median(r["solo_s"]) for r in result["methods"].values())
        total_batched = sum(statistics.median(r["batched_s"]) for r in result["methods"].values())
        result["ratio_all_methods"] = total_solo / total_batched
        print(f"all methods: ratio {result['ratio_all_methods']:.2f}", flush=True)
    if args.pool:
        result["pool"] = bench_pool(args.experiment, args.profile, methods, seeds, overrides, args.pool, args.repeats)
        p = result["pool"]
        print(f"pool of {args.pool}: one by one {p['runs_per_hour_solo']:.0f} runs/h, batched "
              f"{p['runs_per_hour_batched']:.0f} runs/h, ratio {p['ratio']:.2f}", flush=True)
    result["load_avg_at_end"] = os.getloadavg()
    out = Path(args.out) if args.out else Path(__file__).parent / "results" / f"sweep_throughput-{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


def _header(args, tag: str) -> dict:
    return {
        "benchmark": "sweep_throughput", "schema": 1, "tag": tag,
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
        "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(0),
        "torch": torch.__version__, "threads_per_run": THREADS, "load_avg_at_start": os.getloadavg(),
        "flush_denormal": not args.no_flush_denormal, "notes": args.notes,
    }


def _methods_of(spec: str, experiment: str, profile: str) -> list[str]:
    names = [m.strip() for m in spec.split(",") if m.strip()]
    if names == ["all"]:
        return get_experiment(experiment).methods(profile)
    if any(":" in m for m in names):
        return [m.split(":", 1)[1] for m in names if m.split(":", 1)[0] == experiment]
    return names


def _several(args, tag: str, overrides: list[str], seeds: list[int]) -> None:
    """Several experiments in one run (`--experiments`), both arms of each method side by side; the
    JSON is rewritten after every method, so a run cut short keeps what it measured."""
    out = Path(args.out) if args.out else Path(__file__).parent / "results" / f"sweep_throughput-{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result = _header(args, tag)
    result["settings"] = {"experiments": args.experiments, "profile": args.profile, "methods": args.methods,
                          "seeds": seeds, "overrides": overrides, "repeats": args.repeats}
    result["experiments"] = {}
    solo_total = batched_total = 0.0
    for item in [e.strip() for e in args.experiments.split(",") if e.strip()]:
        name, *own = item.split("+")
        ov = overrides + own
        methods = _methods_of(args.methods, name, args.profile)
        exp = get_experiment(name)
        short = ["train.steps=2", "train.epochs=0", "train.eval_every=0", "train.schedule=constant"]
        warm = _stacked(exp, args.profile, methods[0], [0, 1], ov + short)
        run_group(warm)
        run(_stacked(exp, args.profile, methods[0], [0], ov + short)[0])  # the one-off imports and the task's data
        entry = result["experiments"][name] = {"overrides": ov, "methods": {}}
        for method in methods:
            r = bench_method(name, args.profile, method, seeds, ov, args.repeats)
            entry["methods"][method] = r
            solo_total += statistics.median(r["solo_s"])
            batched_total += statistics.median(r["batched_s"])
            print(f"{name:10s} {method:14s} one by one {r['runs_per_hour_solo']:8.0f} runs/h   batched ({len(seeds)}) "
                  f"{r['runs_per_hour_batched']:8.0f} runs/h   ratio {r['ratio']:.2f}   identical {r['identical']}",
                  flush=True)
            s_ = sum(statistics.median(x["solo_s"]) for x in entry["methods"].values())
            b_ = sum(statistics.median(x["batched_s"]) for x in entry["methods"].values())
            entry["ratio_all_methods"] = s_ / b_
            result["ratio_all_experiments"] = solo_total / batched_total
            result["load_avg_at_end"] = os.getloadavg()
            out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"{name}: ratio over its methods {entry['ratio_all_methods']:.2f}", flush=True)
    print(f"all: ratio {result['ratio_all_experiments']:.2f}; wrote {out}", flush=True)


if __name__ == "__main__":
    main()
