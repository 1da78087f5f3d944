"""Training steps per second of the companion encoder against `torch.nn.TransformerEncoderLayer`.

Settings (16 positions = 15 tokens + CLS, batch 256, regression head, MSE, Adam):
- ci: d_model 64, 2 layers, 4 heads × 16, FF 128 (ours and the reference have equal shapes);
- gotu: d_model 256, 12 layers, 6 heads × 64 (inner 384 ≠ d_model), FF 256. The reference forces
  head_dim = d_model / heads and 256 is not divisible by 6, so it runs 4 heads × 64 (inner 256):
  fewer FLOPs than ours, reported but not a like-for-like ratio;
- gotu-matched: both at 4 heads × 64 = d_model / heads, the like-for-like GOTU-size comparison.
Ours and the reference alternate in each repeat (background load hits both); steps/s is the median.

    python benchmarks/train_step.py --threads 2 --repeats 5 [--settings ci,gotu,gotu-matched] [--out FILE]

Both compute with flush-to-zero on every thread (companion/cost/ftz.py) unless --no-flush-denormal.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from companion.config import ModelConfig
from companion.cost.ftz import set_flush_denormal
from companion.model import Transformer, init_weights_
from companion.tasks import TaskSpec

SETTINGS = {
    #               d_model layers heads d_head ff  ref_heads
    "ci":           (64,    2,     4,    16,    128, 4),
    "gotu":         (256,   12,    6,    64,    256, 4),
    "gotu-matched": (256,   12,    4,    64,    256, 4),
}
SEQ, BATCH = 15, 256


class Reference(nn.Module):
    """The same embedding, CLS, positions, final LN and head around `nn.TransformerEncoder`."""

    def __init__(self, d: int, layers: int, heads: int, ff: int, vocab: int, n: int):
        super().__init__()
        self.tok_emb, self.cls = nn.Embedding(vocab, d), nn.Parameter(torch.zeros(d))
        self.pos_emb = nn.Parameter(torch.zeros(n + 1, d))
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, 1)

    def forward(self, x):
        h = self.tok_emb(x)
        h = torch.cat([self.cls.expand(h.shape[0], 1, -1), h], dim=1) + self.pos_emb
        return self.head(self.ln_f(self.encoder(h))[:, 0])


def _models(name: str):
    d, layers, heads, d_head, ff, ref_heads = SETTINGS[name]
    spec = TaskSpec(inputs="tokens", output="regression", vocab_size=2, seq_len=SEQ, n_outputs=1)
    ours = Transformer(ModelConfig(d_model=d, n_layers=layers, n_heads=heads, d_head=d_head, d_ff=ff), spec)
    init_weights_(ours, torch.Generator().manual_seed(0))
    ref = Reference(d, layers, ref_heads, ff, 2, SEQ)
    return ours, ref


def _stepper(model: nn.Module, x, y):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        loss = F.mse_loss(model(x).squeeze(-1), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def _time(step, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - start) / n


def bench(name: str, repeats: int, steps: int, warmup: int) -> dict:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 2, (BATCH, SEQ), generator=g)
    y = torch.randn(BATCH, generator=g)
    ours, ref = _models(name)
    s_ours, s_ref = _stepper(ours, x, y), _stepper(ref, x, y)
    for _ in range(warmup):
        s_ours(), s_ref()
    t_ours, t_ref = [], []
    for _ in range(repeats):  # alternate, so background load affects both alike
        t_ours.append(_time(s_ours, steps))
        t_ref.append(_time(s_ref, steps))
    d, layers, heads, d_head, ff, ref_heads = SETTINGS[name]
    out = {
        "ours": {"steps_per_s": 1 / statistics.median(t_ours), "heads": heads, "d_head": d_head,
                 "params": sum(p.numel() for p in ours.parameters())},
        "reference": {"steps_per_s": 1 / statistics.median(t_ref), "heads": ref_heads,
                      "d_head": d // ref_heads, "params": sum(p.numel() for p in ref.parameters())},
        "d_model": d, "layers": layers, "d_ff": ff, "positions": SEQ + 1, "batch": BATCH,
        "repeats": repeats, "steps_per_repeat": steps, "warmup_steps": warmup,
        "ratio_per_repeat": [r / o for o, r in zip(t_ours, t_ref)],
        "like_for_like": heads * d_head == ref_heads * (d // ref_heads),
    }
    out["ratio"] = out["ours"]["steps_per_s"] / out["reference"]["steps_per_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="torch.set_num_threads (default: all cores)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=0, help="steps per repeat (default 20 for ci, 2 for gotu)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--settings", default="ci,gotu,gotu-matched")
    ap.add_argument("--no-flush-denormal", action="store_true",
                    help="leave flush-to-zero off (torch's default) to see what subnormal floats cost here")
    ap.add_argument("--out", default=None,
                    help="JSON path (default benchmarks/results/train_step-<host>.json)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ftz = set_flush_denormal(not args.no_flush_denormal)
    torch.manual_seed(0)  # the reference's own layers draw from the global generator
    host = socket.gethostname()
    result = {
        "benchmark": "train_step", "host": host, "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
        "threads": args.threads, "torch": torch.__version__, "device": "cpu",
        "load_avg_at_start": os.getloadavg(), "flush_denormal": ftz["on"],
        "flush_denormal_check": {k: v for k, v in ftz.items() if k != "on"}, "settings": {},
    }
    for name in [s.strip() for s in args.settings.split(",") if s.strip()]:
        steps = args.steps or (20 if name == "ci" else 2)
        r = bench(name, args.repeats, steps, args.warmup)
        result["settings"][name] = r
        o, ref = r["ours"], r["reference"]
        note = "" if r["like_for_like"] else "  [not like-for-like]"
        print(f"{name:13s} ours {o['steps_per_s']:8.2f} steps/s ({o['heads']}×{o['d_head']})  reference "
              f"{ref['steps_per_s']:8.2f} steps/s ({ref['heads']}×{ref['d_head']})  ratio {r['ratio']:.3f}{note}",
              flush=True)
    result["load_avg_at_end"] = os.getloadavg()
    out = Path(args.out) if args.out else Path(__file__).parent / "results" / f"train_step-{host}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
