"""A persistent kernel for a stack of quantised MLP blocks, with real products and outputs, against today's launches.

Session 35's bench/chain_bound.py bounded a persistent decode step from above with stand-in work: one kernel, one
block an SM, each GEMV's bytes dealt in 16 KB units that a block's producer takes whenever its ring of shared-memory
stages has room, and a grid barrier where a GEMV needs the one before it. On an H100 it streamed the 27B's weights
8.9-9.9 % faster than today's launches, and 8.2 % faster than the real GEMV chain with stand-in int4 products. This
benchmark builds the first real piece: the 27B's MLP block (the residual add, RMSNorm, gate_up with SwiGLU, down),
L times, in one launch, its outputs checked against today's launches and a float32 reference. The MLP is 65 % of the
27B step's weight bytes.

The kernel (one block an SM, warp 0 the producer, CONSUMERS warps the consumers):

- **Units.** A unit is one 16-row tile's run of up to UG weight groups of 128 k (16 KB of int4 codes and their
  scales): gate_up's tiles (K = H) in P1 parts, down's (K = I) in P2. Warp 0's lane 0 takes each GEMV's next unit
  from a count in global memory (asking for the next while it copies this one) whenever the ring has a free stage,
  copies its codes and scales with cp.async.bulk, and runs ahead across GEMVs and layers (the weights depend on
  nothing).
- **Products.** Each consumer warp claims the block's next stage (in order, a count in shared memory) and multiplies
  its whole unit alone: the int4 fixed-point products of ninfer's one-token GEMV (qgemv.cu qmv1f: two IMMA m16n8k32
  a 64-k chunk, the token's 16-bit form in hi / lo bytes from shared memory, one scale a group). A stage is taken
  once the producer has issued that fill (its number in the stage's meta) and its bytes are in. The warp frees the
  stage, runs the unit's epilogue while the other warps go on, then claims the next.
- **Epilogues.** The unit's 16 row sums go into a workspace. gate_up's units are dealt group-major: the last of a
  128-group's units (8 tiles x gate / up x P1 parts; a count a group) adds the parts in order, makes SwiGLU (gate
  and up rounded to bf16 first, as today's kernels store them) and the group's fixed-point form for down. The last
  of a down tile's P2 parts (a count a tile) makes its rows plus the residual, the new residual row.
- **Waits.** Before gate_up and before down, the consumers of every block meet at a grid barrier. After the first,
  every block makes the RMSNorm of the residual row and its fixed-point form itself (the same bits in every block),
  into shared memory; after the second, it copies down's form from L2 into shared memory. Two barriers a layer
  (NINFER_PM_FLOW=1: one, below). A warp whose claimed stage belongs to a later GEMV (its unit's segment, or the
  producer's count where the GEMV ended) keeps it for after the barrier.
- **Flows instead of barriers.** NINFER_PM_FLOW=1: no barrier before down; a down unit waits for flags on its own
  128-groups of SwiGLU's form and copies those groups into its warp's shared memory. NINFER_PM_FLOW=2: no barrier at
  all. The last down tile of each 128-group of residual rows makes that group's form of h * w for the next layer (w
  its norm weight) and the group's sum of squares, then flags it; gate_up's units wait for their groups likewise. The
  norm's scale, one number a layer, is applied in SwiGLU's epilogue, from the 40 sums in order. Its outputs differ from
  today's launches by the rounding of the norm's output (not made in bf16), within the check's bound.
  NINFER_PM_FLOW=3: as 2, but each block copies gate_up's whole form once its 40 groups are flagged.
- **Other options:** NINFER_PM_REL=1 (acq_rel counts and release / acquire barriers without fence.sc),
  NINFER_PM_BATCH=1 (a unit's copy of its groups of the form: every load, then every store), NINFER_PM_DIAG
  (measurement builds, outputs wrong). Session 40's, with FLOW=1: NINFER_PM_TDONE=1 (gate_up waits on a count of
  down tiles done, not a grid barrier), NINFER_PM_PACK=1 (with TDONE: down's parts summed exactly in fixed point by
  packed 64-bit atomics, so a row's last part stores it with no second round trip), NINFER_PM_TAKE (the producer's
  units a take), NINFER_PM_RING=1 (records the ring's fill and the wait's times at gate_up's boundary),
  NINFER_PM_TAILN / NINFER_PM_TAILG (down's short last parts), NINFER_PM_PL (a launch a layer, PDL between them; not
  yet measured right); with FLOW=3, NINFER_PM_X2=1 (gate_up's form in two buffers). Two lost and were taken out
  (commit 4304f00 has them): NINFER_PM_NORMP (the norm from the down tiles' sums of squares) and NINFER_PM_DEEP=2
  (two takes in flight).
- Session 37 also measured units taken ahead and asked of L2 (NINFER_PM_AHEAD,
  NINFER_PM_WHEN_FULL) and a flagged form's groups copied once a block rather than once a unit (NINFER_PM_CACHE),
  and session 39 three more: cooperative stages (NINFER_PM_COOP: every consumer warp
  multiplies a share of every stage), a form warp (NINFER_PM_FLANE, NINFER_PM_FSEEN: a warp of its own waits for each
  unit's flagged groups of its input form and bulk-copies them into the unit's stage) and gate_up's units taken ahead
  into L2 while the ring is full at its barrier (NINFER_PM_PFQ): all slower, and taken out since (the call scripts
  name the commits that have them).

Measured on H100s (bench/RESULTS.md, sessions 36-40): correct in every form measured. The defaults (two grid barriers a
layer, fences) run at 0.74 of copy bandwidth against 0.88-0.90 for today's launches of the same blocks; the best form,
NINFER_PM_FLOW=1 NINFER_PM_REL=1 NINFER_PM_BATCH=1, at 0.874-0.881 against 0.888-0.898 (1.2-2.5 % more time);
without gate_up's barrier and norm (DIAG=3, outputs wrong) 0.931-0.932. Session 40: with NINFER_PM_TDONE=1, level
with the launches (3352-3359 us against 3338-3355); with NINFER_PM_TDONE=1 NINFER_PM_PACK=1, 0.4-1.4 % ahead of them
(3227-3262 us against 3262-3303), the first form faster than today's launches.

    python bench/persist_mlp.py [--layers 64] [--check-layers 4]

Needs sm_90 (cp.async.bulk, mbarriers); about 9 GB of GPU memory at 64 layers.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import graph_us  # noqa: E402

STAGES = int(os.environ.get("NINFER_PM_STAGES", "10"))  # ring stages a block (16.5 KB each)
CONSUMERS = int(os.environ.get("NINFER_PM_CONSUMERS", "10"))  # consumer warps a block (<= STAGES)
UG = int(os.environ.get("NINFER_PM_UG", "16"))  # most groups of 128 k a unit (16: 16 KB of int4 codes)
# measurements only (outputs wrong): 1 the consumers skip the products, 2 also the epilogues; 3 no grid barriers and
# no norm or form copy (the products and epilogues kept)
DIAG = int(os.environ.get("NINFER_PM_DIAG", "0"))
# 1: no grid barrier before down: each down unit waits for its own 128-groups' forms (a flag a group, set by the
# group's SwiGLU epilogue with the layer it is of) and copies them into its warp's shared memory. 2: no grid barrier
# at all: gate_up's units likewise wait for their groups of the residual row's form, made by the last down tile of
# each 128-group of rows (the form of h * w, not of the norm's output: the norm's scale, one number, is applied in
# SwiGLU's epilogue, from the groups' sums of squares); no block makes the norm. 3: as 2, but gate_up's units read
# the form from one copy a block makes in shared memory once all 40 groups' flags are set, not from copies of their
# own; each block counts its copy done, and the next layer's form is written only once every block has
FLOW = int(os.environ.get("NINFER_PM_FLOW", "0"))
# 1: the epilogues' counts as acq_rel atomics, their flags' release stores and the grid barriers' release add and
# acquire loads without a fence.sc beside them (0: a __threadfence() on each side of a count or barrier, before a flag)
REL = int(os.environ.get("NINFER_PM_REL", "0"))
# with FLOW: 1 a unit's copy of its groups of the form issues every load before its stores (0: a load and its store
# in turn, up to 8 round trips to L2 a lane)
BATCH = int(os.environ.get("NINFER_PM_BATCH", "0"))
# FLOW 1: 1 no grid barrier before gate_up either: the last part of each down tile counts the tile done (a release add
# to a count a layer), and each block's consumers wait for all HID / 16 tiles (what the barrier waited for, without
# every block's consumers meeting first)
TDONE = int(os.environ.get("NINFER_PM_TDONE", "0"))
# FLOW 3: 1 gate_up's form in two buffers (by the layer's parity), so a group's form for layer l + 1 waits only for
# every block's copy of layer l - 1's, and that wait comes after the group's loads (0: one buffer, layer l's copies
# awaited before the loads)
X2 = int(os.environ.get("NINFER_PM_X2", "0"))
# FLOW 1 with TDONE: 1 a down unit adds each of its 16 row sums, in fixed point (2^-24), to its row's 64-bit count
# (the parts counted in the top 8 bits) with one atomic a row; the part that completes a row knows the row's sum from
# the atomic's answer and stores h at once (no workspace, no second round trip); TDONE then counts rows, HID a layer.
# The sum is exact in fixed point, so its order does not matter (the same bits every run)
PACK = int(os.environ.get("NINFER_PM_PACK", "0"))
# the producer: units a take from the segment's count (1: one, with the next take asked for while it is copied)
TAKE = int(os.environ.get("NINFER_PM_TAKE", "1"))
# FLOW 1 with TDONE, a measurement (outputs right): 1 each block records, at each gate_up boundary, its ring's stages
# filled and not yet multiplied, and the global timer, as the wait begins, as it ends and once the form is made; the
# script prints their means
RING = int(os.environ.get("NINFER_PM_RING", "0"))
# 1: a launch a layer (the kernel built for one layer), PDL between them: each block lets the next launch go at its
# start, and its producer fills the ring before the wait (the weights depend on nothing), its consumers after it. The
# step to today's decoder: the MLP block's three launches as one, the other ops between them as they are
PL = int(os.environ.get("NINFER_PM_PL", "0"))  # 2: every thread waits first, then lets the next launch go
# FLOW 1: down's last TAILN parts of each tile TAILG groups each (the parts before them of up to UG), so the units at
# the end of down, which gate_up's wait waits for, are short (0: every part of up to UG groups)
TAILN = int(os.environ.get("NINFER_PM_TAILN", "0"))
TAILG = int(os.environ.get("NINFER_PM_TAILG", "4"))

SOURCE = r"""
#define STAGES %(stages)d
#define CONSUMERS %(consumers)d
#define UG %(ug)d
#define HID %(h)d
#define INTER %(i)d
#define NL %(layers)d
#define P1 %(p1)d
#define P2 %(p2)d
#define CODE_BYTES (UG * 1024)
#define STAGE_BYTES (CODE_BYTES + UG * 32)
#define NG1 (HID / 128)
#define NG2 (INTER / 128)
#define T1 (INTER / 16)
#define T2 (HID / 16)
#define EPS %(eps)ff
#define DIAG %(diag)d
#define FLOW %(flow)d
#define REL %(rel)d
#define BATCH %(batch)d
#define TDONE %(tdone)d
#define X2 %(x2)d
#define PACK %(pack)d
#define TAKE %(take)d
#define RING %(ring)d
#define PL %(pl)d
#define TAILN %(tailn)d
#define TAILG %(tailg)d
#define M2 (NG2 - TAILN * TAILG)  // down's groups in parts of up to UG
#define PM2 (P2 - TAILN)           // those parts
#define WBUF (UG * 256 + UG * 8)  // FLOW: a warp's forms of its unit's groups, hi / lo planes and sx / sums

