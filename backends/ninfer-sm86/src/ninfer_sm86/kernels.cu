// ninfer-sm86: Ampere (A100 sm_80, RTX 30xx / A10 sm_86). bf16 and fp16; weight streams ask L2 for
// 256-byte prefetch (new in sm_80), 4 16-byte loads in flight per lane (the H200 tuning; not measured on this card).
#define NINFER_L2_PREFETCH_256B
#define NINFER_GEMV_WARPS 4
#define NINFER_GEMV_UNROLL 4
#define NINFER_ATTN_WARPS 4
#include <ninfer/kernels.cuh>

NINFER_KERNELS(bf16, __nv_bfloat16)
NINFER_KERNELS(f16, __half)
NINFER_COMMON_KERNELS()
