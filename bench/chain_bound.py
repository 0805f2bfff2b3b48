"""How fast can a decode step's weight stream go, launched as today's separate kernels or as one persistent kernel?

Session 31 measured the 27B W4A16 decode's GEMV chain alone at 0.71 of the H200's copy bandwidth (226.6 tok/s with
the norms, attention and the recurrence launching nothing), against the 0.85 the 240 tok/s goal needs with today's
small ops. This benchmark asks what bounds the chain, with no GEMV work at all: it streams the bytes of every
weight of one decode step, in the model's order and sizes (the 27B W4A16 g128 and 8B W8A16 g128 of bench/quant.py,
int4 / int8 codes and fp16 group scales), each read once from memory and XORed, and times a CUDA graph of it:

  kernels:                  one PDL kernel a GEMV, its grid today's tiles (16 rows a block), each block reading its
                            rows' bytes (one load before the PDL wait, as the GEMVs do): today's launch structure.
  kernels + small ops:      the same with a one-block PDL kernel that waits and exits where each norm, recurrence
                            and attention kernel is launched today: the boundaries alone.
  persistent:               one kernel, one block an SM, every GEMV's bytes split evenly over the blocks; a producer
                            thread copies them into a ring of shared-memory stages (cp.async.bulk, mbarriers), running
                            ahead across GEMV boundaries (weights depend on nothing), and 7 consumer warps read each
                            stage. Where a GEMV needs the one before it, and at each small op, the consumers wait
                            at a grid barrier (a count in global memory), as a persistent decode step must.
  persistent + small ops:   the same, every block's consumers also held for S us at each small op (S = today's net
                            cost of the small ops a step, session 31, over their launches: --small-us).
  persistent, each GEMV's copies after its barrier: the producer starts a segment's copies only once its block
                            has passed the segment's grid barrier (no running ahead), as a separate launch's loads
                            come after its wait: the value of running ahead.
  persistent, no barriers:  one segment: the ring's own ceiling.
  persistent, units taken as they free (+ small ops / no barriers): the same three with each GEMV's bytes dealt in
                            units of U bytes (NINFER_CB_UNIT, default 16 KB) that each block's producer takes from a
                            count in global memory whenever its ring has room, instead of an even share a block: an
                            SM that streams faster takes more units, so a barrier waits only for the segment's last
                            units, not for the slowest SM's share (session 35: a reading of the even split's loss).
                            NINFER_CB_WORK=c: each consumer warp then waits c clock cycles a stage it read, a stand-in
                            for the GEMV's products (after it frees the slot, so the ring keeps streaming);
                            NINFER_CB_CONSUMERS: consumer warps a block (default 7). NINFER_CB_PRODUCTS=1 (int4) or
                            2 (int8): the consumers run the fixed-point GEMVs' IMMA products on each stage instead
                            (stand-in token, scales and sums: the instruction stream, not a result).

The persistent rows bound this form from above: real consumers do GEMV products, and the recurrence and attention
need memory of their own. (Session 34, on an H100: the separate launches streamed at 0.915 of copy bandwidth for the
27B, and the even-share persistent form was slower. Session 35: with 16 KB units dealt as rings free, 0.988 against
0.900-0.907 for the launches with a launch at each small op, and 0.929 with int4 products at 15 consumer warps:
bench/RESULTS.md.) Needs a GPU with sm_90 (cp.async.bulk); 14 GB of GPU memory for the 27B.

    python bench/chain_bound.py [--models 27B,8B] [--small-us 27B=2.25,8B=1.9]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import graph_us  # noqa: E402

# the persistent kernel's ring: NINFER_CB_RING="<stages>x<bytes a stage>" (default 12 x 16 KB, 192 KB an SM)
STAGES, STAGE_BYTES = (int(v) for v in os.environ.get("NINFER_CB_RING", "12x16384").split("x"))
UNIT = int(os.environ.get("NINFER_CB_UNIT", "16384"))  # bytes a unit of the dynamic rows (16 KB: the best, RESULTS)
CONSUMERS = int(os.environ.get("NINFER_CB_CONSUMERS", "7"))  # consumer warps a block of the persistent kernels
WORK = int(os.environ.get("NINFER_CB_WORK", "0"))  # clock cycles each consumer warp spins a stage it read (dynamic rows)
PRODUCTS = int(os.environ.get("NINFER_CB_PRODUCTS", "0"))  # the dynamic rows' consumers run IMMA products: 1 int4, 2 int8

# the persistent kernels' helpers: mbarriers, bulk copies, the IMMA (bench/persist_mlp.py takes them too)
HELPERS = r"""
// the int4 fixed-point products of ninfer's one-token GEMV (qgemv.cu qmv1f): a code word as two registers of bytes
// (rows g: w & 0x0F0F0F0F, rows g + 8: (w >> 4) & 0x0F0F0F0F), one IMMA m16n8k32 (u8 x s8) a 32-k half of a chunk
__device__ __forceinline__ void cb_imma(int (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                        unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned s32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mb_init(unsigned long long *b, unsigned n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(s32(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void mb_wait(unsigned long long *b, unsigned parity) {
    unsigned done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(s32(b)), "r"(parity) : "memory");
}
__device__ __forceinline__ void mb_arrive(unsigned long long *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(s32(b)) : "memory");
}
__device__ __forceinline__ void mb_expect(unsigned long long *b, unsigned tx) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(s32(b)), "r"(tx) : "memory");
}
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, unsigned n, unsigned long long *b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(s32(dst)), "l"(src), "r"(n), "r"(s32(b)) : "memory");
}
"""

# the separate launches are bench/pdl_handoff.py's kernels: stream_chunks (a GEMV-like read, one load before the PDL
# wait) and empty_kernel (a small op's launch with no work: wait, trigger, exit)
SOURCE = r"""
#define STAGES %(stages)d
#define STAGE_BYTES %(stage_bytes)d
#define CONSUMERS %(consumers)d
#define UNIT %(unit)dLL
#define WORK %(work)dLL
#define PRODUCTS %(products)d

