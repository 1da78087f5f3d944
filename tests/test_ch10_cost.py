"""Chapter 10's readers of benchmark JSON, its tables, claim measures and prose numbers, and the
roofline arithmetic."""

from __future__ import annotations


import numpy as np
import pytest

from companion.cost import records
from companion.book.chapter import details, measures
from companion.book.chapters import ch10_cost as cr
from companion.book.claims import load_ledger
from companion.book.labels import VARIANTS
from companion.cost.roofline import attention_bytes, attention_flops, bound_s


def _result(rows, **extra):
    return {"machine": {}, "settings": {}, "ratios": {}, "finished": "now", "results": rows, **extra}


def _rec(variant, L, mode="fwd+bwd", t=1.0, peak=100, ratio=1.0, status="ok"):
    return {"variant": variant, "L": L, "mode": mode, "status": status, "time_s": {"median": t, "iqr": 0.1 * t},
            "ratio_vs_sdpa": {"median_ratio": ratio, "paired_median": ratio}, "memory": {"peak_bytes": peak},
            "backend": {"kind": "fused"}}


def test_frame_divides_memory_by_sdpa_at_the_same_length_and_mode():
    rows = [_rec("sdpa", 1024, peak=2**20), _rec("mask-sdpa", 1024, peak=8 * 2**20, ratio=3.0),
            _rec("sdpa", 1024, "fwd", peak=2**19), _rec("mask-sdpa", 1024, "fwd", peak=2**20)]
    df = cr.frame(_result(rows))
    got = df.set_index(["variant", "mode"])
    assert got.loc[("mask-sdpa", "fwd+bwd"), "memory_ratio"] == 8.0
    assert got.loc[("mask-sdpa", "fwd"), "memory_ratio"] == 2.0
    assert got.loc[("mask-sdpa", "fwd+bwd"), "time_ms"] == 1000.0
    assert cr.wide(df, "paired_ratio", "fwd+bwd").loc["mask-sdpa", 1024] == 3.0


def test_growth_exponent_recovers_a_power_law():
    Ls = [512, 1024, 2048, 4096]
    rows = [_rec("mask-sdpa", L, peak=3 * L**2) for L in Ls] + [_rec("sdpa", L, peak=7 * L) for L in Ls]
    df = cr.frame(_result(rows))
    assert cr.growth_exponent(df, "mask-sdpa", "fwd+bwd") == pytest.approx(2.0)
    assert cr.growth_exponent(df, "sdpa", "fwd+bwd") == pytest.approx(1.0)
    assert np.isnan(cr.growth_exponent(df, "sdpa", "fwd+bwd", min_L=4096))  # one point is no slope


def test_goal_table_says_met_or_not():
    df = cr.frame(_result([_rec("sdpa", 4096), _rec("goat-lanes", 4096, ratio=1.05), _rec("mask-sdpa", 4096, ratio=4.0)]))
    t = cr.goal_table(df, 4096, {"goat-lanes": ("paired_ratio", 1.15), "mask-sdpa": ("paired_ratio", 2.0)})
    assert t["met"].tolist() == [True, False]


def test_goal_and_step_tables_as_the_page_shows_them():
    df = cr.frame(_result([_rec("sdpa", 4096), _rec("goat-lanes", 4096, ratio=1.05), _rec("mask-sdpa", 4096, ratio=4.0)]))
    t = cr.goals_display(cr.goal_table(df, 4096, {"goat-lanes": ("paired_ratio", 1.15), "mask-sdpa": ("paired_ratio", 2.0)}))
    assert t.to_dict("index") == {
        "GOAT lanes (SDPA)": {"measure": "time vs plain SDPA", "L": "4,096", "ours": "1.05 ×", "goal": "≤ 1.15 ×", "met": "yes"},
        "learnable mask (SDPA)": {"measure": "time vs plain SDPA", "L": "4,096", "ours": "4.00 ×", "goal": "≤ 2 ×", "met": "no"}}
    steps = cr.steps_display(cr.step_frame(cr.load_steps("step-memory-cpu")))
    assert list(steps.columns) == ["peak memory (MiB)", "memory vs RoPE", "step time (s)", "time vs RoPE", "parameters"]
    assert steps.loc["RoPE", "memory vs RoPE"] == "1.000" and steps.loc["RoPE", "parameters"].replace(",", "").isdigit()
    assert "," in steps.loc["GOAT", "parameters"]


