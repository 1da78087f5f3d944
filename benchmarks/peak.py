"""The machine's peak float32 matrix-product rate and copy bandwidth: the roofline Chapter 10 divides by.

The chapter reads the committed result (benchmarks/results/peak-<tag>.json), so the page is the same on
every machine; `-p rerun True` measures the executing machine instead. Best of `--repeats` of an
n × n matrix product and of a copy, with `--threads` threads (`companion.cost.roofline.measure_peak`).

    python benchmarks/peak.py --tag cpu-vm-2core

JSON (schema 1): {benchmark, schema, tag, started, finished, machine{...}, versions{...}, peak{peak_flops,
bandwidth_bytes_s, threads, matmul_n, copy_mib}}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
from pathlib import Path

from companion.cost.machine import machine_info
from companion.cost.records import write_result
from companion.cost.roofline import measure_peak


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--tag", default="cpu")
    p.add_argument("--out", default=None, help="JSON path (default benchmarks/results/peak-<tag>.json)")
    args = p.parse_args(argv)
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    machine, versions = machine_info("cpu")
    peak = measure_peak(threads=args.threads, repeats=args.repeats)
    result = {"benchmark": "peak", "schema": 1, "tag": args.tag, "started": started, "machine": machine,
              "versions": versions, "peak": peak,
              "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    out = Path(args.out or Path(__file__).parent / "results" / f"peak-{args.tag}.json")
    write_result(out, result)
    print(f"{peak['peak_flops'] / 1e9:.0f} GFLOP/s, {peak['bandwidth_bytes_s'] / 1e9:.1f} GB/s "
          f"({peak['threads']} threads) -> {out}")


if __name__ == "__main__":
    main()
