"""The notes every result file carries (`notes` in the JSON): what the numbers mean and their limits."""

NOTES = {
    "sdpa_backends_B1": (
        "torch 2.14 source (notes B1): CPU dispatch order flash → math; a float attn_mask that requires grad "
        "disqualifies CPU-flash, so a learnable mask runs on MATH on CPU (materialises L×L). CUDA: FLASH never "
        "accepts a mask; cuDNN accepts a float mask only if it does not require grad; EFFICIENT accepts a float "
        "mask with gradient (mask padded to a multiple of 16 keys); MATH always. On sm90/sm10x with runtime cuDNN "
        "> 9.15 cuDNN is first in priority (the default on H100/H200). Known pitfalls: cuDNN NaN grad_q with a mask "
        "when L % 128 == 64 (pytorch #196678), fp32 mask with bf16 q misread by cuDNN (PR #191612; masks are cast "
        "to q's dtype here)."
    ),
    "sdp_choice": ("torch._fused_sdp_choice(q, k, v, attn_mask, ...) at each SDPA call of the profiled first call: "
                   "MATH=0, FLASH=1, EFFICIENT=2, CUDNN=3; profiler_ops lists the aten ops/kernels that ran."),
    "modes": ("fwd = inference under torch.no_grad (nothing requires grad; a frozen mask may take CPU-flash); "
              "fwd+bwd = forward + backward of a fixed upstream gradient, q, k, v and the prior's parameters "
              "require grad, grads reset to None (not zeroed) before each call, their allocation is timed."),
    "flex": ("flex_attention on CPU (torch 2.14) is forward-only: any q/k/v requiring grad raises "
             "NotImplementedError, recorded as the data point. Compiled flex lowers to a C++ template on CPU "
             "(inference only) and Triton on CUDA (captured-buffer gradients by atomic adds). Compile time is in "
             "first_call_s and first_call_peak_bytes, not in time_s / peak_bytes. On CUDA the Triton tiles are "
             "fitted first (cost.flex.KERNEL_LADDER: inductor's default, then 64×64, then 32×32 with one stage; "
             "the first whose forward + backward compiles and runs is kept, backend.kernel_attempts records each "
             "try and backend.kind names the tiles). mask-flex captures mask-sdpa's log σ(M), (L, L), the same way."),
    "memory_cpu": ("peak RSS delta in a fresh subprocess: VmHWM after the call minus VmRSS before it, the high-water "
                   "mark reset through /proc/self/clear_refs; MALLOC_MMAP_THRESHOLD_=65536 so every block ≥ 64 KiB "
                   "is mmapped and returned on free. Limits: counts touched pages (4 KiB), includes allocator and "
                   "thread-pool overhead, cannot see memory reused from an earlier call's freed heap, and is not "
                   "comparable to CUDA numbers; ru_maxrss fallback is a lower bound. Inputs and parameters are in "
                   "setup_bytes, not in the call's peak; grads allocated by the call are in it."),
    "memory_cuda": ("torch.cuda.max_memory_allocated() minus memory_allocated() before the call (caching-allocator "
                    "bytes, exact; excludes the CUDA context and cached-but-free blocks)."),
    "goat": ("GoatPrior(init='seeded') with α, β and the sink MLP/gain/bump perturbed by N(0, 0.3²) so no gradient "
             "is trivially zero; recency keeps its ALiBi init (settings.goat_recency = 'alibi') or is 0 ('zero'). "
             "With ALiBi slopes the sink lane holds u(j) ≈ s_h·j (up to ~L/2), which bf16 rounds to steps of "
             "~s_h·j/128: the lanes then miss the gate in bf16 (a numerics finding, not a cost one). "
             "The gradient of the sink MLP's output bias is exactly 0 (a shift softmax ignores); the gate "
             "judges it on the scale of the prior's whole gradient (gate.invariant_params). goat-lanes and "
             "eager-goat attend over the "
             "d_c = D − (2R + 1) content dims (scale 1/√d_c); flex over all D dims (scale 1/√D)."),
    "mask": ("LearnableMask with N(0, 1) logits (σ not saturated, so M's gradient is not ~0), one (L, L) M for "
             "all heads."),
    "subnormals": ("subnormals (per record, once per variant and L, outside the timed loop): over the causal "
                   "entries of the timed inputs' scores (`Variant.logits`, float32), how many exp(s − row max) "
                   "(exp_*, the fused forward's weights) and softmax probabilities (prob_*, what the fused "
                   "backward recomputes) are float32 subnormals (2^-150 < x < 2^-126), and how many probabilities round to 0 (prob_zero_*); "
                   "above 512 query rows every row_stride-th row is read (companion.cost.subnormals). Subnormal "
                   "arithmetic costs several times normal on some CPUs and little on others: a host's ratios may "
                   "differ where these fractions are not 0 and flush-to-zero is off."),
    "flush_denormal": ("settings.flush_denormal: flush-to-zero (FTZ/DAZ) on every thread that computes (the sweep's "
                       "OpenMP pool and each memory worker's; companion.cost.ftz), the default; off with "
                       "--no-flush-denormal. flush_denormal_check.flushed_share is measured: the share of a parallel "
                       "product's subnormal results that came out 0 (1: every thread flushes). A result without the "
                       "setting was measured with torch's default, off."),
    "mask_attend": ("mask-attend: the mask-sdpa mask through companion.attention.attend(bias=log σ(M), causal=True, "
                    "backend='sdpa'). On CUDA a mask that requires grad (fwd+bwd) restricts SDPA to "
                    "[EFFICIENT, MATH] (attention.sdpa_backends); otherwise SDPA picks. attend passes the bias "
                    "as LearnableMask returns it, (1, L, L); torch 2.14's CPU-flash refuses a 3-D mask (2-D and "
                    "4-D pass), so on CPU mask-attend runs MATH even in fwd, where mask-sdpa's (L, L) mask takes "
                    "CPU-flash."),
}
