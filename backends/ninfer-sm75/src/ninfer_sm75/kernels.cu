// ninfer-sm75: Turing (RTX 20xx, T4). fp16 only: Turing has no bf16 arithmetic, so bf16 models run on
// the reference backend or are loaded as fp16. No L2 prefetch-size hint (an sm_80 feature); 4 loads in
// flight per lane (the H200 tuning; not measured on a Turing card).
#define NINFER_GEMV_WARPS 4
#define NINFER_GEMV_UNROLL 4
#define NINFER_ATTN_WARPS 4
#define NINFER_MMA_K8 1  // tensor-core GEMV as two m16n8k8 (m16n8k16 needs sm_80), operands through registers
#include <ninfer/kernels.cuh>

NINFER_KERNELS(f16, __half)
NINFER_COMMON_KERNELS()