typedef __nv_bfloat16 bf16;

struct Layer {  // one MLP block's tiled weights (qgemv.cu's layout) and its norm weight
    const uint4 *gu_w;     // [gate | up]: 2 T1 tiles x (HID / 64) chunks x 32 lanes
    const unsigned *gu_s;  // 2 T1 tiles x NG1 groups x 8 words (s_g | s_{g+8} << 16, fp16)
    const uint4 *dn_w;     // T2 tiles x (INTER / 64) chunks x 32 lanes
    const unsigned *dn_s;  // T2 x NG2 x 8
    const bf16 *nw;        // [HID]
};
struct Work {
    bf16 *h;        // [2][HID]: layer l's residual row in h[l & 1], its output in h[(l + 1) & 1]
    unsigned char *xq2;  // down's input form: [2][INTER] hi / lo bytes in k_order
    int2 *xg2;      // [NG2]
    float *ws1;     // gate_up's unit sums: [T1][2][P1][16]
    float *ws2;     // down's: [T2][P2][16]
    int *tc2;       // a count a down tile (T2); the last unit's sets it back to 0
    int *gc;        // a count a 128-group of SwiGLU's output (NG2), likewise
    unsigned *bar;  // [2 NL] the grid barriers' counts (zeroed before the launch)
    unsigned *grab; // [2 NL] each GEMV's next unit (zeroed before the launch)
    int *gflag;     // FLOW: [NG2] the last layer + 1 whose SwiGLU form of the group is written (zeroed likewise)
    unsigned char *xq1;  // FLOW 2: gate_up's input form (of h * w): [2][HID] hi / lo bytes in k_order
    int2 *xg1;      // [NG1]
    float *ssg;     // [2][NG1] the sums of squares of layer l's residual row's 128-groups, in ssg[l & 1]
    int *hc;        // a count a 128-group of the residual row (NG1: 8 down tiles); the last sets it back to 0
    int *hflag;     // [NG1] the last layer + 1 whose input form of the group is written (zeroed before the launch)
    int *copied;    // FLOW 3: [NL] the blocks that have copied layer l's input form (zeroed likewise)
    int *tdone;     // TDONE: [NL] layer l's down tiles done (zeroed likewise)
    unsigned long long *pk;  // PACK: [HID] each row's parts counted (top 8 bits) and summed (zeroed; the last resets)
    long long *ring;  // RING: [NL][blocks][5]: stages filled and not multiplied at the wait's start and after the form,
                      // the global timer (ns) at the wait's start, its end, after the form
};
struct Meta { int seq, seg, tile, half, part, g0, ng; };  // a stage's unit: its number in the block's order, segment
                                                          // (2 a layer), tile, gate / up, part, groups

