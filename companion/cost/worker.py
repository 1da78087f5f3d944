"""Entry point of the memory worker: `python -m companion.cost.worker SPEC_JSON`.

Run by `companion.cost.measure.memory_in_subprocess` in a fresh process (so that one config's peak is not
hidden by another's freed heap); prints one `PROBE_RESULT {json}` line with `measure_memory`'s result.
"""

from __future__ import annotations

import json
import sys

import torch

from companion.cost.measure import PROBE_TAG, measure_memory
from companion.cost.variants import DTYPES, GOAT_RECENCY


def main(spec_json: str) -> None:
    s = json.loads(spec_json)
    torch.set_num_threads(s["threads"])
    GOAT_RECENCY["value"] = s.get("goat_recency", "alibi")
    r = measure_memory(s["variant"], s["L"], s["mode"], B=s["B"], H=s["H"], D=s["D"], device=s["device"],
                       dtype=DTYPES[s["dtype"]], seed=s["seed"], rank=s["rank"], compile_flex=s["compile_flex"],
                       mem_limit_bytes=s["mem_limit_bytes"])
    print(PROBE_TAG + json.dumps(r), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
