"""Flush-to-zero where the benchmarks compute (companion.cost.ftz): torch's own switch reaches only the
calling thread, the harness's reaches every thread of the pool, and the memory and step workers and the
sweep record what they set."""

from __future__ import annotations

import pytest
import torch

from companion.cost import memory_in_subprocess, run_benchmark
from companion.cost.ftz import flush_denormal, flushed_share, set_flush_denormal

pytestmark = pytest.mark.skipif(not torch.set_flush_denormal(False), reason="this CPU has no flush-to-zero switch")


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    flushed_share()  # a parallel op: the pool's threads exist before any switch is thrown
    yield
    set_flush_denormal(False)
    torch.set_num_threads(before)


def test_torch_alone_flushes_on_the_calling_thread_only(two_threads):
    set_flush_denormal(False)
    assert flushed_share() == 0.0
    torch.set_flush_denormal(True)  # the calling thread's MXCSR; the pool's second thread keeps its own
    assert 0.0 < flushed_share() < 1.0


def test_the_harness_flushes_on_every_thread_and_turns_it_off_again(two_threads):
    record = set_flush_denormal(True)
    assert record == {"on": True, "supported": True, "pool": "every thread", "threads": 2, "flushed_share": 1.0}
    torch.set_num_threads(3)  # a thread created now copies its creator's switch
    assert flushed_share() == 1.0
    torch.set_num_threads(2)
    with flush_denormal(False) as off:
        assert off["flushed_share"] == 0.0
    with flush_denormal(True) as on:
        assert on["flushed_share"] == 1.0
    assert flushed_share() == 0.0  # torch's default again, on every thread


def test_the_memory_worker_computes_as_it_is_told():
    shape = dict(B=1, H=2, D=32, device="cpu", dtype=torch.float32, seed=0, rank=4, compile_flex=False, threads=2,
                 mem_limit_bytes=None, timeout=120)
    on = memory_in_subprocess("goat-lanes", 64, "fwd", **shape)
    off = memory_in_subprocess("goat-lanes", 64, "fwd", **shape, flush_denormal=False)
    assert on["flush_denormal"] == {"on": True, "flushed_share": 1.0}, on
    assert off["flush_denormal"] == {"on": False, "flushed_share": 0.0}, off


def test_a_sweep_records_flush_to_zero_and_the_subnormals_of_each_variant(two_threads):
    kw = dict(variants=["sdpa", "goat-lanes"], lengths=[256], modes=["fwd"], repeats=1, warmup=0, memory="off",
              B=1, H=8, D=64, compile_flex=False, verbose=False, threads=2)
    on, off = run_benchmark(**kw), run_benchmark(**kw, flush_denormal=False)
    assert on["settings"]["flush_denormal"] is True and off["settings"]["flush_denormal"] is False
    assert on["settings"]["flush_denormal_check"]["flushed_share"] == 1.0
    assert off["settings"]["flush_denormal_check"]["flushed_share"] == 0.0
    assert flushed_share() == 0.0  # the sweep leaves torch's default behind
    for res in (on, off):
        rec = {r["variant"]: r for r in res["results"]}
        assert rec["sdpa"]["subnormals"]["prob_subnormal"] == 0
        assert rec["goat-lanes"]["subnormals"]["prob_subnormal"] > 0  # slope 1/2 reaches 175 keys back
        assert res["subnormals"]["goat-lanes"]["256"] == rec["goat-lanes"]["subnormals"]["prob_fraction"]
    assert on["subnormals"] == off["subnormals"]  # counted from the scores, whatever the switch


def test_the_switch_finds_torchs_own_openmp_when_another_package_loaded_its_copy_first():
    """scikit-learn ships its own libgomp; imported first, it is the first OpenMP runtime in the process's
    maps, and its thread pool is not torch's (the full test suite imports it before these tests run)."""
    import subprocess
    import sys

    code = ("import sklearn.datasets, torch\n"
            "from companion.cost.ftz import openmp_runtime, set_flush_denormal, flushed_share\n"
            "torch.set_num_threads(2); flushed_share()\n"
            "torch.set_flush_denormal(True); torch.set_num_threads(3)  # a pool thread copies FTZ on\n"
            "assert 0 < flushed_share() < 1\n"
            "assert '/torch/lib/' in openmp_runtime() or 'torch.libs' in openmp_runtime(), openmp_runtime()\n"
            "assert set_flush_denormal(False)['flushed_share'] == 0.0 and flushed_share() == 0.0\n"
            "assert set_flush_denormal(True)['flushed_share'] == 1.0\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