def test_the_committed_results_load():
    results = cr.committed()
    assert "attention-cpu-vm-2core" in results
    steps = cr.step_frame(cr.load_steps("step-memory-cpu"))
    assert steps.loc["rope", "memory vs RoPE"] == 1.0 and {"goat", "rope"} <= set(steps.index)


def test_roofline_counts_match_a_hand_count():
    # L = 2, causal: 3 visible entries; each costs 2·D for q·k and 2·D for p·v
    assert attention_flops(2, B=1, H=1, D=4, mode="fwd") == 3 * 4 * 4
    assert attention_flops(2, B=1, H=1, D=4, mode="fwd+bwd") == 3.5 * 48
    assert attention_flops(2, B=1, H=1, D=4, mode="fwd", causal=False) == 4 * 4 * 4
    assert attention_bytes(8, B=1, H=2, D=4, mode="fwd") == 4 * 4 * 2 * 8 * 4
    assert attention_bytes(8, B=1, H=2, D=4, mode="fwd+bwd", bias_heads=1) == 4 * (8 * 2 * 8 * 4 + 2 * 64)
    peak = {"peak_flops": 100.0, "bandwidth_bytes_s": 10.0}
    assert bound_s(1000, 50, peak) == 10.0 and bound_s(100, 500, peak) == 50.0


def test_native_output_is_silenced_only_inside_the_block(capfd):
    import os

    from companion.cost import native_output_silenced

    with native_output_silenced():
        os.write(2, b"profiler noise\n")
        os.write(1, b"more noise\n")
    os.write(2, b"after\n")
    out, err = capfd.readouterr()
    assert "noise" not in out + err and err == "after\n"


# A synthetic sweep: SDPA's peak grows as L, GOAT's lanes take twice SDPA's, the mask's grows as L²;
# each (variant, mode) has one time ratio to SDPA; FlexAttention has no backward.
SETTINGS = {"device": "cpu", "dtype": "float32", "batch": 1, "heads": 2, "head_dim": 4, "threads": 2,
            "lengths": [1024, 4096, 8192], "repeats": 5, "memory": "subprocess", "goat_rank": 4}
RATIOS = {("sdpa", "fwd"): 1.0, ("sdpa", "fwd+bwd"): 1.0, ("goat-lanes", "fwd"): 1.02, ("goat-lanes", "fwd+bwd"): 1.05,
          ("mask-sdpa", "fwd"): 3.16, ("mask-sdpa", "fwd+bwd"): 4.17, ("eager-bias", "fwd"): 4.0,
          ("eager-bias", "fwd+bwd"): 4.86, ("eager-goat", "fwd"): 9.0, ("eager-goat", "fwd+bwd"): 10.25,
          ("flex", "fwd"): 1.92}
PEAKS = {"sdpa": lambda L: L * 2**10, "goat-lanes": lambda L: 2 * L * 2**10, "mask-sdpa": lambda L: L**2 * 2**7,
         "eager-bias": lambda L: L**2 * 2**7, "eager-goat": lambda L: 2 * L**2 * 2**7, "flex": lambda L: 3 * L * 2**10}
FLEX_REASON = "gate at L=256: NotImplementedError: FlexAttention does not support backward on CPU. More detail."


def _sweep(device="cpu"):
    rows = [_rec(v, L, mode, t=ratio, peak=PEAKS[v](L), ratio=ratio) for (v, mode), ratio in RATIOS.items()
            for L in SETTINGS["lengths"]]
    rows += [{"variant": "flex", "L": L, "mode": "fwd+bwd", "status": "error", "reason": FLEX_REASON}
             for L in SETTINGS["lengths"]]
    return _result(rows, settings={**SETTINGS, "device": device}, versions={"torch": "2.x"},
                   machine={"cpu_model": "AMD EPYC", "cpu_affinity": 2})


def _steps(goat_memory=0.991):
    return {"results": [{"method": "rope", "status": "ok", "peak_bytes": 136 * 2**20, "time_s": 1.0, "params": 10},
                        {"method": "goat", "status": "ok", "peak_bytes": 135 * 2**20, "time_s": 1.0, "params": 12}],
            "ratios_vs_rope": {"rope": {"memory": 1.0, "time": 1.0}, "goat": {"memory": goat_memory, "time": 1.0}}}


