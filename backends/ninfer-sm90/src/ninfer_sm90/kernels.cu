// ninfer-sm90: Hopper (H100, H200). bf16 and fp16. Weight streams ask L2 for 256-byte prefetch and keep
// 4 16-byte loads in flight per lane: on the H200 4 beat 8 and 16 on every decode shape (bench/RESULTS.md).
#define NINFER_L2_PREFETCH_256B
#define NINFER_GEMV_WARPS 4
#define NINFER_GEMV_UNROLL 4
// One-token GEMVs of up to 16 640 rows: two rows a warp, the next round of loads in flight (gemv.cuh: gemv_rows;
// ninfer.kernels.gemv.form): 0.72-0.91 of copy bandwidth against 0.59-0.84 on the decode shapes (session 7).
#define NINFER_GEMV_PAIRS 1
// gate_up + SwiGLU at one token: gate and up rows on two warps, the next round in flight (fused.cuh: gemv_silu2).
#define NINFER_GEMV_SILU2 1
#define NINFER_ATTN_WARPS 4
// Decode attention requests its first K/V rows (keys of earlier steps) before its pdl_wait, overlapping RoPE + the
// KV write before it: 26-52 us a step less on the 8B shapes at 512 context (bench/RESULTS.md, 2026-12-03 session 10).
// -DNINFER_PDL_EARLY_LOADS=0: the reads after the wait (A/B).
#ifndef NINFER_PDL_EARLY_LOADS
#define NINFER_PDL_EARLY_LOADS 1
#endif
#include <ninfer/kernels.cuh>

NINFER_KERNELS(bf16, __nv_bfloat16)
NINFER_KERNELS(f16, __half)
NINFER_COMMON_KERNELS()