__device__ __forceinline__ void cons_sync() { asm volatile("bar.sync 1, %%0;" ::"r"(CONSUMERS * 32) : "memory"); }
// every block's consumers meet: each block counts itself in *count (release), waits until all have (acquire)
__device__ __forceinline__ void grid_barrier(unsigned *count, int t) {
    if (!REL) __threadfence();  // REL 1: the release add and the acquire loads alone (with the block's barriers)
    cons_sync();
    if (t == 0) {
        asm volatile("red.release.gpu.global.add.u32 [%%0], 1;" ::"l"(count) : "memory");
        unsigned seen = 0;
        while (seen < gridDim.x)
            asm volatile("ld.acquire.gpu.global.u32 %%0, [%%1];" : "=r"(seen) : "l"(count) : "memory");
    }
    cons_sync();
    if (!REL) __threadfence();
}
__device__ __forceinline__ float bf16r(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ __forceinline__ long long ninfer_globaltimer() {
    long long v;
    asm volatile("mov.u64 %%0, %%globaltimer;" : "=l"(v));
    return v;
}
// spin until a flag or count written by other blocks (with a release) reaches v, acquiring what was written before it
__device__ __forceinline__ void wait_flag(const int *p, int v) {
    int seen;
    do {
        asm volatile("ld.acquire.gpu.global.b32 %%0, [%%1];" : "=r"(seen) : "l"(p) : "memory");
    } while (seen < v);
}

// a unit's count: lane 0 adds one, releasing what its warp wrote (after a __syncwarp) and, REL 1, acquiring what the
// units counted before it wrote (an acq_rel atomic instead of two fence.sc); then every lane may read those
__device__ __forceinline__ int count_add(int *p) {
#if REL
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %%0, [%%1], 1;" : "=r"(old) : "l"(p) : "memory");
    return old;
#else
    __threadfence();
    return atomicAdd(p, 1);
#endif
}
// after the count's last unit is known (every lane): order this warp's reads after lane 0's count
__device__ __forceinline__ void count_acquired() {
#if REL
    __syncwarp();
#else
    __threadfence();
#endif
}
// before lane 0 flags what its warp wrote with a release store (REL 1: the store's release, after a __syncwarp)
__device__ __forceinline__ void before_flag() {
#if !REL
    __threadfence();
#endif
    __syncwarp();
}

// FLOW 2, 3: one warp makes 128-group grp of a layer's input form, that of h * w (h the residual row, w the layer's norm
// weight), the group's sum of squares of h into ss[grp], then flags the group with the layer + 1
__device__ __forceinline__ void hform(int grp, const bf16 *h, const bf16 *nw, float *ss, int flag, const Work &wk,
                                      int lane, const int *wait = nullptr, int buf = 0) {
    const uint2 hv = __ldcg(reinterpret_cast<const uint2 *>(h + grp * 128) + lane);
    const uint2 wv = __ldg(reinterpret_cast<const uint2 *>(nw + grp * 128) + lane);
    if (wait) {  // X2: every block's copy of the buffer's last form, awaited after the loads
        if (lane == 0) wait_flag(wait, (int)gridDim.x);
        __syncwarp();
    }
    const __nv_bfloat162 *hp = reinterpret_cast<const __nv_bfloat162 *>(&hv);
    const __nv_bfloat162 *wp = reinterpret_cast<const __nv_bfloat162 *>(&wv);
    float a[4], q = 0.f;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const float2 hf = __bfloat1622float2(hp[i]), wf = __bfloat1622float2(wp[i]);
        a[2 * i] = hf.x * wf.x, a[2 * i + 1] = hf.y * wf.y;
        q = fmaf(hf.x, hf.x, q), q = fmaf(hf.y, hf.y, q);
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) q += __shfl_xor_sync(~0u, q, o);
    ninfer::fixed_group32(a, grp, wk.xq1 + buf * 2 * HID, wk.xg1 + buf * NG1, HID);
    if (lane == 0) ss[grp] = q;
    before_flag();
    if (lane == 0) asm volatile("st.release.gpu.global.b32 [%%0], %%1;" ::"l"(wk.hflag + grp), "r"(flag) : "memory");
}

