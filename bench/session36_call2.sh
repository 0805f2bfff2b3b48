# Session 36, call 2: bench/persist_mlp.py (new), the 27B's MLP block (residual add, RMSNorm, gate_up + SwiGLU, down;
# W4A16 g128) 64 times in one persistent launch with 16 KB units dealt as rings free and the real int4 products,
# checked on 4 layers against today's launches and a float32 reference, then timed beside today's launches of the
# same 64 blocks. Any GPU with sm_90. Run it at the commit that adds it. Kernels: .kc_s36 (bash
# bench/precompile_sm90.sh .kc_s36, the quant library and the sm90 backend only), carried; persist_mlp compiles here.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s36/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 240 python bench/persist_mlp.py > $OUT/pm.txt 2>&1; echo "rc $?"; grep -v compiling $OUT/pm.txt | tail -30 | cut -c1-250
