"""flex_attention with a prior in its `score_mod`: the functions behind the `flex` and `mask-flex` variants.

Two score modifiers: GOAT's tables (κ_h(i − j) from an (H, 2L − 1) table plus the key-only sink u_h(j),
(H, L)), and a learnable (L, L) bias b = log σ(M) shared by the heads. Each is compiled with
`torch.compile` once per process (one graph per (L, dtype, grad mode, kernel options)), never falling
back to eager silently; on CPU torch 2.14 has their forward only.

On CUDA, Triton's default tiles for a score modifier that reads captured tables can need more shared
memory than the GPU has (an H200, torch 2.11, GOAT in bfloat16: 246,784 bytes needed, 232,448 there:
"No valid triton configs … out of resource"). `fit_kernel_options` then tries smaller tiles
(`KERNEL_LADDER`), forward and backward, and keeps the first that compiles and runs.
"""

from __future__ import annotations

from typing import Callable

import torch

__all__ = ["KERNEL_LADDER", "flex_fn", "fit_kernel_options", "is_resource_error", "reset_flex_compile",
           "describe_options"]

# Tried in order on CUDA: inductor's default for the GPU, dtype and head dim; then 64 × 64 forward
# tiles (backward 32 × 64 / 64 × 32, a shape of inductor's own Hopper search space); then 32 × 32 with
# one pipeline stage. Plain keys (BLOCK_M, BLOCK_N: forward; BLOCK_M1 … BLOCK_N2: backward), which
# torch accepts since 2.5.
KERNEL_LADDER: tuple[dict, ...] = (
    {},
    {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 32},
    {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_M1": 16, "BLOCK_N1": 32, "BLOCK_M2": 32, "BLOCK_N2": 16,
     "num_stages": 1},
)

_COMPILED: dict[str, Callable] = {}


def _flex_goat(q, k, v, kap, u, block_mask, kernel_options=None):
    from torch.nn.attention.flex_attention import flex_attention

    n = q.shape[-2]

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + kap[h, q_idx - kv_idx + n - 1] + u[h, kv_idx]

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, kernel_options=kernel_options)


def _flex_bias(q, k, v, bias, block_mask, kernel_options=None):
    from torch.nn.attention.flex_attention import flex_attention

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + bias[q_idx, kv_idx]

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, kernel_options=kernel_options)


_KINDS = {"goat": _flex_goat, "bias": _flex_bias}


def flex_fn(kind: str, compiled: bool) -> Callable:
    """flex_attention with the `kind` score modifier ("goat": fn(q, k, v, kap, u, block_mask, options);
    "bias": fn(q, k, v, bias, block_mask, options)); compiled once per process (recompiles per shape)."""
    if kind not in _KINDS:
        raise ValueError(f"unknown flex score modifier {kind!r}; valid: {', '.join(_KINDS)}.")
    if not compiled:
        return _KINDS[kind]
    if kind not in _COMPILED:
        from torch import _dynamo

        _dynamo.config.recompile_limit = 64  # one graph per (L, dtype, grad mode, kernel options)
        _dynamo.config.fail_on_recompile_limit_hit = True  # never fall back to eager silently
        _COMPILED[kind] = torch.compile(_KINDS[kind], dynamic=False)
    return _COMPILED[kind]


def is_resource_error(e: BaseException) -> bool:
    """Whether a compile failed because no kernel configuration fits the GPU (shared memory,
    registers): the failure smaller tiles can cure."""
    msg = str(e)
    return "out of resource" in msg or "No valid triton configs" in msg


def fit_kernel_options(probe: Callable[[dict], object], ladder: tuple[dict, ...] = KERNEL_LADDER
                       ) -> tuple[dict, list[dict]]:
    """The first options of `ladder` with which `probe(options)` runs, and the attempts made.

    `probe` compiles and runs one forward + backward with the options; it raises when that fails.
    A failure that is not about resources (`is_resource_error`) ends the search: smaller tiles would
    fail the same way, and the call that follows reports it. When every rung runs out of resources,
    the last is returned (its failure is then the data point). Each attempt is {options, error}.
    """
    attempts: list[dict] = []
    for options in ladder:
        try:
            probe(options)
        except Exception as e:  # the attempt's outcome is the data point
            attempts.append({"options": dict(options), "error": f"{type(e).__name__}: {e}"[:300]})
            reset_flex_compile()
            if not is_resource_error(e):
                return dict(options), attempts
            continue
        attempts.append({"options": dict(options), "error": None})
        return dict(options), attempts
    return dict(ladder[-1]), attempts


def describe_options(options: dict) -> str:
    """"default tiles", or the forward tile as "tiles 64×64" (with the stage count when set)."""
    if not options:
        return "default tiles"
    tile = f"tiles {options.get('BLOCK_M', '?')}×{options.get('BLOCK_N', '?')}"
    return tile + (f", {options['num_stages']} stage" if "num_stages" in options else "")


def reset_flex_compile() -> None:
    """After a variant raised: a compile that raised leaves dynamo's cache for the flex wrapper in a
    state where later calls ran ~5× slower (unfused) on CPU, so compile afresh (no-op before any compile)."""
    if _COMPILED:
        from torch import _dynamo

        _dynamo.reset()