// a unit's epilogue, by the warp that multiplied it (its 16 row sums in lanes (g, 0): rows g, g + 8): the sums into
// the workspace; the last unit of a 128-group of SwiGLU's output (8 tiles x gate / up x P1 parts) makes the group's
// SwiGLU and its fixed-point form for down; the last of a down tile's P2 parts, the tile's rows plus the residual
__device__ __forceinline__ void epilogue(const Meta &m, int l, bool up, const bf16 *hin, const bf16 *nwn, float acc0,
                                         float acc2, const Work &wk, int lane, int g, int tq) {
    int fin = 0;
    if (up) {
        float *ws = wk.ws1 + (long long)m.tile * 2 * P1 * 16;
        if (tq == 0) {
            ws[(m.half * P1 + m.part) * 16 + g] = acc0;
            ws[(m.half * P1 + m.part) * 16 + g + 8] = acc2;
        }
        __syncwarp();
        const int grp = m.tile >> 3;
        if (lane == 0) {
            fin = count_add(wk.gc + grp) == 16 * P1 - 1;
        }
        if (!__shfl_sync(~0u, fin, 0)) return;
        count_acquired();
        // lane l: rows 4 l .. 4 l + 3 of the group (tile grp * 8 + l / 4, rows 4 (l %% 4) ..), gate and up each rounded to
        // bf16 first, as today's kernels store them; then the group's form (fixed_group32: 4 values a lane)
        const float *wt = wk.ws1 + (long long)(grp * 8 + lane / 4) * 2 * P1 * 16 + 4 * (lane & 3);
        float gs[4] = {0.f, 0.f, 0.f, 0.f}, us[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int p = 0; p < P1; p++) {
            const float4 a = __ldcg(reinterpret_cast<const float4 *>(wt + p * 16));
            const float4 b = __ldcg(reinterpret_cast<const float4 *>(wt + (P1 + p) * 16));
            gs[0] += a.x, gs[1] += a.y, gs[2] += a.z, gs[3] += a.w;
            us[0] += b.x, us[1] += b.y, us[2] += b.z, us[3] += b.w;
        }
        float rsc = 1.f;  // FLOW 2, 3: the norm's scale, from the 128-groups' sums of squares (in order: the same bits)
        if (FLOW >= 2) {
            const float *sp = wk.ssg + (l & 1) * NG1;
            float q = lane < NG1 ? __ldcg(sp + lane) : 0.f;
            if (lane + 32 < NG1) q += __ldcg(sp + lane + 32);
#pragma unroll
            for (int o = 16; o; o >>= 1) q += __shfl_xor_sync(~0u, q, o);
            rsc = rsqrtf(q / (float)HID + EPS);
        }
        float v[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float gv = bf16r(gs[i] * rsc), uv = bf16r(us[i] * rsc);
            v[i] = bf16r(gv / (1.f + expf(-gv)) * uv);
        }
        ninfer::fixed_group32(v, grp, wk.xq2, wk.xg2, INTER);
        if (lane == 0) wk.gc[grp] = 0;
        if (FLOW) {  // the group's form is written: flag it with its layer (release after every lane's stores)
            before_flag();
            if (lane == 0) asm volatile("st.release.gpu.global.b32 [%%0], %%1;" ::"l"(wk.gflag + grp), "r"(l + 1) : "memory");
        }
    } else if (FLOW == 1 && TDONE && PACK) {
        // lanes (g, 0) hold rows g and g + 8: each adds its two parts to their rows' counts; the residual values are
        // loaded beside the atomics, so a row's last part stores h with no further round trip
        int done = 0;
        if (tq == 0) {  // both rows' loads and atomics issued before either answer is used: one round trip
            constexpr long long OFF = 1ll << 51;  // each part's fixed-point value + OFF is positive (|sum| < 2^27)
            float hv[2];
            unsigned long long old[2], add[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = m.tile * 16 + g + 8 * r;
                hv[r] = __bfloat162float(__ldcg(hin + row));
                add[r] = (1ull << 56) + (unsigned long long)(__float2ll_rn((r ? acc2 : acc0) * 16777216.f) + OFF);
                asm volatile("atom.relaxed.gpu.global.add.u64 %%0, [%%1], %%2;"
                             : "=l"(old[r]) : "l"(wk.pk + row), "l"(add[r]) : "memory");
            }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = m.tile * 16 + g + 8 * r;
                const unsigned long long nw = old[r] + add[r];
                if ((int)(nw >> 56) == P2) {  // the row's last part: its sum is exact, whatever the parts' order
                    const long long fx = (long long)(nw & ((1ull << 56) - 1)) - (long long)P2 * OFF;
                    wk.h[((l + 1) & 1) * HID + row] = __float2bfloat16_rn(bf16r((float)fx * (1.f / 16777216.f)) + hv[r]);
                    wk.pk[row] = 0ull;
                    done++;
                }
            }
        }
#pragma unroll
        for (int o = 16; o; o >>= 1) done += __shfl_xor_sync(~0u, done, o);
        if (done) {  // the rows this unit completed: released with the count (after every lane's stores)
            before_flag();
            if (lane == 0) asm volatile("red.release.gpu.global.add.s32 [%%0], %%1;" ::"l"(wk.tdone + l), "r"(done) : "memory");
        }
    } else {
        float *ws = wk.ws2 + (long long)m.tile * P2 * 16;
        if (tq == 0) {
            ws[m.part * 16 + g] = acc0;
            ws[m.part * 16 + g + 8] = acc2;
        }
        __syncwarp();
        if (lane == 0) {
            fin = count_add(wk.tc2 + m.tile) == P2 - 1;
        }
        if (!__shfl_sync(~0u, fin, 0)) return;
        count_acquired();
        if (lane < 16) {  // down's row, rounded to bf16, plus the residual, rounded as add_rms_norm stores h
            float ys = 0.f;
            for (int p = 0; p < P2; p++) ys += __ldcg(ws + p * 16 + lane);
            const int row = m.tile * 16 + lane;
            const float hv = __bfloat162float(__ldcg(hin + row));
            wk.h[((l + 1) & 1) * HID + row] = __float2bfloat16_rn(bf16r(ys) + hv);
        }
        if (lane == 0) wk.tc2[m.tile] = 0;
        if (FLOW == 1 && TDONE) {  // the tile is done: its rows released with the count
            before_flag();
            if (lane == 0) asm volatile("red.release.gpu.global.add.s32 [%%0], 1;" ::"l"(wk.tdone + l) : "memory");
        }
        if (FLOW >= 2 && nwn) {  // the last of a 128-group's 8 tiles makes the group's form for the next layer (FLOW 3:
                                 // once every block has copied this layer's)
            __syncwarp();
            const int grp = m.tile >> 3;
            if (lane == 0) {
                fin = count_add(wk.hc + grp) == 7;
            }
            if (!__shfl_sync(~0u, fin, 0)) return;
            count_acquired();
            if (lane == 0) wk.hc[grp] = 0;
            if (FLOW == 3 && !X2) {
                if (lane == 0) {
                    wait_flag(wk.copied + l, (int)gridDim.x);
                }
                __syncwarp();
            }
            hform(grp, wk.h + ((l + 1) & 1) * HID, nwn, wk.ssg + ((l + 1) & 1) * NG1, l + 2, wk, lane,
                  FLOW == 3 && X2 && l > 0 ? wk.copied + l - 1 : nullptr, FLOW == 3 && X2 ? (l + 1) & 1 : 0);
        }
    }
}

// unit u of segment s (2 a layer: gate_up, down): its tile, part and groups, and where its codes and scales are
__device__ __forceinline__ void unit(const Layer *layers, int s, unsigned u, Meta &m, const uint4 *&w,
                                     const unsigned *&sc) {
    const Layer &L = layers[s >> 1];
    const bool up = (s & 1) == 0;  // gate_up, else down
    const int parts = up ? P1 : P2, ng_all = up ? NG1 : NG2, nchunk = up ? HID / 64 : INTER / 64;
    m.seg = s;
    m.part = u %% parts;
    if (up) {  // group-major: a 128-group of SwiGLU's output is 8 tiles x gate / up x P1 parts
        const unsigned r = u %% (16 * P1);
        m.tile = u / (16 * P1) * 8 + r / (2 * P1);
        m.half = (r / P1) %% 2;
    } else {  // FLOW: part-major, so down's first units need SwiGLU's first groups
        m.tile = FLOW ? u %% T2 : u / parts;
        m.part = FLOW ? u / T2 : m.part;
        m.half = 0;
    }
#if TAILN
    if (!up && m.part >= PM2) {  // a short part at the end of down
        m.g0 = M2 + (m.part - PM2) * TAILG;
        m.ng = TAILG;
    } else {
        const int ng_p = up ? ng_all : M2, np = up ? parts : PM2;
        m.g0 = m.part * ng_p / np;
        m.ng = (m.part + 1) * ng_p / np - m.g0;
    }
#else
    m.g0 = m.part * ng_all / parts;
    m.ng = (m.part + 1) * ng_all / parts - m.g0;
#endif
    const int T = m.tile + m.half * T1;
    w = (up ? L.gu_w : L.dn_w) + ((long long)T * nchunk + 2 * m.g0) * 32;
    sc = (up ? L.gu_s : L.dn_s) + ((long long)T * ng_all + m.g0) * 8;
}