def test_tables_list_variants_in_the_shared_label_order_and_skip_failed_calls():
    cpu = cr.frame(_sweep())
    order = [v for v in VARIANTS if v in PEAKS]
    assert cr.wide(cpu, "paired_ratio", "fwd").index.tolist() == order
    assert list(cr.variant_curves(cpu, "fwd")) == order
    assert "flex" not in cr.variant_curves(cpu, "fwd+bwd")
    assert cr.variant_curves(cpu, "fwd")["mask-sdpa"].L.tolist() == [1024, 4096, 8192]
    assert cr.ratio_table(cpu).loc["goat-lanes", ("fwd+bwd", 4096)] == 1.05


def test_the_ratio_table_is_each_variants_time_over_sdpas_in_the_fixture():
    cpu = cr.frame(_sweep())
    table, t = cr.ratio_table(cpu), cpu.set_index(["variant", "L", "mode"]).time_ms
    for (variant, mode), _ in RATIOS.items():
        for L in SETTINGS["lengths"]:
            assert table.loc[variant, (mode, L)] == pytest.approx(t[(variant, L, mode)] / t[("sdpa", L, mode)])
    assert np.isnan(table.loc["flex", ("fwd+bwd", 4096)])  # no time, no ratio
    assert table.columns.get_level_values(0).unique().tolist() == list(cr.MODES)


def test_the_flex_note_gives_the_recorded_reason_in_plain_words():
    note = cr.flex_backward_note(cr.frame(_sweep()))
    assert note.startswith("GOAT (FlexAttention): no forward + backward time")
    assert "FlexAttention does not support backward on CPU" in note and "L = 256" in note
    assert "error" not in note and "NotImplementedError" not in note and "More detail" not in note
    timed = cr.frame(_result([_rec("sdpa", 1024), _rec("flex", 1024)]))
    assert "timed at every length" in cr.flex_backward_note(timed)
    assert "timed at every length" in cr.flex_backward_note(cr.frame(_result([_rec("sdpa", 1024)])))


def test_growth_table_and_the_quadratic_reference():
    cpu = cr.frame(_sweep())
    g = cr.growth_table(cpu)
    assert g.loc["mask-sdpa", "peak-memory exponent"] == pytest.approx(2.0)
    assert g.loc["sdpa", "peak-memory exponent"] == pytest.approx(1.0)
    assert g.loc["mask-sdpa", "MiB at 4096"] == 2048.0
    mem = cr.wide(cpu, "peak_mib", "fwd+bwd")
    np.testing.assert_array_equal(cr.quadratic_reference(mem), [128.0, 2048.0, 8192.0])


def test_roofline_moves_a_bias_plane_for_the_mask_and_one_per_head_for_eager_goat():
    cpu = cr.frame(_sweep())
    peak = {"peak_flops": 1e30, "bandwidth_bytes_s": 1e9}  # bandwidth-bound: the floor is bytes / W
    roof = cr.roofline(cpu, SETTINGS, peak).set_index(["variant", "L"])
    shape = {"B": 1, "H": 2, "D": 4, "mode": "fwd+bwd"}
    for variant, planes in (("sdpa", 0), ("goat-lanes", 0), ("mask-sdpa", 1), ("eager-bias", 1), ("eager-goat", 2)):
        assert roof.loc[(variant, 4096), "floor_ms"] == 1e3 * (attention_bytes(4096, **shape, bias_heads=planes) / 1e9)
    assert ("flex", 4096) not in roof.index
    shares = cr.floor_shares(roof.reset_index())
    assert shares.loc["mask-sdpa", 4096] == roof.loc[("mask-sdpa", 4096), "floor_ms"] / (4.17 * 1e3)


def test_goals_take_their_limits_from_the_ledger():
    ledger = load_ledger()
    goals = cr.goals_table(cr.frame(_sweep()))
    assert goals["goal ≤"].tolist() == [ledger[c].rule["threshold"] for c in ("S3-15", "C-02", "C-01")]
    assert goals["ours"].tolist() == [1.05, 4.17, 2.0] and goals["met"].tolist() == [True, False, False]


