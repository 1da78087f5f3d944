"""The attention-cost benchmark (companion.cost, benchmarks/attention.py): every variant equals the float64
eager reference (output and gradients of q, k, v and of the prior's parameters) at a tiny length, and the
gate catches a wrong bias and a prior that receives no gradient; the CLI parses, and a tiny sweep runs
end to end."""

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from companion import cost as bench

CLI = Path(__file__).resolve().parent.parent / "benchmarks" / "attention.py"
L, SHAPE = 32, dict(B=2, H=4, D=32)
PRIOR_PARAMS = {"goat-lanes", "goat-sdpa", "goat-chunked", "eager-goat", "mask-sdpa", "eager-bias", "mask-sdpa-math", "mask-attend"}


def _gate(variant, mode, **kw):
    # flex eagerly: the compiled CPU kernel takes ~20 s to build; the score_mod's math is the same
    return bench.gate(variant, L, mode=mode, compile_flex=False, **SHAPE, **kw)


@pytest.mark.parametrize("variant", sorted(bench.VARIANTS))
def test_every_variant_passes_the_gate_forward(variant):
    res = _gate(variant, "fwd")
    assert res["passed"], res["reason"]
    assert res["errors"]["out"] < 1e-5


@pytest.mark.parametrize("variant", sorted(bench.VARIANTS))
def test_every_variant_passes_the_gate_with_gradients(variant):
    res = _gate(variant, "fwd+bwd")
    if variant in ("flex", "mask-flex") and res["status"] == "error":
        # torch 2.14 on CPU: flex_attention has no backward; the gate reports it instead of crashing
        assert "NotImplementedError" in res["reason"] and "backward" in res["reason"]
        return
    assert res["passed"], res["reason"]
    assert {"dq", "dk", "dv"} <= res["errors"].keys()
    params = [n for n in res["errors"] if n not in ("out", "dq", "dk", "dv")]
    assert bool(params) == (variant in PRIOR_PARAMS), params  # prior gradients are compared where they exist


def test_gate_in_float64_is_exact():
    res = _gate("goat-lanes", "fwd+bwd", dtype=torch.float64)
    assert res["passed"], res["reason"]
    assert max(e for e in res["errors"].values()) < 1e-10


class WrongSign(bench.MaskSdpa):
    """−log σ(M) instead of log σ(M): up-weights the keys the mask should down-weight."""

    name = "wrong-sign"

    def forward(self, q, k, v):
        bias = (-self.module(self.L)[0]).masked_fill(self.blocked, -math.inf).to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


class Detached(bench.MaskSdpa):
    """The right forward, but the mask is cut from autograd: M would never train."""

    name = "detached"

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask(q.dtype).detach())


class NoCausal(bench.Sdpa):
    name = "no-causal"

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize("mode", bench.MODES)
def test_gate_catches_a_bias_with_the_wrong_sign(mode):
    res = _gate(WrongSign, mode)
    assert not res["passed"] and res["status"] == "failed"
    assert "out" in res["reason"] and res["errors"]["out"] > 1e-2


def test_gate_catches_a_prior_without_gradient():
    res = _gate(Detached, "fwd+bwd")
    assert not res["passed"]
    assert "no gradient reached logits" in res["reason"]
    assert _gate(Detached, "fwd")["passed"]  # the forward alone cannot tell


def test_gate_catches_a_missing_causal_mask():
    res = _gate(NoCausal, "fwd")
    assert not res["passed"] and "out" in res["reason"]


def test_gate_reports_a_variant_that_cannot_run():
    class Broken(bench.Sdpa):
        name = "broken"

        def forward(self, q, k, v):
            raise RuntimeError("no kernel for this input")

    res = _gate(Broken, "fwd")
    assert res["status"] == "error" and "no kernel for this input" in res["reason"]


def test_backend_detection_on_cpu():
    """A learnable (grad-requiring) float mask can only run on MATH on CPU (notes B1)."""
    case = bench.Case("mask-sdpa", L, "fwd+bwd", **SHAPE, device="cpu", dtype=torch.float32)
    info = bench.detect_backend(lambda: case.call(check=True), "cpu")
    assert info["result"] == []  # output and gradients finite
    assert info["sdp_choice_names"] == ["MATH"] and info["profiler_backends"] == ["MATH"]
    plain = bench.Case("sdpa", L, "fwd", **SHAPE, device="cpu", dtype=torch.float32)
    info = bench.detect_backend(plain.call, "cpu")
    assert len(info["sdp_choice"]) == 1 and info["profiler_backends"]  # one SDPA call, a recognised kernel
    assert info["sdp_choice_names"][0] in info["profiler_backends"][0]  # choice and kernel agree