// one 128-group j of a unit: its two 64-k chunks' IMMA products (codes wst, form chunks x0 / x1), scaled by the
// group's weight scales (sst) and form's sx, its zero point taken out with the form's sum; rows g, g + 8 into acc0,
// acc2
__device__ __forceinline__ void group_product(const uint4 *wst, const unsigned *sst, int j, uint4 x0, uint4 x1, int2 gx,
                                              int lane, int g, float &acc0, float &acc2) {
    int d[4] = {0, 0, 0, 0};
    const unsigned M = 0x0F0F0F0Fu;
    const uint4 w0 = wst[(2 * j) * 32 + lane], w1 = wst[(2 * j + 1) * 32 + lane];
    cb_imma(d, w0.x & M, (w0.x >> 4) & M, w0.y & M, (w0.y >> 4) & M, x0.x, x0.y);
    cb_imma(d, w0.z & M, (w0.z >> 4) & M, w0.w & M, (w0.w >> 4) & M, x0.z, x0.w);
    cb_imma(d, w1.x & M, (w1.x >> 4) & M, w1.y & M, (w1.y >> 4) & M, x1.x, x1.y);
    cb_imma(d, w1.z & M, (w1.z >> 4) & M, w1.w & M, (w1.w >> 4) & M, x1.z, x1.w);
    const unsigned sw = sst[j * 8 + g];
    const float sx = __int_as_float(gx.x);
    const int v0 = d[0] * 256 + d[1] - 8 * gx.y, v2 = d[2] * 256 + d[3] - 8 * gx.y;
    acc0 = fmaf(__half2float(__ushort_as_half((unsigned short)(sw & 0xFFFFu))) * sx, (float)v0, acc0);
    acc2 = fmaf(__half2float(__ushort_as_half((unsigned short)(sw >> 16))) * sx, (float)v2, acc2);
}

// whether stage slot holds fill q with its bytes in: its number in the meta, then its full barrier's phase (a phase
// test alone could pass on the slot's fill before last, when that one is still in flight)
__device__ __forceinline__ bool stage_ready(const Meta *meta, unsigned long long *full, int slot, int q) {
    unsigned ready = 0;
    if (*(volatile const int *)&meta[slot].seq == q)
        asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%%1], %%2; selp.u32 %%0, 1, 0, p; }"
                     : "=r"(ready) : "r"(s32(&full[slot])), "r"((unsigned)(q / STAGES) & 1u) : "memory");
    return ready;
}