def test_claim_measures_and_details():
    cpu, steps = cr.frame(_sweep()), cr.step_frame(_steps())
    m = measures(cr.CLAIMS, {"cpu": cpu, "gpu": {}, "steps": steps})
    # S3-15 and C-02 are decided on a GPU: without a GPU result neither has a measure
    assert m == {"C-03": 2.0, "S3-15": None, "C-01": 2.0, "C-02": None, "S3-16": 0.991}
    none = "no GPU result is committed"
    assert details(cr.CLAIMS, {"gpu": {}, "cpu": cpu}) == {"C-02": none, "S3-15": none + "; on this CPU 1.05 ×"}
    gpu = {"gpu": _result([_rec("sdpa", 4096), _rec("mask-attend", 4096, ratio=1.8123),
                           _rec("goat-lanes", 4096, ratio=1.4937)],
                          settings={"device": "cuda:0", "dtype": "float32"})}
    assert cr.gpu_results({**gpu, "cpu": _sweep()}) == gpu
    assert measures(cr.CLAIMS, {"cpu": cpu, "gpu": gpu, "steps": steps})["C-02"] == 1.812
    assert measures(cr.CLAIMS, {"cpu": cpu, "gpu": gpu, "steps": steps})["S3-15"] == 1.494  # the GPU's ratio, not this CPU's 1.05
    assert details(cr.CLAIMS, {"gpu": gpu, "cpu": cpu}) == {"C-02": "worst of float32 1.81 ×",
                                          "S3-15": "worst of float32 1.49 ×; on this CPU 1.05 ×"}
    # C-02 takes the worse precision: a bfloat16 result at 3.54 decides it; GOAT's bfloat16 lanes fail
    # the gate, are not timed, and leave S3-15 on float32, with the failure named
    bf16 = {"bf16": _result([_rec("sdpa", 4096), _rec("mask-attend", 4096, ratio=3.5412),
                             _rec("goat-lanes", 4096, status="gate-failed")],
                            settings={"device": "cuda:0", "dtype": "bfloat16"})}
    both = {**gpu, **bf16}
    assert measures(cr.CLAIMS, {"cpu": cpu, "gpu": both, "steps": steps})["C-02"] == 3.541
    assert measures(cr.CLAIMS, {"cpu": cpu, "gpu": both, "steps": steps})["S3-15"] == 1.494
    assert details(cr.CLAIMS, {"gpu": both, "cpu": cpu})["S3-15"] == ("worst of float32 1.49 ×; bfloat16 fails the float64 "
                                                                    "gate, not timed; on this CPU 1.05 ×")
    assert cr.gpu_gate_failures(both, "goat-lanes") == ["bfloat16"] and cr.gpu_gate_failures(both, "mask-attend") == []


def _gpu(dtype, rows):
    return _result(rows, settings={"device": "cuda", "dtype": dtype}, machine={"gpu_name": "H"},
                   versions={"torch": "2.11"}, started="2026-11-30T16:00:00")


def test_gpu_tables_show_ratios_statuses_and_goals():
    gpu = {"fp32": _gpu("float32", [_rec("sdpa", 4096), _rec("goat-lanes", 4096, ratio=1.49),
                                    _rec("mask-attend", 4096, ratio=1.81)]),
           "bf16": _gpu("bfloat16", [_rec("sdpa", 4096), _rec("goat-lanes", 4096, status="gate-failed"),
                                     _rec("mask-attend", 4096, ratio=3.54), _rec("flex", 4096, status="error")])}
    gf = cr.gpu_frame(gpu)
    t = cr.gpu_ratio_table(gf)
    assert t.loc[("float32", "goat-lanes"), 4096] == "1.49"
    assert t.loc[("bfloat16", "goat-lanes"), 4096] == "fails the float64 gate"
    assert t.loc[("bfloat16", "flex"), 4096] == "does not run"
    shown = cr.gpu_goals_display(cr.gpu_goal_table(gf))
    assert shown.index[0] == "GOAT lanes (SDPA)" and shown["L"].iloc[0] == "4,096"
    goals = cr.gpu_goal_table(gf).set_index(["variant", "L", "precision"])
    assert goals.loc[("goat-lanes", 4096, "float32"), "met"] == "no"      # 1.49 > 1.15
    assert goals.loc[("mask-attend", 4096, "float32"), "met"] == "yes"    # 1.81 ≤ 2
    assert goals.loc[("mask-attend", 4096, "bfloat16"), "met"] == "no"    # 3.54 > 2
    assert goals.loc[("flex", 4096, "bfloat16"), "met"] == "no"
    assert goals.loc[("goat-lanes", 16384, "float32"), "measured"] == "not measured"
    assert goals.loc[("mask-flex", 4096, "bfloat16"), "measured"] == "not measured"
    prov = cr.gpu_provenance(gpu)
    assert "commit" not in prov.columns  # a rerunner's fact, kept in provenance.json, not the reader's
    assert prov.loc["fp32", "date"] == "2026-11-30"
    text = cr.gpu_prose_numbers(gpu)
    assert text["ch10_gpu_mask-attend_bfloat16_4096"] == "3.54"
    assert text["ch10_gpu_goat-lanes_bfloat16_4096"] == "fails the float64 gate"
    assert text["ch10_gpu_goat-lanes_float32_1024"] == "—"


