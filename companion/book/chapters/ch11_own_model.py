"""Chapter 11: a prior in a model of your own (`companion.interop`), checked against `companion.attend`.

`load` gathers the chapter's inputs: its seed and the committed cost of each path
(`benchmarks/results/interop-paths-cpu.json`, written by `benchmarks/interop_paths.py`). `decide` runs every path
on float64 inputs drawn from the seed, for a learnable mask and GOAT's prior, and compares each output and the
prior's gradient with `attend`'s; the same comparison without the prior is the null it must fail. Nothing trains.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from companion import GoatPrior, LearnableMask, attend, attention_function, fastpath_off, mha_mask, prior_bias
from companion.book.chapter import Decision, Findings, Runs
from companion.book.chapters import third_party
from companion.book.parameters import check_parameters, one_seed
from companion.book.prose import num
from companion.cost import records
from companion.cost.interop import NULL, PATHS, flex_eager, sdpa_ops
from companion.paths import repo_root

__all__ = ["bound", "SEEDS", "SHAPE", "TOLERANCE", "COST_RESULT", "load", "decide", "priors", "agreement", "module_rows",
           "kernels", "traps", "cost_table", "difference_table", "text_table"]

SEEDS = (0,)
SHAPE = (2, 4, 16, 8)  # batch, heads, positions, head dim of the agreement check
TOLERANCE = 1e-12  # largest |difference| from attend, output or gradient, in float64
COST_RESULT = "interop-paths-cpu"


def load(profile: str = "ci", seeds=None, *, store=None) -> Runs:
    """The seed (block "inputs") and the committed cost benchmark (block "cost"); `store` is the common
    interface's and unused: nothing trains, and both profiles compute the same."""
    seed = one_seed(seeds, "Chapter 11")
    check_parameters(profile, [seed])
    return Runs(profile, [seed], {"inputs": seed,
                                  "cost": records.load(repo_root() / records.RESULTS / f"{COST_RESULT}.json")})


def priors(seed: int, causal: bool, heads: int = SHAPE[1], n: int = SHAPE[2], d: int = SHAPE[3]) -> dict:
    """A per-head learnable mask with random logits and a GOAT prior at its seeded start, float64."""
    g = torch.Generator().manual_seed(seed)
    return {"learnable mask": LearnableMask(torch.randn(heads, n, n, generator=g) * 2).double(),
            "GOAT prior": GoatPrior(heads, d, train_len=n, rank=2, causal=causal, init="seeded", init_scale=0.5,
                                    generator=g).double()}


def _qkv(seed: int, shape=SHAPE):
    g = torch.Generator().manual_seed(seed + 1)
    return [torch.randn(*shape, generator=g, dtype=torch.float64) for _ in range(3)]


