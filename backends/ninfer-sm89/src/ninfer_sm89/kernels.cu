// ninfer-sm89: Ada (RTX 40xx, L4, L40S). bf16 and fp16; Ada's large L2 (up to 96 MB) makes 256-byte L2
// prefetch cheap; 4 16-byte loads in flight per lane (the H200 tuning; not measured on this card) on GDDR6X.
#define NINFER_L2_PREFETCH_256B
#define NINFER_GEMV_WARPS 4
#define NINFER_GEMV_UNROLL 4
#define NINFER_ATTN_WARPS 4
#include <ninfer/kernels.cuh>

NINFER_KERNELS(bf16, __nv_bfloat16)
NINFER_KERNELS(f16, __half)
NINFER_COMMON_KERNELS()