def test_the_learnable_mask_through_flex_is_judged_against_its_own_runs_sdpa():
    """A second bf16 file (benchmarks/gpu.sh step 1c) measures the mask routes side by side: its
    mask-flex ratio is judged on C-02's threshold, and the first file's rows are not displaced."""
    gpu = {"attention-h-bf16": _gpu("bfloat16", [_rec("sdpa", 4096), _rec("mask-attend", 4096, ratio=3.54)]),
           "attention-h-bf16-mask": _gpu("bfloat16", [_rec("sdpa", 4096), _rec("mask-attend", 4096, ratio=3.40),
                                                      _rec("mask-flex", 4096, ratio=1.62)])}
    goals = cr.gpu_goal_table(cr.gpu_frame(gpu)).set_index(["variant", "L", "precision"])
    assert goals.loc[("mask-flex", 4096, "bfloat16"), ["measured", "met"]].tolist() == ["1.62", "yes"]
    assert goals.loc[("mask-attend", 4096, "bfloat16"), "measured"] == "3.54"
    slow = {"b": _gpu("bfloat16", [_rec("sdpa", 4096), _rec("mask-flex", 4096, ratio=2.5)])}
    assert cr.gpu_goal_table(cr.gpu_frame(slow)).set_index("variant").loc["mask-flex", "met"] == "no"


def test_a_triton_shared_memory_failure_is_read_as_two_numbers():
    need = ("gate at L=256: InductorError: RuntimeError: No valid triton configs. OutOfMemoryError: out of "
            "resource: triton_tem_fused_flex_attention_0 Required: 246784 Hardware limit:232448 Reducing block sizes")
    assert records.shared_memory(need) == (246784, 232448)
    assert records.shared_memory("gate at L=256: AssertionError: captured grad") is None
    assert records.shared_memory("") is None


def test_flex_on_the_gpu_is_described_by_what_its_record_says():
    from companion.cost.flex import KERNEL_LADDER, describe_options

    need = "out of resource: triton_tem_fused_flex_attention_0 Required: 246784 Hardware limit:232448"

    def bf16(row):
        return {"b": _gpu("bfloat16", [_rec("sdpa", 4096), row])}

    unmeasured = cr.gpu_flex_status({})
    assert not any(ch.isdigit() for ch in unmeasured.split("(")[0])  # no number where nothing was measured
    # a failure to fit: both byte counts; without recorded attempts, the rungs the run did not try
    old = {**_rec("flex", 4096, status="error"), "reason": need, "gate": {"passed": False}}
    text = cr.gpu_flex_status(bf16(old))
    assert "246,784" in text and "232,448" in text
    assert all(describe_options(o) in text for o in KERNEL_LADDER[1:])
    # every rung tried and failed: the count and the smallest rung, and the attempts reach the frame
    every = [{"options": o, "error": "RuntimeError: out of resource"} for o in KERNEL_LADDER]
    tried = {**old, "gate": {"passed": False, "kernel_attempts": every}}
    assert cr.gpu_frame(bf16(tried)).set_index("variant").loc["flex", "attempts"] == tuple(every)
    text = cr.gpu_flex_status(bf16(tried))
    assert f" {len(KERNEL_LADDER)} " in text and text.endswith(describe_options(KERNEL_LADDER[-1]))
    # it ran on the second rung: that rung (not the first) and its measured ratio
    second = [every[0], {"options": KERNEL_LADDER[1], "error": None}]
    fits = {**_rec("flex", 4096, ratio=1.314), "backend": {"kind": "flex (compiled)", "kernel_attempts": second}}
    text = cr.gpu_flex_status(bf16(fits))
    assert describe_options(KERNEL_LADDER[1]) in text and describe_options(KERNEL_LADDER[0]) not in text
    assert "1.31" in text and "4,096" in text and "246,784" not in text
    default = {**_rec("mask-flex", 4096, ratio=1.9),
               "backend": {"kind": "flex (compiled)", "kernel_attempts": [{"options": {}, "error": None}]}}
    assert describe_options({}) in cr.gpu_flex_status(bf16(default), "mask-flex") and "1.90" in cr.gpu_flex_status(
        bf16(default), "mask-flex")
    eager = {**_rec("flex", 4096, ratio=3.0), "backend": {"kind": "flex (eager, unfused)"}}
    assert "flex (eager, unfused)" in cr.gpu_flex_status(bf16(eager)) and "3.00" in cr.gpu_flex_status(bf16(eager))
    # another failure: its recorded reason, and no byte counts
    other = {**_rec("mask-flex", 4096, status="error"), "reason": "gate at L=256: AssertionError: captured grad"}
    text = cr.gpu_flex_status(bf16(other), "mask-flex")
    assert "captured grad" in text and "bytes" not in text
    # the clause speaks of bfloat16: a float32-only result leaves it unmeasured
    assert cr.gpu_flex_status({"f": _gpu("float32", [_rec("sdpa", 4096), fits])}) == unmeasured