def _probe(out: torch.Tensor) -> torch.Tensor:
    """A loss whose gradient differs at every output entry (a sum would hide errors that cancel)."""
    return (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum()


def _grads(prior, out) -> list[torch.Tensor]:
    params = [p for p in prior.parameters() if p.requires_grad]
    return [torch.zeros_like(p) if g is None else g
            for p, g in zip(params, torch.autograd.grad(_probe(out), params, allow_unused=True))]


def _gap(a, b) -> float:
    """The largest |difference| between two lists of tensors (outputs, gradients)."""
    return max(float((x - y).detach().abs().max()) for x, y in zip(a, b)) if a else 0.0


def agreement(seed: int) -> list[dict]:
    """Each path of `PATHS` (and the null, without the prior) against `attend`, bidirectional and causal: the
    largest |difference| of the outputs and of the prior's gradients."""
    rows = []
    for causal in (False, True):
        q, k, v = _qkv(seed)
        for name, prior in priors(seed, causal).items():
            ref = PATHS["companion.attend"](prior, q, k, v, causal)
            ref_grads = _grads(prior, ref)
            for path, fn in [*PATHS.items(), NULL]:
                if path == "companion.attend":
                    continue
                out = fn(prior, q, k, v, causal)
                grads = _grads(prior, out) if out.requires_grad else None
                rows.append({"path": path, "attention": "causal" if causal else "bidirectional", "prior": name,
                             "output": _gap([out], [ref]),
                             "gradient": _gap(grads, ref_grads) if grads is not None else float("nan")})
    return rows


def _heads(x, proj, heads):
    b, n, width = x.shape
    return proj(x).view(b, n, heads, width // heads).transpose(1, 2)


def module_rows(seed: int) -> list[dict]:
    """The prior inside modules: `nn.MultiheadAttention` (train mode, and eval under no_grad, its inference path),
    a `TransformerEncoderLayer` (eval against train), and the third-party-style module with the prior registered
    as its attention function, each against `attend` on the module's own projections."""
    b, heads, n, d = SHAPE
    g = torch.Generator().manual_seed(seed + 2)
    x = torch.randn(b, n, heads * d, generator=g, dtype=torch.float64)
    rows = []
    for name, prior in priors(seed, causal=False).items():
        torch.manual_seed(seed)  # the modules' own initialisers draw from the global generator
        mha = nn.MultiheadAttention(heads * d, heads, batch_first=True, dtype=torch.float64)
        out, _ = mha(x, x, x, attn_mask=mha_mask(prior, n, batch=b, heads=heads, dtype=x.dtype), need_weights=False)
        w = mha.in_proj_weight.chunk(3)
        bias = mha.in_proj_bias.chunk(3)
        qkv = [_heads(x, lambda t, i=i: t @ w[i].T + bias[i], heads) for i in range(3)]
        ref = mha.out_proj(attend(*qkv, bias=prior.bias(n, n)).transpose(1, 2).reshape(b, n, heads * d))
        rows.append({"path": "nn.MultiheadAttention", "prior": name, "output": _gap([out], [ref]),
                     "gradient": _gap(_grads(prior, out), _grads(prior, ref))})
        mha.eval()
        with torch.no_grad():
            fast, _ = mha(x, x, x, attn_mask=mha_mask(prior, n, batch=b, heads=heads, dtype=x.dtype),
                          need_weights=False)
        rows.append({"path": "nn.MultiheadAttention, eval + no_grad", "prior": name,
                     "output": _gap([fast], [ref]), "gradient": float("nan")})
        layer = nn.TransformerEncoderLayer(heads * d, heads, 4 * heads * d, dropout=0.0, batch_first=True,
                                           dtype=torch.float64)
        src_mask = mha_mask(prior, n, batch=b, heads=heads, dtype=x.dtype)
        trained = layer(x, src_mask=src_mask)
        layer.eval()
        with torch.no_grad(), fastpath_off():
            inferred = layer(x, src_mask=src_mask)
        rows.append({"path": "TransformerEncoderLayer, eval + no_grad in fastpath_off, against train", "prior": name,
                     "output": _gap([inferred], [trained]), "gradient": float("nan")})
        third_party.ATTENTION_FUNCTIONS["prior"] = attention_function(prior)  # registered as a user would
        try:
            module = third_party.ThirdPartyAttention(heads * d, heads, attn_implementation="prior",
                                                     dtype=torch.float64)
            out = module(x)
        finally:
            del third_party.ATTENTION_FUNCTIONS["prior"]
        qkv = [module.split(p(x)) for p in (module.q_proj, module.k_proj, module.v_proj)]
        ref = module.o_proj(attend(*qkv, bias=prior.bias(n, n)).transpose(1, 2).reshape(b, n, heads * d))
        rows.append({"path": "third-party module, attention function", "prior": name,
                     "output": _gap([out], [ref]), "gradient": _gap(_grads(prior, out), _grads(prior, ref))})
    return rows


def _refusal(call) -> str:
    """The first line of what `call` raises, or "ran" when it raises nothing."""
    try:
        call()
    except (RuntimeError, NotImplementedError, ValueError) as err:
        return f"{type(err).__name__}: {str(err).splitlines()[0].strip()}"
    return "ran"


def _kernel(ops: list[str]) -> str:
    names = {"aten::_scaled_dot_product_attention_math": "math (explicit scores)",
             "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (fused, CPU)"}
    return ", ".join(names[o] for o in ops if o in names) or ", ".join(ops)


def kernels(seed: int) -> list[dict]:
    """Which SDPA kernel runs on this CPU (float32, `torch.profiler`) with a learnable prior's bias, with the same
    bias detached (a frozen prior) and without a mask; and the prior's gradient on the default kernel against the
    math kernel forced."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (t.float() for t in _qkv(seed))
    mask = priors(seed, causal=False)["learnable mask"].float()
    n = q.shape[-2]
    cases = {"learnable prior (its bias needs a gradient)": prior_bias(mask, n),
             "frozen prior (the bias detached)": prior_bias(mask, n).detach(), "no mask": None}
    rows = [{"case": case, "kernel": _kernel(sdpa_ops(q, k, v, m))} for case, m in cases.items()]
    rows.insert(2, {"case": "inference (no gradient anywhere)", "kernel": _kernel(sdpa_ops(q, k, v, cases[
        "frozen prior (the bias detached)"], grad=False))})
    default = _grads(mask, F.scaled_dot_product_attention(q, k, v, attn_mask=prior_bias(mask, n)))
    with sdpa_kernel(SDPBackend.MATH):
        math = _grads(mask, F.scaled_dot_product_attention(q, k, v, attn_mask=prior_bias(mask, n)))
    return rows, _gap(default, math)


def traps(seed: int) -> list[dict]:
    """What each API does when a prior is handed to it the naive way (measured or the error it raises, first
    line), beside what the adapters do instead."""
    b, heads, n, d = SHAPE
    q, k, v = (t.float() for t in _qkv(seed))
    bias = prior_bias(priors(seed, causal=False)["learnable mask"].float(), n).detach()
    x = torch.randn(b, n, heads * d, generator=torch.Generator().manual_seed(seed + 3))
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(heads * d, heads, batch_first=True)
    band = (torch.arange(n)[:, None] - torch.arange(n)).abs() <= 1
    weights = mha(x, x, x, attn_mask=band, need_weights=True)[1].detach()
    on_band_mha = float(weights[:, band].sum() / weights.sum())
    _, sdpa_weights = attend(q, k, v, bias=band, return_weights=True)  # SDPA's convention: True = attend
    on_band_sdpa = float(sdpa_weights[..., band].sum() / sdpa_weights.sum())
    good = mha(x, x, x, attn_mask=mha_mask(LearnableMask(bias), n, batch=b, heads=heads), need_weights=False)[0]
    head_major = bias.repeat_interleave(b, 0)  # (heads · batch): the order MultiheadAttention does not read
    swapped = mha(x, x, x, attn_mask=head_major, need_weights=False)[0]
    causal_prior = priors(seed, causal=True)["GOAT prior"].float()
    padding = torch.ones(b, n, dtype=torch.bool)
    padding[:, 0] = False  # left padding: the first query's only causal key is padding
    causal_bias = prior_bias(causal_prior, n, causal=True).detach()
    blocked = causal_bias.masked_fill(~padding[:, None, None, :], float("-inf"))
    naive = F.scaled_dot_product_attention(q, k, v, attn_mask=blocked)
    explicit = (q @ k.transpose(-1, -2) * d ** -0.5 + blocked).softmax(-1) @ v
    adapted, _ = attention_function(causal_prior, causal=True)(nn.Module(), q, k, v, padding[:, None, None, :])
    layer = nn.TransformerEncoderLayer(heads * d, heads, 4 * heads * d, dropout=0.0, batch_first=True).eval()
    with torch.no_grad():
        fast = layer(x, src_mask=mha_mask(LearnableMask(bias), n, batch=b, heads=heads))
    flex_grad = _refusal(lambda: flex_eager(q.requires_grad_(), k, v, lambda s, *_: s).sum().backward())
    pct = lambda share: f"{100 * share:.0f} %"  # noqa: E731
    return [
        {"trap": "a boolean mask: True means attend to SDPA, blocked to nn.MultiheadAttention",
         "naive": f"the same band mask: {pct(on_band_sdpa)} of attention on the band in SDPA, "
                  f"{pct(on_band_mha)} in MultiheadAttention",
         "adapter": "a float bias, added to the scores alike by both"},
        {"trap": "a float mask and is_causal=True together",
         "naive": _refusal(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=True)),
         "adapter": "prior_bias(causal=True) puts the causal rule in the bias"},
        {"trap": "a float64 bias with float32 queries",
         "naive": _refusal(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias.double())),
         "adapter": "prior_bias(dtype=q.dtype) casts it"},
        {"trap": "a per-head (heads, L, L) mask to nn.MultiheadAttention",
         "naive": _refusal(lambda: mha(x, x, x, attn_mask=bias)),
         "adapter": "mha_mask gives (batch · heads, L, L)"},
        {"trap": "that mask stacked head-major instead of batch-major",
         "naive": f"runs; the output differs by up to {num(_gap([swapped], [good]), 2)}",
         "adapter": "mha_mask stacks batch-major, head by head"},
        {"trap": "a padded query whose causal keys are all padding",
         "naive": f"{int(explicit.isnan().any(-1).sum())} rows of NaN from an explicit softmax; "
                  f"{int(naive.isnan().any(-1).sum())} from SDPA, whose math kernel returns zeros there",
         "adapter": f"attention_function: {int(adapted.isnan().any(-1).sum())} NaN rows; those queries get zeros"},
        {"trap": "a float mask in TransformerEncoderLayer's inference fast path (eval, no_grad)",
         "naive": f"{pct(float(fast.isnan().float().mean()))} of the outputs NaN: the fast path reads the mask "
                  "as boolean (PyTorch bug 118628)",
         "adapter": "fastpath_off() around inference: the ordinary path, equal to train mode (above)"},
        {"trap": "FlexAttention's backward on a CPU",
         "naive": flex_grad,
         "adapter": "the captured bias still gets its gradient (q, k, v not requiring one)"},
    ]


def bound(x: float) -> str:
    """A difference as the page shows it: "0" when exact, "—" when not measured, else the power of ten it stays
    under ("< 1e−15"): the last bits of float64 rounding differ between CPUs' kernels, their order does not; a
    difference of 0.001 or more (the null's) to two decimals."""
    if x != x:
        return "—"
    if x == 0:
        return "0"
    if x >= 1e-3:
        return num(x, 2)
    return f"< 1e{math.ceil(math.log10(x)) if math.log10(x) % 1 else int(math.log10(x)) + 1}".replace("e-", "e−")


def difference_table(rows: list[dict], index=("path", "attention")):
    """Rows of `agreement` or `module_rows` as a table: one row per path (and attention), for each prior the
    largest |difference| of the output and of the prior's gradient."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    index = [c for c in index if c in frame]
    wide = frame.pivot_table(index=index, columns="prior", values=["output", "gradient"], aggfunc="first",
                             dropna=False, sort=False)
    wide = wide.swaplevel(0, 1, axis=1).reindex(columns=[(p, m) for p in dict.fromkeys(frame["prior"])
                                                         for m in ("output", "gradient")])
    return wide.map(bound)


def text_table(rows: list[dict], index: str):
    """Rows of text (`kernels`, `traps`) as a table indexed by `index`."""
    import pandas as pd

    return pd.DataFrame(rows).set_index(index)


def cost_table(result: dict, mode: str):
    """Milliseconds per forward and backward of each path, and the ratio to `attend`, per prior, from the committed
    benchmark (`mode` "full" or "prior only"); a path the CPU refuses reads "refused"."""
    import pandas as pd

    rows = {}
    for r in result["results"]:
        if r["mode"] != mode:
            continue
        cell = rows.setdefault(r["path"], {})
        ok = r["status"] == "ok"
        cell[(r["prior"], "ms")] = num(1e3 * r["median_s"], 1) if ok else "refused"
        cell[(r["prior"], "× attend")] = num(result["ratios"][mode][r["prior"]][r["path"]], 2) if ok else "—"
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    frame.index.name = "path"
    return frame


def decide(runs: Runs) -> Findings:
    """The agreement of every path with `attend`, the kernels, the traps and the costs; no claims of the sources
    (the chapter checks the package, not a paper). Parts: `agreement`, `modules`, `kernels`, `traps`, `cost`."""
    seed = runs["inputs"]
    rows = agreement(seed)
    modules = module_rows(seed)
    kernel_rows, kernel_gap = kernels(seed)
    cost = runs["cost"]
    checked = [r for r in rows + modules if r["path"] != NULL[0]]
    null = [r for r in rows if r["path"] == NULL[0]]
    worst_grad = max(r["gradient"] for r in checked if r["gradient"] == r["gradient"])
    ratios = cost["ratios"]["full"]
    d = Decision()
    d.glue({"ch11_tolerance": f"{TOLERANCE:.0e}".replace("e-", "e−"),
            "ch11_worst_output": bound(max(r["output"] for r in checked)),
            "ch11_worst_gradient": bound(worst_grad),
            "ch11_within": str(all(r["output"] <= TOLERANCE and (r["gradient"] != r["gradient"]
                                                                 or r["gradient"] <= TOLERANCE) for r in checked)),
            "ch11_null_smallest": num(min(r["output"] for r in null), 2),
            "ch11_kernel_learnable": kernel_rows[0]["kernel"], "ch11_kernel_frozen": kernel_rows[1]["kernel"],
            "ch11_kernel_gap": bound(kernel_gap),
            "ch11_cost_cpu": cost["machine"]["cpu_model"], "ch11_cost_threads": str(cost["settings"]["threads"]),
            "ch11_cost_shape": "({batch}, {heads}, {length}, {d_head})".format(**cost["settings"]),
            "ch11_sdpa_ratio": num(ratios["learnable mask"]["SDPA attn_mask"], 2),
            "ch11_noprior_ratio": num(ratios["learnable mask"][NULL[0]], 2),
            "ch11_flex_ratio": num(cost["ratios"]["prior only"]["learnable mask"]["FlexAttention score_mod"], 1)})
    return d.done(agreement=rows, modules=modules, kernels=kernel_rows, traps=traps(seed), cost=cost)
