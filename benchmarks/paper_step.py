"""Where a `paper`-profile group spends its time on a GPU: one update, one intermediate and one final
evaluation of a seed-stacked group, timed apart, and a torch.profiler table of a few updates.

`companion paper 03` estimated its first group (GOTU 2Parity, five seeds of GOAT-free 12-layer
encoders, 1,920 updates) at 588–624 s on an H200, more than a 10-minute call holds, although the
model's arithmetic is a few seconds of that GPU. This measures the pieces of that estimate:

    PYTHONPATH=. python3 benchmarks/paper_step.py --experiment gotu-2parity --method mask --tag h200

JSON: benchmarks/results/paper-step-<tag>.json (seconds per update, per intermediate and final
evaluation, the profiler's top operators by CPU and by device time, and how many kernels an update
launches).
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

import torch

from companion.batched import stack
from companion.cost.machine import machine_info
from companion.cost.records import write_result
from companion.drift import DriftTracker, keeps_maps
from companion.experiments import get_experiment
from companion.model import build_model
from companion.runs import recipe_context, stream
from companion.tasks import make_task
from companion.train import _optimizer, evaluate


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--experiment", default="gotu-2parity")
    p.add_argument("--method", default="mask")
    p.add_argument("--profile", default="paper")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--updates", type=int, default=20)
    p.add_argument("--tag", default="gpu")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    exp = get_experiment(args.experiment)
    first = exp.config(args.profile, args.method, 0, [f"device={args.device}"])
    cfgs = [exp.config(args.profile, args.method, s, [f"device={args.device}"]) for s in range(first.stack)]
    out: dict = {"benchmark": "paper-step", "schema": 1, "tag": args.tag, "experiment": args.experiment,
                 "method": args.method, "profile": args.profile, "members": len(cfgs),
                 "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    out["machine"], out["versions"] = machine_info(args.device)
    with recipe_context():
        t0 = time.perf_counter()
        task = make_task(cfgs[0].task)
        models = [build_model(c.model, task, generator=stream(c.seed, "init")).to(args.device) for c in cfgs]
        net = stack(models)
        opt = _optimizer(net, cfgs[0].train)
        _sync(args.device)
        out["build_s"] = time.perf_counter() - t0
        gens = [stream(c.seed, "order") for c in cfgs]
        batches = [task.train_batches(cfgs[0].train.batch_size, g) for g in gens]
        members = len(cfgs)

        def update():
            parts = [next(b) for b in batches]
            x = torch.cat([a for a, _ in parts]).to(args.device)
            y = torch.cat([b for _, b in parts]).to(args.device)
            o = net(x)
            loss = torch.stack([task.loss(a, b) for a, b in zip(o.chunk(members), y.chunk(members))]).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        for _ in range(3):
            update()
        _sync(args.device)
        t0 = time.perf_counter()
        for _ in range(args.updates):
            update()
        _sync(args.device)
        out["update_s"] = (time.perf_counter() - t0) / args.updates
        tracker = DriftTracker(task.probe_inputs(), maps=keeps_maps(cfgs[0].model))
        for name, final in (("intermediate_eval_s", False), ("final_eval_s", True)):
            t0 = time.perf_counter()
            evaluate(models[0], task, final=final)
            _sync(args.device)
            out[name + "_one_member"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        tracker(0, models[0], {})
        _sync(args.device)
        out["drift_s_one_member"] = time.perf_counter() - t0
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.device(args.device).type == "cuda" else [])
        with profile(activities=acts) as prof:
            for _ in range(5):
                update()
            _sync(args.device)
        events = prof.key_averages()
        rows = [{"name": e.key, "calls": e.count, "self_cpu_s": e.self_cpu_time_total / 1e6,
                 "device_s": getattr(e, "self_device_time_total", 0.0) / 1e6} for e in events]
        out["top_by_cpu"] = sorted(rows, key=lambda r: -r["self_cpu_s"])[:25]
        out["top_by_device"] = sorted(rows, key=lambda r: -r["device_s"])[:25]
        out["kernels_per_update"] = sum(r["calls"] for r in rows if r["device_s"] > 0) / 5
        out["device_s_per_update"] = sum(r["device_s"] for r in rows) / 5
    out["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    path = Path(args.out or Path(__file__).parent / "results" / f"paper-step-{args.tag}.json")
    write_result(path, out)
    print({k: v for k, v in out.items() if k.endswith("_s") or k.endswith("member") or k.startswith("kernels")
           or k == "device_s_per_update"})
    print(f"-> {path}")


if __name__ == "__main__":
    main()