def test_the_committed_h200_results_decide_c02_on_bfloat16():
    gpu = cr.gpu_results(cr.committed())
    assert {r["settings"]["dtype"] for r in gpu.values()} == {"float32", "bfloat16"}
    ratios = cr.gpu_ratios(gpu, "mask-attend")
    assert ratios["bfloat16"] > ratios["float32"] and measures(cr.CLAIMS, {"cpu": cr.frame(_sweep()), "gpu": gpu, "steps": cr.step_frame(_steps())})["C-02"] == round(ratios["bfloat16"], 3)


def test_prose_numbers_of_a_synthetic_sweep():
    result, steps = _sweep(), cr.step_frame(_steps())
    F = attention_flops(4096, B=1, H=2, D=4, mode="fwd+bwd")
    peak = {"peak_flops": 4 * F, "bandwidth_bytes_s": 22.4e9, "source": "measured by benchmarks/peak.py on X"}
    text = cr.prose_numbers(result, peak, steps, [256, 512])  # SDPA at 4096 takes 1 s, its floor 0.25 s
    cpu = cr.frame(result)
    t = cpu.set_index(["variant", "L", "mode"]).time_ms
    # each cited ratio is the variant's time over SDPA's at that length and mode, as the text rounds it
    for key, (variant, L, mode) in {"ch10_t_goat-lanes_1024": ("goat-lanes", 1024, "fwd+bwd"),
                                    "ch10_t_mask-sdpa_8192": ("mask-sdpa", 8192, "fwd+bwd"),
                                    "ch10_t_eager-goat_4096": ("eager-goat", 4096, "fwd+bwd"),
                                    "ch10_mask_fwd_4096": ("mask-sdpa", 4096, "fwd"),
                                    "ch10_flex_fwd_4096": ("flex", 4096, "fwd")}.items():
        assert float(text[key]) == pytest.approx(t[(variant, L, mode)] / t[("sdpa", L, mode)], abs=0.005)
    # exponents, memory and the memory ratio are those of the fixture's power laws (L, 2L, L²)
    assert [float(text[f"ch10_exp_{v}"]) for v in ("sdpa", "goat-lanes", "mask-sdpa")] == [1.0, 1.0, 2.0]
    assert float(text["ch10_mib_mask-sdpa"].replace(",", "")) == PEAKS["mask-sdpa"](4096) / 2**20
    assert float(text["ch10_mib_mask_8192"]) == PEAKS["mask-sdpa"](8192) / 2**30  # in GiB
    assert float(text["ch10_goat_mem_ratio"]) == 2.0
    # the machine, its peak rates, the floor's share of SDPA's time (0.25 s of 1 s), the step numbers
    assert (text["ch10_cpu"], text["ch10_threads"], text["ch10_live_lengths"]) == ("AMD EPYC", "2", "256, 512")
    assert float(text["ch10_peak_gflops"]) == round(4 * F / 1e9) and float(text["ch10_bandwidth"]) == 22.4
    assert text["ch10_sdpa_share"] == "25%" and text["ch10_peak_source"] == peak["source"]
    assert (float(text["ch10_step_goat"]), text["ch10_step_rope_mib"], text["ch10_step_goat_mib"]) == (0.99, "136", "135")
    live = cr.prose_numbers(result, {k: v for k, v in peak.items() if k != "source"}, steps, [256])
    assert "the machine that executed this page" in live["ch10_peak_source"]


