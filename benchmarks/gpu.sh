#!/usr/bin/env bash
# The GPU measurements of Chapter 10, as one script for a lent GPU (about 10 minutes on an H200).
# Writes benchmarks/results/attention-<tag>-*.json and step-memory-<tag>.json, which the chapter reads.
#   bash benchmarks/gpu.sh [tag]        (run from the repository root; PYTHON=... picks the interpreter)
set -euo pipefail
tag="${1:-gpu}"
# The interpreter: $PYTHON if set, else this checkout's .venv, else python3 (a GPU machine's own stack,
# torch 2.11 on Python 3.12, where the package is not installed and runs from the checkout).
if [[ -n "${PYTHON:-}" ]]; then py="$PYTHON"
elif [[ -x .venv/bin/python ]]; then py=.venv/bin/python
else py=python3
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$py" -c "import torch, companion; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
out=benchmarks/results
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
# 1. bfloat16, every variant, L = 1024 … until out of memory (recorded), memory measured in-process;
#    flex fits its Triton tiles to the GPU first (cost.flex.KERNEL_LADDER), recorded per result
timeout 240 "$py" benchmarks/attention.py --device cuda --dtype bfloat16 --memory inprocess \
    --tag "$tag" --out "$out/attention-$tag-bf16.json" || echo "bf16 sweep stopped: $?"
# 1b. GOAT in bfloat16: 16-bit lanes against the package's path (float32 lanes), gated at each length
timeout 60 "$py" benchmarks/attention.py --device cuda --dtype bfloat16 --memory off --modes fwd+bwd \
    --variants goat-lanes,goat-sdpa --lengths 256 1024 4096 16384 --gate-len 4096 \
    --tag "$tag" --out "$out/attention-$tag-bf16-goat.json" || echo "bf16 GOAT check stopped: $?"
# 1c. the learnable mask's routes in bfloat16 side by side (C-02's 2 × goal): SDPA through attend, SDPA
#     with the mask as attn_mask, and the mask as a FlexAttention score modifier (gradient to M in-kernel)
timeout 90 "$py" benchmarks/attention.py --device cuda --dtype bfloat16 --memory off --modes fwd+bwd \
    --variants sdpa,mask-attend,mask-sdpa,mask-flex --lengths 1024 4096 16384 \
    --tag "$tag" --out "$out/attention-$tag-bf16-mask.json" || echo "bf16 mask routes stopped: $?"
# 2. float32 for the learnable-mask goal (C-02) and GOAT without the recency lane's bf16 error
timeout 120 "$py" benchmarks/attention.py --device cuda --dtype float32 --memory inprocess \
    --variants sdpa,goat-lanes,mask-sdpa,mask-attend,mask-sdpa-math --lengths 1024 2048 4096 8192 16384 \
    --tag "$tag" --out "$out/attention-$tag-fp32.json" || echo "fp32 sweep stopped: $?"
# 3. GOAT's memory claim at the source's genome-model shape
timeout 90 "$py" benchmarks/step_memory.py --device cuda --shape paper --tag "$tag" || echo "step memory stopped: $?"
ls -l "$out"