extern "C" __global__ void __launch_bounds__(32 * (CONSUMERS + 1), 1)
    persist_mlp(const Layer *__restrict__ layers, const Work *__restrict__ wkp) {
    static_assert(CONSUMERS <= STAGES, "a claimed stage's previous fill must be done: CONSUMERS <= STAGES");
    static_assert(FLOW < 2 || NG1 <= 64, "FLOW 2, 3: the norm's scale sums NG1 <= 64 groups in one warp");
    const Work wk = *wkp;
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char *ring = smem;                                        // STAGES x STAGE_BYTES
    unsigned char *xs = smem + STAGES * STAGE_BYTES;                   // the GEMV's input form: [2][K] bytes
    // FLOW 1, 3: gate_up's form only; 2: none
    constexpr int KX = FLOW == 2 ? 128 : FLOW || HID > INTER ? HID : INTER;
    int2 *xgs = reinterpret_cast<int2 *>(xs + 2 * KX);                  // [K / 128]
    unsigned char *wbuf = xs + ((2 * KX + KX / 128 * 8 + 15) & ~15);     // FLOW: CONSUMERS x WBUF (16-byte aligned)
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    __shared__ Meta meta[STAGES];
    __shared__ int seg_end[2 * NL];  // the producer's count of stages when segment s ends (-1 until then)
    __shared__ int claim;            // the consumers' next stage
    __shared__ int filled;           // RING: the producer's count of stages filled
    __shared__ float rsum[CONSUMERS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (PL == 1) {
        ninfer::pdl_trigger();  // the next layer's launch may go; its blocks take SMs as this one's leave
    } else {
        ninfer::pdl_wait();  // the counts' zeroing before this launch
        if (PL == 2) ninfer::pdl_trigger();
    }
    if (threadIdx.x == 0) {
        for (int i = 0; i < STAGES; i++) {
            mb_init(&full[i], 1);
            mb_init(&empty[i], 1);
            meta[i].seq = -1;
        }
        for (int i = 0; i < 2 * NL; i++) seg_end[i] = -1;
        claim = 0;
        filled = 0;
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == 0) {  // the producer
        if (lane != 0) return;
        int stage = 0, count = 0;
        unsigned phase = 0;
        auto fill = [&](int s, unsigned u) {  // the next stage, with unit u of segment s
            Meta m;
            const uint4 *w;
            const unsigned *sc;
            unit(layers, s, u, m, w, sc);
            m.seq = count;
            mb_wait(&empty[stage], phase ^ 1);
            meta[stage] = m;
            unsigned char *dst = ring + stage * STAGE_BYTES;
            mb_expect(&full[stage], m.ng * 1056u);
            bulk_copy(dst, w, m.ng * 1024u, &full[stage]);
            bulk_copy(dst + CODE_BYTES, sc, m.ng * 32u, &full[stage]);
            if (++stage == STAGES) stage = 0, phase ^= 1;
            count++;
            if (RING) *(volatile int *)&filled = count;
        };
        for (int s = 0; s < 2 * NL; s++) {
            const unsigned units = (s & 1) == 0 ? T1 * 2 * P1 : T2 * P2;
#if TAKE == 1
            unsigned u = atomicAdd(wk.grab + s, 1u);
            while (u < units) {
                const unsigned next = atomicAdd(wk.grab + s, 1u);  // the next unit asked for while this one is copied
                fill(s, u);
                u = next;
            }
#else
            unsigned u = atomicAdd(wk.grab + s, (unsigned)TAKE);
            while (u < units) {
                const unsigned next = atomicAdd(wk.grab + s, (unsigned)TAKE);  // asked for while these are copied
                for (int i = 0; i < TAKE && u + i < units; i++) fill(s, u + i);
                u = next;
            }
#endif
            *(volatile int *)&seg_end[s] = count;  // before any stage of a later segment is filled
        }
        return;
    }
    // the consumers: each warp claims the block's next stage and multiplies its whole unit alone (the unit's 16 row
    // sums end in its lanes (g, 0)), frees the stage, then runs the unit's epilogue while the other warps go on
    const int t = threadIdx.x - 32, cw = t >> 5, g = lane >> 2, tq = lane & 3;
    if (PL == 1) ninfer::pdl_wait();  // the layer before (its residual row, the workspaces) is done
    if (FLOW >= 2 && cw == 0)  // layer 0's input form, a 128-group a block
        for (int grp = blockIdx.x; grp < NG1; grp += gridDim.x) hform(grp, wk.h, layers[0].nw, wk.ssg, 1, wk, lane);
    int q = 0;
    if (lane == 0) q = atomicAdd(&claim, 1);
    q = __shfl_sync(~0u, q, 0);
    for (int s = 0; s < 2 * NL; s++) {
        const int l = s >> 1;
        const bool up = (s & 1) == 0;
        const bf16 *hin = wk.h + (l & 1) * HID;
        uint4 nwv[(HID / 8 + CONSUMERS * 32 - 1) / (CONSUMERS * 32)];  // the norm weight, loaded before the barrier
        constexpr int NV = sizeof(nwv) / sizeof(uint4);
        if (up && FLOW < 2) {
#pragma unroll
            for (int k = 0; k < NV; k++) {
                const int v = t + k * CONSUMERS * 32;
                if (v < HID / 8) nwv[k] = __ldg(reinterpret_cast<const uint4 *>(layers[l].nw) + v);
            }
        }
        // the block's consumers meet before this GEMV: after a grid barrier, for the norm or the form's copy; FLOW 3,
        // gate_up: after its 40 groups' flags, to copy the form down's epilogues made
        const bool meet = up ? FLOW != 2 : !FLOW;
        long long *rg = wk.ring + ((long long)l * gridDim.x + blockIdx.x) * 5;
        if (s > 0 && meet && DIAG != 3 && FLOW == 1 && TDONE && up) {  // every down tile of layer l - 1 done
            if (RING && t == 0) {  // stages filled, less those claimed but by the CONSUMERS warps that each hold one
                rg[0] = *(volatile int *)&filled - *(volatile int *)&claim + CONSUMERS;
                rg[2] = ninfer_globaltimer();
            }
            if (t == 0) wait_flag(wk.tdone + l - 1, PACK ? HID : T2);
            if (RING && t == 0) rg[3] = ninfer_globaltimer();
            cons_sync();
            if (!REL) __threadfence();
        } else if (s > 0 && meet && DIAG != 3 && !(FLOW == 3 && up)) {
            grid_barrier(wk.bar + s - 1, t);
        }
        if (DIAG == 3 || !meet) {  // DIAG 3, measurements only: no norm, no form copy (the forms left from before)
        } else if (up && FLOW == 3) {
            if (t < NG1) {
                wait_flag(wk.hflag + t, l + 1);
                if (!REL) __threadfence();
            }
            cons_sync();
            const int b = X2 ? l & 1 : 0;
            const uint4 *src = reinterpret_cast<const uint4 *>(wk.xq1 + b * 2 * HID);
            for (int v = t; v < 2 * HID / 16; v += CONSUMERS * 32) reinterpret_cast<uint4 *>(xs)[v] = __ldcg(src + v);
            for (int v = t; v < NG1; v += CONSUMERS * 32) xgs[v] = __ldcg(wk.xg1 + b * NG1 + v);
        } else if (up) {  // RMSNorm of layer l's residual row and its fixed-point form, into xs / xgs (every block, the same)
            uint4 hv[NV];
            float ss = 0.f;
#pragma unroll
            for (int k = 0; k < NV; k++) {
                const int v = t + k * CONSUMERS * 32;
                if (v < HID / 8) hv[k] = __ldcg(reinterpret_cast<const uint4 *>(hin) + v);
            }
#pragma unroll
            for (int k = 0; k < NV; k++) {
                const int v = t + k * CONSUMERS * 32;
                if (v < HID / 8) {
                    float a[8];
                    ninfer::unpack8<bf16>(hv[k], a);
#pragma unroll
                    for (int i = 0; i < 8; i++) ss = fmaf(a[i], a[i], ss);
                }
            }
#pragma unroll
            for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(~0u, ss, o);
            if (lane == 0) rsum[cw] = ss;
            cons_sync();
            ss = 0.f;
            for (int w = 0; w < CONSUMERS; w++) ss += rsum[w];
            const float rs = rsqrtf(ss / (float)HID + EPS);
#pragma unroll
            for (int k = 0; k < NV; k++) {  // values 8 v .. 8 v + 7, v's group v / 16: 16 lanes a group
                const int v = t + k * CONSUMERS * 32;
                if (k * CONSUMERS * 32 + cw * 32 >= HID / 8) break;  // warp-uniform (HID / 8 a multiple of 32)
                float a[8], w8[8];
                ninfer::unpack8<bf16>(hv[k], a);
                ninfer::unpack8<bf16>(nwv[k], w8);
#pragma unroll
                for (int i = 0; i < 8; i++) a[i] = bf16r(a[i] * rs * w8[i]);
                ninfer::fixed_group16(a, v, true, xs, xgs, HID);
            }
        } else if (!FLOW) {  // down's input form (made by gate_up's epilogues), from L2 into xs / xgs
            const uint4 *src = reinterpret_cast<const uint4 *>(wk.xq2);
            for (int v = t; v < 2 * INTER / 16; v += CONSUMERS * 32) reinterpret_cast<uint4 *>(xs)[v] = __ldcg(src + v);
            for (int v = t; v < NG2; v += CONSUMERS * 32) xgs[v] = __ldcg(wk.xg2 + v);
        }
        if (meet) cons_sync();
        if (RING && FLOW == 1 && TDONE && up && s > 0 && t == 0) {
            rg[1] = *(volatile int *)&filled - *(volatile int *)&claim + CONSUMERS;
            rg[4] = ninfer_globaltimer();
        }
        if (FLOW == 3 && up && t == 0)  // this block's copy of the layer's form is done (its loads before the release)
            asm volatile("red.release.gpu.global.add.s32 [%%0], 1;" ::"l"(wk.copied + l) : "memory");
        const int nchunk = up ? HID / 64 : INTER / 64;
        const uint4 *xb = reinterpret_cast<const uint4 *>(xs) + (g & 1) * nchunk * 4 + tq;
        for (;;) {
            const int slot = q %% STAGES;
            if (!stage_ready(meta, full, slot, q)) {
                const int e = *(volatile int *)&seg_end[s];
                if (e >= 0 && q >= e) break;  // the stage claimed is a later segment's: hold it
                continue;
            }
            const Meta m = meta[slot];
            if (m.seg != s) break;
            const uint4 *wst = reinterpret_cast<const uint4 *>(ring + slot * STAGE_BYTES);
            const unsigned *sst = reinterpret_cast<const unsigned *>(ring + slot * STAGE_BYTES + CODE_BYTES);
            const uint4 *xu = xb + 2 * m.g0 * 4;  // the unit's first chunk of the form, and its groups' sx / sums
            const int2 *gu = xgs + m.g0;
            if (!meet) {  // wait for the unit's groups of its input form (SwiGLU's, or FLOW 2 the residual row's), then
                          // copy them into this warp's buffer
                unsigned char *wb = wbuf + cw * WBUF;
                const int *flag = up ? wk.hflag : wk.gflag;
                const unsigned char *fq = up ? wk.xq1 : wk.xq2;
                const int2 *fg = up ? wk.xg1 : wk.xg2;
                const int K = up ? HID : INTER;
                if (lane < m.ng) {
                    wait_flag(flag + m.g0 + lane, l + 1);
                }
                __syncwarp();
                if (!REL) __threadfence();  // REL 1: the lanes' acquire loads and the __syncwarp order the reads
                if (BATCH) {  // every load first, then the stores: one round trip to L2 (16 lanes a plane)
                    const int p = lane >> 4, r0 = lane & 15;
                    const uint4 *src = reinterpret_cast<const uint4 *>(fq + p * K + m.g0 * 128);
                    uint4 *dst = reinterpret_cast<uint4 *>(wb) + p * UG * 8;
                    uint4 b[UG / 2];
#pragma unroll
                    for (int k = 0; k < UG / 2; k++)
                        if (r0 + 16 * k < 8 * m.ng) b[k] = __ldcg(src + r0 + 16 * k);
                    int2 gx = make_int2(0, 0);
                    if (lane < m.ng) gx = __ldcg(fg + m.g0 + lane);
#pragma unroll
                    for (int k = 0; k < UG / 2; k++)
                        if (r0 + 16 * k < 8 * m.ng) dst[r0 + 16 * k] = b[k];
                    if (lane < m.ng) reinterpret_cast<int2 *>(wb + UG * 256)[lane] = gx;
                } else {
                    for (int i = lane; i < 16 * m.ng; i += 32) {  // plane i / (8 ng), 16 bytes r of its groups' 128 ng
                        const int p = i / (8 * m.ng), r = i - p * 8 * m.ng;
                        reinterpret_cast<uint4 *>(wb)[p * UG * 8 + r] =
                            __ldcg(reinterpret_cast<const uint4 *>(fq + p * K + m.g0 * 128) + r);
                    }
                    if (lane < m.ng) reinterpret_cast<int2 *>(wb + UG * 256)[lane] = __ldcg(fg + m.g0 + lane);
                }
                __syncwarp();
                xu = reinterpret_cast<const uint4 *>(wb) + (g & 1) * UG * 8 + tq;
                gu = reinterpret_cast<const int2 *>(wb + UG * 256);
            }
            float acc0 = 0.f, acc2 = 0.f;
#pragma unroll 4
            for (int j = 0; j < (DIAG == 1 || DIAG == 2 ? 0 : m.ng); j++)
                group_product(wst, sst, j, xu[(2 * j) * 4], xu[(2 * j + 1) * 4], gu[j], lane, g, acc0, acc2);
            __syncwarp();
            if (lane == 0) mb_arrive(&empty[slot]);
            if (DIAG != 2) epilogue(m, l, up, hin, l + 1 < NL ? layers[l + 1].nw : nullptr, acc0, acc2, wk, lane, g, tq);
            if (lane == 0) q = atomicAdd(&claim, 1);  // the next stage, once this unit is done
            q = __shfl_sync(~0u, q, 0);
        }
    }
}
"""


def build(h: int, inter: int, layers: int, eps: float, dev):
    from chain_bound import HELPERS  # mbarriers, bulk copies, the IMMA

    from ninfer.kernels.launch import Module
    from ninfer.kernels.nvrtc import compile_cubin

    p1, p2 = -(-(h // 128) // UG), -(-(inter // 128 - TAILN * TAILG) // UG) + TAILN
    body = SOURCE % dict(stages=STAGES, consumers=CONSUMERS, ug=UG, h=h, i=inter, layers=layers, p1=p1, p2=p2,
                         eps=eps, diag=DIAG, flow=FLOW, rel=REL, batch=BATCH, tdone=TDONE, x2=X2, pack=PACK, take=TAKE, ring=RING, pl=PL if layers == 1 else 0, tailn=TAILN, tailg=TAILG)
    src = "#include <ninfer/fixed_point.cuh>\n" + HELPERS + body
    cubin, _ = compile_cubin(src, "persist_mlp", "sm_90")
    mod = Module(cubin, dev.index or 0, "persist_mlp", pdl_arch="sm_90")
    kx = 128 if FLOW == 2 else h if FLOW else max(h, inter)
    xbytes = -(-(2 * kx + kx // 128 * 8) // 16) * 16  # the input form, then (FLOW) the warps' buffers, 16-byte aligned
    rest = CONSUMERS * (UG * 256 + UG * 8) if FLOW else 0  # FLOW: the warps' buffers
    smem = STAGES * UG * 1056 + xbytes + rest  # a stage: STAGE_BYTES, UG groups of codes (1024 B) and scales (32 B)
    mod["persist_mlp"].set_max_dynamic_smem(smem)
    return mod, smem, p1, p2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=64)
    ap.add_argument("--check-layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=5120)
    ap.add_argument("--inter", type=int, default=17408)
    args = ap.parse_args()
    import decode as dec
    from quant import random_quant

    from ninfer.backends import installed_backends
    from ninfer.kernels.ops import make_ops
    from ninfer.quant import gpu

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    sms = props.multi_processor_count
    bw = dec.copy_bandwidth()
    print(f"GPU: {props.name}, {sms} SMs, copy bandwidth {bw / 1e12:.2f} TB/s; ring {STAGES} x "
          f"{UG * 1024 + UG * 32} bytes, {CONSUMERS} consumer warps, units of up to {UG} groups", flush=True)
    H, I_, eps = args.hidden, args.inter, 1e-6
    ops = make_ops(installed_backends()["sm90"].kernels)
    torch.manual_seed(0)

    def make_layers(n):
        out = []
        for _ in range(n):
            gu = gpu.prepare(random_quant(2 * I_, H, 4, 128, device="cuda"))
            dn = gpu.prepare(random_quant(H, I_, 4, 128, device="cuda"))
            nw = (1 + 0.1 * torch.randn(H, device="cuda")).to(torch.bfloat16)
            out.append((gu, dn, nw))
        return out

    def table(ls):
        rows = [[gu.qweight.data_ptr(), gpu.tile_params(gu)[0].data_ptr(), dn.qweight.data_ptr(),
                 gpu.tile_params(dn)[0].data_ptr(), nw.data_ptr()] for gu, dn, nw in ls]
        return torch.tensor(rows, dtype=torch.int64, device=dev)

    fields = ("h", "xq2", "xg2", "ws1", "ws2", "tc2", "gc", "bar", "grab", "gflag", "xq1", "xg1", "ssg", "hc",
              "hflag", "copied", "tdone", "pk", "ring")  # the kernel's Work

    def work_bufs(p1, p2, n):  # the kernel's workspaces, forms and self-resetting counts (Work), but h and the zeroed
        # counts and flags; RING's records for n layers
        i32, z = torch.int32, torch.zeros
        return dict(xq2=z(2 * I_, dtype=torch.uint8, device=dev), xg2=z(I_ // 128, 2, dtype=i32, device=dev),
                    ws1=z(I_ // 16 * 2 * p1 * 16, device=dev), ws2=z(H // 16 * p2 * 16, device=dev),
                    tc2=z(H // 16, dtype=i32, device=dev), gc=z(I_ // 128, dtype=i32, device=dev),
                    xq1=z(2 * 2 * H, dtype=torch.uint8, device=dev), xg1=z(2 * (H // 128), 2, dtype=i32, device=dev),
                    pk=z(H, dtype=torch.int64, device=dev),
                    ring=z(max(n, 1) * sms * 5, dtype=torch.int64, device=dev), ssg=z(2 * (H // 128), device=dev),
                    hc=z(H // 128, dtype=i32, device=dev))

    def persistent(ls, h0):
        if PL:
            return per_layer(ls, h0)
        n = len(ls)
        mod, smem, p1, p2 = build(H, I_, n, eps, dev)
        tab = table(ls)
        bufs = dict(work_bufs(p1, p2, n), h=torch.zeros(2, H, dtype=torch.bfloat16, device=dev))
        ng2 = I_ // 128
        counts = torch.zeros(6 * n + ng2 + H // 128, dtype=torch.int32, device=dev)  # one zeroing a launch
        bufs["bar"], bufs["grab"], bufs["copied"] = counts[: 2 * n], counts[2 * n: 4 * n], counts[4 * n: 5 * n]
        bufs["tdone"] = counts[5 * n: 6 * n]
        bufs["gflag"], bufs["hflag"] = counts[6 * n: 6 * n + ng2], counts[6 * n + ng2:]
        wk = torch.tensor([bufs[f].data_ptr() for f in fields], dtype=torch.int64, device=dev)

        def run():
            bufs["h"][0].copy_(h0)
            counts.zero_()
            mod["persist_mlp"]((sms,), (32 * (CONSUMERS + 1),), tab, wk, smem=smem)
        run.ring = bufs["ring"]
        return run, bufs["h"][n & 1]

    def per_layer(ls, h0):  # PL: a launch a layer, each with its own counts and flags, the rows h[l] -> h[l + 1]
        n = len(ls)
        mod, smem, p1, p2 = build(H, I_, 1, eps, dev)
        tab = table(ls)
        hbuf = torch.zeros(n + 1, H, dtype=torch.bfloat16, device=dev)
        shared = work_bufs(p1, p2, 1)
        ng2, per = I_ // 128, 6 + I_ // 128 + H // 128
        counts = torch.zeros(n * per, dtype=torch.int32, device=dev)  # one zeroing for all the launches
        wks = []
        for i in range(n):
            c = counts[i * per: (i + 1) * per]
            b = dict(shared, h=hbuf[i:], bar=c[0:2], grab=c[2:4], copied=c[4:5], tdone=c[5:6], gflag=c[6: 6 + ng2],
                     hflag=c[6 + ng2:])
            wks.append(torch.tensor([b[f].data_ptr() for f in fields], dtype=torch.int64, device=dev))

        def run():
            counts.zero_()
            hbuf[0].copy_(h0)  # before the launches in stream order; PDL relaxes only a kernel-to-kernel edge
            for i in range(n):
                mod["persist_mlp"]((sms,), (32 * (CONSUMERS + 1),), tab[i:i + 1], wks[i], smem=smem)
        run.keep = shared  # the kernels reach these buffers only through wks' pointers: keep them alive
        return run, hbuf[n]

    def launches(ls, h0):
        x0 = torch.zeros(1, H, dtype=torch.bfloat16, device=dev)
        out = torch.empty(1, H, dtype=torch.bfloat16, device=dev)

        def run():
            x, r = x0, h0.view(1, H)
            for gu, dn, nw in ls:
                y, r = ops["add_rms_norm"](x, r, nw, eps, False, True)
                a = gpu.quant_linear_silu_mul(y, gu)
                x = gpu.quant_linear(a, dn)
            out.copy_(x + r)
        return run, out.view(H)

    def reference(ls, h0):  # float32, the weights dequantised; bf16 where today's kernels store a row
        h = h0.float()
        for gu, dn, nw in ls:
            x = (h * torch.rsqrt(h.pow(2).mean() + eps) * nw.float()).bfloat16().float()
            gup = gpu.dequantize_dense(gu, torch.float32) @ x
            gg, uu = gup[:I_].bfloat16().float(), gup[I_:].bfloat16().float()
            a = (torch.nn.functional.silu(gg) * uu).bfloat16().float()
            y = (gpu.dequantize_dense(dn, torch.float32) @ a).bfloat16().float()
            h = (y + h).bfloat16().float()
        return h

    # correctness: a few layers against today's launches and the float32 reference
    ls = make_layers(args.check_layers)
    h0 = torch.randn(H, device=dev).to(torch.bfloat16)
    runp, outp = persistent(ls, h0)
    runl, outl = launches(ls, h0)
    runp()
    runl()
    torch.cuda.synchronize()
    ref = reference(ls, h0)
    scale = ref.abs().max().item()
    ep = (outp.float() - ref).abs().max().item() / scale
    el = (outl.float() - ref).abs().max().item() / scale
    epl = (outp.float() - outl.float()).abs().max().item() / scale
    first = outp.clone()
    runp()
    torch.cuda.synchronize()
    same = torch.equal(first, outp)
    print(f"check, {args.check_layers} layers: max |err| / max |ref|: persistent {ep:.2e}, launches {el:.2e}, "
          f"persistent against launches {epl:.2e}; a second run {'the same' if same else 'DIFFERENT'}", flush=True)
    ok = ep < 2e-2 and epl < 2e-2
    print("CHECK", "PASSED" if ok else "FAILED", flush=True)
    del ls, runp, runl
    torch.cuda.empty_cache()

    ls = make_layers(args.layers)
    nbytes = sum(gu.qweight.numel() + gpu.tile_params(gu)[0].numel() * 4 + dn.qweight.numel()
                 + gpu.tile_params(dn)[0].numel() * 4 for gu, dn, _ in ls)
    runp, outp = persistent(ls, h0)
    runl, outl = launches(ls, h0)
    print(f"{args.layers} MLP blocks of H {H}, I {I_}, W4A16 g128: {nbytes / 1e9:.2f} GB of weights "
          f"({nbytes / bw * 1e6:.0f} us at copy bandwidth)", flush=True)
    for _rep in range(2):
        for name, fn in (("today's launches (add_rms_norm, qmv1sf, qmv1x), CUDA graph", runl),
                         ("persistent, a launch a layer (PDL)" if PL else "persistent, one launch", runp)):
            t = graph_us(lambda i, fn=fn: fn(), inner=1, reps=10, drop=1) / 1e6
            print(f"| {name} | {t * 1e6:.0f} us | {nbytes / t / 1e12:.2f} TB/s | {nbytes / t / bw:.3f} of copy |",
                  flush=True)
    if RING and FLOW == 1 and TDONE and not PL:  # the last run's records, layers 1 .. L - 1 (layer 0 has no boundary)
        r = runp.ring.view(args.layers, sms, 5)[1:].double().cpu()
        fb, fa = r[..., 0], r[..., 1]
        wait, form = (r[..., 3] - r[..., 2]) / 1e3, (r[..., 4] - r[..., 3]) / 1e3
        span = (r[..., 4].max(dim=1).values - r[..., 2].min(dim=1).values) / 1e3
        print(f"RING at gate_up's boundary, means over {args.layers - 1} layers x {sms} blocks: stages filled, not "
              f"multiplied: {fb.mean():.2f} as the wait begins (min {fb.min():.0f}, at {STAGES}: "
              f"{(fb >= STAGES).double().mean() * 100:.0f} %), {fa.mean():.2f} after the form (at {STAGES}: "
              f"{(fa >= STAGES).double().mean() * 100:.0f} %); wait {wait.mean():.2f} us (max {wait.max():.2f}), "
              f"norm and form {form.mean():.2f} us; first wait to last form a layer {span.mean():.2f} us", flush=True)


if __name__ == "__main__":
    main()