def test_a_share_above_the_floor_is_said_to_come_from_when_the_peak_was_measured():
    """The floor and the times are measured at different moments on a shared machine: a peak measured
    at a busier moment makes SDPA look faster than the floor, and the prose says why."""
    result, steps = _sweep(), cr.step_frame(_steps())
    F = attention_flops(4096, B=1, H=2, D=4, mode="fwd+bwd")
    peak = {"peak_flops": F / 1.25, "bandwidth_bytes_s": 22.4e9}  # floor 1.25 s against a 1 s call
    share = cr.prose_numbers(result, peak, steps, [256])["ch10_sdpa_share"]
    assert share.startswith("125% ") and "peak was measured at a busier moment" in share


def test_the_live_rerun_sits_beside_the_committed_sweep():
    cpu = cr.frame(_sweep())
    live = cr.frame(_result([_rec("sdpa", 1024), _rec("goat-lanes", 1024, ratio=1.2)]))
    side = cr.side_by_side(cpu, live, [1024])
    assert side.loc["goat-lanes"].tolist() == [1.05, 1.2]
    steps = cr.step_frame(_steps())
    line = cr.step_comparison(cr.step_frame(_steps(0.98)), steps)
    assert line.index("0.980") < line.index("0.991")  # here, then committed


def test_the_settings_table_of_a_sweep():
    table = cr.settings_table(_sweep(), {})
    col = table["committed CPU sweep"]
    assert col["machine"] == "AMD EPYC, 2 cores" and col["batch × heads × head dim"] == "1 × 2 × 4"
    assert col["lengths L"] == "1024, 4096, 8192" and col["GOAT rank R (lanes)"] == "4 (9)"
    assert col["GPU results committed"] == 0


def _gated(variant, L, worst, ratio=1.0, tol=0.06):
    return {**_rec(variant, L, ratio=ratio), "gate": {"passed": worst <= tol, "worst": worst, "tol": tol}}


def test_the_bfloat16_goat_section_reads_the_gate_and_the_gpu_runs():
    """Failing lengths, the error at the longest, the package path's pass range and time, and the GPU
    estimate: float32 GOAT over bf16 SDPA at 4096 (4 ms / 0.5 ms), "—" without GPU runs."""
    bf16 = _result([_gated("goat-lanes", 64, 0.01), _gated("goat-lanes", 256, 0.2), _gated("goat-lanes", 4096, 5.0),
                    _gated("goat-sdpa", 64, 0.002, 0.5), _gated("goat-sdpa", 256, 0.07, 0.4),
                    _gated("goat-sdpa", 4096, 0.003, 0.3)])
    gpu = {"f": _gpu("float32", [_rec("sdpa", 4096, t=0.002), _rec("goat-lanes", 4096, t=0.004)]),
           "b": _gpu("bfloat16", [_rec("sdpa", 4096, t=0.0005)])}
    assert cr.bf16_goat_numbers(bf16, gpu) == {
        "ch10_bf16_fails_from": "256", "ch10_bf16_lanes_worst": "5.00", "ch10_bf16_passes_to": "4,096",
        "ch10_bf16_pkg_all_pass": "not every", "ch10_bf16_pkg_worst": "0.070", "ch10_bf16_pkg_time": "0.30",
        "ch10_gpu_goat_f32_over_bf16": "8.0"}
    assert cr.bf16_goat_numbers(bf16, {})["ch10_gpu_goat_f32_over_bf16"] == "—"
    table = cr.bf16_goat_table(bf16)
    assert list(table.index) == [64, 256, 4096]
    assert table.loc[256].tolist() == ["fails: 0.200 (tolerance 0.06)", "fails: 0.070 (tolerance 0.06)", "0.40 ×"]


def _chunked_sweep(chunk_kind="sdpa (CPU flash, 2 heads at a time)"):
    rows = []
    for L, one, chunked in ((1024, 1.7, 1.1), (4096, 1.9, 1.18)):
        rows += [_rec("sdpa", L, t=1.0, peak=10 * 2**20),
                 _rec("goat-lanes", L, t=1.05, peak=int(one * 10 * 2**20), ratio=1.05),
                 {**_rec("goat-chunked", L, t=1.07, peak=int(chunked * 10 * 2**20), ratio=1.3 if L == 1024 else 1.07),
                  "backend": {"kind": chunk_kind}}]
    return _result(rows)


