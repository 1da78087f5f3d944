"""How much of the machine the `ci` runs use: counted FLOPs against wall time, per model family and for
the whole reproduction, with the speed levers measured one by one.

In one run: the machine's peak float32 matrix-product rate (`companion.cost.roofline.measure_peak`, as
benchmarks/peak.py; on one thread, the thread every run trains on, and on all cores), then for every
model family at its `ci` shape one whole group of runs (`companion.runs.run_group`: build, training,
every evaluation, drift, readouts) under each arm, the arms alternating per repeat:

- `before`: attention on PyTorch's paths (SDPA, its MATH fallback for a learnable mask, GOAT's lanes):
  how NUMERICS 1 computed;
- `after`: attention over small maps in `companion.kernel` (C): how the package trains now (NUMERICS 2);
- `fused-adam` (a measurement, not how the package trains): `after` with torch's fused Adam, which is
  faster but not equal to the bit across groupings (`companion.train._optimizer`).

FLOPs are counted, not estimated: `torch.utils.flop_counter.FlopCounterMode` over one training step
(forward and backward, at the run's batch), one intermediate and one final evaluation, one drift
measurement and the readouts, each on a model alone with every attention forced onto the eager path,
whose two matrix products per map FlopCounterMode counts as the dense 2·i·j·(d_k + d_v) (causal maps
counted whole, as SDPA's own counter does); elementwise work is not counted. A run's FLOPs are
steps × step + the evaluations its schedule makes. A family's utilisation is its run's FLOPs over
(wall time per run × the one-thread peak).

With `--profile`, each family and arm also gets a torch.profiler table of ten training steps of its
group, by kind of operation (matrix products, attention, optimiser, copies, the rest) and the time
no operator accounts for (Python, dispatch, autograd): where the time went.

The whole reproduction: Σ FLOPs of the runs `companion reproduce` trains (`recorded_runs()`, each
config counted) over (its training wall time × the all-core peak), from the report of a reproduction
(`--reproduction _build/reproduce/report.json`, made by `make reproduce`) and, for the time before,
the wall time a stated earlier reproduction took (`--before-seconds`, with `--before-note`).

    python benchmarks/utilisation.py --tag cpu-vm-2core --reproduction _build/reproduce/report.json
    python benchmarks/utilisation.py --families gotu-mask --arms after --repeats 1   # a quick look
    PYTHONPATH=. python3 benchmarks/utilisation.py --device cuda --arms after --tag h200   # a GPU

JSON (schema 1): benchmarks/results/utilisation-<tag>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

import companion.kernel as kernel_module
import companion.train as train_module
from companion.cost.machine import machine_info
from companion.cost.records import write_result
from companion.cost.roofline import measure_peak
from companion.drift import DriftTracker, keeps_maps
from companion.experiments import get_experiment
from companion.experiments.chapters import recorded_runs
from companion.measuring import measure_readouts
from companion.model import Attention, build_model
from companion.runs import THREADS, recipe_context, run_group, stream
from companion.tasks import make_task
from companion.train import total_steps

# family → (experiment, method): one representative config of each shape the `ci` profile trains
FAMILIES = {
    "gotu-mask": ("gotu-2parity", "mask"),
    "gotu-default": ("gotu-2parity", "default"),
    "symmetry": ("symmetry-2parity-moved", "sym-mask"),
    "arithmetic": ("arith-add", "mask"),
    "copy-mixture": ("copymix", "goat"),
    "char-lm": ("charlm", "rope"),
    "passkey": ("passkey", "goat"),
    "vit": ("vit-digits", "mask"),
}
ARMS = ("before", "after", "fused-adam")
KINDS = {  # torch.profiler operator names → kind, first match wins
    "attention": ("_SmallAttention", "scaled_dot_product", "_softmax", "softmax"),
    "optimiser": ("Optimizer.step", "_fused_adam", "adam"),
    "matrix products": ("aten::bmm", "aten::mm", "aten::addmm", "aten::baddbmm", "aten::matmul", "aten::linear"),
    "copies": ("aten::copy_", "aten::cat", "aten::stack", "aten::clone", "aten::contiguous", "aten::index"),
}


def _fused_optimizer(model, cfg):
    cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    return cls(train_module.param_groups(model, cfg.weight_decay, cfg.prior_lr), lr=cfg.lr, betas=cfg.betas,
               fused=True)


@contextlib.contextmanager
def arm(name: str):
    """The package computing as arm `name` says (module docstring); restored on leaving."""
    saved = (kernel_module.applies, train_module._optimizer)
    if name == "before":
        kernel_module.applies = lambda *a, **k: False
    if name == "fused-adam":
        train_module._optimizer = _fused_optimizer
    try:
        yield
    finally:
        kernel_module.applies, train_module._optimizer = saved


@contextlib.contextmanager
def eager_attention(model):
    """Every attention layer of `model` on the eager path (explicit products FlopCounterMode counts)."""
    layers = [m for m in model.modules() if isinstance(m, Attention)]
    before = [m.backend for m in layers]
    for m in layers:
        m.backend = "eager"
    try:
        yield model
    finally:
        for m, b in zip(layers, before):
            m.backend = b


def _flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def _checkpoints(total: int, every: int) -> int:
    """How many evaluations a run makes: at step 0, every `every` steps and at the end (`train._train`)."""
    steps = {0, total} | (set(range(every, total + 1, every)) if every else set())
    return len(steps)


def run_flops(cfg) -> dict:
    """The counted FLOPs of one run of `cfg` (module docstring), by part."""
    with recipe_context():
        task = make_task(cfg.task)
        model = build_model(cfg.model, task, generator=stream(cfg.seed, "init"))
        batch = next(iter(task.train_batches(cfg.train.batch_size, torch.Generator().manual_seed(0))))
        outputs = getattr(task, "outputs", None)
        x, y = batch
        if outputs is not None:
            y = y[:, outputs]

        def step():
            out = model(x) if outputs is None else model(x, outputs=outputs)
            task.loss(out, y).backward()

        with eager_attention(model):
            per_step = _flops(step)
            model.zero_grad(set_to_none=True)
            with torch.no_grad():
                mid = _flops(lambda: train_module.evaluate(model, task, final=False))
                final = _flops(lambda: train_module.evaluate(model, task, final=True))
                tracker = DriftTracker(task.probe_inputs(), maps=keeps_maps(cfg.model))
                drift = _flops(lambda: tracker(0, model, {}))
                readouts = _flops(lambda: measure_readouts(cfg.readouts, model, task, cfg.task.name))
    steps = total_steps(task, cfg.train)
    n_eval = _checkpoints(steps, cfg.train.eval_every)
    total = steps * per_step + (n_eval - 1) * mid + final + n_eval * drift + readouts
    return {"step": per_step, "steps": steps, "eval_mid": mid, "eval_final": final, "evaluations": n_eval,
            "drift": drift, "readouts": readouts, "run": total}


def _kind(name: str) -> str:
    for kind, frags in KINDS.items():
        if any(f in name for f in frags):
            return kind
    return "elementwise and other"


def profile_steps(cfgs, steps: int = 10) -> dict:
    """Where ten training steps of the group `cfgs` spend their time: seconds by kind of operator (self
    time) and the rest of the wall time (Python, dispatch, autograd)."""
    from torch.profiler import ProfilerActivity, profile  # the profiler only here
    from companion.batched import clip_grad_norm_members_, stack

    with recipe_context():
        task = make_task(cfgs[0].task)
        models = [build_model(c.model, task, generator=stream(c.seed, "init")) for c in cfgs]
        net = stack(models) if len(models) > 1 else models[0]
        members = len(models) if len(models) > 1 else 0
        opt = train_module._optimizer(net, cfgs[0].train)
        gens = [stream(c.seed, "order") for c in cfgs]
        parts = [next(iter(task.train_batches(cfgs[0].train.batch_size, g))) for g in gens]
        x, y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        outputs = getattr(task, "outputs", None)
        if outputs is not None:
            y = y[:, outputs]

        def step():
            out = net(x) if outputs is None else net(x, outputs=outputs)
            loss = (torch.stack([task.loss(o, t) for o, t in zip(out.chunk(members), y.chunk(members))]).sum()
                    if members else task.loss(out, y))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfgs[0].train.clip_norm > 0:
                if members:
                    clip_grad_norm_members_(list(net.parameters()), cfgs[0].train.clip_norm, members)
                else:
                    torch.nn.utils.clip_grad_norm_(net.parameters(), cfgs[0].train.clip_norm)
            opt.step()

        for _ in range(3):
            step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            for _ in range(steps):
                step()
            wall = time.perf_counter() - start
    by_kind: dict[str, float] = {}
    for ev in prof.key_averages():
        by_kind[_kind(ev.key)] = by_kind.get(_kind(ev.key), 0.0) + ev.self_cpu_time_total / 1e6
    ops = sum(by_kind.values())
    by_kind["not in an operator (Python, dispatch, autograd)"] = max(wall - ops, 0.0)
    return {"steps": steps, "wall_s": wall, "seconds": {k: round(v, 4) for k, v in by_kind.items()},
            "shares": {k: round(v / wall, 4) for k, v in by_kind.items()}}


def _group(experiment: str, method: str, device: str, overrides: list[str]):
    exp = get_experiment(experiment)
    first = exp.config("ci", method, 0, [*overrides, f"device={device}"])
    return [exp.config("ci", method, s, [*overrides, f"device={device}"]) for s in range(first.stack)]


def gpu_peak(device: torch.device, n: int = 8192, repeats: int = 10) -> dict:
    """The best float32 rate of an n × n product on a GPU, TF32 off (the runs compute in float32)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
        out = torch.empty(n, n, device=device)
        torch.mm(a, b, out=out)
        torch.cuda.synchronize(device)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            torch.mm(a, b, out=out)
            torch.cuda.synchronize(device)
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    return {"peak_flops": 2.0 * n**3 / best, "matmul_n": n, "tf32": False}