def test_mask_attend_goes_through_attend_sdpa():
    """mask-attend is mask-sdpa's function through attend(backend="sdpa"): same output, one SDPA call."""
    a = bench.Case("mask-attend", L, "fwd", **SHAPE, device="cpu", dtype=torch.float64)
    b = bench.Case("mask-sdpa", L, "fwd", **SHAPE, device="cpu", dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(a.var(a.q, a.k, a.v), b.var(b.q, b.k, b.v), rtol=0, atol=1e-12)
    info = bench.detect_backend(lambda: a.call(check=True), "cpu")
    assert info["result"] == [] and len(info["sdp_choice"]) == 1
    assert "mask-attend" in bench.DEFAULT_VARIANTS


def test_cli_help(tmp_path):
    p = subprocess.run([sys.executable, str(CLI), "--help"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    text = re.sub(r"-\s+", "-", " ".join(p.stdout.split()))  # argparse may wrap a name at its hyphen
    assert "--quick" in text and "--variants" in text and "mask-attend" in text and "goat-sdpa" in text


def test_cli_rejects_an_unknown_variant(tmp_path):
    p = subprocess.run([sys.executable, str(CLI), "--variants", "nope", "--out", str(tmp_path / "x.json")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 1 and "unknown variant(s) ['nope']" in p.stderr
    assert not (tmp_path / "x.json").exists()


def test_run_sweep_tiny():
    threads = torch.get_num_threads()
    res = bench.run_benchmark(variants=["sdpa", "goat-lanes"], lengths=[64], modes=["fwd"], repeats=2, warmup=0,
                          memory="inprocess", B=1, H=2, D=32, compile_flex=False, verbose=False)
    assert torch.get_num_threads() == threads  # restored
    assert res["schema"] == bench.SCHEMA and res["settings"]["variants"] == ["sdpa", "goat-lanes"]
    assert [(r["variant"], r["L"], r["mode"], r["status"]) for r in res["results"]] == \
        [("sdpa", 64, "fwd", "ok"), ("goat-lanes", 64, "fwd", "ok")]
    for r in res["results"]:
        assert r["gate"]["passed"] and len(r["time_s"]["samples"]) == 2
        assert r["memory"]["status"] == "ok" and r["memory"]["isolation"] == "in-process"
    assert set(res["ratios"]["fwd"]["goat-lanes"]["64"]) == {"median_ratio", "paired_median"}


def test_memory_probe_runs_in_a_fresh_process_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = bench.memory_in_subprocess("sdpa", L, "fwd", **SHAPE, device="cpu", dtype=torch.float32, seed=0, rank=4,
                               compile_flex=False, threads=1, mem_limit_bytes=None, timeout=120)
    assert m["status"] == "ok", m
    assert m["isolation"] == "subprocess" and m["peak_bytes"] >= 0 and len(m["steady_peaks_bytes"]) == 2


def test_goat_in_bfloat16_fails_the_gate_with_16_bit_lanes_and_passes_on_the_package_path():
    """What Chapter 10's bfloat16 table reads: the same prior and inputs, the lanes built in bfloat16
    (goat-lanes) against `GoatPrior.sdpa`, which keeps a causal prior's lanes in float32."""
    naive, package = (bench.gate(v, 256, mode="fwd+bwd", dtype=torch.bfloat16, compile_flex=False, **SHAPE)
                      for v in ("goat-lanes", "goat-sdpa"))
    assert not naive["passed"] and naive["worst"] > naive["tol"]
    assert package["passed"] and package["worst"] < package["tol"] / 4, package["reason"]


# The message Triton gave on the H200 (torch 2.11) for flex with GOAT's tables, bf16, default tiles.
H200_FLEX = ("InductorError: RuntimeError: No valid triton configs. OutOfMemoryError: out of resource: "
             "triton_tem_fused_flex_attention_0 Required: 246784 Hardware limit:232448 Reducing block sizes or "
             "`num_stages` may help.")


def test_flex_tiles_fall_back_to_smaller_ones_when_shared_memory_runs_out():
    from companion.cost.flex import KERNEL_LADDER, fit_kernel_options

    tried = []

    def probe(options):  # a GPU whose shared memory fits only tiles of 64 or less
        tried.append(options)
        if options.get("BLOCK_M", 128) > 64:
            raise RuntimeError(H200_FLEX)

    options, attempts = fit_kernel_options(probe)
    assert options == KERNEL_LADDER[1] and options["BLOCK_M"] == options["BLOCK_N"] == 64
    assert tried == list(KERNEL_LADDER[:2])
    assert [a["error"] is None for a in attempts] == [False, True] and "out of resource" in attempts[0]["error"]


def test_flex_tiles_stop_at_an_error_smaller_tiles_cannot_cure():
    from companion.cost.flex import fit_kernel_options

    tried = []

    def probe(options):
        tried.append(options)
        raise NotImplementedError("FlexAttention does not support backward on CPU.")

    options, attempts = fit_kernel_options(probe)
    assert options == {} and len(tried) == 1 and "NotImplementedError" in attempts[0]["error"]


def test_flex_tiles_when_none_fits_keep_the_smallest_and_every_failure():
    from companion.cost.flex import KERNEL_LADDER, describe_options, fit_kernel_options, is_resource_error

    def probe(options):
        raise RuntimeError(H200_FLEX)

    options, attempts = fit_kernel_options(probe)
    assert options == KERNEL_LADDER[-1] and len(attempts) == len(KERNEL_LADDER)
    assert is_resource_error(RuntimeError(H200_FLEX)) and not is_resource_error(RuntimeError("CUDA out of memory"))
    assert [describe_options(o) for o in KERNEL_LADDER] == ["default tiles", "tiles 64×64", "tiles 32×32, 1 stage"]
    # the backward tiles of each rung keep flex's divisibility rules (BLOCK_N1 % BLOCK_M1, BLOCK_M2 % BLOCK_N2)
    for o in KERNEL_LADDER[1:]:
        assert o["BLOCK_N1"] % o["BLOCK_M1"] == 0 and o["BLOCK_M2"] % o["BLOCK_N2"] == 0
        assert 128 % o["BLOCK_M"] == 0 and 128 % o["BLOCK_N"] == 0  # divide the BlockMask's 128-token blocks


def test_flex_on_cpu_keeps_inductors_default_and_says_so():
    var = bench.build("mask-flex", 64, H=2, D=16, device="cpu", dtype=torch.float32, compile_flex=True)
    assert var.kernel_options == {} and var.kernel_attempts == [] and var.kind() == "flex (compiled)"
    eager = bench.build("flex", 64, H=2, D=16, device="cpu", dtype=torch.float32, compile_flex=False)
    assert eager.kind() == "flex (eager, unfused)"


@pytest.mark.parametrize("variant", ["flex", "mask-flex"])
def test_the_tile_probe_builds_the_tables_the_call_captures(variant):
    var = bench.build(variant, 40, H=2, D=16, device="cpu", dtype=torch.float32, compile_flex=False)
    assert [tuple(t.shape) for t in var.tables(torch.float32)] == var.table_shapes(40)


def test_mask_flex_is_the_learnable_mask_of_mask_sdpa():
    """Same seed, same M: mask-flex and mask-sdpa compute one function (forward; CPU flex has no backward)."""
    kw = dict(H=2, D=16, device="cpu", dtype=torch.float64, compile_flex=False)
    a, b = bench.build("mask-flex", 48, **kw), bench.build("mask-sdpa", 48, **kw)
    assert torch.equal(a.module.logits, b.module.logits)
    q, k, v = (torch.randn(1, 2, 48, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(i))
               for i in range(3))
    with torch.no_grad():
        torch.testing.assert_close(a(q, k, v), b(q, k, v), rtol=0, atol=1e-12)
        with torch.no_grad():
            a.module.logits[0, 40, 3] += 5.0  # the bias is read, not a copy made at construction
        assert not torch.allclose(a(q, k, v), b(q, k, v))


class FittedFlex(bench.Flex):
    """flex as on a GPU whose shared memory took the second rung of tiles (the fit is stubbed: CPU)."""

    name = "fitted-flex"

    def _fit(self):
        from companion.cost.flex import KERNEL_LADDER

        return dict(KERNEL_LADDER[1]), [{"options": {}, "error": "RuntimeError: out of resource"},
                                        {"options": dict(KERNEL_LADDER[1]), "error": None}]


def test_the_gate_and_the_kind_record_the_tiles_flex_ran_with():
    res = bench.gate(FittedFlex, L, mode="fwd", compile_flex=False, **SHAPE)  # eager: the options pass through
    assert res["passed"], res["reason"]
    assert [a["error"] is None for a in res["kernel_attempts"]] == [False, True]
    var = bench.build(FittedFlex, L, H=2, D=16, device="cpu", dtype=torch.float32, compile_flex=True)
    assert var.kind() == "flex (compiled, tiles 64×64)"


def test_goat_chunked_names_its_chunk_or_why_it_makes_one_call():
    var = bench.build("goat-chunked", L, H=4, D=32, device="cpu", dtype=torch.float32)
    assert var.module.head_chunk == min(torch.get_num_threads(), 4)
    assert var.kind() == f"sdpa (CPU flash, {var.module.head_chunk} heads at a time)"
    b16 = bench.build("goat-chunked", L, H=4, D=32, device="cpu", dtype=torch.bfloat16)
    assert b16.kind().startswith("sdpa (one call: the CPU kernel path is float32 or float64")
