// ninfer-sm120: Blackwell consumer cards (RTX 50xx). bf16 and fp16; 256-byte L2 prefetch and 4 loads in
// flight per lane (the H200 tuning) on GDDR7. Compile-checked only: no RTX 50 card was available to run it.
#define NINFER_L2_PREFETCH_256B
#define NINFER_GEMV_WARPS 4
#define NINFER_GEMV_UNROLL 4
#define NINFER_ATTN_WARPS 4
#include <ninfer/kernels.cuh>

NINFER_KERNELS(bf16, __nv_bfloat16)
NINFER_KERNELS(f16, __half)
NINFER_COMMON_KERNELS()