struct Seg {
    long long off, share;  // the segment's first byte; each block's bytes (a multiple of 16)
    long long spin;        // clock cycles every block's consumers wait before the segment (a small op's work)
};

__device__ __forceinline__ void ring_init(unsigned long long *full, unsigned long long *empty) {  // thread 0
    for (int i = 0; i < STAGES; i++) {
        mb_init(&full[i], 1);
        mb_init(&empty[i], CONSUMERS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// the consumers' grid barrier (t: the thread's index among them): each block counts itself in *count, then waits
// until every block has
__device__ __forceinline__ void grid_barrier(unsigned *count, int t) {
    asm volatile("bar.sync 1, %%0;" ::"r"(CONSUMERS * 32) : "memory");
    if (t == 0) {
        asm volatile("red.release.gpu.global.add.u32 [%%0], 1;" ::"l"(count) : "memory");
        unsigned seen = 0;
        while (seen < gridDim.x)
            asm volatile("ld.acquire.gpu.global.u32 %%0, [%%1];" : "=r"(seen) : "l"(count) : "memory");
    }
    asm volatile("bar.sync 1, %%0;" ::"r"(CONSUMERS * 32) : "memory");
}
__device__ __forceinline__ void hold(long long cycles) {  // a small op's work: wait this many clock cycles
    const long long until = clock64() + cycles;
    while (clock64() < until) {
    }
}

// the whole step in one launch: warp 0's lane 0 streams every segment's share into the ring, the other warps read
// it; before each segment after the first, the consumers of every block meet at a grid barrier (count[s - 1])
extern "C" __global__ void __launch_bounds__(32 * (CONSUMERS + 1), 1) persist(const unsigned char *__restrict__ w,
        const Seg *__restrict__ segs, int nseg, unsigned *__restrict__ count, float *__restrict__ out, int ahead) {
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    __shared__ volatile int passed;  // the last segment whose grid barrier the consumers have passed
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    ninfer::pdl_wait();  // count's zeroing before this launch
    if (threadIdx.x == 0) {
        passed = 0;
        ring_init(full, empty);
    }
    __syncthreads();
    int stage = 0;
    unsigned phase = 0;
    if (warp == 0) {
        if (lane != 0) return;
        for (int s = 0; s < nseg; s++) {
            if (!ahead)  // no copy of segment s before its grid barrier, as separate launches load after their wait
                while (passed < s) {
                }
            const long long share = segs[s].share;
            const unsigned char *src = w + segs[s].off + (long long)blockIdx.x * share;
            for (long long o = 0; o < share; o += STAGE_BYTES) {
                const unsigned n = (unsigned)min((long long)STAGE_BYTES, share - o);
                mb_wait(&empty[stage], phase ^ 1);  // the consumers have read this stage's last fill
                mb_expect(&full[stage], n);
                bulk_copy(ring + stage * STAGE_BYTES, src + o, n, &full[stage]);
                if (++stage == STAGES) stage = 0, phase ^= 1;
            }
        }
        return;
    }
    unsigned acc = 0;
    const int t = threadIdx.x - 32;
    for (int s = 0; s < nseg; s++) {
        if (s > 0) {  // the grid barrier: every block has consumed segment s - 1
            grid_barrier(count + s - 1, t);
            if (t == 0) passed = s;
        }
        if (segs[s].spin) hold(segs[s].spin);
        const long long share = segs[s].share;
        for (long long o = 0; o < share; o += STAGE_BYTES) {
            const int n = (int)min((long long)STAGE_BYTES, share - o) / 16;
            mb_wait(&full[stage], phase);
            const uint4 *p = (const uint4 *)(ring + stage * STAGE_BYTES);
            for (int i = t; i < n; i += CONSUMERS * 32) {
                const uint4 v = p[i];
                acc ^= v.x ^ v.y ^ v.z ^ v.w;
            }
            __syncwarp();
            if (lane == 0) mb_arrive(&empty[stage]);
            if (++stage == STAGES) stage = 0, phase ^= 1;
        }
    }
    if (acc == 0x12345678u) out[blockIdx.x] = 1.f;
}

// persist with each segment's bytes (share = the segment's total here) dealt in units of UNIT bytes: the producer
// takes the next unit of segment s from grab[s] whenever it has room, copies it stage by stage (st_n: the stage's
// bytes), and ends its part of the segment with a stage of no bytes (st_n = -1); the consumers read stages until that
// one. The grid barrier before segment s is persist's: every block has read its part of segment s - 1.
extern "C" __global__ void __launch_bounds__(32 * (CONSUMERS + 1), 1) persist_dyn(const unsigned char *__restrict__ w,
        const Seg *__restrict__ segs, int nseg, unsigned *__restrict__ count, unsigned *__restrict__ grab,
        float *__restrict__ out) {
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    __shared__ int st_n[STAGES];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    ninfer::pdl_wait();  // count's and grab's zeroing before this launch
    if (threadIdx.x == 0) ring_init(full, empty);
    __syncthreads();
    int stage = 0;
    unsigned phase = 0;
    if (warp == 0) {
        if (lane != 0) return;
        for (int s = 0; s < nseg; s++) {
            const long long bytes = segs[s].share, units = (bytes + UNIT - 1) / UNIT;
            const unsigned char *src = w + segs[s].off;
            for (long long u = units ? atomicAdd(grab + s, 1u) : 0; u < units; u = atomicAdd(grab + s, 1u)) {
                const long long end = min(bytes, (u + 1) * UNIT);
                for (long long o = u * UNIT; o < end; o += STAGE_BYTES) {
                    const unsigned n = (unsigned)min((long long)STAGE_BYTES, end - o);
                    mb_wait(&empty[stage], phase ^ 1);
                    st_n[stage] = (int)n;
                    mb_expect(&full[stage], n);
                    bulk_copy(ring + stage * STAGE_BYTES, src + o, n, &full[stage]);
                    if (++stage == STAGES) stage = 0, phase ^= 1;
                }
            }
            mb_wait(&empty[stage], phase ^ 1);  // this block's part of segment s is all in the ring
            st_n[stage] = -1;
            mb_arrive(&full[stage]);
            if (++stage == STAGES) stage = 0, phase ^= 1;
        }
        return;
    }
    unsigned acc = 0;
    const int t = threadIdx.x - 32;
#if PRODUCTS
    // the token's fixed-point form and the group scales the products read (stand-ins: any values serve the timing)
    __shared__ uint4 tok[256];
    __shared__ float gsc[64];
    for (int i = t; i < 256; i += CONSUMERS * 32) tok[i] = make_uint4(0x01020304u * i, 0x05060708u + i, 3u * i, 7u + i);
    if (t < 64) gsc[t] = 1.f / (1 + t);
    asm volatile("bar.sync 1, %%0;" ::"r"(CONSUMERS * 32) : "memory");
    float acc0 = 0.f, acc2 = 0.f;
    const int cw = t >> 5, cl = t & 31, ct = cl & 3;
#endif
    for (int s = 0; s < nseg; s++) {
        if (s > 0) grid_barrier(count + s - 1, t);
        if (segs[s].spin) hold(segs[s].spin);
        for (;;) {
            mb_wait(&full[stage], phase);
            const int n = st_n[stage];
            const uint4 *p = (const uint4 *)(ring + stage * STAGE_BYTES);
#if PRODUCTS
            // each warp takes whole 512-byte chunks (16 rows x 64 k of int4 codes): a lane's 16 bytes, the token's
            // form for its 64 k (one 16-byte load), two IMMAs, the sums folded into float32 with the group's scale
            for (int c = cw; c < n / 512; c += CONSUMERS) {
                const uint4 v = p[c * 32 + cl];
                const uint4 xb = tok[(c * 4 + ct) & 255];
                int d[4] = {0, 0, 0, 0};
#if PRODUCTS == 2  // int8 (qgemv.cu FIX8): a chunk is 16 rows x 32 k, one PRMT a register and one IMMA, no dequantisation
                cb_imma(d, __byte_perm(v.x, v.y, 0x5140), __byte_perm(v.x, v.y, 0x7362), __byte_perm(v.z, v.w, 0x5140),
                        __byte_perm(v.z, v.w, 0x7362), xb.x ^ xb.z, xb.y ^ xb.w);
#else
                const unsigned M = 0x0F0F0F0Fu;
                cb_imma(d, v.x & M, (v.x >> 4) & M, v.y & M, (v.y >> 4) & M, xb.x, xb.y);
                cb_imma(d, v.z & M, (v.z >> 4) & M, v.w & M, (v.w >> 4) & M, xb.z, xb.w);
#endif
                const float sc = gsc[(c + cl) & 63];
                acc0 = fmaf(sc, (float)(d[0] * 256 + d[1]), acc0);
                acc2 = fmaf(sc, (float)(d[2] * 256 + d[3]), acc2);
            }
#else
            for (int i = t; i < n / 16; i += CONSUMERS * 32) {
                const uint4 v = p[i];
                acc ^= v.x ^ v.y ^ v.z ^ v.w;
            }
#endif
            __syncwarp();
            if (lane == 0) mb_arrive(&empty[stage]);
            if (++stage == STAGES) stage = 0, phase ^= 1;
            if (n < 0) break;
            if (WORK) hold(WORK);  // the stage's products, as a wait after its slot is freed (NINFER_CB_WORK)
        }
    }
#if PRODUCTS
    acc ^= __float_as_uint(acc0 + acc2);
#endif
    if (acc == 0x12345678u) out[blockIdx.x] = 1.f;
}
"""


def gemv(rows: int, cols: int, bits: int, group: int = 128) -> tuple[int, int]:
    """(bytes, tiles) of one grouped-int linear: codes and fp16 scales; one block a 16-row tile."""
    return rows * cols * bits // 8 + rows * (cols // group) * 2, rows // 16


def step_plan(model: str) -> list[tuple[str, int, int]]:
    """One decode step in launch order: ("gemv", bytes, tiles) and ("small", 0, 0) for a norm / recurrence /
    attention kernel (bench/quant.py's shapes; the 27B's attention in 3 launches: split, combine, RoPE + KV write)."""
    plan = []
    small = ("small", 0, 0)
    if model == "27B":
        h, inter, bits = 5120, 17408, 4
        for layer in range(64):
            plan.append(small)  # input norm
            if layer % 4 == 3:  # full attention: q (with its gate), k, v; attention; o
                plan += [("gemv", *gemv(2 * 24 * 256 + 2 * 4 * 256, h, bits)), small, small, small,
                         ("gemv", *gemv(h, 24 * 256, bits))]
            else:  # Gated DeltaNet: in_proj (q, k, v, z, b, a) with the conv and gates; the recurrence; out_proj
                plan += [("gemv", *gemv(2 * 16 * 128 + 2 * 48 * 128 + 2 * 48, h, bits)), small,
                         ("gemv", *gemv(h, 48 * 128, bits))]
            plan += [small, ("gemv", *gemv(2 * inter, h, bits)), ("gemv", *gemv(h, inter, bits))]
        plan += [small, ("gemv", *gemv(248320, h, 4))]
    else:
        h, inter, bits = 4096, 14336, 8
        for _ in range(32):
            plan += [small, ("gemv", *gemv(4096 + 2 * 1024, h, bits)), small, small, small,
                     ("gemv", *gemv(h, 4096, bits)), small, ("gemv", *gemv(2 * inter, h, bits)),
                     ("gemv", *gemv(h, inter, bits))]
        plan += [small, ("gemv", *gemv(128256, h, 8))]
    return plan


def segments(plan, offs, total: int, share, barriers: bool, cycles: int) -> list[tuple[int, int, int]]:
    """The persistent kernels' segment table, (first byte, bytes, clock cycles held): one segment of share(total)
    bytes without barriers; else a segment a GEMV (its weight's share(bytes)) and a held one a small op."""
    if not barriers:
        return [(0, share(total), 0)]
    segs, k = [], 0
    for kind, b, _ in plan:
        if kind == "small":
            segs.append((0, 0, cycles))
            continue
        segs.append((offs[k], share(b), 0))
        k += 1
    return segs


def bench_model(model, mod, dev, sms, bw, clock_ghz, spin_us):
    """Print the rows of one model's step."""
    ring = STAGES * STAGE_BYTES
    plan = step_plan(model)
    gemvs = [(b, t) for kind, b, t in plan if kind == "gemv"]
    total = sum(b for b, _ in gemvs)
    buf = torch.empty(total + 4096, dtype=torch.uint8, device=dev)
    buf[: total // 4 * 4].view(torch.int32).random_()
    out = torch.zeros(max(t for _, t in gemvs) + 2, device=dev)
    offs, o = [], 0
    for b, _ in gemvs:
        offs.append(o)
        o += b
    n_small = sum(kind == "small" for kind, _, _ in plan)
    print(f"\n{model}: {len(gemvs)} GEMVs, {total / 1e9:.2f} GB a step ({total / bw * 1e6:.0f} us at copy "
          f"bandwidth, {bw / total:.1f} tok/s); {n_small} small-op launches", flush=True)

    def kernels(with_small: bool):
        def run():
            k = 0
            for kind, b, t in plan:
                if kind == "small":
                    if with_small:
                        mod["empty_kernel"]((1,), (32,), out)
                    continue
                mod["stream_chunks"]((t,), (256,), buf[offs[k]:], ctypes.c_longlong(b // t // 16), out)
                k += 1
        return run

    def persistent(barriers: bool, spin: float, ahead: bool = True):
        segs = segments(plan, offs, total, lambda b: b // sms // 16 * 16, barriers, int(spin * 1e3 * clock_ghz))
        table = torch.tensor(segs, dtype=torch.int64, device=dev)
        count = torch.zeros(len(segs), dtype=torch.int32, device=dev)

        def run():
            count.zero_()
            mod["persist"]((sms,), (32 * (CONSUMERS + 1),), buf, table, len(segs), count, out, int(ahead), smem=ring)
        return run, sum(s[1] for s in segs) * sms, len(segs)

    def dynamic(barriers: bool, spin: float):
        segs = segments(plan, offs, total, lambda b: b // 16 * 16, barriers, int(spin * 1e3 * clock_ghz))
        table = torch.tensor(segs, dtype=torch.int64, device=dev)
        count = torch.zeros(2 * len(segs), dtype=torch.int32, device=dev)  # the barriers' counts, then grab

        def run():
            count.zero_()
            mod["persist_dyn"]((sms,), (32 * (CONSUMERS + 1),), buf, table, len(segs), count, count[len(segs):],
                               out, smem=ring)
        return run, sum(s[1] for s in segs), len(segs)

    rows = [("kernels (today's launches, GEMVs only)", kernels(False), total),
            ("kernels + small ops (a one-block launch at each)", kernels(True), total)]
    run, streamed, n = persistent(True, 0.0)
    rows.append((f"persistent ({n - 1} grid barriers)", run, streamed))
    run, streamed, n = persistent(True, spin_us)
    rows.append((f"persistent + small ops ({spin_us} us each)", run, streamed))
    run, streamed, n = persistent(True, 0.0, ahead=False)
    rows.append(("persistent, each GEMV's copies after its barrier", run, streamed))
    run, streamed, _ = persistent(False, 0.0)
    rows.append(("persistent, no barriers", run, streamed))
    run, streamed, n = dynamic(True, 0.0)
    rows.append((f"persistent, {UNIT // 1024} KB units taken as they free ({n - 1} grid barriers)", run, streamed))
    run, streamed, n = dynamic(True, spin_us)
    rows.append((f"the same + small ops ({spin_us} us each)", run, streamed))
    run, streamed, _ = dynamic(False, 0.0)
    rows.append(("the same, no barriers", run, streamed))
    for name, fn, nbytes in rows:
        t = graph_us(lambda i, fn=fn: fn(), inner=1, reps=10, drop=1) / 1e6
        print(f"| {model} | {name} | {t * 1e6:.0f} us | {1 / t:.1f} tok/s | {nbytes / t / 1e12:.2f} TB/s "
              f"({nbytes / t / bw:.3f} of copy) |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="27B,8B")
    ap.add_argument("--small-us", default="27B=2.25,8B=1.9",
                    help="us each small op holds every block in the 'persistent + small ops' row")
    args = ap.parse_args()
    import decode as dec

    from ninfer.kernels.launch import Module
    from ninfer.kernels.nvrtc import compile_cubin

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    sms = props.multi_processor_count
    bw = dec.copy_bandwidth()
    print(f"GPU: {props.name}, {sms} SMs, copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    from pdl_handoff import SOURCE as HANDOFF

    src = HANDOFF + HELPERS + SOURCE % dict(stages=STAGES, stage_bytes=STAGE_BYTES, consumers=CONSUMERS, unit=UNIT,
                                  work=WORK, products=PRODUCTS)
    cubin, _ = compile_cubin(src, "chain_bound", "sm_90")
    mod = Module(cubin, dev.index or 0, "chain_bound", pdl_arch="sm_90")
    mod["persist"].set_max_dynamic_smem(STAGES * STAGE_BYTES)
    mod["persist_dyn"].set_max_dynamic_smem(STAGES * STAGE_BYTES)
    small_us = dict(kv.split("=") for kv in args.small_us.split(","))
    clock_ghz = props.clock_rate / 1e6 if getattr(props, "clock_rate", 0) else 1.98  # kHz; the spins' clock
    print(f"small ops' spin counted at {clock_ghz:.2f} GHz; the persistent kernel's ring {STAGES} x {STAGE_BYTES} "
          f"bytes, {CONSUMERS} consumer warps; the dynamic rows' units {UNIT} bytes, {WORK} cycles a stage a consumer "
          f"warp{('', ', int4 IMMA products', ', int8 IMMA products')[PRODUCTS]}", flush=True)
    for model in args.models.split(","):
        bench_model(model, mod, dev, sms, bw, clock_ghz, float(small_us.get(model, 0)))


if __name__ == "__main__":
    main()
