# Session 9, device call 1: what the Llama-3-8B / Qwen3-8B decode step would take without its RMSNorms, its RoPE +
# KV write, or its attention (bench/whatif.py: an upper bound on what fusing them can win). Kernels precompiled here.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_s9}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for s in llama3-8b qwen3-8b; do
  echo "== whatif $s"; timeout 200 python bench/whatif.py --shape $s --ctx 512 --variants base,norm,rope,attn,norm+rope,norm+rope+attn,base 2>&1 | grep -v "^ninfer: compiling" | tail -12
done