def test_the_head_chunked_section_reads_its_own_run():
    result = _chunked_sweep()
    table = cr.chunked_table(result)
    assert table.index.tolist() == [1024, 4096]
    assert table.loc[4096, "GOAT lanes (SDPA): peak memory vs SDPA"] == "1.90 ×"
    assert table.loc[4096, "GOAT lanes, a few heads at a time (CPU kernel): peak memory vs SDPA"] == "1.18 ×"
    assert table.loc[1024, "GOAT lanes, a few heads at a time (CPU kernel): time vs SDPA"] == "1.30 ×"
    got = cr.chunked_numbers(result)
    assert got == {"ch10_chunk_heads": "2", "ch10_chunk_mib_sdpa": "10.0", "ch10_chunk_mib_one": "19.0",
                   "ch10_chunk_mem_one": "1.90", "ch10_chunk_time_one": "1.05", "ch10_chunk_mib_chunked": "11.8",
                   "ch10_chunk_mem_chunked": "1.18", "ch10_chunk_time_chunked": "1.07",
                   "ch10_chunk_time_one_1024": "1.05", "ch10_chunk_time_chunked_1024": "1.30"}
    # a record from a machine where the path did not apply says so, and no chunk size is claimed
    other = cr.chunked_numbers(_chunked_sweep("sdpa (one call: it runs the CPU flash-attention kernel, and the inputs are on cuda)"))
    assert other["ch10_chunk_heads"] == "—"


def test_the_goals_table_gains_the_chunked_row_against_c01():
    ledger = load_ledger()
    goals = cr.goals_table(cr.frame(_sweep()), cr.frame(_chunked_sweep()))
    assert goals.index.tolist()[-2:] == ["goat-lanes", "goat-chunked"]
    assert goals.loc["goat-chunked", "goal ≤"] == ledger["C-01"].rule["threshold"]
    assert goals.loc["goat-chunked", "ours"] == pytest.approx(1.18, abs=1e-6)
    assert bool(goals.loc["goat-chunked", "met"]) is True
    # C-01 itself is still decided on the one-call sweep
    assert measures(cr.CLAIMS, {"cpu": cr.frame(_sweep()), "gpu": {}, "steps": cr.step_frame(_steps())})["C-01"] == 2.0


def test_without_a_gpu_result_the_gpu_section_says_so_instead_of_a_number():
    text = cr.gpu_prose_numbers({})
    assert text["ch10_gpu_results"] == "0" and text["ch10_gpu_name"] == "—"
    assert all(v == "—" for k, v in text.items() if k.startswith(("ch10_gpu_goat-lanes_", "ch10_gpu_mask-", "ch10_gpu_backend_")))
    assert text["ch10_gpu_goat_bf16_gate"] == text["ch10_gpu_flex_needs"] == "—"
    assert text["ch10_gpu_flex_status"].startswith("was not measured")
    goals = cr.gpu_goal_table(cr.gpu_frame({}))
    assert len(goals) == len(cr.GPU_GOALS) and set(goals["measured"]) == {"not measured"} and set(goals["met"]) == {"—"}
    assert cr.gpu_ratios({}, "goat-lanes") == {} and cr.gpu_worst({}, "goat-lanes") is None


def test_gpu_kernels_gate_error_and_flex_need_are_read_from_the_records():
    need = "out of resource: Required: 246784 Hardware limit:232448"
    sdpa = {**_rec("sdpa", 4096), "backend": {"kind": "fused", "sdp_choice_names": ["CUDNN"]}}
    gate = {**_rec("goat-lanes", 4096, mode="fwd"), "gate": {"passed": False, "worst": 0.0912, "tol": 0.06}}
    flex = {**_rec("flex", 4096, status="error"), "reason": need}
    text = cr.gpu_prose_numbers({"b": _gpu("bfloat16", [sdpa, gate, flex])})
    assert text["ch10_gpu_backend_sdpa_bfloat16"] == "cuDNN" and text["ch10_gpu_backend_sdpa_float32"] == "—"
    assert (text["ch10_gpu_goat_bf16_gate"], text["ch10_gpu_gate_tol"]) == ("0.09", "0.06")
    assert (text["ch10_gpu_flex_needs"], text["ch10_gpu_flex_has"]) == ("246,784", "232,448")