def time_group(cfgs) -> float:
    start = time.perf_counter()
    run_group(cfgs)
    return time.perf_counter() - start


def reproduction(report_path: Path | None, peak_all: float, before_seconds: float | None, before_note: str) -> dict:
    """Σ FLOPs of every run `companion reproduce` trains, and its utilisation before and after."""
    cfgs = recorded_runs()
    cache: dict[str, dict] = {}
    total = 0
    for cfg in cfgs:
        key = json.dumps({"model": repr(cfg.model), "task": repr(cfg.task), "train": repr(cfg.train),
                          "readouts": repr(cfg.readouts)})
        if key not in cache:
            cache[key] = run_flops(replace(cfg, device="cpu"))
        total += cache[key]["run"]
    out = {"runs": len(cfgs), "distinct_shapes": len(cache), "flops": total}
    if report_path and report_path.exists():
        rep = json.loads(report_path.read_text())
        wall = float(rep["train_seconds"])
        out["after"] = {"train_seconds": wall, "commit": rep.get("commit"), "date": rep.get("date"),
                        "utilisation": total / (wall * peak_all), "source": str(report_path)}
    if before_seconds:
        out["before"] = {"train_seconds": before_seconds, "utilisation": total / (before_seconds * peak_all),
                         "source": before_note}
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated, of {', '.join(FAMILIES)}")
    p.add_argument("--arms", default="before,after", help=f"comma-separated, of {', '.join(ARMS)}")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--overrides", nargs="*", default=[], help="config overrides for every group (e.g. a shorter budget)")
    p.add_argument("--profile", action="store_true", help="also profile ten training steps per family and arm")
    p.add_argument("--reproduction", type=Path, default=None, help="a reproduce report (JSON) for the whole-run figure")
    p.add_argument("--before-seconds", type=float, default=None)
    p.add_argument("--before-note", default="")
    p.add_argument("--tag", default="cpu")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    arms = [a for a in args.arms.split(",") if a]
    unknown = [f for f in families if f not in FAMILIES] + [a for a in arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown families or arms: {', '.join(unknown)}; families: {', '.join(FAMILIES)}; "
                         f"arms: {', '.join(ARMS)}.")
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    machine, versions = machine_info(args.device)
    if args.device == "cpu":
        peak_one = measure_peak(threads=THREADS)
        peak_all = measure_peak(threads=os.cpu_count() or 1)
    else:
        peak_one = peak_all = gpu_peak(torch.device(args.device))
    result = {"benchmark": "utilisation", "schema": 1, "tag": args.tag, "started": started, "machine": machine,
              "versions": versions, "device": args.device, "kernel": kernel_module.status(),
              "peak_one_thread": peak_one, "peak_all_cores": peak_all, "arms": arms, "overrides": args.overrides,
              "families": {}}
    for fam in families:
        experiment, method = FAMILIES[fam]
        cfgs = _group(experiment, method, args.device, args.overrides)
        flops = run_flops(replace(cfgs[0], device="cpu"))
        walls = {a: [] for a in arms}
        for r in range(args.repeats):
            for a in (arms if r % 2 == 0 else arms[::-1]):
                with arm(a):
                    walls[a].append(time_group(cfgs))
        entry = {"experiment": experiment, "method": method, "members": len(cfgs), "flops": flops, "arms": {}}
        for a in arms:
            per_run = statistics.median(walls[a]) / len(cfgs)
            entry["arms"][a] = {"group_seconds": walls[a], "seconds_per_run": per_run,
                                "utilisation": flops["run"] / (per_run * peak_one["peak_flops"])}
            if args.profile:
                with arm(a):
                    entry["arms"][a]["profile"] = profile_steps(cfgs)
        base = entry["arms"].get("before")
        for a in arms:
            if base and a != "before":
                entry["arms"][a]["speedup_vs_before"] = base["seconds_per_run"] / entry["arms"][a]["seconds_per_run"]
        result["families"][fam] = entry
        print(f"{fam:13s} " + "  ".join(f"{a} {entry['arms'][a]['seconds_per_run']:.2f} s/run "
                                        f"({100 * entry['arms'][a]['utilisation']:.1f} %)" for a in arms), flush=True)
    if args.reproduction or args.before_seconds:
        result["reproduction"] = reproduction(args.reproduction, peak_all["peak_flops"], args.before_seconds,
                                              args.before_note)
    result["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    out = Path(args.out or Path(__file__).parent / "results" / f"utilisation-{args.tag}.json")
    write_result(out, result)
    print(f"-> {out}")


if __name__ == "__main__":
    main()
