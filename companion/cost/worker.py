"""Entry point of the memory worker: `python -m companion.cost.worker SPEC_JSON`.

Run by `companion.cost.measure.memory_in_subprocess` in a fresh process (so that one config's peak is not
hidden by another's freed heap), with the spec's threads and flush-to-zero (`flush_denormal`, default on)
on every one of them; prints one `PROBE_RESULT {json}` line with `measure_memory`'s result and, under
`flush_denormal`, that setting and its measured `flushed_share` (`companion.cost.ftz`).
"""

from __future__ import annotations

import json
import sys

import torch

from companion.cost.ftz import set_flush_denormal
from companion.cost.measure import PROBE_TAG, measure_memory
from companion.cost.variants import DTYPES, GOAT_RECENCY


def main(spec_json: str) -> None:
    s = json.loads(spec_json)
    torch.set_num_threads(s["threads"])
    ftz = set_flush_denormal(s.get("flush_denormal", True))
    GOAT_RECENCY["value"] = s.get("goat_recency", "alibi")
    r = measure_memory(s["variant"], s["L"], s["mode"], B=s["B"], H=s["H"], D=s["D"], device=s["device"],
                       dtype=DTYPES[s["dtype"]], seed=s["seed"], rank=s["rank"], compile_flex=s["compile_flex"],
                       mem_limit_bytes=s["mem_limit_bytes"])
    r["flush_denormal"] = {"on": ftz["on"], "flushed_share": ftz["flushed_share"]}
    print(PROBE_TAG + json.dumps(r), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
